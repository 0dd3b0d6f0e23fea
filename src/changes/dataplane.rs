//! What a change moves between data planes: workloads from a sidecar to ambient
//! (ztunnel) or to none, ambient workloads gaining or losing a waypoint; and
//! AuthorizationPolicies moving between enforced as written, reduced to L4 by
//! ztunnel, and not enforced.

use crate::model::coverage::{authz_enforcement, Enforcement};
use crate::model::{Model, Workload};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};

/// A workload of both revisions whose data plane, or waypoint, the change moves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataplaneChange {
    pub workload: String,
    pub namespace: String,
    /// `sidecar`, `ambient`, `none` or `unknown`, in base and in head.
    pub base: String,
    pub head: String,
    /// The waypoints serving an ambient workload (its own, then its Services'),
    /// Gateway ids; empty otherwise.
    pub base_waypoints: Vec<String>,
    pub head_waypoints: Vec<String>,
    /// What happens at runtime after the change, and why.
    pub reason: String,
}

impl DataplaneChange {
    /// `sidecar`, `ambient`, `ambient + waypoint`, `none`, `unknown`: one side, in words.
    pub fn label(plane: &str, waypoints: &[String]) -> String {
        if plane == "ambient" && !waypoints.is_empty() {
            "ambient + waypoint".to_string()
        } else {
            plane.to_string()
        }
    }
    pub fn base_label(&self) -> String {
        Self::label(&self.base, &self.base_waypoints)
    }
    pub fn head_label(&self) -> String {
        Self::label(&self.head, &self.head_waypoints)
    }
}

/// An AuthorizationPolicy whose enforcement the change moves (or a new one that is
/// not enforced as written).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnforcementChange {
    pub policy: String,
    pub namespace: String,
    /// None: the policy is new, or selected nothing in base.
    pub base: Option<Enforcement>,
    pub head: Enforcement,
    /// What happens at runtime in head, and how to fix it.
    pub why: String,
}

/// The waypoints serving an ambient workload, its own first.
fn waypoints(w: &Workload) -> Vec<String> {
    if !w.ambient {
        return Vec::new();
    }
    let mut out: Vec<String> = w.waypoint.iter().cloned().collect();
    for s in &w.service_waypoints {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

fn reason(b: &Workload, h: &Workload, before: &[String], after: &[String]) -> String {
    let list = |ids: &[String]| ids.join(", ");
    match h.dataplane.as_str() {
        _ if b.dataplane == h.dataplane => {
            // Only the waypoint moved (both ambient).
            if after.is_empty() {
                format!(
                    "no waypoint serves it any more (was {}): only ztunnel enforces its AuthorizationPolicies, their HTTP rules are dropped or never match; label it or its Service istio.io/use-waypoint to keep them",
                    list(before)
                )
            } else if before.is_empty() {
                format!(
                    "waypoint {} now serves traffic addressed to it: HTTP rules bound to the waypoint with targetRefs apply",
                    list(after)
                )
            } else {
                format!("its waypoint changes: {} → {}", list(before), list(after))
            }
        }
        "sidecar" => format!(
            "{}: its own sidecar enforces mTLS and every AuthorizationPolicy rule",
            h.dataplane_reason
        ),
        "ambient" if after.is_empty() => format!(
            "{}: ztunnel gives it mTLS and L4 authorization only; HTTP rules of its AuthorizationPolicies need a waypoint (istio.io/use-waypoint) and targetRefs",
            h.dataplane_reason
        ),
        "ambient" => format!(
            "{}; waypoint {} serves traffic addressed to it",
            h.dataplane_reason,
            list(after)
        ),
        "none" => format!(
            "{}: no proxy and no ztunnel, so its traffic is plaintext and no policy applies to it",
            h.dataplane_reason
        ),
        _ => h.dataplane_reason.clone(),
    }
}

/// Workloads in both revisions whose data plane or waypoints differ, where ambient is
/// on one side: a move between a sidecar and none is the proxy-cost table's
/// (injection turned on or off), said once.
pub fn dataplanes(base: &Model, head: &Model) -> Vec<DataplaneChange> {
    let before: HashMap<&str, &Workload> =
        base.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    let mut out: Vec<DataplaneChange> = head
        .workloads
        .iter()
        .filter_map(|h| {
            let b = before.get(h.id.as_str())?;
            let (wb, wh) = (waypoints(b), waypoints(h));
            if b.dataplane == h.dataplane && wb == wh {
                return None;
            }
            if b.dataplane != "ambient" && h.dataplane != "ambient" {
                return None;
            }
            Some(DataplaneChange {
                workload: h.id.clone(),
                namespace: h.namespace.clone(),
                base: b.dataplane.clone(),
                head: h.dataplane.clone(),
                reason: reason(b, h, &wb, &wh),
                base_waypoints: wb,
                head_waypoints: wh,
            })
        })
        .collect();
    out.sort_by(|a, b| a.workload.cmp(&b.workload));
    out
}

/// AuthorizationPolicies whose enforcement differs between the revisions, and new
/// ones (or ones that selected nothing in base) not enforced as written.
pub fn enforcement(base: &Model, head: &Model) -> Vec<EnforcementChange> {
    let before = authz_enforcement(base);
    authz_enforcement(head)
        .into_values()
        .filter_map(|h| {
            let b = before.get(&h.resource).map(|b| b.enforcement);
            let moved = match b {
                Some(b) => b != h.enforcement,
                None => h.enforcement != Enforcement::AsWritten,
            };
            moved.then_some(EnforcementChange {
                policy: h.resource,
                namespace: h.namespace,
                base: b,
                head: h.enforcement,
                why: h.why,
            })
        })
        .collect()
}
