//! Publishing to the pull request, end to end on both store backends: workers run
//! check jobs against the fake GitHub (through the real octocrab client), and the
//! tests read what landed on the pull request from the fake's model, and what was
//! recorded from the store.

use crate::service_support;

use meshward::clock::Clock;
use meshward::jobs::{Processed, Worker};
use meshward::metrics::Metrics;
use meshward::server::router;
use meshward::store::*;
use service_support::fake_github::{CheckRun, Fault};
use service_support::*;
use std::time::Duration;

const PR: i64 = 7;
const PAYMENTS: &str = "clusters/prod/payments.yaml";
const NS_FILE: &str = "clusters/prod/namespace.yaml";

/// 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> u32 {
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u32 + 1)
        .expect("needle in text")
}

/// `n` ServiceEntries with resolution NONE and endpoints, in one file.
fn bad_service_entries(n: usize) -> String {
    (0..n)
        .map(|i| BAD_SERVICE_ENTRY.replace("name: payments-api", &format!("name: partner-{i}")))
        .collect::<Vec<_>>()
        .join("---\n")
}

fn app_worker(fake: &FakeGitHub, store: &Store, clock: &Clock) -> (Worker, Metrics) {
    let metrics = Metrics::new();
    let w = worker(store, Some(app_github(fake, &metrics)), &metrics, clock);
    (w, metrics)
}

async fn run_one(w: &Worker) -> (Job, Processed) {
    let mut done = w.run_until_idle().await.unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    done.remove(0)
}

fn succeeded(p: &Processed) -> i64 {
    match p {
        Processed::Succeeded { run_id } => *run_id,
        other => panic!("the job did not succeed: {other:?}"),
    }
}

/// The issue's first two scenarios as one story: a PR that introduces
/// `serviceentry/none-with-endpoints` fails the check with an annotation at the
/// line, one summary comment and one inline comment on the changed line; a push
/// that fixes it edits the same comment, passes, and answers the inline comment.
async fn a_finding_fails_the_check_and_a_fix_passes_it_in_the_same_summary(store: Store) {
    finding_then_fix(FakeGitHub::start().await, store).await;
}

/// The same story on GitHub Enterprise Server, whose REST API is under `/api/v3`
/// and whose GraphQL (resolving the thread) is at `/api/graphql`, not under it.
async fn on_enterprise_server_the_story_is_the_same(store: Store) {
    let (svc, first_summary) = finding_then_fix(FakeGitHub::start_enterprise().await, store).await;
    let fake = &svc.fake;
    let calls = fake.model().calls.clone();
    assert!(
        calls.iter().all(|c| c.status != 404),
        "a call went where Enterprise serves nothing: {calls:?}"
    );
    assert!(calls
        .iter()
        .any(|c| c.path == "/api/graphql" && c.method == "POST"));
    // Links people follow go to the Enterprise web host.
    let web = format!("{}/{REPO}/blob/", fake.server.uri());
    assert!(first_summary.contains(&web), "{web} in\n{first_summary}");
}

/// Threads are found across GraphQL pages: with one thread a page, fixing three
/// findings resolves all three threads.
async fn review_threads_are_resolved_past_the_first_page(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.model().graphql_page_size = 1;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE)]);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, &bad_service_entries(3))],
    );
    fake.open_pull(REPO, PR, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    succeeded(&run_one(&w).await.1);
    let threads: Vec<i64> = fake
        .repo(REPO)
        .inline_comments()
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(threads.len(), 3);

    let fixed = fake.commit(
        REPO,
        Some(&head),
        &[
            (NS_FILE, NAMESPACE),
            (
                PAYMENTS,
                &bad_service_entries(3).replace("resolution: NONE", "resolution: STATIC"),
            ),
        ],
    );
    fake.push_pull(REPO, PR, &fixed);
    store
        .enqueue(&check_job(PR, &base, &fixed), 3, clock.now_ms())
        .await
        .unwrap();
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    for id in &threads {
        assert!(repo.resolved_threads.contains(id), "thread of comment {id}");
    }
}

