//! Coverage: how much of the mesh is really enforced, per namespace and in total.

use super::Model;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceCoverage {
    pub workloads: usize,
    pub workloads_with_proxy: usize,
    pub mtls_mode: String,
    pub selectors_effective: usize,
    pub selectors_ineffective: usize,
    pub workload_entries_selected: usize,
    pub workload_entries_total: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TotalCoverage {
    pub namespaces: usize,
    pub namespaces_strict: usize,
    pub namespaces_injected: usize,
    pub workloads: usize,
    pub workloads_with_proxy: usize,
    pub selectors_effective: usize,
    pub selectors_ineffective: usize,
    pub workload_entries_selected: usize,
    pub workload_entries_total: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    pub total: TotalCoverage,
    pub namespaces: BTreeMap<String, NamespaceCoverage>,
}

pub fn of(model: &Model) -> Coverage {
    let mut namespaces: BTreeMap<String, NamespaceCoverage> = model
        .namespaces
        .values()
        .map(|ns| {
            (
                ns.name.clone(),
                NamespaceCoverage {
                    workloads: ns.workloads,
                    workloads_with_proxy: ns.workloads_with_proxy,
                    mtls_mode: ns.mtls.mode.clone(),
                    ..Default::default()
                },
            )
        })
        .collect();
    for s in &model.selectors {
        if let Some(ns) = namespaces.get_mut(&s.namespace) {
            if s.match_count > 0 || !s.workload_groups.is_empty() {
                ns.selectors_effective += 1;
            } else if s.unknown_matches.is_empty() {
                ns.selectors_ineffective += 1;
            }
            // A selector whose only matches may or may not have a proxy (their
            // namespace is not declared) is counted neither way.
        }
    }
    for e in &model.workload_entries {
        if let Some(ns) = namespaces.get_mut(&e.namespace) {
            ns.workload_entries_total += 1;
            if !e.selected_by.is_empty() {
                ns.workload_entries_selected += 1;
            }
        }
    }
    let mut total = TotalCoverage {
        namespaces: namespaces.len(),
        namespaces_strict: namespaces
            .values()
            .filter(|n| n.mtls_mode == "STRICT")
            .count(),
        namespaces_injected: model
            .namespaces
            .values()
            .filter(|n| n.injection.enabled == Some(true))
            .count(),
        ..Default::default()
    };
    for n in namespaces.values() {
        total.workloads += n.workloads;
        total.workloads_with_proxy += n.workloads_with_proxy;
        total.selectors_effective += n.selectors_effective;
        total.selectors_ineffective += n.selectors_ineffective;
        total.workload_entries_selected += n.workload_entries_selected;
        total.workload_entries_total += n.workload_entries_total;
    }
    Coverage { total, namespaces }
}
