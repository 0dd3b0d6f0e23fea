//! The repository's config file, `.meshward.yaml`. For a PR it is read from the base
//! revision, so a change cannot waive its own findings.

mod evidence;
mod mesh;
mod paths;
#[cfg(test)]
mod tests;

use crate::finding::{FailOn, Severity};
use crate::yaml::{self, Limits, Node};
use chrono::NaiveDate;
pub use evidence::{
    check_url, valid_label_name, EvidenceConfig, PrometheusConfig, MAX_WINDOW, MIN_WINDOW,
    RESERVED_LABELS,
};
pub use mesh::{MeshConfig, NamespaceDecl};
use paths::any_glob_matches;
pub use paths::{names_unread, read_by_default};
use serde::Deserialize;
use std::collections::BTreeMap;

pub const CONFIG_FILE: &str = ".meshward.yaml";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoConfig {
    /// Severity at or above which introduced findings fail the check.
    #[serde(default)]
    pub fail_on: Option<FailOn>,
    #[serde(default)]
    pub paths: PathsConfig,
    #[serde(default)]
    pub mesh: MeshConfig,
    /// Per-rule severity, or `off`.
    #[serde(default)]
    pub rules: BTreeMap<String, RuleSetting>,
    #[serde(default)]
    pub exceptions: Vec<Exception>,
    /// Render roots to add, override or exclude, and render limits.
    #[serde(default)]
    pub render: RenderConfig,
    /// Limits on evaluating policies, below the server's.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Where telemetry evidence for the mTLS rules comes from.
    #[serde(default)]
    pub evidence: EvidenceConfig,
    /// What the service posts on pull requests.
    #[serde(default)]
    pub publish: PublishConfig,
    /// The clusters the repository deploys to, where its layout does not say (or
    /// says otherwise): each judged on its own.
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    /// Files or folders of the repository holding CustomResourceDefinitions to check
    /// objects against, beside the CRDs among the checked manifests.
    #[serde(default)]
    pub schemas: Vec<String>,
    /// Line of each exception in the file, for findings about them.
    #[serde(skip)]
    pub exception_lines: Vec<u32>,
    /// Line of each `rules:` entry.
    #[serde(skip)]
    pub rule_lines: BTreeMap<String, u32>,
    /// Lines of the limits (`render.timeout_seconds`, `policy.max_memory_mib`, ...),
    /// to point at when the server's ceiling wins over them.
    #[serde(skip)]
    pub limit_lines: BTreeMap<String, u32>,
    /// The keys of `mesh:` the file sets: the others may come from the repository's
    /// IstioOperator files (see `manifest::install`).
    #[serde(skip)]
    pub mesh_keys: Vec<String>,
}

/// `.meshward.yaml` `render:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderConfig {
    /// Roots to add, or to override (same path) with release, namespace and values.
    #[serde(default)]
    pub roots: Vec<ConfigRoot>,
    /// Globs of root folders not to render (each reported as not checked).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// URLs under which app objects name this repository.
    #[serde(default)]
    pub repo_urls: Vec<String>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub max_output_bytes: Option<usize>,
}

/// `.meshward.yaml` `clusters:` entry: a cluster, the folders whose objects land on
/// it and the API server URLs Argo CD Applications name it by.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub name: String,
    /// Folders (relative to the repository) whose objects and app objects land on it.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Argo CD `destination.server` URLs and `destination.name`s that mean it.
    #[serde(default)]
    pub servers: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigRoot {
    pub path: String,
    #[serde(default)]
    pub release: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    /// Values files, relative to the root folder.
    #[serde(default)]
    pub values: Vec<String>,
}

/// `policy:` of the config file: limits a repository may lower, never raise.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Per package and revision.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Of the process that evaluates the repository's own policies.
    #[serde(default)]
    pub max_memory_mib: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathsConfig {
    /// Globs of files to check (relative to the checked root); empty means all.
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// `publish:` in `.meshward.yaml`: how `meshward serve` reports on a pull request.
/// The check run (or commit status) and the summary comment are always posted.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PublishConfig {
    /// Inline review comments on the changed lines that introduce a finding.
    #[serde(default = "yes")]
    pub inline_comments: bool,
}

fn yes() -> bool {
    true
}

