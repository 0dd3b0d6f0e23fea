//! Trend queries: the coverage series of a repository (the last baseline in each
//! time bucket), the runs list with cursor paging, the latest coverage of every
//! repository, and retention. SQL both backends accept, as in the rest of the store.

use super::pool::with_pool;
use super::runs::RUN_COLUMNS;
use super::{
    BucketRow, CoverageNumbers, FindingCounts, LatestBaseline, Metrics, NamespaceCoverageRecord,
    NamespaceMetrics, RepoOverview, RunOutcome, RunRecord, RunWithCoverage, RunsPageQuery,
    SeriesQuery, Store,
};
use anyhow::{bail, Result};
use sqlx::{ColumnIndex, Decode, FromRow, Row, Type};
use std::collections::HashMap;

/// The columns of a [`CoverageNumbers`], from `coverage_totals` aliased `t`.
pub(super) const TOTAL_COLUMNS: &str = "t.workloads, t.workloads_with_proxy, t.workloads_ambient, \
     t.workloads_waypoint, t.namespaces, t.namespaces_strict, t.namespaces_permissive, \
     t.namespaces_disable, t.namespaces_injected, t.namespaces_ambient, t.selectors_effective, \
     t.selectors_ineffective, t.workload_entries_selected, t.workload_entries_total, \
     t.authz_as_written, t.authz_reduced_to_l4, t.authz_not_enforced, t.routes_resolving, \
     t.routes_nowhere, t.routes_unchecked";

/// The columns of a [`NamespaceRow`]: `coverage_namespaces` aliased `n` and
/// `namespace_findings` aliased `f`.
const NAMESPACE_COLUMNS: &str =
    "n.cluster, n.namespace, n.mtls_mode, n.workloads, n.workloads_with_proxy, \
     n.workloads_ambient, n.workloads_waypoint, n.selectors_effective, n.selectors_ineffective, \
     n.workload_entries_selected, n.workload_entries_total, n.authz_as_written, \
     n.authz_reduced_to_l4, n.authz_not_enforced, n.routes_resolving, n.routes_nowhere, \
     n.routes_unchecked, f.errors, f.warnings, f.infos, f.introduced, f.existing, f.resolved";

/// A run's own [`FindingCounts`], from `runs` aliased `r`.
const RUN_FINDING_COLUMNS: &str =
    "r.errors, r.warnings, r.infos, r.introduced, r.existing, r.resolved";

/// The columns of `T` from a LEFT JOIN: None when the join found no row. That shows
/// as NULL in `T::KEY`, a NOT NULL column of the joined table, where the derived
/// `FromRow` of `T` would fail on the first NULL instead.
struct Joined<T>(Option<T>);

trait JoinKey {
    const KEY: &'static str;
}

impl<'r, R, T> FromRow<'r, R> for Joined<T>
where
    R: Row,
    T: FromRow<'r, R> + JoinKey,
    &'r str: ColumnIndex<R>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        match row.try_get::<Option<i64>, _>(T::KEY)? {
            None => Ok(Joined(None)),
            Some(_) => T::from_row(row).map(|t| Joined(Some(t))),
        }
    }
}

impl JoinKey for CoverageNumbers {
    const KEY: &'static str = "workloads";
}

impl JoinKey for FindingCounts {
    const KEY: &'static str = "errors";
}

impl JoinKey for LatestRun {
    const KEY: &'static str = "run_id";
}

/// The run a series bucket shows, with `M`, the columns its metrics are read from.
#[derive(FromRow)]
struct BucketRun<M> {
    bucket: i64,
    baselines: i64,
    id: i64,
    head_sha: String,
    finished_at_ms: i64,
    outcome: RunOutcome,
    error: Option<String>,
    #[sqlx(flatten)]
    metrics: M,
}

impl<M> BucketRun<M> {
    fn into_bucket(self, metrics: impl FnOnce(M) -> Option<Metrics>) -> BucketRow {
        BucketRow {
            bucket: self.bucket,
            baselines: self.baselines,
            run_id: self.id,
            head_sha: self.head_sha,
            finished_at_ms: self.finished_at_ms,
            metrics: match self.outcome {
                RunOutcome::Error => None,
                RunOutcome::Pass | RunOutcome::Fail => metrics(self.metrics),
            },
            outcome: self.outcome,
            error: self.error,
        }
    }
}

/// A run's own finding counts and its head coverage (None when it stored none).
#[derive(FromRow)]
struct RunMetrics {
    #[sqlx(flatten)]
    findings: FindingCounts,
    #[sqlx(flatten)]
    coverage: Joined<CoverageNumbers>,
}

