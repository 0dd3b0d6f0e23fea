//! Ambient mode: which workloads ztunnel captures, which waypoint serves what, and
//! what ztunnel makes of the AuthorizationPolicies sent to it.
//!
//! Capture follows istio-cni's default enablement selectors
//! (cni/pkg/util/enablement_selector.go): a pod labelled
//! `istio.io/dataplane-mode=ambient`, or a pod in a namespace so labelled whose own
//! label is not `none`; never a hostNetwork pod, a pod with a sidecar (the sidecar
//! wins), or a pod of kube-system. Waypoints and bindings follow
//! pilot/pkg/serviceregistry/ambient/waypoints.go; the policy conversion follows
//! pilot/pkg/serviceregistry/ambient/authorization.go.

use super::labels::{Labels, LabelsExt};
use super::{Namespace, Workload};
use crate::config::MeshConfig;
use crate::manifest::Resource;
use crate::pointer::At;
use foldhash::HashMap;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;

pub(super) const DATAPLANE_MODE: &str = "istio.io/dataplane-mode";
pub(super) const USE_WAYPOINT: &str = "istio.io/use-waypoint";
pub(super) const USE_WAYPOINT_NAMESPACE: &str = "istio.io/use-waypoint-namespace";
const WAYPOINT_FOR: &str = "istio.io/waypoint-for";
const INGRESS_USE_WAYPOINT: &str = "istio.io/ingress-use-waypoint";
pub(crate) const WAYPOINT_CLASS: &str = "istio-waypoint";
/// Set by the API server on every namespace (gateway allowedRoutes selectors use it).
const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";
/// istio-cni's default `excludeNamespaces`.
const CNI_EXCLUDED: &[&str] = &["kube-system"];

/// A Gateway API Gateway that can serve as a waypoint.
#[derive(Debug, Clone, Serialize)]
pub struct Waypoint {
    pub id: String,
    pub namespace: String,
    pub name: String,
    pub class: String,
    /// `gatewayClassName: istio-waypoint`. istiod does not check the class of a
    /// Gateway a binding names, so others are listed too.
    pub waypoint_class: bool,
    /// `istio.io/waypoint-for`: `service` (the default), `workload`, `all` or `none`.
    pub traffic: String,
    /// `allowedRoutes.namespaces.from` of its HBONE listener: `Same` (the default),
    /// `All` or `Selector`.
    pub allowed_from: String,
    pub allowed_selector: Option<Labels>,
    /// The identity its pods present (istiod runs them as a service account named
    /// after the Gateway).
    pub principal: String,
}

/// One `istio.io/use-waypoint` label: who carries it, what it names, and whether
/// istiod binds it.
#[derive(Debug, Clone, Serialize)]
pub struct WaypointBinding {
    /// The object whose label it is (a Namespace, Service, ServiceEntry, workload or
    /// WorkloadEntry).
    pub resource: String,
    pub kind: String,
    /// The namespace of what is bound (a Namespace's own name).
    pub namespace: String,
    /// Where the label sits, for the finding's line.
    pub path: Vec<String>,
    /// `service` for Services and ServiceEntries, `workload` for pods and
    /// WorkloadEntries, `both` for a namespace.
    pub binds: String,
    pub waypoint: String,
    pub waypoint_namespace: String,
    /// The Gateway it names, when the repository holds it.
    pub gateway: Option<String>,
    /// Whether the repository holds anything in the waypoint's namespace (a missing
    /// Gateway there is a fact, elsewhere it may be deployed from another repository).
    pub waypoint_namespace_known: bool,
    /// Why istiod does not bind it: `not-found`, `traffic-type` or `cross-namespace`;
    /// None when it is bound.
    pub problem: Option<String>,
    pub detail: Option<String>,
}

