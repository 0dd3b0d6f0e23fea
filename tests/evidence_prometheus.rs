//! Zero-plaintext evidence from a real Prometheus (started by the test over a TSDB
//! built with promtool from Istio-shaped series), through the whole check pipeline:
//! a change turns a namespace or workloads STRICT, meshward asks Prometheus, and the
//! policies judge what it answered.

use crate::common;
use crate::prometheus_support;

use common::*;
use meshward::evidence::prometheus::SourceSettings;
use meshward::evidence::{promql, PrometheusSource};
use meshward::report::{Report, Verdict};
use prometheus_support::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

const HTTP: &str = "istio_requests_total";
const TCP: &str = "istio_tcp_connections_opened_total";
const TCP_BYTES: &str = "istio_tcp_received_bytes_total";

const NAMESPACE: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    istio-injection: enabled
";

fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: shop
spec:
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
        - name: {name}
          image: registry.example.com/shop/{name}:1
"
    )
}

fn peer_authentication(name: &str, mode: &str, selector: Option<&str>) -> String {
    let selector = selector
        .map(|app| format!("  selector:\n    matchLabels:\n      app: {app}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: {name}
  namespace: shop
spec:
{selector}  mtls:
    mode: {mode}
"
    )
}

const CONFIG: &str = "evidence:
  prometheus:
    window: 1h
    matchers:
      cluster: prod-eu1
";

/// A repository whose change turns namespace shop (or, with `workload`, the cart
/// workload) from PERMISSIVE to STRICT.
fn strict_change(workload: Option<&str>) -> (GitRepo, String, String) {
    strict_change_with(workload, CONFIG)
}

fn strict_change_with(workload: Option<&str>, config: &str) -> (GitRepo, String, String) {
    strict_change_in(NAMESPACE, workload, config)
}

fn strict_change_in(
    namespace: &str,
    workload: Option<&str>,
    config: &str,
) -> (GitRepo, String, String) {
    let repo = GitRepo::new();
    let cart = deployment("cart");
    let legacy = deployment("legacy");
    let permissive = peer_authentication("default", "PERMISSIVE", None);
    let base = repo.commit_files(
        &[
            (".meshward.yaml", config),
            ("shop/namespace.yaml", namespace),
            ("shop/cart.yaml", &cart),
            ("shop/legacy.yaml", &legacy),
            ("shop/mtls.yaml", &permissive),
        ],
        "base",
    );
    let strict = match workload {
        None => peer_authentication("default", "STRICT", None),
        Some(app) => format!(
            "{permissive}---\n{}",
            peer_authentication(app, "STRICT", Some(app))
        ),
    };
    let head = repo.commit_files(
        &[
            (".meshward.yaml", config),
            ("shop/namespace.yaml", namespace),
            ("shop/cart.yaml", &cart),
            ("shop/legacy.yaml", &legacy),
            ("shop/mtls.yaml", &strict),
        ],
        "head: STRICT",
    );
    (repo, base, head)
}

fn source(url: &str, timeout: Duration) -> Arc<PrometheusSource> {
    Arc::new(PrometheusSource::new(SourceSettings {
        url: Some(url.to_string()),
        url_from_repo: false,
        timeout,
        ..SourceSettings::default()
    }))
}

fn check_with(change: &(GitRepo, String, String), source: &Arc<PrometheusSource>) -> Report {
    let (repo, base, head) = change;
    let mut req = request(&repo.path());
    req.base = Some(base.clone());
    req.head = Some(head.clone());
    req.prometheus = Some(source.clone());
    check(&req)
}

fn rules(report: &Report) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.rule.starts_with("mtls/"))
        .map(|f| f.rule.clone())
        .collect()
}

/// mTLS traffic into shop (HTTP and TCP), plus noise that must not count: the
/// client-side view, and plaintext in another cluster.
fn mtls_only() -> Vec<Series> {
    vec![
        inbound(HTTP, "shop", "cart", "mutual_tls", "prod-eu1", 50),
        inbound(TCP, "shop", "cart", "mutual_tls", "prod-eu1", 5),
        client_side(inbound(HTTP, "shop", "cart", "mutual_tls", "prod-eu1", 50)),
        inbound(HTTP, "shop", "cart", "none", "prod-us1", 9),
    ]
}

