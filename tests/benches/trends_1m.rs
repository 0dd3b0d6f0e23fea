//! Benchmark: trend queries over a large history. Seeds 1,000,000 runs across 500
//! repositories (a year of history, each repository alternating baseline and PR run;
//! every run with coverage, baselines with 5 namespaces) with SQL (`generate_series` on PostgreSQL,
//! a recursive CTE on SQLite), then times, over many runs each, the median and p95 of:
//! a 90-day daily series of one repository (store query + series), the same for one
//! namespace, the first page of a repository's runs, the latest coverage of all 500
//! repositories (what `/metrics` and `/` read), and the coverage API end to end;
//! then the coverage API's p50 and p99 while retention deletes the PR runs of the
//! first 80% of the year (400,000 runs of 1,000,000), against the same idle.
//!
//! `cargo bench --bench trends_1m` runs it on PostgreSQL (DATABASE_URL; a database
//! `meshward_bench_trends` is created and dropped) and on SQLite (a temp file).
//! Under `cargo test` it runs once on 5,000 runs on SQLite as a smoke test.

use meshward::clock::Clock;
use meshward::metrics::Metrics;
use meshward::server::{self, ApiConfig, AppState};
use meshward::store::{RunsPageQuery, Store};
use meshward::trends::{self, Interval, Range, Scope};
use std::sync::Arc;
use std::time::{Duration, Instant};

const REPOS: i64 = 500;
/// 2026-11-30T00:00:00Z: the history ends here.
const END_MS: i64 = 1_795_996_800_000;
const YEAR_MS: i64 = 365 * 86_400_000;
const TOKEN: &str = "bench-token-0123456789abcdef";

/// The seed, for a series expression `{i}` over 0..n and a 40-hex-digit `{sha}`.
fn seed_sql(n: i64, series: &str, sha: &str, prefix: &str) -> Vec<String> {
    let per_repo = n / REPOS;
    let step = YEAR_MS / per_repo.max(1);
    let start = END_MS - YEAR_MS;
    let sha_i = sha.replace("{x}", "i");
    let base_sha = sha.replace("{x}", "(i + 7)");
    vec![
        format!(
            "{prefix} INSERT INTO repos (github_id, full_name, installation_id, default_branch, installed, updated_at_ms) \
             SELECT i + 1, 'org-' || ((i + 1) % 50) || '/repo-' || (i + 1), 1, 'main', TRUE, 0 FROM {}",
            series.replace("{n}", &REPOS.to_string())
        ),
        format!(
            "{prefix} INSERT INTO runs (kind, repo_id, repo, pr_number, head_sha, base_sha, started_at_ms, finished_at_ms, \
                 outcome, error, blocking, introduced, existing, resolved, errors, warnings, infos, suppressed) \
             SELECT CASE WHEN (i / {REPOS}) % 2 = 0 THEN 'baseline' ELSE 'check' END, \
                    1 + i % {REPOS}, 'org-' || ((1 + i % {REPOS}) % 50) || '/repo-' || (1 + i % {REPOS}), \
                    CASE WHEN (i / {REPOS}) % 2 = 0 THEN NULL ELSE 1 + (i / 1000) % 300 END, \
                    {sha_i}, CASE WHEN (i / {REPOS}) % 2 = 0 THEN NULL ELSE {base_sha} END, \
                    {start} + (i / {REPOS}) * CAST({step} AS BIGINT) - 60000, {start} + (i / {REPOS}) * CAST({step} AS BIGINT), \
                    CASE WHEN i % 97 = 0 THEN 'error' WHEN i % 3 = 0 THEN 'fail' ELSE 'pass' END, \
                    CASE WHEN i % 97 = 0 THEN 'render failed' ELSE NULL END, \
                    i % 3, i % 2, 4 + i % 5, i % 2, i % 4, 3 + i % 3, 2, 0 \
             FROM {}",
            series.replace("{n}", &n.to_string())
        ),
        "INSERT INTO coverage_totals (run_id, revision, namespaces, namespaces_strict, namespaces_injected, \
             workloads, workloads_with_proxy, selectors_effective, selectors_ineffective, \
             workload_entries_selected, workload_entries_total, namespaces_permissive, namespaces_disable) \
         SELECT id, 'head', 5, (id / 5000) % 6, 4, 100, 60 + (id / 2000) % 40, 30, id % 5, 4, 6, \
                5 - (id / 5000) % 6, 0 \
         FROM runs WHERE outcome <> 'error'"
            .to_string(),
        "INSERT INTO coverage_totals (run_id, revision, namespaces, namespaces_strict, namespaces_injected, \
             workloads, workloads_with_proxy, selectors_effective, selectors_ineffective, \
             workload_entries_selected, workload_entries_total, namespaces_permissive, namespaces_disable) \
         SELECT id, 'base', 5, (id / 5000) % 6, 4, 100, 59 + (id / 2000) % 40, 30, id % 5, 4, 6, \
                5 - (id / 5000) % 6, 0 \
         FROM runs WHERE kind = 'check' AND outcome <> 'error'"
            .to_string(),
        "INSERT INTO coverage_namespaces (run_id, revision, namespace, mtls_mode, workloads, workloads_with_proxy, \
             selectors_effective, selectors_ineffective, workload_entries_selected, workload_entries_total) \
         SELECT r.id, 'head', 'team-' || k.column1, CASE WHEN k.column1 < 2 THEN 'STRICT' ELSE 'PERMISSIVE' END, \
                20, 12 + (r.id / 2000 + k.column1) % 8, 6, r.id % 2, 1, 1 \
         FROM runs r CROSS JOIN (VALUES (0), (1), (2), (3), (4)) AS k \
         WHERE r.kind = 'baseline' AND r.outcome <> 'error'"
            .to_string(),
        "INSERT INTO namespace_findings (run_id, namespace, errors, warnings, infos, introduced, existing, resolved) \
         SELECT r.id, 'team-' || k.column1, r.id % 3, 1, 0, 0, 1 + r.id % 3, 0 \
         FROM runs r CROSS JOIN (VALUES (0), (1)) AS k \
         WHERE r.kind = 'baseline' AND r.outcome <> 'error'"
            .to_string(),
    ]
}