/// What ztunnel enforces of an AuthorizationPolicy that applies to ambient workloads
/// (one without targetRefs whose scope covers some).
#[derive(Debug, Clone, Serialize)]
pub struct ZtunnelAuthz {
    pub resource: String,
    pub action: String,
    /// Ambient workloads in its scope.
    pub ambient_workloads: Vec<String>,
    /// How many workloads in its scope have a sidecar (which enforces it as written).
    pub sidecar_workloads: usize,
    /// `as-written`; ALLOW: `stricter` (rules dropped), `denies-all` (every rule
    /// dropped); DENY: `wider` (L7 parts dropped, the rest denies more), `partly-ignored`
    /// (some rules can no longer fire), `ignored` (no rule can fire); CUSTOM and AUDIT,
    /// and dry-run policies: `not-sent`.
    pub outcome: String,
    pub rules: Vec<ZtunnelRule>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ZtunnelRule {
    pub index: usize,
    /// The L7 fields ztunnel cannot see, as paths (`to[0].operation.paths`).
    pub l7_fields: Vec<String>,
    /// `kept`, `dropped` (ALLOW), `widened` or `never-fires` (DENY).
    pub outcome: String,
}

/// One targetRef of a policy meant for a waypoint.
#[derive(Debug, Clone, Serialize)]
pub struct TargetRef {
    pub resource: String,
    pub kind: String,
    pub path: Vec<String>,
    pub target_kind: String,
    pub target_name: String,
    /// `bound` (a waypoint serves it), `not-found`, `not-bound` (it exists but no
    /// waypoint serves it) or `not-waypoint` (a Gateway that is not a waypoint: an
    /// ordinary gateway, where the policy applies as written).
    pub state: String,
    pub waypoint: Option<String>,
}

/// The namespace's ambient labels, once its labels are known.
pub(super) fn namespace_ambient(ns: &Namespace) -> Option<bool> {
    ns.labels_known.then(|| {
        ns.labels.get(DATAPLANE_MODE).map(String::as_str) == Some("ambient")
            && !CNI_EXCLUDED.contains(&ns.name.as_str())
    })
}

/// Sets the workload's data plane, after its sidecar is known.
pub(super) fn capture(w: &mut Workload, ns: Option<&Namespace>) {
    let pod_mode = w.labels.get(DATAPLANE_MODE).map(String::as_str);
    let ns_ambient = ns.and_then(|n| n.ambient);
    let ns_name = &w.namespace;
    let (plane, reason): (&str, String) = if w.proxy {
        let conflict = if pod_mode == Some("ambient") {
            Some(format!(
                "its pods are labelled istio.io/dataplane-mode=ambient, but they get a sidecar ({}), and the sidecar wins: ztunnel skips them",
                w.proxy_reason
            ))
        } else if ns_ambient == Some(true) && w.proxy_via.as_deref() != Some("template") {
            Some(format!(
                "namespace {ns_name} is ambient (istio.io/dataplane-mode=ambient), but {}, and the sidecar wins: ztunnel skips them",
                w.proxy_reason
            ))
        } else {
            None
        };
        w.dataplane_conflict = conflict;
        ("sidecar", w.proxy_reason.clone())
    } else if w.host_network {
        ("none", "hostNetwork pods are never captured".into())
    } else if CNI_EXCLUDED.contains(&ns_name.as_str()) {
        (
            "none",
            format!("istio-cni never captures pods of {ns_name}"),
        )
    } else if pod_mode == Some("none") {
        (
            "none",
            "opted out with istio.io/dataplane-mode: none".into(),
        )
    } else if !w.proxy_known {
        // Its namespace's labels decide both the sidecar and the capture.
        ("unknown", w.proxy_reason.clone())
    } else if pod_mode == Some("ambient") {
        (
            "ambient",
            "its pods are labelled istio.io/dataplane-mode=ambient".into(),
        )
    } else if ns_ambient == Some(true) {
        (
            "ambient",
            format!("namespace {ns_name} has istio.io/dataplane-mode=ambient"),
        )
    } else {
        ("none", w.proxy_reason.clone())
    };
    w.ambient = plane == "ambient";
    w.dataplane = plane.to_string();
    w.dataplane_reason = reason;
}

pub(super) fn waypoints(resources: &[Resource], mesh: &MeshConfig) -> Vec<Waypoint> {
    // A Gateway defined twice (manifest/duplicate-resource) is one waypoint: the first.
    let mut seen = foldhash::HashSet::default();
    resources
        .iter()
        .filter(|r| r.kind == "Gateway" && r.api_version.starts_with("gateway.networking.k8s.io/"))
        .filter(|r| seen.insert(r.id.as_str()))
        .filter_map(|r| {
            let ns = r.namespace.clone()?;
            let class = r.body.str_at("/spec/gatewayClassName").unwrap_or_default();
            let traffic = r
                .labels()
                .and_then(|l| l.get(WAYPOINT_FOR))
                .and_then(Json::as_str)
                .unwrap_or("service")
                .to_string();
            let listeners = r
                .body
                .at("/spec/listeners")
                .and_then(Json::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let bound_name = r
                .body
                .at("/metadata/annotations/ambient.istio.io~1waypoint-inbound-binding")
                .and_then(Json::as_str);
            let hbone = listeners.iter().find(|l| match bound_name {
                Some(name) => l.get("name").and_then(Json::as_str) == Some(name),
                None => l.get("port").and_then(Json::as_i64) == Some(15008),
            });
            let from = hbone
                .and_then(|l| l.at("/allowedRoutes/namespaces/from"))
                .and_then(Json::as_str)
                .unwrap_or("Same")
                .to_string();
            let allowed_selector = hbone
                .and_then(|l| l.at("/allowedRoutes/namespaces/selector/matchLabels"))
                .and_then(Json::as_object)
                .map(Labels::from_json);
            Some(Waypoint {
                id: r.id.clone(),
                principal: format!("{}/ns/{ns}/sa/{}", mesh.trust_domain, r.name),
                namespace: ns,
                name: r.name.clone(),
                waypoint_class: class == WAYPOINT_CLASS,
                class: class.to_string(),
                traffic,
                allowed_from: from,
                allowed_selector,
            })
        })
        .collect()
}

/// Whether a waypoint of this traffic type serves what a binding binds.
fn serves(traffic: &str, binds: &str) -> bool {
    match binds {
        "service" => matches!(traffic, "service" | "all"),
        "workload" => matches!(traffic, "workload" | "all"),
        _ => traffic != "none",
    }
}

/// Every `istio.io/use-waypoint` label of the tree, resolved.
pub(super) fn bindings(
    resources: &[Resource],
    workloads: &[Workload],
    namespaces: &BTreeMap<String, Namespace>,
    waypoints: &[Waypoint],
) -> Vec<WaypointBinding> {
    let by_key: HashMap<(&str, &str), &Waypoint> = waypoints
        .iter()
        .map(|w| ((w.namespace.as_str(), w.name.as_str()), w))
        .collect();
    let used_namespaces: foldhash::HashSet<&str> = resources
        .iter()
        .filter_map(|r| r.namespace.as_deref())
        .chain(
            namespaces
                .values()
                .filter(|n| n.declared)
                .map(|n| n.name.as_str()),
        )
        .collect();
    let mut out = Vec::new();
    let mut add = |resource: &str,
                   kind: &str,
                   namespace: &str,
                   labels: &Labels,
                   path: Vec<String>,
                   binds: &str| {
        let Some(name) = labels.get(USE_WAYPOINT) else {
            return;
        };
        if name == "none" {
            return;
        }
        let wns = labels
            .get(USE_WAYPOINT_NAMESPACE)
            .cloned()
            .unwrap_or_else(|| namespace.to_string());
        let gateway = by_key.get(&(wns.as_str(), name.as_str())).copied();
        let (problem, detail) = match gateway {
            None => (
                Some("not-found"),
                Some(format!("there is no Gateway {name} in namespace {wns}")),
            ),
            Some(g) if !serves(&g.traffic, binds) => (
                Some("traffic-type"),
                Some(format!(
                    "waypoint {wns}/{name} is for {} traffic (istio.io/waypoint-for: {}), and {} needs one for {} traffic",
                    g.traffic,
                    g.traffic,
                    kind_text(kind),
                    if binds == "workload" { "workload" } else { "service" }
                )),
            ),
            Some(g) if g.namespace != namespace => {
                let allowed = match g.allowed_from.as_str() {
                    "All" => true,
                    // The API server gives every namespace the label
                    // kubernetes.io/metadata.name, so a selector on it alone is
                    // decided even when the namespace's other labels are unknown.
                    "Selector" => g.allowed_selector.as_ref().is_some_and(|s| {
                        let mut labels = namespaces
                            .get(namespace)
                            .filter(|n| n.labels_known)
                            .map(|n| n.labels.clone())
                            .unwrap_or_default();
                        labels.insert(NAMESPACE_NAME.to_string(), namespace.to_string());
                        labels.selected_by(s)
                    }),
                    _ => false,
                };
                if allowed {
                    (None, None)
                } else {
                    (
                        Some("cross-namespace"),
                        Some(format!(
                            "waypoint {wns}/{name} admits only {} (allowedRoutes.namespaces.from: {} on its HBONE listener), and this is namespace {namespace}",
                            if g.allowed_from == "Selector" { "namespaces its selector matches" } else { "its own namespace" },
                            g.allowed_from
                        )),
                    )
                }
            }
            Some(_) => (None, None),
        };
        out.push(WaypointBinding {
            resource: resource.to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            path,
            binds: binds.to_string(),
            waypoint: name.clone(),
            waypoint_namespace_known: used_namespaces.contains(wns.as_str()),
            waypoint_namespace: wns,
            gateway: gateway.map(|g| g.id.clone()),
            problem: problem.map(str::to_string),
            detail,
        });
    };
    let label_path = |base: &[&str]| -> Vec<String> {
        base.iter()
            .map(|s| s.to_string())
            .chain([USE_WAYPOINT.to_string()])
            .collect()
    };
    for ns in namespaces.values().filter(|n| n.labels_known) {
        if let Some(res) = &ns.labels_resource {
            let mut path = ns.labels_path.clone();
            path.push(USE_WAYPOINT.to_string());
            add(res, "Namespace", &ns.name, &ns.labels, path, "both");
        }
    }
    for r in resources {
        let Some(ns) = r.namespace.as_deref() else {
            continue;
        };
        let binds = match (r.kind.as_str(), r.api_version.as_str()) {
            ("Service", "v1") => "service",
            ("ServiceEntry", v) if v.contains("istio.io/") => "service",
            ("WorkloadEntry", v) if v.contains("istio.io/") => "workload",
            _ => continue,
        };
        let labels = r.labels().map(Labels::from_json).unwrap_or_default();
        add(
            &r.id,
            &r.kind,
            ns,
            &labels,
            label_path(&["metadata", "labels"]),
            binds,
        );
    }
    for w in workloads {
        let template: &[&str] = match w.kind.as_str() {
            "Pod" => &["metadata", "labels"],
            "CronJob" => &[
                "spec",
                "jobTemplate",
                "spec",
                "template",
                "metadata",
                "labels",
            ],
            _ => &["spec", "template", "metadata", "labels"],
        };
        add(
            &w.id,
            &w.kind,
            &w.namespace,
            &w.labels,
            label_path(template),
            "workload",
        );
    }
    out
}

fn kind_text(kind: &str) -> &'static str {
    match kind {
        "Service" => "a Service",
        "ServiceEntry" => "a ServiceEntry",
        "WorkloadEntry" => "a WorkloadEntry",
        "Namespace" => "a namespace",
        _ => "a workload",
    }
}

/// The waypoint (Gateway id) that serves an object's traffic of kind `binds`
/// (`service` or `workload`): its own label wins over its namespace's, and `none` on
/// it opts out whatever the namespace says. A namespace label naming a waypoint of
/// the other traffic type gives nothing, silently: that is how istiod treats it.
pub(super) fn waypoint_of(
    own: &Labels,
    own_id: &str,
    ns: Option<&Namespace>,
    binds: &str,
    lookup: &WaypointLookup,
) -> Option<String> {
    let binding = match own.get(USE_WAYPOINT) {
        Some(v) if v == "none" => return None,
        Some(_) => *lookup.by_resource.get(own_id)?,
        None => {
            let ns = ns?;
            ns.labels.get(USE_WAYPOINT)?;
            let resource = ns.labels_resource.as_deref()?;
            *lookup.by_namespace_object.get(resource)?
        }
    };
    if binding.problem.is_some() && binding.kind != "Namespace" {
        return None;
    }
    if matches!(
        binding.problem.as_deref(),
        Some("not-found" | "cross-namespace")
    ) {
        return None;
    }
    let id = binding.gateway.as_deref()?;
    let g = lookup.waypoints.get(id)?;
    serves(&g.traffic, binds).then(|| g.id.clone())
}

/// Bindings and waypoints by id, for [`waypoint_of`]: it runs once per workload and
/// per Service, so a scan of every binding each time would be quadratic.
pub(super) struct WaypointLookup<'a> {
    /// The first binding of each labelled object.
    by_resource: HashMap<&'a str, &'a WaypointBinding>,
    /// The binding of each Namespace object's label.
    by_namespace_object: HashMap<&'a str, &'a WaypointBinding>,
    waypoints: HashMap<&'a str, &'a Waypoint>,
}

