//! Traffic config as istiod reads it: the hosts routes and DestinationRules name and
//! what they resolve to, the subsets and the pods each selects, the gateways routes
//! bind to and the pods and Service ports behind those gateways. The joins are done
//! here, indexed, so that the routing/, gateway/ and service/ policies only compare.
//!
//! A reference is reported missing as a fact only where the repository is the source
//! of what it names (a namespace it declares, see [`owned_namespaces`]); elsewhere it is
//! `unknown`, which the policies say as "could not check", never as a pass.

mod destination_rules;
mod gateways;
mod hosts;
mod ports;
mod routes;

use super::{Model, Namespace};
use crate::config::MeshConfig;
use crate::manifest::Resource;
use foldhash::{HashMap, HashSet};
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;

pub use hosts::HostPort;

#[derive(Debug, Clone, Serialize, Default)]
pub struct Traffic {
    /// Every destination of a route: VirtualService route, mirror and TCP/TLS route
    /// destinations, Gateway API backendRefs.
    pub destinations: Vec<Destination>,
    /// VirtualService `gateways` entries and Gateway API `parentRefs`.
    pub parents: Vec<ParentRef>,
    pub destination_rules: Vec<DestinationRule>,
    /// networking.istio.io Gateways with the pods and Service ports behind them.
    pub gateways: Vec<Gateway>,
    /// Whether the repository holds any gateway deployment (a workload labelled
    /// `istio`): without one, a Gateway's selector cannot be checked.
    pub gateway_pods_known: bool,
    /// VirtualServices for sidecars that claim one host in one scope (IST0109).
    pub mesh_host_conflicts: Vec<HostConflict>,
    /// Gateways whose servers on one port istiod cannot merge (IST0145).
    pub gateway_conflicts: Vec<GatewayConflict>,
    /// Services of one workload whose ports disagree (IST0116, IST0137).
    pub port_conflicts: Vec<PortConflict>,
    /// Workloads in the mesh that serve ports but that no Service selects.
    pub unserved: Vec<Unserved>,
    /// Service ports whose protocol Istio does not know (IST0118), and ExternalName
    /// Service ports it treats as plain TCP (IST0150).
    pub unknown_protocols: Vec<UnknownProtocol>,
    /// DestinationRule TLS settings the server's PeerAuthentication refuses.
    pub tls_conflicts: Vec<TlsConflict>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Destination {
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    /// `route`, `mirror` or `backend`.
    pub role: String,
    /// To the host field (`host`, or a backendRef's `name`).
    pub path: Vec<Json>,
    pub host: String,
    pub fqdn: String,
    /// `found`, `not-exported`, `not-qualified`, `not-found` or `unknown`.
    pub status: String,
    pub reason: String,
    pub target: Option<String>,
    pub target_ports: Vec<u64>,
    pub port: Option<u64>,
    pub port_path: Vec<Json>,
    pub subset: Option<String>,
    pub subset_path: Vec<Json>,
    /// `found`, `not-found`, or empty without a subset or a found target.
    pub subset_status: String,
    /// Subsets DestinationRules define for this host where the route can see them.
    pub known_subsets: Vec<String>,
    /// Workloads the subset selects (`None`: unknown).
    pub subset_pods: Option<usize>,
    pub weight: Option<i64>,
    /// The route applies only at gateways (VirtualService `gateways` without `mesh`).
    pub gateway_only: bool,
    /// backendRefs to another namespace: `granted`, `missing`, `unknown`; else empty.
    pub reference_grant: String,
}

impl Destination {
    /// Whether traffic sent here reaches pods: `reaches`, `no-such-host`,
    /// `no-such-port`, `no-such-subset`, `no-pods` (the subset selects none), or
    /// `not-checked` (the host, or the DestinationRule of its subset, is not the
    /// repository's to tell).
    pub fn outcome(&self) -> &'static str {
        match self.status.as_str() {
            "found" => {}
            "unknown" => return "not-checked",
            _ => return "no-such-host",
        }
        if self.port.is_some_and(|p| !self.target_ports.contains(&p)) {
            return "no-such-port";
        }
        match self.subset_status.as_str() {
            "not-found" => return "no-such-subset",
            "unknown" => return "not-checked",
            _ => {}
        }
        if self.subset_pods == Some(0) {
            return "no-pods";
        }
        "reaches"
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ParentRef {
    pub resource: String,
    pub kind: String,
    pub namespace: String,
    pub path: Vec<Json>,
    /// As written (`ns/name`, `name`, a parentRef's `ns/name`).
    pub written: String,
    pub parent_kind: String,
    pub parent_namespace: String,
    pub parent_name: String,
    /// `found`, `not-found`, `unknown`, `not-allowed`.
    pub status: String,
    pub reason: String,
    pub parent: Option<String>,
    /// Gateways of that name in other namespaces (a missing `ns/`).
    pub elsewhere: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DestinationRule {
    pub resource: String,
    pub namespace: String,
    pub host: String,
    pub fqdn: String,
    pub host_status: String,
    pub reason: String,
    pub target: Option<String>,
    pub subsets: Vec<Subset>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Subset {
    pub name: String,
    pub path: Vec<Json>,
    pub labels: BTreeMap<String, String>,
    /// `selects`, `none`, or `unknown` (the host's pods are not all in the repository).
    pub status: String,
    pub selects: Vec<String>,
    /// Workloads behind the host, among which the labels choose.
    pub candidates: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Gateway {
    pub resource: String,
    pub namespace: String,
    pub selector: BTreeMap<String, String>,
    pub selector_path: Vec<Json>,
    pub pods: Vec<String>,
    /// Ports (Service `port`, numeric `targetPort`) of the Services selecting its
    /// pods; None when no Service of the repository selects them.
    pub service_ports: Option<Vec<u64>>,
    pub services: Vec<String>,
    pub servers: Vec<Server>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Server {
    pub port: u64,
    pub path: Vec<Json>,
    pub hosts: Vec<String>,
    /// Terminates or passes through TLS (protocol HTTPS or TLS, or a `tls` block).
    pub tls: bool,
    /// `bind` (empty when unset).
    pub bind: String,
    /// `port.protocol`, upper case.
    pub protocol: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostConflict {
    pub resource: String,
    pub path: Vec<Json>,
    pub host: String,
    pub scope: String,
    pub others: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GatewayConflict {
    pub resource: String,
    pub path: Vec<Json>,
    pub port: u64,
    /// The host both serve over TLS; empty when their protocols cannot share the port.
    pub host: String,
    /// This server's protocol.
    pub protocol: String,
    pub others: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PortConflict {
    pub workload: String,
    /// `protocol` (IST0116) or `target-port` (IST0137).
    pub conflict: String,
    /// The port number (protocol) or target port (target-port) they disagree on.
    pub port: String,
    /// `Service/ns/name port N/PROTOCOL -> target`, one per side.
    pub sides: Vec<String>,
    pub services: Vec<String>,
    /// The Service and path of the port to point at.
    pub resource: String,
    pub path: Vec<Json>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unserved {
    pub workload: String,
    pub ports: Vec<u64>,
}

/// One port of a core v1 Service that istioctl's IST0118 or IST0150 would name.
#[derive(Debug, Clone, Serialize)]
pub struct UnknownProtocol {
    pub resource: String,
    pub namespace: Option<String>,
    pub service: String,
    pub index: usize,
    /// The port's `port` as written ("?" when absent).
    pub port: Json,
    /// `name` and `appProtocol` ("" when unset or not text).
    pub name: String,
    pub app: String,
    /// An ExternalName Service, with its `externalName` when that is set.
    pub external: bool,
    pub external_name: Option<String>,
    /// Istio knows no protocol for the port and sniffs it (not UDP, not one of the
    /// server-first port numbers it treats as TCP).
    pub sniffed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TlsConflict {
    pub resource: String,
    pub path: Vec<Json>,
    pub host: String,
    pub mode: String,
    pub port: Option<u64>,
    /// `plaintext-to-strict`, `own-tls-to-strict`, `mesh-tls-to-plaintext`.
    pub problem: String,
    pub server_mode: String,
    /// Where the server mode comes from (a PeerAuthentication id, or the default).
    pub server_mode_source: Option<String>,
    pub workloads: Vec<String>,
}

/// Namespaces whose objects the repository is the source of: those it declares with
/// a Namespace object, and those Argo CD creates for its Applications. A Service or
/// Gateway missing from one of them is missing; from any other it may be defined in
/// another repository or created by an operator.
fn owned_namespaces(namespaces: &BTreeMap<String, Namespace>) -> HashSet<String> {
    namespaces
        .values()
        .filter(|n| n.declared || n.labels_from.as_deref() == Some(super::namespaces::FROM_ARGOCD))
        .map(|n| n.name.clone())
        .collect()
}

pub(super) fn build(resources: &[Resource], model: &Model, mesh: &MeshConfig) -> Traffic {
    // An object defined twice (manifest/duplicate-resource) counts once, as its first
    // definition: findings point at that one, so what they say must come from it.
    let mut seen = HashSet::default();
    let mut duplicated = HashSet::default();
    let mut relevant: Vec<&Resource> = Vec::new();
    for r in resources.iter().filter(|r| {
        matches!(
            r.kind.as_str(),
            "Service"
                | "ServiceEntry"
                | "VirtualService"
                | "DestinationRule"
                | "Gateway"
                | "HTTPRoute"
                | "GRPCRoute"
                | "TCPRoute"
                | "TLSRoute"
                | "UDPRoute"
                | "ReferenceGrant"
        )
    }) {
        if seen.insert(r.id.as_str()) {
            relevant.push(r);
        } else {
            duplicated.insert(r.id.clone());
        }
    }
    let fronts = Fronts::new(resources, model);
    let mut traffic = Traffic {
        port_conflicts: ports::conflicts(&fronts, model),
        unserved: ports::unserved(resources, model),
        unknown_protocols: ports::unknown_protocols(resources),
        ..Traffic::default()
    };
    if relevant.is_empty() {
        return traffic;
    }
    let registry = hosts::Registry::new(&relevant, owned_namespaces(&model.namespaces));
    let workloads = destination_rules::Pods::new(model);
    traffic.destination_rules = destination_rules::of(&relevant, &registry, &workloads);
    let subsets = destination_rules::SubsetIndex::new(&traffic.destination_rules, mesh);
    let gateway_index = gateways::Index::new(&relevant, &duplicated);
    let (destinations, parents) = routes::of(&relevant, &registry, &subsets, &gateway_index, model);
    traffic.destinations = destinations;
    traffic.parents = parents;
    traffic.mesh_host_conflicts = routes::mesh_host_conflicts(&relevant);
    traffic.gateway_pods_known = model
        .workloads
        .iter()
        .any(|w| w.labels.contains_key("istio"));
    traffic.gateways = gateways::istio_gateways(&relevant, model, &fronts);
    traffic.gateway_conflicts = gateways::conflicts(&traffic.gateways);
    traffic.tls_conflicts = destination_rules::tls_conflicts(&relevant, &registry, model);
    traffic
}

/// The Services in front of each workload, and each Service's object (its first
/// definition), for the joins of ports and gateways.
pub(super) struct Fronts<'a> {
    /// Workload or WorkloadEntry id → ids of the Services selecting it.
    pub(super) services_of: HashMap<&'a str, Vec<&'a str>>,
    pub(super) bodies: HashMap<&'a str, &'a Resource>,
}

impl<'a> Fronts<'a> {
    fn new(resources: &'a [Resource], model: &'a Model) -> Self {
        let mut services_of: HashMap<&str, Vec<&str>> = HashMap::default();
        for s in &model.services {
            for id in &s.selects {
                services_of.entry(id).or_default().push(&s.id);
            }
        }
        let mut bodies = HashMap::default();
        for r in resources
            .iter()
            .filter(|r| r.kind == "Service" && r.api_version == "v1")
        {
            bodies.entry(r.id.as_str()).or_insert(r);
        }
        Fronts {
            services_of,
            bodies,
        }
    }
}

/// `v` at `key` of a JSON object, as an array (empty otherwise).
pub(super) fn array<'a>(v: &'a Json, key: &str) -> &'a [Json] {
    v.get(key)
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A path into an object, from mixed keys and indices.
pub(super) fn path(parts: &[PathPart]) -> Vec<Json> {
    parts
        .iter()
        .map(|p| match p {
            PathPart::Key(k) => Json::from(*k),
            PathPart::Index(i) => Json::from(*i),
        })
        .collect()
}

/// Conflicts by key: the path to point at, and the other resources in conflict.
pub(super) type Conflicts<K> = BTreeMap<K, (Vec<Json>, std::collections::BTreeSet<String>)>;

#[derive(Clone, Copy)]
pub(super) enum PathPart<'a> {
    Key(&'a str),
    Index(usize),
}

pub(super) use PathPart::{Index as I, Key as K};
