//! What each policy's selector selects: the kinds that select workloads, and an
//! index of workloads by namespace and labels.

use super::labels::{Labels, LabelsExt};
use super::{Model, Selector, Workload, WorkloadEntry};
use crate::config::MeshConfig;
use crate::manifest::Resource;
use crate::pointer::At;
use foldhash::HashMap;
use serde_json::Value as Json;

/// Kinds whose selector chooses proxies (and so only counts injected workloads),
/// with where the selector lives.
pub(super) const POLICY_SELECTORS: &[(&str, &[&str])] = &[
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
pub(super) const NAMESPACE_WIDE: &[&str] = &[
    "AuthorizationPolicy",
    "PeerAuthentication",
    "RequestAuthentication",
    "Telemetry",
    "Sidecar",
];

/// Workloads and entries by namespace, for selector matching.
pub(super) struct Index<'a> {
    pub(super) workloads: HashMap<&'a str, Vec<&'a Workload>>,
    pub(super) entries: HashMap<&'a str, Vec<&'a WorkloadEntry>>,
    pub(super) all_workloads: Vec<&'a Workload>,
    pub(super) all_entries: Vec<&'a WorkloadEntry>,
}

impl<'a> Index<'a> {
    pub(super) fn new(model: &'a Model) -> Self {
        let mut workloads: HashMap<&str, Vec<&Workload>> = HashMap::default();
        for w in &model.workloads {
            workloads.entry(w.namespace.as_str()).or_default().push(w);
        }
        let mut entries: HashMap<&str, Vec<&WorkloadEntry>> = HashMap::default();
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
    pub(super) fn workloads_for(&self, ns: &str, mesh: &MeshConfig) -> &[&'a Workload] {
        if ns == mesh.root_namespace {
            &self.all_workloads
        } else {
            self.workloads.get(ns).map(Vec::as_slice).unwrap_or(&[])
        }
    }

    pub(super) fn entries_for(&self, ns: &str, mesh: &MeshConfig) -> &[&'a WorkloadEntry] {
        if ns == mesh.root_namespace {
            &self.all_entries
        } else {
            self.entries.get(ns).map(Vec::as_slice).unwrap_or(&[])
        }
    }
}

pub(super) fn labels_at(body: &Json, path: &[&str]) -> Option<Labels> {
    let mut v = body;
    for p in path {
        v = v.get(*p)?;
    }
    Some(v.as_object().map(Labels::from_json).unwrap_or_default())
}

pub(super) fn selectors_of(r: &Resource, index: &Index, mesh: &MeshConfig) -> Vec<Selector> {
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
                ambient_matches: Vec::new(),
                workload_groups: Vec::new(),
            });
        }
        return out;
    }
    let Some((_, path)) = POLICY_SELECTORS.iter().find(|(k, _)| *k == r.kind) else {
        return out;
    };
    let has_target_ref =
        r.body.at("/spec/targetRef").is_some() || r.body.at("/spec/targetRefs").is_some();
    let workloads = index.workloads_for(ns, mesh);
    let entries = index.entries_for(ns, mesh);
    let namespace_wide = !has_target_ref && NAMESPACE_WIDE.contains(&r.kind.as_str());
    // ztunnel takes AuthorizationPolicy and PeerAuthentication, nothing else that
    // selects; policies with targetRefs go to waypoints only.
    let ztunnel_takes = !has_target_ref
        && matches!(
            r.kind.as_str(),
            "AuthorizationPolicy" | "PeerAuthentication"
        );
    // Istio reads an empty selector (`matchLabels: {}`) as none: the policy is
    // namespace-wide (mesh-wide in the root namespace).
    let selector_path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    let (labels, at) = match labels_at(&r.body, path) {
        Some(l) if l.is_empty() && namespace_wide => (None, selector_path.clone()),
        other => (other, Vec::new()),
    };
    match labels {
        Some(labels) => {
            let mut matches = Vec::new();
            let mut unknown = Vec::new();
            let mut spec_only = Vec::new();
            let mut entry_matches = 0;
            let mut ambient = Vec::new();
            for w in workloads.iter().filter(|w| w.labels.selected_by(&labels)) {
                if w.proxy || (w.ambient && ztunnel_takes && w.namespace == ns) {
                    matches.push(w.id.clone());
                } else if w.ambient {
                    ambient.push(w.id.clone());
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
                path: selector_path,
                scope: "workload".into(),
                invalid: labels.invalid(),
                labels: Some(labels),
                counts: "injected_workloads".into(),
                match_count: matches.len(),
                matches,
                unknown_matches: unknown,
                spec_only_matches: spec_only,
                workload_entry_matches: entry_matches,
                ambient_matches: ambient,
                workload_groups: Vec::new(),
            });
        }
        None if namespace_wide => {
            let matches: Vec<String> = workloads
                .iter()
                .filter(|w| w.proxy || (w.ambient && ztunnel_takes))
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
                path: at,
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
                ambient_matches: workloads
                    .iter()
                    .filter(|w| w.ambient && !ztunnel_takes)
                    .map(|w| w.id.clone())
                    .collect(),
                invalid: Vec::new(),
                workload_groups: Vec::new(),
            });
        }
        None => {}
    }
    out
}
