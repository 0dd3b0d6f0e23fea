//! WorkloadGroups: the template VMs join the mesh from, and what would select them.

use super::labels::{Labels, LabelsExt};
use super::{Selector, Service};
use crate::manifest::Resource;
use crate::pointer::At;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadGroup {
    pub id: String,
    pub namespace: String,
    pub name: String,
    /// The labels a VM registered from the group carries: `spec.metadata.labels`,
    /// overlaid by `spec.template.labels` (istioctl lets those win), plus the
    /// canonical service labels istioctl adds.
    pub labels: Labels,
    pub metadata_labels: Labels,
    pub template_labels: Labels,
    pub has_template: bool,
    /// `spec.template.serviceAccount`; `default` when unset, as istioctl does.
    pub service_account: String,
    pub network: Option<String>,
    /// `spec.template.ports`: port name → number.
    pub ports: BTreeMap<String, i64>,
    pub canonical_service: String,
    pub canonical_revision: String,
    /// ServiceEntries of its namespace whose workloadSelector selects those labels.
    pub selected_by: Vec<String>,
    /// Kubernetes Services of its namespace whose selector selects them.
    pub selected_by_services: Vec<String>,
    pub spec_hash: String,
}

const CANONICAL_NAME: &str = "service.istio.io/canonical-name";
const CANONICAL_REVISION: &str = "service.istio.io/canonical-revision";

/// Istio's canonical service name and revision for a set of labels (the same
/// precedence istioctl and the injector use).
fn canonical(labels: &Labels, workload_name: &str) -> (String, String) {
    let first = |keys: &[&str]| keys.iter().find_map(|k| labels.get(*k).cloned());
    (
        first(&[CANONICAL_NAME, "app.kubernetes.io/name", "app"])
            .unwrap_or_else(|| workload_name.to_string()),
        first(&[CANONICAL_REVISION, "app.kubernetes.io/version", "version"])
            .unwrap_or_else(|| "latest".to_string()),
    )
}

pub fn group_of(r: &Resource) -> Option<WorkloadGroup> {
    let namespace = r.namespace.clone()?;
    let map_at = |p: &str| {
        r.body
            .at(p)
            .and_then(Json::as_object)
            .map(Labels::from_json)
            .unwrap_or_default()
    };
    let metadata_labels = map_at("/spec/metadata/labels");
    let template_labels = map_at("/spec/template/labels");
    let mut labels = metadata_labels.clone();
    labels.extend(template_labels.clone());
    let (canonical_service, canonical_revision) = canonical(&labels, &r.name);
    labels.insert(CANONICAL_NAME.into(), canonical_service.clone());
    labels.insert(CANONICAL_REVISION.into(), canonical_revision.clone());
    let ports = r
        .body
        .at("/spec/template/ports")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_i64().map(|n| (k.clone(), n)))
                .collect()
        })
        .unwrap_or_default();
    let template = r.body.at("/spec/template");
    Some(WorkloadGroup {
        id: r.id.clone(),
        name: r.name.clone(),
        namespace,
        labels,
        metadata_labels,
        template_labels,
        has_template: template.is_some_and(Json::is_object),
        service_account: r
            .body
            .at("/spec/template/serviceAccount")
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default")
            .to_string(),
        network: r
            .body
            .at("/spec/template/network")
            .and_then(Json::as_str)
            .map(str::to_string),
        ports,
        canonical_service,
        canonical_revision,
        selected_by: Vec::new(),
        selected_by_services: Vec::new(),
        spec_hash: super::workloads::hash_json(r.body.get("spec").unwrap_or(&Json::Null)),
    })
}

/// Records which ServiceEntries and Services would select each group's VMs, and on
/// each ServiceEntry selector, the groups it selects.
pub fn link(groups: &mut [WorkloadGroup], selectors: &mut [Selector], services: &[Service]) {
    for g in groups.iter_mut() {
        for s in selectors
            .iter_mut()
            .filter(|s| s.kind == "ServiceEntry" && s.namespace == g.namespace)
        {
            if s.labels.as_ref().is_some_and(|l| g.labels.selected_by(l)) {
                g.selected_by.push(s.resource.clone());
                s.workload_groups.push(g.id.clone());
            }
        }
        for svc in services.iter().filter(|s| s.namespace == g.namespace) {
            if svc
                .selector
                .as_ref()
                .is_some_and(|l| g.labels.selected_by(l))
            {
                g.selected_by_services.push(svc.id.clone());
            }
        }
    }
}
