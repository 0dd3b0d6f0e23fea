//! Render roots a change does not touch but is linked to. A pull request renders
//! only the roots that read a changed file; rules that join objects across roots
//! (a selector and the workloads it selects, STRICT and the workloads it covers, a
//! principal and its service account) would then judge the change against part of
//! the mesh and report, say, "selects nothing" for a policy whose workloads live in
//! an untouched overlay. So the untouched roots that share a namespace with what the
//! change renders, or that name one of its namespaces, or that it names, are
//! rendered too, as context. Deciding that must not render them: it reads their
//! files, and where a root's namespaces cannot be told without rendering, the root
//! counts as linked.

use super::planned::PlannedRoot;
use super::roots::{join, RootKind, KUSTOMIZATION_FILES};
use crate::manifest::{Resource, SourceFile};
use std::collections::BTreeSet;

/// What a change reaches: the namespaces of the objects it changes (as rendered)
/// and everything those objects say, to find the namespaces they name.
#[derive(Debug, Default)]
pub struct Reach {
    pub namespaces: BTreeSet<String>,
    text: String,
}

impl Reach {
    pub fn add(&mut self, r: &Resource) {
        match (&r.namespace, r.kind.as_str()) {
            (Some(ns), _) => {
                self.namespaces.insert(ns.clone());
            }
            // A Namespace object's labels (injection, revision) govern the workloads
            // in it, wherever those are rendered.
            (None, "Namespace") => {
                self.namespaces.insert(r.name.clone());
            }
            (None, _) => {}
        }
        self.text.push_str(&r.body.to_string());
        self.text.push('\n');
    }

    /// Whether the changed objects name `ns` (a principal's `/ns/N/`, a host's
    /// `.N.svc`, an `exportTo`, a `namespace:` field).
    fn names(&self, ns: &str) -> bool {
        mentions(&self.text, ns)
    }
}

/// Where a root's objects will land, as far as its files tell without rendering.
#[derive(Debug, PartialEq, Eq)]
pub enum Namespaces {
    Known(BTreeSet<String>),
    /// A namespace comes from a template expression: only rendering would tell.
    Unknown,
}

