//! What a VM registered from a WorkloadGroup starts with: the `cluster.env` keys that
//! `istioctl x workload entry configure` takes from the group, the root certificate and
//! token it must fetch, and the ServiceEntries that will give it a name.

use super::Change;
use crate::config::MeshConfig;
use crate::model::{Model, WorkloadGroup};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Istio's per-namespace root certificate ConfigMap, and its key.
pub const ROOT_CERT_CONFIG_MAP: &str = "istio-ca-root-cert";
pub const ROOT_CERT_KEY: &str = "root-cert.pem";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmBootstrap {
    pub workload_group: String,
    pub namespace: String,
    pub name: String,
    pub change: Change,
    /// The keys of `cluster.env` that come from the group (sorted, as istioctl writes
    /// them); the cluster-specific ones (CA_ADDR, ISTIO_META_CLUSTER_ID, …) are not here.
    pub cluster_env: BTreeMap<String, String>,
    /// The labels the VM's WorkloadEntry will carry.
    pub labels: BTreeMap<String, String>,
    pub spiffe_id: String,
    pub root_cert: RootCert,
    pub token: Token,
    /// ServiceEntries whose workloadSelector selects those labels.
    pub service_entries: Vec<String>,
    pub service_entry_count: usize,
    /// Kubernetes Services whose selector selects them.
    pub services: Vec<String>,
    /// What else the reader should know (labels overridden, no ports, no template).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootCert {
    pub config_map: String,
    pub namespace: String,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    pub service_account: String,
    pub namespace: String,
    pub audience: String,
}

pub fn of(base: &Model, head: &Model, mesh: &MeshConfig) -> Vec<VmBootstrap> {
    let before: HashMap<&str, &WorkloadGroup> = base
        .workload_groups
        .iter()
        .map(|g| (g.id.as_str(), g))
        .collect();
    head.workload_groups
        .iter()
        .filter_map(|g| {
            let change = match before.get(g.id.as_str()) {
                None => Change::Added,
                Some(b) if b.spec_hash != g.spec_hash => Change::Changed,
                Some(_) => return None,
            };
            Some(preview(g, change, mesh))
        })
        .collect()
}

fn preview(g: &WorkloadGroup, change: Change, mesh: &MeshConfig) -> VmBootstrap {
    let mut ports: Vec<(&String, &i64)> = g.ports.iter().collect();
    ports.sort_by_key(|(name, n)| (**n, name.as_str()));
    let inbound = if ports.is_empty() {
        "*".to_string()
    } else {
        ports
            .iter()
            .map(|(_, n)| n.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    set("CANONICAL_REVISION", g.canonical_revision.clone());
    set("CANONICAL_SERVICE", g.canonical_service.clone());
    set("ISTIO_INBOUND_PORTS", inbound);
    set(
        "ISTIO_METAJSON_LABELS",
        serde_json::to_string(&g.labels).unwrap_or_default(),
    );
    set("ISTIO_META_NETWORK", g.network.clone().unwrap_or_default());
    if !g.ports.is_empty() {
        // By port name, as istioctl sorts them.
        let pod_ports: Vec<serde_json::Value> = g
            .ports
            .iter()
            .map(|(name, n)| serde_json::json!({"name": name, "containerPort": n}))
            .collect();
        set(
            "ISTIO_META_POD_PORTS",
            serde_json::to_string(&pod_ports).unwrap_or_default(),
        );
    }
    set("ISTIO_META_WORKLOAD_NAME", g.name.clone());
    set("ISTIO_NAMESPACE", g.namespace.clone());
    set("ISTIO_SERVICE", format!("{}.{}", g.name, g.namespace));
    set("POD_NAMESPACE", g.namespace.clone());
    set("SERVICE_ACCOUNT", g.service_account.clone());
    set("TRUST_DOMAIN", mesh.trust_domain.clone());

    let mut notes = Vec::new();
    if !g.has_template {
        notes.push("no spec.template: the API server rejects the group, so no VM can be configured from it".to_string());
    }
    if !g.template_labels.is_empty() {
        notes.push("spec.template.labels override spec.metadata.labels on the VM (istioctl warns: set labels in spec.metadata)".to_string());
    }
    if g.ports.is_empty() {
        notes.push("no spec.template.ports: ISTIO_INBOUND_PORTS is *, so the VM's proxy captures all inbound traffic".to_string());
    }
    if g.network.is_none() {
        notes.push("no spec.template.network: the VM is taken to share the cluster's network and is called directly, not through a gateway".to_string());
    }
    VmBootstrap {
        workload_group: g.id.clone(),
        namespace: g.namespace.clone(),
        name: g.name.clone(),
        change,
        cluster_env: env,
        labels: g.labels.clone(),
        spiffe_id: format!(
            "spiffe://{}/ns/{}/sa/{}",
            mesh.trust_domain, g.namespace, g.service_account
        ),
        root_cert: RootCert {
            config_map: ROOT_CERT_CONFIG_MAP.into(),
            namespace: g.namespace.clone(),
            key: ROOT_CERT_KEY.into(),
        },
        token: Token {
            service_account: g.service_account.clone(),
            namespace: g.namespace.clone(),
            audience: "istio-ca".into(),
        },
        service_entry_count: g.selected_by.len(),
        service_entries: g.selected_by.clone(),
        services: g.selected_by_services.clone(),
        notes,
    }
}
