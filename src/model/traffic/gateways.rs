//! Gateways: networking.istio.io Gateways with the pods their selector picks (in any
//! namespace, as istiod's default `PILOT_SCOPE_GATEWAY_TO_NAMESPACE=false`) and the
//! Service ports in front of those pods; Gateway API Gateways with their listeners.

use super::hosts::text;
use super::{array, path, Conflicts, Fronts, Gateway, GatewayConflict, Server, I, K};
use crate::manifest::Resource;
use crate::model::labels::{Labels, LabelsExt};
use crate::model::Model;
use crate::pointer::At;
use foldhash::{HashMap, HashSet};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

fn is_istio_gateway(r: &Resource) -> bool {
    r.kind == "Gateway" && r.api_version.starts_with("networking.istio.io/")
}

fn is_api_gateway(r: &Resource) -> bool {
    r.kind == "Gateway" && r.api_version.starts_with("gateway.networking.k8s.io/")
}

/// A Gateway API listener, as route attachment reads it.
#[derive(Debug)]
pub(super) struct Listener {
    pub(super) name: String,
    pub(super) port: Option<u64>,
    pub(super) hostname: Option<String>,
    /// `allowedRoutes.namespaces.from`: `Same` (the default), `All` or `Selector`.
    pub(super) from: String,
    pub(super) selector: Option<Labels>,
    /// The selector has `matchExpressions`, which this model does not evaluate.
    pub(super) expressions: bool,
    /// Route kinds it accepts (from `allowedRoutes.kinds`, else its protocol's).
    pub(super) kinds: Vec<String>,
}

/// Gateways of both APIs by namespace and name.
pub(super) struct Index<'a> {
    pub(super) istio: HashMap<(&'a str, &'a str), &'a Resource>,
    pub(super) api: HashMap<(&'a str, &'a str), (&'a Resource, Vec<Listener>)>,
    /// Istio Gateway ids by name, for a `gateways` entry that forgot its `ns/`.
    pub(super) by_name: HashMap<&'a str, Vec<&'a str>>,
    /// Gateways defined more than once: which definition the cluster keeps depends on
    /// the order they are applied in, so what their listeners accept is not known.
    pub(super) duplicated: &'a HashSet<String>,
}

