//! Telemetry evidence for the mTLS rules: plaintext and total traffic per namespace
//! over a window. Read from a file (`--evidence`); the shape is what policies see.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

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
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespaceEvidence>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceEvidence {
    #[serde(default)]
    pub requests_total: u64,
    #[serde(default)]
    pub requests_plaintext: u64,
    #[serde(default)]
    pub tcp_connections_total: u64,
    #[serde(default)]
    pub tcp_connections_plaintext: u64,
    /// The query that produced the numbers, so a reviewer can rerun it.
    #[serde(default)]
    pub query: Option<String>,
    /// Why there are no numbers (the source failed).
    #[serde(default)]
    pub error: Option<String>,
}

impl Evidence {
    pub fn from_file(path: &Path) -> Result<Evidence> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read evidence file {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("evidence file {} is not valid", path.display()))
    }
}
