//! The service gathers zero-plaintext evidence for check jobs: a PR that turns a
//! namespace STRICT is checked against a real Prometheus (the fake GitHub serves the
//! commits), and the run stores the numbers and the queries. On both stores.

use crate::prometheus_support;
use crate::service_support;

use meshward::clock::Clock;
use meshward::evidence::prometheus::SourceSettings;
use meshward::evidence::PrometheusSource;
use meshward::jobs::Processed;
use meshward::metrics::Metrics;
use meshward::store::*;
use prometheus_support::*;
use service_support::*;
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    istio-injection: enabled
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cart
  namespace: shop
spec:
  selector:
    matchLabels:
      app: cart
  template:
    metadata:
      labels:
        app: cart
    spec:
      containers:
        - name: cart
          image: registry.example.com/shop/cart:1
";

fn mtls(mode: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: default
  namespace: shop
spec:
  mtls:
    mode: {mode}
"
    )
}

/// Base: PERMISSIVE, with `config` as .meshward.yaml; the PR turns shop STRICT.
fn strict_pr(fake: &FakeGitHub, config: &str) -> (String, String) {
    fake.add_repo(REPO, REPO_ID, INSTALLATION);
    let permissive = mtls("PERMISSIVE");
    let strict = mtls("STRICT");
    let base = fake.commit(
        REPO,
        None,
        &[
            (".meshward.yaml", config),
            ("shop/ns.yaml", NS),
            ("shop/mtls.yaml", &permissive),
        ],
    );
    let head = fake.commit(
        REPO,
        Some(&base),
        &[
            (".meshward.yaml", config),
            ("shop/ns.yaml", NS),
            ("shop/mtls.yaml", &strict),
        ],
    );
    fake.open_pull(REPO, 7, &base, &head);
    (base, head)
}

fn check_job(base: &str, head: &str) -> NewJob {
    NewJob {
        kind: JobKind::Check,
        repo_id: REPO_ID,
        repo: REPO.into(),
        installation_id: Some(INSTALLATION),
        pr_number: Some(7),
        head_sha: head.into(),
        base_sha: Some(base.into()),
        base_ref: Some("main".into()),
        delivery_id: None,
    }
}

fn server_source(default_url: Option<&str>) -> Arc<PrometheusSource> {
    Arc::new(PrometheusSource::new(SourceSettings {
        url: default_url.map(str::to_string),
        window: "1h".into(),
        timeout: Duration::from_secs(5),
        ..SourceSettings::default()
    }))
}

async fn run_one(store: &Store, fake: &FakeGitHub, source: Arc<PrometheusSource>) -> i64 {
    let metrics = Metrics::new();
    let clock = Clock::manual(1_000);
    let w = worker(store, Some(app_github(fake, &metrics)), &metrics, &clock).with_evidence(source);
    let done = w.run_until_idle().await.unwrap();
    assert_eq!(done.len(), 1);
    match &done[0].1 {
        Processed::Succeeded { run_id } => *run_id,
        other => panic!("job did not succeed: {other:?}"),
    }
}

/// The server's default Prometheus, the repository's matchers: the check passes on
/// zero plaintext, and the run keeps the numbers and queries.
async fn a_check_job_gathers_and_stores_evidence(store: Store) {
    let store = migrated(store).await;
    let prom = Prometheus::start(
        &[
            inbound(
                "istio_requests_total",
                "shop",
                "cart",
                "mutual_tls",
                "prod-eu1",
                50,
            ),
            // Plaintext in another cluster: the repository's matcher leaves it out.
            inbound(
                "istio_requests_total",
                "shop",
                "cart",
                "none",
                "prod-us1",
                5,
            ),
        ],
        "30d",
    );
    let fake = FakeGitHub::start().await;
    let (base, head) = strict_pr(
        &fake,
        "evidence:\n  prometheus:\n    matchers: {cluster: prod-eu1}\n",
    );
    store.enqueue(&check_job(&base, &head), 3, 0).await.unwrap();
    let run_id = run_one(&store, &fake, server_source(Some(&prom.url))).await;

    let run = &store.runs(&RunFilter::default()).await.unwrap()[0];
    assert_eq!(
        run.outcome,
        RunOutcome::Pass,
        "{:?}",
        store.findings(run_id).await.unwrap()
    );
    let evidence = store.evidence(run_id).await.unwrap();
    assert_eq!(evidence.len(), 1);
    let shop = &evidence[0];
    assert_eq!(shop.subject, "namespace:shop");
    assert_eq!(shop.error, None);
    assert_eq!(shop.requests_plaintext, 0);
    assert!((550..=650).contains(&shop.requests_total), "{shop:?}");
    assert_eq!(shop.window.as_deref(), Some("1h"));
    assert!(shop.taken_at_ms.is_some());
    assert!(shop.queries["requests_plaintext"].contains(r#"cluster="prod-eu1""#));
    let report = store.run_report(run_id).await.unwrap().unwrap();
    let md = meshward::report::markdown::render(&report, &meshward::report::markdown::Links::None);
    assert!(md.contains("### Telemetry evidence"), "{md}");
    assert!(md.contains("✅ zero plaintext"), "{md}");
}

/// A repository may not point the server (and its credentials) at a Prometheus the
/// operator did not allow: no request goes there, and STRICT has no evidence.
async fn a_repository_cannot_choose_an_unallowed_prometheus(store: Store) {
    let store = migrated(store).await;
    let prom = Prometheus::start(
        &[inbound(
            "istio_requests_total",
            "shop",
            "cart",
            "mutual_tls",
            "prod-eu1",
            50,
        )],
        "30d",
    );
    let fake = FakeGitHub::start().await;
    let config = format!("evidence:\n  prometheus:\n    url: {}\n", prom.url);
    let (base, head) = strict_pr(&fake, &config);
    store.enqueue(&check_job(&base, &head), 3, 0).await.unwrap();
    let run_id = run_one(&store, &fake, server_source(None)).await;
    assert_eq!(prom.query_requests(), 0);
    let run = &store.runs(&RunFilter::default()).await.unwrap()[0];
    assert_eq!(run.outcome, RunOutcome::Fail);
    let findings = store.findings(run_id).await.unwrap();
    let f = findings
        .iter()
        .find(|f| f.rule == "mtls/strict-without-evidence")
        .expect("strict-without-evidence");
    assert!(
        f.message
            .contains("which this meshward server does not allow"),
        "{}",
        f.message
    );
    assert_eq!(f.file, "shop/mtls.yaml");
}

contract!(
    a_check_job_gathers_and_stores_evidence,
    a_repository_cannot_choose_an_unallowed_prometheus,
);
