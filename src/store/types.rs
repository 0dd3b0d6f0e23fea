//! Records the store reads and writes.

use crate::report::{Report, Verdict};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum JobKind {
    /// A pull request: base and head are checked, findings get a status.
    Check,
    /// A push to the default branch: its coverage, the history trends read from.
    Baseline,
}

impl JobKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobKind::Check => "check",
            JobKind::Baseline => "baseline",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Superseded,
}

impl JobState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Superseded => "superseded",
        }
    }
    pub(crate) const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Superseded,
    ];
}

/// A job to queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    pub kind: JobKind,
    /// GitHub's numeric repository id (stable across renames).
    pub repo_id: i64,
    /// `owner/name`.
    pub repo: String,
    pub installation_id: Option<i64>,
    pub pr_number: Option<i64>,
    pub head_sha: String,
    pub base_sha: Option<String>,
    pub base_ref: Option<String>,
    pub delivery_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// A new job; `superseded` older queued checks of the same PR were replaced.
    Queued { id: i64, superseded: u64 },
    /// The same job was already queued.
    Coalesced(i64),
}

impl Enqueued {
    pub fn id(&self) -> i64 {
        match self {
            Enqueued::Queued { id, .. } | Enqueued::Coalesced(id) => *id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Job {
    pub id: i64,
    pub kind: JobKind,
    pub repo_id: i64,
    pub repo: String,
    pub installation_id: Option<i64>,
    pub pr_number: Option<i64>,
    pub head_sha: String,
    pub base_sha: Option<String>,
    pub base_ref: Option<String>,
    pub delivery_id: Option<String>,
    pub state: JobState,
    /// Attempts started so far (counting the current one while running).
    pub attempts: i64,
    pub max_attempts: i64,
    pub run_after_ms: i64,
    pub locked_by: Option<String>,
    pub locked_until_ms: Option<i64>,
    pub last_error: Option<String>,
    pub superseded_by: Option<i64>,
    pub created_at_ms: i64,
    pub finished_at_ms: Option<i64>,
}

/// A verified webhook delivery.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub delivery_id: String,
    pub event: String,
    pub action: Option<String>,
    pub repo: Option<String>,
    /// What meshward did with it: `enqueued`, `repos`, `ignored`.
    pub outcome: String,
}

/// What a delivery asks of the store.
#[derive(Debug, Clone, Default)]
pub struct DeliveryEffect {
    pub upsert_repos: Vec<RepoRecord>,
    /// Repository ids no longer installed.
    pub remove_repos: Vec<i64>,
    /// An installation removed: all of its repositories.
    pub remove_installation: Option<i64>,
    pub jobs: Vec<NewJob>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Seen before: nothing was done.
    Duplicate,
    Recorded {
        jobs: Vec<Enqueued>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RepoRecord {
    pub github_id: i64,
    pub full_name: String,
    pub installation_id: Option<i64>,
    pub default_branch: Option<String>,
    pub installed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum RunOutcome {
    Pass,
    Fail,
    /// The check could not run (the error is stored).
    Error,
}

impl RunOutcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Pass => "pass",
            RunOutcome::Fail => "fail",
            RunOutcome::Error => "error",
        }
    }
}

/// A finished run to store: a report, or the error that stopped it.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub kind: JobKind,
    pub repo_id: i64,
    pub repo: &'a str,
    pub pr_number: Option<i64>,
    pub head_sha: &'a str,
    /// The base commit actually compared against.
    pub base_sha: Option<&'a str>,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub report: Option<&'a Report>,
    pub error: Option<&'a str>,
}

impl NewRun<'_> {
    pub(crate) fn outcome(&self) -> RunOutcome {
        match self.report {
            Some(r) if self.error.is_none() => match r.summary.verdict {
                Verdict::Pass => RunOutcome::Pass,
                Verdict::Fail => RunOutcome::Fail,
            },
            _ => RunOutcome::Error,
        }
    }
    pub(crate) fn counts(&self) -> RunCounts {
        match self.report {
            Some(r) => {
                let s = &r.summary;
                RunCounts {
                    blocking: s.blocking as i64,
                    introduced: s.introduced as i64,
                    existing: s.existing as i64,
                    resolved: s.resolved as i64,
                    errors: s.errors as i64,
                    warnings: s.warnings as i64,
                    infos: s.infos as i64,
                    suppressed: s.suppressed as i64,
                }
            }
            None => RunCounts::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct RunCounts {
    pub blocking: i64,
    pub introduced: i64,
    pub existing: i64,
    pub resolved: i64,
    pub errors: i64,
    pub warnings: i64,
    pub infos: i64,
    pub suppressed: i64,
}

#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub repo: Option<String>,
    pub pr_number: Option<i64>,
    pub job_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RunRecord {
    pub id: i64,
    pub job_id: Option<i64>,
    pub kind: JobKind,
    pub repo_id: i64,
    pub repo: String,
    pub pr_number: Option<i64>,
    pub head_sha: String,
    pub base_sha: Option<String>,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub outcome: RunOutcome,
    pub error: Option<String>,
    #[sqlx(flatten)]
    pub counts: RunCounts,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct FindingRecord {
    pub rule: String,
    pub severity: String,
    pub status: String,
    pub resource_api_version: Option<String>,
    pub resource_kind: Option<String>,
    pub resource_namespace: Option<String>,
    pub resource_name: Option<String>,
    pub file: String,
    pub line: i64,
    pub message: String,
    pub istio_code: Option<String>,
    /// JSON array: the field the finding is about.
    pub field_path: String,
    /// The cluster it is about, in a repository that deploys to several.
    pub cluster: Option<String>,
}

/// The evidence about one subject that a run's mTLS rules were judged on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceRecord {
    /// `namespace:<ns>` or `workload:<ns>:<labels>`.
    pub subject: String,
    pub source: Option<String>,
    pub window: Option<String>,
    /// When the numbers were taken (ms since the epoch).
    pub taken_at_ms: Option<i64>,
    pub requests_total: i64,
    pub requests_plaintext: i64,
    pub tcp_connections_total: i64,
    pub tcp_connections_plaintext: i64,
    /// Bytes received without mTLS (0 in evidence stored before version 6).
    pub tcp_bytes_plaintext: i64,
    /// Number name → PromQL (`query` for evidence files with one query).
    pub queries: std::collections::BTreeMap<String, String>,
    pub workloads: Vec<String>,
    pub error: Option<String>,
}

impl EvidenceRecord {
    /// The rows a run's evidence becomes.
    pub(crate) fn of(e: &crate::evidence::Evidence) -> Vec<EvidenceRecord> {
        let ms = |t: Option<&String>| {
            t.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_millis())
        };
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        e.subjects()
            .map(|(subject, t)| {
                let mut queries = t.queries.clone();
                if let Some(q) = &t.query {
                    queries.insert("query".into(), q.clone());
                }
                EvidenceRecord {
                    subject,
                    source: e.source.clone(),
                    window: e.window.clone(),
                    taken_at_ms: ms(t.taken_at.as_ref().or(e.taken_at.as_ref())),
                    requests_total: n(t.requests_total),
                    requests_plaintext: n(t.requests_plaintext),
                    tcp_connections_total: n(t.tcp_connections_total),
                    tcp_connections_plaintext: n(t.tcp_connections_plaintext),
                    tcp_bytes_plaintext: n(t.tcp_bytes_plaintext),
                    queries,
                    workloads: t.workloads.clone(),
                    error: t.error.clone(),
                }
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverageRecord {
    /// None: the whole repository; else one of the clusters it deploys to.
    pub cluster: Option<String>,
    /// `base` or `head`.
    pub revision: String,
    pub total: TotalCoverageRecord,
    pub namespaces: Vec<NamespaceCoverageRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct TotalCoverageRecord {
    pub namespaces: i64,
    pub namespaces_strict: i64,
    pub namespaces_injected: i64,
    pub namespaces_ambient: i64,
    pub workloads: i64,
    pub workloads_with_proxy: i64,
    pub workloads_ambient: i64,
    pub workloads_waypoint: i64,
    pub selectors_effective: i64,
    pub selectors_ineffective: i64,
    pub workload_entries_selected: i64,
    pub workload_entries_total: i64,
    pub authz_as_written: i64,
    pub authz_reduced_to_l4: i64,
    pub authz_not_enforced: i64,
    pub routes_resolving: i64,
    pub routes_nowhere: i64,
    pub routes_unchecked: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct NamespaceCoverageRecord {
    pub namespace: String,
    pub mtls_mode: String,
    pub workloads: i64,
    pub workloads_with_proxy: i64,
    pub workloads_ambient: i64,
    pub workloads_waypoint: i64,
    pub selectors_effective: i64,
    pub selectors_ineffective: i64,
    pub workload_entries_selected: i64,
    pub workload_entries_total: i64,
    pub authz_as_written: i64,
    pub authz_reduced_to_l4: i64,
    pub authz_not_enforced: i64,
    pub routes_resolving: i64,
    pub routes_nowhere: i64,
    pub routes_unchecked: i64,
}

// ---------------------------------------------------------------- trends

/// How much of the mesh a revision enforces: for a whole repository (or one of its
/// clusters), or one namespace (then `namespaces` counts it once per cluster that has
/// it, 1 in a repository with one cluster, and `mtls_mode` says which mode it has).
/// Read as a row: the columns of `coverage_totals`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct CoverageNumbers {
    pub workloads: i64,
    /// Workloads with a sidecar.
    pub workloads_with_proxy: i64,
    /// Workloads ztunnel captures (ambient), and of those the ones a waypoint serves
    /// (version 6; 0 in runs stored before it).
    #[serde(default)]
    pub workloads_ambient: i64,
    #[serde(default)]
    pub workloads_waypoint: i64,
    pub namespaces: i64,
    pub namespaces_strict: i64,
    pub namespaces_permissive: i64,
    pub namespaces_disable: i64,
    /// Whole repository only (null for a namespace: not recorded per namespace).
    pub namespaces_injected: Option<i64>,
    /// Namespaces labelled istio.io/dataplane-mode=ambient; whole repository only,
    /// as `namespaces_injected`.
    #[serde(default)]
    pub namespaces_ambient: Option<i64>,
    /// One namespace only: its effective mTLS mode (None when its clusters differ).
    #[sqlx(skip)]
    pub mtls_mode: Option<String>,
    pub selectors_effective: i64,
    pub selectors_ineffective: i64,
    pub workload_entries_selected: i64,
    pub workload_entries_total: i64,
    /// AuthorizationPolicies that select something, by how they are enforced (see
    /// `model::coverage::Enforcement`; version 6, 0 in runs stored before it).
    #[serde(default)]
    pub authz_as_written: i64,
    #[serde(default)]
    pub authz_reduced_to_l4: i64,
    #[serde(default)]
    pub authz_not_enforced: i64,
    /// Route destinations that reach pods, route nowhere, or could not be checked
    /// (version 7; 0 in runs stored before it).
    #[serde(default)]
    pub routes_resolving: i64,
    #[serde(default)]
    pub routes_nowhere: i64,
    #[serde(default)]
    pub routes_unchecked: i64,
}

impl CoverageNumbers {
    /// The counts by name, in a fixed order (for deltas, tables and gauges).
    pub(crate) fn counts(&self) -> [(&'static str, Option<i64>); 20] {
        [
            ("workloads", Some(self.workloads)),
            ("workloads_with_proxy", Some(self.workloads_with_proxy)),
            ("workloads_ambient", Some(self.workloads_ambient)),
            ("workloads_waypoint", Some(self.workloads_waypoint)),
            ("namespaces", Some(self.namespaces)),
            ("namespaces_strict", Some(self.namespaces_strict)),
            ("namespaces_permissive", Some(self.namespaces_permissive)),
            ("namespaces_disable", Some(self.namespaces_disable)),
            ("namespaces_injected", self.namespaces_injected),
            ("namespaces_ambient", self.namespaces_ambient),
            ("selectors_effective", Some(self.selectors_effective)),
            ("selectors_ineffective", Some(self.selectors_ineffective)),
            (
                "workload_entries_selected",
                Some(self.workload_entries_selected),
            ),
            ("workload_entries_total", Some(self.workload_entries_total)),
            ("authz_as_written", Some(self.authz_as_written)),
            ("authz_reduced_to_l4", Some(self.authz_reduced_to_l4)),
            ("authz_not_enforced", Some(self.authz_not_enforced)),
            ("routes_resolving", Some(self.routes_resolving)),
            ("routes_nowhere", Some(self.routes_nowhere)),
            ("routes_unchecked", Some(self.routes_unchecked)),
        ]
    }
}

/// Findings of a run (or of one namespace in it): by severity, those not resolved;
/// by status, all. Read as a row: the count columns of `runs` or `namespace_findings`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct FindingCounts {
    #[sqlx(rename = "errors")]
    pub error: i64,
    #[sqlx(rename = "warnings")]
    pub warning: i64,
    #[sqlx(rename = "infos")]
    pub info: i64,
    pub introduced: i64,
    pub existing: i64,
    pub resolved: i64,
}

/// One point of a trend: coverage and findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    #[serde(flatten)]
    pub coverage: CoverageNumbers,
    pub findings: FindingCounts,
}

/// Which baseline runs a series reads: those of `repo_id` that finished in
/// `[start_ms, end_ms)`, grouped in buckets `(finished_at_ms - offset_ms) / bucket_ms`.
#[derive(Debug, Clone)]
pub struct SeriesQuery<'a> {
    pub repo_id: i64,
    pub start_ms: i64,
    pub end_ms: i64,
    pub bucket_ms: i64,
    pub offset_ms: i64,
    /// One cluster of the repository; None: the whole repository.
    pub cluster: Option<&'a str>,
    /// One namespace (in `cluster`, else in every cluster that has it).
    pub namespace: Option<&'a str>,
}

/// The run a bucket shows: its last successful baseline, or (when every baseline in
/// the bucket errored) its last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketRow {
    pub bucket: i64,
    /// Baseline runs that finished in the bucket, errored ones included.
    pub baselines: i64,
    pub run_id: i64,
    pub head_sha: String,
    pub finished_at_ms: i64,
    pub outcome: RunOutcome,
    pub error: Option<String>,
    /// None when the run has no coverage (it errored) or, for a cluster or namespace
    /// series, the cluster or namespace is not in that commit.
    pub metrics: Option<Metrics>,
}

#[derive(Debug, Clone, Default)]
pub struct RunsPageQuery {
    pub repo_id: i64,
    pub pr_number: Option<i64>,
    pub kind: Option<JobKind>,
    /// Runs with a smaller id than this (the cursor of the page before).
    pub before_id: Option<i64>,
    pub limit: i64,
}

/// One namespace's coverage and findings in a run's head revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceMetrics {
    /// The cluster it is in, in a repository that deploys to several.
    pub cluster: Option<String>,
    pub namespace: String,
    pub metrics: Metrics,
}

/// A run with its coverage in both revisions (base: PR runs only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunWithCoverage {
    pub run: RunRecord,
    pub head: Option<CoverageNumbers>,
    pub base: Option<CoverageNumbers>,
}

/// A repository and its latest successful baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoOverview {
    pub repo_id: i64,
    pub full_name: String,
    pub installed: bool,
    pub default_branch: Option<String>,
    pub latest: Option<LatestBaseline>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestBaseline {
    pub run_id: i64,
    pub head_sha: String,
    pub finished_at_ms: i64,
    pub metrics: Metrics,
}

impl FindingCounts {
    fn add(&mut self, f: &crate::finding::Finding) {
        use crate::finding::{Severity, Status};
        match f.status {
            Status::Introduced => self.introduced += 1,
            Status::Existing => self.existing += 1,
            Status::Resolved => self.resolved += 1,
        }
        if f.status != Status::Resolved {
            match f.severity {
                Severity::Error => self.error += 1,
                Severity::Warning => self.warning += 1,
                Severity::Info => self.info += 1,
            }
        }
    }
}

/// The namespace a finding counts in for per-namespace trends: its resource's
/// namespace, or the Namespace object's own name. None for cluster-scoped objects
/// and findings about whole files (they count in the run's totals only).
fn finding_namespace(f: &crate::finding::Finding) -> Option<&str> {
    let r = f.resource.as_ref()?;
    match (&r.namespace, r.kind.as_str()) {
        (Some(ns), _) => Some(ns),
        (None, "Namespace") => Some(&r.name),
        (None, _) => None,
    }
}

/// Findings counted per cluster ('' where a finding names none) and namespace (see
/// [`finding_namespace`]).
pub(crate) fn finding_counts_by_namespace(
    findings: &[crate::finding::Finding],
) -> std::collections::BTreeMap<(String, String), FindingCounts> {
    let mut out = std::collections::BTreeMap::<(String, String), FindingCounts>::new();
    for f in findings {
        if let Some(ns) = finding_namespace(f) {
            let cluster = f.cluster.clone().unwrap_or_default();
            out.entry((cluster, ns.to_string())).or_default().add(f);
        }
    }
    out
}
