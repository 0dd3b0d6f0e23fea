//! A repository's coverage series: one point per bucket (gaps explicit and
//! explained), for the whole repository, one of its clusters, or one namespace, and
//! the clusters it has series for.

use super::{clip, format_time, Interval, Range, TrendsError};
use crate::store::{BucketRow, Metrics, RunOutcome};
use serde::{Deserialize, Serialize};

/// The longest cluster name a caller may ask for: a DNS name's limit, and room for
/// the API server URLs Argo CD destinations name clusters by.
pub(crate) const MAX_CLUSTER_NAME: usize = 253;

/// The run a point shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointRun {
    pub id: i64,
    /// The commit on the default branch the baseline checked.
    pub commit: String,
    pub finished_at: String,
    pub outcome: RunOutcome,
}

/// One bucket of a series: the last baseline that finished in it and its metrics,
/// or a gap (`metrics` null) with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    pub start: String,
    pub end: String,
    /// Baseline runs that finished in the bucket (errored ones included).
    pub baselines: i64,
    pub run: Option<PointRun>,
    pub metrics: Option<Metrics>,
    /// Why there are no metrics for this bucket; null when there are.
    pub gap: Option<String>,
}

/// A coverage time series of one repository (or one cluster or namespace in it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Series {
    pub repo: String,
    /// The cluster the series is of; null: the whole repository.
    #[serde(default)]
    pub cluster: Option<String>,
    pub namespace: Option<String>,
    /// The clusters the repository's runs stored coverage for, each a series of its
    /// own (`cluster=`); empty for a repository with one cluster or none.
    #[serde(default)]
    pub clusters: Vec<String>,
    pub interval: Interval,
    pub from: String,
    pub to: String,
    pub points: Vec<Point>,
}

impl Series {
    pub fn gaps(&self) -> usize {
        self.points.iter().filter(|p| p.metrics.is_none()).count()
    }
    /// The newest point with metrics.
    pub fn latest(&self) -> Option<&Point> {
        self.points.iter().rev().find(|p| p.metrics.is_some())
    }
}

/// What a series is of: the whole repository, one of its clusters, one namespace
/// (in one cluster, or added up over the clusters that have it), or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scope<'a> {
    pub cluster: Option<&'a str>,
    pub namespace: Option<&'a str>,
}

/// A cluster name a caller asks for, checked before it reaches a query: not empty,
/// at most [`MAX_CLUSTER_NAME`] characters, no control characters or surrounding
/// spaces (clusters are named by folders, `.meshward.yaml` names and Argo CD
/// destinations, so no narrower alphabet fits them all). Empty is none.
pub(crate) fn cluster_name(s: Option<&str>) -> Result<Option<&str>, TrendsError> {
    let Some(s) = s.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let ok =
        s.chars().count() <= MAX_CLUSTER_NAME && !s.chars().any(char::is_control) && s.trim() == s;
    if ok {
        Ok(Some(s))
    } else {
        Err(TrendsError::parameter(
            "cluster",
            format!(
                "`{}` is not a cluster name: at most {MAX_CLUSTER_NAME} characters, without \
                 control characters or spaces around it",
                clip(&s.replace(char::is_control, "?"), 60)
            ),
        ))
    }
}

/// Builds the series from the store's rows (one per bucket that has a baseline):
/// every bucket of `range` gets a point, the ones without metrics say why. The
/// caller fills in `clusters`.
pub fn build_series(repo: &str, scope: Scope, range: &Range, rows: Vec<BucketRow>) -> Series {
    let first = range.first_bucket();
    let mut rows = rows.into_iter().peekable();
    let mut points = Vec::with_capacity(range.buckets().max(0) as usize);
    for b in first..first + range.buckets() {
        let start = range.interval.bucket_start(b);
        let end = range.interval.bucket_start(b + 1);
        // Rows are ordered by bucket; skip any outside the range (there should be none).
        while rows.peek().is_some_and(|r| r.bucket < b) {
            rows.next();
        }
        let row = if rows.peek().is_some_and(|r| r.bucket == b) {
            rows.next()
        } else {
            None
        };
        let point = match row {
            None => Point {
                start: format_time(start),
                end: format_time(end),
                baselines: 0,
                run: None,
                metrics: None,
                gap: Some("no baseline run finished in this bucket".into()),
            },
            Some(r) => Point {
                start: format_time(start),
                end: format_time(end),
                baselines: r.baselines,
                gap: r.metrics.is_none().then(|| gap(&r, scope)),
                run: Some(PointRun {
                    id: r.run_id,
                    commit: r.head_sha,
                    finished_at: format_time(r.finished_at_ms),
                    outcome: r.outcome,
                }),
                metrics: r.metrics,
            },
        };
        points.push(point);
    }
    Series {
        repo: repo.to_string(),
        cluster: scope.cluster.map(str::to_string),
        namespace: scope.namespace.map(str::to_string),
        clusters: Vec::new(),
        interval: range.interval,
        from: format_time(range.start_ms),
        to: format_time(range.end_ms),
        points,
    }
}

