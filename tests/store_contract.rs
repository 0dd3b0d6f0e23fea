//! The store contract: every test runs on PostgreSQL and on SQLite.

use crate::service_support;

use meshward::manifest::SourceFile;
use meshward::report::Report;
use meshward::store::*;
use service_support::*;
use std::collections::HashSet;

/// A check job of PR `pr` at `head`, on one fixed base.
fn job(pr: i64, head: &str) -> NewJob {
    check_job(pr, &"b".repeat(40), head)
}

fn report() -> Report {
    let tree = |files: &[(&str, &str)]| meshward::workspace::Tree {
        files: files
            .iter()
            .map(|(p, c)| SourceFile {
                path: p.to_string(),
                bytes: c.as_bytes().to_vec(),
            })
            .collect(),
        ..Default::default()
    };
    let base = tree(&[("ns.yaml", NAMESPACE)]);
    let head = tree(&[("ns.yaml", NAMESPACE), ("se.yaml", BAD_SERVICE_ENTRY)]);
    let opts =
        meshward::analysis::Options::new(chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap());
    meshward::analysis::analyze(
        Some(meshward::analysis::Revision {
            label: "base".into(),
            tree: &base,
        }),
        meshward::analysis::Revision {
            label: "head".into(),
            tree: &head,
        },
        &opts,
    )
    .expect("analyze")
}

fn run<'a>(job: &'a Job, report: Option<&'a Report>, error: Option<&'a str>) -> NewRun<'a> {
    NewRun {
        kind: job.kind,
        repo_id: job.repo_id,
        repo: &job.repo,
        pr_number: job.pr_number,
        head_sha: &job.head_sha,
        base_sha: job.base_sha.as_deref(),
        started_at_ms: 1_000,
        finished_at_ms: 2_000,
        report,
        error,
    }
}

async fn migrations_apply_and_readiness_follows(store: Store) {
    assert!(store.ready().await.is_err(), "empty database is not ready");
    store.migrate().await.unwrap();
    store.ready().await.unwrap();
    assert_eq!(
        store.applied_migration().await.unwrap(),
        Store::latest_migration(store.backend())
    );
    // Idempotent.
    store.migrate().await.unwrap();
    store.ready().await.unwrap();
}

