//! `evidence:`: where zero-plaintext evidence comes from, and the checks every
//! Prometheus URL and label goes through.

use serde::Deserialize;
use std::collections::BTreeMap;

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
