//! Workers and the durable queue against the fake GitHub, on both store backends:
//! leases, retries with backoff, GitHub retries, tokens, graceful shutdown.

use crate::service_support;

use meshward::clock::Clock;
use meshward::jobs::{self, Processed, QueueConfig, Worker};
use meshward::metrics::Metrics;
use meshward::store::*;
use service_support::fake_github::Fault;
use service_support::*;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn a_job_whose_worker_died_completes_on_another_after_the_lease(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    let store = migrated(store).await;
    let id = store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let clock = Clock::manual(0);
    let lease = queue_config().lease.as_millis() as i64;
    // A worker takes the job and is never heard of again.
    let dead = store
        .claim("killed-worker", clock.now_ms(), lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dead.id, id);
    let metrics = Metrics::new();
    let alive = worker(
        &store,
        Some(token_github(&fake, &metrics)),
        &metrics,
        &clock,
    );
    assert!(alive.run_until_idle().await.unwrap().is_empty(), "leased");
    clock.advance(Duration::from_millis(lease as u64 - 1));
    assert!(
        alive.run_until_idle().await.unwrap().is_empty(),
        "still leased"
    );
    clock.advance(Duration::from_millis(2));
    let done = alive.run_until_idle().await.unwrap();
    assert_eq!(done.len(), 1);
    assert!(matches!(done[0].1, Processed::Succeeded { .. }), "{done:?}");
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    assert_eq!(job.attempts, 2);
    assert_eq!(job.locked_by.as_deref(), Some(alive.name.as_str()));
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].job_id, Some(id));
    // The dead worker, were it to wake up, can store nothing.
    assert!(!store
        .heartbeat(id, "killed-worker", clock.now_ms(), lease)
        .await
        .unwrap());
}

async fn github_server_errors_and_rate_limits_are_retried_in_the_client(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/tarball/".into(),
        status: 502,
        retry_after: None,
        message: "Server Error".into(),
        times: 2,
        ..Fault::default()
    });
    fake.inject(Fault {
        path_contains: "/compare/".into(),
        status: 403,
        retry_after: Some(0),
        message: "You have exceeded a secondary rate limit.".into(),
        times: 1,
        ..Fault::default()
    });
    let store = migrated(store).await;
    store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap();
    let metrics = Metrics::new();
    let clock = Clock::manual(0);
    let w = worker(&store, Some(app_github(&fake, &metrics)), &metrics, &clock);
    let done = w.run_until_idle().await.unwrap();
    assert!(matches!(done[0].1, Processed::Succeeded { .. }), "{done:?}");
    assert_eq!(done[0].0.attempts, 1, "no job-level retry was needed");
    let text = metrics.render();
    for needle in [
        r#"meshward_github_api_calls_total{status="502"} 2"#,
        r#"meshward_github_api_calls_total{status="403"} 1"#,
    ] {
        assert!(text.contains(needle), "{needle} not in\n{text}");
    }
    let statuses =
        |part: &str| -> Vec<u16> { fake.calls_to(part).iter().map(|c| c.status).collect() };
    assert_eq!(statuses("/tarball/"), [502, 502, 302, 302]);
    assert_eq!(statuses("/_codeload/"), [200, 200]);
    assert_eq!(statuses("/compare/"), [403, 200]);
}

