//! The read-only trends API (`/api/v1`): repositories, coverage series, runs. JSON
//! in the shapes docs/openapi.json describes (a test holds every answer to it).

use super::auth::Access;
use super::AppState;
use crate::store::{JobKind, RunsPageQuery};
use crate::trends::views::{self, run_view, RepoView, RunView};
use crate::trends::{self, Interval, LoadError, Range, Scope, TrendsError};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::collections::HashMap;

/// The OpenAPI document of this API, checked in and served as is.
pub const OPENAPI: &str = include_str!("../../docs/openapi.json");

pub const DEFAULT_LIMIT: i64 = 20;
pub const MAX_LIMIT: i64 = 100;

pub fn routes(state: AppState) -> Router<AppState> {
    let protected = Router::new()
        .route("/api/v1/repos", get(repos))
        .route("/api/v1/repos/{owner}/{repo}/coverage", get(coverage))
        .route("/api/v1/repos/{owner}/{repo}/runs", get(runs))
        .route_layer(axum::middleware::from_fn_with_state(state, require_token));
    Router::new()
        .route(
            "/api/v1/openapi.json",
            get(|| async { ([(header::CONTENT_TYPE, "application/json")], OPENAPI) }),
        )
        .merge(protected)
}

/// An error answer: `{"error": "..."}`.
pub struct ApiError(pub StatusCode, pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

impl From<TrendsError> for ApiError {
    fn from(e: TrendsError) -> Self {
        ApiError(StatusCode::BAD_REQUEST, e.to_string())
    }
}

impl From<LoadError> for ApiError {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::UnknownRepo(_) | LoadError::UnknownCluster { .. } => {
                ApiError(StatusCode::NOT_FOUND, e.to_string())
            }
            LoadError::Other(e) => e.into(),
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        tracing::error!(error = format!("{e:#}"), "trends API: store error");
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the history store cannot answer now; try again".into(),
        )
    }
}

async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match state.access(req.headers()) {
        Access::Granted => next.run(req).await,
        Access::NotConfigured => ApiError(
            StatusCode::FORBIDDEN,
            "the trends API is off: no MESHWARD_API_TOKENS are configured".into(),
        )
        .into_response(),
        Access::Denied(why) => {
            let mut r = ApiError(StatusCode::UNAUTHORIZED, why.into()).into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"meshward\""),
            );
            r
        }
    }
}

/// Query parameters, checked against the names an endpoint takes.
pub fn params(q: &HashMap<String, String>, allowed: &[&str]) -> Result<(), TrendsError> {
    let mut unknown: Vec<&str> = q
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    unknown.sort();
    match unknown.first() {
        None => Ok(()),
        Some(k) => Err(TrendsError::Parameter {
            name: "query",
            message: format!(
                "unknown parameter `{}`; this endpoint takes {}",
                k.chars().take(40).collect::<String>(),
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            ),
        }),
    }
}

/// `owner/name` from the path, checked against GitHub's naming rules.
pub fn repo_name(owner: &str, repo: &str) -> Result<String, TrendsError> {
    let ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 100
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    if !ok(owner) || !ok(repo) {
        return Err(TrendsError::parameter(
            "repo",
            "not a GitHub repository name (owner/name: letters, digits, `-`, `_`, `.`)",
        ));
    }
    Ok(format!("{owner}/{repo}"))
}

/// A Kubernetes namespace name (RFC 1123 label).
pub fn namespace_param(ns: Option<&String>) -> Result<Option<&str>, TrendsError> {
    match ns.map(|s| s.as_str()) {
        None | Some("") => Ok(None),
        Some(ns) => {
            let ok = ns.len() <= 63
                && ns
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !ns.starts_with('-')
                && !ns.ends_with('-');
            if ok {
                Ok(Some(ns))
            } else {
                Err(TrendsError::parameter(
                    "namespace",
                    format!(
                        "`{}` is not a Kubernetes namespace name",
                        ns.chars().take(63).collect::<String>()
                    ),
                ))
            }
        }
    }
}

/// One cluster of the repository (see [`trends::cluster_name`]).
pub fn cluster_param(cluster: Option<&String>) -> Result<Option<&str>, TrendsError> {
    trends::cluster_name(cluster.map(String::as_str))
}

