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

contract!(
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
