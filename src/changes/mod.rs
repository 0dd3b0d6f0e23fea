//! What a change does to the mesh, beyond its findings: the identities it gives
//! workloads, what VMs of a WorkloadGroup will start with, how selections move, what
//! new proxies cost, where calls gain a hop, which data plane workloads move to and
//! how AuthorizationPolicies are enforced after it. Pure functions of the base and head
//! models; rendered by the markdown report and part of the JSON (`changes`).

mod bootstrap;
mod cost;
mod dataplane;
mod latency;
mod routes;

use crate::config::MeshConfig;
use crate::model::{Model, Selector};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use bootstrap::{RootCert, Token, VmBootstrap};
pub use cost::{ProxyCost, ProxyCostItem, Uncounted};
pub use dataplane::{DataplaneChange, EnforcementChange};
pub use latency::NewHop;
pub use routes::{RouteChange, RouteShares, Share};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Changes {
    pub identities: Vec<IdentityChange>,
    pub vm_bootstrap: Vec<VmBootstrap>,
    pub selectors: Vec<SelectorChange>,
    pub proxy_cost: ProxyCost,
    pub latency: Vec<NewHop>,
    /// Workloads the change moves between data planes (sidecar, ambient, none) or
    /// whose waypoint it changes. Absent in reports stored before it existed.
    #[serde(default)]
    pub dataplanes: Vec<DataplaneChange>,
    /// AuthorizationPolicies whose enforcement the change moves (as written, reduced
    /// to L4 by ztunnel, not enforced). Absent in reports stored before it existed.
    #[serde(default)]
    pub authz_enforcement: Vec<EnforcementChange>,
    /// Route rules the change adds or changes, or whose destinations it moves, with
    /// the share of traffic reaching pods. Absent in reports stored before it existed.
    #[serde(default)]
    pub routes: Vec<RouteChange>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.identities.is_empty()
            && self.vm_bootstrap.is_empty()
            && self.selectors.is_empty()
            && self.proxy_cost.workloads.is_empty()
            && self.proxy_cost.uncounted.is_empty()
            && self.latency.is_empty()
            && self.dataplanes.is_empty()
            && self.authz_enforcement.is_empty()
            && self.routes.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Added,
    Changed,
    /// The selector is as it was; what it selects is not.
    SelectionChanged,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Changed => "changed",
            Change::SelectionChanged => "selection changed",
        }
    }
}

/// The identity an added or changed workload or WorkloadGroup will present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdentityChange {
    pub subject: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub change: Change,
    pub service_account: String,
    /// Set when the change changes the service account.
    pub base_service_account: Option<String>,
    pub spiffe_id: String,
    /// A workload presents its identity only through a proxy; without one its calls
    /// are plaintext and match no `principals`.
    pub proxy: bool,
    /// AuthorizationPolicies (ALLOW, then DENY) whose sources name it.
    pub allowed_by: Vec<String>,
    pub denied_by: Vec<String>,
    /// For a changed service account: the ALLOW policies that named the old identity.
    pub base_allowed_by: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SelectionCount {
    pub workloads: usize,
    pub workload_entries: usize,
    /// ServiceEntries only: WorkloadGroups whose VMs it will select.
    pub workload_groups: usize,
}

impl SelectionCount {
    pub fn total(&self) -> usize {
        self.workloads + self.workload_entries + self.workload_groups
    }
}

/// A selector the change adds or changes, or whose selection it moves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectorChange {
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    pub path: Vec<String>,
    /// `workload`, `namespace` or `mesh` (the last two have no labels).
    pub scope: String,
    pub labels: Option<BTreeMap<String, String>>,
    pub change: Change,
    /// What is counted: `injected_workloads` or `workloads_and_entries`.
    pub counts: String,
    pub base: Option<SelectionCount>,
    pub head: SelectionCount,
    /// Selected in head, not in base.
    pub gained: Vec<String>,
    /// Selected in base, not in head.
    pub lost: Vec<String>,
}

/// The change's effect, computed from the base and head models.
pub fn of(base: &Model, head: &Model, mesh: &MeshConfig) -> Changes {
    Changes {
        identities: identities(base, head),
        vm_bootstrap: bootstrap::of(base, head, mesh),
        selectors: selectors(base, head),
        proxy_cost: cost::of(base, head, mesh),
        latency: latency::of(base, head, mesh),
        dataplanes: dataplane::dataplanes(base, head),
        authz_enforcement: dataplane::enforcement(base, head),
        routes: routes::of(base, head),
    }
}