impl<'a> WaypointLookup<'a> {
    pub(super) fn new(bindings: &'a [WaypointBinding], waypoints: &'a [Waypoint]) -> Self {
        let mut by_resource = HashMap::default();
        let mut by_namespace_object = HashMap::default();
        for b in bindings {
            by_resource.entry(b.resource.as_str()).or_insert(b);
            if b.kind == "Namespace" {
                by_namespace_object.entry(b.resource.as_str()).or_insert(b);
            }
        }
        let mut by_id = HashMap::default();
        for w in waypoints {
            by_id.entry(w.id.as_str()).or_insert(w);
        }
        WaypointLookup {
            by_resource,
            by_namespace_object,
            waypoints: by_id,
        }
    }
}

/// Whether `istio.io/ingress-use-waypoint` is true for a Service (its own label, else
/// its namespace's), parsed as Go's strconv.ParseBool does.
pub(super) fn ingress_uses_waypoint(own: &Labels, ns: Option<&Namespace>) -> bool {
    let value = own
        .get(INGRESS_USE_WAYPOINT)
        .or_else(|| ns.and_then(|n| n.labels.get(INGRESS_USE_WAYPOINT)));
    matches!(
        value.map(String::as_str),
        Some("true" | "1" | "t" | "T" | "TRUE" | "True")
    )
}