async fn seed(store: &Store, n: i64) -> Duration {
    let t = Instant::now();
    let statements = match store.backend() {
        meshward::store::Backend::Postgres => seed_sql(
            n,
            "generate_series(0, {n} - 1) AS s(i)",
            "lpad(to_hex({x}), 40, '0')",
            "",
        ),
        meshward::store::Backend::Sqlite => seed_sql(
            n,
            "s",
            "printf('%040x', {x})",
            "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < {n})",
        )
        .into_iter()
        .map(|sql| {
            // The CTE's bound: the repos statement counts to REPOS, runs to n.
            if sql.contains("INSERT INTO repos") {
                sql.replace("{n}", &REPOS.to_string())
            } else {
                sql.replace("{n}", &n.to_string())
            }
        })
        .collect(),
    };
    for sql in statements {
        store.execute_script(&sql).await.expect("seed");
    }
    store
        .execute_script(match store.backend() {
            meshward::store::Backend::Postgres => "ANALYZE",
            meshward::store::Backend::Sqlite => "ANALYZE",
        })
        .await
        .expect("analyze");
    t.elapsed()
}

struct Stats {
    median: Duration,
    p95: Duration,
    p99: Duration,
}

fn stats(mut times: Vec<Duration>) -> Stats {
    times.sort();
    let at = |pct: usize| times[(times.len() * pct / 100).min(times.len() - 1)];
    Stats {
        median: times[times.len() / 2],
        p95: at(95),
        p99: at(99),
    }
}

async fn time<F, Fut>(iterations: usize, mut f: F) -> Stats
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..iterations.min(5) {
        f().await; // warm-up: caches, prepared statements
    }
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        f().await;
        times.push(t.elapsed());
    }
    stats(times)
}

