//! Host names as istiod resolves them: every Service as `<name>.<ns>.svc.cluster.local`
//! and every ServiceEntry host, each visible in the namespaces its `exportTo` names;
//! a short name is relative to the namespace of the resource that writes it, and any
//! name with a dot is taken as already qualified (`reviews.prod` is not expanded).
//! (istio/istio pkg/config/analysis/analyzers/util/service_lookup.go, hosts.go;
//! pilot/pkg/model/config.go ResolveShortnameToFQDN)

use crate::manifest::Resource;
use crate::pointer::At;
use foldhash::{HashMap, HashSet};
use serde::Serialize;
use serde_json::Value as Json;

/// The cluster's DNS suffix, as istiod's default and istioctl's analyzer use it.
pub(crate) const DOMAIN: &str = "cluster.local";

/// A port of a Service or ServiceEntry.
#[derive(Debug, Clone, Serialize)]
pub struct HostPort {
    pub number: u64,
    pub name: String,
    /// Kubernetes protocol of a Service port (TCP, UDP, SCTP), the Istio protocol of a
    /// ServiceEntry port.
    pub protocol: String,
    /// `targetPort` as written (a number or a container port's name); empty when unset.
    pub target_port: String,
}

/// A Service or ServiceEntry host.
#[derive(Debug, Clone)]
pub(crate) struct Entry<'a> {
    pub(crate) resource: &'a Resource,
    pub(crate) host: String,
    /// Namespaces that see it; `*` for all.
    pub(crate) export_to: Vec<String>,
    pub(crate) ports: Vec<HostPort>,
}

impl Entry<'_> {
    pub(crate) fn id(&self) -> &str {
        &self.resource.id
    }

    fn visible_in(&self, scope: &str) -> bool {
        self.export_to.iter().any(|e| e == "*" || e == scope)
    }
}

/// How a host written in a route or DestinationRule resolves.
#[derive(Debug)]
pub(crate) enum Resolved<'a> {
    Found(&'a Entry<'a>),
    /// Defined, but not exported to the namespaces where the referring resource
    /// applies (its own, or its `exportTo`).
    NotExported(&'a Entry<'a>, Vec<String>),
    /// A `name.namespace` form of a Service the repository defines: istiod takes it as
    /// a fully qualified name, and no such host exists.
    NotQualified(&'a Entry<'a>),
    /// Known not to exist: a Service name in a namespace the repository owns.
    NotFound(String),
    /// Neither found nor known to be missing: the repository does not own where it
    /// would be defined.
    Unknown(String),
}

impl Resolved<'_> {
    pub(crate) fn status(&self) -> &'static str {
        match self {
            Resolved::Found(_) => "found",
            Resolved::NotExported(..) => "not-exported",
            Resolved::NotQualified(_) => "not-qualified",
            Resolved::NotFound(_) => "not-found",
            Resolved::Unknown(_) => "unknown",
        }
    }
}

impl<'r> Resolved<'r> {
    pub(crate) fn found(&self) -> Option<&'r Entry<'r>> {
        match self {
            Resolved::Found(e) => Some(*e),
            _ => None,
        }
    }
}

/// Every host of the tree, indexed by name.
pub(crate) struct Registry<'a> {
    exact: HashMap<String, Vec<Entry<'a>>>,
    wildcards: Vec<Entry<'a>>,
    /// Namespaces whose Services the repository is the source of (see [`owned`]).
    owned: HashSet<String>,
    /// Services per namespace, for messages about a namespace the repository holds
    /// some of.
    services_in: HashMap<String, usize>,
}

/// The fully qualified form of `host` written in namespace `ns`.
pub(crate) fn qualify(host: &str, ns: &str) -> String {
    let host = host.to_ascii_lowercase();
    if host.contains('.') || host.starts_with('*') {
        host
    } else {
        format!("{host}.{ns}.svc.{DOMAIN}")
    }
}

/// `name` and `namespace` of a cluster-local Service host.
pub(crate) fn service_parts(fqdn: &str) -> Option<(&str, &str)> {
    let rest = fqdn.strip_suffix(DOMAIN)?.strip_suffix(".svc.")?;
    let (name, ns) = rest.split_once('.')?;
    (!ns.contains('.') && !name.is_empty()).then_some((name, ns))
}

/// `exportTo` as scopes: unset or empty is everywhere; `.` is the own namespace.
pub(crate) fn export_scopes(values: &[String], own: &str) -> Vec<String> {
    if values.is_empty() {
        return vec!["*".into()];
    }
    values
        .iter()
        .map(|v| if v == "." { own.to_string() } else { v.clone() })
        .collect()
}

