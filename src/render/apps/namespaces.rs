//! Labels app objects set on the namespaces they create.

use super::appset::{self, RepoLookup};
use super::*;
use crate::manifest::Resource;
use crate::pointer::At;
use serde_json::Value as Json;
use std::collections::BTreeMap;

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
pub(crate) fn app_namespace_labels(
    resources: &[&Resource],
    repo_urls: &crate::render::roots::SameRepo,
    repo: &dyn RepoLookup,
) -> Vec<AppNamespaceLabels> {
    let same_repo = |url: &str| repo_urls.names(url);
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
            "ApplicationSet" if r.body.at("/spec/templatePatch").is_none() => {
                let Some(template) = r.body.at("/spec/template") else {
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
        .at("/spec/syncPolicy/syncOptions")
        .and_then(Json::as_array)
        .is_some_and(|o| o.iter().any(|o| o.as_str() == Some("CreateNamespace=true")));
    let namespace = s(app, "/spec/destination/namespace")?;
    let labels = app
        .at("/spec/syncPolicy/managedNamespaceMetadata/labels")?
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
