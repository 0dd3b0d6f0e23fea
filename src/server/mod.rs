//! The HTTP service: `POST /webhooks/github`, health, readiness and metrics, the
//! read-only trends API (`/api/v1`) and the dashboard.
//!
//! The webhook handler only verifies, parses, records (deduplicating on the delivery
//! id), enqueues and answers; all work happens in the workers. The API and the
//! dashboard need a token from `MESHWARD_API_TOKENS` ([`auth`]); the webhook does not.

pub mod api;
pub mod auth;
pub mod dashboard;
pub mod listen;

use crate::clock::Clock;
use crate::github::{events, AppIdentity, WebhookSecrets};
use crate::jobs::intake::{self, Decision};
use crate::metrics::Metrics;
use crate::store::{DeliveryOutcome, JobState, NewDelivery, Store};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use tokio::sync::Notify;
use tracing::Instrument;

/// Everything the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub secrets: WebhookSecrets,
    pub app: AppIdentity,
    pub metrics: Metrics,
    /// Wakes idle workers when a job is queued.
    pub wake: Arc<Notify>,
    pub clock: Clock,
    pub max_attempts: i64,
    /// Largest webhook body accepted (413 above).
    pub max_body_bytes: usize,
    /// The trends API and dashboard.
    pub api: ApiConfig,
}

/// Settings of the trends API and the dashboard.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// Bearer tokens (and the keys of session cookies); none: API and dashboard off.
    pub tokens: auth::ApiTokens,
    /// How long a dashboard session lasts.
    pub session_ttl: std::time::Duration,
    /// Where links to pull requests and commits point (`https://github.com`).
    pub github_web_url: String,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            tokens: auth::ApiTokens::default(),
            session_ttl: std::time::Duration::from_secs(12 * 3600),
            github_web_url: "https://github.com".into(),
        }
    }
}

impl AppState {
    /// Whether a request's API token or session cookie grants access now.
    fn access(&self, headers: &HeaderMap) -> auth::Access {
        let now = self.clock.now_ms();
        self.api
            .tokens
            .authorized(headers, now, self.api.session_ttl)
    }
}

pub fn router(state: AppState) -> Router {
    let limit = state.max_body_bytes;
    Router::new()
        .route(
            "/webhooks/github",
            post(webhook).layer(DefaultBodyLimit::max(limit)),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .merge(api::routes(state.clone()))
        .merge(dashboard::routes(state.clone()))
        .with_state(state)
}

/// How long a webhook waits for the database before answering 503.
pub const WEBHOOK_DB_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

async fn readyz(State(state): State<AppState>) -> Response {
    match state.store.ready().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {e:#}\n"),
        )
            .into_response(),
    }
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    match state.store.job_counts().await {
        Ok(counts) => {
            for s in JobState::ALL {
                let n = counts.iter().find(|(c, _)| *c == s).map_or(0, |(_, n)| *n);
                state.metrics.jobs.with_label_values(&[s.as_str()]).set(n);
                if s == JobState::Queued {
                    state.metrics.queue_depth.set(n);
                }
            }
        }
        Err(e) => tracing::warn!(error = format!("{e:#}"), "metrics: cannot count jobs"),
    }
    match state.store.repo_overview().await {
        Ok(repos) => state.metrics.set_coverage(&repos),
        Err(e) => tracing::warn!(error = format!("{e:#}"), "metrics: cannot read coverage"),
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn webhook(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let event = header(&headers, "x-github-event").unwrap_or("").to_string();
    let delivery = header(&headers, "x-github-delivery")
        .unwrap_or("")
        .to_string();
    let span = tracing::info_span!(
        "delivery",
        delivery_id = %delivery,
        event = %event,
        repo = tracing::field::Empty,
        pr = tracing::field::Empty,
        head_sha = tracing::field::Empty,
    );
    let (status, outcome, message) = handle_webhook(&state, &headers, &event, &delivery, &body)
        .instrument(span)
        .await;
    let event_label = if events::HANDLED_EVENTS.contains(&event.as_str()) || event == "ping" {
        event.as_str()
    } else {
        "other"
    };
    state
        .metrics
        .deliveries
        .with_label_values(&[event_label, outcome])
        .inc();
    (status, message).into_response()
}

async fn handle_webhook(
    state: &AppState,
    headers: &HeaderMap,
    event: &str,
    delivery: &str,
    body: &[u8],
) -> (StatusCode, &'static str, String) {
    let signature = header(headers, "x-hub-signature-256");
    if !state.secrets.verify(signature, body) {
        tracing::warn!(
            signed = signature.is_some(),
            "webhook signature missing or wrong; delivery rejected"
        );
        return (
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "bad or missing X-Hub-Signature-256\n".into(),
        );
    }
    if event.is_empty() || delivery.is_empty() || delivery.len() > 200 {
        return (
            StatusCode::BAD_REQUEST,
            "bad_request",
            "X-GitHub-Event and X-GitHub-Delivery are required\n".into(),
        );
    }
    let interpreted = match intake::interpret(event, body, &state.app) {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "webhook payload does not parse");
            return (
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the {event} payload does not parse: {e}\n"),
            );
        }
    };
    let span = tracing::Span::current();
    if let Some(repo) = &interpreted.repo {
        span.record("repo", repo.as_str());
    }
    if let Some(pr) = interpreted.pr {
        span.record("pr", pr);
    }
    if let Some(sha) = &interpreted.head_sha {
        span.record("head_sha", sha.as_str());
    }
    let (outcome, effect) = match interpreted.decision {
        Decision::Ignore(why) => {
            tracing::info!(action = interpreted.action.as_deref(), reason = %why, "delivery ignored");
            return (StatusCode::NO_CONTENT, "ignored", String::new());
        }
        Decision::Act { outcome, effect } => (outcome, effect),
    };
    let record = NewDelivery {
        delivery_id: delivery.to_string(),
        event: event.to_string(),
        action: interpreted.action.clone(),
        repo: interpreted.repo.clone(),
        outcome: outcome.to_string(),
    };
    let now = state.clock.now_ms();
    // GitHub waits 10 s and then logs a timeout, not our answer: a database that does
    // not answer in time is a 503 it can act on (redelivery). A delivery committed as
    // the deadline passes is a duplicate when redelivered, so nothing is lost.
    let recorded = tokio::time::timeout(
        WEBHOOK_DB_DEADLINE,
        state
            .store
            .record_delivery(&record, &effect, state.max_attempts, now),
    )
    .await
    .unwrap_or_else(|_| {
        Err(anyhow::anyhow!(
            "the database did not answer within {}s",
            WEBHOOK_DB_DEADLINE.as_secs()
        ))
    });
    match recorded {
        Ok(DeliveryOutcome::Duplicate) => {
            tracing::info!("delivery seen before; nothing done");
            (
                StatusCode::OK,
                "duplicate",
                "delivery already received\n".into(),
            )
        }
        Ok(DeliveryOutcome::Recorded { jobs }) => {
            if !jobs.is_empty() {
                state.wake.notify_waiters();
            }
            let ids: Vec<i64> = jobs.iter().map(|j| j.id()).collect();
            tracing::info!(?ids, outcome, "delivery accepted");
            (
                StatusCode::ACCEPTED,
                outcome,
                serde_json::json!({ "jobs": ids }).to_string() + "\n",
            )
        }
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "cannot record the delivery");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "error",
                "cannot record the delivery now; redeliver it later\n".into(),
            )
        }
    }
}
