//! The API server's net: every object of a kind a CustomResourceDefinition defines is
//! checked against that CRD's schema and CEL rules, as the API server would on
//! apply, so a change it will refuse fails in review and not at sync time after
//! merge. The repository's CRDs (and `.meshward.yaml` `schemas:`) decide for the
//! versions they define; meshward's own schemas of the Istio kinds it claims
//! (src/schema/istio) stand in where the repository has none.
//!
//! Not JSON Schema: the API server prunes unknown and null fields, reads
//! `nullable`, `x-kubernetes-int-or-string` and list types, and evaluates CEL at
//! every node; one walk here does all of it (see `structural`).

mod cel;
mod formats;
mod structural;

use crate::finding::{Finding, Severity, Status};
use crate::manifest::{api_group, Resource};
use foldhash::HashMap;
use rayon::prelude::*;
use serde_json::Value as Json;
use std::sync::{Arc, OnceLock};
use structural::{field_name, Node};

/// Findings past this many on one object are left out (the first say enough).
const MAX_VIOLATIONS_PER_OBJECT: usize = 20;

pub const INVALID: &str = "schema/invalid";
pub const NOT_CHECKED: &str = "schema/not-checked";

/// Where a schema came from, for messages.
#[derive(Debug, Clone)]
enum Source {
    Repository { crd: String, file: String },
    BuiltIn,
}

struct Version {
    /// Shared by the versions whose schemas are alike (Istio's CRDs serve one
    /// schema under two or three versions).
    schema: Arc<Node>,
    served: bool,
}

struct Definition {
    source: Source,
    group: String,
    kind: String,
    versions: Vec<(String, Option<Version>)>,
}

impl Definition {
    fn describe(&self, version: &str) -> String {
        match &self.source {
            Source::Repository { crd, file } => {
                format!("CustomResourceDefinition {crd} ({file}), version {version}")
            }
            Source::BuiltIn => format!(
                "Istio's CRD of {}/{version} {}, built into meshward",
                self.group, self.kind
            ),
        }
    }
}

/// A schema finding, and whether a CEL rule (rather than the schema's types) made it.
#[derive(Debug, Clone)]
pub struct Checked {
    pub finding: Finding,
    pub by_rule: bool,
}

impl From<Finding> for Checked {
    fn from(finding: Finding) -> Self {
        Checked {
            finding,
            by_rule: false,
        }
    }
}

/// The CRDs one revision's objects are checked against.
pub struct Catalog {
    /// Several where the repository holds different CRDs for one kind (samples for
    /// several clusters, two releases of an operator): which one the cluster has, it
    /// does not say.
    by_kind: HashMap<(String, String), Vec<Arc<Definition>>>,
    /// Findings about the CRDs themselves.
    findings: Vec<Finding>,
    /// The CRDs' bodies, in the order read: two catalogs of the same are one.
    crds: Vec<Arc<Json>>,
}

fn compiler() -> &'static cel::Compiler {
    static C: OnceLock<cel::Compiler> = OnceLock::new();
    C.get_or_init(cel::Compiler::default)
}

/// For meshward's own CRDs: their rules are compiled when first evaluated.
fn lazy_compiler() -> &'static cel::Compiler {
    static C: OnceLock<cel::Compiler> = OnceLock::new();
    C.get_or_init(|| compiler().lazy())
}

/// meshward's schema of an Istio kind it claims, compiled the first time an object of
/// that kind is checked (most repositories use a few of them).
fn built_in(group: &str, kind: &str) -> Option<&'static Definition> {
    static B: [OnceLock<Option<Definition>>; BUILT_IN.len()] =
        [const { OnceLock::new() }; BUILT_IN.len()];
    let i = BUILT_IN
        .iter()
        .position(|(g, k, _)| *g == group && *k == kind)?;
    B[i].get_or_init(|| {
        let body = serde_json::from_str::<Json>(BUILT_IN[i].2).ok()?;
        definition(&body, Source::BuiltIn).0
    })
    .as_ref()
}

