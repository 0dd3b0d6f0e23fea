//! Routes and where they send traffic: VirtualService destinations, mirrors and
//! gateways, Gateway API routes' backendRefs and parentRefs.

use super::destination_rules::{reason_of, SubsetIndex};
use super::gateways::{Index as Gateways, Listener};
use super::hosts::{export_scopes, qualify, spec_export_to, text, Registry, DOMAIN};
use super::{array, path, Conflicts, Destination, HostConflict, ParentRef, I, K};
use crate::manifest::Resource;
use crate::model::labels::{Labels, LabelsExt};
use crate::model::Model;
use crate::pointer::At;
use foldhash::HashMap;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

const ROUTE_KINDS: &[&str] = &["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"];

struct Ctx<'a> {
    registry: &'a Registry<'a>,
    subsets: &'a SubsetIndex<'a>,
    gateways: &'a Gateways<'a>,
    model: &'a Model,
    /// ReferenceGrants by the namespace they grant access to.
    grants: HashMap<&'a str, Vec<&'a Resource>>,
}

fn is_vs(r: &Resource) -> bool {
    r.kind == "VirtualService" && r.api_version.contains("istio.io/")
}

fn is_api_route(r: &Resource) -> bool {
    r.api_version.starts_with("gateway.networking.k8s.io/")
        && ROUTE_KINDS.contains(&r.kind.as_str())
}

pub(super) fn of(
    resources: &[&Resource],
    registry: &Registry,
    subsets: &SubsetIndex,
    gateways: &Gateways,
    model: &Model,
) -> (Vec<Destination>, Vec<ParentRef>) {
    let mut grants: HashMap<&str, Vec<&Resource>> = HashMap::default();
    for r in resources.iter().filter(|r| {
        r.kind == "ReferenceGrant" && r.api_version.starts_with("gateway.networking.k8s.io/")
    }) {
        if let Some(ns) = r.namespace.as_deref() {
            grants.entry(ns).or_default().push(r);
        }
    }
    let ctx = Ctx {
        registry,
        subsets,
        gateways,
        model,
        grants,
    };
    let mut destinations = Vec::new();
    let mut parents = Vec::new();
    for r in resources {
        if is_vs(r) {
            virtual_service(&ctx, r, &mut destinations, &mut parents);
        } else if is_api_route(r) {
            api_route(&ctx, r, &mut destinations, &mut parents);
        }
    }
    (destinations, parents)
}

fn strings(v: &Json, key: &str) -> Vec<String> {
    array(v, key)
        .iter()
        .filter_map(Json::as_str)
        .map(str::to_string)
        .collect()
}

fn with(base: &[Json], more: &[&str]) -> Vec<Json> {
    let mut p = base.to_vec();
    p.extend(more.iter().map(|k| Json::from(*k)));
    p
}

/// One destination: `host` resolved, its port and subset checked against what the
/// host defines.
#[allow(clippy::too_many_arguments)]
fn destination(
    ctx: &Ctx,
    r: &Resource,
    ns: &str,
    export_to: &[String],
    host: &str,
    host_path: Vec<Json>,
    role: &str,
    port: (Option<u64>, Vec<Json>),
    subset: (Option<String>, Vec<Json>),
    weight: Option<i64>,
    gateway_only: bool,
) -> Destination {
    let resolved = ctx.registry.resolve(host, ns, export_to);
    let target = resolved.found();
    let mut known_subsets = BTreeSet::new();
    let mut subset_status = String::new();
    let mut subset_pods = None;
    if let Some(t) = target {
        let service_ns = t.resource.namespace.as_deref().unwrap_or(ns);
        let rules = ctx.subsets.rules_for(&t.host, ns, service_ns);
        for dr in &rules {
            known_subsets.extend(dr.subsets.iter().map(|s| s.name.clone()));
        }
        if let Some(name) = &subset.0 {
            let defined = rules
                .iter()
                .flat_map(|dr| dr.subsets.iter())
                .find(|s| s.name == *name);
            // With no DestinationRule for the host here, one may live in a namespace
            // the repository does not own (the route's, the service's, the root's).
            let elsewhere = rules.is_empty()
                && !(ctx.registry.owns(ns)
                    && ctx.registry.owns(service_ns)
                    && ctx.registry.owns(ctx.subsets.root()));
            subset_status = match (defined, elsewhere) {
                (Some(_), _) => "found",
                (None, true) => "unknown",
                (None, false) => "not-found",
            }
            .to_string();
            subset_pods = defined
                .filter(|s| s.status != "unknown")
                .map(|s| s.selects.len());
        }
    }
    Destination {
        resource: r.id.clone(),
        kind: r.kind.clone(),
        namespace: ns.to_string(),
        role: role.to_string(),
        path: host_path,
        host: host.to_string(),
        fqdn: qualify(host, ns),
        status: resolved.status().to_string(),
        reason: reason_of(&resolved),
        target: target.map(|t| t.id().to_string()),
        target_ports: target
            .map(|t| t.ports.iter().map(|p| p.number).collect())
            .unwrap_or_default(),
        port: port.0,
        port_path: port.1,
        subset: subset.0,
        subset_path: subset.1,
        subset_status,
        known_subsets: known_subsets.into_iter().collect(),
        subset_pods,
        weight,
        gateway_only,
        reference_grant: String::new(),
    }
}

