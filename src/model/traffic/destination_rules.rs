//! DestinationRules: the host each names, the pods each subset selects among the
//! host's endpoints, and TLS settings the server side refuses.

use super::hosts::{qualify, spec_export_to, Registry, Resolved};
use super::{array, path, DestinationRule, Subset, TlsConflict, I, K};
use crate::config::MeshConfig;
use crate::manifest::Resource;
use crate::model::labels::{Labels, LabelsExt};
use crate::model::{Model, Workload};
use crate::pointer::At;
use foldhash::HashMap;
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// Labels of every workload and WorkloadEntry by id, and what each Service selects.
pub(super) struct Pods<'a> {
    labels: HashMap<&'a str, &'a Labels>,
    service_selects: HashMap<&'a str, (bool, &'a [String])>,
    by_namespace: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> Pods<'a> {
    pub(super) fn new(model: &'a Model) -> Self {
        let mut labels: HashMap<&str, &Labels> = HashMap::default();
        let mut by_namespace: HashMap<&str, Vec<&str>> = HashMap::default();
        for w in &model.workloads {
            labels.insert(&w.id, &w.labels);
            by_namespace.entry(&w.namespace).or_default().push(&w.id);
        }
        for e in &model.workload_entries {
            labels.insert(&e.id, &e.labels);
            by_namespace.entry(&e.namespace).or_default().push(&e.id);
        }
        let service_selects = model
            .services
            .iter()
            .map(|s| (s.id.as_str(), (s.selector.is_some(), s.selects.as_slice())))
            .collect();
        Pods {
            labels,
            service_selects,
            by_namespace,
        }
    }

    /// The workloads behind a host's definition, or None when the repository cannot
    /// tell (a Service without selector or selecting nothing here, a ServiceEntry
    /// without a workloadSelector).
    fn behind(&self, r: &Resource) -> Option<Vec<&'a str>> {
        if r.kind == "Service" {
            let (has_selector, selects) = self.service_selects.get(r.id.as_str())?;
            if !has_selector || selects.is_empty() {
                return None;
            }
            return Some(
                selects
                    .iter()
                    .filter_map(|id| self.labels.get_key_value(id.as_str()).map(|(k, _)| *k))
                    .collect(),
            );
        }
        let selector = r
            .body
            .at("/spec/workloadSelector/labels")
            .and_then(Json::as_object)
            .map(Labels::from_json)?;
        let ns = r.namespace.as_deref()?;
        let ids: Vec<&str> = self
            .by_namespace
            .get(ns)
            .into_iter()
            .flatten()
            .copied()
            .filter(|id| {
                self.labels
                    .get(id)
                    .is_some_and(|l| l.selected_by(&selector))
            })
            .collect();
        (!ids.is_empty()).then_some(ids)
    }
}

/// Labels istiod copies from a pod's Node onto its endpoints (region, zone, subzone,
/// hostname).
const TOPOLOGY_LABELS: &[&str] = &[
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.istio.io/subzone",
    "kubernetes.io/hostname",
];

fn spec_host(r: &Resource) -> Option<&str> {
    r.body.at("/spec/host").and_then(Json::as_str)
}

