//! Seed data for the trends tests: runs stored through the store's own insert path,
//! with reports whose coverage and findings the test chooses.

use super::{NAMESPACE, REPO, REPO_ID};
use meshward::finding::{Finding, ResourceRef, Severity, Status};
use meshward::model::coverage::{Coverage, NamespaceCoverage, TotalCoverage};
use meshward::report::{Report, Verdict};
use meshward::store::{JobKind, NewRun, RepoRecord, Store};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// 2026-11-01T00:00:00Z.
pub const T0: i64 = 1_793_491_200_000;
pub const HOUR: i64 = 3_600_000;
pub const DAY: i64 = 24 * HOUR;

/// A namespace in a seeded revision.
#[derive(Clone, Copy)]
pub struct Ns {
    pub name: &'static str,
    pub mode: &'static str,
    pub workloads: usize,
    pub with_proxy: usize,
    /// Error findings about objects in it.
    pub errors: usize,
}

pub const fn ns(
    name: &'static str,
    mode: &'static str,
    workloads: usize,
    with_proxy: usize,
    errors: usize,
) -> Ns {
    Ns {
        name,
        mode,
        workloads,
        with_proxy,
        errors,
    }
}

fn template() -> &'static Report {
    static T: OnceLock<Report> = OnceLock::new();
    T.get_or_init(|| {
        let tree = meshward::workspace::Tree {
            files: vec![meshward::manifest::SourceFile {
                path: "ns.yaml".into(),
                bytes: NAMESPACE.as_bytes().to_vec(),
            }],
            ..Default::default()
        };
        let opts = meshward::analysis::Options::new(
            chrono::NaiveDate::from_ymd_opt(2026, 11, 30).expect("date"),
        );
        meshward::analysis::analyze(
            None,
            meshward::analysis::Revision {
                label: "head".into(),
                tree: &tree,
            },
            &opts,
        )
        .expect("analyze")
    })
}

fn coverage(namespaces: &[Ns]) -> Coverage {
    let mut map = BTreeMap::new();
    let mut total = TotalCoverage::default();
    for n in namespaces {
        // Each namespace: one selector that selects, one that selects nothing in
        // namespaces that are not STRICT; one WorkloadEntry, selected when STRICT.
        let strict = n.mode == "STRICT";
        let c = NamespaceCoverage {
            workloads: n.workloads,
            workloads_with_proxy: n.with_proxy,
            mtls_mode: n.mode.to_string(),
            selectors_effective: 1,
            selectors_ineffective: usize::from(!strict),
            workload_entries_selected: usize::from(strict),
            workload_entries_total: 1,
        };
        total.namespaces += 1;
        total.namespaces_strict += usize::from(strict);
        total.namespaces_injected += usize::from(n.with_proxy > 0);
        total.workloads += c.workloads;
        total.workloads_with_proxy += c.workloads_with_proxy;
        total.selectors_effective += c.selectors_effective;
        total.selectors_ineffective += c.selectors_ineffective;
        total.workload_entries_selected += c.workload_entries_selected;
        total.workload_entries_total += c.workload_entries_total;
        map.insert(n.name.to_string(), c);
    }
    Coverage {
        total,
        namespaces: map,
    }
}

fn finding(ns: &str, i: usize, status: Status) -> Finding {
    Finding {
        subjects: Vec::new(),
        unchecked: false,
        occurrence: None,
        cluster: None,
        rule: "selector/matches-nothing".into(),
        severity: Severity::Error,
        status,
        resource: Some(ResourceRef {
            api_version: "security.istio.io/v1".into(),
            kind: "AuthorizationPolicy".into(),
            namespace: Some(ns.to_string()),
            name: format!("policy-{i}"),
        }),
        file: format!("apps/{ns}/policy-{i}.yaml"),
        line: 7,
        path: vec!["spec".into(), "selector".into()],
        message: "selects nothing".into(),
        istio_code: Some("IST0127".into()),
    }
}

/// A report of `head` (and `base`, for a PR) with the given coverage and findings.
pub fn report(head: &[Ns], base: Option<&[Ns]>) -> Report {
    let mut r = template().clone();
    r.coverage.head = coverage(head);
    r.coverage.base = base.map(coverage);
    r.suppressed.clear();
    let base_errors: BTreeMap<&str, usize> = base
        .unwrap_or(&[])
        .iter()
        .map(|n| (n.name, n.errors))
        .collect();
    let mut findings = Vec::new();
    for n in head {
        let in_base = base.map(|_| base_errors.get(n.name).copied().unwrap_or(0));
        for i in 0..n.errors {
            let status = match in_base {
                Some(b) if i >= b => Status::Introduced,
                _ => Status::Existing,
            };
            findings.push(finding(n.name, i, status));
        }
    }
    for n in base.unwrap_or(&[]) {
        let head_errors = head
            .iter()
            .find(|h| h.name == n.name)
            .map_or(0, |h| h.errors);
        for i in head_errors..n.errors {
            findings.push(finding(n.name, i, Status::Resolved));
        }
    }
    let s = &mut r.summary;
    s.introduced = findings
        .iter()
        .filter(|f| f.status == Status::Introduced)
        .count();
    s.existing = findings
        .iter()
        .filter(|f| f.status == Status::Existing)
        .count();
    s.resolved = findings
        .iter()
        .filter(|f| f.status == Status::Resolved)
        .count();
    s.errors = findings
        .iter()
        .filter(|f| f.status != Status::Resolved)
        .count();
    s.warnings = 0;
    s.infos = 0;
    s.suppressed = 0;
    s.blocking = if base.is_some() {
        s.introduced
    } else {
        s.errors
    };
    s.verdict = if s.blocking > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    r.findings = findings;
    r
}

