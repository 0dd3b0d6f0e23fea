//! The durable job queue: enqueue (coalescing and superseding), claim under a lease,
//! heartbeat, and the ends of an attempt (complete, finish, fail, release).

use super::pool::{with_pool, Backend};
use super::runs::insert_run;
use super::{Enqueued, Job, JobState, NewJob, NewRun, Store};
use anyhow::Result;

const JOB_COLUMNS: &str =
    "id, kind, repo_id, repo, installation_id, pr_number, head_sha, base_sha, \
     base_ref, delivery_id, state, attempts, max_attempts, run_after_ms, locked_by, \
     locked_until_ms, last_error, superseded_by, created_at_ms, finished_at_ms";

/// Marks a job `$2` holds succeeded at `$3`; affects no row when the lease was lost.
const SUCCEED: &str = "UPDATE jobs SET state = 'succeeded', locked_until_ms = NULL, \
         last_error = NULL, updated_at_ms = $3, finished_at_ms = $3 \
     WHERE id = $1 AND locked_by = $2 AND state = 'running'";

/// Queues a job inside a transaction: an identical queued job absorbs it; a check
/// for a PR supersedes the queued checks of that PR at other head commits.
macro_rules! enqueue {
    ($tx:expr, $job:expr, $max_attempts:expr, $now:expr) => {{
        let job: &$crate::store::NewJob = $job;
        let now: i64 = $now;
        let existing: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM jobs WHERE state = 'queued' AND kind = $1 AND repo_id = $2 \
                 AND COALESCE(pr_number, -1) = $3 AND head_sha = $4 AND COALESCE(base_sha, '') = $5 \
             ORDER BY id LIMIT 1",
        )
        .bind(job.kind.as_str())
        .bind(job.repo_id)
        .bind(job.pr_number.unwrap_or(-1))
        .bind(&job.head_sha)
        .bind(job.base_sha.as_deref().unwrap_or_default())
        .fetch_optional(&mut *$tx)
        .await?;
        match existing {
            Some(id) => $crate::store::Enqueued::Coalesced(id),
            None => {
                let id: i64 = sqlx::query_scalar(
                    "INSERT INTO jobs (kind, repo_id, repo, installation_id, pr_number, head_sha, base_sha, \
                         base_ref, delivery_id, state, attempts, max_attempts, run_after_ms, created_at_ms, updated_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'queued', 0, $10, $11, $11, $11) RETURNING id",
                )
                .bind(job.kind.as_str())
                .bind(job.repo_id)
                .bind(&job.repo)
                .bind(job.installation_id)
                .bind(job.pr_number)
                .bind(&job.head_sha)
                .bind(&job.base_sha)
                .bind(&job.base_ref)
                .bind(&job.delivery_id)
                .bind($max_attempts)
                .bind(now)
                .fetch_one(&mut *$tx)
                .await?;
                let mut superseded = 0;
                if let ($crate::store::JobKind::Check, Some(pr)) = (job.kind, job.pr_number) {
                    superseded = sqlx::query(
                        "UPDATE jobs SET state = 'superseded', superseded_by = $1, updated_at_ms = $4, finished_at_ms = $4 \
                         WHERE state = 'queued' AND kind = 'check' AND repo_id = $2 AND pr_number = $3 AND id <> $1",
                    )
                    .bind(id)
                    .bind(job.repo_id)
                    .bind(pr)
                    .bind(now)
                    .execute(&mut *$tx)
                    .await?
                    .rows_affected();
                }
                $crate::store::Enqueued::Queued { id, superseded }
            }
        }
    }};
}
pub(super) use enqueue;

