//! Workers of the durable job queue (the queue itself lives in [`crate::store`]):
//! claim a job with a lease, keep the lease alive while working, run the check
//! through GitHub and the pipeline, store the run, publish it to the pull request;
//! on failure retry with exponential backoff up to the job's attempt limit (a run
//! already stored is published again, not checked again). Tests drive a [`Worker`] with
//! [`Worker::run_until_idle`] and a [`Clock`] they control.

mod error;
mod execute;
pub mod intake;

use error::JobError;

use crate::github::GitHub;
use crate::metrics::Metrics;
use crate::store::{Job, JobState, NewRun, Store};
use anyhow::Result;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::Clock;

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
    /// How long each phase of a job may take before the attempt fails.
    pub phases: PhaseDeadlines,
}

/// The phases of a job and how long each may take. Past its deadline, the attempt
/// fails with the phase named and is retried like any failure; a phase stuck where
/// even that cannot stop it (a call that blocks its thread) is noticed by the
/// heartbeat, which then stops renewing the lease.
#[derive(Debug, Clone)]
pub struct PhaseDeadlines {
    /// Finding the merge base, downloading and unpacking the commits.
    pub fetch: Duration,
    /// Rendering and evaluating them.
    pub check: Duration,
    /// Storing the run and publishing it on the pull request.
    pub publish: Duration,
}

impl Default for PhaseDeadlines {
    fn default() -> Self {
        PhaseDeadlines {
            fetch: Duration::from_secs(600),
            check: Duration::from_secs(900),
            publish: Duration::from_secs(300),
        }
    }
}

/// A phase of a job, as its deadline names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Fetch,
    Check,
    Publish,
}

impl Phase {
    fn describe(self) -> &'static str {
        match self {
            Phase::Fetch => "fetching the commits",
            Phase::Check => "checking the commits",
            Phase::Publish => "storing and publishing the result",
        }
    }
    fn setting(self) -> &'static str {
        match self {
            Phase::Fetch => "MESHWARD_JOB_FETCH_SECS",
            Phase::Check => "MESHWARD_JOB_CHECK_SECS",
            Phase::Publish => "MESHWARD_JOB_PUBLISH_SECS",
        }
    }
}

/// An attempt that outlived its phase's deadline: it fails (and is retried) with this.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("{} took longer than its deadline of {} s ({}); this attempt was stopped", .phase.describe(), .limit.as_secs(), .phase.setting())]
pub struct Overdue {
    pub phase: Phase,
    pub limit: Duration,
}

/// Which phase a job is in and until when it may be: written by the job, read by
/// its heartbeat.
#[derive(Clone, Default)]
pub(crate) struct Progress(Arc<std::sync::Mutex<Option<(Phase, Duration, std::time::Instant)>>>);

impl Progress {
    /// Runs `work` as `phase`, failing it with [`Overdue`] past `limit`.
    pub(crate) async fn within<T>(
        &self,
        phase: Phase,
        limit: Duration,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        if let Ok(mut p) = self.0.lock() {
            *p = Some((phase, limit, std::time::Instant::now() + limit));
        }
        let result = tokio::time::timeout(limit, work).await;
        if let Ok(mut p) = self.0.lock() {
            *p = None;
        }
        result.unwrap_or_else(|_| Err(Overdue { phase, limit }.into()))
    }

