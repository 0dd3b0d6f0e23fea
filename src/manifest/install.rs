//! IstioOperator files: the input of `istioctl install -f`, not objects the cluster
//! holds (the in-cluster operator that once applied them is gone from Istio). What
//! meshward's model shares with Istio's mesh config is read from them: the root
//! namespace and the trust domain, the same facts as `mesh.root_namespace` and
//! `mesh.trust_domain` of `.meshward.yaml`.

use super::SourceFile;
use crate::config::MeshConfig;
use crate::yaml::{self, Limits, Node};

pub fn is_istio_operator(api_version: &str, kind: &str) -> bool {
    api_version.starts_with("install.istio.io/") && kind == "IstioOperator"
}

/// One mesh setting meshward reads from an IstioOperator.
#[derive(Debug, Clone, Copy)]
struct Field {
    /// The key in `.meshward.yaml`'s `mesh:`.
    config_key: &'static str,
    /// Where istioctl reads it, first found wins (the charts fall back from
    /// `meshConfig.rootNamespace` to `values.global.istioNamespace`).
    paths: &'static [&'static [&'static str]],
    /// What Istio installs when the file sets none of them.
    istio_default: &'static str,
}

const ROOT_NAMESPACE: Field = Field {
    config_key: "root_namespace",
    paths: &[
        &["spec", "meshConfig", "rootNamespace"],
        &["spec", "values", "global", "istioNamespace"],
    ],
    istio_default: "istio-system",
};

const TRUST_DOMAIN: Field = Field {
    config_key: "trust_domain",
    paths: &[&["spec", "meshConfig", "trustDomain"]],
    istio_default: "cluster.local",
};

const FIELDS: [Field; 2] = [ROOT_NAMESPACE, TRUST_DOMAIN];

fn node_at<'a>(node: &'a Node, path: &[&str]) -> Option<&'a Node> {
    path.iter().try_fold(node, |n, key| n.get(key))
}

fn dotted(path: &[&str]) -> String {
    path.join(".")
}

/// Values istioctl would refuse in the fields meshward reads: (line, message).
pub fn problems(node: &Node) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for field in FIELDS {
        for path in field.paths {
            let Some(value) = node_at(node, path) else {
                continue;
            };
            match value.as_str() {
                Some(s) if !s.trim().is_empty() => {}
                _ => out.push((
                    value.line,
                    format!(
                        "IstioOperator {} must be a non-empty string: istioctl install refuses this file, and meshward did not take the mesh's {} from it",
                        dotted(path),
                        field.config_key.replace('_', " ")
                    ),
                )),
            }
        }
    }
    out
}

/// What one IstioOperator installs for one setting.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Setting {
    value: String,
    /// The field that says it, and its line; None: the file sets none, so Istio's
    /// default is installed.
    from: Option<(String, u32)>,
}

/// The mesh settings of one IstioOperator document.
#[derive(Debug, Clone)]
pub struct InstallMesh {
    pub file: String,
    pub line: u32,
    settings: [Setting; 2],
}

impl InstallMesh {
    fn of(node: &Node, file: &str) -> InstallMesh {
        let setting = |field: Field| {
            field
                .paths
                .iter()
                .find_map(|path| {
                    let n = node_at(node, path)?;
                    let value = n.as_str().filter(|s| !s.trim().is_empty())?;
                    Some(Setting {
                        value: value.to_string(),
                        from: Some((dotted(path), n.line)),
                    })
                })
                .unwrap_or_else(|| Setting {
                    value: field.istio_default.to_string(),
                    from: None,
                })
        };
        InstallMesh {
            file: file.to_string(),
            line: node.line,
            settings: FIELDS.map(setting),
        }
    }

    fn describe(&self, i: usize) -> String {
        let s = &self.settings[i];
        match &s.from {
            Some((path, line)) => format!("{}:{line} ({path}: {})", self.file, s.value),
            None => format!(
                "{}:{} ({}, Istio's default, as it sets none)",
                self.file, self.line, s.value
            ),
        }
    }
}

/// A chart template of an IstioOperator (`trustDomain: "{{ .Values.td }}"`) says
/// nothing until rendered: it is not taken as what istioctl installs.
fn templated(node: &Node) -> bool {
    FIELDS.iter().flat_map(|f| f.paths.iter()).any(|path| {
        node_at(node, path)
            .and_then(Node::as_str)
            .is_some_and(|s| s.contains("{{"))
    })
}

/// The IstioOperator documents among `files`, with their mesh settings. A file that
/// does not parse is skipped here: loading it as a manifest reports it.
pub fn mesh_settings(files: &[&SourceFile], limits: &Limits) -> Vec<InstallMesh> {
    let mut out = Vec::new();
    for f in files {
        // Cheap test first: most manifests never name the kind.
        if f.bytes.len() > limits.max_file_bytes
            || !f.bytes.windows(13).any(|w| w == b"IstioOperator")
        {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&f.bytes) else {
            continue;
        };
        let Ok(docs) = yaml::parse_documents(text, limits) else {
            continue;
        };
        for node in docs.into_iter().filter_map(|d| d.result.ok().flatten()) {
            let api_version = node.get("apiVersion").and_then(Node::as_str);
            let kind = node.get("kind").and_then(Node::as_str);
            if let (Some(a), Some(k)) = (api_version, kind) {
                if is_istio_operator(a, k) && !templated(&node) {
                    out.push(InstallMesh::of(&node, &f.path));
                }
            }
        }
    }
    out
}