/// A PR that introduces a finding, then a push that fixes it (see the first test).
/// Returns the first summary comment.
async fn finding_then_fix(fake: FakeGitHub, store: Store) -> (Service, String) {
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let mut svc = Service::on(fake, store).await;
    svc.worker.public_url = Some("https://meshward.example.com".into());
    let base = svc.commit(None, &[(NS_FILE, NAMESPACE)]);
    let head = svc.commit(
        Some(&base),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, BAD_SERVICE_ENTRY)],
    );
    svc.open_pr(PR, &base, &head).await;
    let run_id = svc.process_one().await;
    let store = &svc.store;

    let repo = svc.repo();
    let checks: Vec<CheckRun> = repo.check_runs.values().cloned().collect();
    assert_eq!(checks.len(), 1);
    let check = &checks[0];
    assert_eq!(
        (
            check.name.as_str(),
            check.head_sha.as_str(),
            check.status.as_str()
        ),
        ("meshward", head.as_str(), "completed")
    );
    assert_eq!(check.conclusion.as_deref(), Some("failure"));
    assert_eq!(
        check.details_url.as_deref(),
        Some(format!("https://meshward.example.com/repos/{REPO}/runs/{run_id}").as_str())
    );
    assert_eq!(
        check.title.as_deref(),
        Some("1 blocking finding (fail-on error)")
    );
    let line = line_of(BAD_SERVICE_ENTRY, "resolution: NONE");
    assert_eq!(check.annotations.len(), 1);
    let a = &check.annotations[0];
    assert_eq!(a["path"], PAYMENTS);
    assert_eq!(a["start_line"], line);
    assert_eq!(a["annotation_level"], "failure");
    assert_eq!(a["title"], "serviceentry/none-with-endpoints");
    assert!(a["message"]
        .as_str()
        .unwrap()
        .starts_with("ServiceEntry egress/payments-api has resolution NONE"));

    assert_eq!(repo.issue_comments.len(), 1);
    let comment = repo.issue_comments.values().next().unwrap().clone();
    assert!(comment.body.starts_with("<!-- meshward:summary -->"));
    assert_eq!(comment.login, format!("{APP_SLUG}[bot]"));
    let link = format!("/{REPO}/blob/{head}/{PAYMENTS}#L{line}");
    assert!(comment.body.contains(&link), "{link} in\n{}", comment.body);
    assert!(comment.body.contains("❌ **meshward: 1 blocking finding**"));

    assert_eq!(repo.reviews.len(), 1);
    let review = repo.reviews.values().next().unwrap();
    assert_eq!(
        (review.event.as_str(), review.commit_id.as_str()),
        ("COMMENT", head.as_str())
    );
    let inline = repo.inline_comments();
    assert_eq!(inline.len(), 1);
    let first = inline[0].clone();
    assert_eq!((first.path.as_str(), first.line), (PAYMENTS, Some(line)));
    assert!(first.body.contains("`serviceentry/none-with-endpoints`"));
    assert_eq!(review.comment_ids, vec![first.id]);

    // Everything posted is in the history.
    let pubs = store.publications(REPO_ID, PR).await.unwrap();
    assert_eq!(pubs.len(), 1);
    assert_eq!(pubs[0].state, "published");
    assert_eq!(pubs[0].run_id, Some(run_id));
    assert_eq!(pubs[0].check_run_id, Some(check.id));
    assert_eq!(pubs[0].comment_id, Some(comment.id));
    assert_eq!(pubs[0].review_id, Some(review.id));
    assert_eq!(pubs[0].annotations_sent, 1);
    assert_eq!(
        store.pr_comment(REPO_ID, PR).await.unwrap(),
        Some(comment.id)
    );
    let recorded = store.review_comments(REPO_ID, PR).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].comment_id, first.id);
    assert_eq!(recorded[0].rule, "serviceentry/none-with-endpoints");
    assert_eq!(recorded[0].subject, "ServiceEntry/egress/payments-api");

    // A second push fixes it.
    let fixed_entry = BAD_SERVICE_ENTRY.replace("resolution: NONE", "resolution: STATIC");
    let fixed = svc.commit(
        Some(&head),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, &fixed_entry)],
    );
    svc.push(PR, &fixed).await;
    svc.process_one().await;

    let repo = svc.repo();
    assert_eq!(repo.check_runs.len(), 2);
    assert_eq!(svc.conclusion_at(&fixed), "success");
    assert!(svc.check_runs_at(&fixed)[0].annotations.is_empty());
    // Still one summary comment: the same one, edited.
    assert_eq!(repo.issue_comments.len(), 1);
    let edited = repo.issue_comments.values().next().unwrap();
    assert_eq!(edited.id, comment.id);
    assert_eq!(edited.edits, 1);
    svc.expect_comment("✅ **meshward: no blocking findings**");
    svc.expect_comment("Introduced by this change (0)");
    // The inline comment is answered and its thread resolved; nothing new posted.
    assert_eq!(repo.reviews.len(), 1);
    assert_eq!(repo.inline_comments().len(), 1);
    let replies = repo.replies_to(first.id);
    assert_eq!(replies.len(), 1);
    assert!(
        replies[0].body.contains("✅ **Resolved**"),
        "{}",
        replies[0].body
    );
    assert!(repo.resolved_threads.contains(&first.id));
    let recorded = store.review_comments(REPO_ID, PR).await.unwrap();
    assert!(recorded[0].resolved_at_ms.is_some());
    assert_eq!(recorded[0].reply_id, Some(replies[0].id));
    let first_summary = comment.body;
    (svc, first_summary)
}

/// 120 findings: annotations in three requests (50, 50, 20), all of them counted.
async fn annotations_go_fifty_to_a_request(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE)]);
    let many = bad_service_entries(120);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, &many)],
    );
    fake.open_pull(REPO, PR, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    let check = repo.check_runs.values().next().unwrap();
    assert_eq!(check.annotation_batches, vec![50, 50, 20]);
    assert_eq!(check.annotations.len(), 120);
    assert_eq!(check.conclusion.as_deref(), Some("failure"));
    assert_eq!(
        check.title.as_deref(),
        Some("120 blocking findings (fail-on error)")
    );
    // Inline comments are capped per run; the summary has them all.
    assert_eq!(repo.reviews.len(), 1);
    assert_eq!(repo.inline_comments().len(), 50);
    let comment = repo.issue_comments.values().next().unwrap();
    assert!(comment.body.contains("Introduced by this change (120)"));
    assert_eq!(
        store.publications(REPO_ID, PR).await.unwrap()[0].annotations_sent,
        120
    );
}

