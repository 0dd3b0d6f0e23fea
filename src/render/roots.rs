//! Render roots: what GitOps controllers render, found in the tree (kustomization
//! folders, Helm charts), in app objects (Argo CD Application/ApplicationSet, Flux
//! Kustomization/HelmRelease) and in `.meshward.yaml`.

use super::appset::{self, RepoLookup};
use super::Problem;
use crate::finding::Severity;
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
    /// Whether the labels also go into selectors and pod templates: Argo's
    /// commonLabels do (kustomize commonLabels) unless labelWithoutSelector; Flux
    /// commonMetadata labels do not.
    pub labels_include_selectors: bool,
    /// Argo labelIncludeTemplates: labels without selectors, but in pod templates.
    pub labels_include_templates: bool,
    pub common_annotations: BTreeMap<String, String>,
    pub images: Vec<String>,
    /// Image overrides already in kustomize's form (Flux `spec.images`).
    pub image_overrides: Vec<Json>,
    /// Patches in kustomize's form, inline (Flux `spec.patches`, Argo
    /// `kustomize.patches`; a patch read from a file carries it in `file`).
    pub patches: Vec<InlinePatch>,
    /// Components, as folders of the repository.
    pub components: Vec<String>,
    /// Replica counts in kustomize's form (`name`, `count`).
    pub replicas: Vec<Json>,
}

impl KustomizeOptions {
    /// Whether anything here needs a kustomization to apply.
    pub fn is_empty(&self) -> bool {
        self.name_prefix.is_none()
            && self.name_suffix.is_none()
            && self.common_labels.is_empty()
            && self.common_annotations.is_empty()
            && self.images.is_empty()
            && self.image_overrides.is_empty()
            && self.patches.is_empty()
            && self.components.is_empty()
            && self.replicas.is_empty()
    }
}

/// A patch an app object applies: kustomize's `{patch, target}` with the patch inline,
/// and the repository file its text was read from, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct InlinePatch {
    pub spec: Json,
    pub file: Option<String>,
}

/// A value an app object passes to helm on the command line (Argo `helm.parameters`
/// and `helm.fileParameters`), applied after all values files.
#[derive(Debug, Clone, PartialEq)]
pub enum HelmParameter {
    Set {
        name: String,
        value: String,
    },
    SetString {
        name: String,
        value: String,
    },
    /// `--set-file`: the value is the content of a file of the repository.
    SetFile {
        name: String,
        path: String,
    },
}

/// Helm options an app object sets besides values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HelmOptions {
    pub parameters: Vec<HelmParameter>,
    /// Missing values files are skipped (Argo ignoreMissingValueFiles, Flux
    /// ignoreMissingValuesFiles) instead of failing the render.
    pub ignore_missing_values: bool,
    pub skip_schema_validation: bool,
    /// `.Release.Namespace` when it differs from the destination (Argo helm.namespace).
    pub release_namespace: Option<String>,
    pub kube_version: Option<String>,
    pub api_versions: Vec<String>,
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
    pub helm: HelmOptions,
    /// A folder without kustomization that Flux applies with options: the
    /// kustomization Flux generates lists these (YAML files, and folders that hold a
    /// kustomization), as paths of the repository.
    pub generated: Option<Vec<String>>,
    /// Who defined it, for messages: "Application argocd/geo".
    pub defined_by: Option<String>,
}