impl RunMetrics {
    fn metrics(self) -> Option<Metrics> {
        let findings = self.findings;
        self.coverage
            .0
            .map(|coverage| Metrics { coverage, findings })
    }
}

/// One namespace's coverage and findings in one cluster ('' with one cluster); a
/// namespace without findings has no `namespace_findings` row.
#[derive(FromRow)]
struct NamespaceRow {
    cluster: String,
    #[sqlx(flatten)]
    coverage: NamespaceCoverageRecord,
    #[sqlx(flatten)]
    findings: Joined<FindingCounts>,
}

impl From<NamespaceRow> for NamespaceMetrics {
    fn from(r: NamespaceRow) -> NamespaceMetrics {
        let c = r.coverage;
        let metrics = Metrics {
            coverage: CoverageNumbers {
                workloads: c.workloads,
                workloads_with_proxy: c.workloads_with_proxy,
                workloads_ambient: c.workloads_ambient,
                workloads_waypoint: c.workloads_waypoint,
                namespaces: 1,
                namespaces_strict: i64::from(c.mtls_mode == "STRICT"),
                namespaces_permissive: i64::from(c.mtls_mode == "PERMISSIVE"),
                namespaces_disable: i64::from(c.mtls_mode == "DISABLE"),
                namespaces_injected: None,
                namespaces_ambient: None,
                selectors_effective: c.selectors_effective,
                selectors_ineffective: c.selectors_ineffective,
                workload_entries_selected: c.workload_entries_selected,
                workload_entries_total: c.workload_entries_total,
                authz_as_written: c.authz_as_written,
                authz_reduced_to_l4: c.authz_reduced_to_l4,
                authz_not_enforced: c.authz_not_enforced,
                routes_resolving: c.routes_resolving,
                routes_nowhere: c.routes_nowhere,
                routes_unchecked: c.routes_unchecked,
                mtls_mode: Some(c.mtls_mode),
            },
            findings: r.findings.0.unwrap_or_default(),
        };
        NamespaceMetrics {
            cluster: (!r.cluster.is_empty()).then_some(r.cluster),
            namespace: c.namespace,
            metrics,
        }
    }
}

/// A run's coverage of one revision, for the runs list.
#[derive(FromRow)]
struct RunCoverage {
    run_id: i64,
    revision: String,
    #[sqlx(flatten)]
    coverage: CoverageNumbers,
}

/// A repository and its latest successful baseline, if it has one with coverage.
#[derive(FromRow)]
struct OverviewRow {
    github_id: i64,
    full_name: String,
    installed: bool,
    default_branch: Option<String>,
    #[sqlx(flatten)]
    latest: Joined<LatestRun>,
    #[sqlx(flatten)]
    coverage: Joined<CoverageNumbers>,
}

#[derive(FromRow)]
struct LatestRun {
    run_id: i64,
    head_sha: String,
    finished_at_ms: i64,
    #[sqlx(flatten)]
    findings: FindingCounts,
}

impl From<OverviewRow> for RepoOverview {
    fn from(r: OverviewRow) -> RepoOverview {
        let latest = match (r.latest.0, r.coverage.0) {
            (Some(run), Some(coverage)) => Some(LatestBaseline {
                run_id: run.run_id,
                head_sha: run.head_sha,
                finished_at_ms: run.finished_at_ms,
                metrics: Metrics {
                    coverage,
                    findings: run.findings,
                },
            }),
            _ => None,
        };
        RepoOverview {
            repo_id: r.github_id,
            full_name: r.full_name,
            installed: r.installed,
            default_branch: r.default_branch,
            latest,
        }
    }
}

/// How long one retention statement should hold the database: what a request
/// arriving during a sweep may wait, on top of its own time.
const SWEEP_STATEMENT: std::time::Duration = std::time::Duration::from_millis(2);

