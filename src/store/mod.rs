//! The history store and durable job queue: PostgreSQL in production, SQLite as the
//! embedded default. One API; every query is written once, in SQL both backends
//! accept (`$1` placeholders, `ON CONFLICT`, `RETURNING`), and run on whichever pool
//! the store holds. The only backend-specific statement is the claim, which adds
//! `FOR UPDATE SKIP LOCKED` on PostgreSQL.
//!
//! Times are milliseconds since the Unix epoch, passed in by the caller (the queue's
//! clock), never read from the database: tests control time.

mod types;

pub use types::*;

use crate::report::Report;
use anyhow::{bail, Context, Result};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::Row;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

static PG_MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");
static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

#[derive(Clone)]
enum Pool {
    Pg(PgPool),
    Sqlite(SqlitePool),
}

/// The store. Cheap to clone (it holds a connection pool).
#[derive(Clone)]
pub struct Store {
    pool: Pool,
}

/// Runs `$body` with `$p` bound to the pool of either backend; the body is compiled
/// once per backend, so every query is type-checked against both drivers.
macro_rules! with_pool {
    ($self:expr, $p:ident => $body:expr) => {
        match &$self.pool {
            Pool::Pg($p) => $body,
            Pool::Sqlite($p) => $body,
        }
    };
}

/// Reads a [`Job`] from a row of `SELECT JOB_COLUMNS`.
macro_rules! job_from_row {
    ($row:expr) => {{
        let row = $row;
        Job {
            id: row.try_get("id")?,
            kind: JobKind::parse(&row.try_get::<String, _>("kind")?)?,
            repo_id: row.try_get("repo_id")?,
            repo: row.try_get("repo")?,
            installation_id: row.try_get("installation_id")?,
            pr_number: row.try_get("pr_number")?,
            head_sha: row.try_get("head_sha")?,
            base_sha: row.try_get("base_sha")?,
            base_ref: row.try_get("base_ref")?,
            delivery_id: row.try_get("delivery_id")?,
            state: JobState::parse(&row.try_get::<String, _>("state")?)?,
            attempts: row.try_get("attempts")?,
            max_attempts: row.try_get("max_attempts")?,
            run_after_ms: row.try_get("run_after_ms")?,
            locked_by: row.try_get("locked_by")?,
            locked_until_ms: row.try_get("locked_until_ms")?,
            last_error: row.try_get("last_error")?,
            superseded_by: row.try_get("superseded_by")?,
            created_at_ms: row.try_get("created_at_ms")?,
            finished_at_ms: row.try_get("finished_at_ms")?,
        }
    }};
}

const JOB_COLUMNS: &str =
    "id, kind, repo_id, repo, installation_id, pr_number, head_sha, base_sha, \
     base_ref, delivery_id, state, attempts, max_attempts, run_after_ms, locked_by, \
     locked_until_ms, last_error, superseded_by, created_at_ms, finished_at_ms";

macro_rules! upsert_repo {
    ($conn:expr, $repo:expr, $now:expr) => {{
        let repo: &RepoRecord = $repo;
        sqlx::query(
            "INSERT INTO repos (github_id, full_name, installation_id, default_branch, installed, updated_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (github_id) DO UPDATE SET full_name = excluded.full_name, \
                 installation_id = COALESCE(excluded.installation_id, repos.installation_id), \
                 default_branch = COALESCE(excluded.default_branch, repos.default_branch), \
                 installed = excluded.installed, updated_at_ms = excluded.updated_at_ms",
        )
        .bind(repo.github_id)
        .bind(&repo.full_name)
        .bind(repo.installation_id)
        .bind(&repo.default_branch)
        .bind(repo.installed)
        .bind($now)
        .execute($conn)
        .await?;
    }};
}

