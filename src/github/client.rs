//! The one GitHub client type: every call meshward makes goes through
//! [`GitHub::request`], which authenticates (as the app's installation for the
//! repository, or with a plain token), retries server errors and rate limits, bounds
//! the response size, and counts calls by status for `/metrics`.

use super::names::RepoName;
pub use super::retry::RetryPolicy;
use super::retry::{backoff, error_message, rate_limit_wait, server_error_wait};
use crate::metrics::Metrics;
use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use octocrab::Octocrab;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How meshward authenticates to GitHub.
pub enum GitHubAuth {
    /// As a GitHub App: JWTs signed with the private key, then an installation token
    /// per repository.
    App {
        app_id: u64,
        private_key_pem: SecretString,
    },
    /// A plain token (single-repo use).
    Token(SecretString),
}

pub struct GitHubConfig {
    /// API root, e.g. `https://ghe.example.com/api/v3`; None: api.github.com.
    pub api_url: Option<String>,
    pub auth: GitHubAuth,
    pub retry: RetryPolicy,
    /// Largest tarball downloaded (compressed bytes).
    pub max_tarball_bytes: usize,
    /// An installation token is replaced when it has less than this left.
    pub token_refresh_margin: Duration,
    pub timeouts: Timeouts,
}

/// How long a GitHub call may take: a peer that stops answering fails the call (and
/// the retries, then the job, go on) instead of holding a worker forever.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    /// Longest silence while waiting for or reading an answer.
    pub read: Duration,
    /// One attempt, answer body included (a tarball is the longest).
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(30),
            call: Duration::from_secs(300),
        }
    }
}

impl GitHubConfig {
    pub fn new(api_url: Option<String>, auth: GitHubAuth) -> GitHubConfig {
        GitHubConfig {
            api_url,
            auth,
            retry: RetryPolicy::default(),
            max_tarball_bytes: 256 * 1024 * 1024,
            token_refresh_margin: Duration::from_secs(5 * 60),
            timeouts: Timeouts::default(),
        }
    }
}

/// An error answer from GitHub (after retries).
#[derive(Debug, thiserror::Error)]
#[error("GitHub answered {status} to {method} {path}: {message}")]
pub struct GitHubError {
    pub status: StatusCode,
    pub method: Method,
    pub path: String,
    pub message: String,
    /// A rate limit, or a server error with `Retry-After`, whose wait was longer
    /// than the client waits: how long GitHub asked to wait (the job's retry waits
    /// at least this long).
    pub retry_after: Option<Duration>,
}

impl GitHubError {
    /// GitHub refuses this for good: the app was uninstalled or lacks a permission
    /// (403), the repository or object is gone (404), or the request is invalid
    /// (422). Trying again cannot help, so the job fails at once.
    pub fn is_refusal(&self) -> bool {
        self.retry_after.is_none()
            && matches!(
                self.status,
                StatusCode::FORBIDDEN | StatusCode::NOT_FOUND | StatusCode::UNPROCESSABLE_ENTITY
            )
    }

    /// The wait a rate limit in an error's chain asks for, if any.
    pub fn retry_after_in(e: &anyhow::Error) -> Option<Duration> {
        e.chain()
            .filter_map(|c| c.downcast_ref::<GitHubError>())
            .find_map(|g| g.retry_after)
    }

    /// GitHub's answer with `status` in an error's chain, if any.
    pub(crate) fn with_status_in(e: &anyhow::Error, status: StatusCode) -> Option<&GitHubError> {
        e.chain()
            .filter_map(|c| c.downcast_ref::<GitHubError>())
            .find(|g| g.status == status)
    }

    /// The refusal found in an error's chain, if any.
    pub fn refusal_in(e: &anyhow::Error) -> Option<&GitHubError> {
        e.chain()
            .filter_map(|c| c.downcast_ref::<GitHubError>())
            .find(|g| g.is_refusal())
    }
}

enum Mode {
    App,
    Token,
}

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