/// (group, kind, CRD as JSON): src/schema/istio/*.yaml, turned into JSON by the build
/// script. The group and kind are the CRD's own (a test checks).
const BUILT_IN: [(&str, &str, &str); 8] = [
    (
        "networking.istio.io",
        "ServiceEntry",
        include_str!(concat!(env!("OUT_DIR"), "/istio/serviceentry.json")),
    ),
    (
        "networking.istio.io",
        "WorkloadEntry",
        include_str!(concat!(env!("OUT_DIR"), "/istio/workloadentry.json")),
    ),
    (
        "networking.istio.io",
        "WorkloadGroup",
        include_str!(concat!(env!("OUT_DIR"), "/istio/workloadgroup.json")),
    ),
    (
        "networking.istio.io",
        "Sidecar",
        include_str!(concat!(env!("OUT_DIR"), "/istio/sidecar.json")),
    ),
    (
        "security.istio.io",
        "PeerAuthentication",
        include_str!(concat!(env!("OUT_DIR"), "/istio/peerauthentication.json")),
    ),
    (
        "security.istio.io",
        "AuthorizationPolicy",
        include_str!(concat!(env!("OUT_DIR"), "/istio/authorizationpolicy.json")),
    ),
    (
        "security.istio.io",
        "RequestAuthentication",
        include_str!(concat!(
            env!("OUT_DIR"),
            "/istio/requestauthentication.json"
        )),
    ),
    (
        "telemetry.istio.io",
        "Telemetry",
        include_str!(concat!(env!("OUT_DIR"), "/istio/telemetry.json")),
    ),
];

fn is_crd(r: &Resource) -> bool {
    r.kind == "CustomResourceDefinition" && api_group(&r.api_version) == "apiextensions.k8s.io"
}

/// A CRD object as versions of compiled schemas; problems as (path, message).
fn definition(body: &Json, source: Source) -> (Option<Definition>, Vec<(Vec<Json>, String)>) {
    let mut problems = Vec::new();
    let spec = &body["spec"];
    let (Some(group), Some(kind)) = (spec["group"].as_str(), spec["names"]["kind"].as_str()) else {
        problems.push((
            vec![Json::from("spec")],
            "a CRD needs spec.group and spec.names.kind".to_string(),
        ));
        return (None, problems);
    };
    let mut versions = Vec::new();
    let shared = spec["validation"]["openAPIV3Schema"]
        .as_object()
        .map(|_| &spec["validation"]["openAPIV3Schema"]);
    let listed = spec["versions"].as_array().cloned().unwrap_or_default();
    let listed: Vec<Json> = if listed.is_empty() {
        // apiextensions v1beta1 with one `version`.
        spec["version"]
            .as_str()
            .map(|v| vec![serde_json::json!({"name": v, "served": true})])
            .unwrap_or_default()
    } else {
        listed
    };
    let own = matches!(source, Source::BuiltIn);
    let cel = if own { lazy_compiler() } else { compiler() };
    // Each distinct schema compiled once: (schema, its node, its errors).
    let mut compiled_before: Vec<(&Json, Arc<Node>, Vec<structural::SchemaError>)> = Vec::new();
    for (i, v) in listed.iter().enumerate() {
        let Some(name) = v["name"].as_str() else {
            continue;
        };
        let served = v["served"].as_bool().unwrap_or(true);
        let schema = v["schema"]["openAPIV3Schema"]
            .as_object()
            .map(|_| &v["schema"]["openAPIV3Schema"])
            .or(shared);
        let compiled = schema.map(|s| {
            let (node, errors) = match compiled_before.iter().find(|(before, ..)| *before == s) {
                Some((_, node, errors)) => (node.clone(), errors.clone()),
                None => {
                    let (node, errors) = structural::compile(s, cel);
                    let node = Arc::new(node);
                    compiled_before.push((s, node.clone(), errors.clone()));
                    (node, errors)
                }
            };
            for e in errors {
                problems.push((
                    vec![
                        Json::from("spec"),
                        Json::from("versions"),
                        Json::from(i),
                        Json::from("schema"),
                    ],
                    format!("version {name}, {}: {}", e.at, e.message),
                ));
            }
            // meshward's own CRDs have none (a test checks): their rules are
            // compiled when first evaluated.
            if !own {
                for rule in transition_rules(&node) {
                    problems.push((
                        vec![Json::from("spec"), Json::from("versions"), Json::from(i)],
                        format!("version {name}: rule `{rule}` compares an object with its previous state (oldSelf); the API server checks it on update against what the cluster holds, which meshward cannot see: not evaluated"),
                    ));
                }
            }
            Version {
                schema: node,
                served,
            }
        });
        versions.push((name.to_string(), compiled));
    }
    (
        Some(Definition {
            source,
            group: group.to_string(),
            kind: kind.to_string(),
            versions,
        }),
        problems,
    )
}