// ---------------------------------------------------------------------------
// AuthorizationPolicy at ztunnel

const L4_SOURCE: &[&str] = &[
    "principals",
    "notPrincipals",
    "namespaces",
    "notNamespaces",
    "serviceAccounts",
    "notServiceAccounts",
    "ipBlocks",
    "notIpBlocks",
];
/// Read by ztunnel, never sent: a source with only these matches nothing.
const IGNORED_SOURCE: &[&str] = &["trustDomains", "notTrustDomains"];
const L4_OPERATION: &[&str] = &["ports", "notPorts"];
const L4_WHEN: &[&str] = &[
    "source.ip",
    "source.namespace",
    "source.principal",
    "destination.ip",
    "destination.port",
];

/// What ztunnel keeps of one rule: its L7 fields, and whether every clause still has a
/// non-empty match once they are removed.
fn rule_at_ztunnel(rule: &Json, index: usize) -> (Vec<String>, bool) {
    let mut l7 = Vec::new();
    let mut can_fire = true;
    let mut clause = |list: &str, inner: &str, l4: &[&str]| {
        let Some(items) = rule.get(list).and_then(Json::as_array) else {
            return;
        };
        let mut any_left = false;
        for (i, item) in items.iter().enumerate() {
            let Some(fields) = item.get(inner).and_then(Json::as_object) else {
                continue;
            };
            let mut left = false;
            for (key, value) in fields {
                let empty = value.as_array().is_some_and(Vec::is_empty) || value.is_null();
                if l4.contains(&key.as_str()) {
                    left |= !empty;
                } else if !IGNORED_SOURCE.contains(&key.as_str()) && !empty {
                    l7.push(format!("{list}[{i}].{inner}.{key}"));
                }
            }
            any_left |= left;
        }
        if !items.is_empty() && !any_left {
            can_fire = false;
        }
    };
    clause("from", "source", L4_SOURCE);
    clause("to", "operation", L4_OPERATION);
    if let Some(conditions) = rule.get("when").and_then(Json::as_array) {
        for (i, c) in conditions.iter().enumerate() {
            let key = c.get("key").and_then(Json::as_str).unwrap_or_default();
            if !L4_WHEN.contains(&key) {
                l7.push(format!("when[{i}].key {key}"));
                can_fire = false;
            }
        }
    }
    let _ = index;
    (l7, can_fire)
}

