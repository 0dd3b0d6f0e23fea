//! Trend queries: the coverage series of a repository (the last baseline in each
//! time bucket), the runs list with cursor paging, the latest coverage of every
//! repository, and retention. SQL both backends accept, as in the rest of the store.

use super::*;
use std::collections::HashMap;

/// Reads the coverage columns of a `coverage_totals` row (aliased `t_*`), None when
/// the LEFT JOIN found none.
macro_rules! total_coverage {
    ($r:expr) => {{
        let r = $r;
        match r.try_get::<Option<i64>, _>("t_workloads")? {
            None => None,
            Some(workloads) => Some(CoverageNumbers {
                workloads,
                workloads_with_proxy: r.try_get("t_workloads_with_proxy")?,
                namespaces: r.try_get("t_namespaces")?,
                namespaces_strict: r.try_get("t_namespaces_strict")?,
                namespaces_permissive: r.try_get("t_namespaces_permissive")?,
                namespaces_disable: r.try_get("t_namespaces_disable")?,
                namespaces_injected: r.try_get("t_namespaces_injected")?,
                mtls_mode: None,
                selectors_effective: r.try_get("t_selectors_effective")?,
                selectors_ineffective: r.try_get("t_selectors_ineffective")?,
                workload_entries_selected: r.try_get("t_workload_entries_selected")?,
                workload_entries_total: r.try_get("t_workload_entries_total")?,
            }),
        }
    }};
}

const TOTAL_COLUMNS: &str = "t.workloads AS t_workloads, t.workloads_with_proxy AS t_workloads_with_proxy, \
     t.namespaces AS t_namespaces, t.namespaces_strict AS t_namespaces_strict, \
     t.namespaces_permissive AS t_namespaces_permissive, t.namespaces_disable AS t_namespaces_disable, \
     t.namespaces_injected AS t_namespaces_injected, t.selectors_effective AS t_selectors_effective, \
     t.selectors_ineffective AS t_selectors_ineffective, \
     t.workload_entries_selected AS t_workload_entries_selected, \
     t.workload_entries_total AS t_workload_entries_total";

/// Reads one namespace's coverage (`n_*`, from `coverage_namespaces`) and findings
/// (`f_*`, from `namespace_findings`, absent when it had none).
macro_rules! namespace_metrics {
    ($r:expr) => {{
        let r = $r;
        match r.try_get::<Option<String>, _>("n_mtls_mode")? {
            None => None,
            Some(mode) => Some(Metrics {
                coverage: CoverageNumbers {
                    workloads: r.try_get("n_workloads")?,
                    workloads_with_proxy: r.try_get("n_workloads_with_proxy")?,
                    namespaces: 1,
                    namespaces_strict: i64::from(mode == "STRICT"),
                    namespaces_permissive: i64::from(mode == "PERMISSIVE"),
                    namespaces_disable: i64::from(mode == "DISABLE"),
                    namespaces_injected: None,
                    selectors_effective: r.try_get("n_selectors_effective")?,
                    selectors_ineffective: r.try_get("n_selectors_ineffective")?,
                    workload_entries_selected: r.try_get("n_workload_entries_selected")?,
                    workload_entries_total: r.try_get("n_workload_entries_total")?,
                    mtls_mode: Some(mode),
                },
                findings: FindingCounts {
                    error: r.try_get::<Option<i64>, _>("f_errors")?.unwrap_or(0),
                    warning: r.try_get::<Option<i64>, _>("f_warnings")?.unwrap_or(0),
                    info: r.try_get::<Option<i64>, _>("f_infos")?.unwrap_or(0),
                    introduced: r.try_get::<Option<i64>, _>("f_introduced")?.unwrap_or(0),
                    existing: r.try_get::<Option<i64>, _>("f_existing")?.unwrap_or(0),
                    resolved: r.try_get::<Option<i64>, _>("f_resolved")?.unwrap_or(0),
                },
            }),
        }
    }};
}

const NAMESPACE_COLUMNS: &str = "n.mtls_mode AS n_mtls_mode, n.workloads AS n_workloads, \
     n.workloads_with_proxy AS n_workloads_with_proxy, n.selectors_effective AS n_selectors_effective, \
     n.selectors_ineffective AS n_selectors_ineffective, \
     n.workload_entries_selected AS n_workload_entries_selected, \
     n.workload_entries_total AS n_workload_entries_total, f.errors AS f_errors, \
     f.warnings AS f_warnings, f.infos AS f_infos, f.introduced AS f_introduced, \
     f.existing AS f_existing, f.resolved AS f_resolved";