/// A report far over GitHub's limits: the comment is cut under 65,536 characters
/// with a note, the check run's summary too (every finding listed in its text), and
/// annotations stop at 500 with the rest counted.
async fn a_report_over_the_limits_is_cut_with_a_note(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE)]);
    let many = bad_service_entries(600);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, &many)],
    );
    fake.open_pull(REPO, PR, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    let run_id = succeeded(&run_one(&w).await.1);
    let report = store.run_report(run_id).await.unwrap().unwrap();
    let full =
        meshward::report::markdown::render(&report, &meshward::report::markdown::Links::None);
    assert!(full.len() > 200_000, "the report is {} bytes", full.len());

    let repo = fake.repo(REPO);
    assert_eq!(repo.issue_comments.len(), 1);
    let body = &repo.issue_comments.values().next().unwrap().body;
    assert!(body.chars().count() <= 65_536);
    assert!(body.starts_with("<!-- meshward:summary -->"));
    assert!(
        body.contains("This report is longer than a GitHub comment allows, so it is cut here")
            && body.contains(&format!("/{REPO}/pull/{PR}/checks")),
        "{}",
        &body[body.len() - 400..]
    );
    let check = repo.check_runs.values().next().unwrap();
    let summary = check.summary.as_deref().unwrap();
    assert!(summary.chars().count() <= 65_535);
    assert!(summary.contains("500 of 600 findings are annotated"));
    let text = check.text.as_deref().expect("every finding in the text");
    assert!(text.chars().count() <= 65_535);
    assert!(text.contains("`ServiceEntry/egress/partner-0`"));
    assert_eq!(check.annotations.len(), 500);
    assert_eq!(check.annotation_batches, vec![50; 10]);
}

/// 502 twice then 201: the client retries and the check run and comment exist once;
/// a secondary rate limit waits for `x-ratelimit-reset`.
async fn server_errors_and_rate_limits_are_retried_and_posted_once(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    for path in ["/check-runs", "/issues/7/comments"] {
        fake.inject(Fault {
            path_contains: path.into(),
            method: Some("POST".into()),
            status: 502,
            message: "Server Error".into(),
            times: 2,
            ..Fault::default()
        });
    }
    let reset = chrono::Utc::now().timestamp() + 1;
    fake.inject(Fault {
        path_contains: "/check-runs/".into(),
        method: Some("PATCH".into()),
        status: 403,
        message: "You have exceeded a secondary rate limit.".into(),
        headers: vec![
            ("x-ratelimit-remaining".into(), "0".into()),
            ("x-ratelimit-reset".into(), reset.to_string()),
        ],
        times: 1,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, metrics) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    let (job, processed) = run_one(&w).await;
    succeeded(&processed);
    assert_eq!(job.attempts, 1, "no job-level retry was needed");
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
    let text = metrics.render();
    for needle in [
        r#"meshward_github_api_calls_total{status="502"} 4"#,
        r#"meshward_github_api_calls_total{status="403"} 1"#,
    ] {
        assert!(text.contains(needle), "{needle} not in\n{text}");
    }
}

/// GitHub answers the summary comment's POST once with `status` and a
/// `Retry-After` of 600 s, longer than the client waits in place: the job is tried
/// again no earlier than GitHub asked, and the comment is posted once.
async fn job_retried_when_github_says(store: Store, status: u16, message: &str) -> FakeGitHub {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/issues/7/comments".into(),
        method: Some("POST".into()),
        status,
        retry_after: Some(600),
        message: message.into(),
        times: 1,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    let id = store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let (_, processed) = run_one(&w).await;
    assert!(
        matches!(processed, Processed::Retrying { .. }),
        "{processed:?}"
    );
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!(job.run_after_ms, clock.now_ms() + 600_000);
    clock.advance(Duration::from_secs(599));
    assert!(w.run_until_idle().await.unwrap().is_empty());
    clock.advance(Duration::from_secs(1));
    succeeded(&run_one(&w).await.1);
    assert_eq!(fake.repo(REPO).issue_comments.len(), 1);
    fake
}

/// A secondary rate limit longer than the client waits: the job is tried again, not
/// before the time GitHub asked for (and the stored run is published then).
async fn a_long_rate_limit_retries_the_job_when_github_says(store: Store) {
    job_retried_when_github_says(store, 403, "You have exceeded a secondary rate limit.").await;
}

/// 403 on a repository (a permission missing): the job fails at once with the
/// reason recorded, and nothing more is asked of GitHub.
async fn a_refusal_fails_the_job_with_the_reason_and_no_further_calls(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/check-runs".into(),
        status: 403,
        message: "Resource not accessible by integration".into(),
        times: 1_000,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    let id = store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let (_, processed) = run_one(&w).await;
    let Processed::Failed { error } = processed else {
        panic!("{processed:?}");
    };
    assert!(
        error.contains("403")
            && error.contains("lacks a permission")
            && error.contains("will not retry"),
        "{error}"
    );
    let job = store.job(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Failed, 1));
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, RunOutcome::Error);
    assert_eq!(runs[0].error.as_deref(), Some(error.as_str()));
    let publication = store.publication(id).await.unwrap().unwrap();
    assert_eq!(publication.state, "failed");
    assert_eq!(publication.error.as_deref(), Some(error.as_str()));

    // The refused call was the last one: no download, no comment, no retry.
    let calls = fake.calls();
    let last = calls.last().unwrap();
    assert_eq!((last.method.as_str(), last.status), ("POST", 403));
    assert!(last.path.ends_with("/check-runs"));
    assert_eq!(calls.iter().filter(|c| c.status == 403).count(), 1);
    assert!(fake.calls_to("/tarball/").is_empty());
    clock.advance(Duration::from_secs(24 * 3600));
    assert!(w.run_until_idle().await.unwrap().is_empty());
    assert_eq!(fake.calls().len(), calls.len());
}

