//! Render roots: what GitOps controllers render, found in the tree (kustomization
//! folders, Helm charts), in app objects (Argo CD Application/ApplicationSet, Flux
//! Kustomization/HelmRelease) and in `.meshward.yaml`.

use serde_json::Value as Json;
use std::collections::BTreeMap;

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

/// The URLs under which app objects name this repository (a checkout's remotes, the
/// repository a webhook names). Asked for on the first question only: asking git
/// costs a process, and only app objects (Argo CD, Flux) ask.
pub struct RepoUrls {
    urls: std::sync::OnceLock<Vec<String>>,
    ask: Option<Box<dyn Fn() -> Vec<String> + Send + Sync>>,
}

impl RepoUrls {
    pub fn known(urls: Vec<String>) -> RepoUrls {
        RepoUrls {
            urls: std::sync::OnceLock::from(urls),
            ask: None,
        }
    }

    /// The URLs `ask` gives, asked once, when first needed.
    pub fn asked(ask: impl Fn() -> Vec<String> + Send + Sync + 'static) -> RepoUrls {
        RepoUrls {
            urls: std::sync::OnceLock::new(),
            ask: Some(Box::new(ask)),
        }
    }

    pub(crate) fn get(&self) -> &[String] {
        self.urls
            .get_or_init(|| self.ask.as_ref().map(|ask| ask()).unwrap_or_default())
    }
}

impl Default for RepoUrls {
    fn default() -> Self {
        RepoUrls::known(Vec::new())
    }
}

/// Whether a source URL names this repository: one of [`RepoUrls`] or of the
/// config's `render.repo_urls`, normalized once, on the first question.
pub(crate) struct SameRepo<'a> {
    urls: &'a RepoUrls,
    configured: &'a [String],
    normalized: std::sync::OnceLock<std::collections::BTreeSet<String>>,
}

impl<'a> SameRepo<'a> {
    pub(crate) fn new(urls: &'a RepoUrls, configured: &'a [String]) -> SameRepo<'a> {
        SameRepo {
            urls,
            configured,
            normalized: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn names(&self, url: &str) -> bool {
        self.normalized
            .get_or_init(|| {
                self.urls
                    .get()
                    .iter()
                    .chain(self.configured)
                    .map(|u| normalize_repo_url(u))
                    .filter(|u| !u.is_empty())
                    .collect()
            })
            .contains(&normalize_repo_url(url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The URLs are asked for when an app object first asks, once, and only then.
    #[test]
    fn repository_urls_are_asked_for_once_and_only_when_needed() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let urls = RepoUrls::asked(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            vec!["git@github.com:acme/gitops.git".to_string()]
        });
        let configured = ["https://gitlab.com/acme/mirror".to_string()];
        let same = SameRepo::new(&urls, &configured);
        assert_eq!(asked.load(Ordering::SeqCst), 0);
        assert!(same.names("https://github.com/acme/gitops"));
        assert!(same.names("https://gitlab.com/acme/mirror.git"));
        assert!(!same.names("https://github.com/acme/other"));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert!(SameRepo::new(&urls, &[]).names("ssh://git@github.com/acme/gitops"));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

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