/// The run's own finding counts (columns of `runs`, aliased `r`).
macro_rules! run_findings {
    ($r:expr) => {{
        let r = $r;
        FindingCounts {
            error: r.try_get("errors")?,
            warning: r.try_get("warnings")?,
            info: r.try_get("infos")?,
            introduced: r.try_get("introduced")?,
            existing: r.try_get("existing")?,
            resolved: r.try_get("resolved")?,
        }
    }};
}

const RUN_COLUMNS: &str = "r.id, r.job_id, r.kind, r.repo_id, r.repo, r.pr_number, r.head_sha, \
     r.base_sha, r.started_at_ms, r.finished_at_ms, r.outcome, r.error, r.blocking, r.introduced, \
     r.existing, r.resolved, r.errors, r.warnings, r.infos, r.suppressed";

macro_rules! run_record {
    ($r:expr) => {{
        let r = $r;
        RunRecord {
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
        }
    }};
}

impl Store {
    /// The GitHub id of a repository by `owner/name`: from the repositories the
    /// service was told about (any case, as GitHub matches names), else from the
    /// newest run stored under exactly that name (an index lookup: an unknown name
    /// never scans the runs).
    pub async fn find_repo(&self, full_name: &str) -> Result<Option<(i64, String)>> {
        let by_repos = "SELECT github_id AS id, full_name AS name FROM repos \
                        WHERE LOWER(full_name) = LOWER($1) ORDER BY installed DESC, updated_at_ms DESC LIMIT 1";
        let by_runs =
            "SELECT repo_id AS id, repo AS name FROM runs WHERE repo = $1 ORDER BY id DESC LIMIT 1";
        with_pool!(self, p => {
            for sql in [by_repos, by_runs] {
                if let Some(r) = sqlx::query(sql).bind(full_name).fetch_optional(p).await? {
                    return Ok(Some((r.try_get("id")?, r.try_get("name")?)));
                }
            }
            Ok(None)
        })
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
        let sql = match q.namespace {
            None => format!(
                "{ranked} SELECT r.*, {TOTAL_COLUMNS} FROM ranked r \
                 LEFT JOIN coverage_totals t ON t.run_id = r.id AND t.revision = 'head' \
                 WHERE r.rn = 1 ORDER BY r.bucket"
            ),
            Some(_) => format!(
                "{ranked} SELECT r.*, {NAMESPACE_COLUMNS} FROM ranked r \
                 LEFT JOIN coverage_namespaces n ON n.run_id = r.id AND n.revision = 'head' AND n.namespace = $6 \
                 LEFT JOIN namespace_findings f ON f.run_id = r.id AND f.namespace = $6 \
                 WHERE r.rn = 1 ORDER BY r.bucket"
            ),
        };
        with_pool!(self, p => {
            let mut query = sqlx::query(&sql)
                .bind(q.repo_id)
                .bind(q.offset_ms)
                .bind(q.bucket_ms)
                .bind(q.start_ms)
                .bind(q.end_ms);
            if let Some(ns) = q.namespace {
                query = query.bind(ns);
            }
            let rows = query.fetch_all(p).await?;
            rows.iter()
                .map(|r| -> Result<BucketRow> {
                    let outcome = RunOutcome::parse(&r.try_get::<String, _>("outcome")?)?;
                    let metrics = match q.namespace {
                        None => {
                            let findings = run_findings!(r);
                            total_coverage!(r).map(|coverage| Metrics { coverage, findings })
                        }
                        Some(_) => namespace_metrics!(r),
                    };
                    Ok(BucketRow {
                        bucket: r.try_get("bucket")?,
                        baselines: r.try_get("baselines")?,
                        run_id: r.try_get("id")?,
                        head_sha: r.try_get("head_sha")?,
                        finished_at_ms: r.try_get("finished_at_ms")?,
                        error: r.try_get("error")?,
                        metrics: if outcome == RunOutcome::Error { None } else { metrics },
                        outcome,
                    })
                })
                .collect()
        })
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
            let rows = qb.build().fetch_all(p).await?;
            let mut runs = rows
                .iter()
                .map(|r| -> Result<RunRecord> { Ok(run_record!(r)) })
                .collect::<Result<Vec<_>>>()?;
            let more = runs.len() as i64 > limit;
            runs.truncate(limit as usize);
            let mut coverage: HashMap<(i64, String), CoverageNumbers> = HashMap::new();
            if !runs.is_empty() {
                let mut qb = sqlx::QueryBuilder::new(format!(
                    "SELECT t.run_id AS run_id, t.revision AS revision, {TOTAL_COLUMNS} \
                     FROM coverage_totals t WHERE t.run_id IN ("
                ));
                let mut ids = qb.separated(", ");
                for r in &runs {
                    ids.push_bind(r.id);
                }
                qb.push(")");
                for r in qb.build().fetch_all(p).await? {
                    if let Some(c) = total_coverage!(&r) {
                        coverage.insert((r.try_get("run_id")?, r.try_get("revision")?), c);
                    }
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
            "SELECT p.github_id, p.full_name, p.installed, p.default_branch, \
                    r.id AS run_id, r.head_sha, r.finished_at_ms, r.errors, r.warnings, r.infos, \
                    r.introduced, r.existing, r.resolved, {TOTAL_COLUMNS} \
             FROM repos p \
             LEFT JOIN runs r ON r.id = (SELECT x.id FROM runs x \
                 WHERE x.repo_id = p.github_id AND x.kind = 'baseline' AND x.outcome <> 'error' \
                 ORDER BY x.finished_at_ms DESC, x.id DESC LIMIT 1) \
             LEFT JOIN coverage_totals t ON t.run_id = r.id AND t.revision = 'head' \
             ORDER BY p.full_name"
        );
        with_pool!(self, p => {
            let rows = sqlx::query(&sql).fetch_all(p).await?;
            rows.iter()
                .map(|r| -> Result<RepoOverview> {
                    let latest = match (r.try_get::<Option<i64>, _>("run_id")?, total_coverage!(r)) {
                        (Some(run_id), Some(coverage)) => Some(LatestBaseline {
                            run_id,
                            head_sha: r.try_get("head_sha")?,
                            finished_at_ms: r.try_get("finished_at_ms")?,
                            metrics: Metrics { coverage, findings: run_findings!(r) },
                        }),
                        _ => None,
                    };
                    Ok(RepoOverview {
                        repo_id: r.try_get("github_id")?,
                        full_name: r.try_get("full_name")?,
                        installed: r.try_get("installed")?,
                        default_branch: r.try_get("default_branch")?,
                        latest,
                    })
                })
                .collect()
        })
    }

    /// Each namespace's coverage and findings in a run's head revision.
    pub async fn namespace_metrics(&self, run_id: i64) -> Result<Vec<(String, Metrics)>> {
        let sql = format!(
            "SELECT n.namespace AS namespace, {NAMESPACE_COLUMNS} FROM coverage_namespaces n \
             LEFT JOIN namespace_findings f ON f.run_id = n.run_id AND f.namespace = n.namespace \
             WHERE n.run_id = $1 AND n.revision = 'head' ORDER BY n.namespace"
        );
        with_pool!(self, p => {
            let rows = sqlx::query(&sql).bind(run_id).fetch_all(p).await?;
            let mut out = Vec::new();
            for r in &rows {
                if let Some(m) = namespace_metrics!(r) {
                    out.push((r.try_get("namespace")?, m));
                }
            }
            Ok(out)
        })
    }

    /// Retention: deletes PR runs (kind `check`) that finished before `before_ms`,
    /// with their findings and coverage; baselines are kept. Deletes in batches so
    /// no transaction grows large. Returns how many runs were deleted.
    pub async fn prune_check_runs(&self, before_ms: i64) -> Result<u64> {
        let sql = "DELETE FROM runs WHERE id IN (SELECT id FROM runs \
                   WHERE kind = 'check' AND finished_at_ms < $1 LIMIT 1000)";
        let mut total = 0;
        loop {
            let n = with_pool!(self, p => sqlx::query(sql).bind(before_ms).execute(p).await?.rows_affected());
            total += n;
            if n == 0 {
                return Ok(total);
            }
        }
    }
}
