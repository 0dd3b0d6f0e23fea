//! Runs: storing a finished run with its findings, coverage and evidence, and
//! reading them back.

use super::pool::{with_pool, Backend};
use super::{
    CoverageRecord, EvidenceRecord, FindingRecord, Job, NamespaceCoverageRecord, NewRun, RunFilter,
    RunRecord, Store, TotalCoverageRecord,
};
use crate::model::coverage::{Coverage, NamespaceCoverage};
use crate::report::{CoverageReport, Report};
use anyhow::{Context, Result};

/// The columns of a [`RunRecord`], from `runs` aliased `r`.
pub(super) const RUN_COLUMNS: &str =
    "r.id, r.job_id, r.kind, r.repo_id, r.repo, r.pr_number, r.head_sha, \
     r.base_sha, r.started_at_ms, r.finished_at_ms, r.outcome, r.error, r.blocking, r.introduced, \
     r.existing, r.resolved, r.errors, r.warnings, r.infos, r.suppressed";

/// Stores a run (`$job_id`: the job it belongs to, if any) with its findings, per
/// namespace finding counts, coverage and evidence on `$tx`, a transaction of either
/// backend, and evaluates to the run's id. Rows go in multi-row inserts of a few
/// hundred, under either backend's limit on bound parameters.
macro_rules! insert_run {
    ($tx:expr, $job_id:expr, $run:expr) => {{
        let run: &$crate::store::NewRun = $run;
        let c = run.counts();
        let report_json = run.report.map(serde_json::to_string).transpose()?;
        let run_id: i64 = sqlx::query_scalar(
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
        .await?;
        if let Some(report) = run.report {
            for chunk in report.findings.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO findings (run_id, rule, severity, status, resource_api_version, resource_kind, \
                         resource_namespace, resource_name, file, line, message, istio_code, field_path, cluster) ",
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
                        .push_bind(serde_json::to_string(&f.path).unwrap_or_else(|_| "[]".into()))
                        .push_bind(f.cluster.clone().unwrap_or_default());
                });
                qb.build().execute(&mut *$tx).await?;
            }
            let per_ns: Vec<_> = $crate::store::finding_counts_by_namespace(&report.findings).into_iter().collect();
            for chunk in per_ns.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO namespace_findings (run_id, cluster, namespace, errors, warnings, infos, \
                         introduced, existing, resolved) ",
                );
                qb.push_values(chunk, |mut b, ((cluster, ns), c)| {
                    b.push_bind(run_id)
                        .push_bind(cluster.clone())
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
            let rows = $crate::store::runs::CoverageRows::of(&report.coverage);
            for chunk in rows.totals.chunks(200) {
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO coverage_totals (run_id, revision, cluster, namespaces, namespaces_strict, \
                         namespaces_injected, workloads, workloads_with_proxy, selectors_effective, \
                         selectors_ineffective, workload_entries_selected, workload_entries_total, \
                         namespaces_permissive, namespaces_disable, namespaces_ambient, workloads_ambient, \
                         workloads_waypoint, authz_as_written, authz_reduced_to_l4, authz_not_enforced, \
                         routes_resolving, routes_nowhere, routes_unchecked) ",
                );
                qb.push_values(chunk, |mut b, (revision, cluster, cov)| {
                    let t = &cov.total;
                    let mode = |m: &str| cov.namespaces.values().filter(|n| n.mtls_mode == m).count() as i64;
                    b.push_bind(run_id)
                        .push_bind(*revision)
                        .push_bind(cluster.to_string())
                        .push_bind(t.namespaces as i64)
                        .push_bind(t.namespaces_strict as i64)
                        .push_bind(t.namespaces_injected as i64)
                        .push_bind(t.workloads as i64)
                        .push_bind(t.workloads_with_proxy as i64)
                        .push_bind(t.selectors_effective as i64)
                        .push_bind(t.selectors_ineffective as i64)
                        .push_bind(t.workload_entries_selected as i64)
                        .push_bind(t.workload_entries_total as i64)
                        .push_bind(mode("PERMISSIVE"))
                        .push_bind(mode("DISABLE"))
                        .push_bind(t.namespaces_ambient as i64)
                        .push_bind(t.workloads_ambient as i64)
                        .push_bind(t.workloads_waypoint as i64)
                        .push_bind(t.authz_as_written as i64)
                        .push_bind(t.authz_reduced_to_l4 as i64)
                        .push_bind(t.authz_not_enforced as i64)
                        .push_bind(t.routes_resolving as i64)
                        .push_bind(t.routes_nowhere as i64)
                        .push_bind(t.routes_unchecked as i64);
                });
                qb.build().execute(&mut *$tx).await?;
            }
            let clusters: std::collections::BTreeSet<&str> =
                rows.totals.iter().map(|(_, c, _)| *c).filter(|c| !c.is_empty()).collect();
            if !clusters.is_empty() {
                let mut qb = sqlx::QueryBuilder::new("INSERT INTO repo_clusters (repo_id, cluster) ");
                qb.push_values(&clusters, |mut b, c| {
                    b.push_bind(run.repo_id).push_bind(c.to_string());
                });
                qb.push(" ON CONFLICT (repo_id, cluster) DO NOTHING");
                qb.build().execute(&mut *$tx).await?;
            }
            for chunk in rows.namespaces.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO coverage_namespaces (run_id, revision, cluster, namespace, mtls_mode, workloads, \
                         workloads_with_proxy, selectors_effective, selectors_ineffective, \
                         workload_entries_selected, workload_entries_total, workloads_ambient, \
                         workloads_waypoint, authz_as_written, authz_reduced_to_l4, authz_not_enforced, \
                         routes_resolving, routes_nowhere, routes_unchecked) ",
                );
                qb.push_values(chunk, |mut b, (revision, cluster, name, n)| {
                    b.push_bind(run_id)
                        .push_bind(*revision)
                        .push_bind(cluster.to_string())
                        .push_bind(name.to_string())
                        .push_bind(n.mtls_mode.clone())
                        .push_bind(n.workloads as i64)
                        .push_bind(n.workloads_with_proxy as i64)
                        .push_bind(n.selectors_effective as i64)
                        .push_bind(n.selectors_ineffective as i64)
                        .push_bind(n.workload_entries_selected as i64)
                        .push_bind(n.workload_entries_total as i64)
                        .push_bind(n.workloads_ambient as i64)
                        .push_bind(n.workloads_waypoint as i64)
                        .push_bind(n.authz_as_written as i64)
                        .push_bind(n.authz_reduced_to_l4 as i64)
                        .push_bind(n.authz_not_enforced as i64)
                        .push_bind(n.routes_resolving as i64)
                        .push_bind(n.routes_nowhere as i64)
                        .push_bind(n.routes_unchecked as i64);
                });
                qb.build().execute(&mut *$tx).await?;
            }
            if let Some(evidence) = &report.evidence {
                let rows = $crate::store::EvidenceRecord::of(evidence);
                for chunk in rows.chunks(200) {
                    let mut qb = sqlx::QueryBuilder::new(
                        "INSERT INTO evidence (run_id, subject, source, time_window, taken_at_ms, requests_total, \
                             requests_plaintext, tcp_connections_total, tcp_connections_plaintext, tcp_bytes_plaintext, \
                             queries, workloads, error) ",
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
                            .push_bind(e.tcp_bytes_plaintext)
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
pub(super) use insert_run;

/// The coverage rows a report stores, as `(revision, cluster, …)` with cluster ''
/// for the whole repository. Totals: the whole repository, and each cluster where
/// there are several. Namespaces: the whole repository's with one cluster; with
/// several, each cluster's own (the whole repository's are keyed `cluster/namespace`,
/// the same rows again).
pub(crate) struct CoverageRows<'a> {
    pub(crate) totals: Vec<(&'static str, &'a str, &'a Coverage)>,
    pub(crate) namespaces: Vec<(&'static str, &'a str, &'a str, &'a NamespaceCoverage)>,
}

impl<'a> CoverageRows<'a> {
    pub(crate) fn of(c: &'a CoverageReport) -> CoverageRows<'a> {
        let revisions = |base: Option<&'a Coverage>, head: &'a Coverage| {
            [("base", base), ("head", Some(head))]
                .into_iter()
                .filter_map(|(rev, cov)| cov.map(|cov| (rev, cov)))
        };
        let mut scopes: Vec<(&'static str, &'a str, &'a Coverage)> =
            revisions(c.base.as_ref(), &c.head)
                .map(|(rev, cov)| (rev, "", cov))
                .collect();
        let totals_of_repo = scopes.len();
        let mut seen = std::collections::HashSet::new();
        for cc in &c.clusters {
            // '' is the whole repository's key, and a cluster is one row per
            // revision: a nameless or repeated one would fail the whole run's insert
            // (its numbers are in the whole repository's all the same).
            if cc.cluster.is_empty() || !seen.insert(cc.cluster.as_str()) {
                continue;
            }
            scopes.extend(
                revisions(cc.base.as_ref(), &cc.head)
                    .map(|(rev, cov)| (rev, cc.cluster.as_str(), cov)),
            );
        }
        let per_namespace = if scopes.len() == totals_of_repo {
            &scopes[..]
        } else {
            &scopes[totals_of_repo..]
        };
        let namespaces = per_namespace
            .iter()
            .flat_map(|(rev, cluster, cov)| {
                cov.namespaces
                    .iter()
                    .map(move |(name, n)| (*rev, *cluster, name.as_str(), n))
            })
            .collect();
        CoverageRows {
            totals: scopes,
            namespaces,
        }
    }
}

/// An `evidence` row; its queries and workloads are stored as JSON text.
#[derive(sqlx::FromRow)]
struct EvidenceRow {
    subject: String,
    source: Option<String>,
    time_window: Option<String>,
    taken_at_ms: Option<i64>,
    requests_total: i64,
    requests_plaintext: i64,
    tcp_connections_total: i64,
    tcp_connections_plaintext: i64,
    tcp_bytes_plaintext: i64,
    queries: String,
    workloads: String,
    error: Option<String>,
}

impl TryFrom<EvidenceRow> for EvidenceRecord {
    type Error = anyhow::Error;

    fn try_from(r: EvidenceRow) -> Result<EvidenceRecord> {
        Ok(EvidenceRecord {
            subject: r.subject,
            source: r.source,
            window: r.time_window,
            taken_at_ms: r.taken_at_ms,
            requests_total: r.requests_total,
            requests_plaintext: r.requests_plaintext,
            tcp_connections_total: r.tcp_connections_total,
            tcp_connections_plaintext: r.tcp_connections_plaintext,
            tcp_bytes_plaintext: r.tcp_bytes_plaintext,
            queries: serde_json::from_str(&r.queries).context("stored evidence queries")?,
            workloads: serde_json::from_str(&r.workloads).context("stored evidence workloads")?,
            error: r.error,
        })
    }
}

/// A coverage row of one revision (`base` or `head`) and cluster ('' for the whole
/// repository).
#[derive(sqlx::FromRow)]
struct Revision<T> {
    cluster: String,
    revision: String,
    #[sqlx(flatten)]
    record: T,
}

impl Store {
    /// Stores a run not tied to a job (tools, tests).
    pub async fn insert_run(&self, run: &NewRun<'_>) -> Result<i64> {
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let id = insert_run!(&mut *tx, None::<i64>, run);
            tx.commit().await?;
            Ok(id)
        })
    }

    /// Stores the run of a job `worker` holds without finishing the job (it still
    /// has to publish), with what the run publishes (`plan_json`) in the same
    /// transaction. None (and nothing stored) when the lease was lost.
    pub(crate) async fn save_run(
        &self,
        job: &Job,
        worker: &str,
        run: &NewRun<'_>,
        plan_json: Option<&str>,
        now: i64,
    ) -> Result<Option<i64>> {
        let touch = "UPDATE jobs SET updated_at_ms = $3 \
                     WHERE id = $1 AND locked_by = $2 AND state = 'running'";
        self.store_job_run(touch, job, worker, run, plan_json, now)
            .await
    }

    /// Stores the run of a job `worker` holds, and what it publishes, in one
    /// transaction with `update`: a statement on the job (`$1` its id, `$2` the
    /// worker, `$3` now) that affects it only while the lease holds. None (and
    /// nothing stored) when the lease was lost.
    pub(super) async fn store_job_run(
        &self,
        update: &str,
        job: &Job,
        worker: &str,
        run: &NewRun<'_>,
        plan_json: Option<&str>,
        now: i64,
    ) -> Result<Option<i64>> {
        with_pool!(self, p => {
            let mut tx = p.begin().await?;
            let held = sqlx::query(update)
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
    pub(crate) async fn job_run(&self, job_id: i64) -> Result<Option<(i64, Option<String>)>> {
        let sql = "SELECT r.id, p.plan_json FROM runs r \
                   LEFT JOIN publications p ON p.job_id = r.job_id WHERE r.job_id = $1";
        let run = with_pool!(self, p => {
            sqlx::query_as::<_, (i64, Option<String>)>(sql).bind(job_id).fetch_optional(p).await?
        });
        Ok(run)
    }

    pub async fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs r \
             WHERE ($1 IS NULL OR r.repo = $1) AND ($2 IS NULL OR r.pr_number = $2) \
               AND ($3 IS NULL OR r.job_id = $3) \
             ORDER BY r.id"
        );
        let sql = match self.backend() {
            // PostgreSQL cannot infer the type of a parameter used only in IS NULL.
            Backend::Postgres => sql
                .replace("$1 IS NULL", "$1::TEXT IS NULL")
                .replace("$2 IS NULL", "$2::BIGINT IS NULL")
                .replace("$3 IS NULL", "$3::BIGINT IS NULL"),
            Backend::Sqlite => sql,
        };
        let runs = with_pool!(self, p => {
            sqlx::query_as::<_, RunRecord>(&sql)
                .bind(&filter.repo)
                .bind(filter.pr_number)
                .bind(filter.job_id)
                .fetch_all(p)
                .await?
        });
        Ok(runs)
    }

    /// The full report a run stored (None for runs that errored).
    pub async fn run_report(&self, run_id: i64) -> Result<Option<Report>> {
        let sql = "SELECT report_json FROM runs WHERE id = $1";
        let json: Option<Option<String>> =
            with_pool!(self, p => sqlx::query_scalar(sql).bind(run_id).fetch_optional(p).await?);
        json.flatten()
            .map(|j| serde_json::from_str(&j).context("stored report does not parse"))
            .transpose()
    }

    pub async fn findings(&self, run_id: i64) -> Result<Vec<FindingRecord>> {
        let sql = "SELECT rule, severity, status, resource_api_version, resource_kind, \
                       resource_namespace, resource_name, file, line, message, istio_code, field_path, \
                       NULLIF(cluster, '') AS cluster \
                   FROM findings WHERE run_id = $1 ORDER BY id";
        let findings = with_pool!(self, p => {
            sqlx::query_as::<_, FindingRecord>(sql).bind(run_id).fetch_all(p).await?
        });
        Ok(findings)
    }

    /// The evidence a run was judged on, by subject.
    pub async fn evidence(&self, run_id: i64) -> Result<Vec<EvidenceRecord>> {
        let sql = "SELECT subject, source, time_window, taken_at_ms, requests_total, requests_plaintext, \
                       tcp_connections_total, tcp_connections_plaintext, tcp_bytes_plaintext, queries, workloads, error \
                   FROM evidence WHERE run_id = $1 ORDER BY subject";
        let rows = with_pool!(self, p => {
            sqlx::query_as::<_, EvidenceRow>(sql).bind(run_id).fetch_all(p).await?
        });
        rows.into_iter().map(EvidenceRecord::try_from).collect()
    }

    /// A run's coverage per revision: the whole repository first, then each cluster
    /// where it deploys to several.
    pub async fn coverage(&self, run_id: i64) -> Result<Vec<CoverageRecord>> {
        let totals =
            "SELECT cluster, revision, namespaces, namespaces_strict, namespaces_injected, namespaces_ambient, \
                          workloads, workloads_with_proxy, workloads_ambient, workloads_waypoint, \
                          selectors_effective, selectors_ineffective, workload_entries_selected, \
                          workload_entries_total, authz_as_written, authz_reduced_to_l4, authz_not_enforced, \
                          routes_resolving, routes_nowhere, routes_unchecked \
                      FROM coverage_totals WHERE run_id = $1 ORDER BY cluster, revision";
        let per_ns = "SELECT cluster, revision, namespace, mtls_mode, workloads, workloads_with_proxy, \
                          workloads_ambient, workloads_waypoint, selectors_effective, selectors_ineffective, \
                          workload_entries_selected, workload_entries_total, authz_as_written, \
                          authz_reduced_to_l4, authz_not_enforced, routes_resolving, routes_nowhere, \
                          routes_unchecked \
                      FROM coverage_namespaces WHERE run_id = $1 ORDER BY cluster, revision, namespace";
        let (totals, per_ns) = with_pool!(self, p => (
            sqlx::query_as::<_, Revision<TotalCoverageRecord>>(totals).bind(run_id).fetch_all(p).await?,
            sqlx::query_as::<_, Revision<NamespaceCoverageRecord>>(per_ns).bind(run_id).fetch_all(p).await?,
        ));
        let mut out: Vec<CoverageRecord> = totals
            .into_iter()
            .map(|t| CoverageRecord {
                cluster: (!t.cluster.is_empty()).then_some(t.cluster),
                revision: t.revision,
                total: t.record,
                namespaces: Vec::new(),
            })
            .collect();
        for ns in per_ns {
            let mut add = |cluster: Option<&str>, record: NamespaceCoverageRecord| {
                let scope = out
                    .iter_mut()
                    .find(|c| c.revision == ns.revision && c.cluster.as_deref() == cluster);
                if let Some(c) = scope {
                    c.namespaces.push(record);
                }
            };
            if ns.cluster.is_empty() {
                add(None, ns.record);
            } else {
                // The whole repository's namespaces are each cluster's, keyed
                // `cluster/namespace` as in the report (they are not stored twice).
                let mut keyed = ns.record.clone();
                keyed.namespace = format!("{}/{}", ns.cluster, keyed.namespace);
                add(None, keyed);
                add(Some(&ns.cluster), ns.record);
            }
        }
        for c in &mut out {
            c.namespaces.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::coverage::TotalCoverage;
    use crate::report::ClusterCoverage;

    fn cov(namespaces: &[&str], workloads: usize) -> Coverage {
        Coverage {
            total: TotalCoverage {
                workloads,
                ..Default::default()
            },
            namespaces: namespaces
                .iter()
                .map(|n| (n.to_string(), NamespaceCoverage::default()))
                .collect(),
        }
    }

    #[test]
    fn each_cluster_is_stored_once_beside_the_whole_repository() {
        let one = CoverageReport {
            base: None,
            head: cov(&["shop"], 1),
            clusters: Vec::new(),
        };
        let rows = CoverageRows::of(&one);
        assert_eq!(rows.totals.len(), 1);
        let ns: Vec<_> = rows.namespaces.iter().map(|r| (r.0, r.1, r.2)).collect();
        assert_eq!(ns, [("head", "", "shop")]);

        let cluster = |name: &str, w| ClusterCoverage {
            cluster: name.into(),
            base: None,
            head: cov(&["shop"], w),
        };
        let several = CoverageReport {
            base: Some(cov(&["eu/shop"], 2)),
            head: cov(&["eu/shop", "us/shop"], 5),
            clusters: vec![
                cluster("eu", 2),
                cluster("us", 3),
                cluster("", 9),
                cluster("us", 9),
            ],
        };
        let rows = CoverageRows::of(&several);
        let totals: Vec<_> = rows
            .totals
            .iter()
            .map(|(rev, c, cov)| (*rev, *c, cov.total.workloads))
            .collect();
        assert_eq!(
            totals,
            [
                ("base", "", 2),
                ("head", "", 5),
                ("head", "eu", 2),
                ("head", "us", 3)
            ],
            "a nameless or repeated cluster is not stored apart"
        );
        let ns: Vec<_> = rows.namespaces.iter().map(|r| (r.0, r.1, r.2)).collect();
        assert_eq!(ns, [("head", "eu", "shop"), ("head", "us", "shop")]);
    }
}