pub(super) fn of(
    resources: &[&Resource],
    registry: &Registry,
    pods: &Pods,
) -> Vec<DestinationRule> {
    resources
        .iter()
        .filter(|r| r.kind == "DestinationRule" && r.api_version.contains("istio.io/"))
        .filter_map(|r| {
            let ns = r.namespace.as_deref()?;
            let host = spec_host(r)?;
            // A wildcard host (`*.local`, `*.ns.svc.cluster.local`) is a mesh- or
            // namespace-wide policy, not a reference to one service.
            let resolved =
                (!host.starts_with('*')).then(|| registry.resolve(host, ns, &spec_export_to(r)));
            let target = resolved.as_ref().and_then(|res| res.found());
            let behind = target.and_then(|t| pods.behind(t.resource));
            let subsets = array(r.body.get("spec").unwrap_or(&Json::Null), "subsets")
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let name = s.get("name").and_then(Json::as_str)?;
                    let labels = s
                        .get("labels")
                        .and_then(Json::as_object)
                        .map(Labels::from_json)
                        .unwrap_or_default();
                    // istiod adds its node's topology labels to each endpoint: those
                    // the repository cannot tell.
                    let (own, topology): (Labels, Labels) = labels
                        .clone()
                        .into_iter()
                        .partition(|(k, _)| !TOPOLOGY_LABELS.contains(&k.as_str()));
                    let (status, selects, candidates) = match &behind {
                        None => ("unknown", Vec::new(), Vec::new()),
                        Some(ids) => {
                            let selects: Vec<String> = ids
                                .iter()
                                .filter(|id| {
                                    pods.labels.get(*id).is_some_and(|l| l.selected_by(&own))
                                })
                                .map(|id| id.to_string())
                                .collect();
                            let status = if selects.is_empty() {
                                "none"
                            } else if !topology.is_empty() {
                                "unknown"
                            } else {
                                "selects"
                            };
                            (status, selects, ids.iter().map(|s| s.to_string()).collect())
                        }
                    };
                    Some(Subset {
                        name: name.to_string(),
                        path: path(&[K("spec"), K("subsets"), I(i), K("labels")]),
                        labels,
                        status: status.to_string(),
                        selects,
                        candidates,
                    })
                })
                .collect();
            let (host_status, reason) = match &resolved {
                None => ("wildcard".to_string(), String::new()),
                Some(res) => (res.status().to_string(), reason_of(res)),
            };
            Some(DestinationRule {
                resource: r.id.clone(),
                namespace: ns.to_string(),
                host: host.to_string(),
                fqdn: qualify(host, ns),
                host_status,
                reason,
                target: target.map(|t| t.id().to_string()),
                subsets,
            })
        })
        .collect()
}

/// Why a host resolved as it did, for messages.
pub(super) fn reason_of(res: &Resolved) -> String {
    match res {
        Resolved::Found(_) => String::new(),
        Resolved::NotExported(e, scopes) => format!(
            "{} defines it, exported only to {}, and this applies in {}",
            e.id(),
            e.export_to.join(", "),
            scopes.join(", ")
        ),
        Resolved::NotQualified(e) => format!(
            "{} is {}: istiod reads a name with a dot as fully qualified and does not expand it",
            e.id(),
            e.host
        ),
        Resolved::NotFound(why) | Resolved::Unknown(why) => why.clone(),
    }
}

/// Subsets by fully qualified host and the DestinationRule's namespace.
pub(super) struct SubsetIndex<'a> {
    by_host: HashMap<&'a str, Vec<(&'a str, &'a DestinationRule)>>,
    root: &'a str,
}

impl<'a> SubsetIndex<'a> {
    pub(super) fn new(rules: &'a [DestinationRule], mesh: &'a MeshConfig) -> Self {
        let mut by_host: HashMap<&str, Vec<(&str, &DestinationRule)>> = HashMap::default();
        for dr in rules {
            by_host
                .entry(dr.fqdn.as_str())
                .or_default()
                .push((dr.namespace.as_str(), dr));
        }
        SubsetIndex {
            by_host,
            root: &mesh.root_namespace,
        }
    }

    pub(super) fn root(&self) -> &str {
        self.root
    }

    /// The DestinationRules a client in `client_ns` uses for `fqdn` served from
    /// `service_ns`: its own namespace's, the service's, the root namespace's
    /// (pilot/pkg/model/push_context.go destinationRule).
    pub(super) fn rules_for(
        &self,
        fqdn: &str,
        client_ns: &str,
        service_ns: &str,
    ) -> Vec<&'a DestinationRule> {
        self.by_host
            .get(fqdn)
            .into_iter()
            .flatten()
            .filter(|(ns, _)| *ns == client_ns || *ns == service_ns || *ns == self.root)
            .map(|(_, dr)| *dr)
            .collect()
    }
}

/// A DestinationRule `tls.mode` and where it is set.
struct TlsSetting {
    mode: String,
    port: Option<u64>,
    path: Vec<Json>,
}

fn tls_settings(r: &Resource) -> Vec<TlsSetting> {
    let mut out = Vec::new();
    let Some(policy) = r.body.at("/spec/trafficPolicy") else {
        return out;
    };
    if let Some(mode) = policy.at("/tls/mode").and_then(Json::as_str) {
        out.push(TlsSetting {
            mode: mode.to_string(),
            port: None,
            path: path(&[K("spec"), K("trafficPolicy"), K("tls"), K("mode")]),
        });
    }
    for (i, p) in array(policy, "portLevelSettings").iter().enumerate() {
        if let Some(mode) = p.at("/tls/mode").and_then(Json::as_str) {
            out.push(TlsSetting {
                mode: mode.to_string(),
                port: p.at("/port/number").and_then(Json::as_u64),
                path: path(&[
                    K("spec"),
                    K("trafficPolicy"),
                    K("portLevelSettings"),
                    I(i),
                    K("tls"),
                    K("mode"),
                ]),
            });
        }
    }
    out
}