/// `spec.exportTo` of a resource.
pub(crate) fn spec_export_to(r: &Resource) -> Vec<String> {
    r.body
        .at("/spec/exportTo")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn ports_of(r: &Resource, number_key: &str) -> Vec<HostPort> {
    let default_protocol = if r.kind == "Service" { "TCP" } else { "" };
    r.body
        .at("/spec/ports")
        .and_then(Json::as_array)
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| {
                    Some(HostPort {
                        number: p.get(number_key).and_then(Json::as_u64)?,
                        name: text(p.get("name")),
                        protocol: p
                            .get("protocol")
                            .and_then(Json::as_str)
                            .unwrap_or(default_protocol)
                            .to_string(),
                        target_port: text(p.get("targetPort")),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A string or number field as text ("" when absent).
pub(crate) fn text(v: Option<&Json>) -> String {
    match v {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

impl<'a> Registry<'a> {
    /// `owned`: namespaces the repository is the source of.
    pub(crate) fn new(resources: &[&'a Resource], owned: HashSet<String>) -> Self {
        let mut exact: HashMap<String, Vec<Entry<'a>>> = HashMap::default();
        let mut wildcards = Vec::new();
        let mut services_in: HashMap<String, usize> = HashMap::default();
        for &r in resources {
            let Some(ns) = r.namespace.as_deref() else {
                continue;
            };
            if r.kind == "Service" && r.api_version == "v1" {
                *services_in.entry(ns.to_string()).or_default() += 1;
                let annotation = r
                    .body
                    .at("/metadata/annotations/networking.istio.io~1exportTo")
                    .and_then(Json::as_str)
                    .unwrap_or("");
                let export: Vec<String> = annotation
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                let host = format!("{}.{ns}.svc.{DOMAIN}", r.name.to_ascii_lowercase());
                exact.entry(host.clone()).or_default().push(Entry {
                    resource: r,
                    host,
                    export_to: export_scopes(&export, ns),
                    ports: ports_of(r, "port"),
                });
            } else if r.kind == "ServiceEntry" && r.api_version.contains("istio.io/") {
                let export = export_scopes(&spec_export_to(r), ns);
                let ports = ports_of(r, "number");
                for h in r
                    .body
                    .at("/spec/hosts")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Json::as_str)
                {
                    let host = qualify(h, ns);
                    let entry = Entry {
                        resource: r,
                        host: host.clone(),
                        export_to: export.clone(),
                        ports: ports.clone(),
                    };
                    if host.starts_with('*') {
                        wildcards.push(entry);
                    } else {
                        exact.entry(host).or_default().push(entry);
                    }
                }
            }
        }
        Registry {
            exact,
            wildcards,
            owned,
            services_in,
        }
    }

    pub(crate) fn owns(&self, ns: &str) -> bool {
        self.owned.contains(ns)
    }

    /// The Service `name` of namespace `ns`, if the tree defines it.
    pub(crate) fn service(&self, ns: &str, name: &str) -> Option<&Entry<'a>> {
        self.exact
            .get(&format!("{}.{ns}.svc.{DOMAIN}", name.to_ascii_lowercase()))?
            .iter()
            .find(|e| e.resource.kind == "Service")
    }

    /// Services whose host a wildcard (`*.ns.svc.cluster.local`, `*.local`) covers.
    pub(crate) fn services_matching(&self, wildcard: &str) -> Vec<&Entry<'a>> {
        let suffix = wildcard.trim_start_matches('*');
        let mut out: Vec<&Entry> = self
            .exact
            .values()
            .flatten()
            .filter(|e| e.resource.kind == "Service" && e.host.ends_with(suffix))
            .collect();
        out.sort_by(|a, b| a.host.cmp(&b.host));
        out
    }

    /// Resolves `host` as written in a resource of namespace `ns` exported to
    /// `export_to` (its `spec.exportTo`): the analyzer's lookup, whose scopes are the
    /// referring resource's.
    pub(crate) fn resolve(&self, host: &str, ns: &str, export_to: &[String]) -> Resolved<'_> {
        let fqdn = qualify(host, ns);
        let mut scopes: Vec<String> = vec!["*".into()];
        if export_to.is_empty() {
            scopes.push(ns.to_string());
        } else {
            scopes.extend(export_scopes(export_to, ns));
        }
        if let Some(entries) = self.exact.get(&fqdn) {
            return match entries
                .iter()
                .find(|e| scopes.iter().any(|s| e.visible_in(s)))
            {
                Some(e) => Resolved::Found(e),
                None => Resolved::NotExported(&entries[0], scopes[1..].to_vec()),
            };
        }
        let bare = fqdn.trim_start_matches('*');
        if let Some(e) = self.wildcards.iter().find(|e| {
            (e.visible_in("*") || e.visible_in(ns))
                && bare.ends_with(e.host.trim_start_matches('*'))
        }) {
            return Resolved::Found(e);
        }
        if let Some((name, svc_ns)) = service_parts(&fqdn) {
            if self.owns(svc_ns) {
                return Resolved::NotFound(format!(
                    "namespace {svc_ns} is the repository's and has no Service {name}"
                ));
            }
            return Resolved::Unknown(match self.services_in.get(svc_ns) {
                Some(n) => format!(
                    "the repository does not declare namespace {svc_ns} (no Namespace object), and {name} is none of the {n} Service{} it defines there: it may come from elsewhere",
                    if *n == 1 { "" } else { "s" }
                ),
                None => format!(
                    "the repository defines no Service in namespace {svc_ns} and does not declare it: its Services come from elsewhere"
                ),
            });
        }
        // `name.namespace` or `name.namespace.svc`: a Service the tree has, which
        // istiod does not find under that name.
        let labels: Vec<&str> = fqdn.split('.').collect();
        if let [name, svc_ns] | [name, svc_ns, "svc"] = labels.as_slice() {
            if let Some(e) = self.service(svc_ns, name) {
                return Resolved::NotQualified(e);
            }
        }
        Resolved::Unknown(
            "no Service or ServiceEntry in the repository defines it; a ServiceEntry elsewhere may"
                .to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_relative_and_dotted_names_are_taken_as_written() {
        assert_eq!(qualify("reviews", "prod"), "reviews.prod.svc.cluster.local");
        assert_eq!(qualify("reviews.prod", "web"), "reviews.prod");
        assert_eq!(qualify("*.example.com", "web"), "*.example.com");
        assert_eq!(
            service_parts("reviews.prod.svc.cluster.local"),
            Some(("reviews", "prod"))
        );
        assert_eq!(service_parts("api.example.com"), None);
        assert_eq!(
            export_scopes(&[".".into(), "web".into()], "prod"),
            ["prod", "web"]
        );
        assert_eq!(export_scopes(&[], "prod"), ["*"]);
    }
}