fn virtual_service(
    ctx: &Ctx,
    r: &Resource,
    out: &mut Vec<Destination>,
    parents: &mut Vec<ParentRef>,
) {
    let Some(ns) = r.namespace.as_deref() else {
        return;
    };
    let spec = r.body.get("spec").unwrap_or(&Json::Null);
    let export_to = spec_export_to(r);
    let bound = strings(spec, "gateways");
    let gateway_only = !bound.is_empty() && !bound.iter().any(|g| g == "mesh");
    let mut push = |d: &Json, base: Vec<Json>, role: &str, weight: Option<i64>| {
        let Some(host) = d.get("host").and_then(Json::as_str) else {
            return;
        };
        out.push(destination(
            ctx,
            r,
            ns,
            &export_to,
            host,
            with(&base, &["host"]),
            role,
            (
                d.at("/port/number").and_then(Json::as_u64),
                with(&base, &["port", "number"]),
            ),
            (
                d.get("subset").and_then(Json::as_str).map(str::to_string),
                with(&base, &["subset"]),
            ),
            weight,
            gateway_only,
        ));
    };
    for section in ["http", "tcp", "tls"] {
        for (i, rule) in array(spec, section).iter().enumerate() {
            for (j, route) in array(rule, "route").iter().enumerate() {
                if let Some(d) = route.get("destination") {
                    let base = path(&[
                        K("spec"),
                        K(section),
                        I(i),
                        K("route"),
                        I(j),
                        K("destination"),
                    ]);
                    push(d, base, "route", route.get("weight").and_then(Json::as_i64));
                }
            }
            if section != "http" {
                continue;
            }
            if let Some(m) = rule.get("mirror") {
                push(
                    m,
                    path(&[K("spec"), K("http"), I(i), K("mirror")]),
                    "mirror",
                    None,
                );
            }
            for (k, m) in array(rule, "mirrors").iter().enumerate() {
                if let Some(d) = m.get("destination") {
                    let base = path(&[
                        K("spec"),
                        K("http"),
                        I(i),
                        K("mirrors"),
                        I(k),
                        K("destination"),
                    ]);
                    push(d, base, "mirror", None);
                }
            }
        }
    }
    for (k, g) in array(spec, "gateways").iter().enumerate() {
        if let Some(g) = g.as_str() {
            parents.extend(gateway_ref(
                ctx,
                r,
                ns,
                g,
                path(&[K("spec"), K("gateways"), I(k)]),
            ));
        }
    }
    for (i, rule) in array(spec, "http").iter().enumerate() {
        for (m, matched) in array(rule, "match").iter().enumerate() {
            for (k, g) in array(matched, "gateways").iter().enumerate() {
                if let Some(g) = g.as_str() {
                    let p = path(&[
                        K("spec"),
                        K("http"),
                        I(i),
                        K("match"),
                        I(m),
                        K("gateways"),
                        I(k),
                    ]);
                    parents.extend(gateway_ref(ctx, r, ns, g, p));
                }
            }
        }
    }
}

