//! `/repos/{owner}/{repo}`: a repository's coverage over time (the whole repository,
//! one of its clusters, or one namespace: workloads by data plane, AuthorizationPolicies
//! by enforcement, mTLS modes, selectors, findings), its clusters side by side, the
//! namespaces of the latest baseline, and the last runs.

use super::chart::{self, Chart, Line};
use super::{bucket_label, href, layout, pct, signed, values, verdict};
use crate::store::{Metrics, NamespaceMetrics};
use crate::trends::views::RunView;
use crate::trends::{short_sha, Series};
use maud::{html, Markup};

/// At most this many clusters get a line in the by-cluster charts (one colour each);
/// the cluster links reach every one.
pub(crate) const MAX_CLUSTER_LINES: usize = 8;

/// The by-cluster lines' colours, told apart also where a colour is weak.
const CLUSTER_COLORS: [&str; MAX_CLUSTER_LINES] = [
    "#2e90fa", "#f79009", "#12b76a", "#7a5af8", "#f04438", "#0e9384", "#ee46bc", "#667085",
];

/// What `/repos/{owner}/{repo}` shows.
pub struct RepoPage<'a> {
    pub series: &'a Series,
    /// With no cluster chosen in a repository of several: the same scope per cluster
    /// (the first [`MAX_CLUSTER_LINES`]), drawn one line per cluster.
    pub cluster_series: &'a [Series],
    /// Namespaces of the latest baseline in the range (of the chosen cluster), for
    /// the drill-down.
    pub namespaces: &'a [NamespaceMetrics],
    pub runs: &'a [RunView],
    /// The request's query parameters (from, to, interval, cluster), kept in links.
    pub query: &'a [(String, String)],
}

