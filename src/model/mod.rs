//! The mesh model: what the manifests mean once Istio acts on them. Label matching
//! and injection are computed here, once and indexed, so the policies stay short.

mod authz;
pub mod coverage;
mod labels;
mod namespaces;
mod scale;
mod services;
mod vm;

use crate::config::MeshConfig;
use crate::manifest::Resource;
use labels::{Labels, LabelsExt};
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap, HashSet};

pub use authz::{AuthzMatch, Identity};
pub use labels::address_problem;
pub use scale::{Autoscaler, ProxyRequests};
pub use services::{CallRef, Service};
pub use vm::WorkloadGroup;

#[derive(Debug, Clone, Serialize, Default)]
pub struct Model {
    pub namespaces: BTreeMap<String, Namespace>,
    pub workloads: Vec<Workload>,
    pub workload_entries: Vec<WorkloadEntry>,
    pub selectors: Vec<Selector>,
    pub peer_authentications: Vec<PeerAuthn>,
    /// `ns/sa` → ids of what runs as it.
    pub service_accounts: BTreeMap<String, Vec<String>>,
    /// scope key → effective mode.
    pub mtls_scopes: BTreeMap<String, String>,
    pub workload_groups: Vec<WorkloadGroup>,
    /// Kubernetes Services, with what their selectors select. Not in the policy input
    /// (no policy needs it, and it is large): the change report uses it.
    #[serde(skip)]
    pub services: Vec<Service>,
    /// `ns/sa` → the identity it presents and the AuthorizationPolicies naming it.
    pub identities: BTreeMap<String, Identity>,
}

#[derive(Debug, Clone, Serialize)]
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
    pub mtls: NamespaceMtls,
    pub workloads: usize,
    pub workloads_with_proxy: usize,
    /// Workloads whose proxy depends on labels it is unknown whether it has.
    pub workloads_proxy_unknown: usize,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Injection {
    /// Whether pods created here get a sidecar; None when its labels are unknown.
    pub enabled: Option<bool>,
    pub via: Option<String>,
    pub revision: Option<String>,
    pub explicitly_disabled: bool,
    pub conflict: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct NamespaceMtls {
    pub mode: String,
    pub source: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
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

#[derive(Debug, Clone, Serialize)]
pub struct InvalidLabel {
    pub key: String,
    pub value: String,
    pub problem: String,
}

#[derive(Debug, Clone, Serialize)]
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
    pub unproxied: Vec<String>,
    /// Covered workloads of which it is unknown whether they have a proxy.
    pub proxy_unknown: Vec<String>,
}

const WORKLOAD_KINDS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "Pod",
];

/// Kinds whose selector chooses proxies (and so only counts injected workloads),
/// with where the selector lives.
const POLICY_SELECTORS: &[(&str, &[&str])] = &[
    ("AuthorizationPolicy", &["spec", "selector", "matchLabels"]),
    ("PeerAuthentication", &["spec", "selector", "matchLabels"]),
    (
        "RequestAuthentication",
        &["spec", "selector", "matchLabels"],
    ),
    ("Telemetry", &["spec", "selector", "matchLabels"]),
    ("Sidecar", &["spec", "workloadSelector", "labels"]),
    ("WasmPlugin", &["spec", "selector", "matchLabels"]),
    ("EnvoyFilter", &["spec", "workloadSelector", "labels"]),
];

/// Kinds whose selector-less form applies to the whole namespace.
const NAMESPACE_WIDE: &[&str] = &[
    "AuthorizationPolicy",
    "PeerAuthentication",
    "RequestAuthentication",
    "Telemetry",
    "Sidecar",
];

/// Is this a hook rather than a workload of the mesh? Helm hooks and tests
/// (`helm.sh/hook`, `test` and `test-success` included) and Argo CD hooks
/// (`argocd.argoproj.io/hook`) that are Pods or Jobs run to completion at install,
/// upgrade, sync or test time and are gone before the traffic the mesh policies are
/// about: counted as workloads, they would make selectors, coverage and STRICT
/// scopes report pods that never serve. A hook of a long-running kind (a
/// Deployment, a CronJob) keeps running after the hook and stays a workload; one
/// Argo CD skips (`Skip`) is never applied at all.
fn is_hook(r: &Resource) -> bool {
    let Some(annotations) = r
        .body
        .pointer("/metadata/annotations")
        .and_then(Json::as_object)
    else {
        return false;
    };
    let argo = annotations
        .get("argocd.argoproj.io/hook")
        .and_then(Json::as_str);
    if argo.is_some_and(|h| h.split(',').any(|h| h.trim() == "Skip")) {
        return true;
    }
    matches!(r.kind.as_str(), "Pod" | "Job")
        && (argo.is_some() || annotations.contains_key("helm.sh/hook"))
}