impl<'a> Index<'a> {
    pub(super) fn new(resources: &[&'a Resource], duplicated: &'a HashSet<String>) -> Self {
        let mut index = Index {
            istio: HashMap::default(),
            api: HashMap::default(),
            by_name: HashMap::default(),
            duplicated,
        };
        for &r in resources {
            let Some(ns) = r.namespace.as_deref() else {
                continue;
            };
            if is_istio_gateway(r) {
                index.istio.entry((ns, r.name.as_str())).or_insert(r);
                index
                    .by_name
                    .entry(r.name.as_str())
                    .or_default()
                    .push(&r.id);
            } else if is_api_gateway(r) {
                let spec = r.body.get("spec").unwrap_or(&Json::Null);
                let listeners = array(spec, "listeners").iter().map(listener).collect();
                index
                    .api
                    .entry((ns, r.name.as_str()))
                    .or_insert((r, listeners));
                index
                    .by_name
                    .entry(r.name.as_str())
                    .or_default()
                    .push(&r.id);
            }
        }
        index
    }
}

fn listener(l: &Json) -> Listener {
    let protocol = text(l.get("protocol")).to_ascii_uppercase();
    let allowed = l.get("allowedRoutes");
    let namespaces = allowed.and_then(|a| a.get("namespaces"));
    let selector = namespaces.and_then(|n| n.get("selector"));
    let kinds: Vec<String> = allowed
        .map(|a| array(a, "kinds"))
        .unwrap_or(&[])
        .iter()
        .filter_map(|k| k.get("kind").and_then(Json::as_str))
        .map(str::to_string)
        .collect();
    let kinds = if kinds.is_empty() {
        // The kinds a listener of each protocol accepts by default (Gateway API spec;
        // Istio's implementation follows it).
        match protocol.as_str() {
            "HTTP" | "HTTPS" => vec!["HTTPRoute".to_string(), "GRPCRoute".to_string()],
            "TLS" => vec!["TLSRoute".to_string()],
            "TCP" => vec!["TCPRoute".to_string()],
            "UDP" => vec!["UDPRoute".to_string()],
            _ => Vec::new(),
        }
    } else {
        kinds
    };
    Listener {
        name: text(l.get("name")),
        port: l.get("port").and_then(Json::as_u64),
        hostname: l
            .get("hostname")
            .and_then(Json::as_str)
            .map(str::to_ascii_lowercase),
        from: namespaces
            .and_then(|n| n.get("from"))
            .and_then(Json::as_str)
            .unwrap_or("Same")
            .to_string(),
        selector: selector
            .and_then(|s| s.get("matchLabels"))
            .and_then(Json::as_object)
            .map(Labels::from_json),
        expressions: selector
            .and_then(|s| s.get("matchExpressions"))
            .and_then(Json::as_array)
            .is_some_and(|a| !a.is_empty()),
        kinds,
    }
}

/// networking.istio.io Gateways, their pods and the Service ports in front of them.
pub(super) fn istio_gateways(
    resources: &[&Resource],
    model: &Model,
    fronts: &Fronts,
) -> Vec<Gateway> {
    let gateways: Vec<&&Resource> = resources.iter().filter(|r| is_istio_gateway(r)).collect();
    if gateways.is_empty() {
        return Vec::new();
    }
    // Workloads by each of their labels, so that a selector is matched against the
    // workloads carrying its first label only.
    let mut by_label: HashMap<(&str, &str), Vec<&crate::model::Workload>> = HashMap::default();
    for w in &model.workloads {
        for (k, v) in &w.labels {
            by_label.entry((k, v)).or_default().push(w);
        }
    }
    let (services_of, service_bodies) = (&fronts.services_of, &fronts.bodies);
    gateways
        .into_iter()
        .filter_map(|r| {
            let ns = r.namespace.clone()?;
            let spec = r.body.get("spec").unwrap_or(&Json::Null);
            let selector = spec
                .get("selector")
                .and_then(Json::as_object)
                .map(Labels::from_json)
                .unwrap_or_default();
            let pods: Vec<String> = match selector.iter().next() {
                // An empty selector picks every pod: nothing to check it against.
                None => Vec::new(),
                Some((k, v)) => by_label
                    .get(&(k.as_str(), v.as_str()))
                    .into_iter()
                    .flatten()
                    .filter(|w| w.labels.selected_by(&selector))
                    .map(|w| w.id.clone())
                    .collect(),
            };
            let services: BTreeSet<&str> = pods
                .iter()
                .flat_map(|p| services_of.get(p.as_str()).into_iter().flatten())
                .copied()
                .collect();
            let service_ports = (!services.is_empty()).then(|| {
                let mut ports = BTreeSet::new();
                for s in &services {
                    let Some(body) = service_bodies.get(s) else {
                        continue;
                    };
                    for p in array(body.body.get("spec").unwrap_or(&Json::Null), "ports") {
                        let tcp =
                            p.get("protocol").and_then(Json::as_str).unwrap_or("TCP") == "TCP";
                        if !tcp {
                            continue;
                        }
                        ports.extend(p.get("port").and_then(Json::as_u64));
                        ports.extend(p.get("targetPort").and_then(Json::as_u64));
                    }
                }
                ports.into_iter().collect()
            });
            let servers = array(spec, "servers")
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    Some(Server {
                        port: s.at("/port/number").and_then(Json::as_u64)?,
                        path: path(&[K("spec"), K("servers"), I(i), K("port"), K("number")]),
                        hosts: array(s, "hosts")
                            .iter()
                            .filter_map(Json::as_str)
                            .map(str::to_string)
                            .collect(),
                        bind: text(s.get("bind")),
                        protocol: text(s.at("/port/protocol")).to_ascii_uppercase(),
                        tls: s.get("tls").is_some()
                            || matches!(
                                text(s.at("/port/protocol")).to_ascii_uppercase().as_str(),
                                "HTTPS" | "TLS"
                            ),
                    })
                })
                .collect();
            Some(Gateway {
                resource: r.id.clone(),
                namespace: ns,
                selector_path: path(&[K("spec"), K("selector")]),
                selector: selector.into_iter().collect(),
                pods,
                service_ports,
                services: services.into_iter().map(str::to_string).collect(),
                servers,
            })
        })
        .collect()
}

