//! App objects read as render roots: Argo CD Applications and ApplicationSets,
//! Flux Kustomizations and HelmReleases.

use super::clusters::Clusters;
use super::problem::Problem;
use super::roots::{is_remote, join, HelmOptions, HelmParameter, InlinePatch, KustomizeOptions};
use crate::finding::Severity;
use crate::manifest::Resource;
use crate::pointer::At;
use appset::RepoLookup;
use argo::Argo;
use flux::{flux_helm_release, flux_kustomization, flux_source};
pub(crate) use namespaces::app_namespace_labels;
pub use namespaces::AppNamespaceLabels;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

pub mod appset;
mod argo;
mod flux;
mod namespaces;
pub mod values;

/// How a plain folder (no kustomization, no chart) is applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectoryOptions {
    /// Sub-folders too (Flux always; Argo `directory.recurse`).
    pub recurse: bool,
    /// Argo `directory.include` / `directory.exclude` globs, matched against the path
    /// below the folder.
    pub include: Option<String>,
    pub exclude: Option<String>,
}

/// What a root needs from an app object, before it is matched to a folder.
pub struct AppSource {
    pub path: String,
    pub namespace: Option<String>,
    pub release: Option<String>,
    pub values: Vec<String>,
    pub inline_values: Option<Json>,
    pub kustomize: KustomizeOptions,
    pub helm: HelmOptions,
    pub directory: DirectoryOptions,
    pub defined_by: String,
    pub file: String,
    pub line: u32,
    /// Files the root also reads because of the app object (ApplicationSet parameter
    /// files, ConfigMaps its values come from, patch files): a change to them
    /// touches the root.
    pub inputs: BTreeSet<String>,
    /// Why the root cannot be rendered as the controller would render it (a path
    /// that leaves the repository, a missing component): reported instead of rendering.
    pub problems: Vec<Problem>,
    /// Said with the render: settings meshward does not apply, values it left out.
    pub notes: Vec<Problem>,
    /// The cluster it deploys to, where the repository says.
    pub cluster: Option<std::sync::Arc<str>>,
}

/// App objects pointing somewhere meshward cannot render: another repository.
pub struct ExternalSource {
    pub resource: String,
    /// The cluster of the app object, where the repository says.
    pub cluster: Option<std::sync::Arc<str>>,
    pub file: String,
    pub line: u32,
    pub what: String,
}

fn s(v: &Json, pointer: &str) -> Option<String> {
    v.str_at(pointer).map(str::to_string)
}

/// A scalar as text (`replicas: 3` and `replicas: "3"` alike).
fn text(v: &Json) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

fn string_map(v: Option<&Json>) -> BTreeMap<String, String> {
    v.and_then(Json::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect())
        .unwrap_or_default()
}