/// The comment cannot be posted (GitHub keeps failing): the stored run is kept,
/// the job retries publishing it without checking again, and posts it once.
async fn a_failed_publish_keeps_the_run_and_is_retried(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/issues/7/comments".into(),
        method: Some("POST".into()),
        status: 500,
        message: "Server Error".into(),
        times: 4,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    let id = store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let (_, processed) = run_one(&w).await;
    assert!(
        matches!(processed, Processed::Retrying { .. }),
        "{processed:?}"
    );
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1, "the result is stored");
    assert_eq!(runs[0].outcome, RunOutcome::Fail);
    assert_eq!(runs[0].counts.introduced, 1);
    let repo = fake.repo(REPO);
    assert_eq!(
        repo.check_runs
            .values()
            .next()
            .unwrap()
            .conclusion
            .as_deref(),
        Some("failure"),
        "the check run is completed before the comment"
    );
    assert!(repo.issue_comments.is_empty());
    assert_eq!(
        store.publication(id).await.unwrap().unwrap().state,
        "stored"
    );

    clock.advance(queue_config().backoff(1));
    let (job, processed) = run_one(&w).await;
    assert_eq!(job.attempts, 2);
    assert_eq!(succeeded(&processed), runs[0].id);
    let repo = fake.repo(REPO);
    assert_eq!(repo.issue_comments.len(), 1);
    assert_eq!(repo.check_runs.len(), 1);
    assert_eq!(
        repo.check_runs.values().next().unwrap().annotations.len(),
        1
    );
    assert_eq!(repo.inline_comments().len(), 1);
    assert_eq!(fake.calls_to("/tarball/").len(), 2, "not checked again");
    assert_eq!(store.runs(&RunFilter::default()).await.unwrap().len(), 1);
    assert_eq!(
        store.publication(id).await.unwrap().unwrap().state,
        "published"
    );
}

/// The process stops between posting the review and recording its comments; after
/// a restart (a new worker and client on the same store) nothing is posted twice,
/// and a re-run requested from GitHub's UI gets a new check run and edits the rest.
async fn reruns_after_a_restart_post_nothing_twice(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/reviews/".into(),
        method: Some("GET".into()),
        status: 500,
        message: "Server Error".into(),
        times: 4,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    {
        let (w, _) = app_worker(&fake, &store, &clock);
        store
            .enqueue(&check_job(PR, &base, &head), 3, 0)
            .await
            .unwrap();
        let (_, processed) = run_one(&w).await;
        assert!(
            matches!(processed, Processed::Retrying { .. }),
            "{processed:?}"
        );
    }
    assert_eq!(fake.repo(REPO).reviews.len(), 1, "the review was posted");
    assert!(store.review_comments(REPO_ID, PR).await.unwrap().is_empty());

    // Restart.
    clock.advance(queue_config().backoff(1));
    let (w, metrics) = app_worker(&fake, &store, &clock);
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    assert_eq!(repo.reviews.len(), 1);
    assert_eq!(repo.inline_comments().len(), 1);
    assert_eq!(repo.issue_comments.len(), 1);
    assert_eq!(repo.check_runs.len(), 1);
    assert_eq!(
        repo.check_runs.values().next().unwrap().annotations.len(),
        1
    );
    let recorded = store.review_comments(REPO_ID, PR).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].comment_id, repo.inline_comments()[0].id);

    // "Re-run" on the check in GitHub's UI.
    let app = router(app_state(store.clone(), metrics.clone(), clock.clone()));
    let mut event = payload("check_run.rerequested");
    event["check_run"]["head_sha"] = head.clone().into();
    event["check_run"]["pull_requests"] = serde_json::json!([
        {"number": PR, "base": {"sha": base, "ref": "main"}, "head": {"sha": head, "ref": "feature"}}
    ]);
    let bytes = serde_json::to_vec(&event).unwrap();
    let (status, text) = send(
        &app,
        webhook_request("check_run", "rerun-1", &bytes, Some(SECRET)),
    )
    .await;
    assert_eq!(status, 202, "{text}");
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    assert_eq!(
        repo.check_runs.len(),
        2,
        "a re-run gets a check run of its own"
    );
    assert!(repo
        .check_runs
        .values()
        .all(|c| c.conclusion.as_deref() == Some("failure") && c.annotations.len() == 1));
    // One comment, edited by the retry and by the re-run.
    assert_eq!(repo.issue_comments.len(), 1);
    assert_eq!(repo.issue_comments.values().next().unwrap().edits, 2);
    assert_eq!(repo.reviews.len(), 1);
    assert_eq!(repo.inline_comments().len(), 1);
    assert_eq!(store.publications(REPO_ID, PR).await.unwrap().len(), 2);
}

/// With a plain token (no Checks API) the result is a `meshward` commit status.
async fn with_a_token_the_check_is_a_commit_status(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let metrics = Metrics::new();
    let mut w = worker(
        &store,
        Some(token_github(&fake, &metrics)),
        &metrics,
        &clock,
    );
    w.public_url = Some("https://meshward.example.com/".into());
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    let run_id = succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    assert!(repo.check_runs.is_empty());
    assert!(fake.calls_to("/check-runs").is_empty());
    let states: Vec<(&str, &str, &str)> = repo
        .statuses
        .iter()
        .map(|s| (s.sha.as_str(), s.context.as_str(), s.state.as_str()))
        .collect();
    assert_eq!(
        states,
        vec![
            (head.as_str(), "meshward", "pending"),
            (head.as_str(), "meshward", "failure")
        ]
    );
    let last = repo.statuses.last().unwrap();
    assert_eq!(
        last.description.as_deref(),
        Some("1 blocking finding (fail-on error): 1 introduced, 0 resolved")
    );
    assert_eq!(
        last.target_url.as_deref(),
        Some(format!("https://meshward.example.com/repos/{REPO}/runs/{run_id}").as_str())
    );
    assert_eq!(repo.issue_comments.len(), 1);
    assert_eq!(
        repo.issue_comments.values().next().unwrap().login,
        "token-user"
    );
    assert_eq!(repo.inline_comments().len(), 1);
}