/// The policy as ztunnel enforces it; None for policies that never reach ztunnel
/// (targetRefs) or whose scope holds no ambient workload.
pub(super) fn ztunnel_authz(r: &Resource, covered: &[&Workload]) -> Option<ZtunnelAuthz> {
    if r.body.at("/spec/targetRef").is_some() || r.body.at("/spec/targetRefs").is_some() {
        return None;
    }
    let ambient: Vec<String> = covered
        .iter()
        .filter(|w| w.ambient)
        .map(|w| w.id.clone())
        .collect();
    if ambient.is_empty() {
        return None;
    }
    let action = r.body.str_at("/spec/action").unwrap_or("ALLOW").to_string();
    let dry_run = r
        .body
        .at("/metadata/annotations/istio.io~1dry-run")
        .and_then(Json::as_str)
        == Some("true");
    let rules_json = r
        .body
        .at("/spec/rules")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut rules = Vec::new();
    for (i, rule) in rules_json.iter().enumerate() {
        let (l7_fields, can_fire) = rule_at_ztunnel(rule, i);
        let outcome = match (action.as_str(), l7_fields.is_empty(), can_fire) {
            (_, true, _) => "kept",
            ("ALLOW", false, _) => "dropped",
            (_, false, true) => "widened",
            (_, false, false) => "never-fires",
        };
        rules.push(ZtunnelRule {
            index: i,
            l7_fields,
            outcome: outcome.to_string(),
        });
    }
    let count = |o: &str| rules.iter().filter(|r| r.outcome == o).count();
    let outcome = if dry_run || matches!(action.as_str(), "CUSTOM" | "AUDIT") {
        "not-sent"
    } else if action == "ALLOW" {
        match count("dropped") {
            0 => "as-written",
            n if n == rules.len() => "denies-all",
            _ => "stricter",
        }
    } else if count("never-fires") == rules.len() && !rules.is_empty() {
        "ignored"
    } else if count("never-fires") > 0 {
        "partly-ignored"
    } else if count("widened") > 0 {
        "wider"
    } else {
        "as-written"
    };
    Some(ZtunnelAuthz {
        resource: r.id.clone(),
        action,
        sidecar_workloads: covered.iter().filter(|w| w.proxy).count(),
        ambient_workloads: ambient,
        outcome: outcome.to_string(),
        rules,
        dry_run,
    })
}