impl Root {
    /// A kustomize root of `path` as found, before any app object's options.
    pub fn kustomize(path: &str, entry: &str, entry_line: u32) -> Root {
        Root {
            kind: RootKind::Kustomize,
            path: path.to_string(),
            entry: entry.to_string(),
            entry_line,
            namespace: None,
            release: None,
            values: Vec::new(),
            inline_values: None,
            kustomize: KustomizeOptions::default(),
            helm: HelmOptions::default(),
            generated: None,
            defined_by: None,
        }
    }

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
                    ctx.app(r, spec, &[k("spec")], dest_ns, &by, &mut out, &mut external);
                }
            }
            (api, "ApplicationSet") if api.starts_with("argoproj.io/") => {
                let (param_sets, unexpanded) = appset::params(&r.body, &same_repo, repo);
                for what in unexpanded {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[k("spec"), k("generators")]),
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
                        let at = [k("spec"), k("template"), k("spec")];
                        ctx.app(r, spec, &at, dest_ns, &by, &mut out, &mut external);
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
                        line: r.line_of(&[k("spec"), k("sourceRef")]),
                        what: format!(
                            "its source {source} is not a GitRepository of this repository"
                        ),
                    });
                    continue;
                }
                out.push(flux_kustomization(r, by, repo));
            }
            (api, "HelmRelease") if api.starts_with("helm.toolkit.fluxcd.io/") => {
                if let Some(kind) = s(&r.body, "/spec/chartRef/kind") {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[k("spec"), k("chartRef")]),
                        what: format!(
                            "its chart comes from {kind} {} (spec.chartRef), not from a GitRepository of this repository",
                            flux_source(r, "/spec/chartRef")
                        ),
                    });
                    continue;
                }
                let kind = s(&r.body, "/spec/chart/spec/sourceRef/kind").unwrap_or_default();
                let source = flux_source(r, "/spec/chart/spec/sourceRef");
                if kind != "GitRepository"
                    || (!flux_repos.contains(&source) && !source.ends_with("/flux-system"))
                {
                    external.push(ExternalSource {
                        resource: r.id.clone(),
                        file: r.file.clone(),
                        line: r.line_of(&[k("spec"), k("chart")]),
                        what: format!(
                            "its chart comes from {kind} {source}, not from this repository"
                        ),
                    });
                    continue;
                }
                out.push(flux_helm_release(r, by, resources));
            }
            _ => {}
        }
    }
    (out, external)
}

/// Labels an app object sets on the namespace it deploys to (Argo CD
/// `syncPolicy.managedNamespaceMetadata.labels` with `CreateNamespace=true`).
#[derive(Debug, Clone, PartialEq)]
pub struct AppNamespaceLabels {
    pub namespace: String,
    pub labels: std::collections::BTreeMap<String, String>,
    /// The app object (an Application, or the ApplicationSet whose template it is).
    pub resource: String,
    /// Where the labels are in that object.
    pub path: Vec<String>,
    /// Who sets them, for messages: "Application argocd/shop".
    pub by: String,
}

/// The labels Argo CD sets on the namespaces its Applications create: with the
/// `CreateNamespace=true` sync option, `syncPolicy.managedNamespaceMetadata.labels` on
/// `destination.namespace` (without the option Argo CD sets nothing). Applications,
/// and each Application an ApplicationSet generates; one whose namespace or labels
/// still hold a template expression, or that a `templatePatch` may change, is left
/// out, and its namespace keeps unknown labels.
pub fn app_namespace_labels(
    resources: &[Resource],
    repo_urls: &BTreeSet<String>,
    repo: &dyn RepoLookup,
) -> Vec<AppNamespaceLabels> {
    let same_repo = |url: &str| repo_urls.contains(&normalize_repo_url(url));
    let mut out = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.api_version.starts_with("argoproj.io/"))
    {
        let by = format!(
            "{} {}",
            r.kind,
            r.id.split_once('/').map(|x| x.1).unwrap_or(&r.id)
        );
        match r.kind.as_str() {
            "Application" => {
                out.extend(managed_namespace(r, &r.body, &[], by));
            }
            "ApplicationSet" if r.body.pointer("/spec/templatePatch").is_none() => {
                let Some(template) = r.body.pointer("/spec/template") else {
                    continue;
                };
                for set in appset::params(&r.body, &same_repo, repo).0 {
                    let app = appset::substitute(template, &set.params);
                    let name = s(&app, "/metadata/name").unwrap_or_default();
                    let by = format!("{by} → Application {name}");
                    out.extend(managed_namespace(r, &app, &["spec", "template"], by));
                }
            }
            _ => {}
        }
    }
    out
}