/// A pull request from a fork: the base repository's installation reads it, and the
/// fork's edits to `.meshward.yaml` (turning the rule and inline comments off) and
/// policies take effect only after merge.
async fn a_fork_is_checked_with_the_base_repository_installation_and_config(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE)]);
    let waiver =
        "rules:\n  serviceentry/none-with-endpoints: off\npublish:\n  inline_comments: false\n";
    let head = fake.commit(
        REPO,
        Some(&base),
        &[
            (NS_FILE, NAMESPACE),
            (PAYMENTS, BAD_SERVICE_ENTRY),
            (".meshward.yaml", waiver),
            (
                ".meshward/policies/waive.rego",
                "package waive\nimport rego.v1\nfindings := []\n",
            ),
        ],
    );
    fake.open_pull_from(REPO, "mallory/gitops", 9, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(9, &base, &head), 3, 0)
        .await
        .unwrap();
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    let check = repo.check_runs.values().next().unwrap();
    assert_eq!(check.conclusion.as_deref(), Some("failure"));
    assert_eq!(repo.inline_comments().len(), 1);
    let body = &repo.issue_comments.values().next().unwrap().body;
    assert!(body.contains("take effect after merge"), "{body}");
    assert!(fake.calls().iter().all(|c| !c.path.contains("mallory")));
    assert_eq!(
        fake.calls_to(&format!("/app/installations/{INSTALLATION}/access_tokens"))
            .len(),
        1
    );
}

/// `publish: { inline_comments: false }` in the base's `.meshward.yaml`.
async fn inline_comments_can_be_switched_off(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let config = "publish: { inline_comments: false }\n";
    let base = fake.commit(
        REPO,
        None,
        &[(NS_FILE, NAMESPACE), (".meshward.yaml", config)],
    );
    let head = fake.commit(
        REPO,
        Some(&base),
        &[
            (NS_FILE, NAMESPACE),
            (".meshward.yaml", config),
            (PAYMENTS, BAD_SERVICE_ENTRY),
        ],
    );
    fake.open_pull(REPO, PR, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
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
    assert!(repo.reviews.is_empty());
    assert!(fake.calls_to("/files").is_empty());
}

/// A job that cannot check (an invalid `.meshward.yaml` in base) ends its check run
/// with the reason instead of leaving it in progress.
async fn a_job_that_cannot_check_ends_its_check_run_with_the_reason(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let config = "fail_on: error\nnot_a_key: 1\n";
    let base = fake.commit(REPO, None, &[(".meshward.yaml", config)]);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[(".meshward.yaml", config), (PAYMENTS, BAD_SERVICE_ENTRY)],
    );
    fake.open_pull(REPO, PR, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    let (_, processed) = run_one(&w).await;
    assert!(
        matches!(processed, Processed::Failed { .. }),
        "{processed:?}"
    );
    let repo = fake.repo(REPO);
    let check = repo.check_runs.values().next().unwrap();
    assert_eq!(
        (check.status.as_str(), check.conclusion.as_deref()),
        ("completed", Some("failure"))
    );
    assert_eq!(
        check.title.as_deref(),
        Some("meshward could not check this change")
    );
    let summary = check.summary.as_deref().unwrap();
    assert!(
        summary.contains(".meshward.yaml:2") && summary.contains("not_a_key"),
        "{summary}"
    );
}

/// A change to nothing meshward reads: `neutral`, and no comment to read.
async fn a_change_with_nothing_to_check_is_neutral_and_quiet(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE)]);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[(NS_FILE, NAMESPACE), ("README.md", "# ops\n")],
    );
    fake.open_pull(REPO, PR, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    let check = repo.check_runs.values().next().unwrap();
    assert_eq!(check.conclusion.as_deref(), Some("neutral"));
    assert_eq!(
        check.title.as_deref(),
        Some("Nothing to check in this change")
    );
    assert!(repo.issue_comments.is_empty());
}

/// The pull request moved on before an older commit's job ran: that commit's check
/// run is completed, but the summary and review are left to the newer commit.
async fn a_run_for_an_older_commit_leaves_the_summary_alone(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    let newer = fake.commit(
        REPO,
        Some(&head),
        &[(NS_FILE, NAMESPACE), ("notes.txt", "later\n")],
    );
    fake.push_pull(REPO, PR, &newer);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap();
    succeeded(&run_one(&w).await.1);
    let repo = fake.repo(REPO);
    assert_eq!(
        repo.check_runs
            .values()
            .next()
            .unwrap()
            .conclusion
            .as_deref(),
        Some("failure")
    );
    assert!(repo.issue_comments.is_empty());
    assert!(repo.reviews.is_empty());
}

