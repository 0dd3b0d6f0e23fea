//! Render roots: what GitOps controllers render, found in the tree (kustomization
//! folders, Helm charts), in app objects (Argo CD Application/ApplicationSet, Flux
//! Kustomization/HelmRelease) and in `.meshward.yaml`.

use super::appset::{self, RepoLookup};
use crate::manifest::Resource;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RootKind {
    Kustomize,
    Helm,
}

/// Kustomize options an app object sets on top of the folder's kustomization.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KustomizeOptions {
    /// Sets the namespace of every object (Flux targetNamespace, Argo kustomize.namespace).
    pub namespace: Option<String>,
    pub name_prefix: Option<String>,
    pub name_suffix: Option<String>,
    pub common_labels: BTreeMap<String, String>,
    pub images: Vec<String>,
    /// Image overrides already in kustomize's form (Flux `spec.images`).
    pub image_overrides: Vec<Json>,
    /// Patches in kustomize's form (Flux `spec.patches`: inline patch + target).
    pub patches: Vec<Json>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Root {
    pub kind: RootKind,
    /// Folder relative to the checked root.
    pub path: String,
    /// The file findings about the root itself point at.
    pub entry: String,
    pub entry_line: u32,
    /// Namespace of objects that name none (Argo destination, Helm --namespace).
    pub namespace: Option<String>,
    pub release: Option<String>,
    /// Values files relative to the checked root, in order.
    pub values: Vec<String>,
    /// Inline values (Argo helm.values/valuesObject, Flux spec.values).
    pub inline_values: Option<Json>,
    pub kustomize: KustomizeOptions,
    /// Who defined it, for messages: "Application argocd/geo".
    pub defined_by: Option<String>,
}

impl Root {
    pub fn label(&self) -> String {
        let kind = match self.kind {
            RootKind::Kustomize => "kustomize",
            RootKind::Helm => "helm",
        };
        match &self.defined_by {
            Some(by) => format!("{kind} root {} ({by})", self.path),
            None => format!("{kind} root {}", self.path),
        }
    }
}

pub const KUSTOMIZATION_FILES: &[&str] =
    &["kustomization.yaml", "kustomization.yml", "Kustomization"];

pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

pub fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = if dir.is_empty() {
        Vec::new()
    } else {
        dir.split('/').collect()
    };
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// A reference that would need the network.
pub fn is_remote(reference: &str) -> bool {
    reference.contains("://")
        || reference.starts_with("git@")
        || reference.starts_with("github.com/")
        || reference.starts_with("gitlab.com/")
        || reference.starts_with("bitbucket.org/")
        || reference.contains("?ref=")
        || reference.starts_with("git::")
        || reference.starts_with("oci:")
}

/// Where a source URL names this repository.
pub fn normalize_repo_url(url: &str) -> String {
    let mut u = url.trim().to_ascii_lowercase();
    for prefix in ["https://", "http://", "ssh://", "git://", "git@"] {
        if let Some(rest) = u.strip_prefix(prefix) {
            u = rest.to_string();
        }
    }
    if let Some(at) = u.find('@') {
        if at < u.find('/').unwrap_or(usize::MAX) {
            u = u[at + 1..].to_string();
        }
    }
    u = u.replacen(':', "/", 1);
    u.trim_end_matches('/').trim_end_matches(".git").to_string()
}

/// What a root needs from an app object, before it is matched to a folder.
pub struct AppSource {
    pub path: String,
    pub namespace: Option<String>,
    pub release: Option<String>,
    pub values: Vec<String>,
    pub inline_values: Option<Json>,
    pub kustomize: KustomizeOptions,
    pub defined_by: String,
    pub file: String,
    pub line: u32,
    /// Files the app object was generated from (ApplicationSet git files generator):
    /// a change to them touches the root.
    pub inputs: BTreeSet<String>,
}

/// App objects pointing somewhere meshward cannot render: another repository.
pub struct ExternalSource {
    pub resource: String,
    pub file: String,
    pub line: u32,
    pub what: String,
}

fn s(v: &Json, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Json::as_str)
        .map(str::to_string)
}

