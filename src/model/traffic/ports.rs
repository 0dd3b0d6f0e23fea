//! The Services in front of each workload: ports they disagree on, and workloads in
//! the mesh that serve ports no Service names.

use super::hosts::text;
use super::{array, path, Fronts, PortConflict, UnknownProtocol, Unserved, I, K};
use crate::manifest::Resource;
use crate::model::workloads::pod_template;
use crate::model::Model;
use crate::pointer::At;
use foldhash::HashMap;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

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
    let selected: foldhash::HashSet<&str> = model
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
    let fronted: foldhash::HashSet<(&str, &str, &str)> = resources
        .iter()
        .filter(|r| r.kind == "Canary" && r.api_version.starts_with("flagger.app/"))
        .filter_map(|r| {
            let t = r.body.at("/spec/targetRef")?;
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

/// The protocols Istio knows by name, lower case: a port's appProtocol, else its
/// name up to the first "-", compared ignoring case. `http_proxy` cannot be a port
/// name (no "_" in those) but can be an appProtocol.
const KNOWN_PROTOCOLS: &[&str] = &[
    "http",
    "http2",
    "https",
    "http_proxy",
    "grpc",
    "grpc-web",
    "tcp",
    "tls",
    "udp",
    "mongo",
    "redis",
    "mysql",
];

/// Kubernetes' own appProtocol names Istio maps (h2c: HTTP2, ws: HTTP, wss: HTTPS).
const KUBERNETES_APP_PROTOCOLS: &[&str] =
    &["kubernetes.io/h2c", "kubernetes.io/ws", "kubernetes.io/wss"];

/// Ports Istio never sniffs: with no known protocol they are plain TCP (SMTP, DNS,
/// MySQL, MongoDB: server-first protocols that sniffing would break).
const SERVER_FIRST_PORTS: &[f64] = &[25.0, 53.0, 3306.0, 27017.0];

/// Labels of Services left out: Istio's own control plane (istioctl skips those
/// too), and those a gateway or waypoint controller generates (not the repository's
/// to rename).
const SKIP_LABEL_KEYS: &[&str] = &[
    "istio",
    "gateway.istio.io/managed",
    "gateway.networking.k8s.io/gateway-name",
];

/// Every port of a core v1 Service (not knative's, also kind Service) whose protocol
/// Istio does not know (it sniffs it: IST0118), and every port of an ExternalName
/// Service it treats as plain TCP, unknown or named `tcp` (IST0150). Done here rather
/// than in Rego: it reads every port of every Service, and a 100k-object repository
/// has tens of thousands.
pub(super) fn unknown_protocols(resources: &[Resource]) -> Vec<UnknownProtocol> {
    // Only strings: a name written as a number is no name to Istio (unlike `text`).
    let string = |v: Option<&Json>| v.and_then(Json::as_str).unwrap_or_default().to_string();
    let mut out = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.kind == "Service" && r.api_version == "v1")
    {
        let Some(spec) = r.body.get("spec").filter(|s| s.is_object()) else {
            continue;
        };
        let left_out = r
            .body
            .at("/metadata/labels")
            .and_then(Json::as_object)
            .is_some_and(|labels| {
                SKIP_LABEL_KEYS.iter().any(|k| labels.contains_key(*k))
                    || labels.get("release").and_then(Json::as_str) == Some("istio")
            });
        if left_out {
            continue;
        }
        let external = spec.get("type").and_then(Json::as_str) == Some("ExternalName");
        for (index, port) in array(spec, "ports").iter().enumerate() {
            if !port.is_object() {
                continue;
            }
            let name = string(port.get("name"));
            let app = string(port.get("appProtocol"));
            let source = if app.is_empty() { &name } else { &app };
            let prefix = source.split('-').next().unwrap_or_default().to_lowercase();
            let known = KUBERNETES_APP_PROTOCOLS.contains(&app.as_str())
                || KNOWN_PROTOCOLS.contains(&prefix.as_str());
            let number = port.get("port");
            let sniffed = !known
                && port.get("protocol").and_then(Json::as_str) != Some("UDP")
                && !number
                    .and_then(Json::as_f64)
                    .is_some_and(|n| SERVER_FIRST_PORTS.contains(&n));
            if !(sniffed || external && name == "tcp") {
                continue;
            }
            out.push(UnknownProtocol {
                resource: r.id.clone(),
                namespace: r.namespace.clone(),
                service: r.name.clone(),
                index,
                port: number.cloned().unwrap_or_else(|| Json::from("?")),
                name,
                app,
                external,
                external_name: spec
                    .get("externalName")
                    .and_then(Json::as_str)
                    .filter(|h| !h.is_empty())
                    .map(str::to_string),
                sniffed,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{load, SourceFile};

    /// The ports of `services.yaml` IST0118/IST0150 would name.
    fn listed(yaml: &str) -> Vec<UnknownProtocol> {
        let loaded = load(
            &[SourceFile {
                path: "services.yaml".into(),
                bytes: yaml.as_bytes().to_vec(),
            }],
            &Default::default(),
        );
        unknown_protocols(&loaded.resources)
    }

    /// [`listed`], as `name:index` and what Istio does with them.
    fn named(yaml: &str) -> Vec<String> {
        listed(yaml)
            .into_iter()
            .map(|p| {
                let how = match (p.external, p.sniffed) {
                    (false, _) => "sniffed",
                    (true, true) => "external-unknown",
                    (true, false) => "external-tcp",
                };
                format!("{}:{}:{how}", p.service, p.index)
            })
            .collect()
    }

    fn service(name: &str, extra: &str, ports: &str) -> String {
        format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: shop\n{extra}spec:\n  ports: {ports}\n")
    }

    #[test]
    fn known_names_and_app_protocols_are_left_alone() {
        let names = [
            "http",
            "http2-a",
            "https-b",
            "tcp-db",
            "tls",
            "udp-x",
            "grpc",
            "grpc-web",
            "grpc-web-x",
            "mongo-1",
            "redis",
            "mysql-main",
            "HTTP-Upper",
        ];
        let ports: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{{port: {}, name: {n}}}", 8000 + i))
            .collect();
        let yaml = service("cart", "", &format!("[{}]", ports.join(", ")))
            + &service(
                "web",
                "",
                "[{port: 8080, name: web, appProtocol: http}, {port: 8081, name: a, appProtocol: kubernetes.io/h2c}, {port: 8082, name: b, appProtocol: kubernetes.io/ws}, {port: 8443, name: c, appProtocol: kubernetes.io/wss}]",
            );
        assert_eq!(named(&yaml), Vec::<String>::new());
    }

    #[test]
    fn unknown_unnamed_and_bad_app_protocols_are_sniffed() {
        let yaml = service(
            "cart",
            "",
            "[{port: 80, name: http}, {port: 9090, name: metrics}, {port: 8080}, {port: 8081, name: http, appProtocol: web}, {port: 50051, name: triple-api}]",
        );
        assert_eq!(
            named(&yaml),
            [
                "cart:1:sniffed",
                "cart:2:sniffed",
                "cart:3:sniffed",
                "cart:4:sniffed"
            ]
        );
        let p = &listed(&yaml)[2];
        assert_eq!((p.name.as_str(), p.app.as_str()), ("http", "web"));
        assert_eq!(p.port, Json::from(8081));
    }

    #[test]
    fn udp_and_server_first_ports_are_not_sniffed() {
        let yaml = service(
            "cart",
            "",
            "[{port: 5353, protocol: UDP, name: mdns}, {port: 25, name: smtp}, {port: 53, name: dns}, {port: 3306, name: db}, {port: 27017}, {port: 3307, name: db}]",
        );
        assert_eq!(named(&yaml), ["cart:5:sniffed"]);
    }

    #[test]
    fn istio_gateway_and_other_kinds_of_service_are_left_out() {
        let yaml = service("istiod", "  labels: {istio: pilot}\n", "[{port: 15012, name: xds-tls}]")
            + &service("ingress", "  labels: {istio: ''}\n", "[{port: 80, name: web}]")
            + &service("old", "  labels: {release: istio}\n", "[{port: 80, name: web}]")
            + &service("mine", "  labels: {release: shop}\n", "[{port: 80, name: web}]")
            + &service(
                "waypoint",
                "  labels: {gateway.istio.io/managed: istio.io-mesh-controller}\n",
                "[{port: 15008, name: mesh}]",
            )
            + &service(
                "gw",
                "  labels: {gateway.networking.k8s.io/gateway-name: gw}\n",
                "[{port: 80, name: web}]",
            )
            + "---\napiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: hello, namespace: shop}\nspec:\n  ports: [{port: 80, name: web}]\n";
        assert_eq!(named(&yaml), ["mine:0:sniffed"]);
    }

    #[test]
    fn external_name_ports_named_tcp_or_unknown() {
        let yaml = service(
            "payments",
            "",
            "[{port: 8000, name: web}, {port: 5432, name: tcp}, {port: 5433, name: tcp-db}, {port: 443, name: https}, {port: 3306, name: db}, {port: 3306, name: tcp}, {port: 9000}]",
        )
        .replace("spec:\n", "spec:\n  type: ExternalName\n  externalName: payments.example.com\n");
        assert_eq!(
            named(&yaml),
            [
                "payments:0:external-unknown",
                "payments:1:external-tcp",
                "payments:5:external-tcp",
                "payments:6:external-unknown"
            ]
        );
    }

    #[test]
    fn malformed_ports_are_skipped_not_fatal() {
        let yaml = service("a", "", "'80'")
            + "---\napiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: shop, labels: not-labels}\nspec:\n  ports: [null, 8080, {port: x, name: 7}]\n"
            + "---\napiVersion: v1\nkind: Service\nmetadata: {name: c, namespace: shop}\nspec: not-a-spec\n";
        assert_eq!(named(&yaml), ["b:2:sniffed"]);
    }
}