impl Default for PublishConfig {
    fn default() -> Self {
        PublishConfig {
            inline_comments: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleSetting {
    Off,
    Info,
    Warning,
    Error,
}

impl RuleSetting {
    pub fn severity(self) -> Option<Severity> {
        match self {
            RuleSetting::Off => None,
            RuleSetting::Info => Some(Severity::Info),
            RuleSetting::Warning => Some(Severity::Warning),
            RuleSetting::Error => Some(Severity::Error),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exception {
    /// Rule id; `*` globs allowed (`serviceentry/*`).
    pub rule: String,
    /// `Kind/namespace/name` (or `Kind/name`); globs allowed.
    pub resource: String,
    pub reason: String,
    /// Last day the exception applies.
    pub expires: NaiveDate,
}

#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub line: u32,
    pub message: String,
}

impl RepoConfig {
    /// Parses `.meshward.yaml`. Unknown keys, bad values and malformed globs are
    /// errors naming the line.
    pub fn parse(text: &str) -> Result<RepoConfig, ConfigError> {
        let err = |line: u32, message: String| ConfigError {
            file: CONFIG_FILE.into(),
            line,
            message,
        };
        if text.trim().is_empty() {
            return Ok(RepoConfig::default());
        }
        let mut config: RepoConfig = yaml_serde::from_str(text).map_err(|e| {
            let line = e.location().map(|l| l.line() as u32).unwrap_or(1);
            err(line, e.to_string())
        })?;
        let docs =
            yaml::parse_documents(text, &Limits::default()).map_err(|e| err(e.line, e.message))?;
        let root: Option<Node> = match docs.into_iter().next().map(|d| d.result) {
            Some(Ok(node)) => node,
            Some(Err(e)) => return Err(err(e.line, e.message)),
            None => None,
        };
        let line_of = |path: serde_json::Value| -> u32 {
            let path: Vec<serde_json::Value> = serde_json::from_value(path).unwrap_or_default();
            root.as_ref().map(|r| r.line_of(&path)).unwrap_or(1)
        };
        for (i, ex) in config.exceptions.iter().enumerate() {
            let line = line_of(serde_json::json!(["exceptions", i]));
            if ex.reason.trim().is_empty() {
                return Err(err(
                    line,
                    "exception has an empty `reason`: say why it is safe".into(),
                ));
            }
            for (field, pattern) in [("rule", &ex.rule), ("resource", &ex.resource)] {
                globset::Glob::new(pattern).map_err(|e| {
                    err(
                        line,
                        format!("exception `{field}` is not a valid glob: {e}"),
                    )
                })?;
            }
            config.exception_lines.push(line);
        }
        for pattern in config.paths.include.iter().chain(&config.paths.exclude) {
            globset::Glob::new(pattern).map_err(|e| {
                err(
                    line_of(serde_json::json!(["paths"])),
                    format!("`paths` glob {pattern:?} is invalid: {e}"),
                )
            })?;
        }
        // An exclude that matches nothing would render (and block on) what the
        // author meant to leave out; one that cannot be read is said, not ignored.
        for (i, pattern) in config.render.exclude.iter().enumerate() {
            globset::Glob::new(pattern).map_err(|e| {
                err(
                    line_of(serde_json::json!(["render", "exclude", i])),
                    format!("`render.exclude` glob {pattern:?} is invalid: {e}"),
                )
            })?;
        }
        for (i, c) in config.clusters.iter().enumerate() {
            let name = c.name.trim();
            if name.is_empty() || name.len() > 100 || name.contains(['/', ':']) {
                return Err(err(
                    line_of(serde_json::json!(["clusters", i, "name"])),
                    format!(
                        "`clusters[{i}].name` {:?} must be 1 to 100 characters without `/` or `:`",
                        c.name
                    ),
                ));
            }
        }
        for (i, path) in config.schemas.iter().enumerate() {
            let p = path.trim_end_matches('/');
            if p.is_empty() || p.starts_with('/') || p.split('/').any(|part| part == "..") {
                return Err(err(
                    line_of(serde_json::json!(["schemas", i])),
                    format!(
                        "`schemas[{i}]` {path:?} must be a file or folder inside the repository (relative, without `..`)"
                    ),
                ));
            }
        }
        // The proxy defaults are quantities; a typo here would skew every cost figure.
        type Parse = fn(&str) -> Result<u64, String>;
        let quantities: [(&str, &String, Parse); 2] = [
            (
                "proxy_cpu",
                &config.mesh.proxy_cpu,
                crate::units::quantity::cpu_millicores,
            ),
            (
                "proxy_memory",
                &config.mesh.proxy_memory,
                crate::units::quantity::memory_bytes,
            ),
        ];
        for (key, value, parse) in quantities {
            if let Err(problem) = parse(value) {
                return Err(err(
                    line_of(serde_json::json!(["mesh", key])),
                    format!("`mesh.{key}`: {problem}"),
                ));
            }
        }
        config.mesh.check_namespaces().map_err(|(key, message)| {
            let mut path = vec!["mesh".to_string(), "namespaces".to_string()];
            path.extend(key);
            err(line_of(serde_json::json!(path)), message)
        })?;
        if let Some(p) = &config.evidence.prometheus {
            p.validate().map_err(|(key, message)| {
                let mut path = vec!["evidence".to_string(), "prometheus".to_string()];
                path.extend(key);
                err(line_of(serde_json::json!(path)), message)
            })?;
        }
        if let Some(crate::yaml::Value::Map(entries)) =
            root.as_ref().and_then(|r| r.get("mesh")).map(|m| &m.value)
        {
            config.mesh_keys = entries.iter().map(|(k, _)| k.clone()).collect();
        }
        for rule in config.rules.keys() {
            config
                .rule_lines
                .insert(rule.clone(), line_of(serde_json::json!(["rules", rule])));
        }
        for (section, key) in [
            ("render", "timeout_seconds"),
            ("render", "max_output_bytes"),
            ("policy", "timeout_seconds"),
            ("policy", "max_memory_mib"),
        ] {
            config.limit_lines.insert(
                format!("{section}.{key}"),
                line_of(serde_json::json!([section, key])),
            );
        }
        Ok(config)
    }

    /// Does `paths` select this file?
    pub fn path_selected(&self, path: &str) -> bool {
        (self.paths.include.is_empty() || any_glob_matches(&self.paths.include, path))
            && !any_glob_matches(&self.paths.exclude, path)
    }

    /// Is this file read as a manifest? As [`Self::path_selected`] says for most
    /// files; dot-files, files under dot-folders and CI configs only when a
    /// `paths.include` glob that spells their name out matches them (see
    /// [`read_by_default`]).
    pub fn manifest_selected(&self, path: &str) -> bool {
        if read_by_default(path) {
            return self.path_selected(path);
        }
        let naming: Vec<String> = self
            .paths
            .include
            .iter()
            .filter(|g| names_unread(g))
            .cloned()
            .collect();
        any_glob_matches(&naming, path) && !any_glob_matches(&self.paths.exclude, path)
    }
}
