//! The one GitHub client type: every call meshward makes goes through
//! [`GitHub::request`], which authenticates (as the app's installation for the
//! repository, or with a plain token), retries server errors and rate limits, bounds
//! the response size, and counts calls by status for `/metrics`.

use super::config::{client, graphql_root, web_url, Mode};
pub use super::config::{GitHubAuth, GitHubConfig, Timeouts};
pub use super::error::GitHubError;
use super::names::RepoName;
pub use super::retry::RetryPolicy;
use super::retry::{backoff, error_message, rate_limit_wait, server_error_wait};
use crate::metrics::Metrics;
use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::Method;
use http_body_util::{BodyExt, Limited};
use octocrab::Octocrab;
use secrecy::SecretString;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

struct Installation {
    client: Octocrab,
    graphql: Octocrab,
    expires_at: DateTime<Utc>,
}

struct Inner {
    crab: Octocrab,
    /// Enterprise serves GraphQL at `/api/graphql`, outside the REST root
    /// (`/api/v3`) that octocrab puts before every path: a client rooted at `/api`.
    /// None: GraphQL is `/graphql` under the REST root (api.github.com).
    graphql_crab: Option<Octocrab>,
    mode: Mode,
    /// Where people read what the API serves: `https://github.com`, or the
    /// Enterprise host.
    web_url: String,
    installations: Mutex<HashMap<i64, Installation>>,
    metrics: Metrics,
    retry: RetryPolicy,
    max_tarball_bytes: usize,
    token_refresh_margin: chrono::Duration,
    call_timeout: Duration,
}

/// A GitHub connection. Cheap to clone.
#[derive(Clone)]
pub struct GitHub {
    inner: Arc<Inner>,
}

/// A client for one repository, authenticated for it.
#[derive(Clone)]
pub struct RepoClient {
    gh: GitHub,
    crab: Octocrab,
    graphql: Octocrab,
    repo: RepoName,
}

const MAX_JSON_BYTES: usize = 16 * 1024 * 1024;

impl GitHub {
    pub fn new(config: GitHubConfig, metrics: Metrics) -> Result<GitHub> {
        let (crab, mode) = client(config.api_url.as_deref(), &config.auth, &config.timeouts)?;
        let graphql_crab = match graphql_root(config.api_url.as_deref()) {
            Some(root) => Some(client(Some(&root), &config.auth, &config.timeouts)?.0),
            None => None,
        };
        Ok(GitHub {
            inner: Arc::new(Inner {
                crab,
                graphql_crab,
                mode,
                web_url: web_url(config.api_url.as_deref()),
                installations: Mutex::new(HashMap::new()),
                metrics,
                retry: config.retry,
                max_tarball_bytes: config.max_tarball_bytes,
                token_refresh_margin: chrono::Duration::from_std(config.token_refresh_margin)
                    .unwrap_or(chrono::Duration::minutes(5)),
                call_timeout: config.timeouts.call,
            }),
        })
    }

    /// Is this an App (which may create check runs), not a plain token?
    pub fn is_app(&self) -> bool {
        matches!(self.inner.mode, Mode::App)
    }

    /// The web root for links people follow (`https://github.com`).
    pub fn web_url(&self) -> &str {
        &self.inner.web_url
    }

    /// A client for `repo`. In App mode it acts as the installation (looked up when
    /// not given).
    pub(crate) async fn repo(
        &self,
        repo: &RepoName,
        installation_id: Option<i64>,
    ) -> Result<RepoClient> {
        let (crab, graphql) = match self.inner.mode {
            Mode::Token => (
                self.inner.crab.clone(),
                self.inner
                    .graphql_crab
                    .clone()
                    .unwrap_or_else(|| self.inner.crab.clone()),
            ),
            Mode::App => {
                let id = match installation_id {
                    Some(id) => id,
                    None => self.installation_of(repo).await?,
                };
                self.installation_client(id).await?
            }
        };
        Ok(RepoClient {
            gh: self.clone(),
            crab,
            graphql,
            repo: repo.clone(),
        })
    }

    /// A call as the app itself (its JWT), not as one of its installations.
    pub(super) async fn as_app<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<T> {
        let bytes = self
            .request(&self.inner.crab, method.clone(), path, body, MAX_JSON_BYTES)
            .await?;
        parse(&method, path, &bytes)
    }