fn identities(base: &Model, head: &Model) -> Vec<IdentityChange> {
    let mut out = Vec::new();
    let lookup = |m: &Model, ns: &str, sa: &str| m.identities.get(&format!("{ns}/{sa}")).cloned();
    let base_workloads: HashMap<&str, &crate::model::Workload> =
        base.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    for w in &head.workloads {
        let before = base_workloads.get(w.id.as_str());
        let change = match before {
            None => Change::Added,
            Some(b)
                if b.template_hash != w.template_hash
                    || b.service_account != w.service_account
                    || b.proxy != w.proxy =>
            {
                Change::Changed
            }
            Some(_) => continue,
        };
        let Some(id) = lookup(head, &w.namespace, &w.service_account) else {
            continue;
        };
        let base_sa = before
            .filter(|b| b.service_account != w.service_account)
            .map(|b| b.service_account.clone());
        out.push(IdentityChange {
            subject: w.id.clone(),
            kind: w.kind.clone(),
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            change,
            base_allowed_by: base_sa
                .as_deref()
                .and_then(|sa| lookup(base, &w.namespace, sa))
                .map(|i| i.allowed_by)
                .unwrap_or_default(),
            base_service_account: base_sa,
            service_account: w.service_account.clone(),
            spiffe_id: id.spiffe_id,
            proxy: w.proxy,
            allowed_by: id.allowed_by,
            denied_by: id.denied_by,
        });
    }
    let base_groups: HashMap<&str, &crate::model::WorkloadGroup> = base
        .workload_groups
        .iter()
        .map(|g| (g.id.as_str(), g))
        .collect();
    for g in &head.workload_groups {
        let before = base_groups.get(g.id.as_str());
        let change = match before {
            None => Change::Added,
            Some(b) if b.spec_hash != g.spec_hash => Change::Changed,
            Some(_) => continue,
        };
        let Some(id) = lookup(head, &g.namespace, &g.service_account) else {
            continue;
        };
        let base_sa = before
            .filter(|b| b.service_account != g.service_account)
            .map(|b| b.service_account.clone());
        out.push(IdentityChange {
            subject: g.id.clone(),
            kind: "WorkloadGroup".into(),
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            change,
            base_allowed_by: base_sa
                .as_deref()
                .and_then(|sa| lookup(base, &g.namespace, sa))
                .map(|i| i.allowed_by)
                .unwrap_or_default(),
            base_service_account: base_sa,
            service_account: g.service_account.clone(),
            spiffe_id: id.spiffe_id,
            // VMs run the proxy themselves (istio-sidecar on the machine).
            proxy: true,
            allowed_by: id.allowed_by,
            denied_by: id.denied_by,
        });
    }
    out.sort_by(|a, b| a.subject.cmp(&b.subject));
    out
}

fn count_of(s: &Selector) -> SelectionCount {
    SelectionCount {
        workloads: s.match_count.saturating_sub(s.workload_entry_matches),
        workload_entries: s.workload_entry_matches,
        workload_groups: s.workload_groups.len(),
    }
}

fn selected(s: &Selector) -> BTreeSet<&str> {
    s.matches
        .iter()
        .chain(&s.workload_groups)
        .map(String::as_str)
        .collect()
}

fn selectors(base: &Model, head: &Model) -> Vec<SelectorChange> {
    let key = |s: &Selector| (s.resource.clone(), s.path.join("."));
    let base_by: HashMap<(String, String), &Selector> =
        base.selectors.iter().map(|s| (key(s), s)).collect();
    let mut out = Vec::new();
    for s in &head.selectors {
        let before = base_by.get(&key(s)).copied();
        let now = selected(s);
        let then = before.map(selected).unwrap_or_default();
        let change = match before {
            None => Change::Added,
            Some(b) if b.labels != s.labels => Change::Changed,
            Some(_) if then != now => Change::SelectionChanged,
            Some(_) => continue,
        };
        out.push(SelectorChange {
            resource: s.resource.clone(),
            kind: s.kind.clone(),
            namespace: s.namespace.clone(),
            path: s.path.clone(),
            scope: s.scope.clone(),
            labels: s.labels.clone(),
            change,
            counts: s.counts.clone(),
            base: before.map(count_of),
            head: count_of(s),
            gained: now.difference(&then).map(|s| s.to_string()).collect(),
            lost: then.difference(&now).map(|s| s.to_string()).collect(),
        });
    }
    out.sort_by(|a, b| (&a.resource, &a.path).cmp(&(&b.resource, &b.path)));
    out
}
