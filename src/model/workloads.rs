//! Workloads as Istio sees them: the pod templates of workload kinds, their proxy
//! injection, and WorkloadEntries.

use super::labels::{Labels, LabelsExt};
use super::{address_problem, namespaces, Namespace, ProxyRequests, Workload, WorkloadEntry};
use crate::manifest::Resource;
use crate::pointer::At;
use serde_json::Value as Json;
use std::collections::BTreeMap;

pub(super) const WORKLOAD_KINDS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "Pod",
];

/// Is this a hook rather than a workload of the mesh? Helm hooks and tests
/// (`helm.sh/hook`, `test` and `test-success` included) and Argo CD hooks
/// (`argocd.argoproj.io/hook`) that are Pods or Jobs run to completion at install,
/// upgrade, sync or test time and are gone before the traffic the mesh policies are
/// about: counted as workloads, they would make selectors, coverage and STRICT
/// scopes report pods that never serve. A hook of a long-running kind (a
/// Deployment, a CronJob) keeps running after the hook and stays a workload; one
/// Argo CD skips (`Skip`) is never applied at all.
pub(super) fn is_hook(r: &Resource) -> bool {
    let Some(annotations) = r.body.at("/metadata/annotations").and_then(Json::as_object) else {
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

/// The pod template of a workload, and where it lives.
pub(super) fn pod_template(r: &Resource) -> Option<&Json> {
    match r.kind.as_str() {
        "Pod" => Some(&r.body),
        "CronJob" => r.body.at("/spec/jobTemplate/spec/template"),
        _ => r.body.at("/spec/template"),
    }
}

pub(super) fn workload_of(
    r: &Resource,
    namespaces: &BTreeMap<String, Namespace>,
) -> Option<Workload> {
    let ns_name = r.namespace.clone()?;
    let template = pod_template(r)?;
    let labels = template
        .at("/metadata/labels")
        .and_then(Json::as_object)
        .map(Labels::from_json)
        .unwrap_or_default();
    let annotations = template
        .at("/metadata/annotations")
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
                .at("/spec/replicas")
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
        dataplane: String::new(),
        dataplane_reason: String::new(),
        ambient: false,
        dataplane_conflict: None,
        waypoint: None,
        service_waypoints: Vec::new(),
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

pub(super) fn hash_json(v: &Json) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016x}", h.finish())
}

pub(super) fn workload_entry_of(r: &Resource) -> WorkloadEntry {
    let metadata_labels = r.labels().map(Labels::from_json).unwrap_or_default();
    let spec_labels = r
        .body
        .at("/spec/labels")
        .and_then(Json::as_object)
        .map(Labels::from_json)
        .unwrap_or_default();
    // The control plane merges both, metadata winning on the same key.
    let mut labels = spec_labels.clone();
    labels.extend(metadata_labels.clone());
    let address = r.body.str_at("/spec/address").map(str::to_string);
    let network = r.body.str_at("/spec/network").map(str::to_string);
    // No address but a network: a workload behind a gateway, which Istio accepts.
    let behind_gateway =
        address.as_deref() == Some("") && network.as_deref().is_some_and(|n| !n.is_empty());
    WorkloadEntry {
        id: r.id.clone(),
        namespace: r.namespace.clone().unwrap_or_default(),
        name: r.name.clone(),
        address_problem: address
            .as_deref()
            .filter(|_| !behind_gateway)
            .and_then(address_problem),
        address,
        network,
        service_account: r.body.str_at("/spec/serviceAccount").map(str::to_string),
        labels,
        metadata_labels,
        spec_labels,
        selected_by: Vec::new(),
    }
}