#[test]
fn zero_plaintext_with_traffic_lets_strict_pass() {
    let prom = Prometheus::start(&mtls_only(), "30d");
    let report = check_with(
        &strict_change(None),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_eq!(
        rules(&report),
        Vec::<String>::new(),
        "{:#?}",
        report.findings
    );
    assert_eq!(report.summary.verdict, Verdict::Pass);
    let evidence = report.evidence.as_ref().expect("evidence gathered");
    assert_eq!(evidence.window.as_deref(), Some("1h"));
    let shop = &evidence.namespaces["shop"];
    assert_eq!(shop.error, None);
    assert_eq!(shop.requests_plaintext, 0);
    assert_eq!(shop.tcp_connections_plaintext, 0);
    // 50 requests every 5 minutes: about 600 an hour (increase() extrapolates).
    assert!((550..=650).contains(&shop.requests_total), "{shop:?}");
    assert!((55..=65).contains(&shop.tcp_connections_total), "{shop:?}");
    assert!(shop.queries["requests_plaintext"].contains(r#"cluster="prod-eu1""#));
    assert!(evidence
        .source
        .as_deref()
        .unwrap_or("")
        .contains("retention 30d"));
}

#[test]
fn plaintext_present_blocks_strict_with_the_count() {
    let mut series = mtls_only();
    series.push(inbound(HTTP, "shop", "legacy", "none", "prod-eu1", 12));
    let prom = Prometheus::start(&series, "30d");
    let report = check_with(
        &strict_change(None),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_eq!(rules(&report), vec!["mtls/plaintext-traffic-present"]);
    assert_eq!(report.summary.verdict, Verdict::Fail);
    let shop = &report.evidence.as_ref().expect("evidence").namespaces["shop"];
    // 12 plaintext requests every 5 minutes: about 144 in the hour.
    assert!((130..=160).contains(&shop.requests_plaintext), "{shop:?}");
    let f = report
        .findings
        .iter()
        .find(|f| f.rule == "mtls/plaintext-traffic-present")
        .expect("finding");
    let count = format!(
        "{} of {} requests",
        shop.requests_plaintext, shop.requests_total
    );
    assert!(f.message.contains(&count), "{}", f.message);
    assert!(f.message.contains("over 1h"), "{}", f.message);
    assert_eq!(f.file, "shop/mtls.yaml");
}

#[test]
fn no_series_is_no_evidence() {
    let prom = Prometheus::start(
        &[inbound(
            HTTP,
            "elsewhere",
            "api",
            "mutual_tls",
            "prod-eu1",
            10,
        )],
        "30d",
    );
    let report = check_with(
        &strict_change(None),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_eq!(rules(&report), vec!["mtls/strict-without-evidence"]);
    let f = &report.findings[0];
    assert!(
        f.message
            .contains("no traffic at all in 1h, and no data is not evidence"),
        "{}",
        f.message
    );
    assert_eq!(report.summary.verdict, Verdict::Fail);
}

#[test]
fn prometheus_down_is_no_evidence_within_the_timeout() {
    // Nothing listens.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let report = check_with(
        &strict_change(None),
        &source(&closed, Duration::from_secs(2)),
    );
    assert_eq!(rules(&report), vec!["mtls/strict-without-evidence"]);
    assert!(
        report.findings[0].message.contains("could not be reached"),
        "{}",
        report.findings[0].message
    );

    // Takes the connection, never answers.
    let hung = silent_server();
    let started = Instant::now();
    let report = check_with(
        &strict_change(None),
        &source(&hung.url, Duration::from_secs(1)),
    );
    let elapsed = started.elapsed();
    assert_eq!(rules(&report), vec!["mtls/strict-without-evidence"]);
    assert!(
        report.findings[0]
            .message
            .contains("did not answer within 1s"),
        "{}",
        report.findings[0].message
    );
    assert_eq!(report.summary.verdict, Verdict::Fail);
    // One timeout for the first contact, not one per query.
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
}

#[test]
fn a_window_longer_than_retention_is_no_evidence() {
    let prom = Prometheus::start(&mtls_only(), "30m");
    let report = check_with(
        &strict_change(None),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_window_beyond_retention_of_30m(&report);
}

/// The 1h window is refused against a server that keeps 30 minutes.
fn assert_window_beyond_retention_of_30m(report: &Report) {
    assert_eq!(rules(report), vec!["mtls/strict-without-evidence"]);
    let m = &report.findings[0].message;
    assert!(
        m.contains("the window 1h is longer than Prometheus") && m.contains("retention 30m"),
        "{m}"
    );
}

/// A retention stated in the repository cannot stretch what the server keeps.
#[test]
fn a_stated_retention_does_not_override_the_servers() {
    let prom = Prometheus::start(&mtls_only(), "30m");
    let config = format!("{CONFIG}    retention: 30d\n");
    let report = check_with(
        &strict_change_with(None, &config),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_window_beyond_retention_of_30m(&report);
}

#[test]
fn a_workload_scope_is_judged_on_its_own_workloads() {
    // Plaintext reaches legacy, not cart: STRICT for cart alone is safe.
    let mut series = mtls_only();
    series.push(inbound(HTTP, "shop", "legacy", "none", "prod-eu1", 12));
    let prom = Prometheus::start(&series, "30d");
    let src = source(&prom.url, Duration::from_secs(10));
    let report = check_with(&strict_change(Some("cart")), &src);
    assert_eq!(
        rules(&report),
        Vec::<String>::new(),
        "{:#?}",
        report.findings
    );
    let evidence = report.evidence.as_ref().expect("evidence");
    let cart = &evidence.scopes["workload:shop:app=cart"];
    assert_eq!(cart.workloads, vec!["cart"]);
    assert_eq!(cart.requests_plaintext, 0);
    assert!(cart.requests_total > 0);
    assert!(cart.queries["requests_total"].contains(r#"destination_workload="cart""#));

    // STRICT for legacy is not.
    let report = check_with(&strict_change(Some("legacy")), &src);
    assert_eq!(rules(&report), vec!["mtls/plaintext-traffic-present"]);
    assert!(
        report.findings[0]
            .message
            .contains("workloads legacy in namespace shop"),
        "{}",
        report.findings[0].message
    );
}

#[test]
fn the_same_query_within_minutes_is_answered_from_the_cache() {
    let prom = Prometheus::start(&mtls_only(), "30d");
    let change = strict_change(None);
    let cached = source(&prom.url, Duration::from_secs(10));
    let first = check_with(&change, &cached);
    assert_eq!(rules(&first), Vec::<String>::new());
    let asked = prom.query_requests();
    assert!(
        asked >= promql::NUMBERS.len() as u64,
        "a query per number for one namespace, Prometheus counted {asked}"
    );
    let second = check_with(&change, &cached);
    assert_eq!(rules(&second), Vec::<String>::new());
    assert_eq!(
        prom.query_requests(),
        asked,
        "the same queries were asked again"
    );
    assert_eq!(
        first
            .evidence
            .as_ref()
            .map(|e| &e.namespaces["shop"].requests_total),
        second
            .evidence
            .as_ref()
            .map(|e| &e.namespaces["shop"].requests_total)
    );
    // Without a cache every check asks again.
    let uncached = Arc::new(PrometheusSource::new(SourceSettings {
        url: Some(prom.url.clone()),
        url_from_repo: false,
        cache_ttl: Duration::ZERO,
        ..SourceSettings::default()
    }));
    check_with(&change, &uncached);
    assert_eq!(prom.query_requests(), asked + promql::NUMBERS.len() as u64);
}

/// `meshward check --prometheus URL --evidence-window W`: the real binary.
#[test]
fn the_cli_asks_prometheus_and_shows_the_numbers() {
    let prom = Prometheus::start(&mtls_only(), "30d");
    let (repo, base, head) = strict_change(None);
    let out = assert_cmd::Command::cargo_bin("meshward")
        .expect("binary")
        .arg("check")
        .arg(repo.path())
        .args(["--base", &base, "--head", &head])
        .args(["--prometheus", &prom.url, "--evidence-window", "2h"])
        .env("NO_COLOR", "1")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("evidence: prometheus {}", prom.url)),
        "{stdout}"
    );
    assert!(stdout.contains("over 2h"), "{stdout}");
    assert!(
        stdout.contains("namespace:shop: 0 of ") && stdout.contains("requests and 0 of "),
        "{stdout}"
    );

    // Bad flags: exit 2 with the reason, before anything is checked.
    for (args, needle) in [
        (vec!["--prometheus", "ftp://x"], "http"),
        (vec!["--prometheus", "http://u:p@x"], "credentials"),
        (
            vec!["--prometheus", &prom.url, "--evidence-window", "a week"],
            "--evidence-window",
        ),
    ] {
        let out = assert_cmd::Command::cargo_bin("meshward")
            .expect("binary")
            .arg("check")
            .arg(repo.path())
            .args(&args)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// Credentials (from the server's side only) reach a Prometheus behind basic auth;
/// wrong ones are an error answer, and an error is no evidence.
#[test]
fn basic_auth_reaches_a_protected_prometheus_and_a_refusal_is_no_evidence() {
    // bcrypt of "s3cret" (Prometheus' web config keeps only the hash).
    let web = "basic_auth_users:\n  meshward: $2b$12$rRnSQPqIzRYPVnNTQHVHV.AzLoN4YVt5qIXmvpyOLruTHQyALS5C.\n";
    let prom = Prometheus::start_with(&mtls_only(), "30d", Some(web));
    let with = |password: &str| {
        Arc::new(PrometheusSource::new(SourceSettings {
            url: Some(prom.url.clone()),
            url_from_repo: false,
            auth: meshward::evidence::PrometheusAuth::Basic {
                username: "meshward".into(),
                password: password.to_string().into(),
            },
            ..SourceSettings::default()
        }))
    };
    let change = strict_change(None);
    let report = check_with(&change, &with("s3cret"));
    assert_eq!(
        rules(&report),
        Vec::<String>::new(),
        "{:#?}",
        report.findings
    );
    let report = check_with(&change, &with("wrong"));
    assert_eq!(rules(&report), vec!["mtls/strict-without-evidence"]);
    let m = &report.findings[0].message;
    assert!(m.contains("answered HTTP 401"), "{m}");
    assert!(
        !m.contains("wrong"),
        "the password must not leak into the message: {m}"
    );
}

/// Fail closed by default; a repository that accepts the risk lowers the rule's
/// severity in its base revision's `rules:`, and the finding stays visible.
#[test]
fn a_repository_may_lower_the_severity_of_missing_evidence() {
    let closed = format!("http://127.0.0.1:{}", free_port());
    let config = format!("{CONFIG}rules:\n  mtls/strict-without-evidence: warning\n");
    let report = check_with(
        &strict_change_with(None, &config),
        &source(&closed, Duration::from_secs(2)),
    );
    assert_eq!(rules(&report), vec!["mtls/strict-without-evidence"]);
    assert_eq!(
        report.findings[0].severity,
        meshward::finding::Severity::Warning
    );
    assert_eq!(report.summary.verdict, Verdict::Pass);
}

/// A repository of mesh-wide config only (no workloads of its own) turns on STRICT
/// for the whole mesh from PERMISSIVE.
fn mesh_wide_change() -> (GitRepo, String, String) {
    let repo = GitRepo::new();
    let mesh = |mode: &str| {
        format!("apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: istio-system\nspec:\n  mtls:\n    mode: {mode}\n")
    };
    let base = repo.commit_files(
        &[
            (".meshward.yaml", CONFIG),
            ("mesh/mtls.yaml", &mesh("PERMISSIVE")),
        ],
        "base",
    );
    let head = repo.commit_files(
        &[
            (".meshward.yaml", CONFIG),
            ("mesh/mtls.yaml", &mesh("STRICT")),
        ],
        "head: mesh-wide STRICT",
    );
    (repo, base, head)
}

/// Plaintext into a namespace this repository does not hold still reaches a
/// mesh-wide STRICT: the evidence is about the whole mesh, not the repo's namespaces.
#[test]
fn mesh_wide_strict_is_judged_on_all_of_the_mesh() {
    let prom = Prometheus::start(&mtls_only(), "30d");
    let src = source(&prom.url, Duration::from_secs(10));
    let report = check_with(&mesh_wide_change(), &src);
    assert_eq!(
        rules(&report),
        Vec::<String>::new(),
        "{:#?}",
        report.findings
    );
    let mesh = &report.evidence.as_ref().expect("evidence").scopes["mesh"];
    assert!(mesh.requests_total > 0, "{mesh:?}");
    assert!(!mesh.queries["requests_total"].contains("destination_workload_namespace=\""));

    let mut series = mtls_only();
    series.push(inbound(HTTP, "billing", "invoices", "none", "prod-eu1", 4));
    let prom = Prometheus::start(&series, "30d");
    let src = source(&prom.url, Duration::from_secs(10));
    let report = check_with(&mesh_wide_change(), &src);
    assert_eq!(rules(&report), vec!["mtls/plaintext-traffic-present"]);
    assert!(
        report.findings[0].message.contains("the whole mesh"),
        "{}",
        report.findings[0].message
    );
}

// ---------------------------------------------------------------- ambient

/// Namespace shop in ambient mode: ztunnel captures its pods, no sidecar.
const AMBIENT_NAMESPACE: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    istio.io/dataplane-mode: ambient
";

#[test]
fn an_ambient_namespace_is_judged_on_ztunnel_tcp_metrics_alone() {
    // ztunnel reports no istio_requests_total: connections and bytes only.
    let series = vec![
        ztunnel_inbound(TCP, "shop", "cart", "mutual_tls", "prod-eu1", 5),
        ztunnel_inbound(TCP_BYTES, "shop", "cart", "mutual_tls", "prod-eu1", 4096),
        client_side(ztunnel_inbound(
            TCP, "shop", "cart", "unknown", "prod-eu1", 3,
        )),
    ];
    let prom = Prometheus::start(&series, "30d");
    let report = check_with(
        &strict_change_in(AMBIENT_NAMESPACE, None, CONFIG),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_eq!(
        rules(&report),
        Vec::<String>::new(),
        "{:#?}",
        report.findings
    );
    assert_eq!(
        report.summary.verdict,
        Verdict::Pass,
        "{:#?}",
        report.findings
    );
    let shop = &report.evidence.as_ref().expect("evidence").namespaces["shop"];
    assert_eq!((shop.requests_total, shop.requests_plaintext), (0, 0));
    assert_eq!(
        (shop.tcp_connections_plaintext, shop.tcp_bytes_plaintext),
        (0, 0)
    );
    assert!((55..=65).contains(&shop.tcp_connections_total), "{shop:?}");
    assert!(shop.queries["tcp_bytes_plaintext"].contains(TCP_BYTES));
}

#[test]
fn a_long_lived_plaintext_connection_shows_in_bytes_and_blocks_strict() {
    // Opened before the window: no new plaintext connection, but bytes keep coming.
    let series = vec![
        ztunnel_inbound(TCP, "shop", "cart", "mutual_tls", "prod-eu1", 5),
        ztunnel_inbound(TCP, "shop", "legacy", "unknown", "prod-eu1", 0),
        ztunnel_inbound(TCP_BYTES, "shop", "legacy", "unknown", "prod-eu1", 2048),
    ];
    let prom = Prometheus::start(&series, "30d");
    let report = check_with(
        &strict_change_in(AMBIENT_NAMESPACE, None, CONFIG),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_eq!(rules(&report), vec!["mtls/plaintext-traffic-present"]);
    assert_eq!(report.summary.verdict, Verdict::Fail);
    let shop = &report.evidence.as_ref().expect("evidence").namespaces["shop"];
    assert_eq!(shop.tcp_connections_plaintext, 0, "{shop:?}");
    assert!(shop.tcp_bytes_plaintext > 20_000, "{shop:?}");
    let f = &report.findings[0];
    assert!(
        f.message.contains(&format!(
            "{} bytes received in plaintext",
            shop.tcp_bytes_plaintext
        )),
        "{}",
        f.message
    );
}

#[test]
fn an_ambient_namespace_without_traffic_asks_for_ztunnel_to_be_scraped() {
    let prom = Prometheus::start(
        &[inbound(
            HTTP,
            "elsewhere",
            "api",
            "mutual_tls",
            "prod-eu1",
            10,
        )],
        "30d",
    );
    let report = check_with(
        &strict_change_in(AMBIENT_NAMESPACE, None, CONFIG),
        &source(&prom.url, Duration::from_secs(10)),
    );
    assert_eq!(rules(&report), vec!["mtls/strict-without-evidence"]);
    let f = &report.findings[0];
    assert!(
        f.message.contains("no traffic at all in 1h")
            && f.message
                .contains("Prometheus must scrape the ztunnel pods"),
        "{}",
        f.message
    );
}
