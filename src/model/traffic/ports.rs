//! The Services in front of each workload: ports they disagree on, and workloads in
//! the mesh that serve ports no Service names.

use super::hosts::text;
use super::{array, path, Fronts, PortConflict, Unserved, I, K};
use crate::manifest::Resource;
use crate::model::workloads::pod_template;
use crate::model::Model;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One port of a Service selecting a workload.
struct Side<'a> {
    service: &'a str,
    index: usize,
    number: u64,
    protocol: String,
    /// `targetPort` as text; unset (or 0) is the port number.
    target: String,
}

impl Side<'_> {
    fn describe(&self) -> String {
        format!(
            "{} port {}/{} -> {}",
            self.service, self.number, self.protocol, self.target
        )
    }
}

/// Ports the Services of one sidecar workload disagree on: one port number with two
/// Kubernetes protocols (istioctl IST0116), or one target port reached from two port
/// numbers (IST0137). istiod builds one inbound listener per port of the workload,
/// so only one of the two definitions applies.
pub(super) fn conflicts(fronts: &Fronts, model: &Model) -> Vec<PortConflict> {
    let (bodies, services_of) = (&fronts.bodies, &fronts.services_of);
    let mut out = Vec::new();
    for w in model.workloads.iter().filter(|w| w.proxy) {
        let Some(services) = services_of.get(w.id.as_str()) else {
            continue;
        };
        let mut sides = Vec::new();
        for s in services {
            let Some(r) = bodies.get(s) else { continue };
            let spec = r.body.get("spec").unwrap_or(&Json::Null);
            for (index, p) in array(spec, "ports").iter().enumerate() {
                let Some(number) = p.get("port").and_then(Json::as_u64) else {
                    continue;
                };
                let target = match text(p.get("targetPort")).as_str() {
                    "" | "0" => number.to_string(),
                    t => t.to_string(),
                };
                sides.push(Side {
                    service: s,
                    index,
                    number,
                    protocol: p
                        .get("protocol")
                        .and_then(Json::as_str)
                        .unwrap_or("TCP")
                        .to_string(),
                    target,
                });
            }
        }
        let mut by_number: BTreeMap<u64, Vec<&Side>> = BTreeMap::new();
        let mut by_target: BTreeMap<&str, Vec<&Side>> = BTreeMap::new();
        for s in &sides {
            by_number.entry(s.number).or_default().push(s);
            by_target.entry(&s.target).or_default().push(s);
        }
        for (number, group) in by_number {
            let protocols: BTreeSet<&str> = group.iter().map(|s| s.protocol.as_str()).collect();
            if protocols.len() > 1 {
                out.push(conflict(&w.id, "protocol", number.to_string(), &group));
            }
        }
        for (target, group) in by_target {
            let numbers: BTreeSet<u64> = group.iter().map(|s| s.number).collect();
            if numbers.len() > 1 {
                out.push(conflict(&w.id, "target-port", target.to_string(), &group));
            }
        }
    }
    out
}

fn conflict(workload: &str, kind: &str, port: String, group: &[&Side]) -> PortConflict {
    // Point at the last definition: the one that adds the disagreement.
    let last = group[group.len() - 1];
    PortConflict {
        workload: workload.to_string(),
        conflict: kind.to_string(),
        port,
        sides: group.iter().map(|s| s.describe()).collect(),
        services: group
            .iter()
            .map(|s| s.service.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        resource: last.service.to_string(),
        path: path(&[K("spec"), K("ports"), I(last.index)]),
    }
}

/// Deployments, StatefulSets and DaemonSets in the mesh (a sidecar, or captured by
/// ztunnel) whose containers declare ports, that no Service of the repository selects.
pub(super) fn unserved(resources: &[Resource], model: &Model) -> Vec<Unserved> {
    let selected: std::collections::HashSet<&str> = model
        .services
        .iter()
        .flat_map(|s| s.selects.iter().map(String::as_str))
        .collect();
    let candidates: HashMap<&str, &crate::model::Workload> = model
        .workloads
        .iter()
        .filter(|w| {
            (w.proxy || w.ambient)
                && matches!(w.kind.as_str(), "Deployment" | "StatefulSet" | "DaemonSet")
                && !selected.contains(w.id.as_str())
        })
        .map(|w| (w.id.as_str(), w))
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    // Workloads a progressive-delivery controller fronts with Services it creates
    // itself (a Flagger Canary's targetRef: `<name>`, `<name>-primary`, `<name>-canary`).
    let fronted: std::collections::HashSet<(&str, &str, &str)> = resources
        .iter()
        .filter(|r| r.kind == "Canary" && r.api_version.starts_with("flagger.app/"))
        .filter_map(|r| {
            let t = r.body.pointer("/spec/targetRef")?;
            Some((
                r.namespace.as_deref()?,
                t.get("kind").and_then(Json::as_str)?,
                t.get("name").and_then(Json::as_str)?,
            ))
        })
        .collect();
    let mut out: Vec<Unserved> = resources
        .iter()
        .filter(|r| candidates.contains_key(r.id.as_str()))
        .filter(|r| {
            let ns = r.namespace.as_deref().unwrap_or_default();
            !fronted.contains(&(ns, r.kind.as_str(), r.name.as_str()))
        })
        .filter_map(|r| {
            let spec = pod_template(r)?.get("spec")?;
            // The injected proxy's own ports (15090 metrics, 15020/15021 status) are
            // not the workload's.
            let ports: BTreeSet<u64> = array(spec, "containers")
                .iter()
                .filter(|c| c.get("name").and_then(Json::as_str) != Some("istio-proxy"))
                .flat_map(|c| array(c, "ports"))
                .filter_map(|p| p.get("containerPort").and_then(Json::as_u64))
                .filter(|p| !matches!(p, 15020 | 15021 | 15090))
                .collect();
            (!ports.is_empty()).then(|| Unserved {
                workload: r.id.clone(),
                ports: ports.into_iter().collect(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.workload.cmp(&b.workload));
    out.dedup_by(|a, b| a.workload == b.workload);
    out
}
