//! PeerAuthentication: each policy's mode and scope, and the mTLS mode each
//! namespace and workload ends up with.

use super::labels::{Labels, LabelsExt};
use super::selectors::Index;
use super::{Model, NamespaceMtls, PeerAuthn, Workload, SYSTEM_NAMESPACES};
use crate::config::MeshConfig;
use crate::manifest::Resource;
use crate::pointer::At;
use foldhash::{HashMap, HashSet};
use serde_json::Value as Json;
use std::collections::BTreeMap;

pub(super) fn mode_at(v: Option<&Json>) -> String {
    v.and_then(|m| m.get("mode"))
        .and_then(Json::as_str)
        .unwrap_or("UNSET")
        .to_string()
}

pub(super) fn peer_authn_of(r: &Resource, index: &Index, mesh: &MeshConfig) -> PeerAuthn {
    let ns = r.namespace.clone().unwrap_or_default();
    let mode = mode_at(r.body.at("/spec/mtls"));
    let port_modes: BTreeMap<String, String> = r
        .body
        .at("/spec/portLevelMtls")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .map(|(port, v)| (port.clone(), mode_at(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    let selector = r
        .body
        .at("/spec/selector/matchLabels")
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
            .filter(|w| !w.proxy && !w.ambient && w.proxy_known)
            .map(|w| w.id.clone())
            .collect(),
        proxy_unknown: covered
            .iter()
            .filter(|w| !w.proxy_known)
            .map(|w| w.id.clone())
            .collect(),
        ambient: covered
            .iter()
            .filter(|w| w.ambient)
            .map(|w| w.id.clone())
            .collect(),
        mode,
        port_modes,
    }
}

/// The workloads a mesh-wide policy really governs: not those of the system
/// namespaces or the root namespace (istiod and friends run without a proxy by
/// design), and not those whose namespace sets a mode of its own, which wins.
pub(super) fn narrow_mesh_scope(pas: &mut [PeerAuthn], index: &Index, mesh: &MeshConfig) {
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
        pa.ambient.retain(keep);
    }
}

/// Effective namespace mTLS modes: a namespace policy wins over the mesh-wide one;
/// with neither, Istio's default is PERMISSIVE.
pub(super) fn apply_mtls(model: &mut Model, pas: &[PeerAuthn], mesh: &MeshConfig) {
    let mesh_pa = pas.iter().find(|p| p.scope == "mesh" && p.mode != "UNSET");
    let mesh_mode = mesh_pa
        .map(|p| p.mode.clone())
        .unwrap_or_else(|| "PERMISSIVE".into());
    model.mtls_scopes.insert("mesh".into(), mesh_mode.clone());
    // Each namespace's first namespace-wide policy that sets a mode.
    let mut by_namespace: foldhash::HashMap<&str, &PeerAuthn> = foldhash::HashMap::default();
    for p in pas
        .iter()
        .filter(|p| p.scope == "namespace" && p.mode != "UNSET")
    {
        by_namespace.entry(p.namespace.as_str()).or_insert(p);
    }
    for (name, ns) in model.namespaces.iter_mut() {
        let own = by_namespace.get(name.as_str()).copied();
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