/// The range a request asks for (the dashboard uses the same parameters).
pub fn range_param(q: &HashMap<String, String>, now_ms: i64) -> Result<Range, TrendsError> {
    let interval = match q.get("interval").map(String::as_str) {
        None | Some("") => Interval::Day,
        Some(s) => Interval::parse(s)?,
    };
    Range::new(
        q.get("from").map(String::as_str),
        q.get("to").map(String::as_str),
        interval,
        now_ms,
    )
}

async fn coverage(
    State(state): State<AppState>,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    params(&q, &["from", "to", "interval", "cluster", "namespace"])?;
    let repo = repo_name(&owner, &repo)?;
    let scope = Scope {
        cluster: cluster_param(q.get("cluster"))?,
        namespace: namespace_param(q.get("namespace"))?,
    };
    let range = range_param(&q, state.clock.now_ms())?;
    let series = trends::load_series(&state.store, &repo, scope, &range).await?;
    Ok(Json(series).into_response())
}

/// Parses the paging parameters of the runs list.
pub fn runs_query(repo_id: i64, q: &HashMap<String, String>) -> Result<RunsPageQuery, TrendsError> {
    let int = |name: &'static str| -> Result<Option<i64>, TrendsError> {
        match q.get(name).map(String::as_str) {
            None | Some("") => Ok(None),
            Some(s) => s
                .parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .map(Some)
                .ok_or_else(|| {
                    TrendsError::parameter(
                        name,
                        format!(
                            "`{}` is not a positive whole number",
                            s.chars().take(40).collect::<String>()
                        ),
                    )
                }),
        }
    };
    let limit = int("limit")?.unwrap_or(DEFAULT_LIMIT);
    if limit > MAX_LIMIT {
        return Err(TrendsError::parameter(
            "limit",
            format!("{limit} is over the maximum of {MAX_LIMIT}"),
        ));
    }
    let before_id = match q.get("cursor").map(String::as_str) {
        None | Some("") => None,
        Some(c) => Some(
            c.strip_prefix("r")
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    TrendsError::parameter(
                        "cursor",
                        "not a cursor this API returned (use next_cursor)",
                    )
                })?,
        ),
    };
    let kind = match q.get("kind").map(String::as_str) {
        None | Some("") => None,
        Some("check") => Some(JobKind::Check),
        Some("baseline") => Some(JobKind::Baseline),
        Some(other) => {
            return Err(TrendsError::parameter(
                "kind",
                format!(
                    "`{}` is not a run kind: use check or baseline",
                    other.chars().take(40).collect::<String>()
                ),
            ))
        }
    };
    Ok(RunsPageQuery {
        repo_id,
        pr_number: int("pr")?,
        kind,
        before_id,
        limit,
    })
}

/// The cursor of the page after one ending with run `last_id`.
pub fn cursor_after(last_id: i64) -> String {
    format!("r{last_id}")
}

async fn runs(
    State(state): State<AppState>,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    params(&q, &["pr", "kind", "limit", "cursor"])?;
    let repo = repo_name(&owner, &repo)?;
    let (repo_id, name) = state
        .store
        .find_repo(&repo)
        .await?
        .ok_or_else(|| LoadError::UnknownRepo(repo.clone()))?;
    let query = runs_query(repo_id, &q)?;
    let (page, more) = state.store.runs_page(&query).await?;
    let next_cursor = if more {
        page.last().map(|r| cursor_after(r.run.id))
    } else {
        None
    };
    let runs: Vec<RunView> = page
        .into_iter()
        .map(|r| run_view(r, &state.api.github_web_url))
        .collect();
    Ok(Json(serde_json::json!({
        "repo": name,
        "runs": runs,
        "next_cursor": next_cursor,
    }))
    .into_response())
}

/// The repositories and their latest coverage, as the API and the dashboard show them.
pub async fn repo_views(state: &AppState) -> anyhow::Result<Vec<RepoView>> {
    Ok(views::repo_views(state.store.repo_overview().await?))
}

async fn repos(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    params(&q, &[])?;
    let repos = repo_views(&state).await?;
    Ok(Json(serde_json::json!({ "repos": repos })).into_response())
}
