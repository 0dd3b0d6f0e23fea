//! Dashboard handlers: `/` (repositories), `/repos/{owner}/{repo}` (coverage over
//! time, namespaces, last runs), and the login that turns an API token into a
//! session cookie. Pages are rendered by [`crate::dashboard`].

use super::api::{self, ApiError};
use super::auth::{Access, SESSION_COOKIE};
use super::AppState;
use crate::dashboard;
use crate::store::RunsPageQuery;
use crate::trends::{LoadError, RepoHistory, Scope};
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use std::collections::HashMap;

/// Nothing but this server's own inline styles, data: images and forms.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub fn routes(state: AppState) -> Router<AppState> {
    let protected = Router::new()
        .route("/", get(repos))
        .route("/repos/{owner}/{repo}", get(repo))
        .route("/repos/{owner}/{repo}/runs/{id}", get(run))
        .route_layer(axum::middleware::from_fn_with_state(state, require_session));
    Router::new()
        .route("/login", get(login_form).post(login))
        .route("/logout", axum::routing::post(logout))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .merge(protected)
        .layer(axum::middleware::from_fn(security_headers))
}

async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// Only paths of this site: no `//host` or absolute URLs (no open redirect). Browsers
/// drop tabs and newlines from a URL and read `\\` as `/`, so `/<TAB>/evil` would be
/// `//evil`: anything but visible ASCII is refused, as is a second `/` or `\\`.
fn safe_next(next: &str) -> &str {
    let visible = next.bytes().all(|b| b.is_ascii_graphic() && b != b'\\');
    if visible && next.starts_with('/') && !next.starts_with("//") {
        next
    } else {
        "/"
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn the_login_redirect_stays_on_this_site() {
        for ok in ["/", "/repos", "/repos/acme%2Fgitops?window=30d#top"] {
            assert_eq!(safe_next(ok), ok);
        }
        for bad in [
            "//evil.example.com",
            "/\t/evil.example.com",
            "/\n/evil.example.com",
            "/\r\n/evil.example.com",
            "/ /evil.example.com",
            "/\\evil.example.com",
            "\\\\evil.example.com",
            "https://evil.example.com",
            "evil.example.com",
            "/\u{0}",
            "/r\u{e9}pos",
        ] {
            assert_eq!(safe_next(bad), "/", "{bad:?}");
        }
    }
}

async fn require_session(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match state.access(req.headers()) {
        Access::Granted => next.run(req).await,
        Access::NotConfigured => (
            StatusCode::FORBIDDEN,
            Html(dashboard::login_page(None, "/", false)),
        )
            .into_response(),
        Access::Denied(_) => {
            let target = req
                .uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/");
            let qs = serde_urlencoded::to_string([("next", target)]).unwrap_or_default();
            Redirect::to(&format!("/login?{qs}")).into_response()
        }
    }
}

async fn login_form(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let next = safe_next(q.get("next").map(String::as_str).unwrap_or("/"));
    Html(dashboard::login_page(
        None,
        next,
        !state.api.tokens.is_empty(),
    ))
    .into_response()
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
    #[serde(default)]
    next: String,
}

fn secure(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"))
}

async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = safe_next(&form.next).to_string();
    let ttl = state.api.session_ttl;
    let expires = state.clock.now_ms() + ttl.as_millis() as i64;
    match state.api.tokens.session(form.token.trim(), expires) {
        Some(value) => {
            let cookie = format!(
                "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
                ttl.as_secs(),
                if secure(&headers) { "; Secure" } else { "" }
            );
            let mut r = Redirect::to(&next).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        None => {
            tracing::warn!("dashboard login with a token that is not configured");
            // 200: the form again, with the error (a browser shows it; no failed load).
            (
                StatusCode::OK,
                Html(dashboard::login_page(
                    Some("That token is not one of this server's MESHWARD_API_TOKENS."),
                    &next,
                    !state.api.tokens.is_empty(),
                )),
            )
                .into_response()
        }
    }
}

async fn logout() -> Response {
    let mut r = Redirect::to("/login").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("meshward_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    r
}

fn page_error(e: ApiError) -> Response {
    let title = match e.0 {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::BAD_REQUEST => "Bad request",
        _ => "Unavailable",
    };
    (e.0, Html(dashboard::message_page(title, &e.1))).into_response()
}

async fn repos(State(state): State<AppState>) -> Response {
    match api::repo_views(&state).await {
        Ok(repos) => Html(dashboard::repos_page(&repos)).into_response(),
        Err(e) => page_error(e.into()),
    }
}

async fn repo(
    State(state): State<AppState>,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match repo_inner(&state, &owner, &repo, &q).await {
        Ok(html) => Html(html).into_response(),
        Err(e) => page_error(e),
    }
}

async fn run(
    State(state): State<AppState>,
    Path((owner, repo, id)): Path<(String, String, String)>,
) -> Response {
    match run_inner(&state, &owner, &repo, &id).await {
        Ok(html) => Html(html).into_response(),
        Err(e) => page_error(e),
    }
}

async fn run_inner(
    state: &AppState,
    owner: &str,
    repo: &str,
    id: &str,
) -> Result<String, ApiError> {
    let name = api::repo_name(owner, repo)?;
    let id: i64 = id
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, "run: not a run number".into()))?;
    let (repo_id, name) = state
        .store
        .find_repo(&name)
        .await?
        .ok_or_else(|| LoadError::UnknownRepo(name.clone()))?;
    let (mut page, _) = state
        .store
        .runs_page(&RunsPageQuery {
            repo_id,
            before_id: Some(id.saturating_add(1)),
            limit: 1,
            ..Default::default()
        })
        .await?;
    let found = page.pop().filter(|r| r.run.id == id).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            format!("no run {id} of {name}: it may have been deleted by retention"),
        )
    })?;
    let findings = state.store.findings(id).await?;
    let namespaces = state.store.namespace_metrics(id).await?;
    let coverage = state.store.coverage(id).await?;
    let view = crate::trends::views::run_view(found, &state.api.github_web_url);
    Ok(dashboard::run_page(
        &name,
        &view,
        &findings,
        &namespaces,
        &coverage,
    ))
}