/// Queues a job inside a transaction: an identical queued job absorbs it; a check
/// for a PR supersedes the queued checks of that PR at other head commits.
macro_rules! enqueue {
    ($tx:expr, $job:expr, $max_attempts:expr, $now:expr) => {{
        let job: &NewJob = $job;
        let now: i64 = $now;
        let existing: Option<i64> = sqlx::query(
            "SELECT id FROM jobs WHERE state = 'queued' AND kind = $1 AND repo_id = $2 \
                 AND COALESCE(pr_number, -1) = $3 AND head_sha = $4 AND COALESCE(base_sha, '') = $5 \
             ORDER BY id LIMIT 1",
        )
        .bind(job.kind.as_str())
        .bind(job.repo_id)
        .bind(job.pr_number.unwrap_or(-1))
        .bind(&job.head_sha)
        .bind(job.base_sha.clone().unwrap_or_default())
        .fetch_optional($tx)
        .await?
        .map(|r| r.try_get("id"))
        .transpose()?;
        match existing {
            Some(id) => Enqueued::Coalesced(id),
            None => {
                let id: i64 = sqlx::query(
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
                .await?
                .try_get("id")?;
                let mut superseded = 0;
                if let (JobKind::Check, Some(pr)) = (job.kind, job.pr_number) {
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
                Enqueued::Queued { id, superseded }
            }
        }
    }};
}

macro_rules! insert_run {
    ($tx:expr, $job_id:expr, $run:expr) => {{
        let run: &NewRun = $run;
        let c = run.counts();
        let report_json = run.report.map(serde_json::to_string).transpose()?;
        let run_id: i64 = sqlx::query(
            "INSERT INTO runs (job_id, kind, repo_id, repo, pr_number, head_sha, base_sha, started_at_ms, \
                 finished_at_ms, outcome, error, blocking, introduced, existing, resolved, errors, warnings, \
                 infos, suppressed, report_json) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) \
             RETURNING id",
        )
        .bind($job_id)
        .bind(run.kind.as_str())
        .bind(run.repo_id)
        .bind(run.repo)
        .bind(run.pr_number)
        .bind(run.head_sha)
        .bind(run.base_sha)
        .bind(run.started_at_ms)
        .bind(run.finished_at_ms)
        .bind(run.outcome().as_str())
        .bind(run.error)
        .bind(c.blocking)
        .bind(c.introduced)
        .bind(c.existing)
        .bind(c.resolved)
        .bind(c.errors)
        .bind(c.warnings)
        .bind(c.infos)
        .bind(c.suppressed)
        .bind(report_json)
        .fetch_one(&mut *$tx)
        .await?
        .try_get("id")?;
        if let Some(report) = run.report {
            for chunk in report.findings.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO findings (run_id, rule, severity, status, resource_api_version, resource_kind, \
                         resource_namespace, resource_name, file, line, message, istio_code, field_path) ",
                );
                qb.push_values(chunk, |mut b, f| {
                    let r = f.resource.as_ref();
                    b.push_bind(run_id)
                        .push_bind(f.rule.clone())
                        .push_bind(f.severity.as_str())
                        .push_bind(f.status.as_str())
                        .push_bind(r.map(|r| r.api_version.clone()))
                        .push_bind(r.map(|r| r.kind.clone()))
                        .push_bind(r.and_then(|r| r.namespace.clone()))
                        .push_bind(r.map(|r| r.name.clone()))
                        .push_bind(f.file.clone())
                        .push_bind(i64::from(f.line))
                        .push_bind(f.message.clone())
                        .push_bind(f.istio_code.clone())
                        .push_bind(serde_json::to_string(&f.path).unwrap_or_else(|_| "[]".into()));
                });
                qb.build().execute(&mut *$tx).await?;
            }
            let per_ns: Vec<_> = finding_counts_by_namespace(&report.findings).into_iter().collect();
            for chunk in per_ns.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO namespace_findings (run_id, namespace, errors, warnings, infos, \
                         introduced, existing, resolved) ",
                );
                qb.push_values(chunk, |mut b, (ns, c)| {
                    b.push_bind(run_id)
                        .push_bind(ns.clone())
                        .push_bind(c.error)
                        .push_bind(c.warning)
                        .push_bind(c.info)
                        .push_bind(c.introduced)
                        .push_bind(c.existing)
                        .push_bind(c.resolved);
                });
                qb.build().execute(&mut *$tx).await?;
            }
            let revisions = [("base", report.coverage.base.as_ref()), ("head", Some(&report.coverage.head))];
            for (revision, cov) in revisions {
                let Some(cov) = cov else { continue };
                let t = &cov.total;
                sqlx::query(
                    "INSERT INTO coverage_totals (run_id, revision, namespaces, namespaces_strict, namespaces_injected, \
                         workloads, workloads_with_proxy, selectors_effective, selectors_ineffective, \
                         workload_entries_selected, workload_entries_total, namespaces_permissive, \
                         namespaces_disable) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                )
                .bind(run_id)
                .bind(revision)
                .bind(t.namespaces as i64)
                .bind(t.namespaces_strict as i64)
                .bind(t.namespaces_injected as i64)
                .bind(t.workloads as i64)
                .bind(t.workloads_with_proxy as i64)
                .bind(t.selectors_effective as i64)
                .bind(t.selectors_ineffective as i64)
                .bind(t.workload_entries_selected as i64)
                .bind(t.workload_entries_total as i64)
                .bind(cov.namespaces.values().filter(|n| n.mtls_mode == "PERMISSIVE").count() as i64)
                .bind(cov.namespaces.values().filter(|n| n.mtls_mode == "DISABLE").count() as i64)
                .execute(&mut *$tx)
                .await?;
                let namespaces: Vec<_> = cov.namespaces.iter().collect();
                for chunk in namespaces.chunks(500) {
                    let mut qb = sqlx::QueryBuilder::new(
                        "INSERT INTO coverage_namespaces (run_id, revision, namespace, mtls_mode, workloads, \
                             workloads_with_proxy, selectors_effective, selectors_ineffective, \
                             workload_entries_selected, workload_entries_total) ",
                    );
                    qb.push_values(chunk, |mut b, (name, n)| {
                        b.push_bind(run_id)
                            .push_bind(revision)
                            .push_bind((*name).clone())
                            .push_bind(n.mtls_mode.clone())
                            .push_bind(n.workloads as i64)
                            .push_bind(n.workloads_with_proxy as i64)
                            .push_bind(n.selectors_effective as i64)
                            .push_bind(n.selectors_ineffective as i64)
                            .push_bind(n.workload_entries_selected as i64)
                            .push_bind(n.workload_entries_total as i64);
                    });
                    qb.build().execute(&mut *$tx).await?;
                }
            }
            if let Some(evidence) = &report.evidence {
                let rows = EvidenceRecord::of(evidence);
                for chunk in rows.chunks(200) {
                    let mut qb = sqlx::QueryBuilder::new(
                        "INSERT INTO evidence (run_id, subject, source, time_window, taken_at_ms, requests_total, \
                             requests_plaintext, tcp_connections_total, tcp_connections_plaintext, queries, \
                             workloads, error) ",
                    );
                    qb.push_values(chunk, |mut b, e| {
                        b.push_bind(run_id)
                            .push_bind(e.subject.clone())
                            .push_bind(e.source.clone())
                            .push_bind(e.window.clone())
                            .push_bind(e.taken_at_ms)
                            .push_bind(e.requests_total)
                            .push_bind(e.requests_plaintext)
                            .push_bind(e.tcp_connections_total)
                            .push_bind(e.tcp_connections_plaintext)
                            .push_bind(serde_json::to_string(&e.queries).unwrap_or_else(|_| "{}".into()))
                            .push_bind(serde_json::to_string(&e.workloads).unwrap_or_else(|_| "[]".into()))
                            .push_bind(e.error.clone());
                    });
                    qb.build().execute(&mut *$tx).await?;
                }
            }
        }
        run_id
    }};
}

