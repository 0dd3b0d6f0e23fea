//! Workers of the durable job queue (the queue itself lives in [`crate::store`]):
//! claim a job with a lease, keep the lease alive while working, run the check
//! through GitHub and the pipeline, store the run, publish it to the pull request;
//! on failure retry with exponential backoff up to the job's attempt limit (a run
//! already stored is published again, not checked again). Tests drive a [`Worker`] with
//! [`Worker::run_until_idle`] and a [`Clock`] they control.

mod execute;

pub use execute::Permanent;

use crate::github::GitHub;
use crate::server::metrics::Metrics;
use crate::store::{Job, JobState, NewRun, Store};
use anyhow::Result;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Milliseconds since the epoch: the system clock, or one a test moves by hand.
#[derive(Clone, Debug)]
pub enum Clock {
    System,
    Manual(Arc<AtomicI64>),
}

impl Clock {
    pub fn manual(start_ms: i64) -> Clock {
        Clock::Manual(Arc::new(AtomicI64::new(start_ms)))
    }
    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => chrono::Utc::now().timestamp_millis(),
            Clock::Manual(t) => t.load(Ordering::SeqCst),
        }
    }
    /// Moves a manual clock forward (no effect on the system clock).
    pub fn advance(&self, by: Duration) {
        if let Clock::Manual(t) = self {
            t.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
        }
    }
}

#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// Concurrent workers in this process.
    pub workers: usize,
    /// How long a claimed job stays reserved without a heartbeat.
    pub lease: Duration,
    /// Attempts before a job is `failed`.
    pub max_attempts: i64,
    /// How often an idle worker looks for work (a new delivery also wakes it).
    pub poll_interval: Duration,
    /// Backoff after the first failed attempt; doubled for each further one.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// On shutdown, how long in-flight jobs may take before they are released.
    pub shutdown_grace: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            workers: 2,
            lease: Duration::from_secs(300),
            max_attempts: 5,
            poll_interval: Duration::from_secs(2),
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(15 * 60),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

impl QueueConfig {
    /// The wait before attempt `attempts + 1`, after `attempts` failures.
    pub fn backoff(&self, attempts: i64) -> Duration {
        let exp = attempts.saturating_sub(1).clamp(0, 30) as u32;
        self.backoff_base
            .saturating_mul(2u32.saturating_pow(exp))
            .min(self.backoff_max)
    }
}

/// What happened to a claimed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processed {
    Succeeded {
        run_id: i64,
    },
    /// Failed; queued again after a backoff.
    Retrying {
        error: String,
    },
    /// Failed for the last time; an `error` run was stored.
    Failed {
        error: String,
    },
    /// Another worker took the job (our lease expired): nothing stored.
    LeaseLost,
    /// Given back on shutdown, not counted as an attempt.
    Released,
}

impl Processed {
    fn label(&self) -> &'static str {
        match self {
            Processed::Succeeded { .. } => "succeeded",
            Processed::Retrying { .. } => "retry",
            Processed::Failed { .. } => "failed",
            Processed::LeaseLost => "lost",
            Processed::Released => "released",
        }
    }
}

/// One worker: claims and runs jobs one at a time.
#[derive(Clone)]
pub struct Worker {
    pub store: Store,
    pub github: Option<GitHub>,
    pub metrics: Metrics,
    pub config: Arc<QueueConfig>,
    pub clock: Clock,
    /// Unique among all workers on the database: it is the lease holder's name.
    pub name: String,
    /// meshward's public address: check runs link to the run's page under it.
    pub public_url: Option<String>,
}

static WORKER_SEQ: AtomicU64 = AtomicU64::new(0);