async fn failing_jobs_back_off_exponentially_then_fail_with_the_error(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/tarball/".into(),
        status: 500,
        retry_after: None,
        message: "Server Error".into(),
        times: 10_000,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let id = store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let metrics = Metrics::new();
    let clock = Clock::manual(0);
    let w = worker(
        &store,
        Some(token_github(&fake, &metrics)),
        &metrics,
        &clock,
    );
    let config = queue_config();
    for attempt in 1..=2 {
        let done = w.run_until_idle().await.unwrap();
        assert_eq!(done.len(), 1, "attempt {attempt}");
        assert!(matches!(done[0].1, Processed::Retrying { .. }), "{done:?}");
        let job = store.job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(job.attempts, attempt);
        let backoff = config.backoff(attempt).as_millis() as i64;
        assert_eq!(backoff, 10_000 * (1 << (attempt - 1)));
        assert_eq!(job.run_after_ms, clock.now_ms() + backoff);
        assert!(job.last_error.as_deref().unwrap().contains("500"));
        // Not due before its backoff.
        clock.advance(Duration::from_millis(backoff as u64 - 1));
        assert!(w.run_until_idle().await.unwrap().is_empty());
        clock.advance(Duration::from_millis(1));
    }
    let done = w.run_until_idle().await.unwrap();
    assert!(matches!(done[0].1, Processed::Failed { .. }), "{done:?}");
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Failed, 3));
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, RunOutcome::Error);
    assert!(runs[0]
        .error
        .as_deref()
        .unwrap()
        .contains("500 Internal Server Error"));
    clock.advance(Duration::from_secs(3600));
    assert!(w.run_until_idle().await.unwrap().is_empty());
    assert!(metrics
        .render()
        .contains(r#"meshward_check_results_total{kind="check",outcome="error"} 1"#));
}

async fn an_invalid_repo_config_fails_the_job_at_once(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(
        REPO,
        None,
        &[(".meshward.yaml", "fail_on: error\nnot_a_key: 1\n")],
    );
    let head = fake.commit(
        REPO,
        Some(&base),
        &[
            (".meshward.yaml", "fail_on: error\nnot_a_key: 1\n"),
            ("ns.yaml", NAMESPACE),
        ],
    );
    let store = migrated(store).await;
    let id = store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let metrics = Metrics::new();
    let w = worker(
        &store,
        Some(token_github(&fake, &metrics)),
        &metrics,
        &Clock::manual(0),
    );
    let done = w.run_until_idle().await.unwrap();
    assert!(matches!(done[0].1, Processed::Failed { .. }), "{done:?}");
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Failed, 1));
    let error = job.last_error.unwrap();
    assert!(
        error.contains("config error") && error.contains("not_a_key"),
        "{error}"
    );
    // The pull request is told why (token mode: a commit status).
    let statuses = fake.repo(REPO).statuses;
    let states: Vec<&str> = statuses.iter().map(|s| s.state.as_str()).collect();
    assert_eq!(states, ["pending", "error"]);
    let description = statuses[1].description.as_deref().unwrap_or_default();
    assert!(
        description.starts_with("meshward could not check this change: config error"),
        "{description}"
    );
}

async fn installation_tokens_are_reused_until_close_to_expiry(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    for pr in [8, 9, 10] {
        fake.open_pull(REPO, pr, &base, &head);
    }
    let store = migrated(store).await;
    let metrics = Metrics::new();
    let clock = Clock::manual(0);
    // Long-lived tokens: one for both jobs. The second job has no installation id:
    // the app looks it up.
    let w = worker(&store, Some(app_github(&fake, &metrics)), &metrics, &clock);
    store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap();
    let no_installation = NewJob {
        installation_id: None,
        ..check_job(8, &base, &head)
    };
    store.enqueue(&no_installation, 3, 0).await.unwrap();
    let done = w.run_until_idle().await.unwrap();
    assert_eq!(done.len(), 2);
    assert!(done
        .iter()
        .all(|(_, p)| matches!(p, Processed::Succeeded { .. })));
    assert_eq!(fake.calls_to("/access_tokens").len(), 1);
    let lookups = fake
        .calls()
        .iter()
        .filter(|c| c.path.ends_with("/installation"))
        .count();
    assert_eq!(lookups, 1);

    // Tokens that expire within the refresh margin are replaced before each use.
    fake.model().token_ttl = chrono::Duration::minutes(2);
    let w = worker(&store, Some(app_github(&fake, &metrics)), &metrics, &clock);
    store
        .enqueue(&check_job(9, &base, &head), 3, 0)
        .await
        .unwrap();
    store
        .enqueue(&check_job(10, &base, &head), 3, 0)
        .await
        .unwrap();
    assert_eq!(w.run_until_idle().await.unwrap().len(), 2);
    assert_eq!(fake.calls_to("/access_tokens").len(), 3);
}