pub fn strings(v: Option<&Json>) -> Vec<String> {
    v.and_then(Json::as_array)
        .map(|v| {
            v.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn array(v: Option<&Json>) -> Vec<Json> {
    v.and_then(Json::as_array).cloned().unwrap_or_default()
}

/// Inline YAML values are bounded like a file of the tree.
const MAX_INLINE_BYTES: usize = 4 * 1024 * 1024;

fn inline_yaml(text: &str) -> Option<Json> {
    if text.len() > MAX_INLINE_BYTES {
        return None;
    }
    yaml_serde::from_str::<Json>(text).ok()
}

/// Set to something: not null, not an empty list or map.
pub fn has_content(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => o.values().any(has_content),
        _ => true,
    }
}

/// A step of a path to a field, for `line_of`.
fn k(key: &str) -> Json {
    Json::from(key)
}

/// What one app object says about its roots besides where they are.
#[derive(Default)]
struct Said {
    problems: Vec<Problem>,
    notes: Vec<Problem>,
    inputs: BTreeSet<String>,
}

impl Said {
    fn refuse(&mut self, file: &str, line: u32, message: String) {
        self.problems
            .push(Problem::refused(file, &message).at(line));
    }
    fn fail(&mut self, file: &str, line: u32, message: String) {
        self.problems.push(Problem::failed(file, &message).at(line));
    }
    fn note(
        &mut self,
        rule: &'static str,
        severity: Severity,
        file: &str,
        line: u32,
        message: String,
    ) {
        self.notes.push(Problem {
            rule,
            severity,
            file: file.to_string(),
            line,
            message,
        });
    }
    /// A setting that changes what is deployed and that meshward does not apply.
    fn ignored(&mut self, file: &str, line: u32, field: &str, effect: &str) {
        self.note(
            SETTING_IGNORED,
            Severity::Info,
            file,
            line,
            format!("{field} is set, and meshward does not apply it: {effect}, so what it changes was not checked"),
        );
    }
    /// A path an app object names, inside the repository, or a refusal.
    fn repo_path(
        &mut self,
        file: &str,
        line: u32,
        dir: &str,
        rel: &str,
        what: &str,
    ) -> Option<String> {
        if is_remote(rel) {
            self.refuse(file, line, format!("{what} {rel:?} is remote; meshward renders without network access, so this root was not rendered. Vendor it into the repository"));
            return None;
        }
        let joined = join(dir, rel);
        if joined.is_none() {
            self.refuse(file, line, format!("{what} {rel:?} resolves outside the repository; meshward does not read outside the checkout, so this root was not rendered (rendering it without that input would check something other than what is deployed). Point it at a path inside the repository"));
        }
        joined
    }
}

pub const SETTING_IGNORED: &str = "render/setting-ignored";
pub const VALUES_UNRESOLVED: &str = "render/values-unresolved";
pub const OPTIONAL_INPUT_MISSING: &str = "render/optional-input-missing";

/// Argo CD Application sources (single or multi-source), with their path in the spec.
fn argo_sources(spec: &Json) -> Vec<(Vec<Json>, &Json)> {
    match spec.get("sources").and_then(Json::as_array) {
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, s)| (vec![k("sources"), Json::from(i)], s))
            .collect(),
        None => spec
            .get("source")
            .map(|s| (vec![k("source")], s))
            .into_iter()
            .collect(),
    }
}

/// A Flux GitRepository of this repository at a revision that need not be the one
/// under check: a tag, semver range, commit or ref name, or a branch other than the
/// checked one (when that is known). None: it follows the revision under check.
fn other_revision(r: &Resource, branches: &[String]) -> Option<String> {
    for (key, what) in [
        ("commit", "commit"),
        ("tag", "tag"),
        ("semver", "the newest tag in semver range"),
        ("name", "ref"),
    ] {
        if let Some(v) = s(&r.body, &format!("/spec/ref/{key}")) {
            return Some(format!("{what} {v}"));
        }
    }
    let branch = s(&r.body, "/spec/ref/branch")?;
    (!branches.is_empty() && !branches.contains(&branch)).then(|| {
        format!(
            "branch {branch}, while the revision under check is of {}",
            branches.join(", ")
        )
    })
}

/// Why a Flux source that is not a GitRepository of this checkout is not checked.
fn flux_source_elsewhere(kind: &str, source: &str) -> String {
    match kind {
        "ExternalArtifact" => format!("its source is ExternalArtifact {source}: an artifact a Flux ArtifactGenerator assembles from other sources (Flux 2.7), not this repository's files as they are"),
        "" => format!("its source {source} names no kind"),
        _ => format!("its source is {kind} {source}, not a GitRepository of this repository"),
    }
}

