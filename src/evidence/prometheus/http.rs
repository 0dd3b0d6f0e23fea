//! Asking Prometheus: the HTTP client, its bounds, and what its answers mean.

use super::assemble::now_rfc3339;
use super::*;

impl PrometheusSource {
    pub(super) fn client(&self) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .timeout(self.settings.timeout)
            .connect_timeout(self.settings.timeout.min(Duration::from_secs(5)))
            .user_agent(concat!("meshward/", env!("CARGO_PKG_VERSION")))
            // A server that redirects elsewhere would take the credentials with it.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("meshward could not build its HTTP client: {e}"))
    }

    pub(super) fn authorize(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.settings.auth {
            PrometheusAuth::None => req,
            PrometheusAuth::Bearer(token) => req.bearer_auth(token.expose_secret()),
            PrometheusAuth::Basic { username, password } => {
                req.basic_auth(username, Some(password.expose_secret()))
            }
        }
    }

    /// GET an API path; the `data` of a successful answer.
    pub(super) async fn api(
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
    pub(super) async fn retention(
        &self,
        client: &reqwest::Client,
        target: &Target,
    ) -> Result<String, String> {
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
    pub(super) async fn run_queries(
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
pub(super) async fn join_all<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
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

pub(super) enum ApiError {
    /// No answer: connection refused, timeout, reset.
    Unreachable(String),
    /// An HTTP error status.
    Status(String),
    Other(String),
}

impl ApiError {
    pub(super) fn into_message(self) -> String {
        match self {
            ApiError::Unreachable(m) | ApiError::Status(m) | ApiError::Other(m) => m,
        }
    }
}

/// A transport error in words, without the request URL (it may carry the query).
pub(super) fn describe(e: &reqwest::Error, base: &reqwest::Url, timeout: Duration) -> String {
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

pub(super) trait WithoutUrl {
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
pub(super) async fn read_limited(
    mut resp: reqwest::Response,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
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
pub(super) fn vector_sum(data: &serde_json::Value) -> Result<f64, String> {
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

pub(super) fn clip(s: &str, n: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