fn string_map(v: Option<&Json>) -> BTreeMap<String, String> {
    v.and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn array(v: Option<&Json>) -> Vec<Json> {
    v.and_then(Json::as_array).cloned().unwrap_or_default()
}

fn inline_yaml(text: &str) -> Option<Json> {
    yaml_serde::from_str::<Json>(text).ok()
}

/// Argo CD Application sources (single or multi-source).
fn argo_sources(spec: &Json) -> Vec<&Json> {
    match spec.get("sources").and_then(Json::as_array) {
        Some(list) => list.iter().collect(),
        None => spec.get("source").into_iter().collect(),
    }
}

pub fn app_sources(
    resources: &[Resource],
    repo_urls: &BTreeSet<String>,
    repo: &dyn RepoLookup,
) -> (Vec<AppSource>, Vec<ExternalSource>) {
    let mut out = Vec::new();
    let mut external = Vec::new();
    let same_repo = |url: &str| repo_urls.contains(&normalize_repo_url(url));
    // Flux GitRepository objects that point at this repository, by namespace/name.
    let flux_repos: BTreeSet<String> = resources
        .iter()
        .filter(|r| {
            r.kind == "GitRepository" && r.api_version.starts_with("source.toolkit.fluxcd.io/")
        })
        .filter(|r| s(&r.body, "/spec/url").is_some_and(|u| same_repo(&u)))
        .map(|r| format!("{}/{}", r.namespace.clone().unwrap_or_default(), r.name))
        .collect();
    for r in resources {
        let by = format!(
            "{} {}",
            r.kind,
            r.id.split_once('/').map(|x| x.1).unwrap_or(&r.id)
        );
        match (r.api_version.as_str(), r.kind.as_str()) {
            (api, "Application") if api.starts_with("argoproj.io/") => {
                let dest_ns = s(&r.body, "/spec/destination/namespace");
                if let Some(spec) = r.body.get("spec") {
                    argo_app(r, spec, dest_ns, &by, &same_repo, &mut out, &mut external);
                }
            }
            (api, "ApplicationSet") if api.starts_with("argoproj.io/") => {
                let (param_sets, unexpanded) = appset::params(&r.body, &same_repo, repo);
                for what in unexpanded {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[Json::from("spec"), Json::from("generators")]),
                        what: format!("it uses {what}, so the applications it generates from it are not checked"),
                    });
                }
                for set in param_sets {
                    let Some(template) = r.body.pointer("/spec/template") else {
                        continue;
                    };
                    let rendered = appset::substitute(template, &set.params);
                    let name = s(&rendered, "/metadata/name").unwrap_or_default();
                    let dest_ns = s(&rendered, "/spec/destination/namespace");
                    if let Some(spec) = rendered.get("spec") {
                        let by = format!("{by} → Application {name}");
                        let first = out.len();
                        argo_app(r, spec, dest_ns, &by, &same_repo, &mut out, &mut external);
                        for app in &mut out[first..] {
                            app.inputs.extend(set.inputs.iter().cloned());
                        }
                    }
                }
            }
            (api, "Kustomization") if api.starts_with("kustomize.toolkit.fluxcd.io/") => {
                let source = flux_source(r, "/spec/sourceRef");
                if !flux_repos.contains(&source) && !source.ends_with("/flux-system") {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[Json::from("spec"), Json::from("sourceRef")]),
                        what: format!(
                            "its source {source} is not a GitRepository of this repository"
                        ),
                    });
                    continue;
                }
                let path = s(&r.body, "/spec/path").unwrap_or_else(|| ".".into());
                out.push(AppSource {
                    path: join("", &path).unwrap_or_default(),
                    namespace: s(&r.body, "/spec/targetNamespace"),
                    release: None,
                    values: Vec::new(),
                    inline_values: None,
                    kustomize: KustomizeOptions {
                        namespace: s(&r.body, "/spec/targetNamespace"),
                        name_prefix: s(&r.body, "/spec/namePrefix"),
                        name_suffix: s(&r.body, "/spec/nameSuffix"),
                        common_labels: string_map(r.body.pointer("/spec/commonMetadata/labels")),
                        images: Vec::new(),
                        image_overrides: array(r.body.pointer("/spec/images")),
                        patches: array(r.body.pointer("/spec/patches")),
                    },
                    defined_by: by,
                    file: r.file.clone(),
                    line: r.line_of(&[Json::from("spec"), Json::from("path")]),
                    inputs: BTreeSet::new(),
                });
            }
            (api, "HelmRelease") if api.starts_with("helm.toolkit.fluxcd.io/") => {
                let kind = s(&r.body, "/spec/chart/spec/sourceRef/kind").unwrap_or_default();
                let source = flux_source(r, "/spec/chart/spec/sourceRef");
                if kind != "GitRepository"
                    || (!flux_repos.contains(&source) && !source.ends_with("/flux-system"))
                {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[Json::from("spec"), Json::from("chart")]),
                        what: format!(
                            "its chart comes from {kind} {source}, not from this repository"
                        ),
                    });
                    continue;
                }
                let chart = s(&r.body, "/spec/chart/spec/chart").unwrap_or_default();
                let values = r
                    .body
                    .pointer("/spec/chart/spec/valuesFiles")
                    .and_then(Json::as_array)
                    .map(|v| {
                        v.iter()
                            .filter_map(Json::as_str)
                            .filter_map(|f| join("", f))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(AppSource {
                    path: join("", &chart).unwrap_or_default(),
                    namespace: s(&r.body, "/spec/targetNamespace").or_else(|| r.namespace.clone()),
                    release: s(&r.body, "/spec/releaseName").or_else(|| Some(r.name.clone())),
                    values,
                    inline_values: r.body.pointer("/spec/values").cloned(),
                    kustomize: KustomizeOptions::default(),
                    defined_by: by,
                    file: r.file.clone(),
                    line: r.line_of(&[Json::from("spec"), Json::from("chart")]),
                    inputs: BTreeSet::new(),
                });
            }
            _ => {}
        }
    }
    (out, external)
}

