//! Seed data for the trends tests: runs stored through the store's own insert path,
//! with reports whose coverage and findings the test chooses.

use super::{NAMESPACE, REPO, REPO_ID};
use meshward::finding::{Finding, ResourceRef, Severity, Status};
use meshward::model::coverage::{Coverage, NamespaceCoverage, TotalCoverage};
use meshward::report::{ClusterCoverage, Report, Verdict};
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
    /// Workloads ztunnel captures, and of those the ones behind a waypoint (the
    /// namespace counts as ambient when it has any).
    pub ambient: usize,
    pub waypoint: usize,
    /// AuthorizationPolicies nothing enforces.
    pub unenforced: usize,
}

impl Ns {
    /// The namespace with `ambient` workloads in ambient, `waypoint` of them behind a
    /// waypoint.
    pub const fn ambient(self, ambient: usize, waypoint: usize) -> Ns {
        Ns {
            ambient,
            waypoint,
            ..self
        }
    }

    /// The namespace with `n` AuthorizationPolicies nothing enforces.
    pub const fn unenforced(self, n: usize) -> Ns {
        Ns {
            unenforced: n,
            ..self
        }
    }
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
        ambient: 0,
        waypoint: 0,
        unenforced: 0,
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
        // The selecting one is an AuthorizationPolicy: as written, or reduced to L4
        // when some ambient workload has no waypoint; `unenforced` more, enforced
        // nowhere.
        let strict = n.mode == "STRICT";
        let reduced = n.ambient > n.waypoint;
        let c = NamespaceCoverage {
            workloads: n.workloads,
            workloads_with_proxy: n.with_proxy,
            workloads_ambient: n.ambient,
            workloads_waypoint: n.waypoint,
            mtls_mode: n.mode.to_string(),
            selectors_effective: 1,
            selectors_ineffective: usize::from(!strict),
            workload_entries_selected: usize::from(strict),
            workload_entries_total: 1,
            authz_as_written: usize::from(!reduced),
            authz_reduced_to_l4: usize::from(reduced),
            authz_not_enforced: n.unenforced,
            // Every workload is routed to; outside STRICT one route goes nowhere.
            routes_resolving: n.workloads,
            routes_nowhere: usize::from(!strict),
            routes_unchecked: 0,
        };
        total.namespaces += 1;
        total.namespaces_strict += usize::from(strict);
        total.namespaces_injected += usize::from(n.with_proxy > 0);
        total.namespaces_ambient += usize::from(n.ambient > 0);
        total.workloads += c.workloads;
        total.workloads_with_proxy += c.workloads_with_proxy;
        total.workloads_ambient += c.workloads_ambient;
        total.workloads_waypoint += c.workloads_waypoint;
        total.selectors_effective += c.selectors_effective;
        total.selectors_ineffective += c.selectors_ineffective;
        total.workload_entries_selected += c.workload_entries_selected;
        total.workload_entries_total += c.workload_entries_total;
        total.authz_as_written += c.authz_as_written;
        total.authz_reduced_to_l4 += c.authz_reduced_to_l4;
        total.authz_not_enforced += c.authz_not_enforced;
        total.routes_resolving += c.routes_resolving;
        total.routes_nowhere += c.routes_nowhere;
        total.routes_unchecked += c.routes_unchecked;
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
    summarize(&mut r, findings, base.is_some());
    r
}