fn is_istio(r: &Resource) -> bool {
    r.api_version.contains("istio.io/")
}

fn str_at<'a>(v: &'a Json, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Json::as_str)
}

/// The pod template of a workload, and where it lives.
fn pod_template(r: &Resource) -> Option<&Json> {
    match r.kind.as_str() {
        "Pod" => Some(&r.body),
        "CronJob" => r.body.pointer("/spec/jobTemplate/spec/template"),
        _ => r.body.pointer("/spec/template"),
    }
}

/// Builds the model of a revision. With the base revision's model, a workload whose
/// namespace gained injection in this change but whose pod template did not change
/// is modelled as it will really run: its existing pods keep running without a proxy.
pub fn build(resources: &[Resource], mesh: &MeshConfig, base: Option<&Model>) -> Model {
    build_with(resources, mesh, base, &[])
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

    let autoscalers = scale::autoscalers(resources);
    for r in resources
        .iter()
        .filter(|r| WORKLOAD_KINDS.contains(&r.kind.as_str()) && !is_hook(r))
    {
        if let Some(mut w) = workload_of(r, &model.namespaces) {
            w.autoscaler = autoscalers
                .get(&(w.namespace.clone(), w.kind.clone(), w.name.clone()))
                .cloned();
            w.proxy_requests = scale::proxy_requests(&w.annotations, mesh);
            if let Some(before) = base.and_then(|b| b.workloads.iter().find(|b| b.id == w.id)) {
                // Only a base known to be without a proxy: a namespace that was not
                // declared in base may have been injected all along.
                if w.proxy
                    && !before.proxy
                    && before.proxy_known
                    && before.template_hash == w.template_hash
                {
                    w.proxy = false;
                    w.pending_rollout = true;
                    w.proxy_reason = format!(
                        "{}, but its pod template is unchanged: pods created before the label keep running without a proxy until they are recreated",
                        w.proxy_reason
                    );
                }
            }
            model.workloads.push(w);
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
    let mut selected_by: HashMap<String, Vec<String>> = HashMap::new();
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
    model.identities = authz::identities(resources, &model.service_accounts, mesh);
    model
}

/// Injection of a namespace whose labels are known.
fn injection_of(labels: &Labels) -> Injection {
    let inj = labels.get("istio-injection").map(String::as_str);
    let rev = labels.get("istio.io/rev").cloned();
    let mut out = Injection {
        enabled: Some(false),
        conflict: multiple_injection_labels(labels).len() > 1,
        explicitly_disabled: inj == Some("disabled"),
        ..Default::default()
    };
    if inj == Some("enabled") {
        out.enabled = Some(true);
        out.via = Some("istio-injection".into());
    } else if inj.is_none() {
        if let Some(rev) = rev {
            out.enabled = Some(true);
            out.via = Some("istio.io/rev".into());
            out.revision = Some(rev);
        }
    }
    out
}

/// The labels istioctl's IST0123 (NamespaceMultipleInjectionLabels) collects: more
/// than one is a conflict. `istio.io/rev` and `istio.io/dataplane-mode` count only
/// when `istio-injection` is absent or `enabled`: a namespace with injection switched
/// off (`disabled`, or any other value) may carry them without conflict.
/// (istio/istio pkg/config/analysis/analyzers/injection/injection.go)
fn multiple_injection_labels(labels: &Labels) -> Vec<String> {
    let inj = labels.get("istio-injection");
    let mut out: Vec<String> = inj
        .map(|v| format!("istio-injection={v}"))
        .into_iter()
        .collect();
    for key in ["istio.io/rev", "istio.io/dataplane-mode"] {
        if let Some(v) = labels.get(key) {
            if inj.is_none_or(|i| i == "enabled") {
                out.push(format!("{key}={v}"));
            }
        }
    }
    out
}

fn workload_of(r: &Resource, namespaces: &BTreeMap<String, Namespace>) -> Option<Workload> {
    let ns_name = r.namespace.clone()?;
    let template = pod_template(r)?;
    let labels = template
        .pointer("/metadata/labels")
        .and_then(Json::as_object)
        .map(Labels::from_json)
        .unwrap_or_default();
    let annotations = template
        .pointer("/metadata/annotations")
        .and_then(Json::as_object)
        .map(Labels::from_json)
        .unwrap_or_default();
    let spec = template.get("spec");
    let service_account = spec
        .and_then(|s| {
            s.get("serviceAccountName")
                .or_else(|| s.get("serviceAccount"))
        })
        .and_then(Json::as_str)
        .unwrap_or("default")
        .to_string();
    let host_network = spec
        .and_then(|s| s.get("hostNetwork"))
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let has_container = |list: &str, native: bool| {
        spec.and_then(|s| s.get(list))
            .and_then(Json::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("name").and_then(Json::as_str) == Some("istio-proxy")
                        && (!native
                            || c.get("restartPolicy").and_then(Json::as_str) == Some("Always"))
                })
            })
    };
    let native_sidecar = has_container("initContainers", true);
    let pre_injected = native_sidecar || has_container("containers", false);
    let inject_flag = labels
        .get("sidecar.istio.io/inject")
        .or_else(|| annotations.get("sidecar.istio.io/inject"))
        .map(String::as_str);
    let opted_out = inject_flag == Some("false");
    let ns = namespaces.get(&ns_name);
    let mut proxy_known = true;
    let (proxy, proxy_reason, via): (bool, String, Option<&str>) = if pre_injected {
        (
            true,
            if native_sidecar {
                "istio-proxy is a native sidecar in initContainers".to_string()
            } else {
                "istio-proxy is already in containers".to_string()
            },
            Some("template"),
        )
    } else if host_network {
        (
            false,
            "hostNetwork pods are never injected".to_string(),
            None,
        )
    } else if opted_out {
        (
            false,
            "opted out with sidecar.istio.io/inject: \"false\"".to_string(),
            None,
        )
    } else {
        match ns {
            Some(ns) if ns.injection.enabled == Some(true) => match &ns.injection.revision {
                Some(rev) => (
                    true,
                    format!("namespace {} has istio.io/rev={rev}", ns.name),
                    Some("namespace-revision"),
                ),
                None => (
                    true,
                    format!("namespace {} has istio-injection=enabled", ns.name),
                    Some("namespace-label"),
                ),
            },
            Some(ns) if ns.injection.explicitly_disabled => (
                false,
                format!("namespace {} has istio-injection=disabled", ns.name),
                None,
            ),
            // The pod-level webhooks only act in a namespace with neither label.
            Some(ns) if ns.labels_known && ns.labels.contains_key("istio-injection") => (
                false,
                format!(
                    "namespace {} has istio-injection={} (only enabled turns injection on, and pods cannot opt in while the label is there)",
                    ns.name,
                    ns.labels.get("istio-injection").map(String::as_str).unwrap_or("")
                ),
                None,
            ),
            Some(ns) if !ns.labels_known => {
                proxy_known = false;
                (
                    false,
                    format!(
                        "{}, so whether its pods get a proxy is unknown",
                        ns.unknown_reason.clone().unwrap_or_else(|| namespaces::unknown_reason(&ns.name))
                    ),
                    None,
                )
            }
            _ if inject_flag == Some("true") => (
                true,
                "the pod opts in with sidecar.istio.io/inject: \"true\"".to_string(),
                Some("pod-opt-in"),
            ),
            _ if labels.contains_key("istio.io/rev") => (
                true,
                format!(
                    "the pod opts in with istio.io/rev={}",
                    labels.get("istio.io/rev").map(String::as_str).unwrap_or("")
                ),
                Some("pod-revision"),
            ),
            _ => (
                false,
                format!("namespace {ns_name} has no injection label"),
                None,
            ),
        }
    };
    let replicas = match r.kind.as_str() {
        "Deployment" | "StatefulSet" | "ReplicaSet" => Some(
            r.body
                .pointer("/spec/replicas")
                .and_then(Json::as_i64)
                .unwrap_or(1),
        ),
        "Pod" => Some(1),
        _ => None,
    };
    Some(Workload {
        id: r.id.clone(),
        kind: r.kind.clone(),
        namespace: ns_name,
        name: r.name.clone(),
        labels,
        annotations,
        service_account,
        replicas,
        proxy,
        proxy_known,
        proxy_reason,
        proxy_via: via.map(str::to_string),
        opted_out,
        host_network,
        native_sidecar,
        pending_rollout: false,
        template_hash: hash_json(template),
        autoscaler: None,
        proxy_requests: ProxyRequests::default(),
        calls: Vec::new(),
    })
}

