//! The repository's config file, `.meshward.yaml`. For a PR it is read from the base
//! revision, so a change cannot waive its own findings.

use crate::finding::{FailOn, Severity};
use crate::manifest::yaml::{self, Limits, Node};
use chrono::NaiveDate;
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
    pub render: crate::render::RenderConfig,
    /// What the service posts on pull requests.
    #[serde(default)]
    pub publish: PublishConfig,
    /// Line of each exception in the file, for findings about them.
    #[serde(skip)]
    pub exception_lines: Vec<u32>,
    /// Line of each `rules:` entry.
    #[serde(skip)]
    pub rule_lines: BTreeMap<String, u32>,
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

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MeshConfig {
    #[serde(default = "default_root_namespace")]
    pub root_namespace: String,
    #[serde(default = "default_trust_domain")]
    pub trust_domain: String,
    /// CPU request of one sidecar proxy when the pod sets no
    /// `sidecar.istio.io/proxyCPU` annotation (Istio's default: 100m).
    #[serde(default = "default_proxy_cpu")]
    pub proxy_cpu: String,
    /// Memory request of one proxy without `sidecar.istio.io/proxyMemory` (128Mi).
    #[serde(default = "default_proxy_memory")]
    pub proxy_memory: String,
}

fn default_root_namespace() -> String {
    "istio-system".into()
}
fn default_trust_domain() -> String {
    "cluster.local".into()
}
fn default_proxy_cpu() -> String {
    "100m".into()
}
fn default_proxy_memory() -> String {
    "128Mi".into()
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            root_namespace: default_root_namespace(),
            trust_domain: default_trust_domain(),
            proxy_cpu: default_proxy_cpu(),
            proxy_memory: default_proxy_memory(),
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
        // The proxy defaults are quantities; a typo here would skew every cost figure.
        type Parse = fn(&str) -> Result<u64, String>;
        let quantities: [(&str, &String, Parse); 2] = [
            (
                "proxy_cpu",
                &config.mesh.proxy_cpu,
                crate::model::quantity::cpu_millicores,
            ),
            (
                "proxy_memory",
                &config.mesh.proxy_memory,
                crate::model::quantity::memory_bytes,
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
        for rule in config.rules.keys() {
            config
                .rule_lines
                .insert(rule.clone(), line_of(serde_json::json!(["rules", rule])));
        }
        Ok(config)
    }

    /// Does `paths` select this file?
    pub fn path_selected(&self, path: &str) -> bool {
        let matches = |globs: &[String]| {
            globs.iter().any(|g| {
                globset::GlobBuilder::new(g)
                    .literal_separator(true)
                    .build()
                    .map(|g| g.compile_matcher().is_match(path))
                    .unwrap_or(false)
            })
        };
        (self.paths.include.is_empty() || matches(&self.paths.include))
            && !matches(&self.paths.exclude)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_names_key_and_line() {
        let e =
            RepoConfig::parse("fail_on: error\nmesh:\n  root_namespace: x\n  trust_domian: y\n")
                .unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("trust_domian"), "{e}");
    }

    #[test]
    fn exceptions_with_lines() {
        let c = RepoConfig::parse(
            "exceptions:\n  - rule: serviceentry/*\n    resource: ServiceEntry/vm/*\n    reason: INFRA-1\n    expires: 2027-03-31\n",
        )
        .unwrap();
        assert_eq!(c.exceptions.len(), 1);
        assert_eq!(c.exception_lines, vec![2]);
    }

    #[test]
    fn bad_rule_setting_is_an_error() {
        let e = RepoConfig::parse("rules:\n  selector/matches-nothing: loud\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn proxy_defaults_are_quantities() {
        let c = RepoConfig::parse("mesh:\n  proxy_cpu: 250m\n").unwrap();
        assert_eq!(c.mesh.proxy_cpu, "250m");
        assert_eq!(c.mesh.proxy_memory, "128Mi");
        let e = RepoConfig::parse("mesh:\n  trust_domain: x\n  proxy_memory: 128MB\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("mesh.proxy_memory"), "{e}");
    }

    #[test]
    fn publish_switch_defaults_on_and_rejects_unknown_keys() {
        assert!(RepoConfig::default().publish.inline_comments);
        let c = RepoConfig::parse("publish: { inline_comments: false }\n").unwrap();
        assert!(!c.publish.inline_comments);
        let e = RepoConfig::parse("publish:\n  inline_comment: false\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("inline_comment"), "{e}");
    }

    #[test]
    fn path_globs() {
        let c = RepoConfig::parse(
            "paths:\n  include: [\"apps/**\"]\n  exclude: [\"**/testdata/**\"]\n",
        )
        .unwrap();
        assert!(c.path_selected("apps/a/b.yaml"));
        assert!(!c.path_selected("apps/testdata/b.yaml"));
        assert!(!c.path_selected("other/b.yaml"));
    }
}