mod publications;
mod trends;
pub use publications::{Publication, ReviewCommentRecord};

impl Store {
    /// Connects to `url`: `postgres://…` or `sqlite://PATH` (the file is created).
    pub async fn connect(url: &str) -> Result<Store> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await
                .context("cannot connect to PostgreSQL (DATABASE_URL)")?;
            Ok(Store::from_pg(pool))
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)
                .context("bad SQLite URL")?
                .create_if_missing(true);
            Store::open_sqlite_with(opts).await
        } else {
            bail!("DATABASE_URL must start with postgres://, postgresql:// or sqlite:")
        }
    }

    /// Opens (creating it if needed) an SQLite database file.
    pub async fn open_sqlite(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        Store::open_sqlite_with(opts).await
    }

    async fn open_sqlite_with(opts: SqliteConnectOptions) -> Result<Store> {
        let opts = opts
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        // One connection: SQLite has one writer anyway, and a single connection never
        // meets SQLITE_BUSY between its own transactions. Queries are short.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await
            .context("cannot open the SQLite database")?;
        Ok(Store::from_sqlite(pool))
    }

    pub fn from_pg(pool: PgPool) -> Store {
        Store {
            pool: Pool::Pg(pool),
        }
    }

    pub fn from_sqlite(pool: SqlitePool) -> Store {
        Store {
            pool: Pool::Sqlite(pool),
        }
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Pg(_) => Backend::Postgres,
            Pool::Sqlite(_) => Backend::Sqlite,
        }
    }

    pub fn migrator(backend: Backend) -> &'static Migrator {
        match backend {
            Backend::Postgres => &PG_MIGRATOR,
            Backend::Sqlite => &SQLITE_MIGRATOR,
        }
    }

    /// The latest migration version this build knows.
    pub fn latest_migration(backend: Backend) -> i64 {
        Store::migrator(backend)
            .iter()
            .map(|m| m.version)
            .max()
            .unwrap_or(0)
    }

    /// Applies every pending migration (PostgreSQL takes an advisory lock, so
    /// replicas starting together are safe).
    pub async fn migrate(&self) -> Result<()> {
        self.migrate_to(None).await
    }

    /// Applies the migrations up to and including `version` (all when None). Tests
    /// use it to build a database of an older version.
    pub async fn migrate_to(&self, version: Option<i64>) -> Result<()> {
        let full = Store::migrator(self.backend());
        let migrator = version.map(|v| Migrator {
            migrations: full
                .iter()
                .filter(|m| m.version <= v)
                .cloned()
                .collect::<Vec<_>>()
                .into(),
            ignore_missing: true,
            locking: full.locking,
            no_tx: full.no_tx,
        });
        let migrator = migrator.as_ref().unwrap_or(full);
        with_pool!(self, p => migrator.run(p).await).context("applying migrations")?;
        Ok(())
    }

    /// The highest migration version applied successfully (0 for an empty database).
    pub async fn applied_migration(&self) -> Result<i64> {
        let sql = "SELECT COALESCE(MAX(version), 0) AS v FROM _sqlx_migrations WHERE success";
        let v: i64 = with_pool!(self, p => sqlx::query(sql).fetch_one(p).await?.try_get("v")?);
        Ok(v)
    }

    /// Is the database reachable and fully migrated? (`/readyz`)
    pub async fn ready(&self) -> Result<()> {
        let applied = self
            .applied_migration()
            .await
            .context("database not reachable or not migrated")?;
        let latest = Store::latest_migration(self.backend());
        if applied < latest {
            bail!("database at migration {applied}, this build needs {latest}");
        }
        Ok(())
    }

    /// Executes raw SQL (several statements allowed). For tests and seed data.
    pub async fn execute_script(&self, sql: &str) -> Result<()> {
        with_pool!(self, p => sqlx::raw_sql(sql).execute(p).await.map(|_| ()))?;
        Ok(())
    }

    pub async fn close(&self) {
        with_pool!(self, p => p.close().await)
    }

    // ---------------------------------------------------------------- deliveries

    /// Records a verified webhook delivery and applies what it asks for, in one
    /// transaction. A delivery id seen before changes nothing.
    pub async fn record_delivery(
        &self,
        delivery: &NewDelivery,
        effect: &DeliveryEffect,
        max_attempts: i64,
        now: i64,
    ) -> Result<DeliveryOutcome> {
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let inserted = sqlx::query(
                "INSERT INTO deliveries (delivery_id, event, action, repo, outcome, received_at_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (delivery_id) DO NOTHING",
            )
            .bind(&delivery.delivery_id)
            .bind(&delivery.event)
            .bind(&delivery.action)
            .bind(&delivery.repo)
            .bind(&delivery.outcome)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                tx.rollback().await?;
                return Ok(DeliveryOutcome::Duplicate);
            }
            for repo in &effect.upsert_repos {
                upsert_repo!(&mut *tx, repo, now);
            }
            for id in &effect.remove_repos {
                sqlx::query("UPDATE repos SET installed = FALSE, updated_at_ms = $2 WHERE github_id = $1")
                    .bind(id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            if let Some(inst) = effect.remove_installation {
                sqlx::query("UPDATE repos SET installed = FALSE, updated_at_ms = $2 WHERE installation_id = $1")
                    .bind(inst)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            let mut jobs = Vec::new();
            for job in &effect.jobs {
                let job = NewJob {
                    delivery_id: Some(delivery.delivery_id.clone()),
                    ..job.clone()
                };
                jobs.push(enqueue!(&mut *tx, &job, max_attempts, now));
            }
            tx.commit().await?;
            Ok(DeliveryOutcome::Recorded { jobs })
        })
    }

    pub async fn delivery_count(&self) -> Result<i64> {
        self.count("SELECT COUNT(*) AS n FROM deliveries").await
    }

    async fn count(&self, sql: &str) -> Result<i64> {
        let n: i64 = with_pool!(self, p => sqlx::query(sql).fetch_one(p).await?.try_get("n")?);
        Ok(n)
    }

    // ---------------------------------------------------------------- repos

    pub async fn upsert_repo(&self, repo: &RepoRecord, now: i64) -> Result<()> {
        with_pool!(self, p => {
            let mut conn = p.acquire().await?;
            upsert_repo!(&mut *conn, repo, now);
        });
        Ok(())
    }

    pub async fn repos(&self) -> Result<Vec<RepoRecord>> {
        let sql = "SELECT github_id, full_name, installation_id, default_branch, installed \
                   FROM repos ORDER BY full_name";
        with_pool!(self, p => {
            let rows = sqlx::query(sql).fetch_all(p).await?;
            rows.iter()
                .map(|r| -> Result<RepoRecord> {
                    Ok(RepoRecord {
                        github_id: r.try_get("github_id")?,
                        full_name: r.try_get("full_name")?,
                        installation_id: r.try_get("installation_id")?,
                        default_branch: r.try_get("default_branch")?,
                        installed: r.try_get("installed")?,
                    })
                })
                .collect()
        })
    }

    // ---------------------------------------------------------------- queue

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
        with_pool!(self, p => {
            let row = sqlx::query(&sql)
                .bind(worker)
                .bind(now)
                .bind(lease_ms)
                .fetch_optional(p)
                .await?;
            match row {
                Some(row) => Ok(Some(job_from_row!(&row))),
                None => Ok(None),
            }
        })
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
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let n = sqlx::query(
                "UPDATE jobs SET state = 'succeeded', locked_until_ms = NULL, \
                     last_error = NULL, updated_at_ms = $3, finished_at_ms = $3 \
                 WHERE id = $1 AND locked_by = $2 AND state = 'running'",
            )
            .bind(job.id)
            .bind(worker)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n != 1 {
                tx.rollback().await?;
                return Ok(None);
            }
            let run_id = insert_run!(&mut *tx, Some(job.id), run);
            tx.commit().await?;
            Ok(Some(run_id))
        })
    }

    /// Stores the run of a job `worker` holds without finishing the job (it still
    /// has to publish), with what the run publishes (`plan_json`) in the same
    /// transaction. None (and nothing stored) when the lease was lost.
    pub async fn save_run(
        &self,
        job: &Job,
        worker: &str,
        run: &NewRun<'_>,
        plan_json: Option<&str>,
        now: i64,
    ) -> Result<Option<i64>> {
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let held = sqlx::query(
                "UPDATE jobs SET updated_at_ms = $3 WHERE id = $1 AND locked_by = $2 AND state = 'running'",
            )
            .bind(job.id)
            .bind(worker)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if held != 1 {
                tx.rollback().await?;
                return Ok(None);
            }
            let run_id = insert_run!(&mut *tx, Some(job.id), run);
            if let (Some(plan), Some(pr)) = (plan_json, job.pr_number) {
                sqlx::query(
                    "INSERT INTO publications (job_id, repo_id, pr_number, head_sha, run_id, plan_json, state, \
                         created_at_ms, updated_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'stored', $7, $7) \
                     ON CONFLICT (job_id) DO UPDATE SET run_id = excluded.run_id, \
                         plan_json = excluded.plan_json, state = 'stored', updated_at_ms = excluded.updated_at_ms",
                )
                .bind(job.id)
                .bind(job.repo_id)
                .bind(pr)
                .bind(&job.head_sha)
                .bind(run_id)
                .bind(plan)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(Some(run_id))
        })
    }

    /// The run a job already stored, and what it publishes: a retried job publishes
    /// it instead of checking again.
    pub async fn job_run(&self, job_id: i64) -> Result<Option<(i64, Option<String>)>> {
        let sql = "SELECT r.id AS run_id, p.plan_json AS plan_json FROM runs r \
                   LEFT JOIN publications p ON p.job_id = r.job_id WHERE r.job_id = $1";
        with_pool!(self, p => {
            match sqlx::query(sql).bind(job_id).fetch_optional(p).await? {
                Some(r) => Ok(Some((r.try_get("run_id")?, r.try_get("plan_json")?))),
                None => Ok(None),
            }
        })
    }

    /// Marks a job `worker` holds succeeded (its run is stored already). False: the
    /// lease was lost.
    pub async fn finish(&self, job: &Job, worker: &str, now: i64) -> Result<bool> {
        let sql =
            "UPDATE jobs SET state = 'succeeded', locked_until_ms = NULL, last_error = NULL, \
                       updated_at_ms = $3, finished_at_ms = $3 \
                   WHERE id = $1 AND locked_by = $2 AND state = 'running'";
        let n = with_pool!(self, p => sqlx::query(sql).bind(job.id).bind(worker).bind(now).execute(p).await?.rows_affected());
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
            let stored: Option<i64> = sqlx::query("SELECT id FROM runs WHERE job_id = $1")
                .bind(job.id)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.try_get("id"))
                .transpose()?;
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
        with_pool!(self, p => {
            match sqlx::query(&sql).bind(id).fetch_optional(p).await? {
                Some(row) => Ok(Some(job_from_row!(&row))),
                None => Ok(None),
            }
        })
    }

    /// Every job, oldest first.
    pub async fn jobs(&self) -> Result<Vec<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs ORDER BY id");
        with_pool!(self, p => {
            let rows = sqlx::query(&sql).fetch_all(p).await?;
            rows.iter().map(|row| Ok(job_from_row!(row))).collect()
        })
    }

    /// Jobs per state (for `/metrics`).
    pub async fn job_counts(&self) -> Result<Vec<(JobState, i64)>> {
        let sql = "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state ORDER BY state";
        with_pool!(self, p => {
            let rows = sqlx::query(sql).fetch_all(p).await?;
            rows.iter()
                .map(|r| Ok((JobState::parse(&r.try_get::<String, _>("state")?)?, r.try_get("n")?)))
                .collect()
        })
    }

    // ---------------------------------------------------------------- runs

    /// Stores a run not tied to a job (tools, tests).
    pub async fn insert_run(&self, run: &NewRun<'_>) -> Result<i64> {
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let id = insert_run!(&mut *tx, None::<i64>, run);
            tx.commit().await?;
            Ok(id)
        })
    }

    pub async fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let sql = "SELECT id, job_id, kind, repo_id, repo, pr_number, head_sha, base_sha, \
                       started_at_ms, finished_at_ms, outcome, error, blocking, introduced, \
                       existing, resolved, errors, warnings, infos, suppressed \
                   FROM runs \
                   WHERE ($1 IS NULL OR repo = $1) AND ($2 IS NULL OR pr_number = $2) \
                     AND ($3 IS NULL OR job_id = $3) \
                   ORDER BY id";
        let sql = match self.backend() {
            // PostgreSQL cannot infer the type of a parameter used only in IS NULL.
            Backend::Postgres => sql
                .replace("$1 IS NULL", "$1::TEXT IS NULL")
                .replace("$2 IS NULL", "$2::BIGINT IS NULL")
                .replace("$3 IS NULL", "$3::BIGINT IS NULL"),
            Backend::Sqlite => sql.to_string(),
        };
        with_pool!(self, p => {
            let rows = sqlx::query(&sql)
                .bind(&filter.repo)
                .bind(filter.pr_number)
                .bind(filter.job_id)
                .fetch_all(p)
                .await?;
            rows.iter()
                .map(|r| -> Result<RunRecord> {
                    Ok(RunRecord {
                        id: r.try_get("id")?,
                        job_id: r.try_get("job_id")?,
                        kind: JobKind::parse(&r.try_get::<String, _>("kind")?)?,
                        repo_id: r.try_get("repo_id")?,
                        repo: r.try_get("repo")?,
                        pr_number: r.try_get("pr_number")?,
                        head_sha: r.try_get("head_sha")?,
                        base_sha: r.try_get("base_sha")?,
                        started_at_ms: r.try_get("started_at_ms")?,
                        finished_at_ms: r.try_get("finished_at_ms")?,
                        outcome: RunOutcome::parse(&r.try_get::<String, _>("outcome")?)?,
                        error: r.try_get("error")?,
                        counts: RunCounts {
                            blocking: r.try_get("blocking")?,
                            introduced: r.try_get("introduced")?,
                            existing: r.try_get("existing")?,
                            resolved: r.try_get("resolved")?,
                            errors: r.try_get("errors")?,
                            warnings: r.try_get("warnings")?,
                            infos: r.try_get("infos")?,
                            suppressed: r.try_get("suppressed")?,
                        },
                    })
                })
                .collect()
        })
    }

    /// The full report a run stored (None for runs that errored).
    pub async fn run_report(&self, run_id: i64) -> Result<Option<Report>> {
        let sql = "SELECT report_json FROM runs WHERE id = $1";
        let json: Option<String> = with_pool!(self, p => {
            match sqlx::query(sql).bind(run_id).fetch_optional(p).await? {
                Some(r) => r.try_get("report_json")?,
                None => None,
            }
        });
        json.map(|j| serde_json::from_str(&j).context("stored report does not parse"))
            .transpose()
    }

    pub async fn findings(&self, run_id: i64) -> Result<Vec<FindingRecord>> {
        let sql = "SELECT rule, severity, status, resource_api_version, resource_kind, \
                       resource_namespace, resource_name, file, line, message, istio_code, field_path \
                   FROM findings WHERE run_id = $1 ORDER BY id";
        with_pool!(self, p => {
            let rows = sqlx::query(sql).bind(run_id).fetch_all(p).await?;
            rows.iter()
                .map(|r| -> Result<FindingRecord> {
                    Ok(FindingRecord {
                        rule: r.try_get("rule")?,
                        severity: r.try_get("severity")?,
                        status: r.try_get("status")?,
                        resource_api_version: r.try_get("resource_api_version")?,
                        resource_kind: r.try_get("resource_kind")?,
                        resource_namespace: r.try_get("resource_namespace")?,
                        resource_name: r.try_get("resource_name")?,
                        file: r.try_get("file")?,
                        line: r.try_get("line")?,
                        message: r.try_get("message")?,
                        istio_code: r.try_get("istio_code")?,
                        field_path: r.try_get("field_path")?,
                    })
                })
                .collect()
        })
    }

    /// The evidence a run was judged on, by subject.
    pub async fn evidence(&self, run_id: i64) -> Result<Vec<EvidenceRecord>> {
        let sql = "SELECT subject, source, time_window, taken_at_ms, requests_total, requests_plaintext, \
                       tcp_connections_total, tcp_connections_plaintext, queries, workloads, error \
                   FROM evidence WHERE run_id = $1 ORDER BY subject";
        with_pool!(self, p => {
            let rows = sqlx::query(sql).bind(run_id).fetch_all(p).await?;
            rows.iter()
                .map(|r| -> Result<EvidenceRecord> {
                    let queries: String = r.try_get("queries")?;
                    let workloads: String = r.try_get("workloads")?;
                    Ok(EvidenceRecord {
                        subject: r.try_get("subject")?,
                        source: r.try_get("source")?,
                        window: r.try_get("time_window")?,
                        taken_at_ms: r.try_get("taken_at_ms")?,
                        requests_total: r.try_get("requests_total")?,
                        requests_plaintext: r.try_get("requests_plaintext")?,
                        tcp_connections_total: r.try_get("tcp_connections_total")?,
                        tcp_connections_plaintext: r.try_get("tcp_connections_plaintext")?,
                        queries: serde_json::from_str(&queries).context("stored evidence queries")?,
                        workloads: serde_json::from_str(&workloads).context("stored evidence workloads")?,
                        error: r.try_get("error")?,
                    })
                })
                .collect()
        })
    }

    pub async fn coverage(&self, run_id: i64) -> Result<Vec<CoverageRecord>> {
        let totals =
            "SELECT revision, namespaces, namespaces_strict, namespaces_injected, workloads, \
                          workloads_with_proxy, selectors_effective, selectors_ineffective, \
                          workload_entries_selected, workload_entries_total \
                      FROM coverage_totals WHERE run_id = $1 ORDER BY revision";
        let per_ns = "SELECT revision, namespace, mtls_mode, workloads, workloads_with_proxy, \
                          selectors_effective, selectors_ineffective, workload_entries_selected, \
                          workload_entries_total \
                      FROM coverage_namespaces WHERE run_id = $1 ORDER BY revision, namespace";
        with_pool!(self, p => {
            let mut out: Vec<CoverageRecord> = Vec::new();
            for r in sqlx::query(totals).bind(run_id).fetch_all(p).await? {
                out.push(CoverageRecord {
                    revision: r.try_get("revision")?,
                    total: TotalCoverageRecord {
                        namespaces: r.try_get("namespaces")?,
                        namespaces_strict: r.try_get("namespaces_strict")?,
                        namespaces_injected: r.try_get("namespaces_injected")?,
                        workloads: r.try_get("workloads")?,
                        workloads_with_proxy: r.try_get("workloads_with_proxy")?,
                        selectors_effective: r.try_get("selectors_effective")?,
                        selectors_ineffective: r.try_get("selectors_ineffective")?,
                        workload_entries_selected: r.try_get("workload_entries_selected")?,
                        workload_entries_total: r.try_get("workload_entries_total")?,
                    },
                    namespaces: Vec::new(),
                });
            }
            for r in sqlx::query(per_ns).bind(run_id).fetch_all(p).await? {
                let revision: String = r.try_get("revision")?;
                let ns = NamespaceCoverageRecord {
                    namespace: r.try_get("namespace")?,
                    mtls_mode: r.try_get("mtls_mode")?,
                    workloads: r.try_get("workloads")?,
                    workloads_with_proxy: r.try_get("workloads_with_proxy")?,
                    selectors_effective: r.try_get("selectors_effective")?,
                    selectors_ineffective: r.try_get("selectors_ineffective")?,
                    workload_entries_selected: r.try_get("workload_entries_selected")?,
                    workload_entries_total: r.try_get("workload_entries_total")?,
                };
                if let Some(c) = out.iter_mut().find(|c| c.revision == revision) {
                    c.namespaces.push(ns);
                }
            }
            Ok(out)
        })
    }
}
