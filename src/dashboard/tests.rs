use super::*;
use crate::store::NamespaceMetrics;
use crate::store::{BucketRow, CoverageNumbers, FindingCounts};
use crate::trends::views::LatestView;
use crate::trends::{build_series, Range, Scope};
use chart::{Chart, Line};

fn metrics(workloads: i64, with_proxy: i64, strict: i64) -> Metrics {
    Metrics {
        coverage: CoverageNumbers {
            workloads,
            workloads_with_proxy: with_proxy,
            namespaces: 2,
            namespaces_strict: strict,
            namespaces_permissive: 2 - strict,
            namespaces_injected: Some(2),
            selectors_effective: 3,
            selectors_ineffective: 1,
            workload_entries_selected: 1,
            workload_entries_total: 2,
            ..Default::default()
        },
        findings: FindingCounts {
            error: 2,
            warning: 1,
            existing: 3,
            ..Default::default()
        },
    }
}

fn series() -> Series {
    series_of(Scope::default(), 0)
}

/// The seeded days, for `scope`, with `more` workloads with a proxy on each.
fn series_of(scope: Scope, more: i64) -> Series {
    // 2026-11-01 .. 2026-11-04: data, gap, data, errored.
    let range = Range::new(Some("2026-11-01"), Some("2026-11-05"), Interval::Day, 0).unwrap();
    let day = |d: i64| range.start_ms + d * 86_400_000 + 3_600_000;
    let row = |d: i64, sha: char, m: Option<Metrics>| BucketRow {
        bucket: range.first_bucket() + d,
        baselines: 1,
        run_id: d + 1,
        head_sha: sha.to_string().repeat(40),
        finished_at_ms: day(d),
        outcome: if m.is_some() {
            RunOutcome::Pass
        } else {
            RunOutcome::Error
        },
        error: m.is_none().then(|| "render failed: <script>".to_string()),
        metrics: m,
    };
    build_series(
        "acme/gitops",
        scope,
        &range,
        vec![
            row(0, 'a', Some(metrics(4 + more, 2 + more, 0))),
            row(2, 'c', Some(metrics(5 + more, 5 + more, 2))),
            row(3, 'd', None),
        ],
    )
}

#[test]
fn chart_svg_has_a_point_per_value_and_a_band_per_gap() {
    let s = series();
    let labels: Vec<String> = s
        .points
        .iter()
        .map(|p| bucket_label(&p.start, s.interval))
        .collect();
    let commits: Vec<Option<String>> = s
        .points
        .iter()
        .map(|p| {
            p.metrics
                .as_ref()
                .and(p.run.as_ref())
                .map(|r| r.commit.clone())
        })
        .collect();
    let gaps: Vec<Option<String>> = s.points.iter().map(|p| p.gap.clone()).collect();
    let svg = chart::render(&Chart {
        id: "chart-proxy",
        title: "Workloads with a proxy",
        x_labels: &labels,
        commits: &commits,
        gaps: &gaps,
        lines: vec![Line {
            label: "with a proxy",
            color: "#12b76a",
            values: values(&s, |m| m.coverage.workloads_with_proxy),
        }],
    })
    .into_string();
    insta::assert_snapshot!(svg.replace("><", ">\n<"));
}

#[test]
fn repos_page_lists_latest_coverage_and_escapes_names() {
    let html = repos_page(&[
        RepoView {
            repo: "acme/<gitops>".into(),
            installed: false,
            default_branch: Some("main".into()),
            latest: Some(LatestView {
                run_id: 3,
                commit: "c".repeat(40),
                finished_at: "2026-11-03T01:00:00Z".into(),
                metrics: metrics(5, 5, 2),
            }),
        },
        RepoView {
            repo: "acme/empty".into(),
            installed: true,
            default_branch: None,
            latest: None,
        },
    ]);
    let table = &html[html.find("<table").unwrap()..html.find("</table>").unwrap() + 8];
    insta::assert_snapshot!(table.replace("><", ">\n<"));
    assert!(!html.contains("<gitops>"), "names are escaped");
    assert!(!html.contains("<script"), "no script on the page");
}

