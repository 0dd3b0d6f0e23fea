//! Zero-plaintext evidence from Prometheus, for the STRICT scopes a change
//! introduces. Fails closed: an unreachable server, an error, a window longer than
//! the server keeps data, or no traffic at all gives no evidence, with the reason,
//! and the policies turn that into `mtls/strict-without-evidence`.
//!
//! Every request has a timeout and the whole gathering a deadline; answers are
//! cached for a few minutes per (server, query), so re-runs of a PR and several
//! scopes over the same namespace do not repeat a query.

use super::promql;
use super::scopes::{StrictScope, Subject};
use super::{Evidence, TrafficEvidence};
use crate::config::check_url;
use crate::config::PrometheusConfig;
use crate::units::duration;
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

    fn client(&self) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .timeout(self.settings.timeout)
            .connect_timeout(self.settings.timeout.min(Duration::from_secs(5)))
            .user_agent(concat!("meshward/", env!("CARGO_PKG_VERSION")))
            // A server that redirects elsewhere would take the credentials with it.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("meshward could not build its HTTP client: {e}"))
    }

    fn authorize(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.settings.auth {
            PrometheusAuth::None => req,
            PrometheusAuth::Bearer(token) => req.bearer_auth(token.expose_secret()),
            PrometheusAuth::Basic { username, password } => {
                req.basic_auth(username, Some(password.expose_secret()))
            }
        }
    }

    /// GET an API path; the `data` of a successful answer.
    async fn api(
        &self,
        client: &reqwest::Client,
        target: &Target,
        path: &str,
        form: Option<&[(&str, &str)]>,
    ) -> Result<serde_json::Value, ApiError> {
        let url = target
            .url
            .join(path)
            .map_err(|e| ApiError::Other(format!("bad API URL: {e}")))?;
        let req = match form {
            Some(form) => client.post(url).form(form),
            None => client.get(url),
        };
        let resp =
            self.authorize(req).send().await.map_err(|e| {
                ApiError::Unreachable(describe(&e, &target.url, self.settings.timeout))
            })?;
        let status = resp.status();
        let body = read_limited(resp)
            .await
            .map_err(|e| ApiError::Unreachable(describe(&e, &target.url, self.settings.timeout)))?
            .ok_or_else(|| {
                ApiError::Other(format!(
                    "Prometheus {} answered with more than {} KiB",
                    shown(&target.url),
                    MAX_BODY_BYTES / 1024
                ))
            })?;
        let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        let api_error = json.as_ref().and_then(|j| {
            (j.get("status").and_then(|s| s.as_str()) == Some("error")).then(|| {
                let kind = j
                    .get("errorType")
                    .and_then(|s| s.as_str())
                    .unwrap_or("error");
                let msg = j.get("error").and_then(|s| s.as_str()).unwrap_or("");
                format!("{kind}: {}", clip(msg, 300))
            })
        });
        if !status.is_success() {
            let why = api_error.unwrap_or_else(|| clip(&String::from_utf8_lossy(&body), 200));
            return Err(ApiError::Status(format!(
                "Prometheus {} answered HTTP {status} for {path}: {why}",
                shown(&target.url)
            )));
        }
        if let Some(e) = api_error {
            return Err(ApiError::Other(format!(
                "Prometheus {} refused: {e}",
                shown(&target.url)
            )));
        }
        json.and_then(|j| j.get("data").cloned()).ok_or_else(|| {
            ApiError::Other(format!(
                "Prometheus {} answered {path} with something that is not its API's JSON",
                shown(&target.url)
            ))
        })
    }

    /// How far back the server keeps data; Err when it does not cover the window or
    /// cannot be told (fail closed). Also the first contact: an unreachable server
    /// stops here, after one timeout.
    async fn retention(&self, client: &reqwest::Client, target: &Target) -> Result<String, String> {
        let url = shown(&target.url);
        // The server is asked even when .meshward.yaml states a retention: what the
        // server says it keeps wins, and a stated figure only fills in for a server
        // that keeps data by size or does not say (Thanos, Mimir).
        let server = match self
            .api(client, target, "api/v1/status/runtimeinfo", None)
            .await
        {
            Ok(data) => Ok(data
                .get("storageRetention")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()),
            // Older servers and some fronts have no runtimeinfo: try the flags.
            Err(ApiError::Status(_)) => {
                match self.api(client, target, "api/v1/status/flags", None).await {
                    Ok(data) => Ok(["storage.tsdb.retention.time", "storage.tsdb.retention"]
                        .iter()
                        .filter_map(|f| data.get(*f).and_then(|v| v.as_str()))
                        .find(|v| duration::parse(v).is_ok_and(|d| !d.is_zero()))
                        .unwrap_or("")
                        .to_string()),
                    Err(e @ ApiError::Status(_)) => Err(e),
                    Err(e) => return Err(e.into_message()),
                }
            }
            Err(e) => return Err(e.into_message()),
        };
        let stated = target
            .retention
            .as_deref()
            .and_then(|s| duration::parse(s).ok().map(|d| (s, d)));
        let (reported, length) = match (server, stated) {
            (Ok(r), stated) => match (duration::retention_time(&r), stated) {
                (Some(len), Some((s, d))) if d < len => (
                    format!("{s} (as .meshward.yaml states; the server keeps {r})"),
                    Some(d),
                ),
                (Some(len), _) => (r, Some(len)),
                (None, Some((s, d))) => (
                    format!(
                        "{s} (as .meshward.yaml states; the server reports {})",
                        if r.is_empty() { "none" } else { r.as_str() }
                    ),
                    Some(d),
                ),
                (None, None) => (r, None),
            },
            (Err(_), Some((s, d))) => (format!("{s} (as .meshward.yaml states)"), Some(d)),
            (Err(e), None) => return Err(e.into_message()),
        };
        match length {
            None => Err(format!(
                "Prometheus {url} does not say how long it keeps data (retention {:?}), so a {} window cannot be shown to be covered; if you know it is, set evidence.prometheus.retention in .meshward.yaml",
                reported, target.window
            )),
            Some(len) if len < target.window_len => Err(format!(
                "the window {} is longer than Prometheus {url} keeps data (retention {}): plaintext in the part it dropped would go unseen; shorten evidence.prometheus.window to at most {}",
                target.window, reported, duration::format(len)
            )),
            Some(_) => Ok(reported),
        }
    }

    /// Runs every distinct query (cached ones are not asked again).
    async fn run_queries(
        &self,
        client: &reqwest::Client,
        target: &Target,
        subjects: &[SubjectQueries],
    ) -> (HashMap<String, Cached>, BTreeMap<String, String>) {
        let wanted: BTreeSet<&String> = subjects
            .iter()
            .filter(|s| s.empty.is_none())
            .flat_map(|s| s.queries.values())
            .collect();
        let url = target.url.as_str().to_string();
        let mut answers: HashMap<String, Cached> = HashMap::new();
        let mut to_ask = Vec::new();
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for q in wanted {
                match cache.get(&(url.clone(), q.clone())) {
                    Some(c) if c.at.elapsed() < self.settings.cache_ttl => {
                        answers.insert(q.clone(), c.clone());
                    }
                    _ => to_ask.push(q.clone()),
                }
            }
        }
        let gate = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
        let mut errors = BTreeMap::new();
        let asks = to_ask.into_iter().map(|q| {
            let gate = gate.clone();
            async move {
                let _permit = gate.acquire_owned().await;
                let r = self
                    .api(
                        client,
                        target,
                        "api/v1/query",
                        Some(&[("query", q.as_str())]),
                    )
                    .await
                    .map_err(ApiError::into_message)
                    .and_then(|data| vector_sum(&data));
                (q, r)
            }
        });
        let results = join_all(asks).await;
        let taken_at = now_rfc3339();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let ttl = self.settings.cache_ttl;
        cache.retain(|_, c| c.at.elapsed() < ttl);
        for (q, r) in results {
            match r {
                Ok(value) => {
                    let c = Cached {
                        at: Instant::now(),
                        taken_at: taken_at.clone(),
                        value,
                    };
                    if cache.len() >= CACHE_ENTRIES {
                        if let Some(oldest) = cache
                            .iter()
                            .min_by_key(|(_, c)| c.at)
                            .map(|(k, _)| k.clone())
                        {
                            cache.remove(&oldest);
                        }
                    }
                    cache.insert((url.clone(), q.clone()), c.clone());
                    answers.insert(q, c);
                }
                Err(e) => {
                    errors.insert(q, e);
                }
            }
        }
        (answers, errors)
    }
}