/// Servers by (port, bind): the gateway's index and the server.
type Buckets<'a> = BTreeMap<(u64, &'a str), Vec<(usize, &'a Server)>>;

/// How istiod merges servers on one port (pilot/pkg/model/gateway.go MergeGateways):
/// `http` (HTTP, HTTP2, GRPC) and `https` servers share the port; TLS servers
/// (`https`, `tls`) are told apart by host; a `tcp` server shares its port with no one.
fn class(s: &Server) -> &'static str {
    match s.protocol.as_str() {
        "HTTPS" => "https",
        "TLS" => "tls",
        "HTTP" | "HTTP2" | "GRPC" | "GRPC-WEB" if s.tls => "https",
        "HTTP" | "HTTP2" | "GRPC" | "GRPC-WEB" => "http",
        _ if s.tls => "tls",
        _ => "tcp",
    }
}

/// Why istiod drops one of two servers on the same port and bind: their protocols
/// cannot share the port, or both take TLS for the same host. None when they merge.
fn server_conflict(a: &Server, b: &Server) -> Option<String> {
    let (ca, cb) = (class(a), class(b));
    let merges = |c: &str| c == "http" || c == "https";
    if ca == "tcp" || cb == "tcp" || (ca != cb && !(merges(ca) && merges(cb))) {
        return Some(String::new());
    }
    let tls = |c: &str| c == "https" || c == "tls";
    if tls(ca) && tls(cb) {
        return a.hosts.iter().find(|h| b.hosts.contains(h)).cloned();
    }
    None
}

/// Gateways selecting the same pods whose servers on one port and bind istiod cannot
/// merge: it keeps the first and drops the other as rejected config (plain HTTP
/// servers merge into one route table). istioctl's IST0145 compares the selector
/// strings and exact host strings and also reports servers that merge.
pub(super) fn conflicts(gateways: &[Gateway]) -> Vec<GatewayConflict> {
    let mut buckets: Buckets = BTreeMap::new();
    for (gi, g) in gateways.iter().enumerate() {
        for s in &g.servers {
            buckets.entry((s.port, &s.bind)).or_default().push((gi, s));
        }
    }
    let mut out: Conflicts<(usize, u64, String)> = BTreeMap::new();
    for ((port, _), members) in buckets {
        for (a, sa) in &members {
            for (b, sb) in &members {
                if a == b || gateways[*a].resource == gateways[*b].resource {
                    continue;
                }
                let (ga, gb) = (&gateways[*a], &gateways[*b]);
                let same = ga.selector == gb.selector;
                let contained = ga
                    .selector
                    .iter()
                    .all(|(k, v)| gb.selector.get(k) == Some(v))
                    || gb
                        .selector
                        .iter()
                        .all(|(k, v)| ga.selector.get(k) == Some(v));
                let shared_pod = ga.pods.iter().any(|p| gb.pods.contains(p));
                if !(same || (contained && shared_pod)) {
                    continue;
                }
                if let Some(host) = server_conflict(sa, sb) {
                    out.entry((*a, port, host))
                        .or_insert_with(|| (sa.path.clone(), BTreeSet::new()))
                        .1
                        .insert(gb.resource.clone());
                }
            }
        }
    }
    out.into_iter()
        .map(|((a, port, host), (path, others))| {
            let protocols = gateways[a]
                .servers
                .iter()
                .find(|s| s.path == path)
                .map(|s| s.protocol.clone())
                .unwrap_or_default();
            GatewayConflict {
                resource: gateways[a].resource.clone(),
                path,
                port,
                host,
                protocol: protocols,
                others: others.into_iter().collect(),
            }
        })
        .collect()
}