/// The mTLS mode a workload's sidecar enforces, and the PeerAuthentication that sets it.
fn server_mode<'m>(w: &Workload, model: &'m Model) -> (String, Option<&'m str>) {
    let own = model
        .peer_authentications
        .iter()
        .find(|p| p.scope == "workload" && p.mode != "UNSET" && p.workloads.contains(&w.id));
    if let Some(p) = own {
        return (p.mode.clone(), Some(&p.resource));
    }
    match model.namespaces.get(&w.namespace) {
        Some(n) => (n.mtls.mode.clone(), n.mtls.source.as_deref()),
        None => ("PERMISSIVE".to_string(), None),
    }
}

/// DestinationRule TLS settings toward workloads that refuse them: any `tls` turns
/// auto-mTLS off, so the client does exactly what the rule says
/// (pilot/pkg/networking/core/cluster_tls.go). Only sidecar servers whose proxy is
/// known are judged; ztunnel ignores DestinationRule TLS.
pub(super) fn tls_conflicts(
    resources: &[&Resource],
    registry: &Registry,
    model: &Model,
) -> Vec<TlsConflict> {
    let by_id: HashMap<&str, &Workload> =
        model.workloads.iter().map(|w| (w.id.as_str(), w)).collect();
    let selects: HashMap<&str, &[String]> = model
        .services
        .iter()
        .map(|s| (s.id.as_str(), s.selects.as_slice()))
        .collect();
    let rules: Vec<&&Resource> = resources
        .iter()
        .filter(|r| r.kind == "DestinationRule" && r.api_version.contains("istio.io/"))
        .collect();
    // Hosts an exact DestinationRule names: a wildcard rule does not apply to them (the
    // most specific host wins).
    let exact: foldhash::HashSet<String> = rules
        .iter()
        .filter_map(|r| Some(qualify(spec_host(r)?, r.namespace.as_deref()?)))
        .filter(|h| !h.starts_with('*'))
        .collect();
    let mut out = Vec::new();
    for r in rules {
        let (Some(ns), Some(host)) = (r.namespace.as_deref(), spec_host(r)) else {
            continue;
        };
        let settings = tls_settings(r);
        if settings.is_empty() {
            continue;
        }
        let targets: Vec<&str> = if host.starts_with('*') {
            registry
                .services_matching(host)
                .into_iter()
                .filter(|e| !exact.contains(&e.host))
                .map(|e| e.id())
                .collect()
        } else {
            match registry.resolve(host, ns, &spec_export_to(r)).found() {
                Some(t) => vec![t.id()],
                None => continue,
            }
        };
        let servers: Vec<&Workload> = targets
            .iter()
            .filter_map(|t| selects.get(t))
            .flat_map(|ids| ids.iter())
            .filter_map(|id| by_id.get(id.as_str()).copied())
            .filter(|w| w.proxy_known && !w.ambient)
            .collect();
        for s in &settings {
            // (problem, server mode, source) → workloads
            let mut found: HashMap<(&str, String, Option<&str>), BTreeSet<String>> =
                HashMap::default();
            for w in &servers {
                let (mode, source) = server_mode(w, model);
                let problem = match (s.mode.as_str(), w.proxy, mode.as_str()) {
                    ("DISABLE", true, "STRICT") => "plaintext-to-strict",
                    ("SIMPLE" | "MUTUAL", true, "STRICT") => "own-tls-to-strict",
                    ("ISTIO_MUTUAL", false, _) => "mesh-tls-to-plaintext",
                    ("ISTIO_MUTUAL", true, "DISABLE") => "mesh-tls-to-plaintext",
                    _ => continue,
                };
                found
                    .entry((problem, mode.clone(), source))
                    .or_default()
                    .insert(w.id.clone());
            }
            let mut found: Vec<_> = found.into_iter().collect();
            found.sort();
            for ((problem, server_mode, source), workloads) in found {
                out.push(TlsConflict {
                    resource: r.id.clone(),
                    path: s.path.clone(),
                    host: host.to_string(),
                    mode: s.mode.clone(),
                    port: s.port,
                    problem: problem.to_string(),
                    server_mode,
                    server_mode_source: source.map(str::to_string),
                    workloads: workloads.into_iter().collect(),
                });
            }
        }
    }
    out
}