impl Store {
    /// Queues a job (outside a delivery: re-runs, tests, tools).
    pub async fn enqueue(&self, job: &NewJob, max_attempts: i64, now: i64) -> Result<Enqueued> {
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let e = enqueue!(&mut *tx, job, max_attempts, now);
            tx.commit().await?;
            Ok(e)
        })
    }

    /// Takes the next job that is due (queued and past its `run_after`, or running
    /// with an expired lease), marks it running for `worker` until `now + lease`, and
    /// counts the attempt. Concurrent claimers never get the same job.
    pub async fn claim(&self, worker: &str, now: i64, lease_ms: i64) -> Result<Option<Job>> {
        let lock = match self.backend() {
            Backend::Postgres => "FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let sql = format!(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_by = $1, \
                 locked_until_ms = $2 + $3, updated_at_ms = $2 \
             WHERE id = (SELECT id FROM jobs \
                 WHERE (state = 'queued' AND run_after_ms <= $2) \
                    OR (state = 'running' AND locked_until_ms < $2) \
                 ORDER BY run_after_ms, id LIMIT 1 {lock}) \
             RETURNING {JOB_COLUMNS}"
        );
        let job = with_pool!(self, p => {
            sqlx::query_as::<_, Job>(&sql)
                .bind(worker)
                .bind(now)
                .bind(lease_ms)
                .fetch_optional(p)
                .await?
        });
        Ok(job)
    }

    /// Extends the lease of a job `worker` holds. False: the lease was lost (it
    /// expired and another worker took the job, or the job was released).
    pub async fn heartbeat(
        &self,
        job_id: i64,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool> {
        let sql = "UPDATE jobs SET locked_until_ms = $3 + $4, updated_at_ms = $3 \
                   WHERE id = $1 AND locked_by = $2 AND state = 'running'";
        let n = with_pool!(self, p => sqlx::query(sql).bind(job_id).bind(worker).bind(now).bind(lease_ms).execute(p).await?.rows_affected());
        Ok(n == 1)
    }

    /// Finishes a job `worker` holds and stores its run, in one transaction. Returns
    /// None (and stores nothing) when the lease was lost.
    pub async fn complete(
        &self,
        job: &Job,
        worker: &str,
        run: &NewRun<'_>,
        now: i64,
    ) -> Result<Option<i64>> {
        self.store_job_run(SUCCEED, job, worker, run, None, now)
            .await
    }

    /// Marks a job `worker` holds succeeded (its run is stored already). False: the
    /// lease was lost.
    pub(crate) async fn finish(&self, job: &Job, worker: &str, now: i64) -> Result<bool> {
        let n = with_pool!(self, p => sqlx::query(SUCCEED).bind(job.id).bind(worker).bind(now).execute(p).await?.rows_affected());
        Ok(n == 1)
    }

    /// Records a failed attempt of a job `worker` holds: queued again at `retry_at`
    /// while attempts remain (and the error is not `permanent`), else `failed` with
    /// an `error` run stored (unless the job stored its run already). Returns the
    /// job's new state, or None when the lease was lost.
    #[allow(clippy::too_many_arguments)]
    pub async fn fail(
        &self,
        job: &Job,
        worker: &str,
        error: &str,
        permanent: bool,
        retry_at: i64,
        run: &NewRun<'_>,
        now: i64,
    ) -> Result<Option<JobState>> {
        let give_up = permanent || job.attempts >= job.max_attempts;
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let n = if give_up {
                sqlx::query(
                    "UPDATE jobs SET state = 'failed', locked_until_ms = NULL, \
                         last_error = $3, updated_at_ms = $4, finished_at_ms = $4 \
                     WHERE id = $1 AND locked_by = $2 AND state = 'running'",
                )
                .bind(job.id).bind(worker).bind(error).bind(now)
                .execute(&mut *tx).await?.rows_affected()
            } else {
                sqlx::query(
                    "UPDATE jobs SET state = 'queued', locked_by = NULL, locked_until_ms = NULL, \
                         last_error = $3, updated_at_ms = $4, run_after_ms = $5 \
                     WHERE id = $1 AND locked_by = $2 AND state = 'running'",
                )
                .bind(job.id).bind(worker).bind(error).bind(now).bind(retry_at)
                .execute(&mut *tx).await?.rows_affected()
            };
            if n != 1 {
                tx.rollback().await?;
                return Ok(None);
            }
            // A job that stored its run and then failed to publish keeps that run.
            let stored: Option<i64> = sqlx::query_scalar("SELECT id FROM runs WHERE job_id = $1")
                .bind(job.id)
                .fetch_optional(&mut *tx)
                .await?;
            if give_up && stored.is_none() {
                insert_run!(&mut *tx, Some(job.id), run);
            }
            tx.commit().await?;
            Ok(Some(if give_up { JobState::Failed } else { JobState::Queued }))
        })
    }

    /// Gives a job back without counting the attempt (graceful shutdown).
    pub async fn release(&self, job_id: i64, worker: &str, now: i64) -> Result<bool> {
        let sql = "UPDATE jobs SET state = 'queued', locked_by = NULL, locked_until_ms = NULL, \
                       attempts = attempts - 1, run_after_ms = $3, updated_at_ms = $3 \
                   WHERE id = $1 AND locked_by = $2 AND state = 'running'";
        let n = with_pool!(self, p => sqlx::query(sql).bind(job_id).bind(worker).bind(now).execute(p).await?.rows_affected());
        Ok(n == 1)
    }

    pub async fn job(&self, id: i64) -> Result<Option<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        let job =
            with_pool!(self, p => sqlx::query_as::<_, Job>(&sql).bind(id).fetch_optional(p).await?);
        Ok(job)
    }

    /// Every job, oldest first.
    pub async fn jobs(&self) -> Result<Vec<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs ORDER BY id");
        let jobs = with_pool!(self, p => sqlx::query_as::<_, Job>(&sql).fetch_all(p).await?);
        Ok(jobs)
    }

    /// Jobs per state (for `/metrics`).
    pub async fn job_counts(&self) -> Result<Vec<(JobState, i64)>> {
        let sql = "SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state";
        let counts =
            with_pool!(self, p => sqlx::query_as::<_, (JobState, i64)>(sql).fetch_all(p).await?);
        Ok(counts)
    }
}
