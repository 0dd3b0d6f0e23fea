//! `meshward serve`: wiring the store, GitHub client, workers and HTTP server
//! together from a [`ServiceConfig`] (the command line builds it: [`crate::cli`]).

use crate::clock::Clock;
use crate::evidence::PrometheusSource;
use crate::github::{AppIdentity, GitHub, GitHubConfig, WebhookSecrets};
use crate::jobs::{self, QueueConfig, Worker};
use crate::metrics::Metrics;
use crate::server::{self, AppState};
use crate::store::Store;
use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The web address of GitHub for an API root: `https://github.com` for github.com,
/// `https://HOST` for GitHub Enterprise's `https://HOST/api/v3`.
pub fn github_web_url(api_url: Option<&str>) -> String {
    match api_url.map(|u| u.trim_end_matches('/')) {
        None | Some("https://api.github.com") => "https://github.com".into(),
        Some(u) => u.strip_suffix("/api/v3").unwrap_or(u).to_string(),
    }
}

/// `meshward migrate`.
/// The service's settings, secrets wrapped so they are never printed.
pub struct ServiceConfig {
    pub listen: String,
    pub secrets: WebhookSecrets,
    pub app: AppIdentity,
    pub github: Option<GitHubConfig>,
    pub public_url: Option<String>,
    pub queue: QueueConfig,
    pub max_body_bytes: usize,
    pub listen_limits: crate::server::listen::ListenLimits,
    pub skip_migrations: bool,
    /// Where check jobs gather zero-plaintext evidence.
    pub evidence: Arc<PrometheusSource>,
    pub api: crate::server::ApiConfig,
    /// PR runs older than this are deleted; None keeps them.
    pub pr_run_retention: Option<Duration>,
}

/// meshward's temporary folders older than this are a dead process's, removed at start.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// How often retention looks for old PR runs.
pub const RETENTION_EVERY: Duration = Duration::from_secs(3600);

/// Deletes PR runs older than `age` now and every `every` until `shutdown`.
pub async fn retention_loop(
    store: Store,
    metrics: Metrics,
    clock: Clock,
    age: Duration,
    every: Duration,
    shutdown: CancellationToken,
) {
    loop {
        let cutoff = clock.now_ms() - age.as_millis() as i64;
        match store.prune_check_runs(cutoff).await {
            Ok(0) => {}
            Ok(n) => {
                metrics.runs_pruned.inc_by(n);
                tracing::info!(
                    deleted = n,
                    older_than_days = age.as_secs() / 86_400,
                    "retention: PR runs deleted"
                );
            }
            Err(e) => tracing::warn!(
                error = format!("{e:#}"),
                "retention: cannot delete old PR runs"
            ),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Runs the service on `store` until `shutdown` is cancelled, then stops taking
/// webhooks and jobs and waits for the workers.
pub async fn serve(config: ServiceConfig, store: Store, shutdown: CancellationToken) -> Result<()> {
    if !config.skip_migrations {
        store.migrate().await?;
    }
    let metrics = Metrics::new();
    // Trees a killed process unpacked stay in the temp folder; an hour is longer than
    // any job holds one.
    let removed = crate::workspace::remove_stale_temp(STALE_TEMP_AGE);
    if removed > 0 {
        tracing::info!(removed, "removed temporary folders a previous process left");
    }
    if config.secrets.is_empty() {
        tracing::warn!(
            "MESHWARD_WEBHOOK_SECRET is not set: every webhook delivery is refused (401)"
        );
    }
    let github = match config.github {
        Some(gh) => Some(GitHub::new(gh, metrics.clone())?),
        None => {
            tracing::warn!("no GitHub credentials: jobs are queued but not run");
            None
        }
    };
    let wake = Arc::new(Notify::new());
    let clock = Clock::System;
    let workers = if github.is_some() && config.queue.workers > 0 {
        let mut proto = Worker::new(
            store.clone(),
            github.clone(),
            metrics.clone(),
            config.queue.clone(),
            clock.clone(),
        )
        .with_evidence(config.evidence.clone());
        proto.public_url = config.public_url.clone();
        Some(jobs::spawn_pool(&proto, shutdown.clone(), wake.clone()))
    } else {
        None
    };
    let state = AppState {
        store: store.clone(),
        secrets: config.secrets,
        app: config.app,
        metrics,
        wake,
        clock,
        max_attempts: config.queue.max_attempts,
        max_body_bytes: config.max_body_bytes,
        api: config.api,
    };
    if state.api.tokens.is_empty() {
        tracing::warn!(
            "MESHWARD_API_TOKENS is not set: the trends API and the dashboard refuse every request"
        );
    }
    let retention = config.pr_run_retention.map(|age| {
        tokio::spawn(retention_loop(
            store.clone(),
            state.metrics.clone(),
            state.clock.clone(),
            age,
            RETENTION_EVERY,
            shutdown.clone(),
        ))
    });
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, workers = config.queue.workers, backend = ?store.backend(), "meshward serve listening");
    // Tests and scripts read the bound address (useful with port 0).
    println!("listening on {addr}");
    server::listen::serve(
        listener,
        server::router(state),
        config.listen_limits,
        shutdown.clone(),
    )
    .await
    .context("HTTP server")?;
    if let Some(mut set) = workers {
        while set.join_next().await.is_some() {}
    }
    if let Some(task) = retention {
        let _ = task.await;
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}
