//! Reports: pure functions from a [`Report`] to text, JSON, SARIF and markdown.

pub mod markdown;
pub mod sarif;
pub mod text;

use crate::finding::{FailOn, Finding};
use crate::model::coverage::Coverage;
use crate::model::Model;
pub use crate::render::RootStatus;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Findings an exception in the config file covers.
    pub suppressed: Vec<Suppressed>,
    pub coverage: CoverageReport,
    /// What the change does to the mesh (identities, VM bootstrap, selections, proxy
    /// cost, new hops); null without a base revision. Absent in reports stored before
    /// it existed.
    #[serde(default)]
    pub changes: Option<crate::changes::Changes>,
    pub summary: Summary,
    /// The telemetry evidence the mTLS rules were judged on (from `--evidence`, or
    /// gathered from Prometheus for the STRICT scopes the change introduces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::evidence::Evidence>,
    /// The mesh models, for the sections that explain a change. Not part of the JSON.
    #[serde(skip)]
    pub models: Models,
    /// Where the checked folder sits in its git repository (`apps/` for `meshward
    /// check apps`; empty at the root or outside git). Finding paths are relative to
    /// the checked folder; SARIF gives them from the repository root, as code
    /// scanning reads them.
    #[serde(skip)]
    pub repo_prefix: String,
    /// What the repository's config asks of publishing (read with the rest of it,
    /// from base). Not part of the JSON.
    #[serde(skip)]
    pub publish: crate::config::PublishConfig,
}

#[derive(Debug, Clone, Default)]
pub struct Models {
    pub head: Model,
    pub base: Option<Model>,
    pub head_resources: Vec<String>,
    /// Ids of head resources the change adds or edits (empty without a base).
    pub changed: std::collections::BTreeSet<String>,
    /// In a repository that deploys to several clusters, each cluster's models (the
    /// fields above are then empty).
    pub clusters: Vec<(String, Models)>,
}

impl Models {
    /// Each mesh's models, with its cluster where there are several.
    pub fn meshes(&self) -> Vec<(Option<&str>, &Models)> {
        if self.clusters.is_empty() {
            vec![(None, self)]
        } else {
            self.clusters
                .iter()
                .map(|(c, m)| (Some(c.as_str()), m))
                .collect()
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Suppressed {
    pub finding: Finding,
    pub reason: String,
    pub expires: NaiveDate,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoverageReport {
    pub base: Option<Coverage>,
    pub head: Coverage,
    /// In a repository that deploys to several clusters, each cluster's coverage;
    /// `base` and `head` then add them up (namespaces named `cluster/namespace`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterCoverage>,
}

/// One cluster's coverage.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterCoverage {
    pub cluster: String,
    pub base: Option<Coverage>,
    pub head: Coverage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RevisionSummary {
    pub revision: String,
    pub files: usize,
    pub resources: usize,
    /// YAML documents that are not objects applied to the cluster: no apiVersion or
    /// kind, tools' own config (kustomize, kubeconfig, skaffold…), IstioOperator.
    pub skipped_documents: usize,
    /// YAML files not read as manifests: dot-files, files under dot-folders, CI
    /// configs (unless `paths.include` names them).
    #[serde(default)]
    pub files_not_read: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub verdict: Verdict,
    pub fail_on: FailOn,
    /// Findings that fail the run.
    pub blocking: usize,
    pub introduced: usize,
    pub existing: usize,
    pub resolved: usize,
    /// Of the findings not resolved, by severity.
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    pub suppressed: usize,
    pub policies: usize,
    pub head: RevisionSummary,
    pub base: Option<RevisionSummary>,
    /// What the reader should know about how the check ran.
    pub notes: Vec<String>,
    /// Every render root of the checked revision and what became of it. Absent in
    /// reports stored before it existed.
    #[serde(default)]
    pub roots: Vec<RootOutcome>,
    /// Set when the checked tree holds no Kubernetes objects and no render roots in
    /// either revision: why nothing was checked (the CLI exits 2, the check is neutral).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nothing_to_check: Option<String>,
    /// The clusters judged one by one, in a repository that deploys to several;
    /// empty for one cluster (or none named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
}

/// A render root (kustomize, Helm, app object) and what became of it in this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootOutcome {
    /// As findings name it: `kustomize root apps/podinfo (Application argocd/podinfo)`.
    pub root: String,
    /// The file that defines it (kustomization, Chart.yaml, app object) and its line.
    pub file: String,
    pub line: u32,
    pub outcome: RootStatus,
    /// The cluster what it deploys lands on, in a repository with several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Why it was rendered, or what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why a render was needed (`reads a file this change touches`, …), whether or
    /// not it succeeded; the counts of the render note come from it.
    #[serde(skip)]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Sarif,
    Markdown,
}

/// Text from the repository (file names, messages quoting its values) as it may be
/// shown: control characters as `\u{1b}` escapes, so a file name cannot move the
/// cursor, recolour a terminal or forge a line of the report.
pub fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(
        s.chars()
            .map(|c| match c {
                c if c.is_control() => c.escape_unicode().to_string(),
                c => c.to_string(),
            })
            .collect(),
    )
}

/// Renders a report in one of the CLI's formats.
pub fn render(report: &Report, format: Format, color: bool) -> String {
    match format {
        Format::Text => text::render(report, color),
        Format::Json => json(report),
        Format::Sarif => {
            serde_json::to_string_pretty(&sarif::render(report)).unwrap_or_default() + "\n"
        }
        Format::Markdown => markdown::render(report, &markdown::Links::None),
    }
}

pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_default() + "\n"
}

/// Rule documentation: a one-line summary and help text, shared by SARIF and docs.
pub mod rules;