/// The targetRefs of the policy kinds a waypoint takes, with what each reaches.
pub(super) fn target_refs(
    r: &Resource,
    waypoints: &[Waypoint],
    service_waypoints: &HashMap<(String, String, String), Option<String>>,
) -> Vec<TargetRef> {
    let ns = r.namespace.as_deref().unwrap_or_default();
    let refs: Vec<(Vec<String>, &Json)> = match (
        r.body.at("/spec/targetRefs").and_then(Json::as_array),
        r.body.at("/spec/targetRef"),
    ) {
        (Some(list), _) => list
            .iter()
            .enumerate()
            .map(|(i, t)| (vec!["spec".into(), "targetRefs".into(), i.to_string()], t))
            .collect(),
        (None, Some(t)) => vec![(vec!["spec".into(), "targetRef".into()], t)],
        _ => Vec::new(),
    };
    refs.into_iter()
        .map(|(path, t)| {
            let kind = t.str_at("/kind").unwrap_or_default().to_string();
            let name = t.str_at("/name").unwrap_or_default().to_string();
            let (state, waypoint) = match kind.as_str() {
                "Gateway" => match waypoints
                    .iter()
                    .find(|w| w.namespace == ns && w.name == name)
                {
                    Some(w) if w.waypoint_class => ("bound", Some(w.id.clone())),
                    Some(_) => ("not-waypoint", None),
                    None => ("not-found", None),
                },
                "GatewayClass" => ("bound", None),
                "Service" | "ServiceEntry" => {
                    match service_waypoints.get(&(kind.clone(), ns.to_string(), name.clone())) {
                        Some(Some(w)) => ("bound", Some(w.clone())),
                        Some(None) => ("not-bound", None),
                        None => ("not-found", None),
                    }
                }
                _ => ("not-found", None),
            };
            TargetRef {
                resource: r.id.clone(),
                kind: r.kind.clone(),
                path,
                target_kind: kind,
                target_name: name,
                state: state.to_string(),
                waypoint,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn l7_fields_are_found_and_deny_clauses_left_empty_never_fire() {
        let (l7, fire) = rule_at_ztunnel(
            &json!({"to": [{"operation": {"ports": ["8080"], "methods": ["POST"]}}]}),
            0,
        );
        assert_eq!(l7, ["to[0].operation.methods"]);
        assert!(fire, "ports are left: the rule denies all of 8080");
        let (l7, fire) = rule_at_ztunnel(&json!({"to": [{"operation": {"paths": ["/admin"]}}]}), 0);
        assert_eq!(l7, ["to[0].operation.paths"]);
        assert!(!fire);
        let (l7, fire) = rule_at_ztunnel(
            &json!({"from": [{"source": {"namespaces": ["a"]}}], "when": [{"key": "request.headers[x]", "values": ["1"]}]}),
            0,
        );
        assert_eq!(l7, ["when[0].key request.headers[x]"]);
        assert!(!fire);
        let (l7, fire) = rule_at_ztunnel(
            &json!({"from": [{"source": {"principals": ["cluster.local/ns/a/sa/b"]}}], "when": [{"key": "source.ip", "values": ["10.0.0.1"]}]}),
            0,
        );
        assert!(l7.is_empty() && fire);
    }
}