/// A worker name unique across processes and hosts: host, pid, sequence.
pub fn worker_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "meshward".to_string());
    format!(
        "{host}-{}-{}",
        std::process::id(),
        WORKER_SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

impl Worker {
    pub fn new(
        store: Store,
        github: Option<GitHub>,
        metrics: Metrics,
        config: QueueConfig,
        clock: Clock,
    ) -> Worker {
        Worker {
            store,
            github,
            metrics,
            config: Arc::new(config),
            clock,
            name: worker_name(),
            public_url: None,
        }
    }

    /// The same worker under a new name (for a pool).
    pub fn another(&self) -> Worker {
        Worker {
            name: worker_name(),
            ..self.clone()
        }
    }

    fn lease_ms(&self) -> i64 {
        self.config.lease.as_millis() as i64
    }

    /// Claims one due job and runs it. None: nothing was due.
    pub async fn run_once(&self) -> Result<Option<(Job, Processed)>> {
        self.run_once_with(&CancellationToken::new()).await
    }

    /// Runs due jobs until none is left; returns what happened to each.
    pub async fn run_until_idle(&self) -> Result<Vec<(Job, Processed)>> {
        let mut done = Vec::new();
        while let Some(r) = self.run_once().await? {
            done.push(r);
        }
        Ok(done)
    }

    async fn run_once_with(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<Option<(Job, Processed)>> {
        let now = self.clock.now_ms();
        let Some(job) = self.store.claim(&self.name, now, self.lease_ms()).await? else {
            return Ok(None);
        };
        let span = tracing::info_span!(
            "job",
            job_id = job.id,
            kind = job.kind.as_str(),
            repo = %job.repo,
            pr = job.pr_number,
            head_sha = %job.head_sha,
            attempt = job.attempts,
        );
        let processed = self.process(&job, shutdown).instrument(span).await?;
        Ok(Some((job, processed)))
    }

    async fn process(&self, job: &Job, shutdown: &CancellationToken) -> Result<Processed> {
        let started = std::time::Instant::now();
        let started_ms = self.clock.now_ms();
        tracing::info!("job started");
        let outcome = if job.attempts > job.max_attempts {
            // Claimed again after its lease ran out more often than it may be tried:
            // its workers keep dying on it.
            Err(anyhow::anyhow!(
                "gave up: the job's worker was lost {} times",
                job.attempts - 1
            ))
        } else {
            let lost = CancellationToken::new();
            let heartbeat = self.spawn_heartbeat(job.id, lost.clone());
            let grace = self.config.shutdown_grace;
            let result = tokio::select! {
                r = execute::execute(self, job, started_ms) => Some(r),
                _ = lost.cancelled() => None,
                _ = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
                    heartbeat.abort();
                    let released = self.store.release(job.id, &self.name, self.clock.now_ms()).await?;
                    tracing::warn!(released, "shutting down: job given back to the queue");
                    return Ok(self.finish(job, started, Processed::Released));
                }
            };
            heartbeat.abort();
            match result {
                None => {
                    tracing::warn!("lease lost: another worker has the job");
                    return Ok(self.finish(job, started, Processed::LeaseLost));
                }
                Some(r) => r,
            }
        };
        let now = self.clock.now_ms();
        let processed = match outcome {
            Ok(execute::Done::Stored { run_id, outcome }) => {
                if self.store.finish(job, &self.name, now).await? {
                    self.metrics
                        .check_results
                        .with_label_values(&[job.kind.as_str(), outcome.as_str()])
                        .inc();
                    Processed::Succeeded { run_id }
                } else {
                    Processed::LeaseLost
                }
            }
            Ok(execute::Done::LeaseLost) => Processed::LeaseLost,
            Err(e) => {
                // GitHub refusing for good (app uninstalled, permission missing) is
                // as final as a bad config file: no retry storm.
                let refusal = crate::publish::post::refusal_reason(&job.repo, &e);
                let refused = refusal.is_some();
                let error = refusal.unwrap_or_else(|| format!("{e:#}"));
                let permanent = refused || e.downcast_ref::<execute::Permanent>().is_some();
                // A rate limit's own wait wins over a shorter backoff.
                let wait = self
                    .config
                    .backoff(job.attempts)
                    .max(crate::github::GitHubError::retry_after_in(&e).unwrap_or_default());
                let retry_at = now + wait.as_millis() as i64;
                let run = NewRun {
                    kind: job.kind,
                    repo_id: job.repo_id,
                    repo: &job.repo,
                    pr_number: job.pr_number,
                    head_sha: &job.head_sha,
                    base_sha: job.base_sha.as_deref(),
                    started_at_ms: started_ms,
                    finished_at_ms: now,
                    report: None,
                    error: Some(&error),
                };
                match self
                    .store
                    .fail(job, &self.name, &error, permanent, retry_at, &run, now)
                    .await?
                {
                    Some(JobState::Failed) => {
                        self.metrics
                            .check_results
                            .with_label_values(&[job.kind.as_str(), "error"])
                            .inc();
                        tracing::error!(error, "job failed for good");
                        execute::report_failure(self, job, &error, refused).await;
                        Processed::Failed { error }
                    }
                    Some(_) => {
                        tracing::warn!(error, retry_at, "job failed; will retry");
                        Processed::Retrying { error }
                    }
                    None => Processed::LeaseLost,
                }
            }
        };
        Ok(self.finish(job, started, processed))
    }

    fn finish(&self, job: &Job, started: std::time::Instant, p: Processed) -> Processed {
        self.metrics
            .job_duration
            .with_label_values(&[job.kind.as_str(), p.label()])
            .observe(started.elapsed().as_secs_f64());
        p
    }

    /// Extends the lease every third of its length; cancels `lost` if it cannot.
    fn spawn_heartbeat(&self, job_id: i64, lost: CancellationToken) -> tokio::task::JoinHandle<()> {
        let worker = self.clone();
        let every = (self.config.lease / 3).max(Duration::from_millis(10));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let now = worker.clock.now_ms();
                match worker
                    .store
                    .heartbeat(job_id, &worker.name, now, worker.lease_ms())
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        lost.cancel();
                        return;
                    }
                    Err(e) => tracing::warn!(error = %e, "lease heartbeat failed"),
                }
            }
        })
    }

    /// Works until `shutdown`: claims jobs, sleeps when idle (woken early by `wake`).
    pub async fn run(self, shutdown: CancellationToken, wake: Arc<Notify>) {
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            match self.run_once_with(&shutdown).await {
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => tracing::error!(error = format!("{e:#}"), "queue error"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = wake.notified() => {}
                _ = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
        tracing::debug!(worker = %self.name, "worker stopped");
    }
}

/// Starts `config.workers` workers; they stop (finishing or releasing what they hold)
/// when `shutdown` is cancelled. Await the returned set to wait for them.
pub fn spawn_pool(
    proto: &Worker,
    shutdown: CancellationToken,
    wake: Arc<Notify>,
) -> tokio::task::JoinSet<()> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..proto.config.workers.max(1) {
        set.spawn(proto.another().run(shutdown.clone(), wake.clone()));
    }
    set
}