fn flux_source(r: &Resource, pointer: &str) -> String {
    let ns = s(&r.body, &format!("{pointer}/namespace"))
        .or_else(|| r.namespace.clone())
        .unwrap_or_default();
    format!(
        "{ns}/{}",
        s(&r.body, &format!("{pointer}/name")).unwrap_or_default()
    )
}

#[allow(clippy::too_many_arguments)]
fn argo_app(
    r: &Resource,
    spec: &Json,
    dest_ns: Option<String>,
    by: &str,
    same_repo: &dyn Fn(&str) -> bool,
    out: &mut Vec<AppSource>,
    external: &mut Vec<ExternalSource>,
) {
    for source in argo_sources(spec) {
        let url = source
            .get("repoURL")
            .and_then(Json::as_str)
            .unwrap_or_default();
        if !same_repo(url) || source.get("chart").is_some() {
            external.push(ExternalSource {
                resource: r.id.clone(),
                file: r.file.clone(),
                line: r.line_of(&[Json::from("spec")]),
                what: format!("its source {url} is not this repository, so its objects are not checked here (add the URL to render.repo_urls in .meshward.yaml if it is this repository; otherwise check that repository with meshward too)"),
            });
            continue;
        }
        let Some(path) = source.get("path").and_then(Json::as_str) else {
            continue;
        };
        let dir = join("", path).unwrap_or_default();
        let helm = source.get("helm");
        let values = helm
            .and_then(|h| h.get("valueFiles"))
            .and_then(Json::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(Json::as_str)
                    .filter_map(|f| join(&dir, f))
                    .collect()
            })
            .unwrap_or_default();
        let inline_values = helm.and_then(|h| {
            h.get("valuesObject")
                .cloned()
                .or_else(|| h.get("values").and_then(Json::as_str).and_then(inline_yaml))
        });
        let k = source.get("kustomize");
        out.push(AppSource {
            path: dir,
            namespace: dest_ns.clone(),
            release: helm
                .and_then(|h| h.get("releaseName"))
                .and_then(Json::as_str)
                .map(str::to_string)
                .or_else(|| Some(r.name.clone())),
            values,
            inline_values,
            kustomize: KustomizeOptions {
                namespace: k
                    .and_then(|k| k.get("namespace"))
                    .and_then(Json::as_str)
                    .map(str::to_string),
                name_prefix: k
                    .and_then(|k| k.get("namePrefix"))
                    .and_then(Json::as_str)
                    .map(str::to_string),
                name_suffix: k
                    .and_then(|k| k.get("nameSuffix"))
                    .and_then(Json::as_str)
                    .map(str::to_string),
                common_labels: string_map(k.and_then(|k| k.get("commonLabels"))),
                images: k
                    .and_then(|k| k.get("images"))
                    .and_then(Json::as_array)
                    .map(|v| {
                        v.iter()
                            .filter_map(Json::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                ..Default::default()
            },
            defined_by: by.to_string(),
            file: r.file.clone(),
            line: r.line_of(&[Json::from("spec")]),
            inputs: BTreeSet::new(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_urls_normalize() {
        assert_eq!(
            normalize_repo_url("https://github.com/Acme/GitOps.git"),
            "github.com/acme/gitops"
        );
        assert_eq!(
            normalize_repo_url("git@github.com:acme/gitops.git"),
            "github.com/acme/gitops"
        );
        assert_eq!(
            normalize_repo_url("ssh://git@github.com/acme/gitops"),
            "github.com/acme/gitops"
        );
    }

    #[test]
    fn paths_join() {
        assert_eq!(join("overlays/prod", "../../base").as_deref(), Some("base"));
        assert_eq!(join("a", "../../x"), None);
    }
}