async fn claim_complete_stores_run_findings_coverage(store: Store) {
    let store = migrated(store).await;
    let id = store
        .enqueue(&job(7, &"a".repeat(40)), 3, 0)
        .await
        .unwrap()
        .id();
    let claimed = store.claim("w1", 10, 1_000).await.unwrap().expect("a job");
    assert_eq!(claimed.id, id);
    assert_eq!(claimed.state, JobState::Running);
    assert_eq!(claimed.attempts, 1);
    assert_eq!(claimed.locked_until_ms, Some(1_010));
    assert!(store.claim("w2", 20, 1_000).await.unwrap().is_none());

    let report = report();
    let run_id = store
        .complete(&claimed, "w1", &run(&claimed, Some(&report), None), 30)
        .await
        .unwrap()
        .expect("lease held");
    let done = store.job(id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(done.finished_at_ms, Some(30));

    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!((r.id, r.job_id, r.kind), (run_id, Some(id), JobKind::Check));
    assert_eq!(r.outcome, RunOutcome::Fail);
    assert_eq!(r.counts.introduced, report.summary.introduced as i64);
    assert!(r.counts.blocking >= 1);

    let findings = store.findings(run_id).await.unwrap();
    assert_eq!(findings.len(), report.findings.len());
    let f = findings
        .iter()
        .find(|f| f.rule == "serviceentry/none-with-endpoints")
        .expect("the finding");
    assert_eq!(f.status, "introduced");
    assert_eq!(f.severity, "error");
    assert_eq!(f.resource_kind.as_deref(), Some("ServiceEntry"));
    assert_eq!(f.resource_namespace.as_deref(), Some("egress"));
    assert_eq!(f.resource_name.as_deref(), Some("payments-api"));
    assert_eq!(f.file, "se.yaml");
    assert!(f.line > 1);

    let coverage = store.coverage(run_id).await.unwrap();
    let revisions: Vec<&str> = coverage.iter().map(|c| c.revision.as_str()).collect();
    assert_eq!(revisions, ["base", "head"]);
    let head = &coverage[1];
    assert_eq!(head.total.namespaces, 1);
    assert_eq!(head.namespaces[0].namespace, "egress");

    let stored = store.run_report(run_id).await.unwrap().expect("report");
    assert_eq!(stored.findings, report.findings);

    // Filters.
    let by_pr = RunFilter {
        repo: Some(REPO.into()),
        pr_number: Some(7),
        job_id: None,
    };
    assert_eq!(store.runs(&by_pr).await.unwrap().len(), 1);
    let other = RunFilter {
        pr_number: Some(8),
        ..RunFilter::default()
    };
    assert!(store.runs(&other).await.unwrap().is_empty());
}

async fn identical_jobs_coalesce_and_newer_heads_supersede(store: Store) {
    let store = migrated(store).await;
    let a = store.enqueue(&job(7, &"a".repeat(40)), 3, 0).await.unwrap();
    let again = store.enqueue(&job(7, &"a".repeat(40)), 3, 1).await.unwrap();
    assert_eq!(again, Enqueued::Coalesced(a.id()));
    let other_pr = store.enqueue(&job(8, &"a".repeat(40)), 3, 2).await.unwrap();
    let b = store.enqueue(&job(7, &"b".repeat(40)), 3, 3).await.unwrap();
    assert_eq!(
        b,
        Enqueued::Queued {
            id: b.id(),
            superseded: 1
        }
    );
    let old = store.job(a.id()).await.unwrap().unwrap();
    assert_eq!(old.state, JobState::Superseded);
    assert_eq!(old.superseded_by, Some(b.id()));
    assert_eq!(
        store.job(other_pr.id()).await.unwrap().unwrap().state,
        JobState::Queued
    );
    // Baselines never supersede each other.
    let base = |sha: &str| NewJob {
        kind: JobKind::Baseline,
        pr_number: None,
        base_sha: None,
        ..job(0, sha)
    };
    store.enqueue(&base(&"c".repeat(40)), 3, 4).await.unwrap();
    store.enqueue(&base(&"d".repeat(40)), 3, 5).await.unwrap();
    let counts = store.job_counts().await.unwrap();
    assert!(counts.contains(&(JobState::Queued, 4)), "{counts:?}");
    assert!(counts.contains(&(JobState::Superseded, 1)), "{counts:?}");
}

async fn an_expired_lease_lets_another_worker_take_the_job(store: Store) {
    let store = migrated(store).await;
    let id = store
        .enqueue(&job(7, &"a".repeat(40)), 3, 0)
        .await
        .unwrap()
        .id();
    let first = store.claim("dead", 0, 1_000).await.unwrap().unwrap();
    assert!(store.claim("alive", 999, 1_000).await.unwrap().is_none());
    assert!(store.heartbeat(id, "dead", 500, 1_000).await.unwrap());
    // Lease now runs to 1500.
    assert!(store.claim("alive", 1_499, 1_000).await.unwrap().is_none());
    let second = store.claim("alive", 1_501, 1_000).await.unwrap().unwrap();
    assert_eq!((second.id, second.attempts), (id, 2));
    // The first holder has lost it: no heartbeat, no completion.
    assert!(!store.heartbeat(id, "dead", 1_600, 1_000).await.unwrap());
    let report = report();
    assert_eq!(
        store
            .complete(&first, "dead", &run(&first, Some(&report), None), 1_700)
            .await
            .unwrap(),
        None
    );
    assert!(store
        .complete(&second, "alive", &run(&second, Some(&report), None), 1_800)
        .await
        .unwrap()
        .is_some());
    assert_eq!(store.runs(&RunFilter::default()).await.unwrap().len(), 1);
}

async fn failures_back_off_then_give_up_with_the_error(store: Store) {
    let store = migrated(store).await;
    let id = store
        .enqueue(&job(7, &"a".repeat(40)), 2, 0)
        .await
        .unwrap()
        .id();
    let j = store.claim("w", 0, 1_000).await.unwrap().unwrap();
    let state = store
        .fail(
            &j,
            "w",
            "boom 1",
            false,
            5_000,
            &run(&j, None, Some("boom 1")),
            10,
        )
        .await
        .unwrap();
    assert_eq!(state, Some(JobState::Queued));
    let queued = store.job(id).await.unwrap().unwrap();
    assert_eq!(queued.last_error.as_deref(), Some("boom 1"));
    assert!(store.claim("w", 4_999, 1_000).await.unwrap().is_none());
    let j = store.claim("w", 5_000, 1_000).await.unwrap().unwrap();
    assert_eq!(j.attempts, 2);
    let state = store
        .fail(
            &j,
            "w",
            "boom 2",
            false,
            9_000,
            &run(&j, None, Some("boom 2")),
            5_010,
        )
        .await
        .unwrap();
    assert_eq!(state, Some(JobState::Failed));
    let failed = store.job(id).await.unwrap().unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(failed.last_error.as_deref(), Some("boom 2"));
    assert!(store.claim("w", 100_000, 1_000).await.unwrap().is_none());
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, RunOutcome::Error);
    assert_eq!(runs[0].error.as_deref(), Some("boom 2"));
}

