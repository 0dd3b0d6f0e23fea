//! Zero-plaintext evidence from Prometheus, for the STRICT scopes a change
//! introduces. Fails closed: an unreachable server, an error, a window longer than
//! the server keeps data, or no traffic at all gives no evidence, with the reason,
//! and the policies turn that into `mtls/strict-without-evidence`.
//!
//! Every request has a timeout and the whole gathering a deadline; answers are
//! cached for a few minutes per (server, query), so re-runs of a PR and several
//! scopes over the same namespace do not repeat a query.

mod assemble;
mod http;
#[cfg(test)]
mod tests;

use super::promql;
use super::scopes::{StrictScope, Subject};
use super::{Evidence, TrafficEvidence};
use crate::config::check_url;
use crate::config::PrometheusConfig;
use crate::units::duration;
use assemble::{failed, fill, skeleton, source_text, subjects_for, SubjectQueries};
use secrecy::{ExposeSecret, SecretString};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Answers larger than this are refused (a sum() answer is a few hundred bytes).
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Queries in flight at once against one server.
const CONCURRENCY: usize = 4;
/// Cached answers kept at most (the oldest are dropped first when full).
const CACHE_ENTRIES: usize = 4096;
/// Subjects (namespaces and workload scopes) asked about in one check at most: a
/// mesh-wide STRICT over more namespaces gets no evidence for the rest, with the reason.
pub const MAX_SUBJECTS: usize = 500;

/// Credentials for the Prometheus server. They come from the meshward server's
/// environment or secrets only, never from a repository.
#[derive(Clone, Default)]
pub enum PrometheusAuth {
    #[default]
    None,
    Bearer(SecretString),
    Basic {
        username: String,
        password: SecretString,
    },
}

/// Where evidence comes from and how it is asked for: the server's (or the CLI's)
/// side of the settings. The repository's side is `.meshward.yaml`
/// `evidence.prometheus`, read from the base revision.
#[derive(Clone)]
pub struct SourceSettings {
    /// The default server (the service's `MESHWARD_PROMETHEUS_URL`, the CLI's
    /// `--prometheus`).
    pub url: Option<String>,
    /// Further servers a repository may name (exact URLs). Credentials go to these too.
    pub allowed_urls: Vec<String>,
    /// May the repository's `url` choose the server? (Service: yes, among the allowed
    /// ones. CLI: no, `--prometheus` says which.)
    pub url_from_repo: bool,
    /// The window when the repository names none.
    pub window: String,
    /// A window that wins over the repository's (the CLI's `--evidence-window`).
    pub window_override: Option<String>,
    pub auth: PrometheusAuth,
    /// Per request.
    pub timeout: Duration,
    /// How long an answer is reused for the same query.
    pub cache_ttl: Duration,
}

impl Default for SourceSettings {
    fn default() -> Self {
        SourceSettings {
            url: None,
            allowed_urls: Vec::new(),
            url_from_repo: true,
            window: "7d".into(),
            window_override: None,
            auth: PrometheusAuth::None,
            timeout: Duration::from_secs(10),
            cache_ttl: Duration::from_secs(300),
        }
    }
}

/// A Prometheus evidence source with its cache. Share one per process (`Arc`).
pub struct PrometheusSource {
    settings: SourceSettings,
    cache: Mutex<HashMap<(String, String), Cached>>,
}

#[derive(Clone)]
struct Cached {
    at: Instant,
    taken_at: String,
    value: f64,
}

/// One server and window to ask, resolved from both sides of the settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub url: reqwest::Url,
    pub window: String,
    pub window_len: Duration,
    pub matchers: BTreeMap<String, String>,
    /// The repository's `retention`, for servers that do not report theirs.
    pub retention: Option<String>,
}

/// What a user sees of a URL (no trailing slash).
fn shown(url: &reqwest::Url) -> String {
    url.as_str().trim_end_matches('/').to_string()
}