/// "Re-run" in GitHub's UI on the check of a pull request from a fork: GitHub lists
/// no pull request on the check run or suite. The first re-run finds the pull
/// request among the open ones (GitHub's commit-to-pulls lookup does not list a
/// fork's); the next finds it in the jobs already stored, without asking GitHub.
async fn a_rerun_of_a_fork_pull_request_is_checked_and_published(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE)]);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, BAD_SERVICE_ENTRY)],
    );
    fake.open_pull(REPO, 3, &base, &base);
    fake.open_pull_from(REPO, "mallory/gitops", 9, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, metrics) = app_worker(&fake, &store, &clock);
    let app = router(app_state(store.clone(), metrics.clone(), clock.clone()));

    let mut run = payload("check_run.rerequested");
    run["check_run"]["head_sha"] = head.clone().into();
    run["check_run"]["pull_requests"] = serde_json::json!([]);
    run["check_run"]["check_suite"]["head_branch"] = "patch-1".into();
    let bytes = serde_json::to_vec(&run).unwrap();
    let (status, text) = send(
        &app,
        webhook_request("check_run", "fork-rerun-1", &bytes, Some(SECRET)),
    )
    .await;
    assert_eq!(status, 202, "{text}");
    let (job, processed) = run_one(&w).await;
    succeeded(&processed);
    let job = store.job(job.id).await.unwrap().unwrap();
    assert_eq!(
        (job.pr_number, job.base_sha.as_deref()),
        (Some(9), Some(base.as_str()))
    );
    let list = format!("/repos/{REPO}/pulls");
    let listed = |fake: &FakeGitHub| fake.calls().iter().filter(|c| c.path == list).count();
    assert_eq!(listed(&fake), 1);

    let repo = fake.repo(REPO);
    let checks: Vec<CheckRun> = repo.check_runs.values().cloned().collect();
    assert_eq!(checks.len(), 1);
    assert_eq!(
        (checks[0].head_sha.as_str(), checks[0].conclusion.as_deref()),
        (head.as_str(), Some("failure"))
    );
    assert_eq!(checks[0].annotations.len(), 1);
    assert_eq!(repo.issue_comments.len(), 1);
    let comment = repo.issue_comments.values().next().unwrap();
    assert_eq!(comment.number, 9);
    assert!(comment.body.contains("❌ **meshward: 1 blocking finding**"));
    assert_eq!(repo.inline_comments().len(), 1);
    assert_eq!(repo.inline_comments()[0].number, 9);
    assert_eq!(store.publications(REPO_ID, 9).await.unwrap().len(), 1);
    assert!(fake.calls().iter().all(|c| !c.path.contains("mallory")));

    // Again, from the check suite: found in the stored jobs.
    let mut suite = payload("check_suite.rerequested");
    suite["check_suite"]["head_sha"] = head.clone().into();
    suite["check_suite"]["head_branch"] = "patch-1".into();
    suite["check_suite"]["pull_requests"] = serde_json::json!([]);
    let bytes = serde_json::to_vec(&suite).unwrap();
    let (status, text) = send(
        &app,
        webhook_request("check_suite", "fork-rerun-2", &bytes, Some(SECRET)),
    )
    .await;
    assert_eq!(status, 202, "{text}");
    succeeded(&run_one(&w).await.1);
    assert_eq!(listed(&fake), 1, "the stored job named the pull request");
    let repo = fake.repo(REPO);
    assert_eq!(repo.check_runs.len(), 2);
    assert!(repo
        .check_runs
        .values()
        .all(|c| c.head_sha == head && c.conclusion.as_deref() == Some("failure")));
    assert_eq!(repo.issue_comments.len(), 1);
    assert_eq!(repo.issue_comments.values().next().unwrap().edits, 1);
    assert_eq!(repo.inline_comments().len(), 1);
    assert_eq!(store.publications(REPO_ID, 9).await.unwrap().len(), 2);
}

/// A re-run of a commit no open pull request has at its head: the job says so and
/// posts nothing.
async fn a_rerun_of_a_commit_without_a_pull_request_posts_nothing(store: Store) {
    let fake = FakeGitHub::start().await;
    gitops_repo(&fake);
    let stray = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE), ("x.txt", "x\n")]);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, metrics) = app_worker(&fake, &store, &clock);
    let app = router(app_state(store.clone(), metrics, clock.clone()));
    let mut run = payload("check_run.rerequested");
    run["check_run"]["head_sha"] = stray.clone().into();
    run["check_run"]["pull_requests"] = serde_json::json!([]);
    run["check_run"]["check_suite"]["head_branch"] = "patch-1".into();
    let bytes = serde_json::to_vec(&run).unwrap();
    let (status, _) = send(
        &app,
        webhook_request("check_run", "stray-1", &bytes, Some(SECRET)),
    )
    .await;
    assert_eq!(status, 202);
    let (_, processed) = run_one(&w).await;
    let Processed::Failed { error } = processed else {
        panic!("{processed:?}");
    };
    assert!(error.contains("no open pull request"), "{error}");
    let repo = fake.repo(REPO);
    assert!(repo.check_runs.is_empty() && repo.issue_comments.is_empty());
    assert!(fake.calls_to("/tarball/").is_empty());
}

/// A fork's branch may be named like the default branch. A re-run of its pull
/// request's check (no pull request listed, head branch `main`) is still the check
/// of that pull request, not a baseline of the fork's code; a re-run of a commit
/// that is on this repository's main is a baseline, and posts nothing.
async fn a_rerun_on_a_branch_named_like_the_default_is_a_baseline_only_on_it(store: Store) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let base = fake.commit(REPO, None, &[(NS_FILE, NAMESPACE)]);
    fake.set_branch(REPO, "main", &base);
    let head = fake.commit(
        REPO,
        Some(&base),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, BAD_SERVICE_ENTRY)],
    );
    fake.open_pull_from(REPO, "mallory/gitops", 9, &base, &head);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, metrics) = app_worker(&fake, &store, &clock);
    let app = router(app_state(store.clone(), metrics, clock.clone()));
    let rerun = |sha: &str, delivery: &str| {
        let mut suite = payload("check_suite.rerequested");
        suite["check_suite"]["head_sha"] = sha.into();
        suite["check_suite"]["head_branch"] = "main".into();
        suite["check_suite"]["pull_requests"] = serde_json::json!([]);
        webhook_request(
            "check_suite",
            delivery,
            &serde_json::to_vec(&suite).unwrap(),
            Some(SECRET),
        )
    };

    let (status, text) = send(&app, rerun(&head, "fork-main-1")).await;
    assert_eq!(status, 202, "{text}");
    succeeded(&run_one(&w).await.1);
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].kind, runs[0].pr_number), (JobKind::Check, Some(9)));
    let repo = fake.repo(REPO);
    assert_eq!(repo.check_runs.len(), 1);
    assert_eq!(
        repo.issue_comments.values().next().map(|c| c.number),
        Some(9)
    );

    let (status, text) = send(&app, rerun(&base, "main-1")).await;
    assert_eq!(status, 202, "{text}");
    succeeded(&run_one(&w).await.1);
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    let baseline: Vec<_> = runs
        .iter()
        .filter(|r| r.kind == JobKind::Baseline)
        .collect();
    assert_eq!(baseline.len(), 1, "{runs:?}");
    assert_eq!(baseline[0].head_sha, base);
    let repo = fake.repo(REPO);
    assert_eq!(repo.check_runs.len(), 1, "a baseline posts nothing");
    assert_eq!(repo.issue_comments.len(), 1);
}