fn hash_json(v: &Json) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016x}", h.finish())
}

fn workload_entry_of(r: &Resource) -> WorkloadEntry {
    let metadata_labels = r.labels().map(Labels::from_json).unwrap_or_default();
    let spec_labels = r
        .body
        .pointer("/spec/labels")
        .and_then(Json::as_object)
        .map(Labels::from_json)
        .unwrap_or_default();
    // The control plane merges both, metadata winning on the same key.
    let mut labels = spec_labels.clone();
    labels.extend(metadata_labels.clone());
    let address = str_at(&r.body, "/spec/address").map(str::to_string);
    WorkloadEntry {
        id: r.id.clone(),
        namespace: r.namespace.clone().unwrap_or_default(),
        name: r.name.clone(),
        address_problem: address.as_deref().and_then(address_problem),
        address,
        network: str_at(&r.body, "/spec/network").map(str::to_string),
        service_account: str_at(&r.body, "/spec/serviceAccount").map(str::to_string),
        labels,
        metadata_labels,
        spec_labels,
        selected_by: Vec::new(),
    }
}

/// Workloads and entries by namespace, for selector matching.
struct Index<'a> {
    workloads: HashMap<&'a str, Vec<&'a Workload>>,
    entries: HashMap<&'a str, Vec<&'a WorkloadEntry>>,
    all_workloads: Vec<&'a Workload>,
    all_entries: Vec<&'a WorkloadEntry>,
}

