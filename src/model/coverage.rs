//! Coverage: how much of the mesh is really enforced, per namespace and in total.

use super::Model;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// Fields added after reports were first stored carry `#[serde(default)]`: a stored
// report from before them reads back with 0.

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceCoverage {
    pub workloads: usize,
    /// Workloads with a sidecar.
    pub workloads_with_proxy: usize,
    /// Workloads ztunnel captures (ambient), and of those the ones a waypoint serves.
    #[serde(default)]
    pub workloads_ambient: usize,
    #[serde(default)]
    pub workloads_waypoint: usize,
    pub mtls_mode: String,
    pub selectors_effective: usize,
    pub selectors_ineffective: usize,
    pub workload_entries_selected: usize,
    pub workload_entries_total: usize,
    /// AuthorizationPolicies of the namespace by how they are enforced (see
    /// [`Enforcement`]); policies that select nothing are not counted.
    #[serde(default)]
    pub authz_as_written: usize,
    #[serde(default)]
    pub authz_reduced_to_l4: usize,
    #[serde(default)]
    pub authz_not_enforced: usize,
    /// Route destinations (VirtualService and Gateway API, not mirrors) that reach
    /// pods, that route nowhere (no such host, port or subset, or a subset without
    /// pods), and that could not be checked (the host is not the repository's).
    #[serde(default)]
    pub routes_resolving: usize,
    #[serde(default)]
    pub routes_nowhere: usize,
    #[serde(default)]
    pub routes_unchecked: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TotalCoverage {
    pub namespaces: usize,
    pub namespaces_strict: usize,
    pub namespaces_injected: usize,
    /// Namespaces labelled `istio.io/dataplane-mode=ambient`.
    #[serde(default)]
    pub namespaces_ambient: usize,
    pub workloads: usize,
    pub workloads_with_proxy: usize,
    #[serde(default)]
    pub workloads_ambient: usize,
    #[serde(default)]
    pub workloads_waypoint: usize,
    pub selectors_effective: usize,
    pub selectors_ineffective: usize,
    pub workload_entries_selected: usize,
    pub workload_entries_total: usize,
    #[serde(default)]
    pub authz_as_written: usize,
    #[serde(default)]
    pub authz_reduced_to_l4: usize,
    #[serde(default)]
    pub authz_not_enforced: usize,
    /// Route destinations (VirtualService and Gateway API, not mirrors) that reach
    /// pods, that route nowhere (no such host, port or subset, or a subset without
    /// pods), and that could not be checked (the host is not the repository's).
    #[serde(default)]
    pub routes_resolving: usize,
    #[serde(default)]
    pub routes_nowhere: usize,
    #[serde(default)]
    pub routes_unchecked: usize,
}

impl TotalCoverage {
    /// Adds `t`'s counts to these (a repository's clusters added up).
    pub fn add(&mut self, t: &TotalCoverage) {
        self.namespaces += t.namespaces;
        self.namespaces_strict += t.namespaces_strict;
        self.namespaces_injected += t.namespaces_injected;
        self.namespaces_ambient += t.namespaces_ambient;
        self.workloads += t.workloads;
        self.workloads_with_proxy += t.workloads_with_proxy;
        self.workloads_ambient += t.workloads_ambient;
        self.workloads_waypoint += t.workloads_waypoint;
        self.selectors_effective += t.selectors_effective;
        self.selectors_ineffective += t.selectors_ineffective;
        self.workload_entries_selected += t.workload_entries_selected;
        self.workload_entries_total += t.workload_entries_total;
        self.authz_as_written += t.authz_as_written;
        self.authz_reduced_to_l4 += t.authz_reduced_to_l4;
        self.authz_not_enforced += t.authz_not_enforced;
        self.routes_resolving += t.routes_resolving;
        self.routes_nowhere += t.routes_nowhere;
        self.routes_unchecked += t.routes_unchecked;
    }

    /// Workloads with neither a sidecar nor ztunnel (including those whose namespace's
    /// labels the repository does not say).
    pub fn workloads_without_dataplane(&self) -> usize {
        self.workloads
            .saturating_sub(self.workloads_with_proxy)
            .saturating_sub(self.workloads_ambient)
    }

    /// AuthorizationPolicies counted by enforcement (those that select something).
    pub fn authz_counted(&self) -> usize {
        self.authz_as_written + self.authz_reduced_to_l4 + self.authz_not_enforced
    }

    /// Route destinations counted (reaching, nowhere, not checked).
    pub fn routes(&self) -> usize {
        self.routes_resolving + self.routes_nowhere + self.routes_unchecked
    }

    /// Some AuthorizationPolicy is enforced only in part, or not at all.
    pub fn authz_weakened(&self) -> bool {
        self.authz_reduced_to_l4 + self.authz_not_enforced > 0
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    pub total: TotalCoverage,
    pub namespaces: BTreeMap<String, NamespaceCoverage>,
}

/// How an AuthorizationPolicy is enforced where it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    /// As written wherever it applies: by sidecars, by the waypoint its targetRefs
    /// bind it to, or by ztunnel when it has only L4 fields.
    AsWritten,
    /// ztunnel, which sees no HTTP, enforces part of it: an ALLOW policy without its
    /// rules that have HTTP fields (stricter, or denying everything), a DENY policy
    /// without its HTTP fields (wider) or without the rules that can no longer match;
    /// also a policy ztunnel ignores or is not sent whose sidecar workloads enforce it.
    ReducedToL4,
    /// Nothing enforces it: ztunnel ignores it or is not sent it and no sidecar is in
    /// its scope, or no waypoint serves what any of its targetRefs names.
    NotEnforced,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::AsWritten => "as-written",
            Enforcement::ReducedToL4 => "reduced-to-l4",
            Enforcement::NotEnforced => "not-enforced",
        }
    }

    /// For sentences: "enforced as written", "reduced to L4 by ztunnel", "not enforced".
    pub fn text(self) -> &'static str {
        match self {
            Enforcement::AsWritten => "enforced as written",
            Enforcement::ReducedToL4 => "reduced to L4 by ztunnel",
            Enforcement::NotEnforced => "not enforced",
        }
    }
}