/// Sets the report's findings and the summary's counts and verdict from them.
fn summarize(r: &mut Report, findings: Vec<Finding>, with_base: bool) {
    let count = |f: &dyn Fn(&Finding) -> bool| findings.iter().filter(|x| f(x)).count();
    let s = &mut r.summary;
    s.introduced = count(&|f| f.status == Status::Introduced);
    s.existing = count(&|f| f.status == Status::Existing);
    s.resolved = count(&|f| f.status == Status::Resolved);
    let open = |sev: Severity| move |f: &Finding| f.status != Status::Resolved && f.severity == sev;
    s.errors = count(&open(Severity::Error));
    s.warnings = count(&open(Severity::Warning));
    s.infos = count(&open(Severity::Info));
    s.suppressed = 0;
    s.blocking = if with_base {
        count(&|f| f.status == Status::Introduced && f.severity == Severity::Error)
    } else {
        s.errors
    };
    s.verdict = if s.blocking > 0 {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    r.findings = findings;
}

/// The namespaces of each cluster of a revision.
pub type Clusters<'a> = &'a [(&'a str, &'a [Ns])];

/// A report of a repository that deploys to several clusters, as the check writes
/// it: each cluster's coverage, the whole repository's added up (namespaces keyed
/// `cluster/namespace`), findings naming their cluster, and one warning about a
/// file that names none (it counts for the whole repository only).
pub fn cluster_report(head: Clusters, base: Option<Clusters>) -> Report {
    let mut r = template().clone();
    r.suppressed.clear();
    let of = |cs: Clusters| -> Vec<(String, Coverage)> {
        cs.iter()
            .map(|(c, nss)| (c.to_string(), coverage(nss)))
            .collect()
    };
    let whole = |cs: &[(String, Coverage)]| {
        let mut all = Coverage::default();
        for (c, cov) in cs {
            all.total.add(&cov.total);
            for (ns, n) in &cov.namespaces {
                all.namespaces.insert(format!("{c}/{ns}"), n.clone());
            }
        }
        all
    };
    let heads = of(head);
    let bases = base.map(of);
    r.coverage.head = whole(&heads);
    r.coverage.base = bases.as_deref().map(whole);
    r.coverage.clusters = heads
        .iter()
        .map(|(c, h)| ClusterCoverage {
            cluster: c.clone(),
            base: bases
                .as_ref()
                .and_then(|b| b.iter().find(|(bc, _)| bc == c))
                .map(|(_, b)| b.clone()),
            head: h.clone(),
        })
        .collect();
    r.summary.clusters = heads.iter().map(|(c, _)| c.clone()).collect();
    let mut findings = Vec::new();
    for (c, nss) in head {
        for n in nss.iter() {
            for i in 0..n.errors {
                let mut f = finding(n.name, i, Status::Existing);
                f.cluster = Some(c.to_string());
                f.file = format!("clusters/{c}/{}", f.file);
                findings.push(f);
            }
        }
    }
    findings.push(Finding {
        rule: "render/setting-ignored".into(),
        severity: Severity::Warning,
        resource: None,
        file: "clusters/README.yaml".into(),
        line: 1,
        path: Vec::new(),
        message: "not a cluster folder".into(),
        istio_code: None,
        ..finding("none", 0, Status::Existing)
    });
    summarize(&mut r, findings, base.is_some());
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
    baseline_of(store, (REPO, REPO_ID), sha, at, report.as_ref()).await
}

/// Stores a baseline of `repo` (name and id) at `at` with `report` (None: errored).
pub async fn baseline_of(
    store: &Store,
    repo: (&str, i64),
    sha: &str,
    at: i64,
    report: Option<&Report>,
) -> i64 {
    store
        .insert_run(&NewRun {
            kind: JobKind::Baseline,
            repo_id: repo.1,
            repo: repo.0,
            pr_number: None,
            head_sha: sha,
            base_sha: None,
            started_at_ms: at - 60_000,
            finished_at_ms: at,
            report,
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
    check_of(
        store,
        (REPO, REPO_ID),
        pr,
        sha,
        at,
        &report(head, Some(base)),
    )
    .await
}

/// Stores a PR run of `repo` (name and id) with `report`.
pub async fn check_of(
    store: &Store,
    repo: (&str, i64),
    pr: i64,
    sha: &str,
    at: i64,
    report: &Report,
) -> i64 {
    store
        .insert_run(&NewRun {
            kind: JobKind::Check,
            repo_id: repo.1,
            repo: repo.0,
            pr_number: Some(pr),
            head_sha: sha,
            base_sha: Some("b".repeat(40).as_str()),
            started_at_ms: at - 60_000,
            finished_at_ms: at,
            report: Some(report),
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
/// Ambient: on day 1, pay's workloads without a sidecar are in ambient without a
/// waypoint (b: 2, c: 1; its policy reduced to L4); on day 4, new's one workload is
/// ambient behind a waypoint, and new has a policy nothing enforces. Per day, by data
/// plane (sidecar / ambient L4 / ambient with a waypoint / none): day 0 2/0/0/4, day 1
/// (c) 5/1/0/0, day 4 7/0/1/0; policies (as written / reduced / not enforced): day 0
/// 2/0/0, day 1 1/1/0, day 4 3/0/1.
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
        ns("pay", "PERMISSIVE", 2, 0, 1).ambient(2, 0),
    ];
    let day1c = [
        ns("shop", "STRICT", 4, 4, 1),
        ns("pay", "PERMISSIVE", 2, 1, 1).ambient(1, 0),
    ];
    let day4 = [
        ns("shop", "STRICT", 5, 5, 0),
        ns("pay", "STRICT", 2, 2, 0),
        ns("new", "PERMISSIVE", 1, 0, 1).ambient(1, 1).unenforced(1),
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
        ns("new", "PERMISSIVE", 1, 0, 1).ambient(1, 1).unenforced(1),
    ];
    check(store, 8, &sha('9'), T0 + 4 * DAY + 10 * HOUR, &pr8, &day4).await;
}

/// The repository that deploys to several clusters.
pub const FLEET: (&str, i64) = ("acme/fleet", 1003);

/// The history of `FLEET` (times from `T0`, 2026-11-01; shas by letter):
///
/// | day | baseline (10:00) | prod-eu (mode, workloads/with proxy, errors)  | prod-us                                  |
/// |-----|------------------|-----------------------------------------------|------------------------------------------|
/// | 0   | f: one cluster   | (shop PERMISSIVE 4/2 e1, no cluster named)    |                                          |
/// | 1   | g                | shop STRICT 4/4, pay PERMISSIVE 2/1 e1        | shop PERMISSIVE 3/1 e2                   |
/// | 2   | h                | shop STRICT 5/5, pay STRICT 2/2               | shop STRICT 3/3 e1, web PERMISSIVE 2/0   |
///
/// On day 2, prod-us's web is ambient: both workloads, one behind a waypoint (its
/// policy reduced to L4).
/// Days 1 and 2 also have a warning about a file no cluster is named for. PR #3 (day
/// 2, 09:00, sha i) goes from day 1 to day 2.
pub async fn fleet(store: &Store) {
    repo(store, FLEET.0, FLEET.1).await;
    let day0 = report(&[ns("shop", "PERMISSIVE", 4, 2, 1)], None);
    let day1: Clusters = &[
        (
            "prod-eu",
            &[
                ns("shop", "STRICT", 4, 4, 0),
                ns("pay", "PERMISSIVE", 2, 1, 1),
            ],
        ),
        ("prod-us", &[ns("shop", "PERMISSIVE", 3, 1, 2)]),
    ];
    let day2: Clusters = &[
        (
            "prod-eu",
            &[ns("shop", "STRICT", 5, 5, 0), ns("pay", "STRICT", 2, 2, 0)],
        ),
        (
            "prod-us",
            &[
                ns("shop", "STRICT", 3, 3, 1),
                ns("web", "PERMISSIVE", 2, 0, 0).ambient(2, 1),
            ],
        ),
    ];
    baseline_of(store, FLEET, &sha('f'), T0 + 10 * HOUR, Some(&day0)).await;
    let g = cluster_report(day1, None);
    baseline_of(store, FLEET, &sha('g'), T0 + DAY + 10 * HOUR, Some(&g)).await;
    let pr = cluster_report(day2, Some(day1));
    check_of(store, FLEET, 3, &sha('i'), T0 + 2 * DAY + 9 * HOUR, &pr).await;
    let h = cluster_report(day2, None);
    baseline_of(store, FLEET, &sha('h'), T0 + 2 * DAY + 10 * HOUR, Some(&h)).await;
}