/// Lists at most a few places, saying how many more there are.
fn some_of(items: Vec<String>) -> String {
    const SHOWN: usize = 3;
    let more = items.len().saturating_sub(SHOWN);
    let mut text = items.into_iter().take(SHOWN).collect::<Vec<_>>().join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    text
}

fn target<'a>(mesh: &'a mut MeshConfig, config_key: &str) -> Option<&'a mut String> {
    match config_key {
        "root_namespace" => Some(&mut mesh.root_namespace),
        "trust_domain" => Some(&mut mesh.trust_domain),
        _ => None,
    }
}

/// The mesh config meshward checks with: `.meshward.yaml`'s where it sets a key
/// (`explicit` holds the keys it sets), else what the revision's IstioOperator files
/// install when they all agree, else meshward's default. Returns notes that say
/// where a value came from, or why an IstioOperator's was not used.
pub fn resolve(
    mesh: &MeshConfig,
    explicit: &[String],
    installs: &[InstallMesh],
) -> (MeshConfig, Vec<String>) {
    let mut out = mesh.clone();
    let mut notes = Vec::new();
    if installs.is_empty() {
        return (out, notes);
    }
    for (i, field) in FIELDS.iter().enumerate() {
        let Some(current) = target(&mut out, field.config_key) else {
            continue;
        };
        let mut values: Vec<&str> = installs
            .iter()
            .map(|m| m.settings[i].value.as_str())
            .collect();
        values.sort_unstable();
        values.dedup();
        let name = field.config_key.replace('_', " ");
        let key = format!("mesh.{}", field.config_key);
        if explicit.iter().any(|k| k == field.config_key) {
            let differing: Vec<String> = installs
                .iter()
                .filter(|m| m.settings[i].value != *current)
                .map(|m| m.describe(i))
                .collect();
            if !differing.is_empty() {
                notes.push(format!(
                    "{CONFIG} sets {key}: {current}, but IstioOperator install files set another {name}: {}. meshward checks with {current}; if istioctl installs one of those files, fix {key} to match it, or identities and mesh-wide policies are judged against a mesh you do not run.",
                    some_of(differing),
                    CONFIG = crate::config::CONFIG_FILE,
                ));
            }
        } else if let [value] = values.as_slice() {
            if *value != current.as_str() {
                notes.push(format!(
                    "The mesh's {name} is {value}, from IstioOperator {} (not set in {}: {key}).",
                    some_of(installs.iter().map(|m| m.describe(i)).collect()),
                    crate::config::CONFIG_FILE,
                ));
                *current = value.to_string();
            }
        } else {
            notes.push(format!(
                "IstioOperator install files disagree on the mesh's {name}: {}. meshward checks with {current}; set {key} in {} to the one istioctl installs.",
                some_of(installs.iter().map(|m| m.describe(i)).collect()),
                crate::config::CONFIG_FILE,
            ));
        }
    }
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installs(texts: &[(&str, &str)]) -> Vec<InstallMesh> {
        let files: Vec<SourceFile> = texts
            .iter()
            .map(|(path, text)| SourceFile {
                path: path.to_string(),
                bytes: text.as_bytes().to_vec(),
            })
            .collect();
        mesh_settings(&files.iter().collect::<Vec<_>>(), &Limits::default())
    }

    const SPIRE: &str = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nmetadata:\n  namespace: istio-system\nspec:\n  meshConfig:\n    trustDomain: example.org\n";

    #[test]
    fn one_operator_sets_the_trust_domain_when_the_config_file_does_not() {
        let (mesh, notes) = resolve(
            &MeshConfig::default(),
            &[],
            &installs(&[("istio/iop.yaml", SPIRE)]),
        );
        assert_eq!(mesh.trust_domain, "example.org");
        assert_eq!(mesh.root_namespace, "istio-system");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("istio/iop.yaml:7"), "{notes:?}");
    }

    #[test]
    fn the_config_file_wins_and_the_difference_is_said() {
        let (mesh, notes) = resolve(
            &MeshConfig::default(),
            &["trust_domain".to_string()],
            &installs(&[("iop.yaml", SPIRE)]),
        );
        assert_eq!(mesh.trust_domain, "cluster.local");
        assert!(notes[0].contains("example.org"), "{notes:?}");
    }

    #[test]
    fn operators_that_disagree_leave_the_default() {
        let other = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  values:\n    global:\n      istioNamespace: istio-control\n";
        let (mesh, notes) = resolve(
            &MeshConfig::default(),
            &[],
            &installs(&[("a.yaml", SPIRE), ("b.yaml", other)]),
        );
        assert_eq!(mesh.trust_domain, "cluster.local");
        assert_eq!(mesh.root_namespace, "istio-system");
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("disagree") && n.contains("a.yaml:7")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("b.yaml:6 (spec.values.global.istioNamespace: istio-control)")),
            "{notes:?}"
        );
    }

    #[test]
    fn a_chart_template_of_an_operator_is_not_what_is_installed() {
        let template = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    trustDomain: \"{{ .Values.trustDomain }}\"\n";
        assert!(installs(&[("chart/templates/iop.yaml", template)]).is_empty());
    }

    #[test]
    fn a_non_string_setting_is_a_problem() {
        let docs = yaml::parse_documents(
            "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    trustDomain: 12\n",
            &Limits::default(),
        )
        .expect("parses");
        let node = docs
            .into_iter()
            .find_map(|d| d.result.ok().flatten())
            .expect("a document");
        let p = problems(&node);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, 5);
    }
}