pub fn repo_page(p: &RepoPage) -> String {
    let s = p.series;
    let repo = s.repo.as_str();
    let labels: Vec<String> = s
        .points
        .iter()
        .map(|pt| bucket_label(&pt.start, s.interval))
        .collect();
    let commits: Vec<Option<String>> = s
        .points
        .iter()
        .map(|pt| {
            pt.metrics
                .as_ref()
                .and(pt.run.as_ref())
                .map(|r| r.commit.clone())
        })
        .collect();
    let gaps: Vec<Option<String>> = s.points.iter().map(|pt| pt.gap.clone()).collect();
    let chart = |id, title, lines| {
        chart::render(&Chart {
            id,
            title,
            x_labels: &labels,
            commits: &commits,
            gaps: &gaps,
            lines,
        })
    };
    // Each bucket's run is the same whatever the scope: a bucket the whole series
    // has no run for is a gap in every cluster's.
    let no_run: Vec<Option<String>> = s
        .points
        .iter()
        .map(|pt| pt.run.is_none().then(|| pt.gap.clone()).flatten())
        .collect();
    let by_cluster = |id, title, get: fn(&Metrics) -> i64| {
        let lines = p
            .cluster_series
            .iter()
            .zip(CLUSTER_COLORS)
            .filter_map(|(cs, color)| {
                Some(Line {
                    label: cs.cluster.as_deref()?,
                    color,
                    values: values(cs, get),
                })
            })
            .collect();
        chart::render(&Chart {
            id,
            title,
            x_labels: &labels,
            commits: &commits,
            gaps: &no_run,
            lines,
        })
    };
    let latest = s.latest().and_then(|pt| pt.metrics.as_ref());
    let ranges: [(&str, &str, &str); 5] = [
        ("48 hours, hourly", "48h", "hour"),
        ("7 days", "7d", "day"),
        ("30 days", "30d", "day"),
        ("90 days", "90d", "day"),
        ("1 year, weekly", "52w", "week"),
    ];
    let current_from = p
        .query
        .iter()
        .find(|(k, _)| k == "from")
        .map(|(_, v)| v.as_str());
    let mut title = repo.to_string();
    if let Some(c) = &s.cluster {
        title.push_str(&format!(" · cluster {c}"));
    }
    if let Some(ns) = &s.namespace {
        title.push_str(&format!(" · {ns}"));
    }
    let with_cluster_column =
        s.cluster.is_none() && p.namespaces.iter().any(|n| n.cluster.is_some());
    let with_ambient_column = p
        .namespaces
        .iter()
        .any(|n| n.metrics.coverage.workloads_ambient > 0);
    let ns_query = |n: &NamespaceMetrics| {
        href(
            repo,
            p.query,
            &[
                ("cluster", n.cluster.as_deref()),
                ("namespace", Some(&n.namespace)),
            ],
        )
    };
    layout(
        &title,
        true,
        html! {
            p.muted { a href="/" { "Repositories" } " / " a href=(href(repo, p.query, &[("cluster", None), ("namespace", None)])) { (repo) }
                @if let Some(c) = &s.cluster { " / " a href=(href(repo, p.query, &[("namespace", None)])) { "cluster " (c) } }
                @if let Some(ns) = &s.namespace { " / namespace " (ns) } }
            h1 { (title) }
            p.muted { "Per " (s.interval.as_str()) " from " (s.from) " to " (s.to) " (UTC). Each point is the last baseline run on the default branch in its " (s.interval.as_str()) "; "
                (s.points.len() - s.gaps()) " of " (s.points.len()) " have one." }
            nav.ranges {
                @for (label, from, interval) in ranges {
                    @let on = current_from == Some(from);
                    a .on[on] href=(href(repo, p.query, &[("from", Some(from)), ("to", None), ("interval", Some(interval))])) { (label) }
                }
            }
            @if !s.clusters.is_empty() {
                nav.ranges #clusters aria-label="Clusters" {
                    "Clusters: "
                    a .on[s.cluster.is_none()] href=(href(repo, p.query, &[("cluster", None)])) data-cluster="" { "all (the whole repository)" }
                    @for c in &s.clusters {
                        a .on[s.cluster.as_deref() == Some(c.as_str())] href=(href(repo, p.query, &[("cluster", Some(c))])) data-cluster=(c) { (c) }
                    }
                }
            }
            (headline(latest))
            h2 { "Coverage over time" }
            div.charts {
                (chart("chart-proxy", "Workloads with a proxy", vec![
                    Line { label: "workloads", color: "#98a2b3", values: values(s, |m| m.coverage.workloads) },
                    Line { label: "with a proxy", color: "#12b76a", values: values(s, |m| m.coverage.workloads_with_proxy) },
                ]))
                (chart("chart-dataplanes", "Workloads by data plane", vec![
                    Line { label: "sidecar", color: "#12b76a", values: values(s, |m| m.coverage.workloads_with_proxy) },
                    Line { label: "ambient (L4 only)", color: "#f79009", values: values(s, |m| (m.coverage.workloads_ambient - m.coverage.workloads_waypoint).max(0)) },
                    Line { label: "ambient with a waypoint", color: "#2e90fa", values: values(s, |m| m.coverage.workloads_waypoint) },
                    Line { label: "none", color: "#f04438", values: values(s, without_dataplane) },
                ]))
                (chart("chart-authz", "AuthorizationPolicies by enforcement", vec![
                    Line { label: "as written", color: "#12b76a", values: values(s, |m| m.coverage.authz_as_written) },
                    Line { label: "reduced to L4 by ztunnel", color: "#f79009", values: values(s, |m| m.coverage.authz_reduced_to_l4) },
                    Line { label: "not enforced", color: "#f04438", values: values(s, |m| m.coverage.authz_not_enforced) },
                ]))
                (chart("chart-routes", "Route destinations", vec![
                    Line { label: "reach pods", color: "#12b76a", values: values(s, |m| m.coverage.routes_resolving) },
                    Line { label: "go nowhere", color: "#f04438", values: values(s, |m| m.coverage.routes_nowhere) },
                    Line { label: "not checked", color: "#98a2b3", values: values(s, |m| m.coverage.routes_unchecked) },
                ]))
                (chart("chart-mtls", "Namespaces by mTLS mode", vec![
                    Line { label: "STRICT", color: "#12b76a", values: values(s, |m| m.coverage.namespaces_strict) },
                    Line { label: "PERMISSIVE", color: "#f79009", values: values(s, |m| m.coverage.namespaces_permissive) },
                    Line { label: "DISABLE", color: "#f04438", values: values(s, |m| m.coverage.namespaces_disable) },
                ]))
                (chart("chart-selectors", "Selectors", vec![
                    Line { label: "effective", color: "#2e90fa", values: values(s, |m| m.coverage.selectors_effective) },
                    Line { label: "selecting nothing", color: "#f04438", values: values(s, |m| m.coverage.selectors_ineffective) },
                ]))
                (chart("chart-entries", "WorkloadEntries", vec![
                    Line { label: "total", color: "#98a2b3", values: values(s, |m| m.coverage.workload_entries_total) },
                    Line { label: "selected by a ServiceEntry", color: "#2e90fa", values: values(s, |m| m.coverage.workload_entries_selected) },
                ]))
                (chart("chart-findings", "Findings on the default branch", vec![
                    Line { label: "error", color: "#f04438", values: values(s, |m| m.findings.error) },
                    Line { label: "warning", color: "#f79009", values: values(s, |m| m.findings.warning) },
                    Line { label: "info", color: "#2e90fa", values: values(s, |m| m.findings.info) },
                ]))
            }
            @if !p.cluster_series.is_empty() {
                h2 #by-cluster { "By cluster" }
                p.muted { "One line per cluster"
                    @if let Some(ns) = &s.namespace { " (namespace " (ns) " in each)" }
                    "; a cluster's link above shows all of its charts." }
                div.charts {
                    (by_cluster("chart-clusters-proxy", "Workloads with a proxy, by cluster", |m| m.coverage.workloads_with_proxy))
                    (by_cluster("chart-clusters-strict", "Namespaces STRICT, by cluster", |m| m.coverage.namespaces_strict))
                    (by_cluster("chart-clusters-errors", "Error findings, by cluster", |m| m.findings.error))
                }
                @if s.clusters.len() > p.cluster_series.len() {
                    p.muted { "The charts show the first " (p.cluster_series.len()) " of " (s.clusters.len()) " clusters; the links above show each." }
                }
            }
            @if s.namespace.is_none() {
                h2 { "Namespaces" }
                @if p.namespaces.is_empty() {
                    p.muted { "No namespace in the latest baseline of this range." }
                } @else {
                    table #namespaces {
                        thead { tr {
                            @if with_cluster_column { th { "cluster" } }
                            th { "namespace" } th { "mTLS" } th.num { "workloads with a proxy" }
                            @if with_ambient_column { th.num { "ambient (with a waypoint)" } }
                            th.num { "selectors effective" } th.num { "WorkloadEntries selected" }
                            th.num { "errors" } th.num { "warnings" }
                        } }
                        tbody {
                            @for n in p.namespaces {
                                @let (c, m) = (&n.metrics.coverage, &n.metrics);
                                tr {
                                    @if with_cluster_column { td { (n.cluster.as_deref().unwrap_or("")) } }
                                    td { a href=(ns_query(n)) { (n.namespace) } }
                                    td { (c.mtls_mode.as_deref().unwrap_or("")) }
                                    td.num { (c.workloads_with_proxy) " / " (c.workloads) }
                                    @if with_ambient_column { td.num { (c.workloads_ambient) " (" (c.workloads_waypoint) ")" } }
                                    td.num { (c.selectors_effective) " / " (c.selectors_effective + c.selectors_ineffective) }
                                    td.num { (c.workload_entries_selected) " / " (c.workload_entries_total) }
                                    td.num { (m.findings.error) }
                                    td.num { (m.findings.warning) }
                                }
                            }
                        }
                    }
                }
            }
            (last_runs(repo, p.runs))
        },
    )
    .into_string()
}