/// `GET /api/v1/repos/org-0/repo-250/coverage?from=90d&interval=day`, answered in full.
async fn coverage_request(app: axum::Router) {
    use tower::ServiceExt;
    let req = http::Request::get("/api/v1/repos/org-0/repo-250/coverage?from=90d&interval=day")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(axum::body::Body::empty())
        .expect("request");
    let resp = app.oneshot(req).await.expect("response");
    assert_eq!(resp.status(), 200);
    axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn measure(label: &str, store: Store, n: i64, iterations: usize) {
    store.migrate().await.expect("migrate");
    let seeded = seed(&store, n).await;
    let repo = "org-0/repo-250";
    let range = Range::new(Some("90d"), None, Interval::Day, END_MS).expect("range");
    let series = trends::load_series(&store, repo, Scope::default(), &range)
        .await
        .expect("series");
    assert_eq!(series.points.len(), 90);
    let with_data = series.points.len() - series.gaps();
    if n >= 100_000 {
        assert!(
            with_data > 80,
            "the seeded repo has baselines most days: {with_data}"
        );
    }

    let s = store.clone();
    let daily = time(iterations, || {
        let s = s.clone();
        async move {
            trends::load_series(&s, repo, Scope::default(), &range)
                .await
                .expect("series");
        }
    })
    .await;
    let s = store.clone();
    let ns = time(iterations, || {
        let s = s.clone();
        async move {
            let scope = Scope {
                namespace: Some("team-3"),
                ..Scope::default()
            };
            trends::load_series(&s, repo, scope, &range)
                .await
                .expect("series");
        }
    })
    .await;
    let s = store.clone();
    let page = time(iterations, || {
        let s = s.clone();
        async move {
            s.runs_page(&RunsPageQuery {
                repo_id: 250,
                limit: 20,
                ..Default::default()
            })
            .await
            .expect("runs");
        }
    })
    .await;
    let s = store.clone();
    let overview = time(iterations.min(20), || {
        let s = s.clone();
        async move {
            assert_eq!(
                s.repo_overview().await.expect("overview").len() as i64,
                REPOS
            );
        }
    })
    .await;
    let state = AppState {
        store: store.clone(),
        secrets: meshward::github::WebhookSecrets::parse(&secrecy::SecretString::from(
            "x".to_string(),
        )),
        app: meshward::github::AppIdentity {
            id: None,
            slug: None,
        },
        metrics: Metrics::new(),
        wake: Arc::new(tokio::sync::Notify::new()),
        clock: Clock::manual(END_MS),
        max_attempts: 3,
        max_body_bytes: 1024,
        api: ApiConfig {
            tokens: server::auth::ApiTokens::parse(&secrecy::SecretString::from(TOKEN.to_string()))
                .expect("token"),
            ..Default::default()
        },
    };
    let app = server::router(state);
    let http = time(iterations, || coverage_request(app.clone())).await;

    // Retention at work: the PR runs of the first 80% of the year are deleted while
    // the API keeps answering; every request during the sweep is timed.
    let cutoff = END_MS - YEAR_MS / 5;
    let sweeping = store.clone();
    let started = Instant::now();
    let sweep = tokio::spawn(async move { sweeping.prune_check_runs(cutoff).await });
    let mut during = Vec::new();
    loop {
        let t = Instant::now();
        coverage_request(app.clone()).await;
        during.push(t.elapsed());
        if sweep.is_finished() {
            break;
        }
    }
    let deleted = sweep.await.expect("sweep task").expect("sweep");
    let swept_in = started.elapsed();
    assert!(deleted > 0, "the sweep deleted PR runs");
    let during_count = during.len();
    let during = stats(during);
    println!(
        "{label}: {n} runs / {REPOS} repos seeded in {:.1} s; median (p95) over {iterations} runs:",
        seeded.as_secs_f64()
    );
    println!(
        "| {label} | 90-day daily series | {} ({}) |",
        ms(daily.median),
        ms(daily.p95)
    );
    println!(
        "| {label} | same, one namespace | {} ({}) |",
        ms(ns.median),
        ms(ns.p95)
    );
    println!(
        "| {label} | GET .../coverage (HTTP handler, JSON) | {} ({}) |",
        ms(http.median),
        ms(http.p95)
    );
    println!(
        "| {label} | GET .../coverage while retention deletes {deleted} runs ({:.1} s, {} requests): p50 (p99) | {} ({}); idle {} ({}) |",
        swept_in.as_secs_f64(),
        during_count,
        ms(during.median),
        ms(during.p99),
        ms(http.median),
        ms(http.p99)
    );
    println!(
        "| {label} | runs, first page of 20 | {} ({}) |",
        ms(page.median),
        ms(page.p95)
    );
    println!(
        "| {label} | latest coverage of all {REPOS} repos | {} ({}) |",
        ms(overview.median),
        ms(overview.p95)
    );
    store.close().await;
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        if !bench {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = Store::open_sqlite(&dir.path().join("bench.db"))
                .await
                .expect("sqlite");
            measure("sqlite (smoke)", store, 5_000, 3).await;
            return;
        }
        let n: i64 = std::env::var("MESHWARD_BENCH_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        match std::env::var("DATABASE_URL") {
            Ok(url) if url.starts_with("postgres") => {
                let admin = sqlx::PgPool::connect(&url).await.expect("PostgreSQL");
                let name = "meshward_bench_trends";
                sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&admin)
                    .await
                    .expect("drop");
                sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
                    .execute(&admin)
                    .await
                    .expect("create");
                let db_url = match url.rsplit_once('/') {
                    Some((server, _)) => format!("{server}/{name}"),
                    None => panic!("DATABASE_URL without a database"),
                };
                let store = Store::connect(&db_url).await.expect("bench database");
                measure("postgres", store, n, 200).await;
                sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&admin)
                    .await
                    .expect("drop");
            }
            _ => eprintln!("DATABASE_URL is not a PostgreSQL URL: PostgreSQL skipped"),
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open_sqlite(&dir.path().join("bench.db"))
            .await
            .expect("sqlite");
        measure("sqlite", store, n, 200).await;
    });
}
