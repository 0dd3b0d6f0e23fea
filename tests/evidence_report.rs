//! The PR comment's telemetry evidence section: the numbers per scope and the queries
//! a reviewer can rerun, on a change that turns a namespace and a workload STRICT.
//! The evidence comes from a file in the shape Prometheus gathering produces, so the
//! snapshot is stable.

use crate::common;

use common::*;
use meshward::report::{self, Format};

const BASE: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    istio-injection: enabled
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: legacy
  namespace: shop
spec:
  selector:
    matchLabels:
      app: legacy
  template:
    metadata:
      labels:
        app: legacy
    spec:
      containers:
        - name: legacy
          image: registry.example.com/shop/legacy:1
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: default
  namespace: shop
spec:
  mtls:
    mode: PERMISSIVE
";

const STRICT: &str = "---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: legacy
  namespace: shop
spec:
  selector:
    matchLabels:
      app: legacy
  mtls:
    mode: STRICT
";

const EVIDENCE: &str = r#"{
  "taken_at": "2026-11-30T12:00:00Z",
  "window": "7d",
  "source": "prometheus https://prometheus.internal (cluster=prod-eu1), retention 30d",
  "namespaces": {},
  "scopes": {
    "workload:shop:app=legacy": {
      "requests_total": 40, "requests_plaintext": 12,
      "tcp_connections_total": 0, "tcp_connections_plaintext": 0,
      "workloads": ["legacy"],
      "taken_at": "2026-11-30T11:58:00Z",
      "queries": {
        "requests_plaintext": "sum(increase(istio_requests_total{reporter=\"destination\",destination_workload_namespace=\"shop\",destination_workload=\"legacy\",connection_security_policy!=\"mutual_tls\",cluster=\"prod-eu1\"}[7d]))",
        "requests_total": "sum(increase(istio_requests_total{reporter=\"destination\",destination_workload_namespace=\"shop\",destination_workload=\"legacy\",cluster=\"prod-eu1\"}[7d]))"
      },
      "error": null
    },
    "workload:shop:app=gone": {
      "workloads": [],
      "error": "PeerAuthentication/shop/gone selects no workload in this repository, so there is no traffic to ask Prometheus about"
    }
  }
}"#;

#[test]
fn markdown_shows_numbers_and_queries() {
    let repo = GitRepo::new();
    let base = repo.commit_files(&[("shop.yaml", BASE)], "base");
    let head = repo.commit_files(&[("shop.yaml", &format!("{BASE}{STRICT}"))], "head");
    let dir = tempfile::tempdir().expect("tempdir");
    let evidence = dir.path().join("evidence.json");
    std::fs::write(&evidence, EVIDENCE).expect("write evidence");
    let mut req = request(&repo.path());
    req.base = Some(base);
    req.head = Some(head);
    req.evidence = Some(evidence);
    let r = check(&req);
    let md = report::render(&r, Format::Markdown, false);
    assert!(
        md.contains("workloads legacy in namespace shop: 12 of 40 requests"),
        "{md}"
    );
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"\b[0-9a-f]{12}\b", "[sha]");
    s.set_prepend_module_to_snapshot(false);
    s.bind(|| insta::assert_snapshot!("evidence_markdown", md));
}

#[test]
fn section_rows_name_subjects_and_results() {
    let e: meshward::evidence::Evidence = serde_json::from_str(EVIDENCE).expect("evidence");
    let section = meshward::report::markdown::evidence_section(&e);
    assert!(section.contains("| workloads `legacy` in `shop` (selector `app=legacy`) | 12 / 40 | 0 / 0 | ❌ plaintext present (answer from 2026-11-30T11:58:00Z) |"), "{section}");
    assert!(
        section.contains("⚠️ no evidence: PeerAuthentication/shop/gone selects no workload"),
        "{section}"
    );
}

#[test]
fn a_large_mesh_is_cut_short_worst_first() {
    let mut namespaces = serde_json::Map::new();
    for i in 0..60 {
        namespaces.insert(
            format!("ns{i:02}"),
            serde_json::json!({"requests_total": 10, "requests_plaintext": u64::from(i == 42),
                               "queries": {"requests_total": format!("q{i}")}}),
        );
    }
    let e: meshward::evidence::Evidence =
        serde_json::from_value(serde_json::json!({"window": "7d", "namespaces": namespaces}))
            .expect("evidence");
    let section = meshward::report::markdown::evidence_section(&e);
    let rows: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("| namespace"))
        .collect();
    assert_eq!(rows.len(), 50);
    assert!(
        rows[0].starts_with("| namespace `ns42` | 1 / 10"),
        "{}",
        rows[0]
    );
    assert!(section.contains("| … and 10 more"), "{section}");
    assert_eq!(section.matches("```promql").count(), 10);
}