async fn repo_inner(
    state: &AppState,
    owner: &str,
    repo: &str,
    q: &HashMap<String, String>,
) -> Result<String, ApiError> {
    api::params(q, &["from", "to", "interval", "cluster", "namespace"])?;
    let name = api::repo_name(owner, repo)?;
    let scope = Scope {
        cluster: api::cluster_param(q.get("cluster"))?,
        namespace: api::namespace_param(q.get("namespace"))?,
    };
    let range = api::range_param(q, state.clock.now_ms())?;
    let history = RepoHistory::open(&state.store, &name).await?;
    let series = history.series(&state.store, scope, &range).await?;
    let mut cluster_series = Vec::new();
    if scope.cluster.is_none() {
        for cluster in history.clusters.iter().take(dashboard::MAX_CLUSTER_LINES) {
            let of_cluster = Scope {
                cluster: Some(cluster),
                ..scope
            };
            cluster_series.push(history.series(&state.store, of_cluster, &range).await?);
        }
    }
    let namespaces = match (
        scope.namespace,
        series.latest().and_then(|p| p.run.as_ref()),
    ) {
        (None, Some(run)) => state
            .store
            .namespace_metrics(run.id)
            .await?
            .into_iter()
            .filter(|n| scope.cluster.is_none() || n.cluster.as_deref() == scope.cluster)
            .collect(),
        _ => Vec::new(),
    };
    let (runs, _) = state
        .store
        .runs_page(&RunsPageQuery {
            repo_id: history.repo_id,
            limit: 20,
            ..Default::default()
        })
        .await?;
    let runs: Vec<_> = runs
        .into_iter()
        .map(|r| crate::trends::views::run_view(r, &state.api.github_web_url))
        .collect();
    let mut query: Vec<(String, String)> = q
        .iter()
        .filter(|(k, v)| !matches!(k.as_str(), "cluster" | "namespace") && !v.is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    query.sort();
    if let Some(c) = scope.cluster {
        query.push(("cluster".into(), c.into()));
    }
    if let Some(ns) = scope.namespace {
        query.push(("namespace".into(), ns.into()));
    }
    Ok(dashboard::repo_page(&dashboard::RepoPage {
        series: &series,
        cluster_series: &cluster_series,
        namespaces: &namespaces,
        runs: &runs,
        query: &query,
    }))
}