pub async fn repo(store: &Store, full_name: &str, id: i64) {
    store
        .upsert_repo(
            &RepoRecord {
                github_id: id,
                full_name: full_name.into(),
                installation_id: Some(77),
                default_branch: Some("main".into()),
                installed: true,
            },
            T0,
        )
        .await
        .expect("repo");
}

/// Stores a baseline of `REPO` at `at` (or an errored one when `head` is None).
pub async fn baseline(store: &Store, sha: &str, at: i64, head: Option<&[Ns]>) -> i64 {
    let report = head.map(|h| report(h, None));
    store
        .insert_run(&NewRun {
            kind: JobKind::Baseline,
            repo_id: REPO_ID,
            repo: REPO,
            pr_number: None,
            head_sha: sha,
            base_sha: None,
            started_at_ms: at - 60_000,
            finished_at_ms: at,
            report: report.as_ref(),
            error: if report.is_none() {
                Some("unpacking acme/gitops: tarball over the limit")
            } else {
                None
            },
        })
        .await
        .expect("baseline")
}

/// Stores a PR run of `REPO`.
pub async fn check(store: &Store, pr: i64, sha: &str, at: i64, head: &[Ns], base: &[Ns]) -> i64 {
    let report = report(head, Some(base));
    store
        .insert_run(&NewRun {
            kind: JobKind::Check,
            repo_id: REPO_ID,
            repo: REPO,
            pr_number: Some(pr),
            head_sha: sha,
            base_sha: Some("b".repeat(40).as_str()),
            started_at_ms: at - 60_000,
            finished_at_ms: at,
            report: Some(&report),
            error: None,
        })
        .await
        .expect("check")
}

pub fn sha(c: char) -> String {
    c.to_string().repeat(40)
}

/// The history the API, CLI and dashboard tests read (times from `T0`, 2026-11-01):
///
/// | day | baselines (finished at)                  | namespaces (mode, workloads/with proxy, errors)        |
/// |-----|------------------------------------------|--------------------------------------------------------|
/// | 0   | a (10:00)                                | shop PERMISSIVE 4/2 e2, pay PERMISSIVE 2/0 e1           |
/// | 1   | b (09:00), c (15:00: the day's point)    | b: shop 4/3 e2, pay 2/0; c: shop STRICT 4/4 e1, pay 2/1 |
/// | 2   | none (gap)                               |                                                        |
/// | 3   | d (12:00) errored (gap, with the error)  |                                                        |
/// | 4   | e (08:00)                                | shop STRICT 5/5, pay STRICT 2/2, new PERMISSIVE 1/0 e1  |
/// | 5-6 | none                                     |                                                        |
///
/// PR runs: #7 twice (day 1 and day 4), #8 once (day 4).
pub async fn history(store: &Store) {
    repo(store, REPO, REPO_ID).await;
    repo(store, "acme/empty", 1002).await;
    let day0 = [
        ns("shop", "PERMISSIVE", 4, 2, 2),
        ns("pay", "PERMISSIVE", 2, 0, 1),
    ];
    let day1b = [
        ns("shop", "PERMISSIVE", 4, 3, 2),
        ns("pay", "PERMISSIVE", 2, 0, 1),
    ];
    let day1c = [
        ns("shop", "STRICT", 4, 4, 1),
        ns("pay", "PERMISSIVE", 2, 1, 1),
    ];
    let day4 = [
        ns("shop", "STRICT", 5, 5, 0),
        ns("pay", "STRICT", 2, 2, 0),
        ns("new", "PERMISSIVE", 1, 0, 1),
    ];
    baseline(store, &sha('a'), T0 + 10 * HOUR, Some(&day0)).await;
    baseline(store, &sha('b'), T0 + DAY + 9 * HOUR, Some(&day1b)).await;
    check(store, 7, &sha('7'), T0 + DAY + 12 * HOUR, &day1c, &day1b).await;
    baseline(store, &sha('c'), T0 + DAY + 15 * HOUR, Some(&day1c)).await;
    baseline(store, &sha('d'), T0 + 3 * DAY + 12 * HOUR, None).await;
    baseline(store, &sha('e'), T0 + 4 * DAY + 8 * HOUR, Some(&day4)).await;
    check(store, 7, &sha('8'), T0 + 4 * DAY + 9 * HOUR, &day4, &day1c).await;
    let pr8 = [
        ns("shop", "STRICT", 5, 4, 1),
        ns("pay", "STRICT", 2, 2, 0),
        ns("new", "PERMISSIVE", 1, 0, 1),
    ];
    check(store, 8, &sha('9'), T0 + 4 * DAY + 10 * HOUR, &pr8, &day4).await;
}
