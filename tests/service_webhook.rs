//! The webhook path, through the real router (no socket), on both store backends;
//! and the end to end path: signed webhook → job → worker → run stored → published.

use crate::service_support;

use meshward::clock::Clock;
use meshward::jobs::Processed;
use meshward::metrics::Metrics;
use meshward::server::router;
use meshward::store::*;
use serde_json::Value;
use service_support::*;

fn sha(c: char) -> String {
    c.to_string().repeat(40)
}

async fn app(store: Store) -> (axum::Router, Store, Metrics) {
    let store = migrated(store).await;
    let metrics = Metrics::new();
    let state = app_state(store.clone(), metrics.clone(), Clock::manual(1_000));
    (router(state), store, metrics)
}

async fn post(app: &axum::Router, event: &str, delivery: &str, body: &Value) -> (u16, String) {
    let bytes = serde_json::to_vec(body).unwrap();
    send(app, webhook_request(event, delivery, &bytes, Some(SECRET))).await
}

async fn bad_or_missing_signatures_are_refused_and_nothing_is_stored(store: Store) {
    let (app, store, metrics) = app(store).await;
    let body = serde_json::to_vec(&pr_event("opened", 7, &sha('b'), &sha('a'))).unwrap();
    let wrong = webhook_request("pull_request", "d-1", &body, Some("not-the-secret"));
    assert_eq!(send(&app, wrong).await.0, 401);
    let unsigned = webhook_request("pull_request", "d-2", &body, None);
    assert_eq!(send(&app, unsigned).await.0, 401);
    let mut tampered = webhook_request("pull_request", "d-3", &body, Some(SECRET));
    *tampered.body_mut() = axum::body::Body::from(body.repeat(2));
    assert_eq!(send(&app, tampered).await.0, 401);
    assert_eq!(store.delivery_count().await.unwrap(), 0);
    assert!(store.jobs().await.unwrap().is_empty());
    assert!(store.repos().await.unwrap().is_empty());
    assert!(metrics.render().contains(
        r#"meshward_webhook_deliveries_total{event="pull_request",outcome="unauthorized"} 3"#
    ));
    // The old secret of a rotation still verifies.
    let old = webhook_request("pull_request", "d-4", &body, Some("old-secret"));
    assert_eq!(send(&app, old).await.0, 202);
}

async fn a_pull_request_queues_one_check_and_a_redelivery_does_nothing(store: Store) {
    let (app, store, _) = app(store).await;
    let body = pr_event("opened", 7, &sha('b'), &sha('a'));
    let (status, text) = post(&app, "pull_request", "d-1", &body).await;
    assert_eq!(status, 202, "{text}");
    let (status, _) = post(&app, "pull_request", "d-1", &body).await;
    assert_eq!(status, 200, "a redelivery is acknowledged");
    let jobs = store.jobs().await.unwrap();
    assert_eq!(jobs.len(), 1);
    let j = &jobs[0];
    assert_eq!(j.kind, JobKind::Check);
    assert_eq!((j.repo.as_str(), j.repo_id), (REPO, REPO_ID));
    assert_eq!(j.pr_number, Some(7));
    assert_eq!(j.head_sha, sha('a'));
    assert_eq!(j.base_sha.as_deref(), Some(sha('b').as_str()));
    assert_eq!(j.installation_id, Some(INSTALLATION));
    assert_eq!(j.delivery_id.as_deref(), Some("d-1"));
    assert_eq!(j.state, JobState::Queued);
    assert_eq!(store.delivery_count().await.unwrap(), 1);
    let repos = store.repos().await.unwrap();
    assert_eq!(repos[0].full_name, REPO);
    assert_eq!(repos[0].installation_id, Some(INSTALLATION));
}

async fn a_newer_push_to_the_pr_supersedes_the_queued_check(store: Store) {
    let (app, store, _) = app(store).await;
    let first = pr_event("synchronize", 7, &sha('b'), &sha('1'));
    let second = pr_event("synchronize", 7, &sha('b'), &sha('2'));
    assert_eq!(post(&app, "pull_request", "d-1", &first).await.0, 202);
    assert_eq!(post(&app, "pull_request", "d-2", &second).await.0, 202);
    let jobs = store.jobs().await.unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].state, JobState::Superseded);
    assert_eq!(jobs[0].superseded_by, Some(jobs[1].id));
    assert_eq!(jobs[1].state, JobState::Queued);
    assert_eq!(jobs[1].head_sha, sha('2'));
}