/// `text` holds `word` as a whole DNS label (not as part of a longer name).
pub fn mentions(text: &str, word: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    let label = |c: u8| c.is_ascii_alphanumeric() || c == b'-';
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let start = from + i;
        let end = start + word.len();
        let before = start == 0 || !label(bytes[start - 1]);
        let after = end == bytes.len() || !label(bytes[end]);
        if before && after {
            return true;
        }
        from = start + 1;
        while !text.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

/// The value of a `namespace:` key on one YAML line, if the line has one.
fn namespace_value(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let t = t.strip_prefix("- ").map(str::trim_start).unwrap_or(t);
    let v = t.strip_prefix("namespace:")?.trim();
    let v = v.split(" #").next().unwrap_or(v).trim();
    Some(v.trim_matches(|c| c == '"' || c == '\''))
}

/// Helm's own namespace: the release's, which the root states. `$.Release.Namespace`
/// is the same value (the form templates use inside `range` and `with`), and `quote`
/// either way round only adds quotes.
fn is_release_namespace(v: &str) -> bool {
    let inner: String = v.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(expr) = inner
        .strip_prefix("{{")
        .and_then(|e| e.strip_suffix("}}"))
        .map(|e| e.strip_prefix('-').unwrap_or(e))
        .map(|e| e.strip_suffix('-').unwrap_or(e))
    else {
        return false;
    };
    let expr = expr.strip_suffix("|quote").unwrap_or(expr);
    let expr = expr.strip_prefix("quote").unwrap_or(expr);
    matches!(expr, ".Release.Namespace" | "$.Release.Namespace")
}

/// The namespaces a root deploys into, read from its files (`files` are the ones
/// it reads).
pub fn namespaces(p: &PlannedRoot, files: &[&SourceFile]) -> Namespaces {
    let root = &p.root;
    if root.kind == RootKind::Kustomize {
        if let Some(ns) = &root.kustomize.namespace {
            return Namespaces::Known(BTreeSet::from([ns.clone()]));
        }
        // An overlay's `namespace:` moves every namespaced object it builds.
        let own = KUSTOMIZATION_FILES
            .iter()
            .filter_map(|name| join(&root.path, name))
            .find_map(|path| files.iter().find(|f| f.path == path))
            .and_then(|f| yaml_serde::from_slice::<serde_json::Value>(&f.bytes).ok())
            .and_then(|k| k.get("namespace")?.as_str().map(str::to_string));
        if let Some(ns) = own {
            return Namespaces::Known(BTreeSet::from([ns]));
        }
    }
    let mut out = BTreeSet::from([root.namespace.clone().unwrap_or_else(|| "default".into())]);
    out.extend(root.helm.release_namespace.clone());
    for f in files {
        for line in String::from_utf8_lossy(&f.bytes).lines() {
            let Some(v) = namespace_value(line) else {
                continue;
            };
            if v.contains("{{") {
                if root.kind == RootKind::Helm && is_release_namespace(v) {
                    continue;
                }
                return Namespaces::Unknown;
            }
            if !v.is_empty() {
                out.insert(v.to_string());
            }
        }
    }
    Namespaces::Known(out)
}

/// Whether an untouched root must be rendered for the change's rules to see the
/// objects they join with. `files` are the files the root reads.
pub fn linked(p: &PlannedRoot, files: &[&SourceFile], reach: &Reach, root_namespace: &str) -> bool {
    if reach.namespaces.is_empty() {
        return false;
    }
    // Mesh-wide config applies to every workload, wherever it is rendered.
    if reach.namespaces.contains(root_namespace) {
        return true;
    }
    let root = &p.root;
    let own = match namespaces(p, files) {
        Namespaces::Unknown => return true,
        Namespaces::Known(own) => own,
    };
    if own
        .iter()
        .any(|ns| ns == root_namespace || reach.namespaces.contains(ns) || reach.names(ns))
    {
        return true;
    }
    // The root's objects name a namespace the change deploys into (a policy whose
    // principals are there, a Sidecar importing its hosts, its Namespace object),
    // in its files or in what its app object sets.
    use super::roots::HelmParameter;
    let set_by_app = root
        .inline_values
        .iter()
        .chain(root.kustomize.patches.iter().map(|p| &p.spec))
        .map(|v| v.to_string())
        .chain(root.helm.parameters.iter().filter_map(|p| match p {
            HelmParameter::Set { value, .. } | HelmParameter::SetString { value, .. } => {
                Some(value.clone())
            }
            // Its content is a file the root reads: among `files`.
            HelmParameter::SetFile { .. } => None,
        }))
        .collect::<Vec<_>>()
        .join("\n");
    std::iter::once(std::borrow::Cow::Owned(set_by_app))
        .chain(files.iter().map(|f| String::from_utf8_lossy(&f.bytes)))
        .any(|text| reach.namespaces.iter().any(|ns| mentions(&text, ns)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::roots::Root;

    fn root(kind: RootKind, path: &str, namespace: Option<&str>) -> PlannedRoot {
        let mut root = Root::kustomize(path, &format!("{path}/kustomization.yaml"), 1);
        root.kind = kind;
        root.namespace = namespace.map(str::to_string);
        PlannedRoot {
            cluster: None,
            root,
            dirs: BTreeSet::from([path.to_string()]),
            files: BTreeSet::new(),
            app_file: None,
            problems: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    fn reach(namespaces: &[&str], text: &str) -> Reach {
        Reach {
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            text: text.into(),
        }
    }

    #[test]
    fn whole_labels_only() {
        assert!(mentions("cluster.local/ns/shop/sa/web", "shop"));
        assert!(mentions("api.shop.svc.cluster.local", "shop"));
        assert!(mentions("shop", "shop"));
        assert!(!mentions("shopfront/sa", "shop"));
        assert!(!mentions("team-shop", "shop"));
        assert!(!mentions("env-07", "env-0"));
    }

    #[test]
    fn an_overlay_namespace_decides_alone() {
        let p = root(RootKind::Kustomize, "overlays/a", None);
        let k = file(
            "overlays/a/kustomization.yaml",
            "namespace: team-a\nresources: [../../base]\n",
        );
        let d = file("overlays/a/patch.yaml", "metadata:\n  namespace: ignored\n");
        assert_eq!(
            namespaces(&p, &[&k, &d]),
            Namespaces::Known(BTreeSet::from(["team-a".to_string()]))
        );
        assert!(!linked(
            &p,
            &[&k, &d],
            &reach(&["team-b"], "{}"),
            "istio-system"
        ));
        assert!(linked(
            &p,
            &[&k, &d],
            &reach(&["team-a"], "{}"),
            "istio-system"
        ));
        // A change naming team-a (a principal there) needs its workloads.
        assert!(linked(
            &p,
            &[&k, &d],
            &reach(&["team-b"], "cluster.local/ns/team-a/sa/web"),
            "istio-system"
        ));
        // A change to mesh-wide config needs every workload.
        assert!(linked(
            &p,
            &[&k],
            &reach(&["istio-system"], "{}"),
            "istio-system"
        ));
    }

    #[test]
    fn chart_namespaces_come_from_the_release_and_literal_fields() {
        let p = root(RootKind::Helm, "charts/web", Some("web"));
        let t = file(
            "charts/web/templates/a.yaml",
            "metadata:\n  namespace: {{ .Release.Namespace }}\n---\nmetadata:\n  - namespace: \"edge\" # gateway\n",
        );
        assert_eq!(
            namespaces(&p, &[&t]),
            Namespaces::Known(BTreeSet::from(["edge".to_string(), "web".to_string()]))
        );
        let v = file(
            "charts/web/templates/b.yaml",
            "metadata:\n  namespace: {{ .Values.ns }}\n",
        );
        assert_eq!(namespaces(&p, &[&t, &v]), Namespaces::Unknown);
        assert!(linked(&p, &[&v], &reach(&["other"], "{}"), "istio-system"));
        // Inside `range`, templates reach the release as `$`; quoting changes nothing.
        let r = file(
            "charts/web/templates/c.yaml",
            "{{- range .Values.apps }}\nmetadata:\n  namespace: {{ $.Release.Namespace }}\n---\nmetadata:\n  namespace: {{- quote $.Release.Namespace -}}\n  other: {{ .Release.Namespace | quote }}\n{{- end }}\n",
        );
        assert_eq!(
            namespaces(&p, &[&r]),
            Namespaces::Known(BTreeSet::from(["web".to_string()]))
        );
        assert!(!is_release_namespace("{{ $.Values.namespace }}"));
        assert!(!is_release_namespace("{{ .Release.Namespace }}-extra"));
    }

    #[test]
    fn a_root_naming_the_changed_namespace_is_linked() {
        let p = root(RootKind::Kustomize, "policies", None);
        let a = file(
            "policies/allow.yaml",
            "metadata:\n  namespace: gate\nspec:\n  rules:\n    - from:\n        - source:\n            principals: [cluster.local/ns/shop/sa/web]\n",
        );
        assert!(linked(&p, &[&a], &reach(&["shop"], "{}"), "istio-system"));
        assert!(!linked(&p, &[&a], &reach(&["bank"], "{}"), "istio-system"));
        // Nothing changed: nothing to link.
        assert!(!linked(&p, &[&a], &reach(&[], "{}"), "istio-system"));
        // What the app object sets counts like the root's files.
        let mut q = root(RootKind::Kustomize, "gate", Some("gate"));
        q.root
            .kustomize
            .patches
            .push(crate::render::roots::InlinePatch {
                spec: serde_json::json!({"patch": "principals: [cluster.local/ns/shop/sa/web]"}),
                file: None,
            });
        assert!(linked(&q, &[], &reach(&["shop"], "{}"), "istio-system"));
        assert!(!linked(&q, &[], &reach(&["bank"], "{}"), "istio-system"));
    }
}