/// A VirtualService `gateways` entry, read as istiod reads it: `ns/name`, `./name`,
/// `name` (the VirtualService's namespace) or the legacy `name.ns[.svc...]`
/// (pilot/pkg/model/config.go resolveGatewayName).
fn gateway_ref(
    ctx: &Ctx,
    r: &Resource,
    ns: &str,
    written: &str,
    at: Vec<Json>,
) -> Option<ParentRef> {
    if written == "mesh" || written.contains("~istio-autogenerated-k8s-gateway~") {
        return None;
    }
    let (gns, name) = match written.split_once('/') {
        Some((".", name)) => (ns.to_string(), name.to_string()),
        Some((gns, name)) => (gns.to_string(), name.to_string()),
        None => match written.split_once('.') {
            Some((name, rest)) => (
                rest.split('.').next().unwrap_or(rest).to_string(),
                name.to_string(),
            ),
            None => (ns.to_string(), written.to_string()),
        },
    };
    let found = ctx
        .gateways
        .istio
        .get(&(gns.as_str(), name.as_str()))
        .map(|g| g.id.clone())
        .or_else(|| {
            ctx.gateways
                .api
                .get(&(gns.as_str(), name.as_str()))
                .map(|(g, _)| g.id.clone())
        });
    let elsewhere: Vec<String> = if found.is_some() {
        Vec::new()
    } else {
        ctx.gateways
            .by_name
            .get(name.as_str())
            .into_iter()
            .flatten()
            .map(|id| id.to_string())
            .collect()
    };
    let (status, reason) = match &found {
        Some(_) => ("found", String::new()),
        None if ctx.registry.owns(&gns) => (
            "not-found",
            format!("namespace {gns} is the repository's and has no Gateway {name}"),
        ),
        None if !elsewhere.is_empty() => (
            "not-found",
            format!("the repository's Gateway {name} is in another namespace"),
        ),
        None => (
            "unknown",
            format!("the repository does not declare namespace {gns}: the Gateway may be defined elsewhere"),
        ),
    };
    Some(ParentRef {
        resource: r.id.clone(),
        kind: r.kind.clone(),
        namespace: ns.to_string(),
        path: at,
        written: written.to_string(),
        parent_kind: "Gateway".into(),
        parent_namespace: gns,
        parent_name: name,
        status: status.into(),
        reason,
        parent: found,
        elsewhere,
    })
}

