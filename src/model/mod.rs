//! The mesh model: what the manifests mean once Istio acts on them. Label matching
//! and injection are computed here, once and indexed, so the policies stay short.

mod ambient;
mod authz;
pub mod coverage;
mod labels;
mod mtls;
mod namespaces;
mod scale;
mod selectors;
mod services;
pub mod traffic;
mod vm;
mod workloads;

use crate::config::MeshConfig;
use crate::manifest::Resource;
use foldhash::HashMap;
use labels::{Labels, LabelsExt};
use serde::Serialize;
use std::collections::BTreeMap;

pub use ambient::{TargetRef, Waypoint, WaypointBinding, ZtunnelAuthz, ZtunnelRule};
pub use authz::{AuthzMatch, Identity};
pub use labels::address_problem;
use mtls::{apply_mtls, narrow_mesh_scope, peer_authn_of};
pub use scale::{Autoscaler, ProxyRequests};
use selectors::{selectors_of, Index};
pub use services::{CallRef, Service};
pub use vm::WorkloadGroup;
use workloads::{is_hook, pod_template, workload_entry_of, workload_of, WORKLOAD_KINDS};

#[derive(Debug, Clone, Serialize, Default)]
pub struct Model {
    pub namespaces: BTreeMap<String, Namespace>,
    pub workloads: Vec<Workload>,
    pub workload_entries: Vec<WorkloadEntry>,
    pub selectors: Vec<Selector>,
    pub peer_authentications: Vec<PeerAuthn>,
    /// `ns/sa` → ids of what runs as it.
    pub service_accounts: BTreeMap<String, Vec<String>>,
    /// Ids of workloads base holds too, a copy of which runs as a service account no
    /// copy in base ran as: they present a new identity. Relative to base, like
    /// `Workload::pending_rollout`; empty without one (and in base's own model).
    pub service_account_changed: Vec<String>,
    /// scope key → effective mode.
    pub mtls_scopes: BTreeMap<String, String>,
    pub workload_groups: Vec<WorkloadGroup>,
    /// Kubernetes Services, with what their selectors select. Not in the policy input
    /// (no policy needs it, and it is large): the change report uses it.
    #[serde(skip)]
    pub services: Vec<Service>,
    /// `ns/sa` → the identity it presents and the AuthorizationPolicies naming it.
    pub identities: BTreeMap<String, Identity>,
    /// Gateway API Gateways that can serve as waypoints (class `istio-waypoint`, and
    /// any other a `istio.io/use-waypoint` label names).
    pub waypoints: Vec<Waypoint>,
    /// Every `istio.io/use-waypoint` label, resolved as istiod binds it.
    pub waypoint_bindings: Vec<WaypointBinding>,
    /// Services and ServiceEntries a waypoint serves.
    pub waypoint_services: Vec<WaypointService>,
    /// AuthorizationPolicies without targetRefs that cover ambient workloads: what
    /// ztunnel, which sees no HTTP, enforces of them.
    pub ztunnel_authz: Vec<ZtunnelAuthz>,
    /// targetRefs of AuthorizationPolicy, RequestAuthentication, Telemetry and
    /// WasmPlugin, and whether a waypoint serves what each names.
    pub target_refs: Vec<TargetRef>,
    /// Routes, DestinationRules, gateways and the Services behind them.
    pub traffic: traffic::Traffic,
}