/// A finding fixed by one push and brought back by the next gets a new inline
/// comment (its old thread stays answered and resolved), and the new comment is
/// answered in turn when the finding goes again.
async fn a_finding_that_comes_back_gets_a_new_inline_comment(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    let fixed_entry = BAD_SERVICE_ENTRY.replace("resolution: NONE", "resolution: STATIC");
    let mut sha = head.clone();
    let mut push = |bad: bool| {
        let entry = if bad { BAD_SERVICE_ENTRY } else { &fixed_entry };
        sha = fake.commit(REPO, Some(&sha), &[(NS_FILE, NAMESPACE), (PAYMENTS, entry)]);
        fake.push_pull(REPO, PR, &sha);
        sha.clone()
    };
    let fixed = push(false);
    let back = push(true);
    let fixed_again = push(false);
    let run = |sha: String| {
        let store = store.clone();
        let w = w.clone();
        let base = base.clone();
        let fake = &fake;
        async move {
            fake.push_pull(REPO, PR, &sha);
            store
                .enqueue(&check_job(PR, &base, &sha), 3, 0)
                .await
                .unwrap();
            succeeded(&run_one(&w).await.1);
        }
    };

    run(head.clone()).await;
    let first = fake.repo(REPO).inline_comments()[0].id;
    run(fixed).await;
    assert!(fake.repo(REPO).resolved_threads.contains(&first));

    run(back.clone()).await;
    let repo = fake.repo(REPO);
    let inline = repo.inline_comments();
    assert_eq!(
        inline.len(),
        2,
        "a new comment for the finding that came back"
    );
    let second = inline.iter().find(|c| c.id != first).unwrap();
    assert_eq!(second.commit_id, back);
    assert!(second.body.contains("`serviceentry/none-with-endpoints`"));
    assert!(!repo.resolved_threads.contains(&second.id));
    assert_eq!(repo.reviews.len(), 2);
    assert_eq!(
        repo.replies_to(first).len(),
        1,
        "the old thread is left as it was"
    );
    let recorded = store.review_comments(REPO_ID, PR).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        (recorded[0].comment_id, recorded[0].resolved_at_ms),
        (second.id, None)
    );
    let second = second.id;

    run(fixed_again).await;
    let repo = fake.repo(REPO);
    assert!(repo.resolved_threads.contains(&second));
    assert_eq!(repo.replies_to(second).len(), 1);
    assert_eq!(repo.replies_to(first).len(), 1);
    assert_eq!(repo.inline_comments().len(), 2);
}

/// A server error whose `Retry-After` is longer than the client waits: not retried
/// in place; the job is tried again no earlier than GitHub asked, and posts once.
async fn a_server_error_retry_after_is_honoured(store: Store) {
    let fake = job_retried_when_github_says(store, 503, "Service Unavailable").await;
    assert_eq!(
        fake.calls().iter().filter(|c| c.status == 503).count(),
        1,
        "not retried in place before the time GitHub asked for"
    );
}

/// GitHub refuses the review as invalid (422: the line left the diff in a race):
/// the job still succeeds, the check run and the summary stand, the summary says
/// why nothing is inline, and the reason is recorded.
async fn a_refused_review_leaves_the_findings_in_the_summary(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/pulls/7/reviews".into(),
        method: Some("POST".into()),
        status: 422,
        message: "Pull request review thread line must be part of the diff".into(),
        times: 1,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    let id = store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let (job, processed) = run_one(&w).await;
    succeeded(&processed);
    assert_eq!(job.attempts, 1);
    let repo = fake.repo(REPO);
    let check = repo.check_runs.values().next().unwrap();
    assert_eq!(check.conclusion.as_deref(), Some("failure"));
    assert_eq!(check.annotations.len(), 1);
    assert!(repo.reviews.is_empty() && repo.inline_comments().is_empty());
    assert_eq!(repo.issue_comments.len(), 1);
    let body = &repo.issue_comments.values().next().unwrap().body;
    let link = format!(
        "/{REPO}/blob/{head}/{PAYMENTS}#L{}",
        line_of(BAD_SERVICE_ENTRY, "resolution: NONE")
    );
    assert!(body.contains(&link), "{body}");
    assert!(
        body.contains("Inline comments were not posted")
            && body.contains("must be part of the diff"),
        "{body}"
    );
    assert!(body.starts_with("<!-- meshward:summary -->"));
    let publication = store.publication(id).await.unwrap().unwrap();
    assert_eq!(publication.state, "published");
    let note = publication.error.unwrap_or_default();
    assert!(note.contains("422") && note.contains("summary"), "{note}");
    assert!(store.review_comments(REPO_ID, PR).await.unwrap().is_empty());
}