/// One AuthorizationPolicy that selects something, and how it is enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEnforcement {
    /// `AuthorizationPolicy/ns/name`.
    pub resource: String,
    pub namespace: String,
    pub enforcement: Enforcement,
    /// What happens at runtime, for the reader of a change.
    pub why: String,
}

/// The namespace of an id `Kind/namespace/name` (names and namespaces hold no `/`).
fn namespace_of(id: &str) -> Option<&str> {
    let mut parts = id.split('/');
    let (_kind, ns, _name) = (parts.next()?, parts.next()?, parts.next()?);
    parts.next().is_none().then_some(ns)
}

/// Every AuthorizationPolicy of the model that selects something, with how it is
/// enforced, by resource id. A policy whose selector selects nothing (or only
/// workloads whose proxy is unknown) is not here: `selectors_ineffective` counts it.
pub fn authz_enforcement(model: &Model) -> BTreeMap<String, PolicyEnforcement> {
    let mut out = BTreeMap::new();
    let mut put = |resource: &str, ns: Option<&str>, enforcement, why: String| {
        if let Some(ns) = ns {
            out.entry(resource.to_string())
                .or_insert_with(|| PolicyEnforcement {
                    resource: resource.to_string(),
                    namespace: ns.to_string(),
                    enforcement,
                    why,
                });
        }
    };
    // targetRefs first: such a policy goes to waypoints (or gateways) only.
    let mut refs: BTreeMap<&str, Vec<&super::TargetRef>> = BTreeMap::new();
    for t in model
        .target_refs
        .iter()
        .filter(|t| t.kind == "AuthorizationPolicy")
    {
        refs.entry(t.resource.as_str()).or_default().push(t);
    }
    for (resource, refs) in &refs {
        let unserved: Vec<String> = refs
            .iter()
            .filter(|t| matches!(t.state.as_str(), "not-found" | "not-bound"))
            .map(|t| {
                let what = if t.state == "not-found" {
                    "not in this repository"
                } else {
                    "no waypoint serves it"
                };
                format!("{} {} ({what})", t.target_kind, t.target_name)
            })
            .collect();
        if unserved.len() == refs.len() {
            put(
                resource,
                namespace_of(resource),
                Enforcement::NotEnforced,
                format!(
                    "its targetRefs name {}: no waypoint applies it, and neither sidecars nor ztunnel take a policy with targetRefs. Label what it names istio.io/use-waypoint with a waypoint, or name a Service or Gateway a waypoint serves",
                    unserved.join(", ")
                ),
            );
        } else {
            let at: Vec<String> = refs
                .iter()
                .filter(|t| !matches!(t.state.as_str(), "not-found" | "not-bound"))
                .map(|t| match &t.waypoint {
                    Some(w) => format!("waypoint {w}"),
                    None => format!("{} {}", t.target_kind, t.target_name),
                })
                .collect();
            put(
                resource,
                namespace_of(resource),
                Enforcement::AsWritten,
                format!("applied as written by {}", at.join(", ")),
            );
        }
    }
    for z in &model.ztunnel_authz {
        let ambient = z.ambient_workloads.len();
        let sidecars = z.sidecar_workloads;
        let l7 = |outcome: &str| {
            let fields: Vec<&str> = z
                .rules
                .iter()
                .filter(|r| r.outcome == outcome)
                .flat_map(|r| r.l7_fields.iter().map(String::as_str))
                .collect();
            fields.join(", ")
        };
        let fix = "bind it to a waypoint with targetRefs (and istio.io/use-waypoint on the Service) to enforce it whole, or keep to L4 fields";
        let (enforcement, why) = match z.outcome.as_str() {
            "as-written" => (
                Enforcement::AsWritten,
                "ztunnel enforces it as written (it has only L4 fields)".to_string(),
            ),
            "stricter" => (
                Enforcement::ReducedToL4,
                format!(
                    "ztunnel drops the ALLOW rules with HTTP fields ({}) on {ambient} ambient workload(s): connections those rules allowed are reset. To fix: {fix}",
                    l7("dropped")
                ),
            ),
            "denies-all" => (
                Enforcement::ReducedToL4,
                format!(
                    "every ALLOW rule has HTTP fields ({}), which ztunnel drops: it denies every connection to {ambient} ambient workload(s). To fix: {fix}",
                    l7("dropped")
                ),
            ),
            "wider" => (
                Enforcement::ReducedToL4,
                format!(
                    "ztunnel drops the HTTP fields of its DENY rules ({}) and denies whole connections on {ambient} ambient workload(s), more than written. To fix: {fix}",
                    l7("widened")
                ),
            ),
            "partly-ignored" => (
                Enforcement::ReducedToL4,
                format!(
                    "DENY rules that need HTTP fields ({}) never match at ztunnel: on {ambient} ambient workload(s) what they deny passes. To fix: {fix}",
                    l7("never-fires")
                ),
            ),
            "ignored" | "not-sent" => {
                let what = if z.outcome == "ignored" {
                    format!(
                        "no DENY rule can match at ztunnel (HTTP fields: {}): what it denies passes",
                        l7("never-fires")
                    )
                } else if z.dry_run {
                    "ztunnel is not sent dry-run policies".to_string()
                } else {
                    format!(
                        "ztunnel is not sent {} policies: nothing applies it",
                        z.action
                    )
                };
                if sidecars > 0 {
                    (
                        Enforcement::ReducedToL4,
                        format!(
                            "enforced by {sidecars} sidecar workload(s); on {ambient} ambient workload(s) {what}. To fix: {fix}"
                        ),
                    )
                } else {
                    (
                        Enforcement::NotEnforced,
                        format!("on {ambient} ambient workload(s) {what}. To fix: {fix}"),
                    )
                }
            }
            other => (
                Enforcement::ReducedToL4,
                format!("ztunnel's outcome is {other}"),
            ),
        };
        put(&z.resource, namespace_of(&z.resource), enforcement, why);
    }
    for s in model
        .selectors
        .iter()
        .filter(|s| s.kind == "AuthorizationPolicy" && s.match_count > 0)
    {
        put(
            &s.resource,
            Some(s.namespace.as_str()),
            Enforcement::AsWritten,
            "enforced as written by the sidecars it selects".to_string(),
        );
    }
    out
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
                    workloads_ambient: ns.workloads_ambient,
                    workloads_waypoint: ns.workloads_waypoint,
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
    for p in authz_enforcement(model).values() {
        if let Some(ns) = namespaces.get_mut(&p.namespace) {
            match p.enforcement {
                Enforcement::AsWritten => ns.authz_as_written += 1,
                Enforcement::ReducedToL4 => ns.authz_reduced_to_l4 += 1,
                Enforcement::NotEnforced => ns.authz_not_enforced += 1,
            }
        }
    }
    for d in model
        .traffic
        .destinations
        .iter()
        .filter(|d| d.role != "mirror")
    {
        if let Some(ns) = namespaces.get_mut(&d.namespace) {
            match d.outcome() {
                "reaches" => ns.routes_resolving += 1,
                "not-checked" => ns.routes_unchecked += 1,
                _ => ns.routes_nowhere += 1,
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
        namespaces_ambient: model
            .namespaces
            .values()
            .filter(|n| n.ambient == Some(true))
            .count(),
        ..Default::default()
    };
    for n in namespaces.values() {
        total.workloads += n.workloads;
        total.workloads_with_proxy += n.workloads_with_proxy;
        total.workloads_ambient += n.workloads_ambient;
        total.workloads_waypoint += n.workloads_waypoint;
        total.selectors_effective += n.selectors_effective;
        total.selectors_ineffective += n.selectors_ineffective;
        total.workload_entries_selected += n.workload_entries_selected;
        total.workload_entries_total += n.workload_entries_total;
        total.authz_as_written += n.authz_as_written;
        total.authz_reduced_to_l4 += n.authz_reduced_to_l4;
        total.authz_not_enforced += n.authz_not_enforced;
        total.routes_resolving += n.routes_resolving;
        total.routes_nowhere += n.routes_nowhere;
        total.routes_unchecked += n.routes_unchecked;
    }
    Coverage { total, namespaces }
}