impl<'a> Index<'a> {
    fn new(model: &'a Model) -> Self {
        let mut workloads: HashMap<&str, Vec<&Workload>> = HashMap::new();
        for w in &model.workloads {
            workloads.entry(w.namespace.as_str()).or_default().push(w);
        }
        let mut entries: HashMap<&str, Vec<&WorkloadEntry>> = HashMap::new();
        for e in &model.workload_entries {
            entries.entry(e.namespace.as_str()).or_default().push(e);
        }
        Index {
            workloads,
            entries,
            all_workloads: model.workloads.iter().collect(),
            all_entries: model.workload_entries.iter().collect(),
        }
    }

    /// Workloads a policy in `ns` can apply to: its namespace, or every namespace
    /// for a policy in the root namespace.
    fn workloads_for(&self, ns: &str, mesh: &MeshConfig) -> &[&'a Workload] {
        if ns == mesh.root_namespace {
            &self.all_workloads
        } else {
            self.workloads.get(ns).map(Vec::as_slice).unwrap_or(&[])
        }
    }

    fn entries_for(&self, ns: &str, mesh: &MeshConfig) -> &[&'a WorkloadEntry] {
        if ns == mesh.root_namespace {
            &self.all_entries
        } else {
            self.entries.get(ns).map(Vec::as_slice).unwrap_or(&[])
        }
    }
}

fn labels_at(body: &Json, path: &[&str]) -> Option<Labels> {
    let mut v = body;
    for p in path {
        v = v.get(*p)?;
    }
    Some(v.as_object().map(Labels::from_json).unwrap_or_default())
}

