//! Shared helpers of the service tests: stores on both backends, signed webhook
//! requests, fixture payloads, a GitOps repository in the fake GitHub, polling, and
//! the service harness ([`Service`]) whose verbs drive it all as a user would.
#![allow(dead_code)]

use meshward::clock::Clock;
use meshward::github::{webhook, AppIdentity, GitHub, GitHubAuth, GitHubConfig, RetryPolicy};
use meshward::jobs::{QueueConfig, Worker};
use meshward::metrics::Metrics;
use meshward::server::AppState;
use meshward::store::Store;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub mod fake_github;

pub use fake_github::{FakeGitHub, APP_ID, APP_SLUG};

pub mod harness;
pub mod proxy;
pub mod seed;

pub use harness::{check_job, Service};

pub const SECRET: &str = "test-webhook-secret";
pub const REPO: &str = "acme/gitops";
pub const REPO_ID: i64 = 1001;
pub const INSTALLATION: i64 = 77;
pub const TOKEN: &str = "ghp_test_token";

/// Runs the same async test body against PostgreSQL (`#[sqlx::test]`: a fresh
/// database per test) and SQLite (a temp file):
/// `contract!(name1, name2)` for `async fn nameN(store: Store)` in scope.
#[macro_export]
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[sqlx::test(migrations = false)]
                async fn $name(pool: sqlx::PgPool) {
                    super::$name(meshward::store::Store::from_pg(pool)).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (_dir, store) = $crate::service_support::sqlite_store().await;
                    super::$name(store).await
                }
            )*
        }
    };
}

pub async fn sqlite_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open_sqlite(&dir.path().join("meshward.db"))
        .await
        .expect("sqlite store");
    (dir, store)
}

pub async fn migrated(store: Store) -> Store {
    store.migrate().await.expect("migrate");
    store
}

/// A fixture payload from tests/fixtures/github.
pub fn payload(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/github/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("json")
}

/// A pull_request payload for `REPO`.
pub fn pr_event(action: &str, number: i64, base_sha: &str, head_sha: &str) -> Value {
    let mut p = payload("pull_request.opened");
    p["action"] = action.into();
    p["number"] = number.into();
    p["pull_request"]["number"] = number.into();
    p["pull_request"]["head"]["sha"] = head_sha.into();
    p["pull_request"]["base"]["sha"] = base_sha.into();
    p["pull_request"]["base"]["ref"] = "main".into();
    p
}

pub fn push_event(after: &str) -> Value {
    let mut p = payload("push");
    p["after"] = after.into();
    p["head_commit"]["id"] = after.into();
    p
}

/// A webhook request, signed with `secret` (None: unsigned).
pub fn webhook_request(
    event: &str,
    delivery: &str,
    body: &[u8],
    secret: Option<&str>,
) -> http::Request<axum::body::Body> {
    let mut b = http::Request::builder()
        .method("POST")
        .uri("/webhooks/github")
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", delivery);
    if let Some(secret) = secret {
        b = b.header("x-hub-signature-256", webhook::sign(secret, body));
    }
    b.body(axum::body::Body::from(body.to_vec()))
        .expect("request")
}

pub fn app_state(store: Store, metrics: Metrics, clock: Clock) -> AppState {
    AppState {
        store,
        secrets: meshward::github::WebhookSecrets::parse(&secrecy::SecretString::from(format!(
            "old-secret,{SECRET}"
        ))),
        app: AppIdentity {
            id: Some(APP_ID),
            slug: Some(APP_SLUG.to_string()),
        },
        metrics,
        wake: Arc::new(tokio::sync::Notify::new()),
        clock,
        max_attempts: 3,
        max_body_bytes: 1024 * 1024,
        api: meshward::server::ApiConfig {
            tokens: meshward::server::auth::ApiTokens::parse(&secrecy::SecretString::from(
                API_TOKEN.to_string(),
            ))
            .expect("token"),
            ..Default::default()
        },
    }
}

/// The API token the test services accept.
pub const API_TOKEN: &str = "test-api-token-0123456789";

/// Sends a request through the router (no socket) and returns status and body.
pub async fn send(app: &axum::Router, req: http::Request<axum::body::Body>) -> (u16, String) {
    use tower::ServiceExt;
    let resp = app.clone().oneshot(req).await.expect("router");
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&body).into_owned())
}

pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_secs(2),
    }
}

/// A GitHub client in App mode against the fake.
pub fn app_github(fake: &FakeGitHub, metrics: &Metrics) -> GitHub {
    let mut cfg = GitHubConfig::new(
        Some(fake.url()),
        GitHubAuth::App {
            app_id: APP_ID as u64,
            private_key_pem: secrecy::SecretString::from(fake_github::app_private_key()),
        },
    );
    cfg.retry = fast_retry();
    GitHub::new(cfg, metrics.clone()).expect("github client")
}

/// A GitHub client in token mode against the fake.
pub fn token_github(fake: &FakeGitHub, metrics: &Metrics) -> GitHub {
    fake.add_personal_token(TOKEN);
    let mut cfg = GitHubConfig::new(
        Some(fake.url()),
        GitHubAuth::Token(secrecy::SecretString::from(TOKEN.to_string())),
    );
    cfg.retry = fast_retry();
    GitHub::new(cfg, metrics.clone()).expect("github client")
}

pub fn queue_config() -> QueueConfig {
    QueueConfig {
        workers: 2,
        lease: Duration::from_secs(60),
        max_attempts: 3,
        poll_interval: Duration::from_millis(50),
        backoff_base: Duration::from_secs(10),
        backoff_max: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(5),
        phases: Default::default(),
    }
}

pub fn worker(store: &Store, github: Option<GitHub>, metrics: &Metrics, clock: &Clock) -> Worker {
    worker_with(store, github, metrics, clock, queue_config())
}

/// [`worker`] with a queue configuration of the test's own.
pub fn worker_with(
    store: &Store,
    github: Option<GitHub>,
    metrics: &Metrics,
    clock: &Clock,
    config: QueueConfig,
) -> Worker {
    Worker::new(
        store.clone(),
        github,
        metrics.clone(),
        config,
        clock.clone(),
    )
}

pub const NAMESPACE: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: egress
  labels:
    istio-injection: enabled
";

/// A ServiceEntry with resolution NONE and endpoints: `serviceentry/none-with-endpoints`.
pub const BAD_SERVICE_ENTRY: &str = "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: payments-api
  namespace: egress
spec:
  hosts:
    - api.payments.example.com
  location: MESH_EXTERNAL
  resolution: NONE
  ports:
    - number: 443
      name: https
      protocol: TLS
  endpoints:
    - address: 203.0.113.10
";

/// The fake holds `REPO` with a base commit (a namespace) and a PR head that adds
/// the bad ServiceEntry. Returns (base sha, head sha).
pub fn gitops_repo(fake: &FakeGitHub) -> (String, String) {
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[("clusters/prod/namespace.yaml", NAMESPACE)]);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[
            ("clusters/prod/namespace.yaml", NAMESPACE),
            ("clusters/prod/payments.yaml", BAD_SERVICE_ENTRY),
        ],
    );
    fake.open_pull(REPO, 7, &base, &head);
    (base, head)
}

/// Polls `check` until it returns Some, at most `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