fn api_route(ctx: &Ctx, r: &Resource, out: &mut Vec<Destination>, parents: &mut Vec<ParentRef>) {
    let Some(ns) = r.namespace.as_deref() else {
        return;
    };
    let spec = r.body.get("spec").unwrap_or(&Json::Null);
    let hostnames: Vec<String> = strings(spec, "hostnames")
        .into_iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    let mut gateway_parent = false;
    for (k, p) in array(spec, "parentRefs").iter().enumerate() {
        let kind = p.get("kind").and_then(Json::as_str).unwrap_or("Gateway");
        let group = p
            .get("group")
            .and_then(Json::as_str)
            .unwrap_or("gateway.networking.k8s.io");
        let name = text(p.get("name"));
        let pns = p
            .get("namespace")
            .and_then(Json::as_str)
            .unwrap_or(ns)
            .to_string();
        let at = path(&[K("spec"), K("parentRefs"), I(k)]);
        let (status, reason, parent) = match (kind, group) {
            ("Gateway", "gateway.networking.k8s.io") => {
                gateway_parent = true;
                match ctx.gateways.api.get(&(pns.as_str(), name.as_str())) {
                    Some((g, _)) if ctx.gateways.duplicated.contains(&g.id) => (
                        "unknown",
                        format!("{} is defined more than once in the repository (manifest/duplicate-resource), and which definition applies depends on the order they are applied in", g.id),
                        Some(g.id.clone()),
                    ),
                    Some((g, listeners)) => {
                        let (status, reason) = attach(ctx, r, ns, &hostnames, p, listeners);
                        (status, reason, Some(g.id.clone()))
                    }
                    None => missing(ctx, &pns, &format!("Gateway {name}")),
                }
            }
            ("Service", "" | "core") => match ctx.registry.service(&pns, &name) {
                Some(s) => ("found", String::new(), Some(s.id().to_string())),
                None => missing(ctx, &pns, &format!("Service {name}")),
            },
            // ServiceEntry and ListenerSet parents, and kinds Istio skips.
            _ => continue,
        };
        parents.push(ParentRef {
            resource: r.id.clone(),
            kind: r.kind.clone(),
            namespace: ns.to_string(),
            path: at,
            written: format!("{pns}/{name}"),
            parent_kind: kind.to_string(),
            parent_namespace: pns,
            parent_name: name,
            status: status.to_string(),
            reason,
            parent,
            elsewhere: Vec::new(),
        });
    }
    for (i, rule) in array(spec, "rules").iter().enumerate() {
        for (j, b) in array(rule, "backendRefs").iter().enumerate() {
            let kind = b.get("kind").and_then(Json::as_str).unwrap_or("Service");
            let group = b.get("group").and_then(Json::as_str).unwrap_or("");
            let Some(name) = b.get("name").and_then(Json::as_str) else {
                continue;
            };
            let bns = b.get("namespace").and_then(Json::as_str).unwrap_or(ns);
            let base = path(&[K("spec"), K("rules"), I(i), K("backendRefs"), I(j)]);
            if kind != "Service" || !group.is_empty() && group != "core" {
                if !supported_backend(group, kind) {
                    let mut d = invalid_kind(r, ns, name, group, kind, with(&base, &["kind"]));
                    d.weight = b.get("weight").and_then(Json::as_i64);
                    out.push(d);
                }
                continue;
            }
            let host = format!("{name}.{bns}.svc.{DOMAIN}");
            let mut d = destination(
                ctx,
                r,
                ns,
                &[],
                &host,
                with(&base, &["name"]),
                "backend",
                (b.get("port").and_then(Json::as_u64), with(&base, &["port"])),
                (None, Vec::new()),
                b.get("weight").and_then(Json::as_i64),
                false,
            );
            d.host = name.to_string();
            // ReferenceGrant governs backends of routes on Gateway parents only.
            if bns != ns && gateway_parent {
                d.reference_grant = if granted(ctx, r, ns, bns, name) {
                    "granted"
                } else if ctx.registry.owns(bns) {
                    "missing"
                } else {
                    "unknown"
                }
                .to_string();
            }
            out.push(d);
        }
    }
}

/// Backend kinds Istio resolves besides core Services (gw/conversion.go buildDestination).
fn supported_backend(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("networking.istio.io", "ServiceEntry" | "Hostname")
            | ("inference.networking.k8s.io", "InferencePool")
            | ("multicluster.x-k8s.io", "ServiceImport")
    )
}

/// A backendRef of a kind Istio does not resolve: `ResolvedRefs` False, `InvalidKind`.
fn invalid_kind(
    r: &Resource,
    ns: &str,
    name: &str,
    group: &str,
    kind: &str,
    at: Vec<Json>,
) -> Destination {
    let written = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    Destination {
        resource: r.id.clone(),
        kind: r.kind.clone(),
        namespace: ns.to_string(),
        role: "backend".into(),
        path: at,
        host: name.to_string(),
        fqdn: name.to_string(),
        status: "invalid-kind".into(),
        reason: format!("a backendRef of kind {written} is not one Istio resolves (Service, ServiceEntry, Hostname, InferencePool)"),
        target: None,
        target_ports: Vec::new(),
        port: None,
        port_path: Vec::new(),
        subset: None,
        subset_path: Vec::new(),
        subset_status: String::new(),
        known_subsets: Vec::new(),
        subset_pods: None,
        weight: None,
        gateway_only: false,
        reference_grant: String::new(),
    }
}

fn missing(ctx: &Ctx, ns: &str, what: &str) -> (&'static str, String, Option<String>) {
    if ctx.registry.owns(ns) {
        (
            "not-found",
            format!("namespace {ns} is the repository's and has no {what}"),
            None,
        )
    } else {
        (
            "unknown",
            format!("the repository does not declare namespace {ns}: the {what} may be defined elsewhere"),
            None,
        )
    }
}

