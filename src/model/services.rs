//! Kubernetes Services, what they select, and which Services a workload calls: a
//! Service's host name written in a container's env values, args or command.

use super::labels::{Labels, LabelsExt};
use super::{Workload, WorkloadEntry};
use crate::manifest::Resource;
use crate::pointer::At;
use foldhash::HashMap;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct Service {
    pub id: String,
    pub namespace: String,
    pub name: String,
    /// `spec.selector`; None for a Service without one (endpoints managed by hand).
    pub selector: Option<Labels>,
    /// Workloads and WorkloadEntries of its namespace that the selector selects.
    pub selects: Vec<String>,
}

/// A Service a workload's containers name.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallRef {
    pub service: String,
    /// Where: `env LEDGER_URL of container web`, `args of container web`.
    pub field: String,
    /// The host name as written.
    pub host: String,
}

pub fn services_of(
    resources: &[Resource],
    workloads: &[Workload],
    entries: &[WorkloadEntry],
) -> Vec<Service> {
    let mut by_ns_w: HashMap<&str, Vec<&Workload>> = HashMap::default();
    for w in workloads {
        by_ns_w.entry(w.namespace.as_str()).or_default().push(w);
    }
    let mut by_ns_e: HashMap<&str, Vec<&WorkloadEntry>> = HashMap::default();
    for e in entries {
        by_ns_e.entry(e.namespace.as_str()).or_default().push(e);
    }
    resources
        .iter()
        .filter(|r| r.kind == "Service" && r.api_version == "v1")
        .filter_map(|r| {
            let ns = r.namespace.clone()?;
            let selector = r
                .body
                .at("/spec/selector")
                .and_then(Json::as_object)
                .map(Labels::from_json)
                .filter(|l| !l.is_empty());
            let mut selects = Vec::new();
            if let Some(sel) = &selector {
                for w in by_ns_w.get(ns.as_str()).into_iter().flatten() {
                    if w.labels.selected_by(sel) {
                        selects.push(w.id.clone());
                    }
                }
                // istiod adds WorkloadEntries a Service selects as its endpoints.
                for e in by_ns_e.get(ns.as_str()).into_iter().flatten() {
                    if e.labels.selected_by(sel) {
                        selects.push(e.id.clone());
                    }
                }
            }
            Some(Service {
                id: r.id.clone(),
                name: r.name.clone(),
                namespace: ns,
                selector,
                selects,
            })
        })
        .collect()
}

/// Services by (namespace, name).
pub struct ServiceIndex<'a>(HashMap<(&'a str, &'a str), &'a Service>);

impl<'a> ServiceIndex<'a> {
    pub fn new(services: &'a [Service]) -> Self {
        ServiceIndex(
            services
                .iter()
                .map(|s| ((s.namespace.as_str(), s.name.as_str()), s))
                .collect(),
        )
    }

    fn get(&self, ns: &str, name: &str) -> Option<&'a Service> {
        self.0.get(&(ns, name)).copied()
    }
}

/// Strings longer than this are not scanned (certificates, inline scripts).
const MAX_SCANNED: usize = 8 * 1024;

/// The Services a workload's pod template names. Only host names count: the
/// `name.namespace[.svc[...]]` forms anywhere, and a bare `name` of a Service in its own
/// namespace only as a URL host (`http://name`) or before a port (`name:8080`), so
/// that words in env values are not mistaken for calls.
pub fn calls_of(template: &Json, namespace: &str, index: &ServiceIndex) -> Vec<CallRef> {
    let mut out: BTreeMap<(String, String), CallRef> = BTreeMap::new();
    let spec = template.get("spec");
    for list in ["initContainers", "containers"] {
        let containers = spec
            .and_then(|s| s.get(list))
            .and_then(Json::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for c in containers {
            let cname = c.get("name").and_then(Json::as_str).unwrap_or("?");
            let mut texts: Vec<(String, &str)> = Vec::new();
            for e in c.get("env").and_then(Json::as_array).into_iter().flatten() {
                if let (Some(name), Some(value)) = (
                    e.get("name").and_then(Json::as_str),
                    e.get("value").and_then(Json::as_str),
                ) {
                    texts.push((format!("env {name} of container {cname}"), value));
                }
            }
            for field in ["args", "command"] {
                for v in c.get(field).and_then(Json::as_array).into_iter().flatten() {
                    if let Some(v) = v.as_str() {
                        texts.push((format!("{field} of container {cname}"), v));
                    }
                }
            }
            for (field, text) in texts {
                if text.len() > MAX_SCANNED {
                    continue;
                }
                for (host, svc) in hosts_in(text, namespace, index) {
                    out.entry((svc.id.clone(), field.clone()))
                        .or_insert_with(|| CallRef {
                            service: svc.id.clone(),
                            field: field.clone(),
                            host,
                        });
                }
            }
        }
    }
    out.into_values().collect()
}

fn hosts_in<'a>(
    text: &str,
    namespace: &str,
    index: &ServiceIndex<'a>,
) -> Vec<(String, &'a Service)> {
    let mut out = Vec::new();
    let is_host_char = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-';
    let bytes = text.as_bytes();
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (start, is_host_char(c) && i < text.len()) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                start = None;
                let token = text[s..i].trim_end_matches('.').to_ascii_lowercase();
                let parts: Vec<&str> = token.split('.').collect();
                let found = match parts.as_slice() {
                    [name] => {
                        let url_host = text[..s].ends_with("://");
                        let before_port = bytes.get(i) == Some(&b':')
                            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
                        if url_host || before_port {
                            index.get(namespace, name)
                        } else {
                            None
                        }
                    }
                    [name, ns] => index.get(ns, name),
                    [name, ns, "svc", ..] => index.get(ns, name),
                    _ => None,
                };
                if let Some(svc) = found {
                    out.push((text[s..i].trim_end_matches('.').to_string(), svc));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str) -> Service {
        Service {
            id: format!("Service/{ns}/{name}"),
            namespace: ns.into(),
            name: name.into(),
            selector: None,
            selects: Vec::new(),
        }
    }

    #[test]
    fn host_forms() {
        let services = vec![svc("payments", "ledger"), svc("shop", "cart")];
        let index = ServiceIndex::new(&services);
        let found = |t: &str| -> Vec<String> {
            hosts_in(t, "shop", &index)
                .into_iter()
                .map(|(_, s)| s.id.clone())
                .collect()
        };
        assert_eq!(
            found("http://ledger.payments.svc.cluster.local:8080/v1"),
            ["Service/payments/ledger"]
        );
        assert_eq!(found("ledger.payments:9000"), ["Service/payments/ledger"]);
        assert_eq!(found("grpc://cart"), ["Service/shop/cart"]);
        assert_eq!(found("cart:8080"), ["Service/shop/cart"]);
        // A bare word is not a call; nor is a Service of another namespace by bare name.
        assert!(found("add to cart").is_empty());
        assert!(found("http://ledger").is_empty());
        assert!(found("ledger.example.com").is_empty());
    }
}
