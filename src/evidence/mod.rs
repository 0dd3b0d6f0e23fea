//! Telemetry evidence for the mTLS rules: plaintext and total server-side traffic,
//! per namespace and per workload scope, over a window. From a file (`--evidence`)
//! or gathered from Prometheus ([`prometheus`]); the shape is what policies see
//! (docs/policy-input.md).

pub mod prometheus;
pub mod promql;
pub mod scopes;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub use prometheus::{PrometheusAuth, PrometheusSource};
pub use scopes::{introduced_strict, StrictScope, Subject};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// When the numbers were taken (RFC 3339).
    #[serde(default)]
    pub taken_at: Option<String>,
    /// The window they cover, e.g. `7d`.
    #[serde(default)]
    pub window: Option<String>,
    /// Where they came from, for the reader of the report.
    #[serde(default)]
    pub source: Option<String>,
    /// Per namespace: all server-side traffic into its workloads.
    #[serde(default)]
    pub namespaces: BTreeMap<String, TrafficEvidence>,
    /// Per workload-level scope key (`workload:<ns>:<labels>`, as in the model): the
    /// traffic into the workloads the selector selects. A namespace's evidence
    /// covers its workload scopes too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scopes: BTreeMap<String, TrafficEvidence>,
}

/// Traffic into one subject (a namespace, or the workloads of one scope).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficEvidence {
    #[serde(default)]
    pub requests_total: u64,
    #[serde(default)]
    pub requests_plaintext: u64,
    #[serde(default)]
    pub tcp_connections_total: u64,
    #[serde(default)]
    pub tcp_connections_plaintext: u64,
    /// Bytes received without mTLS: a plaintext connection opened before the window
    /// and still open shows here only.
    #[serde(default)]
    pub tcp_bytes_plaintext: u64,
    /// The query that produced the numbers, so a reviewer can rerun it.
    #[serde(default)]
    pub query: Option<String>,
    /// One query per number (`requests_plaintext` → PromQL), when gathered by meshward.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub queries: BTreeMap<String, String>,
    /// The workloads (`destination_workload`) a scope's numbers are about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<String>,
    /// When these numbers were taken, if not with the rest (a cached answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<String>,
    /// Why there are no numbers (the source failed).
    #[serde(default)]
    pub error: Option<String>,
}

/// The name the file format has always used.
pub type NamespaceEvidence = TrafficEvidence;

impl Evidence {
    pub fn from_file(path: &Path) -> Result<Evidence> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read evidence file {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("evidence file {} is not valid", path.display()))
    }

    /// Every subject with its key: `namespace:<ns>` or the scope key.
    pub fn subjects(&self) -> impl Iterator<Item = (String, &TrafficEvidence)> {
        self.namespaces
            .iter()
            .map(|(ns, e)| (format!("namespace:{ns}"), e))
            .chain(self.scopes.iter().map(|(k, e)| (k.clone(), e)))
    }
}

impl TrafficEvidence {
    pub fn plaintext(&self) -> u64 {
        self.requests_plaintext
            .saturating_add(self.tcp_connections_plaintext)
            .saturating_add(self.tcp_bytes_plaintext)
    }
    pub fn total(&self) -> u64 {
        self.requests_total
            .saturating_add(self.tcp_connections_total)
    }
}