/// An octocrab client for an API root, authenticated as the config says.
fn client(
    api_url: Option<&str>,
    auth: &GitHubAuth,
    timeouts: &Timeouts,
) -> Result<(Octocrab, Mode)> {
    let mut builder = Octocrab::builder()
        .set_connect_timeout(Some(timeouts.connect))
        .set_read_timeout(Some(timeouts.read))
        .set_write_timeout(Some(timeouts.read));
    if let Some(url) = api_url {
        builder = builder
            .base_uri(url)
            .with_context(|| format!("bad GitHub API URL {url:?}"))?;
    }
    let mode = match auth {
        GitHubAuth::App {
            app_id,
            private_key_pem,
        } => {
            let key =
                jsonwebtoken::EncodingKey::from_rsa_pem(private_key_pem.expose_secret().as_bytes())
                    .context("the GitHub App private key is not an RSA key in PEM form")?;
            builder = builder.app((*app_id).into(), key);
            Mode::App
        }
        GitHubAuth::Token(token) => {
            builder = builder.personal_token(token.expose_secret().to_string());
            Mode::Token
        }
    };
    Ok((builder.build().context("building the GitHub client")?, mode))
}

/// Enterprise's GraphQL root (`https://ghe.example.com/api`, serving `/graphql`),
/// when the REST root is Enterprise's `/api/v3`.
fn graphql_root(api_url: Option<&str>) -> Option<String> {
    let api = api_url?.trim_end_matches('/');
    api.strip_suffix("/v3")
        .filter(|root| root.ends_with("/api"))
        .map(str::to_string)
}

/// github.com's API is api.github.com; Enterprise serves it under `/api/v3` of the
/// web host.
fn web_url(api_url: Option<&str>) -> String {
    let api = api_url
        .unwrap_or("https://api.github.com")
        .trim_end_matches('/');
    if api == "https://api.github.com" {
        return "https://github.com".to_string();
    }
    api.strip_suffix("/api/v3").unwrap_or(api).to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_roots_of_github_and_enterprise() {
        assert_eq!(graphql_root(None), None);
        assert_eq!(graphql_root(Some("https://api.github.com")), None);
        assert_eq!(
            graphql_root(Some("https://ghe.example.com/api/v3/")).as_deref(),
            Some("https://ghe.example.com/api")
        );
        assert_eq!(graphql_root(Some("http://127.0.0.1:8080")), None);
    }

    #[test]
    fn web_urls_of_github_and_enterprise() {
        assert_eq!(web_url(None), "https://github.com");
        assert_eq!(
            web_url(Some("https://api.github.com/")),
            "https://github.com"
        );
        assert_eq!(
            web_url(Some("https://ghe.example.com/api/v3")),
            "https://ghe.example.com"
        );
        assert_eq!(web_url(Some("http://127.0.0.1:9")), "http://127.0.0.1:9");
    }

    #[test]
    fn validation_errors_keep_their_details() {
        let body = br#"{"message": "Validation Failed", "errors": [{"message": "Pull request review thread line must be part of the diff"}, "and this"]}"#;
        assert_eq!(
            error_message(body),
            "Validation Failed: Pull request review thread line must be part of the diff; and this"
        );
        assert_eq!(error_message(br#"{"message": "Not Found"}"#), "Not Found");
        assert_eq!(error_message(b"<html>"), "<html>");
    }

    #[test]
    fn refusals_are_403_404_422_but_not_rate_limits() {
        let e = |status: StatusCode, rate_limited: bool| GitHubError {
            status,
            method: Method::POST,
            path: "/x".into(),
            message: String::new(),
            retry_after: rate_limited.then(|| Duration::from_secs(61)),
        };
        assert!(e(StatusCode::FORBIDDEN, false).is_refusal());
        assert!(e(StatusCode::NOT_FOUND, false).is_refusal());
        assert!(e(StatusCode::UNPROCESSABLE_ENTITY, false).is_refusal());
        assert!(!e(StatusCode::FORBIDDEN, true).is_refusal());
        assert!(!e(StatusCode::BAD_GATEWAY, false).is_refusal());
        assert!(!e(StatusCode::UNAUTHORIZED, false).is_refusal());
        let wrapped = anyhow::Error::new(e(StatusCode::NOT_FOUND, false)).context("publishing");
        assert!(GitHubError::refusal_in(&wrapped).is_some());
    }
}