/// A ReferenceGrant in `to_ns` lets routes of `kind` in `from_ns` send to Service `name`.
fn granted(ctx: &Ctx, r: &Resource, from_ns: &str, to_ns: &str, name: &str) -> bool {
    ctx.grants.get(to_ns).into_iter().flatten().any(|g| {
        let spec = g.body.get("spec").unwrap_or(&Json::Null);
        let from = array(spec, "from").iter().any(|f| {
            text(f.get("group")) == "gateway.networking.k8s.io"
                && text(f.get("kind")) == r.kind
                && text(f.get("namespace")) == from_ns
        });
        let to = array(spec, "to").iter().any(|t| {
            matches!(text(t.get("group")).as_str(), "" | "core")
                && text(t.get("kind")) == "Service"
                && t.get("name")
                    .and_then(Json::as_str)
                    .is_none_or(|n| n == name)
        });
        from && to
    })
}

/// Two host names overlap: equal, or one a wildcard covering the other.
pub(super) fn hosts_overlap(a: &str, b: &str) -> bool {
    let covers = |w: &str, h: &str| {
        w == "*"
            || w.strip_prefix('*')
                .is_some_and(|suffix| h.ends_with(suffix))
    };
    a == b || covers(a, b) || covers(b, a)
}

/// Whether a route attaches to a Gateway parent, in the order istiod checks
/// (pilot/pkg/config/kube/gateway/conversion.go referenceAllowed): listeners matching
/// `sectionName` and `port`, hostnames, the route's namespace, the route's kind.
fn attach(
    ctx: &Ctx,
    r: &Resource,
    ns: &str,
    hostnames: &[String],
    parent: &Json,
    listeners: &[Listener],
) -> (&'static str, String) {
    let section = parent.get("sectionName").and_then(Json::as_str);
    let port = parent.get("port").and_then(Json::as_u64);
    let candidates: Vec<&Listener> = listeners
        .iter()
        .filter(|l| section.is_none_or(|s| s == l.name))
        .filter(|l| port.is_none() || port == l.port)
        .collect();
    if candidates.is_empty() {
        let what = match (section, port) {
            (Some(s), Some(p)) => format!("a listener named {s} on port {p}"),
            (Some(s), None) => format!("a listener named {s}"),
            (None, Some(p)) => format!("a listener on port {p}"),
            (None, None) => "a listener".to_string(),
        };
        return (
            "not-allowed",
            format!("NoMatchingParent: the Gateway has no {what}"),
        );
    }
    let route_hosts: Vec<&str> = if hostnames.is_empty() {
        vec!["*"]
    } else {
        hostnames.iter().map(String::as_str).collect()
    };
    let by_host: Vec<&&Listener> = candidates
        .iter()
        .filter(|l| {
            let lh = l.hostname.as_deref().unwrap_or("*");
            route_hosts.iter().any(|h| hosts_overlap(h, lh))
        })
        .collect();
    if by_host.is_empty() {
        let names: Vec<&str> = candidates
            .iter()
            .filter_map(|l| l.hostname.as_deref())
            .collect();
        return (
            "not-allowed",
            format!(
                "NoMatchingListenerHostname: none of its hostnames overlaps the listeners' ({})",
                names.join(", ")
            ),
        );
    }
    let gw_ns = parent.get("namespace").and_then(Json::as_str).unwrap_or(ns);
    let mut unknown = None;
    let mut by_ns = Vec::new();
    for l in by_host {
        match namespace_allowed(ctx, l, ns, gw_ns) {
            Some(true) => by_ns.push(l),
            Some(false) => {}
            None => unknown = Some(l.name.clone()),
        }
    }
    if by_ns.is_empty() {
        if let Some(name) = unknown {
            return (
                "unknown",
                format!("listener {name} admits namespaces by label, and the labels of namespace {ns} are unknown"),
            );
        }
        return (
            "not-allowed",
            format!("NotAllowedByListeners: no listener admits routes from namespace {ns} (allowedRoutes.namespaces; unset means the Gateway's own namespace {gw_ns})"),
        );
    }
    if by_ns.iter().any(|l| l.kinds.contains(&r.kind)) {
        return ("found", String::new());
    }
    let kinds: BTreeSet<&str> = by_ns
        .iter()
        .flat_map(|l| l.kinds.iter().map(String::as_str))
        .collect();
    (
        "not-allowed",
        format!(
            "NotAllowedByListeners: its listeners accept {} only",
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Whether a listener admits routes of namespace `ns`; None when its namespace
/// selector cannot be evaluated here (expressions, or labels the repository does not
/// know).
fn namespace_allowed(ctx: &Ctx, l: &Listener, ns: &str, gw_ns: &str) -> Option<bool> {
    match l.from.as_str() {
        "All" => Some(true),
        "Selector" => {
            if l.expressions {
                return None;
            }
            let selector = l.selector.clone().unwrap_or_default();
            // Kubernetes sets this label on every namespace, to its name: a selector on
            // it alone needs no other label.
            let by_name = selector.keys().all(|k| k == NAME_LABEL);
            let n = ctx.model.namespaces.get(ns);
            let mut labels: Labels = match n {
                Some(n) if n.labels_known => n.labels.clone(),
                _ if by_name => Labels::new(),
                _ => return None,
            };
            labels.insert(NAME_LABEL.into(), ns.to_string());
            Some(labels.selected_by(&selector))
        }
        _ => Some(ns == gw_ns),
    }
}

/// Hosts VirtualServices claim, by (scope, host): the resource and the host's path.
type Claims<'a> = BTreeMap<(String, String), Vec<(&'a str, Vec<Json>)>>;

/// VirtualServices for sidecars (bound to `mesh`) that claim one host in one scope:
/// istiod keeps one of them per host and ignores the rest (istioctl IST0109).
pub(super) fn mesh_host_conflicts(resources: &[&Resource]) -> Vec<HostConflict> {
    // (scope, host) → (resource, path)
    let mut claims: Claims = BTreeMap::new();
    for r in resources.iter().filter(|r| is_vs(r)) {
        let Some(ns) = r.namespace.as_deref() else {
            continue;
        };
        let spec = r.body.get("spec").unwrap_or(&Json::Null);
        let bound = strings(spec, "gateways");
        if !bound.is_empty() && !bound.iter().any(|g| g == "mesh") {
            continue;
        }
        let export = spec_export_to(r);
        let scopes = if export.is_empty() || export.iter().any(|e| e == "*") {
            vec!["*".to_string()]
        } else {
            export_scopes(&export, ns)
        };
        for (k, h) in array(spec, "hosts").iter().enumerate() {
            let Some(h) = h.as_str() else { continue };
            let host = qualify(h, ns);
            for s in &scopes {
                claims
                    .entry((s.clone(), host.clone()))
                    .or_default()
                    .push((&r.id, path(&[K("spec"), K("hosts"), I(k)])));
            }
        }
    }
    let mut out: Conflicts<(String, String, String)> = BTreeMap::new();
    for ((scope, host), members) in &claims {
        let everywhere = (scope != "*")
            .then(|| claims.get(&("*".to_string(), host.clone())))
            .flatten();
        for (id, at) in members {
            let others: BTreeSet<String> = members
                .iter()
                .chain(everywhere.into_iter().flatten())
                .map(|(o, _)| o.to_string())
                .filter(|o| o != id)
                .collect();
            if others.is_empty() {
                continue;
            }
            let e = out
                .entry((id.to_string(), host.clone(), scope.clone()))
                .or_insert_with(|| (at.clone(), BTreeSet::new()));
            e.1.extend(others);
        }
        // The everywhere-scoped VirtualServices conflict with this scope's too.
        for (id, at) in everywhere.into_iter().flatten() {
            let others: BTreeSet<String> = members
                .iter()
                .map(|(o, _)| o.to_string())
                .filter(|o| o != id)
                .collect();
            if others.is_empty() {
                continue;
            }
            out.entry((id.to_string(), host.clone(), scope.clone()))
                .or_insert_with(|| (at.clone(), BTreeSet::new()))
                .1
                .extend(others);
        }
    }
    out.into_iter()
        .map(|((resource, host, scope), (path, others))| HostConflict {
            resource,
            path,
            host,
            scope,
            others: others.into_iter().collect(),
        })
        .collect()
}
