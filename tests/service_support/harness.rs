//! The service as a user meets it, in verbs: open a pull request, push to it, ask
//! for a re-run, let the workers run, read what landed on the pull request. Each
//! verb sends the signed webhook GitHub would send through the real router into the
//! store's queue; the workers then run against the fake GitHub.

use super::fake_github::{CheckRun, IssueComment, Repo};
use super::*;
use meshward::jobs::Processed;
use meshward::server::router;
use meshward::store::{Job, JobKind, NewJob};
use std::sync::atomic::{AtomicU64, Ordering};

/// A check job for `REPO`, as a `pull_request` delivery queues it.
pub fn check_job(pr: i64, base: &str, head: &str) -> NewJob {
    NewJob {
        kind: JobKind::Check,
        repo_id: REPO_ID,
        repo: REPO.to_string(),
        installation_id: Some(INSTALLATION),
        pr_number: Some(pr),
        head_sha: head.to_string(),
        base_sha: Some(base.to_string()),
        base_ref: Some("main".to_string()),
        delivery_id: None,
    }
}

/// meshward in front of a fake GitHub that holds `REPO`: the webhook router, a
/// migrated store, and a worker that talks to the fake as the App.
pub struct Service {
    pub fake: FakeGitHub,
    pub store: Store,
    pub app: axum::Router,
    pub worker: Worker,
    pub metrics: Metrics,
    pub clock: Clock,
    deliveries: AtomicU64,
}

impl Service {
    /// A fresh fake GitHub with `REPO` installed, and the service on `store`.
    pub async fn start(store: Store) -> Service {
        let fake = FakeGitHub::start().await;
        fake.add_repo(REPO, REPO_ID, INSTALLATION);
        Service::on(fake, store).await
    }

    /// The service in front of a fake the test has set up.
    pub async fn on(fake: FakeGitHub, store: Store) -> Service {
        let store = migrated(store).await;
        let clock = Clock::manual(0);
        let metrics = Metrics::new();
        let worker = worker(&store, Some(app_github(&fake, &metrics)), &metrics, &clock);
        let app = router(app_state(store.clone(), metrics.clone(), clock.clone()));
        Service {
            fake,
            store,
            app,
            worker,
            metrics,
            clock,
            deliveries: AtomicU64::new(0),
        }
    }

    /// A commit of `REPO` holding exactly `files`.
    pub fn commit(&self, parent: Option<&str>, files: &[(&str, &str)]) -> String {
        self.fake.commit(REPO, parent, files)
    }

    /// Sends a signed delivery of `event` through the router; the HTTP status.
    pub async fn deliver(&self, event: &str, body: &Value) -> u16 {
        let n = self.deliveries.fetch_add(1, Ordering::Relaxed);
        let body = serde_json::to_vec(body).expect("json");
        let req = webhook_request(event, &format!("delivery-{n}"), &body, Some(SECRET));
        send(&self.app, req).await.0
    }

    /// Opens pull request `number` from `head` onto `base`, as GitHub announces it.
    pub async fn open_pr(&self, number: i64, base: &str, head: &str) {
        self.fake.open_pull(REPO, number, base, head);
        let status = self
            .deliver("pull_request", &pr_event("opened", number, base, head))
            .await;
        assert_eq!(status, 202, "opening PR #{number}");
    }

    /// Pushes `head` to pull request `number`.
    pub async fn push(&self, number: i64, head: &str) {
        self.fake.push_pull(REPO, number, head);
        let base = self.fake.repo(REPO).pulls[&number].base_sha.clone();
        let status = self
            .deliver(
                "pull_request",
                &pr_event("synchronize", number, &base, head),
            )
            .await;
        assert_eq!(status, 202, "pushing to PR #{number}");
    }

    /// Asks for the checks of pull request `number` again ("Re-run all checks").
    pub async fn rerun(&self, number: i64) {
        let pull = self.fake.repo(REPO).pulls[&number].clone();
        let mut body = payload("check_suite.rerequested");
        body["check_suite"]["head_sha"] = pull.head_sha.clone().into();
        body["check_suite"]["pull_requests"] = serde_json::json!([{
            "number": number,
            "head": {"ref": "change", "sha": pull.head_sha, "repo": {"id": REPO_ID, "name": "gitops"}},
            "base": {"ref": pull.base_ref, "sha": pull.base_sha, "repo": {"id": REPO_ID, "name": "gitops"}},
        }]);
        let status = self.deliver("check_suite", &body).await;
        assert_eq!(status, 202, "re-running PR #{number}");
    }

    /// Runs the workers until the queue is empty; every job they took.
    pub async fn process(&self) -> Vec<(Job, Processed)> {
        self.worker.run_until_idle().await.expect("worker")
    }

    /// Runs the one queued job, which must succeed; its run id.
    pub async fn process_one(&self) -> i64 {
        let mut done = self.process().await;
        assert_eq!(done.len(), 1, "{done:?}");
        match done.remove(0).1 {
            Processed::Succeeded { run_id } => run_id,
            other => panic!("job did not succeed: {other:?}"),
        }
    }

    /// What the fake holds of `REPO` now.
    pub fn repo(&self) -> Repo {
        self.fake.repo(REPO)
    }

    /// The one summary comment on the pull request, which must exist.
    pub fn summary(&self) -> IssueComment {
        let repo = self.repo();
        let summaries: Vec<&IssueComment> = repo
            .issue_comments
            .values()
            .filter(|c| c.body.starts_with("<!-- meshward:summary -->"))
            .collect();
        assert_eq!(summaries.len(), 1, "one summary comment");
        summaries[0].clone()
    }

    /// The summary comment says `text`.
    pub fn expect_comment(&self, text: &str) {
        let body = self.summary().body;
        assert!(body.contains(text), "{text:?} not in the summary:\n{body}");
    }

    /// The check runs on commit `sha`.
    pub fn check_runs_at(&self, sha: &str) -> Vec<CheckRun> {
        self.repo()
            .check_runs
            .values()
            .filter(|c| c.head_sha == sha)
            .cloned()
            .collect()
    }

    /// The conclusion of the one completed check run on `sha`.
    pub fn conclusion_at(&self, sha: &str) -> String {
        let runs = self.check_runs_at(sha);
        assert_eq!(runs.len(), 1, "one check run on {sha}: {runs:?}");
        runs[0].conclusion.clone().expect("a completed check run")
    }
}