pub(crate) fn app_sources(
    resources: &[&Resource],
    repo_urls: &crate::render::roots::SameRepo,
    branches: &[String],
    repo: &dyn RepoLookup,
    clusters: &Clusters,
) -> (Vec<AppSource>, Vec<ExternalSource>) {
    let mut out = Vec::new();
    let mut external = Vec::new();
    let same_repo = |url: &str| repo_urls.names(url);
    // Flux GitRepository objects that point at this repository, by namespace/name,
    // with the other revision they follow, if they do.
    let flux_repos: BTreeMap<String, Option<String>> = resources
        .iter()
        .filter(|r| {
            r.kind == "GitRepository" && r.api_version.starts_with("source.toolkit.fluxcd.io/")
        })
        .filter(|r| s(&r.body, "/spec/url").is_some_and(|u| same_repo(&u)))
        .map(|r| {
            (
                format!("{}/{}", r.namespace.clone().unwrap_or_default(), r.name),
                other_revision(r, branches),
            )
        })
        .collect();
    // Why a GitRepository source is not the revision under check; None when it is
    // (one of this repository, or `flux-system`, the repository Flux bootstraps from).
    let not_this_checkout = |source: &str| -> Option<String> {
        match flux_repos.get(source) {
            Some(None) => None,
            Some(Some(other)) => Some(format!("its source GitRepository {source} follows {other} of this repository, not the revision under check")),
            None if source.ends_with("/flux-system") => None,
            None => Some(format!("its source GitRepository {source} is not a GitRepository of this repository")),
        }
    };
    let ctx = Argo {
        same_repo: &same_repo,
        repo,
    };
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
                    let first = out.len();
                    ctx.app(r, spec, &[k("spec")], dest_ns, &by, &mut out, &mut external);
                    let cluster = argo_cluster(clusters, &r.body, r);
                    for app in &mut out[first..] {
                        app.cluster = cluster.clone();
                    }
                }
            }
            (api, "ApplicationSet") if api.starts_with("argoproj.io/") => {
                let (param_sets, unexpanded) = appset::params(&r.body, &same_repo, repo);
                for what in unexpanded {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        cluster: r.cluster.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[k("spec"), k("generators")]),
                        what: format!("it uses {what}, so the applications it generates from it are not checked"),
                    });
                }
                for set in param_sets {
                    let Some(template) = r.body.at("/spec/template") else {
                        continue;
                    };
                    let rendered = appset::substitute(template, &set.params);
                    let name = s(&rendered, "/metadata/name").unwrap_or_default();
                    let dest_ns = s(&rendered, "/spec/destination/namespace");
                    if let Some(spec) = rendered.get("spec") {
                        let by = format!("{by} → Application {name}");
                        let first = out.len();
                        let at = [k("spec"), k("template"), k("spec")];
                        ctx.app(r, spec, &at, dest_ns, &by, &mut out, &mut external);
                        let cluster = argo_cluster(clusters, &rendered, r);
                        for app in &mut out[first..] {
                            app.inputs.extend(set.inputs.iter().cloned());
                            app.cluster = cluster.clone();
                        }
                    }
                }
            }
            (api, "Kustomization") if api.starts_with("kustomize.toolkit.fluxcd.io/") => {
                let source = flux_source(r, "/spec/sourceRef");
                let kind = s(&r.body, "/spec/sourceRef/kind").unwrap_or_default();
                let elsewhere = match kind.as_str() {
                    "GitRepository" => not_this_checkout(&source),
                    _ => Some(flux_source_elsewhere(&kind, &source)),
                };
                if let Some(what) = elsewhere {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        cluster: r.cluster.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[k("spec"), k("sourceRef")]),
                        what,
                    });
                    continue;
                }
                let mut app = flux_kustomization(r, by, repo);
                app.cluster = r.cluster.clone();
                out.push(app);
            }
            (api, "HelmRelease") if api.starts_with("helm.toolkit.fluxcd.io/") => {
                if let Some(kind) = s(&r.body, "/spec/chartRef/kind") {
                    let source = flux_source(r, "/spec/chartRef");
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        cluster: r.cluster.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[k("spec"), k("chartRef")]),
                        what: match kind.as_str() {
                            "ExternalArtifact" => format!("{} (spec.chartRef)", flux_source_elsewhere(&kind, &source)),
                            _ => format!("its chart comes from {kind} {source} (spec.chartRef), not from a GitRepository of this repository"),
                        },
                    });
                    continue;
                }
                let kind = s(&r.body, "/spec/chart/spec/sourceRef/kind").unwrap_or_default();
                let source = flux_source(r, "/spec/chart/spec/sourceRef");
                let elsewhere = match kind.as_str() {
                    "GitRepository" => not_this_checkout(&source),
                    "ExternalArtifact" => Some(flux_source_elsewhere(&kind, &source)),
                    _ => Some(format!(
                        "its chart comes from {kind} {source}, not from this repository"
                    )),
                };
                if let Some(what) = elsewhere {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        cluster: r.cluster.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[k("spec"), k("chart")]),
                        what,
                    });
                    continue;
                }
                let mut app = flux_helm_release(r, by, resources);
                app.cluster = r.cluster.clone();
                out.push(app);
            }
            _ => {}
        }
    }
    (out, external)
}