/// What one Application (`app`, found at `at` in `r`) sets on its namespace.
fn managed_namespace(
    r: &Resource,
    app: &Json,
    at: &[&str],
    by: String,
) -> Option<AppNamespaceLabels> {
    let creates = app
        .pointer("/spec/syncPolicy/syncOptions")
        .and_then(Json::as_array)
        .is_some_and(|o| o.iter().any(|o| o.as_str() == Some("CreateNamespace=true")));
    let namespace = s(app, "/spec/destination/namespace")?;
    let labels = app
        .pointer("/spec/syncPolicy/managedNamespaceMetadata/labels")?
        .as_object()?;
    let unexpanded = |v: &str| v.contains("{{");
    if !creates || namespace.is_empty() || unexpanded(&namespace) {
        return None;
    }
    let mut out = BTreeMap::new();
    for (k, v) in labels {
        let v = v.as_str()?;
        if unexpanded(k) || unexpanded(v) {
            return None;
        }
        out.insert(k.clone(), v.to_string());
    }
    let mut path: Vec<String> = at.iter().map(|p| p.to_string()).collect();
    path.extend(["spec", "syncPolicy", "managedNamespaceMetadata", "labels"].map(String::from));
    Some(AppNamespaceLabels {
        namespace,
        labels: out,
        resource: r.id.clone(),
        path,
        by,
    })
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

fn flux_kustomization(r: &Resource, by: String, repo: &dyn RepoLookup) -> AppSource {
    let mut said = Said::default();
    let file = r.file.as_str();
    let at = |keys: &[&str]| r.line_of(&keys.iter().map(|s| k(s)).collect::<Vec<_>>());
    let rel = s(&r.body, "/spec/path").unwrap_or_else(|| ".".into());
    let path = said
        .repo_path(file, at(&["spec", "path"]), "", &rel, "path")
        .unwrap_or_default();
    let mut patches: Vec<InlinePatch> = array(r.body.pointer("/spec/patches"))
        .into_iter()
        .map(|spec| InlinePatch { spec, file: None })
        .collect();
    // v1beta2 forms, which Flux turns into patches the same way.
    for p in array(r.body.pointer("/spec/patchesStrategicMerge")) {
        let patch = yaml_serde::to_string(&p).unwrap_or_default();
        patches.push(InlinePatch {
            spec: serde_json::json!({ "patch": patch }),
            file: None,
        });
    }
    for p in array(r.body.pointer("/spec/patchesJson6902")) {
        let ops = p.get("patch").cloned().unwrap_or(Json::Null);
        let mut spec = serde_json::json!({ "patch": ops.to_string() });
        if let Some(t) = p.get("target") {
            spec["target"] = t.clone();
        }
        patches.push(InlinePatch { spec, file: None });
    }
    let components = components(
        &mut said,
        repo,
        file,
        at(&["spec", "components"]),
        &path,
        &strings(r.body.pointer("/spec/components")),
        false,
    );
    for field in ["substitute", "substituteFrom"] {
        if r.body
            .pointer(&format!("/spec/postBuild/{field}"))
            .is_some()
        {
            said.ignored(
                file,
                at(&["spec", "postBuild", field]),
                &format!("postBuild.{field}"),
                "Flux replaces ${var} references in the built objects, and meshward checked them with the references left in",
            );
        }
    }
    AppSource {
        path,
        namespace: s(&r.body, "/spec/targetNamespace"),
        release: None,
        values: Vec::new(),
        inline_values: None,
        kustomize: KustomizeOptions {
            namespace: s(&r.body, "/spec/targetNamespace"),
            name_prefix: s(&r.body, "/spec/namePrefix"),
            name_suffix: s(&r.body, "/spec/nameSuffix"),
            common_labels: string_map(r.body.pointer("/spec/commonMetadata/labels")),
            common_annotations: string_map(r.body.pointer("/spec/commonMetadata/annotations")),
            image_overrides: array(r.body.pointer("/spec/images")),
            patches,
            components,
            ..Default::default()
        },
        helm: HelmOptions::default(),
        directory: DirectoryOptions {
            recurse: true,
            ..Default::default()
        },
        defined_by: by,
        file: r.file.clone(),
        line: at(&["spec", "path"]),
        inputs: said.inputs,
        problems: said.problems,
        notes: said.notes,
    }
}

fn flux_helm_release(r: &Resource, by: String, resources: &[Resource]) -> AppSource {
    let mut said = Said::default();
    let file = r.file.as_str();
    let at = |keys: &[Json]| r.line_of(keys);
    let chart = s(&r.body, "/spec/chart/spec/chart").unwrap_or_default();
    let chart_line = at(&[k("spec"), k("chart")]);
    let path = said
        .repo_path(file, chart_line, "", &chart, "chart")
        .unwrap_or_default();
    // valuesFiles replaces the older single valuesFile.
    let mut listed = strings(r.body.pointer("/spec/chart/spec/valuesFiles"));
    let key = if listed.is_empty() {
        listed.extend(s(&r.body, "/spec/chart/spec/valuesFile"));
        "valuesFile"
    } else {
        "valuesFiles"
    };
    let values_line = at(&[k("spec"), k("chart"), k("spec"), k(key)]);
    let values: Vec<String> = listed
        .iter()
        .filter_map(|f| said.repo_path(file, values_line, "", f, "values file"))
        .collect();
    said.inputs.extend(values.iter().cloned());
    let (inline_values, unresolved, inputs) = super::values::flux_values(r, resources);
    said.inputs.extend(inputs);
    for u in unresolved {
        let line = at(&[k("spec"), k("valuesFrom"), Json::from(u.index)]);
        if u.optional {
            said.note(OPTIONAL_INPUT_MISSING, Severity::Info, file, line, format!("{}; it is marked optional, so Flux renders the chart without it too, as meshward did", u.message));
        } else {
            said.note(VALUES_UNRESOLVED, Severity::Warning, file, line, format!("{}: the chart was rendered without those values, so whatever they set was not checked. If the object is created outside this repository that is expected; otherwise add it (in the HelmRelease's namespace)", u.message));
        }
    }
    if r.body.pointer("/spec/postRenderers").is_some() {
        said.ignored(
            file,
            at(&[k("spec"), k("postRenderers")]),
            "postRenderers",
            "Flux patches the chart's output with them before applying it",
        );
    }
    AppSource {
        path,
        namespace: s(&r.body, "/spec/targetNamespace").or_else(|| r.namespace.clone()),
        release: s(&r.body, "/spec/releaseName").or_else(|| Some(r.name.clone())),
        values,
        inline_values,
        kustomize: KustomizeOptions::default(),
        helm: HelmOptions {
            ignore_missing_values: r
                .body
                .pointer("/spec/chart/spec/ignoreMissingValuesFiles")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            ..Default::default()
        },
        directory: DirectoryOptions::default(),
        defined_by: by,
        file: r.file.clone(),
        line: chart_line,
        inputs: said.inputs,
        problems: said.problems,
        notes: said.notes,
    }
}

/// Argo CD's escaping of a `--set` value: commas separate assignments for helm, so
/// an unescaped one is escaped, except in a `{a,b}` list.
fn clean_set_value(v: &str) -> String {
    if v.starts_with('{') && v.ends_with('}') {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len());
    let mut prev = None;
    for c in v.chars() {
        if c == ',' && prev != Some('\\') {
            out.push('\\');
        }
        out.push(c);
        prev = Some(c);
    }
    out
}

struct Argo<'a> {
    same_repo: &'a dyn Fn(&str) -> bool,
    repo: &'a dyn RepoLookup,
}