/// Why a bucket's run has no metrics for the scope.
fn gap(r: &BucketRow, scope: Scope) -> String {
    let sha = short_sha(&r.head_sha);
    match (r.outcome, scope.cluster, scope.namespace) {
        (RunOutcome::Error, _, _) => format!(
            "{} baseline run{} in this bucket failed; the last, of {sha}: {}",
            r.baselines,
            if r.baselines == 1 { "" } else { "s" },
            clip(
                r.error
                    .as_deref()
                    .and_then(|e| e.lines().next())
                    .unwrap_or("no error recorded"),
                200
            )
        ),
        (_, Some(c), Some(ns)) => format!("namespace {ns} is not in cluster {c} in commit {sha}"),
        (_, None, Some(ns)) => format!("namespace {ns} is not in commit {sha}"),
        (_, Some(c), None) => format!("cluster {c} is not in commit {sha}"),
        (_, None, None) => format!("the baseline of {sha} stored no coverage"),
    }
}

pub fn short_sha(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Why a series could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("no history for {0}: no installation or run of it is recorded in this store")]
    UnknownRepo(String),
    #[error("cluster: no run of {repo} names a cluster `{cluster}`; {}", known_clusters(.known))]
    UnknownCluster {
        repo: String,
        cluster: String,
        known: Vec<String>,
    },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

fn known_clusters(known: &[String]) -> String {
    if known.is_empty() {
        "its runs name none (one cluster: leave the cluster out)".into()
    } else {
        format!("its clusters: {}", known.join(", "))
    }
}

/// A repository of the store, with the clusters its runs stored coverage for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RepoHistory {
    pub(crate) repo_id: i64,
    /// `owner/name` as stored.
    pub(crate) name: String,
    pub(crate) clusters: Vec<String>,
}

impl RepoHistory {
    /// Finds `repo` (`owner/name`, any case) in the store.
    pub(crate) async fn open(
        store: &crate::store::Store,
        repo: &str,
    ) -> Result<RepoHistory, LoadError> {
        let (repo_id, name) = store
            .find_repo(repo)
            .await?
            .ok_or_else(|| LoadError::UnknownRepo(repo.to_string()))?;
        let clusters = store.clusters(repo_id).await?;
        Ok(RepoHistory {
            repo_id,
            name,
            clusters,
        })
    }

    /// The series of `scope` over `range`. A cluster no run names is refused (a
    /// typo would otherwise read as a series of gaps).
    pub(crate) async fn series(
        &self,
        store: &crate::store::Store,
        scope: Scope<'_>,
        range: &Range,
    ) -> Result<Series, LoadError> {
        if let Some(c) = scope.cluster {
            if !self.clusters.iter().any(|k| k == c) {
                return Err(LoadError::UnknownCluster {
                    repo: self.name.clone(),
                    cluster: c.to_string(),
                    known: self.clusters.clone(),
                });
            }
        }
        let rows = store
            .series(&crate::store::SeriesQuery {
                repo_id: self.repo_id,
                start_ms: range.start_ms,
                end_ms: range.end_ms,
                bucket_ms: range.interval.size_ms(),
                offset_ms: range.interval.offset_ms(),
                cluster: scope.cluster,
                namespace: scope.namespace,
            })
            .await?;
        let mut series = build_series(&self.name, scope, range, rows);
        series.clusters = self.clusters.clone();
        Ok(series)
    }
}

/// Reads the series of `repo` (`owner/name`, any case) over `range` from the store.
pub async fn load_series(
    store: &crate::store::Store,
    repo: &str,
    scope: Scope<'_>,
    range: &Range,
) -> Result<Series, LoadError> {
    RepoHistory::open(store, repo)
        .await?
        .series(store, scope, range)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_bounded_and_errors_name_the_parameter() {
        assert_eq!(cluster_name(None), Ok(None));
        assert_eq!(cluster_name(Some("")), Ok(None));
        for ok in ["prod-eu1", "in-cluster", "https://10.0.0.1:6443", "Prod EU"] {
            assert_eq!(cluster_name(Some(ok)), Ok(Some(ok)));
        }
        let long = "x".repeat(MAX_CLUSTER_NAME + 1);
        for bad in [" prod", "prod\n", "a\u{0}b", long.as_str()] {
            let e = cluster_name(Some(bad)).unwrap_err().to_string();
            assert!(e.starts_with("cluster: `"), "{e}");
            assert!(e.contains("is not a cluster name"), "{e}");
            assert!(e.len() < 250, "the name is clipped: {e}");
        }
    }
}
