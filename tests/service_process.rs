//! The real `meshward serve` binary: on the embedded SQLite store from a webhook to a
//! stored run and a clean stop on SIGTERM; and two server processes sharing one
//! PostgreSQL queue of 200 jobs, each job run exactly once.

use crate::service_support;

use meshward::store::*;
use service_support::*;
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    /// Starts `meshward serve` on a free port with `env`; waits for it to listen.
    fn start(env: &[(&str, String)], log: &Path) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_meshward"));
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .env_remove("DATABASE_URL")
            .env_remove("MESHWARD_GITHUB_TOKEN")
            .env_remove("MESHWARD_GITHUB_APP_ID")
            .env("MESHWARD_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).expect("log file"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn meshward serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "meshward serve did not start:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
        };
        Server { child, addr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM and waits (bounded) for a clean exit.
    async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        let child = &mut self.child;
        eventually(Duration::from_secs(60), "meshward serve to exit", || {
            let status = child.try_wait().expect("wait");
            async move { status }
        })
        .await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_the_embedded_store_checks_a_pull_request_and_stops_on_sigterm() {
    let fake = FakeGitHub::start().await;
    let (base, head) = gitops_repo(&fake);
    fake.add_personal_token(TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(
        &[
            ("MESHWARD_DATA_DIR", data.display().to_string()),
            ("MESHWARD_WEBHOOK_SECRET", format!("{SECRET},next")),
            ("MESHWARD_GITHUB_TOKEN", TOKEN.to_string()),
            ("MESHWARD_GITHUB_API_URL", fake.url()),
            ("MESHWARD_POLL_MS", "100".to_string()),
        ],
        &dir.path().join("serve.log"),
    );
    let http = reqwest::Client::new();
    let get = |path: &str| {
        let req = http.get(server.url(path));
        async move { req.send().await.expect("GET") }
    };
    assert_eq!(get("/healthz").await.status(), 200);
    assert_eq!(get("/readyz").await.status(), 200);

    let body = serde_json::to_vec(&pr_event("opened", 7, &base, &head)).unwrap();
    let post = |signature: String| {
        http.post(server.url("/webhooks/github"))
            .header("content-type", "application/json")
            .header("x-github-event", "pull_request")
            .header("x-github-delivery", "delivery-1")
            .header("x-hub-signature-256", signature)
            .body(body.clone())
            .send()
    };
    let bad = post(meshward::github::webhook::sign("wrong", &body))
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    let ok = post(meshward::github::webhook::sign(SECRET, &body))
        .await
        .unwrap();
    assert_eq!(ok.status(), 202);

    // The run lands in the SQLite file under the data folder; the job succeeds once
    // the run is published on the pull request too.
    let store = Store::open_sqlite(&data.join("meshward.db")).await.unwrap();
    eventually(Duration::from_secs(120), "the job to succeed", || {
        let store = store.clone();
        async move {
            let jobs = store.jobs().await.ok()?;
            (jobs.first()?.state == JobState::Succeeded).then_some(())
        }
    })
    .await;
    let run = store.runs(&RunFilter::default()).await.unwrap().remove(0);
    // Token mode: a commit status, and the summary comment.
    let repo = fake.repo(REPO);
    let states: Vec<&str> = repo.statuses.iter().map(|s| s.state.as_str()).collect();
    assert_eq!(states, ["pending", "failure"]);
    assert_eq!(repo.issue_comments.len(), 1);
    assert_eq!(run.outcome, RunOutcome::Fail);
    let rules: Vec<String> = store
        .findings(run.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.status == "introduced")
        .map(|f| f.rule)
        .collect();
    assert_eq!(rules, ["serviceentry/none-with-endpoints"]);

    let metrics = get("/metrics").await.text().await.unwrap();
    for needle in [
        r#"meshward_webhook_deliveries_total{event="pull_request",outcome="enqueued"} 1"#,
        r#"meshward_webhook_deliveries_total{event="pull_request",outcome="unauthorized"} 1"#,
        r#"meshward_jobs{state="succeeded"} 1"#,
        r#"meshward_check_results_total{kind="check",outcome="fail"} 1"#,
        "meshward_job_duration_seconds_bucket",
        r#"meshward_github_api_calls_total{status="200"}"#,
    ] {
        assert!(metrics.contains(needle), "{needle} not in\n{metrics}");
    }
    store.close().await;
    let status = server.stop().await;
    assert!(status.success(), "exit status {status:?}");
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(!log.contains(TOKEN), "the token must never be logged");
    assert!(
        !log.contains(SECRET),
        "the webhook secret must never be logged"
    );
}

#[test]
fn migrate_prepares_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_meshward"))
        .arg("migrate")
        .env_remove("DATABASE_URL")
        .env("MESHWARD_DATA_DIR", dir.path().join("data"))
        .output()
        .expect("meshward migrate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let latest = Store::latest_migration(Backend::Sqlite);
    assert!(latest >= 2, "publishing's migration is there");
    assert!(
        text.contains(&format!("database migrated to version {latest}")),
        "{text}"
    );
    assert!(dir.path().join("data/meshward.db").is_file());
    let bad = Command::new(env!("CARGO_BIN_EXE_meshward"))
        .arg("migrate")
        .env("DATABASE_URL", "mysql://nope")
        .output()
        .expect("meshward migrate");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("DATABASE_URL must start with"));
}

/// The URL of the per-test database `#[sqlx::test]` made, for child processes.
fn database_url(connect: &sqlx::postgres::PgConnectOptions) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let db = connect.get_database().expect("test database name");
    let (without_query, query) = match base.split_once('?') {
        Some((u, q)) => (u.to_string(), format!("?{q}")),
        None => (base.clone(), String::new()),
    };
    let scheme_end = without_query.find("://").map_or(0, |i| i + 3);
    let root = match without_query[scheme_end..].find('/') {
        Some(i) => without_query[..scheme_end + i].to_string(),
        None => without_query.clone(),
    };
    format!("{root}/{db}{query}")
}

