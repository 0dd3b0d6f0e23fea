//! The cluster dimension of the trends: a repository's clusters, and the numbers of
//! one cluster or namespace in given runs. `cluster` is '' in the tables for the
//! whole repository (and for a repository with one cluster or none), so the whole
//! repository's queries read `cluster = ''` and these read the rest.

use super::pool::with_pool;
use super::trends::TOTAL_COLUMNS;
use super::{CoverageNumbers, FindingCounts, Metrics, Store};
use anyhow::Result;
use sqlx::FromRow;
use std::collections::HashMap;

/// Run ids per statement: far under either backend's limit on bound parameters.
const IDS_PER_QUERY: usize = 500;

/// Findings of the `findings` table aliased `g`, counted as a run counts its own.
const FINDING_SUMS: &str = "\
    SUM(CASE WHEN g.status <> 'resolved' AND g.severity = 'error' THEN 1 ELSE 0 END) AS errors, \
    SUM(CASE WHEN g.status <> 'resolved' AND g.severity = 'warning' THEN 1 ELSE 0 END) AS warnings, \
    SUM(CASE WHEN g.status <> 'resolved' AND g.severity = 'info' THEN 1 ELSE 0 END) AS infos, \
    SUM(CASE WHEN g.status = 'introduced' THEN 1 ELSE 0 END) AS introduced, \
    SUM(CASE WHEN g.status = 'existing' THEN 1 ELSE 0 END) AS existing, \
    SUM(CASE WHEN g.status = 'resolved' THEN 1 ELSE 0 END) AS resolved";

/// `namespace_findings` aliased `g`, added up over clusters. PostgreSQL sums BIGINT
/// as NUMERIC: cast back.
const NAMESPACE_FINDING_SUMS: &str = "\
    CAST(SUM(g.errors) AS BIGINT) AS errors, CAST(SUM(g.warnings) AS BIGINT) AS warnings, \
    CAST(SUM(g.infos) AS BIGINT) AS infos, CAST(SUM(g.introduced) AS BIGINT) AS introduced, \
    CAST(SUM(g.existing) AS BIGINT) AS existing, CAST(SUM(g.resolved) AS BIGINT) AS resolved";

/// One namespace, `coverage_namespaces` aliased `c`, added up over the clusters that
/// have it as the whole repository's totals count `cluster/namespace`: once per
/// cluster, by its mode there.
const NAMESPACE_SUMS: &str = "\
    CAST(SUM(c.workloads) AS BIGINT) AS workloads, \
    CAST(SUM(c.workloads_with_proxy) AS BIGINT) AS workloads_with_proxy, \
    CAST(SUM(c.workloads_ambient) AS BIGINT) AS workloads_ambient, \
    CAST(SUM(c.workloads_waypoint) AS BIGINT) AS workloads_waypoint, \
    COUNT(*) AS namespaces, \
    CAST(SUM(CASE WHEN c.mtls_mode = 'STRICT' THEN 1 ELSE 0 END) AS BIGINT) AS namespaces_strict, \
    CAST(SUM(CASE WHEN c.mtls_mode = 'PERMISSIVE' THEN 1 ELSE 0 END) AS BIGINT) AS namespaces_permissive, \
    CAST(SUM(CASE WHEN c.mtls_mode = 'DISABLE' THEN 1 ELSE 0 END) AS BIGINT) AS namespaces_disable, \
    CAST(NULL AS BIGINT) AS namespaces_injected, \
    CAST(NULL AS BIGINT) AS namespaces_ambient, \
    CAST(SUM(c.selectors_effective) AS BIGINT) AS selectors_effective, \
    CAST(SUM(c.selectors_ineffective) AS BIGINT) AS selectors_ineffective, \
    CAST(SUM(c.workload_entries_selected) AS BIGINT) AS workload_entries_selected, \
    CAST(SUM(c.workload_entries_total) AS BIGINT) AS workload_entries_total, \
    CAST(SUM(c.authz_as_written) AS BIGINT) AS authz_as_written, \
    CAST(SUM(c.authz_reduced_to_l4) AS BIGINT) AS authz_reduced_to_l4, \
    CAST(SUM(c.authz_not_enforced) AS BIGINT) AS authz_not_enforced, \
    CAST(SUM(c.routes_resolving) AS BIGINT) AS routes_resolving, \
    CAST(SUM(c.routes_nowhere) AS BIGINT) AS routes_nowhere, \
    CAST(SUM(c.routes_unchecked) AS BIGINT) AS routes_unchecked, \
    MIN(c.mtls_mode) AS mode_min, MAX(c.mtls_mode) AS mode_max";

/// A run's head coverage in the scope; for a namespace, the lowest and highest of its
/// mTLS modes over the clusters that have it (the same: that is its mode).
#[derive(FromRow)]
struct ScopedCoverage {
    run_id: i64,
    #[sqlx(flatten)]
    numbers: CoverageNumbers,
    mode_min: Option<String>,
    mode_max: Option<String>,
}