async fn irrelevant_events_and_actions_get_204(store: Store) {
    let (app, store, metrics) = app(store).await;
    let cases: Vec<(&str, Value)> = vec![
        ("ping", payload("ping")),
        ("issues", serde_json::json!({"action": "opened"})),
        ("pull_request", pr_event("closed", 7, &sha('b'), &sha('a'))),
        ("pull_request", pr_event("labeled", 7, &sha('b'), &sha('a'))),
        ("pull_request", pr_event("edited", 7, &sha('b'), &sha('a'))),
        ("push", {
            let mut p = push_event(&sha('c'));
            p["ref"] = "refs/heads/feature".into();
            p
        }),
        ("push", {
            let mut p = push_event(&"0".repeat(40));
            p["deleted"] = true.into();
            p
        }),
        ("pull_request", {
            let mut p = pr_event("synchronize", 7, &sha('b'), &sha('a'));
            p["sender"]["login"] = format!("{APP_SLUG}[bot]").into();
            p["sender"]["type"] = "Bot".into();
            p
        }),
        ("pull_request", {
            let mut p = pr_event("opened", 7, &sha('b'), &sha('a'));
            p["performed_via_github_app"] = serde_json::json!({"id": APP_ID});
            p
        }),
        ("check_suite", {
            let mut p = payload("check_suite.rerequested");
            p["action"] = "completed".into();
            p
        }),
        ("check_run", {
            let mut p = payload("check_run.rerequested");
            p["check_run"]["app"]["id"] = 1.into();
            p
        }),
    ];
    for (i, (event, body)) in cases.iter().enumerate() {
        let (status, text) = post(&app, event, &format!("d-{i}"), body).await;
        assert_eq!(status, 204, "{event} case {i}: {text}");
    }
    assert!(store.jobs().await.unwrap().is_empty());
    assert!(metrics
        .render()
        .contains(r#"meshward_webhook_deliveries_total{event="other",outcome="ignored"} 1"#));
}

async fn relevant_events_queue_the_right_jobs(store: Store) {
    let (app, store, _) = app(store).await;
    // edited with a base branch change: checked again.
    let mut edited = pr_event("edited", 7, &sha('b'), &sha('a'));
    edited["changes"] =
        serde_json::json!({"base": {"ref": {"from": "develop"}, "sha": {"from": sha('d')}}});
    assert_eq!(post(&app, "pull_request", "d-1", &edited).await.0, 202);
    for (i, action) in ["reopened", "ready_for_review"].iter().enumerate() {
        let body = pr_event(action, 10 + i as i64, &sha('b'), &sha('a'));
        assert_eq!(
            post(&app, "pull_request", &format!("d-pr-{i}"), &body)
                .await
                .0,
            202
        );
    }
    // A push to the default branch: a baseline.
    assert_eq!(
        post(&app, "push", "d-2", &push_event(&sha('c'))).await.0,
        202
    );
    // Re-requested check suite of PR 2 (the fixture).
    let suite = payload("check_suite.rerequested");
    assert_eq!(post(&app, "check_suite", "d-3", &suite).await.0, 202);
    // Re-requested check run, on a branch named like the default with no PR: a
    // job the worker makes a baseline only if the commit is on main here (a fork's
    // branch may be called main too).
    let mut run = payload("check_run.rerequested");
    run["check_run"]["check_suite"]["head_branch"] = "main".into();
    run["check_run"]["head_sha"] = sha('e').into();
    assert_eq!(post(&app, "check_run", "d-4", &run).await.0, 202);
    // ... and with a PR: a check of it.
    let mut run = payload("check_run.rerequested");
    run["check_run"]["head_sha"] = sha('f').into();
    run["check_run"]["pull_requests"] = serde_json::json!([
        {"number": 9, "head": {"ref": "x", "sha": sha('f')}, "base": {"ref": "main", "sha": sha('b')}}
    ]);
    assert_eq!(post(&app, "check_run", "d-5", &run).await.0, 202);

    let jobs = store.jobs().await.unwrap();
    let summary: Vec<(JobKind, Option<i64>, String)> = jobs
        .iter()
        .map(|j| (j.kind, j.pr_number, j.head_sha[..1].to_string()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (JobKind::Check, Some(7), "a".into()),
            (JobKind::Check, Some(10), "a".into()),
            (JobKind::Check, Some(11), "a".into()),
            (JobKind::Baseline, None, "c".into()),
            (JobKind::Check, Some(2), "e".into()),
            (JobKind::Check, None, "e".into()),
            (JobKind::Check, Some(9), "f".into()),
        ]
    );
    assert_eq!(jobs[5].base_ref.as_deref(), Some("main"));
    let suite_job = &jobs[4];
    assert_eq!(
        suite_job.base_sha.as_deref(),
        Some("f95f852bd8fca8fcc58a9a2d6c842781e32a215e")
    );
    assert_eq!(
        suite_job.head_sha,
        "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    );
}

async fn installation_events_keep_the_repo_list(store: Store) {
    let (app, store, _) = app(store).await;
    let created = payload("installation.created");
    assert_eq!(post(&app, "installation", "d-1", &created).await.0, 202);
    let mut added = payload("installation_repositories.added");
    added["repositories_added"] = serde_json::json!([{"id": 2002, "name": "infra", "full_name": "acme/infra", "private": true}]);
    assert_eq!(
        post(&app, "installation_repositories", "d-2", &added)
            .await
            .0,
        202
    );
    let repos = store.repos().await.unwrap();
    let names: Vec<(&str, bool)> = repos
        .iter()
        .map(|r| (r.full_name.as_str(), r.installed))
        .collect();
    assert_eq!(names, vec![("acme/gitops", true), ("acme/infra", true)]);
    let mut removed = payload("installation_repositories.added");
    removed["action"] = "removed".into();
    removed["repositories_added"] = serde_json::json!([]);
    removed["repositories_removed"] =
        serde_json::json!([{"id": 2002, "name": "infra", "full_name": "acme/infra"}]);
    assert_eq!(
        post(&app, "installation_repositories", "d-3", &removed)
            .await
            .0,
        202
    );
    let mut deleted = payload("installation.created");
    deleted["action"] = "deleted".into();
    assert_eq!(post(&app, "installation", "d-4", &deleted).await.0, 202);
    let repos = store.repos().await.unwrap();
    assert!(repos.iter().all(|r| !r.installed), "{repos:?}");
}

async fn oversized_bodies_get_413_and_bad_payloads_400(store: Store) {
    let (app, store, _) = app(store).await;
    let big = vec![b' '; 2 * 1024 * 1024];
    let req = webhook_request("pull_request", "d-1", &big, Some(SECRET));
    assert_eq!(send(&app, req).await.0, 413);
    let req = webhook_request("pull_request", "d-2", b"{\"action\": 1}", Some(SECRET));
    assert_eq!(send(&app, req).await.0, 400);
    assert_eq!(store.delivery_count().await.unwrap(), 0);
}

async fn health_readiness_and_metrics(store: Store) {
    let metrics = Metrics::new();
    let state = app_state(store.clone(), metrics.clone(), Clock::manual(0));
    let app = router(state);
    let get = |path: &str| {
        http::Request::builder()
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap()
    };
    assert_eq!(send(&app, get("/healthz")).await.0, 200);
    assert_eq!(send(&app, get("/readyz")).await.0, 503, "not migrated");
    store.migrate().await.unwrap();
    assert_eq!(send(&app, get("/readyz")).await.0, 200);
    let body = pr_event("opened", 7, &sha('b'), &sha('a'));
    assert_eq!(post(&app, "pull_request", "d-1", &body).await.0, 202);
    let (status, text) = send(&app, get("/metrics")).await;
    assert_eq!(status, 200);
    for needle in [
        r#"meshward_webhook_deliveries_total{event="pull_request",outcome="enqueued"} 1"#,
        r#"meshward_jobs{state="queued"} 1"#,
        "meshward_queue_depth 1",
        r#"meshward_jobs{state="running"} 0"#,
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

/// The database fails while a delivery is recorded: GitHub gets 503 (it may
/// redeliver), and nothing of the delivery is kept, so the redelivery is not taken
/// for a duplicate and queues its job. A database that is gone is a 503 too.
async fn a_database_failure_is_503_and_keeps_nothing(store: Store) {
    let (app, store, metrics) = app(store).await;
    let body = pr_event("opened", 7, &sha('b'), &sha('a'));
    // The delivery and repository rows are written before the job's: the job's fails.
    store
        .execute_script("ALTER TABLE jobs RENAME TO jobs_away")
        .await
        .unwrap();
    let (status, text) = post(&app, "pull_request", "d-1", &body).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("redeliver"), "{text}");
    store
        .execute_script("ALTER TABLE jobs_away RENAME TO jobs")
        .await
        .unwrap();
    assert_eq!(store.delivery_count().await.unwrap(), 0);
    assert!(store.repos().await.unwrap().is_empty());
    assert!(metrics
        .render()
        .contains(r#"meshward_webhook_deliveries_total{event="pull_request",outcome="error"} 1"#));
    let (status, text) = post(&app, "pull_request", "d-1", &body).await;
    assert_eq!(status, 202, "the redelivery is recorded: {text}");
    assert_eq!(store.jobs().await.unwrap().len(), 1);

    store.close().await;
    let (status, _) = post(&app, "pull_request", "d-2", &body).await;
    assert_eq!(status, 503);
}

contract!(
    bad_or_missing_signatures_are_refused_and_nothing_is_stored,
    a_pull_request_queues_one_check_and_a_redelivery_does_nothing,
    a_newer_push_to_the_pr_supersedes_the_queued_check,
    irrelevant_events_and_actions_get_204,
    relevant_events_queue_the_right_jobs,
    installation_events_keep_the_repo_list,
    oversized_bodies_get_413_and_bad_payloads_400,
    health_readiness_and_metrics,
    end_to_end_pull_request_to_stored_findings,
    a_database_failure_is_503_and_keeps_nothing,
);

/// A signed pull_request webhook → a check job → a worker (App auth against the
/// fake GitHub, through octocrab) → a run stored with the finding the PR introduces.
async fn end_to_end_pull_request_to_stored_findings(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    let (app, store, metrics) = app(store).await;
    let body = pr_event("opened", 7, &base, &head);
    let (status, text) = post(&app, "pull_request", "d-e2e", &body).await;
    assert_eq!(status, 202, "{text}");

    let github = app_github(&fake, &metrics);
    let clock = Clock::manual(2_000);
    let worker = worker(&store, Some(github), &metrics, &clock);
    let done = worker.run_until_idle().await.unwrap();
    assert_eq!(done.len(), 1);
    let (job, processed) = &done[0];
    let Processed::Succeeded { run_id } = processed else {
        panic!("job did not succeed: {processed:?}");
    };
    assert_eq!(
        store.job(job.id).await.unwrap().unwrap().state,
        JobState::Succeeded
    );

    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.id, *run_id);
    assert_eq!((run.repo.as_str(), run.pr_number), (REPO, Some(7)));
    assert_eq!(run.head_sha, head);
    assert_eq!(run.base_sha.as_deref(), Some(base.as_str()));
    assert_eq!(run.outcome, RunOutcome::Fail);
    assert_eq!(run.counts.blocking, 1);
    let findings = store.findings(*run_id).await.unwrap();
    let introduced: Vec<(&str, &str, &str)> = findings
        .iter()
        .filter(|f| f.status == "introduced")
        .map(|f| (f.rule.as_str(), f.file.as_str(), f.severity.as_str()))
        .collect();
    assert_eq!(
        introduced,
        vec![(
            "serviceentry/none-with-endpoints",
            "clusters/prod/payments.yaml",
            "error"
        )]
    );
    let coverage = store.coverage(*run_id).await.unwrap();
    assert_eq!(coverage.len(), 2);
    assert!(coverage
        .iter()
        .all(|c| c.namespaces[0].namespace == "egress"));

    // What the fake saw: one installation token, the compare, two tarballs (each
    // redirected to the download host).
    let calls = fake.calls();
    let paths: Vec<String> = calls
        .iter()
        .map(|c| format!("{} {} {}", c.method, c.status, c.path))
        .collect();
    assert_eq!(fake.calls_to("/access_tokens").len(), 1, "{paths:#?}");
    assert_eq!(fake.calls_to("/compare/").len(), 1, "{paths:#?}");
    assert_eq!(fake.calls_to("/tarball/").len(), 2, "{paths:#?}");
    assert_eq!(fake.calls_to("/_codeload/").len(), 2, "{paths:#?}");
    // And what it posted: the check run and the summary comment (created: 201, like
    // the token), and one review.
    let repo = fake.repo(REPO);
    assert_eq!(repo.check_runs.len(), 1);
    assert_eq!(
        repo.check_runs
            .values()
            .next()
            .unwrap()
            .conclusion
            .as_deref(),
        Some("failure")
    );
    assert_eq!(repo.issue_comments.len(), 1);
    assert_eq!(repo.reviews.len(), 1);
    let text = metrics.render();
    assert!(
        text.contains(r#"meshward_github_api_calls_total{status="201"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"meshward_check_results_total{kind="check",outcome="fail"} 1"#),
        "{text}"
    );
}

/// A database that takes the connection but does not answer (here: a table another
/// session holds locked): the webhook is a 503 within the deadline, not GitHub's own
/// 10 s timeout, and the redelivery once it answers again is recorded.
#[sqlx::test(migrations = false)]
async fn a_database_that_does_not_answer_is_503_within_two_seconds(pool: sqlx::PgPool) {
    let (app, store, _metrics) = app(Store::from_pg(pool.clone())).await;
    let body = pr_event("opened", 7, &sha('b'), &sha('a'));
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (status, text) = tokio::time::timeout(
        std::time::Duration::from_secs(8),
        post(&app, "pull_request", "d-slow", &body),
    )
    .await
    .expect("the webhook answers although the database does not");
    let took = started.elapsed();
    assert_eq!(status, 503, "{text}");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    assert!(took >= meshward::server::WEBHOOK_DB_DEADLINE, "{took:?}");
    blocker.rollback().await.unwrap();
    let (status, text) = post(&app, "pull_request", "d-slow", &body).await;
    assert_eq!(status, 202, "{text}");
    assert_eq!(store.jobs().await.unwrap().len(), 1);
}