impl PrometheusSource {
    pub fn new(settings: SourceSettings) -> PrometheusSource {
        PrometheusSource {
            settings,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn settings(&self) -> &SourceSettings {
        &self.settings
    }

    /// The server and window to ask for this repository. None: no Prometheus is
    /// configured on either side. Err: one is, but it cannot be used (the reason).
    pub fn resolve(&self, repo: Option<&PrometheusConfig>) -> Option<Result<Target, String>> {
        let s = &self.settings;
        let repo_url = repo
            .and_then(|r| r.url.as_deref())
            .filter(|_| s.url_from_repo);
        let url = match (repo_url, s.url.as_deref()) {
            (None, None) => return None,
            (Some(u), default) => {
                let wanted = match check_url(u) {
                    Ok(u) => u,
                    Err(e) => return Some(Err(format!(".meshward.yaml evidence.prometheus: {e}"))),
                };
                let allowed = default
                    .into_iter()
                    .chain(s.allowed_urls.iter().map(String::as_str))
                    .filter_map(|a| check_url(a).ok())
                    .any(|a| a == wanted);
                if !allowed {
                    return Some(Err(format!(
                        "the repository names Prometheus {}, which this meshward server does not allow (its operator can add it to MESHWARD_PROMETHEUS_ALLOWED_URLS)",
                        shown(&wanted)
                    )));
                }
                wanted
            }
            (None, Some(d)) => match check_url(d) {
                Ok(u) => u,
                Err(e) => return Some(Err(format!("the configured Prometheus: {e}"))),
            },
        };
        let window = s
            .window_override
            .clone()
            .or_else(|| repo.and_then(|r| r.window.clone()))
            .unwrap_or_else(|| s.window.clone());
        let window_len = match duration::parse(&window) {
            Ok(d) if d >= crate::config::MIN_WINDOW && d <= crate::config::MAX_WINDOW => d,
            Ok(_) => {
                return Some(Err(format!(
                    "the evidence window {window} is outside 1m..400d"
                )))
            }
            Err(e) => return Some(Err(format!("the evidence window: {e}"))),
        };
        Some(Ok(Target {
            url,
            window,
            window_len,
            matchers: repo.map(|r| r.matchers.clone()).unwrap_or_default(),
            retention: repo.and_then(|r| r.retention.clone()),
        }))
    }

    /// Gathers evidence for `scopes` from `target`. Synchronous: it runs on a
    /// thread of its own with a small runtime, so it can be called from the
    /// pipeline wherever that runs (the CLI, or the service's blocking pool).
    pub fn gather_blocking(
        &self,
        target: &Result<Target, String>,
        scopes: &[StrictScope],
    ) -> Evidence {
        std::thread::scope(|s| {
            s.spawn(|| {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(self.gather(target, scopes)),
                    Err(e) => failed(
                        target,
                        scopes,
                        &format!("meshward could not start its HTTP client: {e}"),
                    ),
                }
            })
            .join()
            .unwrap_or_else(|_| failed(target, scopes, "gathering evidence panicked"))
        })
    }

    /// Gathers evidence for `scopes` from `target` (see [`Self::gather_blocking`]).
    pub async fn gather(
        &self,
        target: &Result<Target, String>,
        scopes: &[StrictScope],
    ) -> Evidence {
        let target = match target {
            Ok(t) => t,
            Err(e) => return failed(target, scopes, e),
        };
        let deadline = self.settings.timeout.saturating_mul(3);
        let mut evidence = skeleton(Some(target));
        let subjects = subjects_for(scopes, &target.matchers, &target.window);
        if subjects.iter().all(|s| s.empty.is_some()) {
            fill(&mut evidence, &subjects, &HashMap::new(), &BTreeMap::new());
            return evidence;
        }
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => return failed(&Ok(target.clone()), scopes, &e),
        };
        let outcome = tokio::time::timeout(deadline, async {
            let retention = self.retention(&client, target).await?;
            evidence.source = Some(source_text(target, Some(&retention)));
            Ok::<_, String>(self.run_queries(&client, target, &subjects).await)
        })
        .await;
        match outcome {
            Ok(Ok((answers, errors))) => fill(&mut evidence, &subjects, &answers, &errors),
            Ok(Err(reason)) => return failed(&Ok(target.clone()), scopes, &reason),
            Err(_) => {
                return failed(
                    &Ok(target.clone()),
                    scopes,
                    &format!(
                        "Prometheus {} did not answer all queries within {}s",
                        shown(&target.url),
                        deadline.as_secs()
                    ),
                )
            }
        }
        evidence
    }
}