fn selectors_of(r: &Resource, index: &Index, mesh: &MeshConfig) -> Vec<Selector> {
    let Some(ns) = r.namespace.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if r.kind == "ServiceEntry" {
        if let Some(labels) = labels_at(&r.body, &["spec", "workloadSelector", "labels"]) {
            // A ServiceEntry selects pods and WorkloadEntries of its own namespace.
            let mut matches = Vec::new();
            let mut spec_only = Vec::new();
            let mut entry_matches = 0;
            for w in index.workloads.get(ns).map(Vec::as_slice).unwrap_or(&[]) {
                if w.labels.selected_by(&labels) {
                    matches.push(w.id.clone());
                }
            }
            for e in index.entries.get(ns).map(Vec::as_slice).unwrap_or(&[]) {
                if e.labels.selected_by(&labels) {
                    matches.push(e.id.clone());
                    entry_matches += 1;
                    if !e.metadata_labels.selected_by(&labels) {
                        spec_only.push(e.id.clone());
                    }
                }
            }
            out.push(Selector {
                resource: r.id.clone(),
                kind: r.kind.clone(),
                namespace: ns.to_string(),
                path: vec!["spec".into(), "workloadSelector".into(), "labels".into()],
                scope: "workload".into(),
                invalid: labels.invalid(),
                labels: Some(labels),
                counts: "workloads_and_entries".into(),
                match_count: matches.len(),
                matches,
                unknown_matches: Vec::new(),
                spec_only_matches: spec_only,
                workload_entry_matches: entry_matches,
                workload_groups: Vec::new(),
            });
        }
        return out;
    }
    let Some((_, path)) = POLICY_SELECTORS.iter().find(|(k, _)| *k == r.kind) else {
        return out;
    };
    let has_target_ref =
        r.body.pointer("/spec/targetRef").is_some() || r.body.pointer("/spec/targetRefs").is_some();
    let workloads = index.workloads_for(ns, mesh);
    let entries = index.entries_for(ns, mesh);
    match labels_at(&r.body, path) {
        Some(labels) => {
            let mut matches = Vec::new();
            let mut unknown = Vec::new();
            let mut spec_only = Vec::new();
            let mut entry_matches = 0;
            for w in workloads.iter().filter(|w| w.labels.selected_by(&labels)) {
                if w.proxy {
                    matches.push(w.id.clone());
                } else if !w.proxy_known {
                    unknown.push(w.id.clone());
                }
            }
            for e in entries {
                if e.labels.selected_by(&labels) {
                    matches.push(e.id.clone());
                    entry_matches += 1;
                    if !e.metadata_labels.selected_by(&labels) {
                        spec_only.push(e.id.clone());
                    }
                }
            }
            out.push(Selector {
                resource: r.id.clone(),
                kind: r.kind.clone(),
                namespace: ns.to_string(),
                path: path.iter().map(|s| s.to_string()).collect(),
                scope: "workload".into(),
                invalid: labels.invalid(),
                labels: Some(labels),
                counts: "injected_workloads".into(),
                match_count: matches.len(),
                matches,
                unknown_matches: unknown,
                spec_only_matches: spec_only,
                workload_entry_matches: entry_matches,
                workload_groups: Vec::new(),
            });
        }
        None if !has_target_ref && NAMESPACE_WIDE.contains(&r.kind.as_str()) => {
            let matches: Vec<String> = workloads
                .iter()
                .filter(|w| w.proxy)
                .map(|w| w.id.clone())
                .chain(entries.iter().map(|e| e.id.clone()))
                .collect();
            let unknown = workloads
                .iter()
                .filter(|w| !w.proxy_known)
                .map(|w| w.id.clone())
                .collect();
            out.push(Selector {
                resource: r.id.clone(),
                kind: r.kind.clone(),
                namespace: ns.to_string(),
                path: Vec::new(),
                scope: if ns == mesh.root_namespace {
                    "mesh"
                } else {
                    "namespace"
                }
                .into(),
                labels: None,
                counts: "injected_workloads".into(),
                match_count: matches.len(),
                workload_entry_matches: entries.len(),
                matches,
                unknown_matches: unknown,
                spec_only_matches: Vec::new(),
                invalid: Vec::new(),
                workload_groups: Vec::new(),
            });
        }
        None => {}
    }
    out
}

fn mode_at(v: Option<&Json>) -> String {
    v.and_then(|m| m.get("mode"))
        .and_then(Json::as_str)
        .unwrap_or("UNSET")
        .to_string()
}