impl Argo<'_> {
    #[allow(clippy::too_many_arguments)]
    fn app(
        &self,
        r: &Resource,
        spec: &Json,
        spec_at: &[Json],
        dest_ns: Option<String>,
        by: &str,
        out: &mut Vec<AppSource>,
        external: &mut Vec<ExternalSource>,
    ) {
        let sources = argo_sources(spec);
        // Sources that others' value files name as `$<ref>/...`: None for this
        // repository, else the other repository's URL.
        let refs: BTreeMap<String, Option<String>> = sources
            .iter()
            .filter_map(|(_, src)| {
                let name = src.get("ref").and_then(Json::as_str)?;
                let url = src
                    .get("repoURL")
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                Some((
                    name.to_string(),
                    (!(self.same_repo)(url)).then(|| url.to_string()),
                ))
            })
            .collect();
        for (source_at, source) in &sources {
            let line_at = |rest: &[Json]| {
                let mut p = spec_at.to_vec();
                p.extend(source_at.iter().cloned());
                p.extend(rest.iter().cloned());
                r.line_of(&p)
            };
            let url = source
                .get("repoURL")
                .and_then(Json::as_str)
                .unwrap_or_default();
            // A source that is only there to be referenced deploys nothing itself.
            if source.get("ref").is_some()
                && source.get("path").is_none()
                && source.get("chart").is_none()
            {
                continue;
            }
            if !(self.same_repo)(url) || source.get("chart").is_some() {
                external.push(ExternalSource {
                    resource: r.id.clone(),
                    file: r.file.clone(),
                    line: line_at(&[]),
                    what: format!("its source {url} is not this repository, so its objects are not checked here (add the URL to render.repo_urls in .meshward.yaml if it is this repository; otherwise check that repository with meshward too)"),
                });
                continue;
            }
            let Some(path) = source.get("path").and_then(Json::as_str) else {
                continue;
            };
            let mut said = Said::default();
            let file = r.file.as_str();
            let dir = said
                .repo_path(file, line_at(&[k("path")]), "", path, "path")
                .unwrap_or_default();
            let helm = source.get("helm").cloned().unwrap_or(Json::Null);
            let values = self.value_files(&mut said, file, &line_at, &dir, &helm, &refs);
            let helm_options = self.helm_options(&mut said, file, &line_at, &dir, &helm);
            let kustomize = source.get("kustomize").cloned().unwrap_or(Json::Null);
            let kustomize = self.kustomize(&mut said, file, &line_at, &dir, &kustomize);
            let directory = source.get("directory").cloned().unwrap_or(Json::Null);
            if directory.get("jsonnet").is_some_and(has_content) {
                said.ignored(
                    file,
                    line_at(&[k("directory"), k("jsonnet")]),
                    "directory.jsonnet",
                    "Argo CD evaluates the folder's .jsonnet files with it, and meshward does not run jsonnet",
                );
            }
            if source.get("plugin").is_some() {
                said.ignored(
                    file,
                    line_at(&[k("plugin")]),
                    "plugin",
                    "Argo CD renders this source with a config management plugin, and meshward rendered the folder as plain kustomize, Helm or YAML instead (it runs no plugins)",
                );
            }
            out.push(AppSource {
                path: dir,
                namespace: dest_ns.clone(),
                release: helm
                    .get("releaseName")
                    .and_then(Json::as_str)
                    .map(str::to_string)
                    .or_else(|| Some(r.name.clone())),
                values,
                // valuesObject wins over values, as in Argo CD.
                inline_values: helm
                    .get("valuesObject")
                    .filter(|v| !v.is_null())
                    .cloned()
                    .or_else(|| {
                        helm.get("values")
                            .and_then(Json::as_str)
                            .and_then(inline_yaml)
                    }),
                kustomize,
                helm: helm_options,
                directory: DirectoryOptions {
                    recurse: directory
                        .get("recurse")
                        .and_then(Json::as_bool)
                        .unwrap_or(false),
                    include: s(&directory, "/include").filter(|s| !s.is_empty()),
                    exclude: s(&directory, "/exclude").filter(|s| !s.is_empty()),
                },
                defined_by: by.to_string(),
                file: r.file.clone(),
                line: line_at(&[]),
                inputs: said.inputs,
                problems: said.problems,
                notes: said.notes,
            });
        }
    }

    /// `helm.valueFiles`: relative to the source folder, or `$<ref>/...` relative to
    /// the root of the source with that ref.
    fn value_files(
        &self,
        said: &mut Said,
        file: &str,
        line_at: &dyn Fn(&[Json]) -> u32,
        dir: &str,
        helm: &Json,
        refs: &BTreeMap<String, Option<String>>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for (i, f) in strings(helm.get("valueFiles")).iter().enumerate() {
            let line = line_at(&[k("helm"), k("valueFiles"), Json::from(i)]);
            let resolved = match f.strip_prefix('$') {
                Some(rest) => {
                    let (name, rel) = rest.split_once('/').unwrap_or((rest, ""));
                    match refs.get(name) {
                        Some(None) => said.repo_path(file, line, "", rel, "values file"),
                        Some(Some(url)) => {
                            said.note("render/external-source", Severity::Info, file, line, format!("values file {f} comes from the source with ref {name} ({url}), another repository: the chart was rendered without it, so what it sets was not checked. Check that repository's values with meshward too, or add its URL to render.repo_urls if it is this repository"));
                            None
                        }
                        None => {
                            said.fail(file, line, format!("values file {f} names ${name}, but no source of the application has ref: {name}, so Argo CD cannot render it. Add the source with that ref, or fix the name"));
                            None
                        }
                    }
                }
                None if f.contains("://") => {
                    said.note("render/external-source", Severity::Info, file, line, format!("values file {f} is fetched over the network by Argo CD; meshward renders offline, so the chart was rendered without it and what it sets was not checked. Keep the values in the repository to have them checked"));
                    None
                }
                None => said.repo_path(file, line, dir, f, "values file"),
            };
            if let Some(path) = resolved {
                said.inputs.insert(path.clone());
                out.push(path);
            }
        }
        out
    }

    fn helm_options(
        &self,
        said: &mut Said,
        file: &str,
        line_at: &dyn Fn(&[Json]) -> u32,
        dir: &str,
        helm: &Json,
    ) -> HelmOptions {
        let mut parameters = Vec::new();
        for p in array(helm.get("parameters")) {
            let Some(name) = p.get("name").and_then(Json::as_str) else {
                continue;
            };
            let value = clean_set_value(&p.get("value").map(text).unwrap_or_default());
            let name = name.to_string();
            parameters.push(
                if p.get("forceString").and_then(Json::as_bool) == Some(true) {
                    HelmParameter::SetString { name, value }
                } else {
                    HelmParameter::Set { name, value }
                },
            );
        }
        for (i, p) in array(helm.get("fileParameters")).iter().enumerate() {
            let (Some(name), Some(rel)) = (
                p.get("name").and_then(Json::as_str),
                p.get("path").and_then(Json::as_str),
            ) else {
                continue;
            };
            let line = line_at(&[k("helm"), k("fileParameters"), Json::from(i)]);
            if let Some(path) = said.repo_path(file, line, dir, rel, "file parameter") {
                said.inputs.insert(path.clone());
                parameters.push(HelmParameter::SetFile {
                    name: name.to_string(),
                    path,
                });
            }
        }
        HelmOptions {
            parameters,
            ignore_missing_values: helm
                .get("ignoreMissingValueFiles")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            skip_schema_validation: helm
                .get("skipSchemaValidation")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            release_namespace: s(helm, "/namespace").filter(|n| !n.is_empty()),
            kube_version: s(helm, "/kubeVersion").filter(|n| !n.is_empty()),
            api_versions: strings(helm.get("apiVersions")),
        }
    }

    fn kustomize(
        &self,
        said: &mut Said,
        file: &str,
        line_at: &dyn Fn(&[Json]) -> u32,
        dir: &str,
        k8z: &Json,
    ) -> KustomizeOptions {
        let line = |key: &str| line_at(&[k("kustomize"), k(key)]);
        let mut patches = Vec::new();
        for (i, p) in array(k8z.get("patches")).into_iter().enumerate() {
            let mut spec = p.clone();
            let mut from = None;
            if let Some(rel) = p.get("path").and_then(Json::as_str) {
                let at = line_at(&[k("kustomize"), k("patches"), Json::from(i)]);
                let Some(path) = said.repo_path(file, at, dir, rel, "patch") else {
                    continue;
                };
                let Some(text) = self.repo.read(&path) else {
                    said.fail(file, at, format!("patch file {rel:?} ({path}) is not a YAML or JSON file of this repository: Argo CD cannot build this application. Fix the path"));
                    continue;
                };
                if let Some(o) = spec.as_object_mut() {
                    o.remove("path");
                }
                spec["patch"] = Json::from(text);
                said.inputs.insert(path.clone());
                from = Some(path);
            }
            patches.push(InlinePatch { spec, file: from });
        }
        let components = components(
            said,
            self.repo,
            file,
            line("components"),
            dir,
            &strings(k8z.get("components")),
            k8z.get("ignoreMissingComponents").and_then(Json::as_bool) == Some(true),
        );
        let mut replicas = Vec::new();
        for r in array(k8z.get("replicas")) {
            let name = r.get("name").and_then(Json::as_str).unwrap_or_default();
            let count = r.get("count").map(text).unwrap_or_default();
            match count.parse::<i64>() {
                Ok(n) => replicas.push(serde_json::json!({ "name": name, "count": n })),
                Err(_) => said.fail(file, line("replicas"), format!("replicas of {name:?} is {count:?}, not a number: Argo CD cannot build this application")),
            }
        }
        for (key, effect) in [
            (
                "kubeVersion",
                "Argo CD passes it to the Helm charts kustomize inflates (helmCharts)",
            ),
            (
                "apiVersions",
                "Argo CD passes it to the Helm charts kustomize inflates (helmCharts)",
            ),
        ] {
            if k8z.get(key).is_some_and(|v| !v.is_null()) {
                said.ignored(file, line(key), &format!("kustomize.{key}"), effect);
            }
        }
        if k8z.get("commonAnnotationsEnvsubst").and_then(Json::as_bool) == Some(true) {
            said.ignored(file, line("commonAnnotationsEnvsubst"), "kustomize.commonAnnotationsEnvsubst", "Argo CD replaces ${ARGOCD_APP_...} variables in the common annotations, and meshward applied them with the variables left in");
        }
        let without_selector =
            k8z.get("labelWithoutSelector").and_then(Json::as_bool) == Some(true);
        KustomizeOptions {
            namespace: s(k8z, "/namespace").filter(|n| !n.is_empty()),
            name_prefix: s(k8z, "/namePrefix").filter(|n| !n.is_empty()),
            name_suffix: s(k8z, "/nameSuffix").filter(|n| !n.is_empty()),
            common_labels: string_map(k8z.get("commonLabels")),
            labels_include_selectors: !without_selector,
            labels_include_templates: without_selector
                && k8z.get("labelIncludeTemplates").and_then(Json::as_bool) == Some(true),
            common_annotations: string_map(k8z.get("commonAnnotations")),
            images: strings(k8z.get("images")),
            image_overrides: Vec::new(),
            patches,
            components,
            replicas,
        }
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
    fn set_values_escape_commas_as_argo_does() {
        assert_eq!(clean_set_value("a,b"), r"a\,b");
        assert_eq!(clean_set_value(r"a\,b"), r"a\,b");
        assert_eq!(clean_set_value("{a,b}"), "{a,b}");
    }

    #[test]
    fn paths_join() {
        assert_eq!(join("overlays/prod", "../../base").as_deref(), Some("base"));
        assert_eq!(join("a", "../../x"), None);
    }
}