impl Store {
    /// The GitHub id of a repository by `owner/name`: from the repositories the
    /// service was told about (any case, as GitHub matches names), else from the
    /// newest run stored under exactly that name (an index lookup: an unknown name
    /// never scans the runs).
    pub(crate) async fn find_repo(&self, full_name: &str) -> Result<Option<(i64, String)>> {
        let by_repos = "SELECT github_id, full_name FROM repos \
                        WHERE LOWER(full_name) = LOWER($1) ORDER BY installed DESC, updated_at_ms DESC LIMIT 1";
        let by_runs = "SELECT repo_id, repo FROM runs WHERE repo = $1 ORDER BY id DESC LIMIT 1";
        for sql in [by_repos, by_runs] {
            let found = with_pool!(self, p => {
                sqlx::query_as::<_, (i64, String)>(sql).bind(full_name).fetch_optional(p).await?
            });
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The baseline runs of a series, one row per bucket that has any: the last
    /// successful baseline that finished in it (an errored one only when all did).
    /// Buckets without a baseline have no row; the caller makes them explicit gaps.
    pub async fn series(&self, q: &SeriesQuery<'_>) -> Result<Vec<BucketRow>> {
        if q.bucket_ms <= 0 {
            bail!("bucket size must be positive");
        }
        let ranked = "WITH ranked AS ( \
                SELECT id, head_sha, finished_at_ms, outcome, error, errors, warnings, infos, \
                       introduced, existing, resolved, \
                       (finished_at_ms - $2) / $3 AS bucket, \
                       ROW_NUMBER() OVER (PARTITION BY (finished_at_ms - $2) / $3 \
                           ORDER BY CASE WHEN outcome = 'error' THEN 1 ELSE 0 END, finished_at_ms DESC, id DESC) AS rn, \
                       COUNT(*) OVER (PARTITION BY (finished_at_ms - $2) / $3) AS baselines \
                FROM runs \
                WHERE repo_id = $1 AND kind = 'baseline' AND finished_at_ms >= $4 AND finished_at_ms < $5) ";
        let run = "r.bucket, r.baselines, r.id, r.head_sha, r.finished_at_ms, r.outcome, r.error";
        if q.cluster.is_none() && q.namespace.is_none() {
            let sql = format!(
                "{ranked} SELECT {run}, {RUN_FINDING_COLUMNS}, {TOTAL_COLUMNS} FROM ranked r \
                 LEFT JOIN coverage_totals t ON t.run_id = r.id AND t.revision = 'head' AND t.cluster = '' \
                 WHERE r.rn = 1 ORDER BY r.bucket"
            );
            let rows = with_pool!(self, p => {
                sqlx::query_as::<_, BucketRun<RunMetrics>>(&sql)
                    .bind(q.repo_id).bind(q.offset_ms).bind(q.bucket_ms).bind(q.start_ms).bind(q.end_ms)
                    .fetch_all(p)
                    .await?
            });
            return Ok(rows
                .into_iter()
                .map(|r| r.into_bucket(RunMetrics::metrics))
                .collect());
        }
        // A cluster or a namespace: the bucket runs first, then their numbers for the
        // scope by run id (index lookups whatever the planner thinks of the window).
        let sql = format!("{ranked} SELECT {run}, {RUN_FINDING_COLUMNS} FROM ranked r WHERE r.rn = 1 ORDER BY r.bucket");
        let runs = with_pool!(self, p => {
            sqlx::query_as::<_, BucketRun<FindingCounts>>(&sql)
                .bind(q.repo_id).bind(q.offset_ms).bind(q.bucket_ms).bind(q.start_ms).bind(q.end_ms)
                .fetch_all(p)
                .await?
        });
        let ids: Vec<i64> = runs
            .iter()
            .filter(|r| r.outcome != RunOutcome::Error)
            .map(|r| r.id)
            .collect();
        let mut scoped = self.scoped_metrics(&ids, q.cluster, q.namespace).await?;
        Ok(runs
            .into_iter()
            .map(|r| {
                let metrics = scoped.remove(&r.id);
                r.into_bucket(|_| metrics)
            })
            .collect())
    }

    /// A page of a repository's runs, newest first, with their coverage (head, and
    /// base for PR runs). Returns at most `limit` runs and whether more follow.
    pub async fn runs_page(&self, q: &RunsPageQuery) -> Result<(Vec<RunWithCoverage>, bool)> {
        let limit = q.limit.clamp(1, 1000);
        with_pool!(self, p => {
            let mut qb = sqlx::QueryBuilder::new(format!("SELECT {RUN_COLUMNS} FROM runs r WHERE r.repo_id = "));
            qb.push_bind(q.repo_id);
            if let Some(pr) = q.pr_number {
                qb.push(" AND r.pr_number = ").push_bind(pr);
            }
            if let Some(kind) = q.kind {
                qb.push(" AND r.kind = ").push_bind(kind.as_str());
            }
            if let Some(before) = q.before_id {
                qb.push(" AND r.id < ").push_bind(before);
            }
            qb.push(" ORDER BY r.id DESC LIMIT ").push_bind(limit + 1);
            let mut runs = qb.build_query_as::<RunRecord>().fetch_all(p).await?;
            let more = runs.len() as i64 > limit;
            runs.truncate(limit as usize);
            let mut coverage: HashMap<(i64, String), CoverageNumbers> = HashMap::new();
            if !runs.is_empty() {
                let mut qb = sqlx::QueryBuilder::new(format!(
                    "SELECT t.run_id, t.revision, {TOTAL_COLUMNS} FROM coverage_totals t \
                     WHERE t.cluster = '' AND t.run_id IN ("
                ));
                let mut ids = qb.separated(", ");
                for r in &runs {
                    ids.push_bind(r.id);
                }
                qb.push(")");
                for r in qb.build_query_as::<RunCoverage>().fetch_all(p).await? {
                    coverage.insert((r.run_id, r.revision), r.coverage);
                }
            }
            let out = runs
                .into_iter()
                .map(|run| RunWithCoverage {
                    head: coverage.remove(&(run.id, "head".to_string())),
                    base: coverage.remove(&(run.id, "base".to_string())),
                    run,
                })
                .collect();
            Ok((out, more))
        })
    }

    /// Every repository (installed or not) with its latest successful baseline.
    pub async fn repo_overview(&self) -> Result<Vec<RepoOverview>> {
        // One index probe per repository (runs_repo_kind), not a scan of all runs.
        let sql = format!(
            "SELECT p.github_id, p.full_name, p.installed, p.default_branch, r.id AS run_id, \
                    r.head_sha, r.finished_at_ms, {RUN_FINDING_COLUMNS}, {TOTAL_COLUMNS} \
             FROM repos p \
             LEFT JOIN runs r ON r.id = (SELECT x.id FROM runs x \
                 WHERE x.repo_id = p.github_id AND x.kind = 'baseline' AND x.outcome <> 'error' \
                 ORDER BY x.finished_at_ms DESC, x.id DESC LIMIT 1) \
             LEFT JOIN coverage_totals t ON t.run_id = r.id AND t.revision = 'head' AND t.cluster = '' \
             ORDER BY p.full_name"
        );
        let rows =
            with_pool!(self, p => sqlx::query_as::<_, OverviewRow>(&sql).fetch_all(p).await?);
        Ok(rows.into_iter().map(RepoOverview::from).collect())
    }

    /// Each namespace's coverage and findings in a run's head revision, by cluster
    /// (where the repository deploys to several) and name.
    pub async fn namespace_metrics(&self, run_id: i64) -> Result<Vec<NamespaceMetrics>> {
        let sql = format!(
            "SELECT {NAMESPACE_COLUMNS} FROM coverage_namespaces n \
             LEFT JOIN namespace_findings f ON f.run_id = n.run_id AND f.cluster = n.cluster \
                 AND f.namespace = n.namespace \
             WHERE n.run_id = $1 AND n.revision = 'head' ORDER BY n.cluster, n.namespace"
        );
        let rows = with_pool!(self, p => {
            sqlx::query_as::<_, NamespaceRow>(&sql).bind(run_id).fetch_all(p).await?
        });
        Ok(rows.into_iter().map(NamespaceMetrics::from).collect())
    }

    /// Retention: deletes PR runs (kind `check`) that finished before `before_ms`,
    /// with their findings and coverage; baselines are kept. Deletes in batches
    /// (found by the `runs_kind_finished` index), giving the connection back between
    /// them for as long as each took: SQLite has one, and the API and webhooks queue
    /// behind each statement, so each is sized to take about [`SWEEP_STATEMENT`] (a
    /// run's rows cost what they cost: the batch follows the last statement's pace).
    /// Returns how many runs were deleted.
    pub async fn prune_check_runs(&self, before_ms: i64) -> Result<u64> {
        let sql = "DELETE FROM runs WHERE id IN (SELECT id FROM runs \
                   WHERE kind = 'check' AND finished_at_ms < $1 LIMIT $2)";
        let mut total = 0;
        let mut batch: i64 = 20;
        loop {
            let started = std::time::Instant::now();
            let n = with_pool!(self, p => sqlx::query(sql).bind(before_ms).bind(batch).execute(p).await?.rows_affected());
            let took = started.elapsed();
            // As long again without: a request's several queries each find the
            // database free most of the time, and the sweep still ends.
            tokio::time::sleep(took).await;
            total += n;
            if n == 0 {
                if total > 0 {
                    self.prune_repo_clusters().await?;
                }
                return Ok(total);
            }
            let per_run = took.as_secs_f64() / n as f64;
            batch = if per_run > 0.0 {
                ((SWEEP_STATEMENT.as_secs_f64() / per_run) as i64).clamp(1, 1000)
            } else {
                1000
            };
        }
    }
}