fn peer_authn_of(r: &Resource, index: &Index, mesh: &MeshConfig) -> PeerAuthn {
    let ns = r.namespace.clone().unwrap_or_default();
    let mode = mode_at(r.body.pointer("/spec/mtls"));
    let port_modes: BTreeMap<String, String> = r
        .body
        .pointer("/spec/portLevelMtls")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .map(|(port, v)| (port.clone(), mode_at(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    let selector = r
        .body
        .pointer("/spec/selector/matchLabels")
        .and_then(Json::as_object)
        .map(Labels::from_json)
        .filter(|l| !l.is_empty());
    let candidates = index.workloads_for(&ns, mesh);
    let (scope, scope_key, covered): (&str, String, Vec<&Workload>) = match &selector {
        Some(sel) => (
            "workload",
            format!("workload:{ns}:{}", sel.canonical()),
            candidates
                .iter()
                .copied()
                .filter(|w| w.labels.selected_by(sel))
                .collect(),
        ),
        None if ns == mesh.root_namespace => ("mesh", "mesh".to_string(), candidates.to_vec()),
        None => ("namespace", format!("namespace:{ns}"), candidates.to_vec()),
    };
    let strict = mode == "STRICT" || port_modes.values().any(|m| m == "STRICT");
    PeerAuthn {
        resource: r.id.clone(),
        namespace: ns,
        scope: scope.into(),
        scope_key,
        strict,
        workloads: covered.iter().map(|w| w.id.clone()).collect(),
        unproxied: covered
            .iter()
            .filter(|w| !w.proxy && w.proxy_known)
            .map(|w| w.id.clone())
            .collect(),
        proxy_unknown: covered
            .iter()
            .filter(|w| !w.proxy_known)
            .map(|w| w.id.clone())
            .collect(),
        mode,
        port_modes,
    }
}

/// Namespaces that are never part of the mesh: Istio never injects them, and a
/// mesh-wide policy is not about them.
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// The workloads a mesh-wide policy really governs: not those of the system
/// namespaces or the root namespace (istiod and friends run without a proxy by
/// design), and not those whose namespace sets a mode of its own, which wins.
fn narrow_mesh_scope(pas: &mut [PeerAuthn], index: &Index, mesh: &MeshConfig) {
    let overridden: HashSet<String> = pas
        .iter()
        .filter(|p| p.scope == "namespace" && p.mode != "UNSET")
        .map(|p| p.namespace.clone())
        .collect();
    let governed = |ns: &str| {
        ns != mesh.root_namespace && !SYSTEM_NAMESPACES.contains(&ns) && !overridden.contains(ns)
    };
    let namespace_of: HashMap<&str, &str> = index
        .all_workloads
        .iter()
        .map(|w| (w.id.as_str(), w.namespace.as_str()))
        .collect();
    for pa in pas.iter_mut().filter(|p| p.scope == "mesh") {
        let keep = |id: &String| namespace_of.get(id.as_str()).is_some_and(|ns| governed(ns));
        pa.workloads.retain(keep);
        pa.unproxied.retain(keep);
        pa.proxy_unknown.retain(keep);
    }
}

/// Effective namespace mTLS modes: a namespace policy wins over the mesh-wide one;
/// with neither, Istio's default is PERMISSIVE.
fn apply_mtls(model: &mut Model, pas: &[PeerAuthn], mesh: &MeshConfig) {
    let mesh_pa = pas.iter().find(|p| p.scope == "mesh" && p.mode != "UNSET");
    let mesh_mode = mesh_pa
        .map(|p| p.mode.clone())
        .unwrap_or_else(|| "PERMISSIVE".into());
    model.mtls_scopes.insert("mesh".into(), mesh_mode.clone());
    for (name, ns) in model.namespaces.iter_mut() {
        let own = pas
            .iter()
            .find(|p| p.scope == "namespace" && &p.namespace == name && p.mode != "UNSET");
        ns.mtls = match (own, mesh_pa) {
            (Some(p), _) => NamespaceMtls {
                mode: p.mode.clone(),
                source: Some(p.resource.clone()),
            },
            (None, Some(p)) => NamespaceMtls {
                mode: p.mode.clone(),
                source: Some(p.resource.clone()),
            },
            (None, None) => NamespaceMtls {
                mode: "PERMISSIVE".into(),
                source: None,
            },
        };
        if *name != mesh.root_namespace {
            model
                .mtls_scopes
                .insert(format!("namespace:{name}"), ns.mtls.mode.clone());
        }
    }
    for p in pas.iter().filter(|p| p.scope == "workload") {
        let mode = if p.mode == "UNSET" {
            model
                .namespaces
                .get(&p.namespace)
                .map(|n| n.mtls.mode.clone())
                .unwrap_or_else(|| mesh_mode.clone())
        } else {
            p.mode.clone()
        };
        model.mtls_scopes.insert(p.scope_key.clone(), mode);
    }
}