async fn a_permanent_error_fails_at_once(store: Store) {
    let store = migrated(store).await;
    let id = store
        .enqueue(&job(7, &"a".repeat(40)), 5, 0)
        .await
        .unwrap()
        .id();
    let j = store.claim("w", 0, 1_000).await.unwrap().unwrap();
    let state = store
        .fail(
            &j,
            "w",
            "config error",
            true,
            10,
            &run(&j, None, Some("config error")),
            10,
        )
        .await
        .unwrap();
    assert_eq!(state, Some(JobState::Failed));
    assert_eq!(store.job(id).await.unwrap().unwrap().attempts, 1);
}

async fn released_jobs_return_without_counting_an_attempt(store: Store) {
    let store = migrated(store).await;
    let id = store
        .enqueue(&job(7, &"a".repeat(40)), 3, 0)
        .await
        .unwrap()
        .id();
    store.claim("w", 0, 1_000).await.unwrap().unwrap();
    assert!(store.release(id, "w", 5).await.unwrap());
    let j = store.job(id).await.unwrap().unwrap();
    assert_eq!((j.state, j.attempts), (JobState::Queued, 0));
    assert!(!store.release(id, "w", 6).await.unwrap());
    assert_eq!(
        store.claim("v", 5, 1_000).await.unwrap().unwrap().attempts,
        1
    );
}

async fn deliveries_are_recorded_once_with_their_effects(store: Store) {
    let store = migrated(store).await;
    let delivery = NewDelivery {
        delivery_id: "d-1".into(),
        event: "pull_request".into(),
        action: Some("opened".into()),
        repo: Some(REPO.into()),
        outcome: "enqueued".into(),
    };
    let repo = RepoRecord {
        github_id: REPO_ID,
        full_name: REPO.into(),
        installation_id: Some(INSTALLATION),
        default_branch: Some("main".into()),
        installed: true,
    };
    let effect = DeliveryEffect {
        upsert_repos: vec![repo.clone()],
        jobs: vec![job(7, &"a".repeat(40))],
        ..Default::default()
    };
    let first = store
        .record_delivery(&delivery, &effect, 3, 0)
        .await
        .unwrap();
    let DeliveryOutcome::Recorded { jobs } = first else {
        panic!("recorded")
    };
    assert_eq!(jobs.len(), 1);
    let job = store.job(jobs[0].id()).await.unwrap().unwrap();
    assert_eq!(job.delivery_id.as_deref(), Some("d-1"));
    assert_eq!(
        store
            .record_delivery(&delivery, &effect, 3, 1)
            .await
            .unwrap(),
        DeliveryOutcome::Duplicate
    );
    assert_eq!(store.jobs().await.unwrap().len(), 1);
    assert_eq!(store.delivery_count().await.unwrap(), 1);
    assert_eq!(store.repos().await.unwrap(), vec![repo.clone()]);

    // The installation goes away: its repositories are no longer installed.
    let removal = NewDelivery {
        delivery_id: "d-2".into(),
        event: "installation".into(),
        action: Some("deleted".into()),
        repo: None,
        outcome: "repos".into(),
    };
    let effect = DeliveryEffect {
        remove_installation: Some(INSTALLATION),
        ..Default::default()
    };
    store
        .record_delivery(&removal, &effect, 3, 2)
        .await
        .unwrap();
    assert!(!store.repos().await.unwrap()[0].installed);
}