/// Workloads with neither a sidecar nor ztunnel.
fn without_dataplane(m: &Metrics) -> i64 {
    let c = &m.coverage;
    (c.workloads - c.workloads_with_proxy - c.workloads_ambient).max(0)
}

fn headline(latest: Option<&Metrics>) -> Markup {
    html! {
        @match latest {
            Some(m) => {
                @let c = &m.coverage;
                div.cards #headline {
                    div.card { "workloads with a proxy" b { (pct(c.workloads_with_proxy, c.workloads)) } span.muted { (c.workloads_with_proxy) " of " (c.workloads) } }
                    div.card { "namespaces STRICT" b { (pct(c.namespaces_strict, c.namespaces)) } span.muted { (c.namespaces_strict) " of " (c.namespaces) } }
                    div.card { "selectors effective" b { (pct(c.selectors_effective, c.selectors_effective + c.selectors_ineffective)) } span.muted { (c.selectors_ineffective) " select nothing" } }
                    div.card { "WorkloadEntries selected" b { (pct(c.workload_entries_selected, c.workload_entries_total)) } span.muted { (c.workload_entries_selected) " of " (c.workload_entries_total) } }
                    @if c.workloads_ambient > 0 {
                        div.card #card-ambient { "workloads in ambient" b { (pct(c.workloads_ambient, c.workloads)) } span.muted { (c.workloads_ambient) " of " (c.workloads) ", " (c.workloads_waypoint) " with a waypoint" } }
                    }
                    @if c.authz_reduced_to_l4 + c.authz_not_enforced > 0 {
                        div.card #card-authz { "AuthorizationPolicies as written" b { (pct(c.authz_as_written, c.authz_as_written + c.authz_reduced_to_l4 + c.authz_not_enforced)) } span.muted { (c.authz_reduced_to_l4) " reduced to L4, " (c.authz_not_enforced) " not enforced" } }
                    }
                    @if c.routes_nowhere > 0 {
                        div.card #card-routes { "route destinations reaching pods" b { (pct(c.routes_resolving, c.routes_resolving + c.routes_nowhere + c.routes_unchecked)) } span.muted { (c.routes_nowhere) " go nowhere, " (c.routes_unchecked) " not checked" } }
                    }
                    div.card { "findings" b { (m.findings.error) @if m.findings.error == 1 { " error" } @else { " errors" } } span.muted { (m.findings.warning) " warnings, " (m.findings.info) " info" } }
                }
            }
            None => { p.error #no-data { "No baseline with coverage in this range." } }
        }
    }
}