#[sqlx::test(migrations = false)]
async fn two_server_processes_share_200_jobs_and_run_each_once(
    pool_opts: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    const JOBS: usize = 200;
    let pool = pool_opts.connect_with(connect.clone()).await.unwrap();
    let store = Store::from_pg(pool);
    store.migrate().await.unwrap();
    let fake = FakeGitHub::start().await;
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    fake.add_personal_token(TOKEN);
    for i in 0..JOBS {
        let sha = fake.commit(
            REPO,
            None,
            &[
                ("ns.yaml", NAMESPACE),
                (&format!("notes/{i}.txt"), "not checked"),
            ],
        );
        let job = NewJob {
            kind: JobKind::Baseline,
            repo_id: REPO_ID,
            repo: REPO.to_string(),
            installation_id: None,
            pr_number: None,
            head_sha: sha,
            base_sha: None,
            base_ref: Some("main".into()),
            delivery_id: None,
        };
        store.enqueue(&job, 3, 0).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let env = vec![
        ("DATABASE_URL", database_url(&connect)),
        ("MESHWARD_WEBHOOK_SECRET", SECRET.to_string()),
        ("MESHWARD_GITHUB_TOKEN", TOKEN.to_string()),
        ("MESHWARD_GITHUB_API_URL", fake.url()),
        ("MESHWARD_WORKERS", "2".to_string()),
        ("MESHWARD_POLL_MS", "20".to_string()),
        // Short leases: a slow job keeps its lease by heartbeat, never by luck.
        ("MESHWARD_JOB_LEASE_SECS", "3".to_string()),
    ];
    let a = Server::start(&env, &dir.path().join("a.log"));
    let b = Server::start(&env, &dir.path().join("b.log"));
    let pids = [a.child.id(), b.child.id()];

    eventually(Duration::from_secs(600), "all jobs to finish", || {
        let store = store.clone();
        async move {
            let counts = store.job_counts().await.ok()?;
            let done: i64 = counts
                .iter()
                .filter(|(s, _)| matches!(s, JobState::Succeeded | JobState::Failed))
                .map(|(_, n)| n)
                .sum();
            (done == JOBS as i64).then_some(())
        }
    })
    .await;
    assert!(a.stop().await.success());
    assert!(b.stop().await.success());

    let jobs = store.jobs().await.unwrap();
    assert_eq!(jobs.len(), JOBS);
    for j in &jobs {
        assert_eq!(j.state, JobState::Succeeded, "{j:?}");
        assert_eq!(j.attempts, 1, "job {} ran more than once: {j:?}", j.id);
    }
    let runs = store.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), JOBS);
    let run_jobs: HashSet<Option<i64>> = runs.iter().map(|r| r.job_id).collect();
    assert_eq!(run_jobs.len(), JOBS, "one run per job");
    // Both processes took part.
    let mut per_process: HashMap<u32, usize> = HashMap::new();
    for j in &jobs {
        let name = j.locked_by.as_deref().unwrap_or_default();
        for pid in pids {
            if name.contains(&format!("-{pid}-")) {
                *per_process.entry(pid).or_default() += 1;
            }
        }
    }
    assert_eq!(per_process.values().sum::<usize>(), JOBS, "{per_process:?}");
    assert!(
        pids.iter()
            .all(|p| per_process.get(p).copied().unwrap_or(0) > 0),
        "both servers worked: {per_process:?}"
    );
}
