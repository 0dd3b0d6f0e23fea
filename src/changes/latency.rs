//! Where the change adds a hop: a caller and its callee that both run a proxy after
//! the change, where at least one of them did not before, so each call now passes
//! two proxies (the caller's outbound, the callee's inbound).
//!
//! Who calls whom is decided from the repository, in two ways, and each pair says
//! which: a Service's host name in the caller's env values, args or command (the
//! callee is what the Service selects), and an ALLOW AuthorizationPolicy whose source
//! names the caller (by principal, namespace or service account) and whose selector
//! (or namespace) covers the callee.

use super::cost::display;
use crate::model::{Model, Selector, Workload};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewHop {
    pub caller: String,
    pub callee: String,
    /// Proxies a call passed before the change (0 or 1) and after it (2).
    pub proxies_before: u8,
    pub proxies_after: u8,
    /// How meshward decided that the caller calls the callee.
    pub decided_by: Vec<String>,
}

/// Pairs kept in a report; more are counted in the last one's place by the renderer.
const MAX_PAIRS: usize = 200;

/// What a selector would select by its labels alone, injected or not: a workload
/// whose proxy is still pending is a callee all the same.
fn by_labels<'a>(s: &Selector, workloads: &[&'a Workload], root_ns: bool) -> Vec<&'a Workload> {
    workloads
        .iter()
        .copied()
        .filter(|w| root_ns || w.namespace == s.namespace)
        .filter(|w| match &s.labels {
            Some(l) => l.iter().all(|(k, v)| w.labels.get(k) == Some(v)),
            None => true,
        })
        .collect()
}

pub fn of(base: &Model, head: &Model, mesh: &crate::config::MeshConfig) -> Vec<NewHop> {
    let before: HashMap<&str, &Workload> =
        base.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    let now: HashMap<&str, &Workload> = head.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    // Injected after the change (pending rollouts included: they get a proxy when
    // their pods are recreated) and existing before it.
    let injected = |id: &str| now.get(id).is_some_and(|w| w.proxy || w.pending_rollout);
    let newly = |id: &str| injected(id) && before.get(id).is_some_and(|b| !b.proxy);
    let existed = |id: &str| before.contains_key(id);
    if !head.workloads.iter().any(|w| newly(&w.id)) {
        return Vec::new();
    }

    // Only pairs that can become a new hop are recorded, so a policy that allows
    // everyone in a large mesh costs (new × all), not (all × all).
    let hop = |caller: &str, callee: &str| {
        caller != callee
            && injected(caller)
            && injected(callee)
            && (newly(caller) || newly(callee))
            && existed(caller)
            && existed(callee)
    };
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let services: HashMap<&str, &crate::model::Service> =
        head.services.iter().map(|s| (s.id.as_str(), s)).collect();
    for w in &head.workloads {
        for c in &w.calls {
            let Some(svc) = services.get(c.service.as_str()) else {
                continue;
            };
            for callee in svc.selects.iter().filter(|callee| hop(&w.id, callee)) {
                edges
                    .entry((w.id.clone(), callee.clone()))
                    .or_default()
                    .insert(format!(
                        "{} of {} names Service {}/{} ({})",
                        c.field,
                        display(&w.id),
                        svc.namespace,
                        svc.name,
                        c.host
                    ));
            }
        }
    }
    // policy → (caller, how the policy names it)
    let mut callers_of: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (key, identity) in &head.identities {
        let callers = head
            .service_accounts
            .get(key)
            .into_iter()
            .flatten()
            .map(String::as_str)
            .filter(|id| now.contains_key(id));
        for caller in callers {
            for m in identity.matched_by.iter().filter(|m| m.action == "ALLOW") {
                callers_of
                    .entry(m.policy.as_str())
                    .or_default()
                    .push((caller, m.via.as_str()));
            }
        }
    }
    let all_workloads: Vec<&Workload> = head.workloads.iter().collect();
    let mut workloads_in: HashMap<&str, Vec<&Workload>> = HashMap::default();
    for w in &head.workloads {
        workloads_in
            .entry(w.namespace.as_str())
            .or_default()
            .push(w);
    }
    let no_workloads: Vec<&Workload> = Vec::new();
    for s in head
        .selectors
        .iter()
        .filter(|s| s.kind == "AuthorizationPolicy")
    {
        let Some(callers) = callers_of.get(s.resource.as_str()) else {
            continue;
        };
        // A policy in the root namespace applies in every namespace; any other only
        // in its own.
        let root_ns = s.namespace == mesh.root_namespace;
        let scope = if root_ns {
            &all_workloads
        } else {
            workloads_in
                .get(s.namespace.as_str())
                .unwrap_or(&no_workloads)
        };
        let callees = by_labels(s, scope, root_ns);
        let new_callees: Vec<&&Workload> = callees.iter().filter(|w| newly(&w.id)).collect();
        for (caller, via) in callers {
            let candidates: Vec<&Workload> = if newly(caller) {
                callees.clone()
            } else {
                new_callees.iter().map(|w| **w).collect()
            };
            for callee in candidates.into_iter().filter(|w| hop(caller, &w.id)) {
                edges
                    .entry((caller.to_string(), callee.id.clone()))
                    .or_default()
                    .insert(format!("{} allows {via}", display(&s.resource)));
            }
        }
        if edges.len() > MAX_PAIRS {
            break;
        }
    }

    let mut out = Vec::new();
    for ((caller, callee), why) in edges {
        let before_count = [&caller, &callee]
            .iter()
            .filter(|id| before.get(id.as_str()).is_some_and(|w| w.proxy))
            .count() as u8;
        out.push(NewHop {
            caller,
            callee,
            proxies_before: before_count,
            proxies_after: 2,
            decided_by: why.into_iter().collect(),
        });
        if out.len() >= MAX_PAIRS {
            break;
        }
    }
    out
}