/// A Service or ServiceEntry a waypoint serves.
#[derive(Debug, Clone, Serialize)]
pub struct WaypointService {
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The waypoint Gateway's id.
    pub waypoint: String,
    /// `istio.io/ingress-use-waypoint`: ingress gateways send through the waypoint
    /// instead of straight to the pods.
    pub ingress_use_waypoint: bool,
    /// Workloads its selector selects.
    pub selects: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Namespace {
    pub name: String,
    /// A Namespace object of the tree declares it.
    pub declared: bool,
    pub resource: Option<String>,
    /// Whether the repository says what its labels are (see [`namespaces`]); when not,
    /// `labels` is empty and `injection.enabled` is None: unknown, not "no labels".
    pub labels_known: bool,
    /// Who says: `namespace` (its Namespace object), `argocd` (managedNamespaceMetadata),
    /// `config` (mesh.namespaces); None when unknown.
    pub labels_from: Option<String>,
    /// The object and field that set its labels, for findings about them.
    pub labels_resource: Option<String>,
    pub labels_path: Vec<String>,
    /// Why the labels are unknown, for messages.
    pub unknown_reason: Option<String>,
    pub labels: Labels,
    pub injection: Injection,
    /// `istio.io/dataplane-mode=ambient`: ztunnel captures its pods (None when its
    /// labels are unknown).
    pub ambient: Option<bool>,
    pub mtls: NamespaceMtls,
    pub workloads: usize,
    pub workloads_with_proxy: usize,
    /// Workloads ztunnel captures, and of those the ones a waypoint serves.
    pub workloads_ambient: usize,
    pub workloads_waypoint: usize,
    /// Workloads whose proxy depends on labels it is unknown whether it has.
    pub workloads_proxy_unknown: usize,
    /// The service accounts something here runs as (workloads, WorkloadEntries,
    /// WorkloadGroups), sorted: the keys of `Model::service_accounts` in it.
    pub service_accounts: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Injection {
    /// Whether pods created here get a sidecar; None when its labels are unknown.
    pub enabled: Option<bool>,
    pub via: Option<String>,
    pub revision: Option<String>,
    pub explicitly_disabled: bool,
    pub conflict: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NamespaceMtls {
    pub mode: String,
    pub source: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Workload {
    pub id: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub labels: Labels,
    pub annotations: Labels,
    pub service_account: String,
    pub replicas: Option<i64>,
    /// It will run with an Istio proxy (false also when that is unknown: see `proxy_known`).
    pub proxy: bool,
    /// False when whether it gets a proxy depends on labels of a namespace the
    /// repository does not declare.
    pub proxy_known: bool,
    pub proxy_reason: String,
    /// What gives it a proxy: `namespace-label` (istio-injection), `namespace-revision`
    /// (istio.io/rev on the namespace), `pod-opt-in` (sidecar.istio.io/inject: "true"),
    /// `pod-revision` (istio.io/rev on the pod), `template` (istio-proxy already in the
    /// pod spec); None without a proxy.
    pub proxy_via: Option<String>,
    /// Its data plane: `sidecar`, `ambient` (ztunnel), `none`, or `unknown` (its
    /// namespace's labels decide, and they are unknown).
    pub dataplane: String,
    pub dataplane_reason: String,
    /// Captured by ztunnel (L4 mTLS and authorization, no HTTP).
    pub ambient: bool,
    /// Both a sidecar and ambient are asked for; the sidecar wins.
    pub dataplane_conflict: Option<String>,
    /// The waypoint (Gateway id) for traffic addressed to its pods.
    pub waypoint: Option<String>,
    /// Waypoints of the Services that select it (traffic addressed to them).
    pub service_waypoints: Vec<String>,
    pub opted_out: bool,
    pub host_network: bool,
    pub native_sidecar: bool,
    /// Injection applies to it now, but its running pods predate that (see [`build`]).
    pub pending_rollout: bool,
    pub template_hash: String,
    /// The HorizontalPodAutoscaler that scales it, if any.
    pub autoscaler: Option<Autoscaler>,
    /// What one of its proxies requests (annotations, else the configured defaults).
    pub proxy_requests: ProxyRequests,
    /// Kubernetes Services its containers name in env values, args or command (for
    /// the change report; not in the policy input).
    #[serde(skip)]
    pub calls: Vec<CallRef>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadEntry {
    pub id: String,
    pub namespace: String,
    pub name: String,
    pub labels: Labels,
    pub metadata_labels: Labels,
    pub spec_labels: Labels,
    pub address: Option<String>,
    pub network: Option<String>,
    pub address_problem: Option<String>,
    pub service_account: Option<String>,
    pub selected_by: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InvalidLabel {
    pub key: String,
    pub value: String,
    pub problem: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Selector {
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    pub path: Vec<String>,
    pub scope: String,
    pub labels: Option<Labels>,
    pub counts: String,
    pub matches: Vec<String>,
    pub match_count: usize,
    /// Workloads the labels match whose proxy is unknown (counted neither way).
    pub unknown_matches: Vec<String>,
    pub spec_only_matches: Vec<String>,
    pub workload_entry_matches: usize,
    /// Ambient workloads the selector picks that a policy of this kind does not reach
    /// (only ztunnel runs there, and it takes AuthorizationPolicy and
    /// PeerAuthentication only); for those two kinds they are in `matches`.
    pub ambient_matches: Vec<String>,
    pub invalid: Vec<InvalidLabel>,
    /// ServiceEntries only: WorkloadGroups whose VMs it will select once they register.
    pub workload_groups: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PeerAuthn {
    pub resource: String,
    pub namespace: String,
    pub scope: String,
    pub scope_key: String,
    pub mode: String,
    pub port_modes: BTreeMap<String, String>,
    pub strict: bool,
    pub workloads: Vec<String>,
    /// Covered workloads enforcing nothing: no sidecar, not captured by ztunnel.
    pub unproxied: Vec<String>,
    /// Covered workloads of which it is unknown whether they have a proxy.
    pub proxy_unknown: Vec<String>,
    /// Covered workloads ztunnel captures.
    pub ambient: Vec<String>,
}

fn is_istio(r: &Resource) -> bool {
    r.api_version.contains("istio.io/")
}

/// Builds the model of a revision. With the base revision's model, a workload whose
/// namespace gained injection in this change but whose pod template did not change
/// is modelled as it will really run: its existing pods keep running without a proxy.
pub fn build(resources: &[Resource], mesh: &MeshConfig, base: Option<&Model>) -> Model {
    build_with(resources, mesh, base, &[])
}

/// A workload that gains a proxy by its namespace's label alone: its pods, created
/// before, keep running without one until they are recreated. Only against a base
/// known to be without a proxy: a namespace that was not declared in base may have
/// been injected all along.
fn pending_rollout(w: &Workload, before: &Workload) -> bool {
    w.proxy && !before.proxy && before.proxy_known && before.template_hash == w.template_hash
}

/// Whether `head`, built without a base, is what `build_with` gives against `base`:
/// base changes a model only through workloads whose rollout is pending.
pub fn same_against(head: &Model, base: &Model) -> bool {
    let before: HashMap<&str, &Workload> =
        base.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    !head.workloads.iter().any(|w| {
        before
            .get(w.id.as_str())
            .is_some_and(|b| pending_rollout(w, b))
    })
}

/// `head`'s `service_account_changed` against `base`: the ids of workloads base holds
/// whose [id, service account] pair in head base does not have.
pub fn service_account_changed(head: &Model, base: &Model) -> Vec<String> {
    let pairs: foldhash::HashSet<(&str, &str)> = base
        .workloads
        .iter()
        .map(|w| (w.id.as_str(), w.service_account.as_str()))
        .collect();
    let ids: foldhash::HashSet<&str> = pairs.iter().map(|(id, _)| *id).collect();
    let mut changed: Vec<String> = head
        .workloads
        .iter()
        .filter(|w| {
            ids.contains(w.id.as_str())
                && !pairs.contains(&(w.id.as_str(), w.service_account.as_str()))
        })
        .map(|w| w.id.clone())
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

/// [`build`], with the namespace labels app objects set (from the render plan).
pub fn build_with(
    resources: &[Resource],
    mesh: &MeshConfig,
    base: Option<&Model>,
    app_labels: &[crate::render::AppNamespaceLabels],
) -> Model {
    let mut model = Model::default();

    // Namespaces: declared ones first, then those app objects label, then every
    // namespace a resource lives in (labelled by mesh.namespaces, else unknown).
    for r in resources
        .iter()
        .filter(|r| r.kind == "Namespace" && r.api_version == "v1")
    {
        let labels = r.labels().map(Labels::from_json).unwrap_or_default();
        model
            .namespaces
            .insert(r.name.clone(), namespaces::declared(&r.name, &r.id, labels));
    }
    for ns in namespaces::from_apps(app_labels, &model.namespaces) {
        model.namespaces.insert(ns.name.clone(), ns);
    }
    for r in resources {
        if let Some(ns) = &r.namespace {
            if !model.namespaces.contains_key(ns) {
                model
                    .namespaces
                    .insert(ns.clone(), namespaces::used(ns, mesh));
            }
        }
    }

    for ns in model.namespaces.values_mut() {
        ns.ambient = ambient::namespace_ambient(ns);
    }

    let autoscalers = scale::autoscalers(resources);
    let base_workloads: HashMap<&str, &Workload> = base
        .map(|b| b.workloads.iter().map(|w| (w.id.as_str(), w)).collect())
        .unwrap_or_default();
    for r in resources
        .iter()
        .filter(|r| WORKLOAD_KINDS.contains(&r.kind.as_str()) && !is_hook(r))
    {
        if let Some(mut w) = workload_of(r, &model.namespaces) {
            w.autoscaler = autoscalers
                .get(&(w.namespace.clone(), w.kind.clone(), w.name.clone()))
                .cloned();
            w.proxy_requests = scale::proxy_requests(&w.annotations, mesh);
            if let Some(before) = base_workloads.get(w.id.as_str()) {
                if pending_rollout(&w, before) {
                    w.proxy = false;
                    w.pending_rollout = true;
                    w.proxy_reason = format!(
                        "{}, but its pod template is unchanged: pods created before the label keep running without a proxy until they are recreated",
                        w.proxy_reason
                    );
                }
            }
            let ns = model.namespaces.get(&w.namespace);
            ambient::capture(&mut w, ns);
            model.workloads.push(w);
        }
    }
    model.waypoints = ambient::waypoints(resources, mesh);
    model.waypoint_bindings = ambient::bindings(
        resources,
        &model.workloads,
        &model.namespaces,
        &model.waypoints,
    );
    let lookup = ambient::WaypointLookup::new(&model.waypoint_bindings, &model.waypoints);
    for w in &mut model.workloads {
        if w.ambient {
            w.waypoint = ambient::waypoint_of(
                &w.labels,
                &w.id,
                model.namespaces.get(&w.namespace),
                "workload",
                &lookup,
            );
        }
    }
    for w in &model.workloads {
        if let Some(ns) = model.namespaces.get_mut(&w.namespace) {
            ns.workloads += 1;
            if w.proxy {
                ns.workloads_with_proxy += 1;
            }
            if !w.proxy_known {
                ns.workloads_proxy_unknown += 1;
            }
            if w.ambient {
                ns.workloads_ambient += 1;
            }
        }
        model
            .service_accounts
            .entry(format!("{}/{}", w.namespace, w.service_account))
            .or_default()
            .push(w.id.clone());
    }

    for r in resources
        .iter()
        .filter(|r| r.kind == "WorkloadEntry" && is_istio(r))
    {
        model.workload_entries.push(workload_entry_of(r));
    }
    for we in &model.workload_entries {
        if let Some(sa) = &we.service_account {
            model
                .service_accounts
                .entry(format!("{}/{}", we.namespace, sa))
                .or_default()
                .push(we.id.clone());
        }
    }
    model.workload_groups = resources
        .iter()
        .filter(|r| r.kind == "WorkloadGroup" && is_istio(r))
        .filter_map(vm::group_of)
        .collect();
    // VMs of a group run as its service account (`default` when unset, as istioctl).
    for g in &model.workload_groups {
        model
            .service_accounts
            .entry(format!("{}/{}", g.namespace, g.service_account))
            .or_default()
            .push(g.id.clone());
    }

    for key in model.service_accounts.keys() {
        let Some((ns, sa)) = key.split_once('/') else {
            continue;
        };
        if let Some(n) = model.namespaces.get_mut(ns) {
            // Keys are sorted, so each namespace's are too.
            n.service_accounts.push(sa.to_string());
        }
    }

    let (selectors, pas) = {
        let index = Index::new(&model);
        let mut selectors = Vec::new();
        for r in resources.iter().filter(|r| is_istio(r)) {
            selectors.extend(selectors_of(r, &index, mesh));
        }
        let mut pas: Vec<PeerAuthn> = resources
            .iter()
            .filter(|r| r.kind == "PeerAuthentication" && is_istio(r))
            .map(|r| peer_authn_of(r, &index, mesh))
            .collect();
        narrow_mesh_scope(&mut pas, &index, mesh);
        (selectors, pas)
    };
    // Record which ServiceEntries select each WorkloadEntry.
    let mut selected_by: HashMap<String, Vec<String>> = HashMap::default();
    for s in selectors.iter().filter(|s| s.kind == "ServiceEntry") {
        for m in &s.matches {
            selected_by
                .entry(m.clone())
                .or_default()
                .push(s.resource.clone());
        }
    }
    for we in &mut model.workload_entries {
        if let Some(by) = selected_by.remove(&we.id) {
            we.selected_by = by;
        }
    }
    model.selectors = selectors;
    apply_mtls(&mut model, &pas, mesh);
    model.peer_authentications = pas;

    model.services = services::services_of(resources, &model.workloads, &model.workload_entries);
    vm::link(
        &mut model.workload_groups,
        &mut model.selectors,
        &model.services,
    );
    {
        let index = services::ServiceIndex::new(&model.services);
        let calls: HashMap<String, Vec<CallRef>> = resources
            .iter()
            .filter(|r| WORKLOAD_KINDS.contains(&r.kind.as_str()))
            .filter_map(|r| {
                let ns = r.namespace.as_deref()?;
                let calls = services::calls_of(pod_template(r)?, ns, &index);
                (!calls.is_empty()).then(|| (r.id.clone(), calls))
            })
            .collect();
        for w in &mut model.workloads {
            if let Some(c) = calls.get(&w.id) {
                w.calls = c.clone();
            }
        }
    }
    ambient_services(&mut model, resources);
    {
        let index = Index::new(&model);
        model.ztunnel_authz = resources
            .iter()
            .filter(|r| r.kind == "AuthorizationPolicy" && is_istio(r))
            .filter_map(|r| {
                let ns = r.namespace.as_deref()?;
                let selector = selectors::labels_at(&r.body, &["spec", "selector", "matchLabels"])
                    .filter(|l| !l.is_empty());
                // ztunnel matches a selector in the policy's own namespace only; a
                // selector-less policy of the root namespace is mesh-wide.
                let covered: Vec<&Workload> = match &selector {
                    Some(sel) => index
                        .workloads
                        .get(ns)
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .copied()
                        .filter(|w| w.labels.selected_by(sel))
                        .collect(),
                    None => index.workloads_for(ns, mesh).to_vec(),
                };
                ambient::ztunnel_authz(r, &covered)
            })
            .collect();
        // The first waypoint serving each Service or ServiceEntry, by its id.
        let mut served_by: HashMap<&str, &str> = HashMap::default();
        for s in &model.waypoint_services {
            served_by
                .entry(s.resource.as_str())
                .or_insert(s.waypoint.as_str());
        }
        let by_target: HashMap<(String, String, String), Option<String>> = resources
            .iter()
            .filter(|r| {
                (r.kind == "Service" && r.api_version == "v1")
                    || (r.kind == "ServiceEntry" && is_istio(r))
            })
            .filter_map(|r| {
                let ns = r.namespace.clone()?;
                let waypoint = served_by.get(r.id.as_str()).map(|w| w.to_string());
                Some(((r.kind.clone(), ns, r.name.clone()), waypoint))
            })
            .collect();
        model.target_refs = resources
            .iter()
            .filter(|r| {
                is_istio(r)
                    && matches!(
                        r.kind.as_str(),
                        "AuthorizationPolicy"
                            | "RequestAuthentication"
                            | "Telemetry"
                            | "WasmPlugin"
                    )
            })
            .flat_map(|r| ambient::target_refs(r, &model.waypoints, &by_target))
            .collect();
    }
    model.identities = authz::identities(resources, &model.service_accounts, mesh);
    model.traffic = traffic::build(resources, &model, mesh);
    if let Some(base) = base {
        model.service_account_changed = service_account_changed(&model, base);
    }
    model
}

/// Services and ServiceEntries a waypoint serves, the workloads behind them, and
/// how many ambient workloads of each namespace a waypoint serves.
fn ambient_services(model: &mut Model, resources: &[Resource]) {
    let selects: HashMap<&str, &Vec<String>> = model
        .services
        .iter()
        .map(|s| (s.id.as_str(), &s.selects))
        .collect();
    let lookup = ambient::WaypointLookup::new(&model.waypoint_bindings, &model.waypoints);
    let mut served = Vec::new();
    // A Service defined twice (manifest/duplicate-resource) is served once: the first.
    let mut seen = foldhash::HashSet::default();
    for r in resources.iter().filter(|r| {
        ((r.kind == "Service" && r.api_version == "v1")
            || (r.kind == "ServiceEntry" && is_istio(r)))
            && seen.insert(r.id.as_str())
    }) {
        let Some(ns) = r.namespace.as_deref() else {
            continue;
        };
        let labels = r.labels().map(Labels::from_json).unwrap_or_default();
        let namespace = model.namespaces.get(ns);
        let Some(waypoint) = ambient::waypoint_of(&labels, &r.id, namespace, "service", &lookup)
        else {
            continue;
        };
        served.push(WaypointService {
            resource: r.id.clone(),
            kind: r.kind.clone(),
            namespace: ns.to_string(),
            name: r.name.clone(),
            waypoint,
            ingress_use_waypoint: ambient::ingress_uses_waypoint(&labels, namespace),
            selects: selects
                .get(r.id.as_str())
                .map(|v| v.to_vec())
                .unwrap_or_default(),
        });
    }
    let mut by_workload: HashMap<&str, Vec<String>> = HashMap::default();
    for s in &served {
        for id in &s.selects {
            by_workload
                .entry(id.as_str())
                .or_default()
                .push(s.waypoint.clone());
        }
    }
    for w in &mut model.workloads {
        if let Some(ws) = by_workload.remove(w.id.as_str()) {
            w.service_waypoints = ws;
            w.service_waypoints.sort();
            w.service_waypoints.dedup();
        }
        if w.ambient && (w.waypoint.is_some() || !w.service_waypoints.is_empty()) {
            if let Some(ns) = model.namespaces.get_mut(&w.namespace) {
                ns.workloads_waypoint += 1;
            }
        }
    }
    model.waypoint_services = served;
}

/// Namespaces that are never part of the mesh: Istio never injects them, and a
/// mesh-wide policy is not about them.
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{load, Limits, SourceFile};

    /// One Deployment shop/web per `(file, service account)`: two files make two
    /// copies of one workload (two roots deploying it).
    fn model_of(copies: &[(&str, &str)], base: Option<&Model>) -> Model {
        let files: Vec<SourceFile> = copies
            .iter()
            .map(|(file, sa)| SourceFile {
                path: format!("{file}.yaml"),
                bytes: format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\nspec:\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      serviceAccountName: {sa}\n      containers: [{{name: web, image: web}}]\n").into_bytes(),
            })
            .collect();
        build(
            &load(&files, &Limits::default()).resources,
            &MeshConfig::default(),
            base,
        )
    }

    #[test]
    fn a_workload_changes_service_account_when_a_copy_runs_as_one_base_had_not() {
        let base = model_of(&[("a", "web"), ("b", "web-staging")], None);
        assert!(base.service_account_changed.is_empty());
        // The copies trade places: each account still runs the workload.
        let swapped = model_of(&[("a", "web-staging"), ("b", "web")], Some(&base));
        assert!(swapped.service_account_changed.is_empty());
        let moved = model_of(&[("a", "web-staging"), ("b", "web-v2")], Some(&base));
        assert_eq!(moved.service_account_changed, ["Deployment/shop/web"]);
        // A workload new in head presents no new identity of a workload base ran.
        let fresh = model_of(&[("a", "web")], Some(&model_of(&[], None)));
        assert!(fresh.service_account_changed.is_empty());
        // Namespaces list what runs in them, sorted and once.
        assert_eq!(
            moved.namespaces["shop"].service_accounts,
            ["web-staging", "web-v2"]
        );
    }
}