fn transition_rules(node: &Node) -> Vec<String> {
    rules_of(node)
        .into_iter()
        .filter(|r| r.transition())
        .map(|r| r.source.clone())
        .collect()
}

/// Every rule of a schema, at any depth.
fn rules_of(node: &Node) -> Vec<&cel::Rule> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        out.extend(n.rules.iter());
        stack.extend(n.properties.iter().map(|p| &p.1));
        stack.extend(n.additional.as_deref());
        stack.extend(n.items.as_deref());
    }
    out
}

fn finding(
    r: &Resource,
    rule: &str,
    severity: Severity,
    path: Vec<Json>,
    message: String,
) -> Finding {
    let (file, line, note) = r.locate(&path);
    Finding {
        rule: rule.to_string(),
        severity,
        status: Status::Existing,
        resource: Some(r.reference()),
        file,
        line,
        path,
        message: match note {
            Some(note) => format!("{message} ({note})"),
            None => message,
        },
        istio_code: None,
        subjects: Vec::new(),
        unchecked: false,
        occurrence: None,
        cluster: None,
    }
}

impl Catalog {
    /// The CRDs among `resources` and `extra` (from `schemas:`), compiled.
    pub fn of(resources: &[Resource], extra: &[Resource]) -> Catalog {
        let mut by_kind: HashMap<(String, String), Vec<Arc<Definition>>> = HashMap::default();
        let mut seen: Vec<&Json> = Vec::new();
        let mut findings = Vec::new();
        let mut crds = Vec::new();
        for r in resources.iter().chain(extra).filter(|r| is_crd(r)) {
            crds.push(Arc::clone(&r.body));
            let (def, problems) = definition(
                &r.body,
                Source::Repository {
                    crd: r.name.clone(),
                    file: r.file.clone(),
                },
            );
            for (path, message) in problems {
                let not_evaluated = message.contains("not evaluated");
                let text = if not_evaluated {
                    format!("CustomResourceDefinition {}: {message}.", r.name)
                } else {
                    format!(
                        "The API server refuses CustomResourceDefinition {}: {message}. Until it is fixed no object of the kind can be applied, and meshward checks them against what of the schema compiled.",
                        r.name
                    )
                };
                let (rule, severity) = if not_evaluated {
                    (NOT_CHECKED, Severity::Info)
                } else {
                    (INVALID, Severity::Error)
                };
                findings.push(finding(r, rule, severity, path, text));
            }
            let copy = seen.iter().any(|b| b["spec"] == r.body["spec"]);
            if let (Some(def), false) = (def, copy) {
                seen.push(&r.body);
                by_kind
                    .entry((def.group.clone(), def.kind.clone()))
                    .or_default()
                    .push(Arc::new(def));
            }
        }
        Catalog {
            by_kind,
            findings,
            crds,
        }
    }

    /// Whether `other` holds the same CRDs: then an object both revisions hold alike
    /// is checked alike.
    pub fn same_crds(&self, other: &Catalog) -> bool {
        self.crds.len() == other.crds.len()
            && self
                .crds
                .iter()
                .zip(&other.crds)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
    }

    fn lookup<'a>(&'a self, r: &'a Resource) -> Option<(Vec<&'a Definition>, &'a str)> {
        let group = api_group(&r.api_version);
        let version = r
            .api_version
            .rsplit_once('/')
            .map(|(_, v)| v)
            .unwrap_or(&r.api_version);
        if !self.by_kind.is_empty() {
            let key = (group.to_string(), r.kind.clone());
            if let Some(defs) = self.by_kind.get(&key) {
                return Some((defs.iter().map(Arc::as_ref).collect(), version));
            }
        }
        let d = built_in(group, &r.kind)?;
        // The built-in schemas claim only the versions Istio serves.
        d.versions
            .iter()
            .any(|(v, _)| v == version)
            .then_some((vec![d], version))
    }

    /// What the API server refuses of the CRDs themselves.
    pub fn crd_findings(&self) -> impl Iterator<Item = Checked> + '_ {
        self.findings.iter().cloned().map(Checked::from)
    }

    /// What the API server refuses of the objects among `resources` that `keep`
    /// admits (the CRDs themselves: `crd_findings`).
    pub fn check(
        &self,
        resources: &[Resource],
        keep: impl Fn(&Resource) -> bool + Sync,
    ) -> Vec<Checked> {
        let found: Vec<Vec<Checked>> = resources
            .par_iter()
            .filter(|r| !is_crd(r) && keep(r))
            .map_init(
                || compiler().evaluator(),
                |eval, r| match self.lookup(r) {
                    Some((defs, version)) => check_against(&defs, version, r, eval),
                    None => Vec::new(),
                },
            )
            .collect();
        found.into_iter().flatten().collect()
    }
}