    /// The client of an installation, with a token that has at least the refresh
    /// margin left (a new one is requested when it has not).
    async fn installation_client(&self, id: i64) -> Result<(Octocrab, Octocrab)> {
        let mut cache = self.inner.installations.lock().await;
        if let Some(inst) = cache.get(&id) {
            if inst.expires_at - Utc::now() > self.inner.token_refresh_margin {
                return Ok((inst.client.clone(), inst.graphql.clone()));
            }
        }
        let t = self.create_installation_token(id).await?;
        let expires_at = t
            .expires_at
            .unwrap_or_else(|| Utc::now() + chrono::Duration::minutes(60));
        let as_installation = |crab: &Octocrab| {
            crab.user_access_token(SecretString::from(t.token.clone()))
                .context("installation client")
        };
        let client = as_installation(&self.inner.crab)?;
        let graphql = match &self.inner.graphql_crab {
            Some(g) => as_installation(g)?,
            None => client.clone(),
        };
        cache.insert(
            id,
            Installation {
                client: client.clone(),
                graphql: graphql.clone(),
                expires_at,
            },
        );
        tracing::debug!(installation = id, %expires_at, "new installation token");
        Ok((client, graphql))
    }

    /// Sends one API call, with retries, and returns the body of a successful answer
    /// (at most `max_bytes`). `path` is relative to the API root.
    async fn request(
        &self,
        crab: &Octocrab,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        max_bytes: usize,
    ) -> Result<Bytes> {
        let retry = self.inner.retry.clone();
        self.request_with(crab, method, path, body, max_bytes, &retry)
            .await
    }

    /// [`GitHub::request`] with its own retry policy (`max_retries: 0`: one call).
    async fn request_with(
        &self,
        crab: &Octocrab,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        max_bytes: usize,
        retry: &RetryPolicy,
    ) -> Result<Bytes> {
        let mut attempt = 0u32;
        loop {
            let request = crab
                .build_request(
                    http::Request::builder().method(method.clone()).uri(path),
                    body,
                )
                .context("building a GitHub request")?;
            let deadline = tokio::time::Instant::now() + self.inner.call_timeout;
            let answer = tokio::time::timeout_at(deadline, crab.execute(request))
                .await
                .unwrap_or_else(|_| {
                    Err(octocrab::Error::Other {
                        source: format!(
                            "GitHub did not answer within {}s",
                            self.inner.call_timeout.as_secs()
                        )
                        .into(),
                        backtrace: std::backtrace::Backtrace::capture(),
                    })
                });
            let response = match answer {
                Ok(r) => r,
                Err(e) => {
                    self.inner
                        .metrics
                        .github_calls
                        .with_label_values(&["error"])
                        .inc();
                    if attempt < retry.max_retries {
                        let wait = backoff(retry, attempt);
                        tracing::warn!(%method, path, error = %e, ?wait, "GitHub call failed; retrying");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                        continue;
                    }
                    return Err(anyhow::Error::new(e).context(format!("{method} {path}")));
                }
            };
            let status = response.status();
            self.inner
                .metrics
                .github_calls
                .with_label_values(&[status.as_str()])
                .inc();
            let headers = response.headers().clone();
            let limit = if status.is_success() {
                max_bytes
            } else {
                64 * 1024
            };
            let collected = match tokio::time::timeout_at(
                deadline,
                Limited::new(response.into_body(), limit).collect(),
            )
            .await
            {
                Ok(c) => c,
                Err(_) => Err(format!(
                    "GitHub did not send the whole answer within {}s",
                    self.inner.call_timeout.as_secs()
                )
                .into()),
            };
            let bytes = match collected {
                Ok(c) => c.to_bytes(),
                Err(e) if status.is_success() => {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        bail!("{method} {path}: the answer is larger than {max_bytes} bytes");
                    }
                    if attempt < retry.max_retries {
                        tokio::time::sleep(backoff(retry, attempt)).await;
                        attempt += 1;
                        continue;
                    }
                    bail!("{method} {path}: reading the answer failed: {e}");
                }
                Err(_) => Bytes::new(),
            };
            if status.is_success() {
                return Ok(bytes);
            }
            let message = error_message(&bytes);
            // A server error is retried after the backoff or GitHub's `Retry-After`,
            // whichever is longer; a rate limit after the wait it asks for.
            let wait = if status.is_server_error() {
                Some(server_error_wait(retry, attempt, &headers))
            } else {
                rate_limit_wait(status, &headers, &message)
            };
            if let Some(wait) = wait {
                if attempt < retry.max_retries && wait <= retry.max_delay {
                    tracing::warn!(%method, path, %status, ?wait, "GitHub call refused; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    continue;
                }
            }
            // The job's retry waits at least what GitHub asked for when the client
            // could not wait it out (a server error retried in place asked nothing
            // more of the job).
            let retry_after = if status.is_server_error() {
                wait.filter(|w| *w > retry.max_delay)
            } else {
                wait
            };
            return Err(GitHubError {
                status,
                method,
                path: path.to_string(),
                message,
                retry_after,
            }
            .into());
        }
    }
}

