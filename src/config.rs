//! The repository's config file, `.meshward.yaml`. For a PR it is read from the base
//! revision, so a change cannot waive its own findings.

use crate::finding::{FailOn, Severity};
use crate::yaml::{self, Limits, Node};
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
    /// Labels of namespaces the repository does not declare (created and labelled
    /// elsewhere), so that whether they are injected is known rather than unknown.
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespaceDecl>,
}

/// `mesh.namespaces.<name>`: what a namespace managed outside the repository looks like.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamespaceDecl {
    /// Its labels, all of them: `{}` says it has none (so it is not injected).
    pub labels: BTreeMap<String, String>,
}

/// Bounds of `mesh.namespaces`: it describes a cluster, not a dump of one.
const MAX_NAMESPACES: usize = 10_000;
const MAX_NAMESPACE_LABELS: usize = 100;

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
            namespaces: BTreeMap::new(),
        }
    }
}

impl MeshConfig {
    /// Checks `mesh.namespaces`: names and labels as Kubernetes accepts them, bounded.
    /// The error names the offending key (its path under `mesh.namespaces`).
    fn check_namespaces(&self) -> Result<(), (Vec<String>, String)> {
        if self.namespaces.len() > MAX_NAMESPACES {
            return Err((
                Vec::new(),
                format!("`mesh.namespaces` lists {} namespaces, more than the limit of {MAX_NAMESPACES}", self.namespaces.len()),
            ));
        }
        for (name, decl) in &self.namespaces {
            if !dns_label(name) {
                return Err((
                    vec![name.clone()],
                    format!("`mesh.namespaces` key {name:?} is not a namespace name (lowercase letters, digits and `-`, at most 63, starting and ending with a letter or digit)"),
                ));
            }
            if decl.labels.len() > MAX_NAMESPACE_LABELS {
                return Err((
                    vec![name.clone(), "labels".into()],
                    format!("`mesh.namespaces.{name}.labels` has more than {MAX_NAMESPACE_LABELS} labels"),
                ));
            }
            for (key, value) in &decl.labels {
                let problem = label_key_problem(key).or_else(|| {
                    (!label_value(value)).then(|| format!("value {value:?} is not a label value (at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)"))
                });
                if let Some(problem) = problem {
                    return Err((
                        vec![name.clone(), "labels".into(), key.clone()],
                        format!("`mesh.namespaces.{name}.labels` {key:?}: {problem}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A DNS-1123 label: what a namespace name must be.
fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9-_.]` with alphanumeric ends.
fn label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// Why a label key is not one Kubernetes accepts (`[prefix/]name`), if it is not.
fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if name.is_empty() || !label_value(name) {
        return Some("the key's name is not a label name (at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)".into());
    }
    if let Some(p) = prefix {
        let ok = !p.is_empty() && p.len() <= 253 && p.split('.').all(dns_label);
        if !ok {
            return Some("the key's prefix is not a DNS subdomain".into());
        }
    }
    None
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceConfig {
    #[serde(default)]
    pub prometheus: Option<PrometheusConfig>,
}

/// `evidence.prometheus`: which Prometheus holds the metrics of the cluster this
/// repository deploys to. Credentials never live here: the server holds them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PrometheusConfig {
    /// The server's base URL. The meshward service queries it only if its operator
    /// allows it (it is the server default, or in MESHWARD_PROMETHEUS_ALLOWED_URLS).
    #[serde(default)]
    pub url: Option<String>,
    /// How far back plaintext must be absent (a Prometheus duration; default 7d).
    #[serde(default)]
    pub window: Option<String>,
    /// Extra label matchers, e.g. `cluster: prod-eu1`.
    #[serde(default)]
    pub matchers: BTreeMap<String, String>,
    /// For servers that do not report their retention (Thanos, Mimir and other
    /// fronts): how far back you vouch the data reaches.
    #[serde(default)]
    pub retention: Option<String>,
}

/// Bounds of `evidence.prometheus.window`.
pub const MIN_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);
pub const MAX_WINDOW: std::time::Duration = std::time::Duration::from_secs(400 * 86400);

impl PrometheusConfig {
    /// Checks the values; the error names the offending key.
    pub fn validate(&self) -> Result<(), (Vec<String>, String)> {
        self.check().map_err(|(key, sub, m)| {
            let mut path = vec![key.to_string()];
            path.extend(sub);
            (path, m)
        })
    }

    fn check(&self) -> Result<(), (&'static str, Option<String>, String)> {
        use crate::units::duration;
        if let Some(url) = &self.url {
            check_url(url).map_err(|e| ("url", None, e))?;
        }
        if let Some(w) = &self.window {
            let d = duration::parse(w).map_err(|e| ("window", None, format!("`window`: {e}")))?;
            if d < MIN_WINDOW || d > MAX_WINDOW {
                return Err(("window", None, format!("`window` {w} is outside 1m..400d")));
            }
        }
        if let Some(r) = &self.retention {
            duration::parse(r).map_err(|e| ("retention", None, format!("`retention`: {e}")))?;
        }
        if self.matchers.len() > 20 {
            return Err((
                "matchers",
                None,
                "`matchers` has more than 20 entries".into(),
            ));
        }
        for (k, v) in &self.matchers {
            if !valid_label_name(k) {
                return Err((
                    "matchers",
                    Some(k.clone()),
                    format!("`matchers` key {k:?} is not a Prometheus label name"),
                ));
            }
            if RESERVED_LABELS.contains(&k.as_str()) {
                return Err((
                    "matchers",
                    Some(k.clone()),
                    format!("`matchers` may not set {k}: meshward sets it itself"),
                ));
            }
            if v.len() > 256 {
                return Err((
                    "matchers",
                    Some(k.clone()),
                    format!("`matchers` value of {k} is over 256 bytes"),
                ));
            }
        }
        Ok(())
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

fn any_glob_matches(globs: &[String], path: &str) -> bool {
    globs.iter().any(|g| {
        globset::GlobBuilder::new(g)
            .literal_separator(true)
            .build()
            .map(|g| g.compile_matcher().is_match(path))
            .unwrap_or(false)
    })
}

/// CI systems' config files that are not dot-files: never manifests, wherever they are.
const CI_FILES: &[&str] = &[
    "azure-pipelines.yml",
    "azure-pipelines.yaml",
    "bitbucket-pipelines.yml",
    "appveyor.yml",
    "appveyor.yaml",
    "cloudbuild.yaml",
    "cloudbuild.yml",
    "buildspec.yml",
    "buildspec.yaml",
    "codefresh.yml",
    "codefresh.yaml",
];

/// A path part that hides what is below it or is itself hidden: a dot-name (not the
/// `.` and `..` of a relative path), or a CI config's file name.
fn unread_part(part: &str) -> bool {
    (part.starts_with('.') && part != "." && part != "..") || CI_FILES.contains(&part)
}

/// Is this file read as a manifest unless `.meshward.yaml` says otherwise? Not:
/// dot-files and everything under a dot-folder (`.github/workflows/`, `.circleci/`,
/// `.gitlab-ci.yml`, `.pre-commit-config.yaml`, `.fluxschema.yml`, …) and the CI
/// configs of [`CI_FILES`]: they configure tools, and a document in them that looks
/// like an object is not one the cluster gets. They stay in the tree (rendering and
/// `.meshward.yaml` may need them); only reading them as manifests is off.
pub fn read_by_default(path: &str) -> bool {
    !path.split('/').any(unread_part)
}

/// Does a `paths.include` glob name files [`read_by_default`] leaves out, so that
/// they are read? It must spell the dot-name or CI file out (`.deploy/**`,
/// `ci/.k8s/*.yaml`): as in a shell, `*` and `**` never reach into them.
pub fn names_unread(glob: &str) -> bool {
    glob.split('/').any(unread_part)
}

// Prometheus settings are checked here, where they are read: `check --prometheus`,
// `serve` and a repository's `evidence.prometheus` all go through these.

/// Checks a Prometheus URL: http(s), a host, no credentials in it.
pub fn check_url(url: &str) -> Result<url::Url, String> {
    let parsed =
        url::Url::parse(url.trim()).map_err(|e| format!("`url` {url:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`url` {url:?} must be http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("`url` {url:?} has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "`url` {url:?} carries credentials; they belong in the meshward server's secrets"
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!("`url` {url:?} may not have a query or fragment"));
    }
    Ok(normalized(parsed))
}

/// The base URL with a trailing slash, so API paths join under it.
fn normalized(mut url: url::Url) -> url::Url {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url
}

/// Labels meshward sets itself; a repository's extra matchers may not name them.
pub const RESERVED_LABELS: &[&str] = &[
    "reporter",
    "destination_workload_namespace",
    "destination_workload",
    "connection_security_policy",
    "__name__",
];

/// Is this a Prometheus label name?
pub fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_paths_and_ci_configs_are_not_manifests_by_default() {
        for path in [
            ".github/workflows/ci.yaml",
            ".gitlab-ci.yml",
            ".circleci/config.yml",
            ".pre-commit-config.yaml",
            ".fluxschema.yml",
            "apps/.archive/old.yaml",
            "azure-pipelines.yml",
            "services/api/cloudbuild.yaml",
        ] {
            assert!(!read_by_default(path), "{path}");
        }
        for path in ["apps/web.yaml", "clusters/prod/flux-system/gotk-sync.yaml"] {
            assert!(read_by_default(path), "{path}");
        }
        assert!(names_unread(".deploy/**"));
        assert!(names_unread("**/.k8s/*.yaml"));
        assert!(!names_unread("**/*.yaml"));
        assert!(!names_unread("./apps/**"));
    }

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
    fn mesh_namespaces_declare_labels() {
        let c = RepoConfig::parse(
            "mesh:\n  namespaces:\n    payments:\n      labels: {istio-injection: enabled}\n    legacy:\n      labels: {}\n",
        )
        .unwrap();
        assert_eq!(
            c.mesh.namespaces["payments"].labels["istio-injection"],
            "enabled"
        );
        assert!(c.mesh.namespaces["legacy"].labels.is_empty());
        for (text, line, needle) in [
            // An unknown key, at its line, named.
            ("mesh:\n  namespaces:\n    payments:\n      lables: {a: b}\n", 4, "lables"),
            // Labels are required: `{}` says "none", a missing key would be a guess.
            ("mesh:\n  namespaces:\n    payments: {}\n", 3, "labels"),
            ("mesh:\n  namespaces:\n    Payments:\n      labels: {}\n", 3, "Payments"),
            (
                "mesh:\n  namespaces:\n    payments:\n      labels:\n        istio-injection: \"en abled\"\n",
                5,
                "istio-injection",
            ),
            (
                "mesh:\n  namespaces:\n    payments:\n      labels:\n        \"bad key!\": x\n",
                5,
                "bad key!",
            ),
        ] {
            let e = RepoConfig::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn evidence_prometheus() {
        let c = RepoConfig::parse(
            "evidence:\n  prometheus:\n    url: https://prometheus.internal\n    window: 14d\n    matchers: {cluster: prod-eu1}\n",
        )
        .unwrap();
        let p = c.evidence.prometheus.unwrap();
        assert_eq!(p.url.as_deref(), Some("https://prometheus.internal"));
        assert_eq!(p.window.as_deref(), Some("14d"));
        assert_eq!(p.matchers["cluster"], "prod-eu1");
        for (text, line, needle) in [
            (
                "evidence:\n  prometheus:\n    window: 7 days\n",
                3,
                "window",
            ),
            ("evidence:\n  prometheus:\n    window: 2y\n", 3, "outside"),
            ("evidence:\n  prometheus:\n    url: ftp://x\n", 3, "http"),
            (
                "evidence:\n  prometheus:\n    matchers:\n      reporter: source\n",
                4,
                "reporter",
            ),
            (
                "evidence:\n  prometheus:\n    matchers: {\"a-b\": x}\n",
                3,
                "label name",
            ),
            ("evidence:\n  prometheus:\n    token: secret\n", 3, "token"),
        ] {
            let e = RepoConfig::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
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

    #[test]
    fn dot_paths_are_manifests_only_when_a_glob_names_them() {
        let all = RepoConfig::default();
        assert!(all.manifest_selected("apps/web.yaml"));
        assert!(!all.manifest_selected(".github/workflows/ci.yaml"));
        let c = RepoConfig::parse(
            "paths:\n  include: [\"**/*.yaml\", \".deploy/**\"]\n  exclude: [\".deploy/old/**\"]\n",
        )
        .unwrap();
        assert!(c.manifest_selected("apps/web.yaml"));
        assert!(c.manifest_selected(".deploy/web.yaml"));
        assert!(!c.manifest_selected(".deploy/old/web.yaml"));
        assert!(!c.manifest_selected(".github/workflows/ci.yaml"));
    }

    #[test]
    fn the_mesh_keys_the_file_sets_are_known() {
        let c = RepoConfig::parse("mesh:\n  trust_domain: prod.example\n").unwrap();
        assert_eq!(c.mesh_keys, vec!["trust_domain".to_string()]);
        assert!(RepoConfig::default().mesh_keys.is_empty());
    }

    #[test]
    fn a_render_exclude_that_is_no_glob_is_an_error() {
        let e = RepoConfig::parse("render:\n  exclude:\n    - apps/**\n    - \"apps/[legacy\"\n")
            .unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("render.exclude"), "{e}");
    }
}