fn last_runs(repo: &str, runs: &[RunView]) -> Markup {
    html! {
        h2 { "Last runs" }
        @if runs.is_empty() {
            p.muted { "No run recorded yet." }
        } @else {
            table #runs {
                thead { tr {
                    th { "finished (UTC)" } th { "run" } th { "commit" } th { "verdict" }
                    th.num { "blocking" } th.num { "introduced" } th.num { "resolved" }
                    th.num { "Δ with a proxy" } th.num { "Δ STRICT" }
                } }
                tbody {
                    @for r in runs {
                        tr {
                            td { a href={"/repos/" (repo) "/runs/" (r.id)} { (r.finished_at) } }
                            td {
                                @match (&r.pr, &r.pr_url) {
                                    (Some(n), Some(url)) => { a href=(url) { "PR #" (n) } }
                                    _ => { "baseline" }
                                }
                            }
                            td { a href=(r.commit_url) { code { (short_sha(&r.commit)) } } }
                            td { (verdict(r)) }
                            td.num { (r.blocking) }
                            td.num { (r.findings.introduced) }
                            td.num { (r.findings.resolved) }
                            td.num { (r.delta.as_ref().and_then(|d| d.get("workloads_with_proxy")).map(|v| signed(*v)).unwrap_or_default()) }
                            td.num { (r.delta.as_ref().and_then(|d| d.get("namespaces_strict")).map(|v| signed(*v)).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}