/// The cluster an Argo CD Application (or one an ApplicationSet generates) deploys to.
fn argo_cluster(clusters: &Clusters, app: &Json, r: &Resource) -> Option<std::sync::Arc<str>> {
    clusters.of_destination(
        s(app, "/spec/destination/name").as_deref(),
        s(app, "/spec/destination/server").as_deref(),
        r.cluster.as_ref(),
    )
}

/// Is this an app object meshward follows: an Argo CD Application or
/// ApplicationSet, a Flux Kustomization or HelmRelease?
pub(crate) fn is_app_object(r: &Resource) -> bool {
    let group = r.api_version.split('/').next().unwrap_or_default();
    matches!(
        (group, r.kind.as_str()),
        ("argoproj.io", "Application" | "ApplicationSet")
            | ("kustomize.toolkit.fluxcd.io", "Kustomization")
            | ("helm.toolkit.fluxcd.io", "HelmRelease")
    )
}

/// Components (Argo `kustomize.components`, Flux `spec.components`): folders relative
/// to the source folder, inside the repository.
fn components(
    said: &mut Said,
    repo: &dyn RepoLookup,
    file: &str,
    line: u32,
    dir: &str,
    list: &[String],
    ignore_missing: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for c in list {
        let Some(path) = said.repo_path(file, line, dir, c, "component") else {
            continue;
        };
        if repo.is_dir(&path) {
            out.push(path);
        } else if ignore_missing {
            said.note(OPTIONAL_INPUT_MISSING, Severity::Info, file, line, format!("component {c:?} ({path}) does not exist; it is skipped, as ignoreMissingComponents says, and the rest was rendered without it"));
        } else {
            said.fail(file, line, format!("component {c:?} ({path}) is not a folder of this repository: the controller cannot build this root. Fix the path or remove the component"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{load, Limits, SourceFile};

    fn git_repository(reference: &str) -> Resource {
        let text = format!("apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  url: https://github.com/acme/fleet\n  ref:\n{reference}");
        let loaded = load(
            &[SourceFile {
                path: "clusters/prod/flux-system/gotk-sync.yaml".into(),
                bytes: text.into_bytes(),
            }],
            &Limits::default(),
        );
        loaded.resources.into_iter().next().expect("one object")
    }

    #[test]
    fn a_git_repository_on_another_branch_or_a_fixed_revision_is_not_this_checkout() {
        let main = vec!["main".to_string()];
        let on_main = git_repository("    branch: main\n");
        assert_eq!(other_revision(&on_main, &main), None);
        // Which branch a local run stands for is unknown: assumed this checkout.
        assert_eq!(other_revision(&on_main, &[]), None);
        assert_eq!(
            other_revision(&git_repository("    branch: staging\n"), &main).as_deref(),
            Some("branch staging, while the revision under check is of main")
        );
        assert_eq!(
            other_revision(&git_repository("    tag: v1.4.0\n"), &[]).as_deref(),
            Some("tag v1.4.0")
        );
        assert_eq!(
            other_revision(&git_repository("    semver: \">=1.0.0\"\n"), &main).as_deref(),
            Some("the newest tag in semver range >=1.0.0")
        );
    }
}