/// Runs futures concurrently on the current task (the semaphore bounds them).
async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

enum ApiError {
    /// No answer: connection refused, timeout, reset.
    Unreachable(String),
    /// An HTTP error status.
    Status(String),
    Other(String),
}

impl ApiError {
    fn into_message(self) -> String {
        match self {
            ApiError::Unreachable(m) | ApiError::Status(m) | ApiError::Other(m) => m,
        }
    }
}

/// A transport error in words, without the request URL (it may carry the query).
fn describe(e: &reqwest::Error, base: &reqwest::Url, timeout: Duration) -> String {
    let url = shown(base);
    if e.is_timeout() {
        return format!(
            "Prometheus {url} did not answer within {}s",
            timeout.as_secs_f64()
        );
    }
    let mut cause = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if cause.is_empty() {
        cause = e.without_url_ref();
    }
    format!("Prometheus {url} could not be reached: {cause}")
}

trait WithoutUrl {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    fn without_url_ref(&self) -> String {
        let mut s = self.to_string();
        if let Some(u) = self.url() {
            s = s.replace(u.as_str(), "");
        }
        s
    }
}

/// The body, or None when it is over the limit.
async fn read_limited(mut resp: reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The sum of an instant vector's values (an empty vector, no series, is 0).
fn vector_sum(data: &serde_json::Value) -> Result<f64, String> {
    if data.get("resultType").and_then(|t| t.as_str()) != Some("vector") {
        return Err(
            "Prometheus answered a query with something other than an instant vector".into(),
        );
    }
    let mut sum = 0.0;
    for sample in data
        .get("result")
        .and_then(|r| r.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let v: f64 = sample
            .pointer("/value/1")
            .and_then(|v| v.as_str())
            .and_then(|v| v.parse().ok())
            .ok_or("Prometheus answered a sample without a value")?;
        if !v.is_finite() || v < 0.0 {
            return Err(format!("Prometheus answered a count of {v}"));
        }
        sum += v;
    }
    Ok(sum)
}

fn clip(s: &str, n: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn source_text(target: &Target, retention: Option<&str>) -> String {
    let mut s = format!("prometheus {}", shown(&target.url));
    if !target.matchers.is_empty() {
        let m: Vec<String> = target
            .matchers
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        s.push_str(&format!(" ({})", m.join(", ")));
    }
    if let Some(r) = retention {
        s.push_str(&format!(", retention {r}"));
    }
    s
}

/// One subject of the evidence and its queries.
struct SubjectQueries {
    /// `namespace:<ns>` or a workload scope key.
    key: String,
    workloads: Vec<String>,
    queries: BTreeMap<String, String>,
    /// Why there is nothing to ask (a selector that selects no workload).
    empty: Option<String>,
}

fn subjects_for(
    scopes: &[StrictScope],
    matchers: &BTreeMap<String, String>,
    window: &str,
) -> Vec<SubjectQueries> {
    let mut out: BTreeMap<String, SubjectQueries> = BTreeMap::new();
    for s in scopes {
        match &s.subject {
            Subject::Mesh { .. } => {
                out.entry("mesh".to_string())
                    .or_insert_with(|| SubjectQueries {
                        key: "mesh".to_string(),
                        workloads: Vec::new(),
                        queries: promql::queries(&s.subject, matchers, window),
                        empty: None,
                    });
            }
            Subject::Namespaces(nss) => {
                for ns in nss {
                    out.entry(format!("namespace:{ns}"))
                        .or_insert_with(|| SubjectQueries {
                            key: format!("namespace:{ns}"),
                            workloads: Vec::new(),
                            queries: promql::queries(
                                &Subject::Namespaces(vec![ns.clone()]),
                                matchers,
                                window,
                            ),
                            empty: None,
                        });
                }
            }
            Subject::Workloads { names, .. } => {
                out.entry(s.scope_key.clone()).or_insert_with(|| SubjectQueries {
                    key: s.scope_key.clone(),
                    workloads: names.clone(),
                    queries: if names.is_empty() {
                        BTreeMap::new()
                    } else {
                        promql::queries(&s.subject, matchers, window)
                    },
                    empty: names.is_empty().then(|| {
                        format!(
                            "{} selects no workload in this repository, so there is no traffic to ask Prometheus about",
                            s.resource
                        )
                    }),
                });
            }
        }
    }
    let mut out: Vec<SubjectQueries> = out.into_values().collect();
    for s in out.iter_mut().skip(MAX_SUBJECTS) {
        s.empty = Some(format!(
            "meshward asks about at most {MAX_SUBJECTS} namespaces and workload scopes in one check, and this change turns STRICT on for more"
        ));
    }
    out
}

/// The evidence with its header.
fn skeleton(target: Option<&Target>) -> Evidence {
    Evidence {
        taken_at: Some(now_rfc3339()),
        window: target.map(|t| t.window.clone()),
        source: target.map(|t| source_text(t, None)),
        ..Evidence::default()
    }
}

fn put(evidence: &mut Evidence, key: &str, entry: TrafficEvidence) {
    match key.strip_prefix("namespace:") {
        Some(ns) => {
            evidence.namespaces.insert(ns.to_string(), entry);
        }
        None => {
            evidence.scopes.insert(key.to_string(), entry);
        }
    }
}

/// Every subject gets the same error: nothing could be asked.
fn failed(target: &Result<Target, String>, scopes: &[StrictScope], reason: &str) -> Evidence {
    let t = target.as_ref().ok();
    let mut evidence = skeleton(t);
    let (matchers, window) = match t {
        Some(t) => (t.matchers.clone(), t.window.clone()),
        None => (BTreeMap::new(), String::new()),
    };
    for s in subjects_for(scopes, &matchers, &window) {
        let entry = TrafficEvidence {
            queries: if t.is_some() {
                s.queries
            } else {
                BTreeMap::new()
            },
            workloads: s.workloads,
            error: Some(s.empty.unwrap_or_else(|| reason.to_string())),
            ..TrafficEvidence::default()
        };
        put(&mut evidence, &s.key, entry);
    }
    evidence
}

fn fill(
    evidence: &mut Evidence,
    subjects: &[SubjectQueries],
    answers: &HashMap<String, Cached>,
    errors: &BTreeMap<String, String>,
) {
    let now = evidence.taken_at.clone();
    for s in subjects {
        let mut entry = TrafficEvidence {
            workloads: s.workloads.clone(),
            ..TrafficEvidence::default()
        };
        entry.error = s.empty.clone();
        let mut oldest: Option<&str> = None;
        for (name, q) in &s.queries {
            if let Some(e) = errors.get(q) {
                entry.error.get_or_insert_with(|| e.clone());
                continue;
            }
            let Some(c) = answers.get(q) else {
                entry
                    .error
                    .get_or_insert_with(|| "the query was not answered".to_string());
                continue;
            };
            if Some(c.taken_at.as_str()) != now.as_deref() {
                oldest = Some(oldest.map_or(c.taken_at.as_str(), |o| o.min(c.taken_at.as_str())));
            }
            // increase() extrapolates: a single plaintext request may come back as
            // 0.4. Any plaintext at all must show, so plaintext rounds up.
            let n = if name.ends_with("plaintext") {
                if c.value > 0.0 {
                    c.value.ceil() as u64
                } else {
                    0
                }
            } else {
                c.value.round() as u64
            };
            match name.as_str() {
                "requests_plaintext" => entry.requests_plaintext = n,
                "requests_total" => entry.requests_total = n,
                "tcp_connections_plaintext" => entry.tcp_connections_plaintext = n,
                "tcp_connections_total" => entry.tcp_connections_total = n,
                _ => {}
            }
        }
        entry.taken_at = oldest.map(str::to_string);
        entry.queries = s.queries.clone();
        put(evidence, &s.key, entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(url: Option<&str>, allowed: &[&str], from_repo: bool) -> PrometheusSource {
        PrometheusSource::new(SourceSettings {
            url: url.map(str::to_string),
            allowed_urls: allowed.iter().map(|s| s.to_string()).collect(),
            url_from_repo: from_repo,
            ..SourceSettings::default()
        })
    }

    fn repo(url: Option<&str>, window: Option<&str>) -> PrometheusConfig {
        PrometheusConfig {
            url: url.map(str::to_string),
            window: window.map(str::to_string),
            ..PrometheusConfig::default()
        }
    }

    #[test]
    fn nothing_configured_means_no_source() {
        assert!(source(None, &[], true).resolve(None).is_none());
        assert!(source(None, &[], true)
            .resolve(Some(&repo(None, Some("1d"))))
            .is_none());
    }

    #[test]
    fn the_repository_may_only_name_allowed_servers() {
        let s = source(Some("https://prom.a"), &["https://prom.b/sub/"], true);
        let t = s.resolve(None).unwrap().unwrap();
        assert_eq!(t.url.as_str(), "https://prom.a/");
        assert_eq!(t.window, "7d");
        let t = s
            .resolve(Some(&repo(Some("https://prom.b/sub"), Some("1d"))))
            .unwrap()
            .unwrap();
        assert_eq!(t.url.as_str(), "https://prom.b/sub/");
        assert_eq!(t.window_len, Duration::from_secs(86400));
        // A look-alike host is not a prefix match.
        let e = s
            .resolve(Some(&repo(Some("https://prom.a.evil.example"), None)))
            .unwrap()
            .unwrap_err();
        assert!(e.contains("does not allow"), "{e}");
        assert!(e.contains("MESHWARD_PROMETHEUS_ALLOWED_URLS"), "{e}");
    }

    #[test]
    fn the_cli_flag_wins_over_the_repository() {
        let mut s = source(Some("http://127.0.0.1:9090"), &[], false);
        s.settings.window_override = Some("2h".into());
        let t = s
            .resolve(Some(&repo(Some("https://elsewhere"), Some("30d"))))
            .unwrap()
            .unwrap();
        assert_eq!(t.url.as_str(), "http://127.0.0.1:9090/");
        assert_eq!(t.window, "2h");
    }

    #[test]
    fn urls_with_credentials_or_other_schemes_are_refused() {
        assert!(check_url("https://user:pw@prom")
            .unwrap_err()
            .contains("credentials"));
        assert!(check_url("file:///etc/passwd").is_err());
        assert!(check_url("https://prom/?x=1").is_err());
        assert_eq!(
            check_url("https://prom/api").unwrap().as_str(),
            "https://prom/api/"
        );
    }

    #[test]
    fn vector_sums_and_refuses_nonsense() {
        let v = serde_json::json!({"resultType": "vector", "result": [
            {"metric": {}, "value": [1.0, "2.5"]}, {"metric": {}, "value": [1.0, "3"]}]});
        assert_eq!(vector_sum(&v).unwrap(), 5.5);
        let empty = serde_json::json!({"resultType": "vector", "result": []});
        assert_eq!(vector_sum(&empty).unwrap(), 0.0);
        let nan = serde_json::json!({"resultType": "vector", "result": [{"value": [1.0, "NaN"]}]});
        assert!(vector_sum(&nan).is_err());
        assert!(vector_sum(&serde_json::json!({"resultType": "matrix", "result": []})).is_err());
    }

    #[test]
    fn plaintext_rounds_up_totals_round() {
        let scope = StrictScope {
            resource: "PeerAuthentication/shop/default".into(),
            scope: "namespace".into(),
            scope_key: "namespace:shop".into(),
            namespace: "shop".into(),
            subject: Subject::Namespaces(vec!["shop".into()]),
            strict_ports: vec![],
        };
        let subjects = subjects_for(&[scope], &BTreeMap::new(), "1h");
        let mut answers = HashMap::new();
        for (name, q) in &subjects[0].queries {
            let value = if name.ends_with("plaintext") {
                0.4
            } else {
                99.6
            };
            answers.insert(
                q.clone(),
                Cached {
                    at: Instant::now(),
                    taken_at: "t".into(),
                    value,
                },
            );
        }
        let mut e = Evidence {
            taken_at: Some("t".into()),
            ..Evidence::default()
        };
        fill(&mut e, &subjects, &answers, &BTreeMap::new());
        let shop = &e.namespaces["shop"];
        assert_eq!((shop.requests_plaintext, shop.requests_total), (1, 100));
        assert_eq!(shop.taken_at, None);
    }
}
