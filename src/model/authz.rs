//! Identities and the AuthorizationPolicies that name them as a caller.
//!
//! A workload with a proxy presents `spiffe://<trust-domain>/ns/<ns>/sa/<sa>`; an
//! AuthorizationPolicy's `from.source` names callers by `principals` (the identity
//! without `spiffe://`), `namespaces` or `serviceAccounts` (`ns/name`), each with a
//! `not…` twin. Every string matches exactly, as a prefix (`abc*`), a suffix (`*abc`)
//! or as presence (`*`), as Istio matches them. A source names an identity when it has
//! at least one of these six fields and every one it has matches; its other
//! conditions (ipBlocks, requestPrincipals, `to`, `when`) are not evaluated: they can
//! only narrow which of that caller's requests the rule covers.

use crate::config::MeshConfig;
use crate::manifest::Resource;
use crate::pointer::At;
use foldhash::HashMap;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Identity {
    pub namespace: String,
    pub service_account: String,
    /// `spiffe://<trust-domain>/ns/<ns>/sa/<sa>`
    pub spiffe_id: String,
    /// The same, as AuthorizationPolicy `principals` write it.
    pub principal: String,
    /// ALLOW policies with a source that names it.
    pub allowed_by: Vec<String>,
    /// DENY policies with a source that names it.
    pub denied_by: Vec<String>,
    /// How each of those names it (for the change report; not in the policy input).
    #[serde(skip)]
    pub matched_by: Vec<AuthzMatch>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuthzMatch {
    pub policy: String,
    pub action: String,
    /// e.g. `principal cluster.local/ns/shop/sa/web`, `namespace shop`.
    pub via: String,
}

/// One `from.source` of an ALLOW or DENY policy.
struct Source {
    policy: String,
    action: &'static str,
    fields: Vec<(&'static str, Vec<String>)>,
}

const FIELDS: &[&str] = &[
    "principals",
    "notPrincipals",
    "namespaces",
    "notNamespaces",
    "serviceAccounts",
    "notServiceAccounts",
];

fn sources_of(resources: &[Resource]) -> Vec<Source> {
    let mut out = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.kind == "AuthorizationPolicy" && r.api_version.contains("istio.io/"))
    {
        let action = match r.body.at("/spec/action").and_then(Json::as_str) {
            None | Some("") | Some("ALLOW") => "ALLOW",
            Some("DENY") => "DENY",
            // AUDIT and CUSTOM do not decide whether a call is allowed here.
            Some(_) => continue,
        };
        let rules = r.body.at("/spec/rules").and_then(Json::as_array);
        for rule in rules.into_iter().flatten() {
            let froms = rule.get("from").and_then(Json::as_array);
            for from in froms.into_iter().flatten() {
                let Some(source) = from.get("source").and_then(Json::as_object) else {
                    continue;
                };
                let fields: Vec<(&'static str, Vec<String>)> = FIELDS
                    .iter()
                    .filter_map(|f| {
                        let values: Vec<String> = source
                            .get(*f)?
                            .as_array()?
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect();
                        (!values.is_empty()).then_some((*f, values))
                    })
                    .collect();
                if !fields.is_empty() {
                    out.push(Source {
                        policy: r.id.clone(),
                        action,
                        fields,
                    });
                }
            }
        }
    }
    out
}

/// Istio's string match: exact, `prefix*`, `*suffix`, or `*` for any non-empty value.
fn matches(pattern: &str, value: &str) -> bool {
    if pattern == "*" {
        return !value.is_empty();
    }
    if let Some(prefix) = pattern.strip_suffix('*') {
        return value.starts_with(prefix);
    }
    if let Some(suffix) = pattern.strip_prefix('*') {
        return value.ends_with(suffix);
    }
    pattern == value
}

/// How a source names this caller, or None when it does not.
fn names(source: &Source, principal: &str, ns: &str, sa_ref: &str) -> Option<String> {
    let mut via = None;
    for (field, values) in &source.fields {
        let (value, negated, what) = match *field {
            "principals" => (principal, false, "principal"),
            "notPrincipals" => (principal, true, "notPrincipals"),
            "namespaces" => (ns, false, "namespace"),
            "notNamespaces" => (ns, true, "notNamespaces"),
            // serviceAccounts are `namespace/name`, matched exactly.
            "serviceAccounts" => (sa_ref, false, "service account"),
            _ => (sa_ref, true, "notServiceAccounts"),
        };
        let exact = matches!(*field, "serviceAccounts" | "notServiceAccounts");
        let hit = values.iter().find(|p| {
            if exact {
                p.as_str() == value
            } else {
                matches(p, value)
            }
        });
        match (hit, negated) {
            (Some(p), false) => {
                via.get_or_insert_with(|| format!("{what} {p}"));
            }
            (None, true) => {
                via.get_or_insert_with(|| {
                    format!("{what} (not excluded by {})", values.join(", "))
                });
            }
            _ => return None,
        }
    }
    via
}

/// A value Istio matches by equality only (no leading or trailing `*`).
fn is_exact(pattern: &str) -> bool {
    !pattern.starts_with('*') && !pattern.ends_with('*')
}

/// Sources indexed by a field every identity they name must match exactly, so each
/// identity is checked against its few candidates, not against every source of the
/// repository (100k resources: a million sources times ten thousand identities).
/// Sources without such a field (wildcards, negations only) are checked against all.
#[derive(Default)]
struct SourceIndex {
    by_service_account: HashMap<String, Vec<usize>>,
    by_principal: HashMap<String, Vec<usize>>,
    by_namespace: HashMap<String, Vec<usize>>,
    everyone: Vec<usize>,
}

impl SourceIndex {
    fn new(sources: &[Source]) -> SourceIndex {
        let mut index = SourceIndex::default();
        for (i, s) in sources.iter().enumerate() {
            let field = |name: &str| {
                s.fields
                    .iter()
                    .find(|(f, _)| *f == name)
                    .map(|(_, values)| values)
            };
            // serviceAccounts always match exactly; principals and namespaces only when
            // none of their values is a pattern.
            let (map, values) = if let Some(v) = field("serviceAccounts") {
                (&mut index.by_service_account, v)
            } else if let Some(v) = field("principals").filter(|v| v.iter().all(|p| is_exact(p))) {
                (&mut index.by_principal, v)
            } else if let Some(v) = field("namespaces").filter(|v| v.iter().all(|p| is_exact(p))) {
                (&mut index.by_namespace, v)
            } else {
                index.everyone.push(i);
                continue;
            };
            for v in values {
                let list = map.entry(v.clone()).or_default();
                // A value listed twice names the source once.
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        index
    }

    /// The sources that may name this identity, in the repository's order.
    fn candidates(&self, principal: &str, ns: &str, sa_ref: &str) -> Vec<usize> {
        let none = Vec::new();
        let mut out: Vec<usize> = [
            self.by_service_account.get(sa_ref).unwrap_or(&none),
            self.by_principal.get(principal).unwrap_or(&none),
            self.by_namespace.get(ns).unwrap_or(&none),
            &self.everyone,
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The identity of every `ns/sa` in `service_accounts`, with the policies naming it.
pub fn identities(
    resources: &[Resource],
    service_accounts: &BTreeMap<String, Vec<String>>,
    mesh: &MeshConfig,
) -> BTreeMap<String, Identity> {
    let sources = sources_of(resources);
    let index = SourceIndex::new(&sources);
    let mut out = BTreeMap::new();
    for key in service_accounts.keys() {
        let Some((ns, sa)) = key.split_once('/') else {
            continue;
        };
        let principal = format!("{}/ns/{ns}/sa/{sa}", mesh.trust_domain);
        let mut allowed = BTreeSet::new();
        let mut denied = BTreeSet::new();
        let mut matched_by = Vec::new();
        for s in index
            .candidates(&principal, ns, key)
            .into_iter()
            .map(|i| &sources[i])
        {
            if let Some(via) = names(s, &principal, ns, key) {
                match s.action {
                    "ALLOW" => allowed.insert(s.policy.clone()),
                    _ => denied.insert(s.policy.clone()),
                };
                let m = AuthzMatch {
                    policy: s.policy.clone(),
                    action: s.action.to_string(),
                    via,
                };
                if !matched_by.contains(&m) {
                    matched_by.push(m);
                }
            }
        }
        out.insert(
            key.clone(),
            Identity {
                namespace: ns.to_string(),
                service_account: sa.to_string(),
                spiffe_id: format!("spiffe://{principal}"),
                principal,
                allowed_by: allowed.into_iter().collect(),
                denied_by: denied.into_iter().collect(),
                matched_by,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(fields: &[(&'static str, &[&str])]) -> Source {
        Source {
            policy: "AuthorizationPolicy/shop/p".into(),
            action: "ALLOW",
            fields: fields
                .iter()
                .map(|(f, v)| (*f, v.iter().map(|s| s.to_string()).collect()))
                .collect(),
        }
    }

    const WEB: (&str, &str, &str) = ("cluster.local/ns/shop/sa/web", "shop", "shop/web");

    fn named(s: &Source) -> Option<String> {
        names(s, WEB.0, WEB.1, WEB.2)
    }

    #[test]
    fn principal_patterns() {
        assert_eq!(
            named(&source(&[(
                "principals",
                &["cluster.local/ns/shop/sa/web"]
            )]))
            .as_deref(),
            Some("principal cluster.local/ns/shop/sa/web")
        );
        assert!(named(&source(&[("principals", &["cluster.local/ns/shop/*"])])).is_some());
        assert!(named(&source(&[("principals", &["*/sa/web"])])).is_some());
        assert!(named(&source(&[("principals", &["*"])])).is_some());
        assert!(named(&source(&[(
            "principals",
            &["cluster.local/ns/shop/sa/web-v2"]
        )]))
        .is_none());
    }

    #[test]
    fn every_field_must_match() {
        // namespaces matches, principals does not: the source does not name it.
        let s = source(&[
            ("namespaces", &["shop"]),
            ("principals", &["cluster.local/ns/shop/sa/cart"]),
        ]);
        assert!(named(&s).is_none());
        assert!(named(&source(&[("notNamespaces", &["other"])])).is_some());
        assert!(named(&source(&[("notNamespaces", &["shop"])])).is_none());
        assert!(named(&source(&[("serviceAccounts", &["shop/web"])])).is_some());
        assert!(named(&source(&[("serviceAccounts", &["shop/*"])])).is_none());
    }

    #[test]
    fn the_index_finds_every_source_a_full_scan_finds() {
        let sources = vec![
            source(&[("principals", &["cluster.local/ns/shop/sa/web"])]),
            source(&[("principals", &["cluster.local/ns/shop/*"])]),
            source(&[("namespaces", &["shop", "shop"])]),
            source(&[("namespaces", &["sh*"])]),
            source(&[("notNamespaces", &["shop"])]),
            source(&[("serviceAccounts", &["shop/web", "pay/api"])]),
            source(&[("namespaces", &["pay"]), ("principals", &["*/sa/api"])]),
            source(&[("notServiceAccounts", &["shop/web"])]),
        ];
        let index = SourceIndex::new(&sources);
        for (ns, sa) in [
            ("shop", "web"),
            ("shop", "cart"),
            ("pay", "api"),
            ("ops", "x"),
        ] {
            let principal = format!("cluster.local/ns/{ns}/sa/{sa}");
            let sa_ref = format!("{ns}/{sa}");
            let scan: Vec<usize> = (0..sources.len())
                .filter(|&i| names(&sources[i], &principal, ns, &sa_ref).is_some())
                .collect();
            let indexed: Vec<usize> = index
                .candidates(&principal, ns, &sa_ref)
                .into_iter()
                .filter(|&i| names(&sources[i], &principal, ns, &sa_ref).is_some())
                .collect();
            assert_eq!(indexed, scan, "{sa_ref}");
            assert!(!scan.is_empty(), "{sa_ref} is named by some source");
        }
    }
}