    /// The phase, if it is more than `grace` past its deadline.
    fn stuck(&self, grace: Duration) -> Option<Overdue> {
        let p = self.0.lock().ok()?;
        let (phase, limit, deadline) = (*p)?;
        (std::time::Instant::now() > deadline + grace).then_some(Overdue { phase, limit })
    }
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
            phases: PhaseDeadlines::default(),
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
    /// Given back to the queue, not counted as an attempt: on shutdown, or when the
    /// database did not take its result.
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
    /// Where check jobs gather zero-plaintext evidence (None: they get none).
    pub evidence: Option<Arc<crate::evidence::PrometheusSource>>,
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
            evidence: None,
        }
    }

    /// The same worker, gathering evidence for check jobs from `source`.
    pub fn with_evidence(self, source: Arc<crate::evidence::PrometheusSource>) -> Worker {
        Worker {
            evidence: Some(source),
            ..self
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
            Err(JobError::Transient(anyhow::anyhow!(
                "gave up: the job's worker was lost {} times",
                job.attempts - 1
            )))
        } else {
            let lost = CancellationToken::new();
            let progress = Progress::default();
            let stuck = Arc::new(std::sync::OnceLock::new());
            let heartbeat =
                self.spawn_heartbeat(job.id, lost.clone(), progress.clone(), stuck.clone());
            let grace = self.config.shutdown_grace;
            let result = tokio::select! {
                r = execute::execute(self, job, started_ms, &progress) => Some(r),
                // Stuck past its deadline: failed like any attempt, so it is retried;
                // otherwise another worker has the job.
                _ = lost.cancelled() => stuck.get().map(|overdue| Err(JobError::Transient(anyhow::Error::new(*overdue)))),
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
        let processed = match self.settle(job, outcome, started_ms).await {
            Ok(p) => p,
            Err(e) => {
                // The database did not take the result: the job is given back as soon
                // as it answers again, not when its lease runs out.
                tracing::warn!(
                    error = format!("{e:#}"),
                    "the database did not take the job's result; giving the job back when it answers"
                );
                self.give_back(job, shutdown).await
            }
        };
        Ok(self.finish(job, started, processed))
    }

    /// Records what an attempt gave: stored, retried or failed.
    async fn settle(
        &self,
        job: &Job,
        outcome: Result<execute::Done, JobError>,
        started_ms: i64,
    ) -> Result<Processed> {
        let now = self.clock.now_ms();
        Ok(match outcome {
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
                let error = e.to_string();
                let (permanent, refused, asked) = match &e {
                    // Trying again fixes no config file and changes no refusal by
                    // GitHub: the job fails now, no retry storm.
                    JobError::Permanent(_) => (true, false, Duration::ZERO),
                    JobError::Refused { .. } => (true, true, Duration::ZERO),
                    // A rate limit's own wait wins over a shorter backoff.
                    JobError::RateLimited { retry_after, .. } => (false, false, *retry_after),
                    JobError::Transient(_) => (false, false, Duration::ZERO),
                };
                let wait = self.config.backoff(job.attempts).max(asked);
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
        })
    }

    /// Gives the job back to the queue (not counted as an attempt) once the database
    /// answers, trying again and again until then; after a lease's time another
    /// worker may have it anyway.
    async fn give_back(&self, job: &Job, shutdown: &CancellationToken) -> Processed {
        let until = std::time::Instant::now() + self.config.lease;
        let mut wait = Duration::from_millis(200);
        while std::time::Instant::now() < until {
            match self
                .store
                .release(job.id, &self.name, self.clock.now_ms())
                .await
            {
                Ok(true) => {
                    tracing::info!("job given back to the queue");
                    return Processed::Released;
                }
                Ok(false) => return Processed::LeaseLost,
                Err(e) => tracing::debug!(error = format!("{e:#}"), "database still away"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(Duration::from_secs(5));
        }
        Processed::LeaseLost
    }

    fn finish(&self, job: &Job, started: std::time::Instant, p: Processed) -> Processed {
        self.metrics
            .job_duration
            .with_label_values(&[job.kind.as_str(), p.label()])
            .observe(started.elapsed().as_secs_f64());
        p
    }

    /// Extends the lease every third of its length; cancels `lost` if it cannot, or
    /// when the job's phase is stuck a third of a lease past its deadline (then the
    /// lease is not renewed, so even a worker that cannot stop it loses the job, and
    /// `stuck` says why).
    fn spawn_heartbeat(
        &self,
        job_id: i64,
        lost: CancellationToken,
        progress: Progress,
        stuck: Arc<std::sync::OnceLock<Overdue>>,
    ) -> tokio::task::JoinHandle<()> {
        let worker = self.clone();
        let every = (self.config.lease / 3).max(Duration::from_millis(10));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Some(overdue) = progress.stuck(every) {
                    tracing::error!(error = %overdue, "job stuck past its phase deadline: its lease is no longer renewed");
                    let _ = stuck.set(overdue);
                    lost.cancel();
                    return;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A phase that blocks its thread cannot be stopped by its own timer; the
    /// heartbeat's view of it says it is stuck while it runs, and not after.
    #[tokio::test]
    async fn a_phase_that_blocks_past_its_deadline_is_seen_stuck_while_it_runs() {
        let progress = Progress::default();
        assert!(progress.stuck(Duration::ZERO).is_none());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (progress, seen, done) = (progress.clone(), seen.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    if let Some(o) = progress.stuck(Duration::from_millis(10)) {
                        *seen.lock().expect("lock") = Some(o.phase);
                    }
                    std::thread::yield_now();
                }
            })
        };
        let result = progress
            .within(Phase::Check, Duration::from_millis(20), async {
                std::thread::sleep(Duration::from_millis(300));
                Ok(())
            })
            .await;
        done.store(true, Ordering::SeqCst);
        watcher.join().expect("watcher");
        assert!(result.is_ok(), "its own timer never got to run");
        assert_eq!(*seen.lock().expect("lock"), Some(Phase::Check));
        assert!(
            progress.stuck(Duration::ZERO).is_none(),
            "over once it returns"
        );
    }

    #[tokio::test]
    async fn a_phase_that_waits_past_its_deadline_fails_naming_it() {
        let progress = Progress::default();
        let err = progress
            .within(
                Phase::Fetch,
                Duration::from_millis(10),
                std::future::pending::<Result<()>>(),
            )
            .await
            .expect_err("stopped");
        assert_eq!(
            err.to_string(),
            "fetching the commits took longer than its deadline of 0 s (MESHWARD_JOB_FETCH_SECS); this attempt was stopped"
        );
    }
}
