//! Findings: what meshward reports, and how a finding is told apart between revisions.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a finding stands between base and head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Only in head: the change brings it.
    Introduced,
    /// In both (or there is no base).
    Existing,
    /// Only in base: the change fixes it.
    Resolved,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Introduced => "introduced",
            Status::Existing => "existing",
            Status::Resolved => "resolved",
        }
    }
}

/// The level at or above which introduced findings fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    Error,
    Warning,
    Never,
}

impl FailOn {
    pub fn blocks(self, severity: Severity) -> bool {
        match self {
            FailOn::Error => severity >= Severity::Error,
            FailOn::Warning => severity >= Severity::Warning,
            FailOn::Never => false,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            FailOn::Error => "error",
            FailOn::Warning => "warning",
            FailOn::Never => "never",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceRef {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ResourceRef {
    /// `Kind/namespace/name`, or `Kind/name` for cluster-scoped objects: the form
    /// exceptions and policies use.
    pub fn id(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/{}/{}", self.kind, ns, self.name),
            None => format!("{}/{}", self.kind, self.name),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub status: Status,
    pub resource: Option<ResourceRef>,
    pub file: String,
    pub line: u32,
    /// The field the finding is about, as a path into the resource.
    pub path: Vec<serde_json::Value>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub istio_code: Option<String>,
    /// The objects a finding about many names (the workloads a STRICT scope leaves
    /// without a proxy): a head finding naming one that base's did not is
    /// introduced, though it is about the same resource and field.
    #[serde(skip)]
    pub subjects: Vec<String>,
    /// What it reports kept the change from being checked (a policy that did not
    /// run, a root the change touches that did not render): it blocks whatever its
    /// status.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
    /// Which of several findings about one subject this is, matched from base to
    /// head by it: the render root a failure on a shared file (a base's remote URL)
    /// is about, the file of one copy of a duplicated object.
    #[serde(skip)]
    pub occurrence: Option<String>,
    /// The cluster the finding is about, in a repository that deploys to several
    /// (see `render::clusters`); None where it names one cluster or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

impl Finding {
    /// ` (IST0101)` where istioctl analyze has the same check, else nothing.
    pub fn istio_code_suffix(&self) -> String {
        self.istio_code
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default()
    }

    /// What makes a finding "the same" in base and head: not its line (lines move)
    /// nor its message (counts in it change), but what it is about.
    pub fn identity(&self) -> (String, String, String) {
        let subject = match &self.resource {
            Some(r) => r.id(),
            None => self.file.clone(),
        };
        let subject = match &self.occurrence {
            Some(which) => format!("{subject} ({which})"),
            None => subject,
        };
        let subject = match &self.cluster {
            Some(cluster) => format!("{cluster}: {subject}"),
            None => subject,
        };
        let path = serde_json::to_string(&self.path).unwrap_or_default();
        (self.rule.clone(), subject, path)
    }
}

/// Sort order for every output: by file, line, then rule, so reports are stable.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        (
            &a.file,
            a.line,
            &a.rule,
            a.resource.as_ref().map(|r| r.id()),
        )
            .cmp(&(
                &b.file,
                b.line,
                &b.rule,
                b.resource.as_ref().map(|r| r.id()),
            ))
    });
}