/// Where the repository holds several CRDs for the kind, the object is refused only
/// if every one of them refuses it.
fn check_against(
    defs: &[&Definition],
    version: &str,
    r: &Resource,
    eval: &mut cel::Evaluator,
) -> Vec<Checked> {
    let mut outcomes = defs.iter().map(|d| check_one(d, version, r, eval));
    let Some(first) = outcomes.next() else {
        return Vec::new();
    };
    let refused = |found: &[Checked]| found.iter().any(|c| c.finding.rule == INVALID);
    if !refused(&first) {
        return first;
    }
    let mut all = 1;
    for other in outcomes {
        if !refused(&other) {
            return other;
        }
        all += 1;
    }
    if all > 1 {
        let note = format!(
            " Each of the {all} CustomResourceDefinitions of {} in the repository refuses it.",
            r.kind
        );
        return first
            .into_iter()
            .map(|mut c| {
                c.finding.message.push_str(&note);
                c
            })
            .collect();
    }
    first
}

fn check_one(
    def: &Definition,
    version: &str,
    r: &Resource,
    eval: &mut cel::Evaluator,
) -> Vec<Checked> {
    let what = format!(
        "{} {}",
        r.kind,
        match &r.namespace {
            Some(ns) => format!("{ns}/{}", r.name),
            None => r.name.clone(),
        }
    );
    // The API server has no such version to admit the object to.
    let refuse_version = |why: String, fix: &str| -> Vec<Checked> {
        let message = format!(
            "The API server refuses {what}: {why}, so Argo CD and Flux fail to sync it after merge. {fix}"
        );
        let path = vec![Json::from("apiVersion")];
        vec![finding(r, INVALID, Severity::Error, path, message).into()]
    };
    let Some((_, compiled)) = def.versions.iter().find(|(v, _)| v == version) else {
        let served: Vec<&str> = def.versions.iter().map(|(v, _)| v.as_str()).collect();
        return refuse_version(
            format!(
                "{} defines versions {} of {}, not {version} (\"no matches for kind\")",
                def.describe(version),
                served.join(", "),
                r.kind
            ),
            "Use one of the versions the CRD defines.",
        );
    };
    let Some(compiled) = compiled else {
        // A version without a schema: the API server keeps whatever it is given.
        return Vec::new();
    };
    if !compiled.served {
        return refuse_version(
            format!(
                "version {version} is not served ({})",
                def.describe(version)
            ),
            "Use a served version.",
        );
    }
    let violations =
        structural::validate(&compiled.schema, &r.body, eval, MAX_VIOLATIONS_PER_OBJECT);
    let source = def.describe(version);
    violations
        .into_iter()
        .map(|v| {
            let by_rule = v.by_rule;
            let field = field_name(&v.path);
            let field = if field.is_empty() { "the object".to_string() } else { field };
            let finding = if v.unchecked {
                finding(
                    r,
                    NOT_CHECKED,
                    Severity::Error,
                    v.path,
                    format!(
                        "{what}: {field}: {} ({source}). meshward cannot tell whether the API server accepts it; check it with `kubectl apply --dry-run=server`, or set `rules: {{{NOT_CHECKED}: warning}}` to accept the gap.",
                        v.message
                    ),
                )
            } else if v.message.starts_with("unknown field") {
                finding(
                    r,
                    INVALID,
                    Severity::Error,
                    v.path,
                    format!(
                        "{what}: {field}: the schema has no such field ({source}). kubectl and Argo CD refuse the object (strict field validation); applied without it (Flux's server-side apply), the API server drops the field and it does nothing. Check the spelling and indentation against the CRD."
                    ),
                )
            } else {
                finding(
                    r,
                    INVALID,
                    Severity::Error,
                    v.path,
                    format!(
                        "The API server refuses {what}: {field}: {} ({source}). Argo CD and Flux fail to sync it after merge, and the cluster keeps the previous version. Fix the field.",
                        v.message
                    ),
                )
            };
            Checked { finding, by_rule }
        })
        .collect()
}

