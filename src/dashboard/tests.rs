use super::*;
use crate::store::{BucketRow, CoverageNumbers, FindingCounts};
use crate::trends::views::LatestView;
use crate::trends::{build_series, Range};

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
        None,
        &range,
        vec![
            row(0, 'a', Some(metrics(4, 2, 0))),
            row(2, 'c', Some(metrics(5, 5, 2))),
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
        namespaces: &[("shop".into(), metrics(3, 3, 1))],
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
    assert_eq!(html.matches("<svg").count(), 5);
    assert!(html.contains("2 of 4 have one"));
}