async fn shutdown_finishes_or_releases_jobs_in_flight(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    let store = migrated(store).await;
    let metrics = Metrics::new();
    let clock = Clock::manual(0);
    let github = token_github(&fake, &metrics);
    let pool = |grace: Duration| {
        let proto = Worker::new(
            store.clone(),
            Some(github.clone()),
            metrics.clone(),
            QueueConfig {
                workers: 1,
                shutdown_grace: grace,
                ..queue_config()
            },
            clock.clone(),
        );
        let shutdown = CancellationToken::new();
        let set = jobs::spawn_pool(
            &proto,
            shutdown.clone(),
            Arc::new(tokio::sync::Notify::new()),
        );
        (shutdown, set)
    };
    let running = |store: Store, id: i64| async move {
        let j = store.job(id).await.unwrap().unwrap();
        (j.state == JobState::Running).then_some(())
    };

    // A slow download, a short grace: the job goes back to the queue, uncounted.
    fake.delay("/_codeload/", Duration::from_secs(3));
    let id = store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let (shutdown, mut set) = pool(Duration::from_millis(50));
    eventually(Duration::from_secs(20), "the job to start", || {
        running(store.clone(), id)
    })
    .await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(20), async {
        while set.join_next().await.is_some() {}
    })
    .await
    .expect("workers stop");
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 0), "{job:?}");

    // A generous grace: the job in flight finishes.
    fake.model().delays = vec![("/_codeload/".into(), Duration::from_millis(300))];
    let (shutdown, mut set) = pool(Duration::from_secs(30));
    eventually(Duration::from_secs(20), "the job to start again", || {
        running(store.clone(), id)
    })
    .await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), async {
        while set.join_next().await.is_some() {}
    })
    .await
    .expect("workers stop");
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempts),
        (JobState::Succeeded, 1),
        "{job:?}"
    );
}

/// A GitHub that takes a request and never answers: the call times out, the job is
/// retried later with the reason recorded, and the other job in the queue completes.
async fn a_github_that_never_answers_fails_the_call_and_other_jobs_flow(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    let other = fake.commit(
        REPO,
        Some(&base),
        &[("clusters/prod/namespace.yaml", NAMESPACE)],
    );
    fake.open_pull(REPO, 8, &base, &other);
    // Only the first pull request's tarball hangs (an hour is "never" here).
    fake.delay(&format!("/tarball/{head}"), Duration::from_secs(3600));
    let store = migrated(store).await;
    let stuck = store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let flowing = store
        .enqueue(&check_job(8, &base, &other), 3, 0)
        .await
        .unwrap()
        .id();
    let metrics = Metrics::new();
    let mut cfg = meshward::github::GitHubConfig::new(
        Some(fake.url()),
        meshward::github::GitHubAuth::App {
            app_id: APP_ID as u64,
            private_key_pem: secrecy::SecretString::from(fake_github::app_private_key()),
        },
    );
    cfg.retry = meshward::github::RetryPolicy {
        max_retries: 0,
        ..fast_retry()
    };
    cfg.timeouts = meshward::github::Timeouts {
        connect: Duration::from_secs(1),
        read: Duration::from_secs(1),
        call: Duration::from_secs(2),
    };
    let github = meshward::github::GitHub::new(cfg, metrics.clone()).unwrap();
    let clock = Clock::manual(0);
    let w = worker(&store, Some(github), &metrics, &clock);
    let started = std::time::Instant::now();
    let done = tokio::time::timeout(Duration::from_secs(60), w.run_until_idle())
        .await
        .expect("the worker does not hang on a silent GitHub")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let outcome = |id: i64| {
        done.iter()
            .find(|(job, _)| job.id == id)
            .map(|(_, p)| format!("{p:?}"))
            .unwrap_or_default()
    };
    assert!(outcome(flowing).starts_with("Succeeded"), "{done:?}");
    let stuck_outcome = outcome(stuck);
    assert!(stuck_outcome.starts_with("Retrying"), "{done:?}");
    assert!(
        stuck_outcome.contains("did not answer")
            || stuck_outcome.contains("timed out")
            || stuck_outcome.contains("imeout"),
        "the reason is recorded: {stuck_outcome}"
    );
    let job = store.job(stuck).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 1), "{job:?}");
}