#[test]
fn repo_page_shows_gaps_with_their_reasons_and_escapes_errors() {
    let s = series();
    let html = repo_page(&RepoPage {
        series: &s,
        cluster_series: &[],
        namespaces: &[NamespaceMetrics {
            cluster: None,
            namespace: "shop".into(),
            metrics: metrics(3, 3, 1),
        }],
        runs: &[],
        query: &[("from".into(), "2026-11-01".into())],
    });
    assert!(html.contains("2026-11-02: no baseline run finished in this bucket"));
    assert!(
        html.contains("render failed: &lt;script&gt;"),
        "error text is escaped"
    );
    assert!(!html.contains("<script"));
    assert!(html.contains("href=\"/repos/acme/gitops?from=2026-11-01&amp;namespace=shop\""));
    assert_eq!(html.matches("<svg").count(), 8);
    assert!(html.contains("2 of 4 have one"));
}

#[test]
fn repo_page_draws_a_line_per_cluster_and_links_each_cluster() {
    let mut s = series();
    s.clusters = vec!["prod-eu".into(), "prod-<us>".into()];
    let eu = series_of(
        Scope {
            cluster: Some("prod-eu"),
            namespace: None,
        },
        0,
    );
    let us = series_of(
        Scope {
            cluster: Some("prod-<us>"),
            namespace: None,
        },
        1,
    );
    let html = repo_page(&RepoPage {
        series: &s,
        cluster_series: &[eu, us],
        namespaces: &[
            NamespaceMetrics {
                cluster: Some("prod-eu".into()),
                namespace: "shop".into(),
                metrics: metrics(3, 3, 1),
            },
            NamespaceMetrics {
                cluster: Some("prod-<us>".into()),
                namespace: "shop".into(),
                metrics: metrics(4, 4, 1),
            },
        ],
        runs: &[],
        query: &[("from".into(), "2026-11-01".into())],
    });
    assert_eq!(html.matches("<svg").count(), 11, "8 charts, 3 by cluster");
    let by_cluster = &html[html.find("id=\"chart-clusters-proxy\"").unwrap()..];
    let by_cluster = &by_cluster[..by_cluster.find("</figure>").unwrap()];
    for (cluster, values) in [("prod-eu", ["2", "5"]), ("prod-&lt;us&gt;", ["3", "6"])] {
        assert!(
            by_cluster.contains(&format!("</span>{cluster}</li>")),
            "a legend entry for {cluster}: {by_cluster}"
        );
        for v in values {
            assert!(
                by_cluster.contains(&format!("data-series=\"{cluster}\" data-value=\"{v}\"")),
                "{cluster} = {v}: {by_cluster}"
            );
        }
    }
    // Every cluster is reachable, keeping the range; namespaces link into theirs.
    assert!(html.contains("href=\"/repos/acme/gitops?cluster=prod-eu&amp;from=2026-11-01\""));
    assert!(html.contains("href=\"/repos/acme/gitops?cluster=prod-%3Cus%3E&amp;from=2026-11-01\""));
    assert!(html.contains(
        "href=\"/repos/acme/gitops?cluster=prod-eu&amp;from=2026-11-01&amp;namespace=shop\""
    ));
    assert!(
        html.contains("<th>cluster</th>"),
        "the namespaces say their cluster"
    );
    assert!(!html.contains("<us>"), "names are escaped");

    // One cluster's page: its own charts, no by-cluster charts, the way back.
    let mut one = series_of(
        Scope {
            cluster: Some("prod-eu"),
            namespace: None,
        },
        0,
    );
    one.clusters = s.clusters.clone();
    let html = repo_page(&RepoPage {
        series: &one,
        cluster_series: &[],
        namespaces: &[],
        runs: &[],
        query: &[("cluster".into(), "prod-eu".into())],
    });
    assert!(
        html.contains("<h1>acme/gitops · cluster prod-eu</h1>"),
        "{html}"
    );
    assert_eq!(html.matches("<svg").count(), 8);
    assert!(html.contains("class=\"on\" href=\"/repos/acme/gitops?cluster=prod-eu\""));
    assert!(html.contains("href=\"/repos/acme/gitops\" data-cluster=\"\""));
}