/// Rules (ids or prefixes) that restate an API-server refusal with what happens at
/// runtime: where one reports on an object's line, the schema finding is left out.
pub const RESTATING: &[&str] = &[
    "serviceentry/",
    "workloadentry/address-required",
    "workloadentry/invalid-address",
    "workloadgroup/template-required",
    "workloadgroup/probe-multiple-methods",
    "workloadgroup/probe-incomplete",
    "authz/selector-and-target-ref",
    "authz/service-accounts-with-principals",
    "mtls/port-level-requires-selector",
    "selector/wildcard-value",
    "schema/invalid",
];

/// Adds the schema findings to the rest, but not where a rule of [`RESTATING`]
/// already reports an error: it says the same refusal with what happens at runtime.
/// A finding of a CEL rule gives way to any such error on its object (the rules span
/// fields, and so do the rules that restate them); a finding of the schema's types to
/// one on the same line.
pub fn merge_restated(findings: &mut Vec<Finding>, schema: Vec<Checked>) {
    use foldhash::HashSet;
    let restating: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error && f.resource.is_some())
        .filter(|f| RESTATING.iter().any(|r| f.rule.starts_with(r)))
        .collect();
    let lines: HashSet<(Option<String>, &str, u32)> = restating
        .iter()
        .map(|f| (f.resource.as_ref().map(|r| r.id()), f.file.as_str(), f.line))
        .collect();
    let objects: HashSet<String> = restating
        .iter()
        .filter_map(|f| f.resource.as_ref().map(|r| r.id()))
        .collect();
    let keep: Vec<Finding> = schema
        .into_iter()
        .filter(|c| {
            let f = &c.finding;
            let id = f.resource.as_ref().map(|r| r.id());
            f.rule != INVALID
                || id.is_none()
                || !(lines.contains(&(id.clone(), f.file.as_str(), f.line))
                    || (c.by_rule && id.as_ref().is_some_and(|id| objects.contains(id))))
        })
        .map(|c| c.finding)
        .collect();
    findings.extend(keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build script's JSON says what the YAML it was made from says, for every
    /// built-in CRD.
    #[test]
    fn built_in_json_is_the_yaml_it_was_made_from() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/schema/istio");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("src/schema/istio") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("read");
            let yaml: Json = yaml_serde::from_str(&text).expect("YAML");
            let spec = &yaml["spec"];
            let (group, kind) = (&spec["group"], &spec["names"]["kind"]);
            let Some((_, _, json)) = BUILT_IN.iter().find(|(g, k, _)| group == g && kind == k)
            else {
                panic!("{} is not built in", path.display());
            };
            let json: Json = serde_json::from_str(json).expect("JSON");
            assert_eq!(json, yaml, "{}", path.display());
            seen += 1;
        }
        assert_eq!(seen, BUILT_IN.len());
    }

    /// A built-in schema that did not parse or compile would leave its kind unchecked
    /// without a word: every one compiles whole.
    #[test]
    fn every_built_in_schema_compiles_whole() {
        for (group, kind, text) in BUILT_IN {
            let body: Json = serde_json::from_str(text).expect("built-in CRD is JSON");
            let (def, problems) = definition(&body, Source::BuiltIn);
            assert!(problems.is_empty(), "{problems:?}");
            let def = def.expect("a definition");
            // Their rules are compiled when first evaluated: each compiles, is
            // evaluated, and does not compare with oldSelf.
            for (_, version) in &def.versions {
                let node = &version.as_ref().expect("compiled").schema;
                for rule in rules_of(node) {
                    assert_eq!(rule.unsupported(), None, "{kind}: {}", rule.source);
                    assert!(!rule.transition(), "{kind}: {}", rule.source);
                }
            }
            assert_eq!((def.group.as_str(), def.kind.as_str()), (group, kind));
            assert!(built_in(group, kind).is_some(), "{kind}");
            assert!(
                def.versions.iter().all(|(_, v)| v.is_some()),
                "{}",
                def.kind
            );
        }
    }
}