/// A phase past its deadline (here: fetching, while GitHub trickles along inside
/// its own timeouts) fails the attempt with the phase named, and the job is retried.
async fn a_phase_past_its_deadline_fails_the_attempt_with_the_phase_named(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.delay(&format!("/tarball/{head}"), Duration::from_secs(3600));
    let store = migrated(store).await;
    let id = store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let metrics = Metrics::new();
    let clock = Clock::manual(0);
    let mut config = queue_config();
    config.phases.fetch = Duration::from_secs(1);
    let w = worker_with(
        &store,
        Some(app_github(&fake, &metrics)),
        &metrics,
        &clock,
        config,
    );
    let (_, processed) = tokio::time::timeout(Duration::from_secs(60), w.run_once())
        .await
        .expect("the phase deadline stops the attempt")
        .unwrap()
        .expect("a job was due");
    let Processed::Retrying { error } = processed else {
        panic!("{processed:?}");
    };
    assert!(
        error.contains(
            "fetching the commits took longer than its deadline of 1 s (MESHWARD_JOB_FETCH_SECS)"
        ),
        "{error}"
    );
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 1), "{job:?}");
    assert!(job.last_error.unwrap_or_default().contains("deadline"));
}

/// The database goes away while a job runs (a proxy the test controls drops every
/// connection): the job is not left `running` for its whole lease, but given back as
/// soon as the database answers again, and then completes.
#[sqlx::test(migrations = false)]
async fn a_job_whose_database_went_away_is_given_back_when_it_returns(
    _: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    use std::net::ToSocketAddrs;
    let database = (connect.get_host(), connect.get_port())
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .expect("the test database is reached over TCP");
    let proxy = service_support::proxy::Proxy::start(database).await;
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        connect.get_username(),
        proxy.port(),
        connect
            .get_database()
            .expect("a database of the test's own")
    );
    let store = migrated(Store::connect(&url).await.expect("through the proxy")).await;
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.delay(&format!("/tarball/{head}"), Duration::from_secs(2));
    let id = store
        .enqueue(&check_job(7, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let metrics = Metrics::new();
    let clock = Clock::manual(0);
    let mut config = queue_config();
    config.lease = Duration::from_secs(300);
    let w = worker_with(
        &store,
        Some(app_github(&fake, &metrics)),
        &metrics,
        &clock,
        config,
    );
    let started = std::time::Instant::now();
    let running = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await }
    });
    // Mid-job: the tarball is on its way when the database goes.
    wait_until(Duration::from_secs(30), || {
        !fake.calls_to("/tarball/").is_empty()
    })
    .await;
    proxy.cut();
    // Back once the worker has found it gone and tried again.
    wait_until(Duration::from_secs(60), || proxy.refused() >= 2).await;
    proxy.restore();
    let (_, processed) = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the worker gives the job back once the database answers")
        .unwrap()
        .unwrap()
        .expect("a job was due");
    assert_eq!(processed, Processed::Released);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "not held for its 300 s lease: {:?}",
        started.elapsed()
    );
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 0), "{job:?}");
    let done = w.run_until_idle().await.unwrap();
    assert!(
        matches!(done.as_slice(), [(_, Processed::Succeeded { .. })]),
        "{done:?}"
    );
}

/// Polls `cond` until it holds (the test fails after `limit`).
async fn wait_until(limit: Duration, cond: impl Fn() -> bool) {
    let until = std::time::Instant::now() + limit;
    while !cond() {
        assert!(
            std::time::Instant::now() < until,
            "condition not reached in {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

contract!(
    a_phase_past_its_deadline_fails_the_attempt_with_the_phase_named,
    a_github_that_never_answers_fails_the_call_and_other_jobs_flow,
    a_job_whose_worker_died_completes_on_another_after_the_lease,
    github_server_errors_and_rate_limits_are_retried_in_the_client,
    failing_jobs_back_off_exponentially_then_fail_with_the_error,
    an_invalid_repo_config_fails_the_job_at_once,
    installation_tokens_are_reused_until_close_to_expiry,
    shutdown_finishes_or_releases_jobs_in_flight,
);