#[test]
fn a_repository_with_one_cluster_shows_no_cluster_controls() {
    let s = series();
    let html = repo_page(&RepoPage {
        series: &s,
        cluster_series: &[],
        namespaces: &[],
        runs: &[],
        query: &[],
    });
    assert!(!html.contains("id=\"clusters\""));
    assert!(!html.contains("By cluster"));
}

#[test]
fn repo_page_charts_workloads_by_data_plane_and_policies_by_enforcement() {
    let mut s = series();
    // The last day: 5 workloads, 2 with a sidecar, 2 ambient (1 behind a waypoint),
    // 1 with neither; one policy as written, one reduced, one not enforced.
    if let Some(m) = s.points[2].metrics.as_mut() {
        m.coverage.workloads_with_proxy = 2;
        m.coverage.workloads_ambient = 2;
        m.coverage.workloads_waypoint = 1;
        m.coverage.authz_as_written = 1;
        m.coverage.authz_reduced_to_l4 = 1;
        m.coverage.authz_not_enforced = 1;
        m.coverage.routes_resolving = 3;
        m.coverage.routes_nowhere = 1;
    }
    let html = repo_page(&RepoPage {
        series: &s,
        cluster_series: &[],
        namespaces: &[NamespaceMetrics {
            cluster: None,
            namespace: "shop".into(),
            metrics: {
                let mut m = metrics(3, 1, 1);
                m.coverage.workloads_ambient = 2;
                m.coverage.workloads_waypoint = 1;
                m
            },
        }],
        runs: &[],
        query: &[],
    });
    let chart = |id: &str| {
        let from = html.find(&format!("id=\"{id}\"")).expect(id);
        let c = &html[from..];
        c[..c.find("</figure>").expect("figure end")].to_string()
    };
    let planes = chart("chart-dataplanes");
    for (series, day0, day2) in [
        ("sidecar", "2", "2"),
        ("ambient (L4 only)", "0", "1"),
        ("ambient with a waypoint", "0", "1"),
        ("none", "2", "1"),
    ] {
        for (bucket, v) in [("2026-11-01", day0), ("2026-11-03", day2)] {
            assert!(
                planes.contains(&format!(
                    "data-series=\"{series}\" data-value=\"{v}\" data-bucket=\"{bucket}\""
                )),
                "{series} on {bucket} = {v}: {planes}"
            );
        }
    }
    let authz = chart("chart-authz");
    for series in ["as written", "reduced to L4 by ztunnel", "not enforced"] {
        assert!(
            authz.contains(&format!(
                "data-series=\"{series}\" data-value=\"1\" data-bucket=\"2026-11-03\""
            )),
            "{series}: {authz}"
        );
    }
    let routes = chart("chart-routes");
    for (series, v) in [
        ("reach pods", "3"),
        ("go nowhere", "1"),
        ("not checked", "0"),
    ] {
        assert!(
            routes.contains(&format!(
                "data-series=\"{series}\" data-value=\"{v}\" data-bucket=\"2026-11-03\""
            )),
            "{series}: {routes}"
        );
    }
    assert!(html.contains("1 go nowhere, 0 not checked"), "{html}");
    // The latest numbers in cards, the namespace's ambient workloads in its row.
    assert!(html.contains("id=\"card-ambient\""), "{html}");
    assert!(html.contains("2 of 5, 1 with a waypoint"), "{html}");
    assert!(html.contains("1 reduced to L4, 1 not enforced"), "{html}");
    assert!(html.contains("<th class=\"num\">ambient (with a waypoint)</th>"));
    assert!(html.contains("<td class=\"num\">2 (1)</td>"));
    // Without ambient workloads or weakened policies, no such cards or column.
    let plain = repo_page(&RepoPage {
        series: &series(),
        cluster_series: &[],
        namespaces: &[],
        runs: &[],
        query: &[],
    });
    assert!(
        !plain.contains("card-ambient")
            && !plain.contains("card-authz")
            && !plain.contains("card-routes")
    );
    assert!(
        plain.contains("id=\"chart-dataplanes\""),
        "the chart is always there"
    );
}