#[derive(FromRow)]
struct ScopedFindings {
    run_id: i64,
    #[sqlx(flatten)]
    findings: FindingCounts,
}

impl Store {
    /// The clusters a repository's runs stored coverage for, by name: each has a
    /// series of its own. Empty for a repository with one cluster or none.
    pub async fn clusters(&self, repo_id: i64) -> Result<Vec<String>> {
        let sql = "SELECT cluster FROM repo_clusters WHERE repo_id = $1 ORDER BY cluster";
        let clusters = with_pool!(self, p => {
            sqlx::query_scalar::<_, String>(sql).bind(repo_id).fetch_all(p).await?
        });
        Ok(clusters)
    }

    /// Forgets the clusters no remaining run of their repository stored coverage for
    /// (after retention deleted runs). Each check stops at the first run it finds.
    pub(super) async fn prune_repo_clusters(&self) -> Result<u64> {
        let sql = "DELETE FROM repo_clusters WHERE NOT EXISTS (SELECT 1 FROM runs r \
                       JOIN coverage_totals t ON t.run_id = r.id AND t.cluster = repo_clusters.cluster \
                       WHERE r.repo_id = repo_clusters.repo_id)";
        let n = with_pool!(self, p => sqlx::query(sql).execute(p).await?.rows_affected());
        Ok(n)
    }

    /// The head metrics of `runs` in one cluster and/or namespace (at least one of
    /// them set), by run id. A run that stored nothing for the scope (the cluster or
    /// namespace is not in its commit) has no entry. A namespace without a cluster
    /// is added up over the clusters that have it.
    pub(super) async fn scoped_metrics(
        &self,
        runs: &[i64],
        cluster: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<HashMap<i64, Metrics>> {
        // Both statements bind the namespace, the cluster (those set, in that order),
        // then the run ids.
        let (cov_from, cov_group, alias) = match namespace {
            None => (
                format!(
                    "SELECT t.run_id, {TOTAL_COLUMNS}, CAST(NULL AS TEXT) AS mode_min, \
                     CAST(NULL AS TEXT) AS mode_max FROM coverage_totals t WHERE t.revision = 'head'"
                ),
                "",
                "t",
            ),
            Some(_) => (
                format!(
                    "SELECT c.run_id, {NAMESPACE_SUMS} FROM coverage_namespaces c \
                     WHERE c.revision = 'head'"
                ),
                " GROUP BY c.run_id",
                "c",
            ),
        };
        let found_from = match namespace {
            None => format!("SELECT g.run_id, {FINDING_SUMS} FROM findings g WHERE TRUE"),
            Some(_) => format!(
                "SELECT g.run_id, {NAMESPACE_FINDING_SUMS} FROM namespace_findings g WHERE TRUE"
            ),
        };
        let scope: Vec<&str> = namespace.into_iter().chain(cluster).collect();
        let mut coverage: Vec<ScopedCoverage> = Vec::new();
        let mut findings: HashMap<i64, FindingCounts> = HashMap::new();
        for ids in runs.chunks(IDS_PER_QUERY) {
            let filter = |alias: &str| {
                let mut n = 0;
                let mut next = || {
                    n += 1;
                    format!("${n}")
                };
                let mut sql = String::new();
                if namespace.is_some() {
                    sql.push_str(&format!(" AND {alias}.namespace = {}", next()));
                }
                if cluster.is_some() {
                    sql.push_str(&format!(" AND {alias}.cluster = {}", next()));
                }
                let list: Vec<String> = ids.iter().map(|_| next()).collect();
                sql.push_str(&format!(" AND {alias}.run_id IN ({})", list.join(", ")));
                sql
            };
            let cov_sql = format!("{cov_from}{}{cov_group}", filter(alias));
            let found_sql = format!("{found_from}{} GROUP BY g.run_id", filter("g"));
            with_pool!(self, p => {
                let mut q = sqlx::query_as::<_, ScopedCoverage>(&cov_sql);
                for v in &scope {
                    q = q.bind(*v);
                }
                for id in ids {
                    q = q.bind(*id);
                }
                coverage.extend(q.fetch_all(p).await?);
                let mut q = sqlx::query_as::<_, ScopedFindings>(&found_sql);
                for v in &scope {
                    q = q.bind(*v);
                }
                for id in ids {
                    q = q.bind(*id);
                }
                for f in q.fetch_all(p).await? {
                    findings.insert(f.run_id, f.findings);
                }
            });
        }
        Ok(coverage
            .into_iter()
            .map(|c| {
                let mut numbers = c.numbers;
                numbers.mtls_mode = c.mode_min.filter(|min| c.mode_max.as_ref() == Some(min));
                let metrics = Metrics {
                    coverage: numbers,
                    findings: findings.remove(&c.run_id).unwrap_or_default(),
                };
                (c.run_id, metrics)
            })
            .collect())
    }
}