/// A successful answer as `T`. An empty one (204) reads as JSON `null`: `()` or an
/// `Option` takes it.
fn parse<T: DeserializeOwned>(method: &Method, path: &str, bytes: &[u8]) -> Result<T> {
    let json: &[u8] = if bytes.is_empty() { b"null" } else { bytes };
    serde_json::from_slice(json).with_context(|| format!("{method} {path}: unexpected answer"))
}

/// GraphQL's envelope: an answer with `errors` failed, whatever `data` holds.
#[derive(serde::Deserialize)]
struct GraphQlAnswer {
    #[serde(default)]
    data: serde_json::Value,
    #[serde(default)]
    errors: serde_json::Value,
}

/// The transport for [`super::api`], which holds the paths and shapes of the
/// endpoints: nothing outside `github` builds a path.
impl RepoClient {
    pub(crate) fn repo(&self) -> &RepoName {
        &self.repo
    }

    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let body = self
            .gh
            .request(&self.crab, Method::GET, path, None, MAX_JSON_BYTES)
            .await?;
        parse(&Method::GET, path, &body)
    }

    /// A GraphQL query or mutation (on Enterprise, at `/api/graphql`); GraphQL
    /// errors are errors. `T` is what `data` holds.
    pub(super) async fn graphql<T: DeserializeOwned>(
        &self,
        query: &str,
        variables: serde_json::Value,
    ) -> Result<T> {
        let request = serde_json::json!({ "query": query, "variables": variables });
        let body = self
            .gh
            .request(
                &self.graphql,
                Method::POST,
                "/graphql",
                Some(&request),
                MAX_JSON_BYTES,
            )
            .await?;
        let answer: GraphQlAnswer =
            serde_json::from_slice(&body).context("POST /graphql: not JSON")?;
        if !answer.errors.is_null() {
            return Err(anyhow!("GraphQL errors: {}", answer.errors));
        }
        serde_json::from_value(answer.data).context("POST /graphql: unexpected answer")
    }

    /// Sends a JSON body (POST, PATCH, PUT) and reads the answer as `T`
    /// ([`serde::de::IgnoredAny`]: any JSON).
    pub(super) async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T> {
        let retry = self.gh.inner.retry.clone();
        self.send_with(method, path, body, &retry).await
    }

    /// [`RepoClient::send`] without retries: exactly one call, for a last word
    /// after GitHub refused us (asking again would be a retry storm).
    pub(super) async fn send_once<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T> {
        let once = RetryPolicy {
            max_retries: 0,
            ..self.gh.inner.retry.clone()
        };
        self.send_with(method, path, body, &once).await
    }

    async fn send_with<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &impl Serialize,
        retry: &RetryPolicy,
    ) -> Result<T> {
        let body = serde_json::to_value(body)
            .with_context(|| format!("{method} {path}: encoding the request"))?;
        let bytes = self
            .gh
            .request_with(
                &self.crab,
                method.clone(),
                path,
                Some(&body),
                MAX_JSON_BYTES,
                retry,
            )
            .await?;
        parse(&method, path, &bytes)
    }

    /// Sends a call without a body (DELETE); the answer is ignored.
    pub(super) async fn send_empty(&self, method: Method, path: &str) -> Result<()> {
        self.gh
            .request(&self.crab, method, path, None, MAX_JSON_BYTES)
            .await?;
        Ok(())
    }

    /// Every item of a paged list (`per_page=100`), at most `max_pages` pages: the
    /// rest is not read (a bound against endless lists).
    pub(super) async fn get_pages<T: DeserializeOwned>(
        &self,
        path: &str,
        max_pages: u32,
    ) -> Result<Vec<T>> {
        let mut items = Vec::new();
        let sep = if path.contains('?') { '&' } else { '?' };
        for page in 1..=max_pages {
            let list: Vec<T> = self
                .get(&format!("{path}{sep}per_page=100&page={page}"))
                .await?;
            let n = list.len();
            items.extend(list);
            if n < 100 {
                break;
            }
        }
        Ok(items)
    }

    /// A download of at most the configured tarball size (redirects followed).
    pub(super) async fn download(&self, path: &str) -> Result<Bytes> {
        self.gh
            .request(
                &self.crab,
                Method::GET,
                path,
                None,
                self.gh.inner.max_tarball_bytes,
            )
            .await
    }
}
