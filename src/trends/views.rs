//! Runs and repositories as the API and the dashboard show them: links to GitHub,
//! times as text, and what merging a pull request would change.

use super::format_time;
use crate::store::{
    CoverageNumbers, FindingCounts, JobKind, Metrics, RepoOverview, RunWithCoverage,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// A run as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub id: i64,
    pub kind: JobKind,
    pub pr: Option<i64>,
    pub pr_url: Option<String>,
    pub commit: String,
    pub commit_url: String,
    pub base_commit: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    pub outcome: crate::store::RunOutcome,
    pub error: Option<String>,
    pub blocking: i64,
    pub suppressed: i64,
    pub findings: FindingCounts,
    pub coverage: RunCoverage,
    /// PR runs: head minus base, per count (what merging would change).
    pub delta: Option<BTreeMap<&'static str, i64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunCoverage {
    pub head: Option<CoverageNumbers>,
    pub base: Option<CoverageNumbers>,
}

pub fn run_view(r: RunWithCoverage, web_url: &str) -> RunView {
    let run = r.run;
    let delta = match (&r.head, &r.base) {
        (Some(h), Some(b)) => Some(
            h.counts()
                .into_iter()
                .zip(b.counts())
                .filter_map(|((k, h), (_, b))| Some((k, h? - b?)))
                .collect(),
        ),
        _ => None,
    };
    let web = web_url.trim_end_matches('/');
    RunView {
        id: run.id,
        kind: run.kind,
        pr: run.pr_number,
        pr_url: run
            .pr_number
            .map(|n| format!("{web}/{}/pull/{n}", run.repo)),
        commit_url: format!("{web}/{}/commit/{}", run.repo, run.head_sha),
        commit: run.head_sha,
        base_commit: run.base_sha,
        started_at: format_time(run.started_at_ms),
        finished_at: format_time(run.finished_at_ms),
        outcome: run.outcome,
        error: run.error,
        blocking: run.counts.blocking,
        suppressed: run.counts.suppressed,
        findings: FindingCounts {
            error: run.counts.errors,
            warning: run.counts.warnings,
            info: run.counts.infos,
            introduced: run.counts.introduced,
            existing: run.counts.existing,
            resolved: run.counts.resolved,
        },
        coverage: RunCoverage {
            head: r.head,
            base: r.base,
        },
        delta,
    }
}

/// A repository and its latest coverage, as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RepoView {
    pub repo: String,
    pub installed: bool,
    pub default_branch: Option<String>,
    pub latest: Option<LatestView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LatestView {
    pub run_id: i64,
    pub commit: String,
    pub finished_at: String,
    pub metrics: Metrics,
}

pub fn repo_views(rows: Vec<RepoOverview>) -> Vec<RepoView> {
    rows.into_iter()
        .map(|r| RepoView {
            repo: r.full_name,
            installed: r.installed,
            default_branch: r.default_branch,
            latest: r.latest.map(|l| LatestView {
                run_id: l.run_id,
                commit: l.head_sha,
                finished_at: format_time(l.finished_at_ms),
                metrics: l.metrics,
            }),
        })
        .collect()
}
