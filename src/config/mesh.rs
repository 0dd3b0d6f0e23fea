//! `mesh:`: the mesh meshward checks against (root namespace, trust domain,
//! proxy defaults) and the namespaces the repository declares.

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MeshConfig {
    #[serde(default = "default_root_namespace")]
    pub root_namespace: String,
    #[serde(default = "default_trust_domain")]
    pub trust_domain: String,
    /// CPU request of one sidecar proxy when the pod sets no
    /// `sidecar.istio.io/proxyCPU` annotation (Istio's default: 100m).
    #[serde(default = "default_proxy_cpu")]
    pub proxy_cpu: String,
    /// Memory request of one proxy without `sidecar.istio.io/proxyMemory` (128Mi).
    #[serde(default = "default_proxy_memory")]
    pub proxy_memory: String,
    /// Labels of namespaces the repository does not declare (created and labelled
    /// elsewhere), so that whether they are injected is known rather than unknown.
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespaceDecl>,
}

/// `mesh.namespaces.<name>`: what a namespace managed outside the repository looks like.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamespaceDecl {
    /// Its labels, all of them: `{}` says it has none (so it is not injected).
    pub labels: BTreeMap<String, String>,
}

/// Bounds of `mesh.namespaces`: it describes a cluster, not a dump of one.
const MAX_NAMESPACES: usize = 10_000;
const MAX_NAMESPACE_LABELS: usize = 100;

fn default_root_namespace() -> String {
    "istio-system".into()
}
fn default_trust_domain() -> String {
    "cluster.local".into()
}
fn default_proxy_cpu() -> String {
    "100m".into()
}
fn default_proxy_memory() -> String {
    "128Mi".into()
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            root_namespace: default_root_namespace(),
            trust_domain: default_trust_domain(),
            proxy_cpu: default_proxy_cpu(),
            proxy_memory: default_proxy_memory(),
            namespaces: BTreeMap::new(),
        }
    }
}

impl MeshConfig {
    /// Checks `mesh.namespaces`: names and labels as Kubernetes accepts them, bounded.
    /// The error names the offending key (its path under `mesh.namespaces`).
    pub(super) fn check_namespaces(&self) -> Result<(), (Vec<String>, String)> {
        if self.namespaces.len() > MAX_NAMESPACES {
            return Err((
                Vec::new(),
                format!("`mesh.namespaces` lists {} namespaces, more than the limit of {MAX_NAMESPACES}", self.namespaces.len()),
            ));
        }
        for (name, decl) in &self.namespaces {
            if !dns_label(name) {
                return Err((
                    vec![name.clone()],
                    format!("`mesh.namespaces` key {name:?} is not a namespace name (lowercase letters, digits and `-`, at most 63, starting and ending with a letter or digit)"),
                ));
            }
            if decl.labels.len() > MAX_NAMESPACE_LABELS {
                return Err((
                    vec![name.clone(), "labels".into()],
                    format!("`mesh.namespaces.{name}.labels` has more than {MAX_NAMESPACE_LABELS} labels"),
                ));
            }
            for (key, value) in &decl.labels {
                let problem = label_key_problem(key).or_else(|| {
                    (!label_value(value)).then(|| format!("value {value:?} is not a label value (at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)"))
                });
                if let Some(problem) = problem {
                    return Err((
                        vec![name.clone(), "labels".into(), key.clone()],
                        format!("`mesh.namespaces.{name}.labels` {key:?}: {problem}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A DNS-1123 label: what a namespace name must be.
fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9-_.]` with alphanumeric ends.
fn label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// Why a label key is not one Kubernetes accepts (`[prefix/]name`), if it is not.
fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if name.is_empty() || !label_value(name) {
        return Some("the key's name is not a label name (at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)".into());
    }
    if let Some(p) = prefix {
        let ok = !p.is_empty() && p.len() <= 253 && p.split('.').all(dns_label);
        if !ok {
            return Some("the key's prefix is not a DNS subdomain".into());
        }
    }
    None
}