async fn concurrent_claimers_never_share_a_job(store: Store) {
    let store = migrated(store).await;
    for i in 0..60 {
        store
            .enqueue(&job(i, &format!("{i:040}")), 3, 0)
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for w in 0..6 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("w{w}");
            let mut got = Vec::new();
            while let Some(j) = store.claim(&name, 1, 60_000).await.unwrap() {
                got.push(j.id);
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), 60, "every job claimed once");
    assert_eq!(unique.len(), 60);
}

/// A run keeps the evidence its mTLS rules were judged on: numbers, queries, window,
/// source and time, per namespace and per workload scope.
async fn a_run_keeps_its_evidence(store: Store) {
    let store = migrated(store).await;
    let evidence: meshward::evidence::Evidence = serde_json::from_value(serde_json::json!({
        "taken_at": "2026-11-30T12:00:00Z",
        "window": "7d",
        "source": "prometheus https://prometheus.internal (cluster=prod-eu1), retention 30d",
        "namespaces": {
            "shop": {"requests_total": 612, "requests_plaintext": 0,
                     "tcp_connections_total": 61, "tcp_connections_plaintext": 0,
                     "queries": {"requests_plaintext": "sum(increase(istio_requests_total{reporter=\"destination\"}[7d]))"}},
            "web": {"error": "Prometheus https://prometheus.internal did not answer within 10s"}
        },
        "scopes": {
            "workload:shop:app=legacy": {"requests_total": 40, "requests_plaintext": 12,
                                         "workloads": ["legacy"], "taken_at": "2026-11-30T11:58:00Z"}
        }
    }))
    .unwrap();
    let mut report = report();
    report.evidence = Some(evidence.clone());
    let id = store
        .enqueue(&job(9, &"e".repeat(40)), 3, 0)
        .await
        .unwrap()
        .id();
    let j = store.job(id).await.unwrap().unwrap();
    let run_id = store
        .insert_run(&run(&j, Some(&report), None))
        .await
        .unwrap();
    let rows = store.evidence(run_id).await.unwrap();
    let subjects: Vec<&str> = rows.iter().map(|r| r.subject.as_str()).collect();
    assert_eq!(
        subjects,
        [
            "namespace:shop",
            "namespace:web",
            "workload:shop:app=legacy"
        ]
    );
    let shop = &rows[0];
    assert_eq!((shop.requests_total, shop.tcp_connections_total), (612, 61));
    assert_eq!(shop.window.as_deref(), Some("7d"));
    assert_eq!(shop.taken_at_ms, Some(1_796_040_000_000));
    assert!(shop.queries["requests_plaintext"].starts_with("sum(increase(istio_requests_total"));
    assert!(shop.source.as_deref().unwrap().contains("cluster=prod-eu1"));
    assert!(rows[1].error.as_deref().unwrap().contains("did not answer"));
    let legacy = &rows[2];
    assert_eq!(legacy.requests_plaintext, 12);
    assert_eq!(legacy.workloads, vec!["legacy"]);
    // The cached answer's own time, not the gathering's.
    assert_eq!(legacy.taken_at_ms, Some(1_796_039_880_000));
    // The stored report carries it too; a run without evidence has none.
    let stored = store.run_report(run_id).await.unwrap().unwrap();
    assert_eq!(stored.evidence, Some(evidence));
    let plain = store
        .insert_run(&run(&j, Some(&report_without_evidence()), None))
        .await
        .unwrap();
    assert!(store.evidence(plain).await.unwrap().is_empty());
}

fn report_without_evidence() -> Report {
    let mut r = report();
    r.evidence = None;
    r
}