/// The tarball answers 404 after the check run started: the job fails for good, and
/// one last call completes the check run as failed with the reason; nothing more.
async fn a_job_failing_after_its_check_run_started_completes_it_once(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.inject(Fault {
        path_contains: "/tarball/".into(),
        status: 404,
        message: "Not Found".into(),
        times: 1_000,
        ..Fault::default()
    });
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    let id = store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let (_, processed) = run_one(&w).await;
    let Processed::Failed { error } = processed else {
        panic!("{processed:?}");
    };
    assert!(
        error.contains("404") && error.contains("will not retry"),
        "{error}"
    );
    let repo = fake.repo(REPO);
    let check = repo.check_runs.values().next().unwrap();
    assert_eq!(
        (check.status.as_str(), check.conclusion.as_deref()),
        ("completed", Some("failure"))
    );
    assert_eq!(
        check.title.as_deref(),
        Some("meshward could not check this change")
    );
    let summary = check.summary.as_deref().unwrap();
    assert!(
        summary.contains("404") && summary.contains("re-run the check once that is fixed"),
        "{summary}"
    );
    let calls = fake.calls();
    let patches: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "PATCH" && c.path.contains("/check-runs/"))
        .collect();
    assert_eq!(patches.len(), 1);
    // (A download dropped when the other failed may be logged late.)
    let last = calls
        .iter()
        .rfind(|c| !c.path.contains("/tarball/"))
        .unwrap();
    assert_eq!(
        (last.method.as_str(), last.status),
        ("PATCH", 200),
        "{calls:?}"
    );
    let publication = store.publication(id).await.unwrap().unwrap();
    assert_eq!(
        (
            publication.state.as_str(),
            publication.check_state.as_deref()
        ),
        ("failed", Some("completed"))
    );
    assert_eq!(publication.error.as_deref(), Some(error.as_str()));
    clock.advance(Duration::from_secs(24 * 3600));
    assert!(w.run_until_idle().await.unwrap().is_empty());
    assert_eq!(fake.calls().len(), calls.len());
}

/// The same, but GitHub refuses the last call too: it is made once, and that is all.
async fn the_last_call_of_a_refused_job_is_made_once(store: Store) {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    for (path, method, status) in [("/tarball/", "GET", 404), ("/check-runs/", "PATCH", 403)] {
        fake.inject(Fault {
            path_contains: path.into(),
            method: Some(method.into()),
            status,
            message: "Resource not accessible by integration".into(),
            times: 1_000,
            ..Fault::default()
        });
    }
    let store = migrated(store).await;
    let clock = Clock::manual(0);
    let (w, _) = app_worker(&fake, &store, &clock);
    let id = store
        .enqueue(&check_job(PR, &base, &head), 3, 0)
        .await
        .unwrap()
        .id();
    let (_, processed) = run_one(&w).await;
    assert!(
        matches!(processed, Processed::Failed { .. }),
        "{processed:?}"
    );
    let calls = fake.calls();
    let patches: Vec<_> = calls.iter().filter(|c| c.method == "PATCH").collect();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].status, 403);
    assert_eq!(
        calls.iter().rfind(|c| !c.path.contains("/tarball/")),
        Some(patches[0])
    );
    assert_eq!(
        store.publication(id).await.unwrap().unwrap().state,
        "failed"
    );
    clock.advance(Duration::from_secs(24 * 3600));
    assert!(w.run_until_idle().await.unwrap().is_empty());
    assert_eq!(fake.calls().len(), calls.len());
}

/// "Re-run all checks" on a pull request whose finding stands: a second check run
/// on the same commit fails again, and the pull request keeps one summary comment
/// (edited) and one inline comment: nothing is posted twice.
async fn a_rerun_of_a_pull_request_checks_it_again_and_posts_nothing_twice(store: Store) {
    let svc = Service::start(store).await;
    let base = svc.commit(None, &[(NS_FILE, NAMESPACE)]);
    let head = svc.commit(
        Some(&base),
        &[(NS_FILE, NAMESPACE), (PAYMENTS, BAD_SERVICE_ENTRY)],
    );
    svc.open_pr(PR, &base, &head).await;
    svc.process_one().await;
    let first = svc.summary();
    svc.expect_comment("❌ **meshward: 1 blocking finding**");

    svc.rerun(PR).await;
    svc.process_one().await;
    let runs = svc.check_runs_at(&head);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs
        .iter()
        .all(|r| r.conclusion.as_deref() == Some("failure")));
    let again = svc.summary();
    assert_eq!(again.id, first.id);
    svc.expect_comment("❌ **meshward: 1 blocking finding**");
    assert_eq!(svc.repo().inline_comments().len(), 1);
}

contract!(
    a_finding_fails_the_check_and_a_fix_passes_it_in_the_same_summary,
    on_enterprise_server_the_story_is_the_same,
    review_threads_are_resolved_past_the_first_page,
    annotations_go_fifty_to_a_request,
    a_report_over_the_limits_is_cut_with_a_note,
    server_errors_and_rate_limits_are_retried_and_posted_once,
    a_refusal_fails_the_job_with_the_reason_and_no_further_calls,
    a_long_rate_limit_retries_the_job_when_github_says,
    a_failed_publish_keeps_the_run_and_is_retried,
    reruns_after_a_restart_post_nothing_twice,
    with_a_token_the_check_is_a_commit_status,
    a_fork_is_checked_with_the_base_repository_installation_and_config,
    inline_comments_can_be_switched_off,
    a_change_with_nothing_to_check_is_neutral_and_quiet,
    a_job_that_cannot_check_ends_its_check_run_with_the_reason,
    a_run_for_an_older_commit_leaves_the_summary_alone,
    a_rerun_of_a_fork_pull_request_is_checked_and_published,
    a_rerun_of_a_commit_without_a_pull_request_posts_nothing,
    a_rerun_on_a_branch_named_like_the_default_is_a_baseline_only_on_it,
    a_finding_that_comes_back_gets_a_new_inline_comment,
    a_server_error_retry_after_is_honoured,
    a_refused_review_leaves_the_findings_in_the_summary,
    a_job_failing_after_its_check_run_started_completes_it_once,
    the_last_call_of_a_refused_job_is_made_once,
    a_rerun_of_a_pull_request_checks_it_again_and_posts_nothing_twice,
);