/// A repository that deploys to several clusters: each cluster's coverage and the
/// clusters of its findings are stored and read back, next to the whole repository's
/// numbers, which read as they would without clusters.
async fn a_multi_cluster_report_round_trips(store: Store) {
    use service_support::seed::{self, ns, FLEET};
    let store = migrated(store).await;
    let head: seed::Clusters = &[
        (
            "prod-eu",
            &[ns("shop", "STRICT", 5, 5, 0), ns("pay", "DISABLE", 2, 0, 1)],
        ),
        (
            "prod-us",
            &[ns("shop", "PERMISSIVE", 3, 1, 2).ambient(2, 1)],
        ),
    ];
    let base: seed::Clusters = &[("prod-eu", &[ns("shop", "PERMISSIVE", 5, 4, 0)])];
    let report = seed::cluster_report(head, Some(base));
    let run_id = seed::check_of(&store, FLEET, 3, &"a".repeat(40), 2_000, &report).await;

    // Findings keep their cluster; the one that names none has none.
    let findings = store.findings(run_id).await.unwrap();
    assert_eq!(findings.len(), 4);
    let clusters: Vec<Option<&str>> = findings.iter().map(|f| f.cluster.as_deref()).collect();
    assert_eq!(
        clusters,
        [Some("prod-eu"), Some("prod-us"), Some("prod-us"), None]
    );
    assert_eq!(findings[0].resource_namespace.as_deref(), Some("pay"));

    // Coverage: the whole repository (base and head) first, then each cluster's.
    let coverage = store.coverage(run_id).await.unwrap();
    let scopes: Vec<(Option<&str>, &str)> = coverage
        .iter()
        .map(|c| (c.cluster.as_deref(), c.revision.as_str()))
        .collect();
    assert_eq!(
        scopes,
        [
            (None, "base"),
            (None, "head"),
            (Some("prod-eu"), "base"),
            (Some("prod-eu"), "head"),
            (Some("prod-us"), "head"),
        ]
    );
    let whole = &coverage[1];
    assert_eq!(
        (
            whole.total.workloads,
            whole.total.workloads_with_proxy,
            whole.total.namespaces
        ),
        (10, 6, 3)
    );
    let keyed: Vec<&str> = whole
        .namespaces
        .iter()
        .map(|n| n.namespace.as_str())
        .collect();
    assert_eq!(
        keyed,
        ["prod-eu/pay", "prod-eu/shop", "prod-us/shop"],
        "as the report keys them"
    );
    let us = &coverage[4];
    assert_eq!((us.total.workloads, us.total.workloads_with_proxy), (3, 1));
    assert_eq!(us.namespaces.len(), 1);
    assert_eq!(
        (
            us.namespaces[0].namespace.as_str(),
            us.namespaces[0].mtls_mode.as_str()
        ),
        ("shop", "PERMISSIVE")
    );
    assert_eq!(coverage[2].total.workloads_with_proxy, 4, "prod-eu's base");
    // Data planes and enforcement, per cluster, in total and per namespace.
    assert_eq!(
        (
            us.total.workloads_ambient,
            us.total.workloads_waypoint,
            us.total.namespaces_ambient,
            us.total.authz_reduced_to_l4
        ),
        (2, 1, 1, 1)
    );
    assert_eq!(
        (whole.total.workloads_ambient, whole.total.authz_as_written),
        (2, 2)
    );
    assert_eq!(
        (
            us.namespaces[0].workloads_ambient,
            us.namespaces[0].workloads_waypoint,
            us.namespaces[0].authz_reduced_to_l4
        ),
        (2, 1, 1)
    );

    // Per namespace, by cluster, with the findings counted there.
    let per_ns = store.namespace_metrics(run_id).await.unwrap();
    let rows: Vec<(Option<&str>, &str, i64)> = per_ns
        .iter()
        .map(|n| {
            (
                n.cluster.as_deref(),
                n.namespace.as_str(),
                n.metrics.findings.error,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (Some("prod-eu"), "pay", 1),
            (Some("prod-eu"), "shop", 0),
            (Some("prod-us"), "shop", 2)
        ]
    );
    assert_eq!(
        store.clusters(FLEET.1).await.unwrap(),
        ["prod-eu", "prod-us"]
    );
    assert!(store.clusters(REPO_ID).await.unwrap().is_empty());

    // The whole repository's point reads as without clusters (not doubled by the
    // cluster rows); the runs list likewise.
    let query = |cluster, namespace| SeriesQuery {
        repo_id: FLEET.1,
        start_ms: 0,
        end_ms: 10_000,
        bucket_ms: 10_000,
        offset_ms: 0,
        cluster,
        namespace,
    };
    // A PR run is no point of a series: store the same report as a baseline too.
    let baseline = seed::baseline_of(&store, FLEET, &"b".repeat(40), 3_000, Some(&report)).await;
    let points = store.series(&query(None, None)).await.unwrap();
    assert_eq!(points.len(), 1);
    assert_eq!(points[0].run_id, baseline);
    let m = points[0].metrics.as_ref().unwrap();
    assert_eq!(
        (
            m.coverage.workloads,
            m.coverage.workloads_with_proxy,
            m.coverage.namespaces_disable
        ),
        (10, 6, 1)
    );
    assert_eq!((m.findings.error, m.findings.warning), (3, 1));
    let (page, _) = store
        .runs_page(&RunsPageQuery {
            repo_id: FLEET.1,
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 2);
    let pr = &page[1];
    assert_eq!(pr.head.as_ref().unwrap().workloads, 10);
    assert_eq!(pr.base.as_ref().unwrap().workloads, 5);

    // One cluster's point: its coverage and the findings naming it.
    let eu = store.series(&query(Some("prod-eu"), None)).await.unwrap();
    let m = eu[0].metrics.as_ref().unwrap();
    assert_eq!(
        (
            m.coverage.workloads,
            m.coverage.namespaces,
            m.coverage.namespaces_disable
        ),
        (7, 2, 1)
    );
    assert_eq!((m.findings.error, m.findings.warning), (1, 0));
    // One namespace: in one cluster, or added up over the clusters that have it.
    let shop_us = store
        .series(&query(Some("prod-us"), Some("shop")))
        .await
        .unwrap();
    let m = shop_us[0].metrics.as_ref().unwrap();
    assert_eq!(m.coverage.mtls_mode.as_deref(), Some("PERMISSIVE"));
    assert_eq!((m.coverage.workloads, m.findings.error), (3, 2));
    let shop = store.series(&query(None, Some("shop"))).await.unwrap();
    let m = shop[0].metrics.as_ref().unwrap();
    assert_eq!(
        (
            m.coverage.workloads,
            m.coverage.workloads_with_proxy,
            m.coverage.namespaces
        ),
        (8, 6, 2)
    );
    assert_eq!(
        (
            m.coverage.namespaces_strict,
            m.coverage.namespaces_permissive
        ),
        (1, 1)
    );
    assert_eq!(m.coverage.mtls_mode, None, "its clusters differ");
    assert_eq!(m.findings.error, 2);
    // A cluster the run does not have: no numbers (the series says why).
    let none = store.series(&query(Some("staging"), None)).await.unwrap();
    assert!(none[0].metrics.is_none());

    // A cluster only a PR run had is listed while that run is kept: retention
    // takes it off the list with the run; the baseline's clusters stay.
    let staging: seed::Clusters = &[("staging", &[ns("shop", "STRICT", 1, 1, 0)])];
    let pr = seed::cluster_report(staging, None);
    seed::check_of(&store, FLEET, 4, &"c".repeat(40), 2_500, &pr).await;
    assert_eq!(
        store.clusters(FLEET.1).await.unwrap(),
        ["prod-eu", "prod-us", "staging"]
    );
    assert_eq!(store.prune_check_runs(2_600).await.unwrap(), 2);
    assert_eq!(
        store.clusters(FLEET.1).await.unwrap(),
        ["prod-eu", "prod-us"]
    );

    // The stored report is the report, clusters and all.
    let stored = store.run_report(baseline).await.unwrap().unwrap();
    assert_eq!(stored.findings, report.findings);
    assert_eq!(stored.summary.clusters, ["prod-eu", "prod-us"]);
    assert_eq!(stored.coverage.clusters.len(), 2);
}

contract!(
    a_multi_cluster_report_round_trips,
    a_run_keeps_its_evidence,
    migrations_apply_and_readiness_follows,
    claim_complete_stores_run_findings_coverage,
    identical_jobs_coalesce_and_newer_heads_supersede,
    an_expired_lease_lets_another_worker_take_the_job,
    failures_back_off_then_give_up_with_the_error,
    a_permanent_error_fails_at_once,
    released_jobs_return_without_counting_an_attempt,
    deliveries_are_recorded_once_with_their_effects,
    concurrent_claimers_never_share_a_job,
);
