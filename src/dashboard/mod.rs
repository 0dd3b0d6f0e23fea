//! The dashboard's pages: server-rendered HTML (maud escapes every value), inline
//! SVG charts and CSS, no script and nothing fetched from elsewhere, so it works
//! offline. Pure functions of the data the handlers read; snapshot-tested.

pub mod chart;

use crate::store::{Metrics, RunOutcome};
use crate::trends::views::{RepoView, RunView};
use crate::trends::{percent, short_sha, Interval, Series};
use chart::{Chart, Line};
use maud::{html, Markup, PreEscaped, DOCTYPE};

const CSS: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;gap:16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
header form{margin-left:auto}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
h1{font-size:20px;margin:8px 0 4px}h2{font-size:16px;margin:24px 0 8px}
.muted{color:#5b6475}.error{color:#b42318}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e4e7ec}td{white-space:nowrap}th{vertical-align:bottom}
td.num,th.num{text-align:right}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #e4e7ec;border-radius:6px;padding:10px 14px;min-width:160px}
.card b{font-size:22px;display:block}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(480px,1fr));gap:12px}
figure.chart{background:#fff;border:1px solid #e4e7ec;border-radius:6px;margin:0;padding:8px}
figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#e4e7ec}svg text{font-size:11px;fill:#5b6475}
svg rect.gap{fill:#f2f4f7}
ul.legend{list-style:none;display:flex;gap:14px;padding:0;margin:4px 0 0;font-size:12px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
.badge{padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.pass{background:#d1fadf;color:#05603a}.fail{background:#fee4e2;color:#912018}.err{background:#fef0c7;color:#93370d}
nav.ranges a{margin-right:10px}nav.ranges a.on{font-weight:700;text-decoration:none;color:#1d2330}
";

/// An icon given inline, so the browser asks the server for no /favicon.ico.
const FAVICON: &str = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Ccircle cx='8' cy='8' r='7' fill='%231d2330'/%3E%3C/svg%3E";

fn layout(title: &str, logged_in: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · meshward" }
                link rel="icon" href=(FAVICON);
                style { (PreEscaped(CSS)) }
            }
            body {
                header {
                    a href="/" { "meshward" }
                    span { "mesh coverage over time" }
                    @if logged_in {
                        form method="post" action="/logout" { button type="submit" { "Log out" } }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The login form: a token from `MESHWARD_API_TOKENS` gives a session cookie.
pub fn login_page(error: Option<&str>, next: &str, configured: bool) -> String {
    layout(
        "Log in",
        false,
        html! {
            h1 { "Log in" }
            @if !configured {
                p.error { "The dashboard is off: no MESHWARD_API_TOKENS are configured on this server." }
            } @else {
                p.muted { "Paste one of the API tokens this server is configured with (MESHWARD_API_TOKENS)." }
                @if let Some(e) = error { p.error role="alert" { (e) } }
                form method="post" action="/login" {
                    input type="hidden" name="next" value=(next);
                    label { "Token " input #token type="password" name="token" autocomplete="current-password" required; }
                    " "
                    button #login type="submit" { "Log in" }
                }
            }
        },
    )
    .into_string()
}

fn pct(part: i64, whole: i64) -> String {
    match percent(part, whole) {
        Some(p) => format!("{p:.0} %"),
        None => "–".into(),
    }
}

/// `/`: every repository with its latest coverage.
pub fn repos_page(repos: &[RepoView]) -> String {
    layout(
        "Repositories",
        true,
        html! {
            h1 { "Repositories" }
            @if repos.is_empty() {
                p.muted { "No repository yet: install the GitHub App on one, and push to its default branch." }
            } @else {
                table #repos {
                    thead { tr {
                        th { "repository" } th { "latest baseline" }
                        th.num { "workloads with a proxy" } th.num { "namespaces STRICT" }
                        th.num { "selectors effective" } th.num { "WorkloadEntries selected" } th.num { "errors" }
                    } }
                    tbody {
                        @for r in repos {
                            tr {
                                td {
                                    a href={"/repos/" (r.repo)} { (r.repo) }
                                    @if !r.installed { " " span.muted { "(uninstalled)" } }
                                }
                                @match &r.latest {
                                    Some(l) => {
                                        @let c = &l.metrics.coverage;
                                        td { (l.finished_at) " " span.muted { (short_sha(&l.commit)) } }
                                        td.num { (pct(c.workloads_with_proxy, c.workloads)) span.muted { " of " (c.workloads) } }
                                        td.num { (pct(c.namespaces_strict, c.namespaces)) span.muted { " of " (c.namespaces) } }
                                        td.num { (pct(c.selectors_effective, c.selectors_effective + c.selectors_ineffective)) }
                                        td.num { (pct(c.workload_entries_selected, c.workload_entries_total)) }
                                        td.num { (l.metrics.findings.error) }
                                    }
                                    None => { td colspan="6" .muted { "no baseline with coverage yet" } }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
    .into_string()
}

/// What `/repos/{owner}/{repo}` shows.
pub struct RepoPage<'a> {
    pub series: &'a Series,
    /// Namespaces of the latest baseline in the range, for the drill-down.
    pub namespaces: &'a [(String, Metrics)],
    pub runs: &'a [RunView],
    /// The request's query parameters (from, to, interval), kept in links.
    pub query: &'a [(String, String)],
}

fn href(repo: &str, query: &[(String, String)], set: &[(&str, Option<&str>)]) -> String {
    let mut q: Vec<(String, String)> = query
        .iter()
        .filter(|(k, _)| !set.iter().any(|(s, _)| s == k))
        .cloned()
        .collect();
    for (k, v) in set {
        if let Some(v) = v {
            q.push((k.to_string(), v.to_string()));
        }
    }
    q.sort();
    let qs = serde_urlencoded::to_string(&q).unwrap_or_default();
    if qs.is_empty() {
        format!("/repos/{repo}")
    } else {
        format!("/repos/{repo}?{qs}")
    }
}

fn bucket_label(start: &str, interval: Interval) -> String {
    // RFC 3339 in UTC: "2026-11-30T10:00:00Z".
    match interval {
        Interval::Hour => start.get(5..16).unwrap_or(start).replace('T', " "),
        Interval::Day | Interval::Week => start.get(..10).unwrap_or(start).to_string(),
    }
}

fn values(series: &Series, get: fn(&Metrics) -> i64) -> Vec<Option<i64>> {
    series
        .points
        .iter()
        .map(|p| p.metrics.as_ref().map(get))
        .collect()
}

fn verdict(r: &RunView) -> Markup {
    match r.outcome {
        RunOutcome::Pass => html! { span.badge.pass { "pass" } },
        RunOutcome::Fail => html! { span.badge.fail { "fail" } },
        RunOutcome::Error => {
            html! { span.badge.err title=(r.error.as_deref().unwrap_or("")) { "error" } }
        }
    }
}

fn signed(n: i64) -> String {
    if n > 0 {
        format!("+{n}")
    } else {
        n.to_string()
    }
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
    let title = match &s.namespace {
        Some(ns) => format!("{repo} · {ns}"),
        None => repo.to_string(),
    };
    layout(
        &title,
        true,
        html! {
            p.muted { a href="/" { "Repositories" } " / " a href=(href(repo, p.query, &[("namespace", None)])) { (repo) }
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
            @match latest {
                Some(m) => {
                    @let c = &m.coverage;
                    div.cards #headline {
                        div.card { "workloads with a proxy" b { (pct(c.workloads_with_proxy, c.workloads)) } span.muted { (c.workloads_with_proxy) " of " (c.workloads) } }
                        div.card { "namespaces STRICT" b { (pct(c.namespaces_strict, c.namespaces)) } span.muted { (c.namespaces_strict) " of " (c.namespaces) } }
                        div.card { "selectors effective" b { (pct(c.selectors_effective, c.selectors_effective + c.selectors_ineffective)) } span.muted { (c.selectors_ineffective) " select nothing" } }
                        div.card { "WorkloadEntries selected" b { (pct(c.workload_entries_selected, c.workload_entries_total)) } span.muted { (c.workload_entries_selected) " of " (c.workload_entries_total) } }
                        div.card { "findings" b { (m.findings.error) @if m.findings.error == 1 { " error" } @else { " errors" } } span.muted { (m.findings.warning) " warnings, " (m.findings.info) " info" } }
                    }
                }
                None => { p.error #no-data { "No baseline with coverage in this range." } }
            }
            h2 { "Coverage over time" }
            div.charts {
                (chart("chart-proxy", "Workloads with a proxy", vec![
                    Line { label: "workloads", color: "#98a2b3", values: values(s, |m| m.coverage.workloads) },
                    Line { label: "with a proxy", color: "#12b76a", values: values(s, |m| m.coverage.workloads_with_proxy) },
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
            @if s.namespace.is_none() {
                h2 { "Namespaces" }
                @if p.namespaces.is_empty() {
                    p.muted { "No namespace in the latest baseline of this range." }
                } @else {
                    table #namespaces {
                        thead { tr {
                            th { "namespace" } th { "mTLS" } th.num { "workloads with a proxy" }
                            th.num { "selectors effective" } th.num { "WorkloadEntries selected" }
                            th.num { "errors" } th.num { "warnings" }
                        } }
                        tbody {
                            @for (ns, m) in p.namespaces {
                                @let c = &m.coverage;
                                tr {
                                    td { a href=(href(repo, p.query, &[("namespace", Some(ns))])) { (ns) } }
                                    td { (c.mtls_mode.as_deref().unwrap_or("")) }
                                    td.num { (c.workloads_with_proxy) " / " (c.workloads) }
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
            h2 { "Last runs" }
            @if p.runs.is_empty() {
                p.muted { "No run recorded yet." }
            } @else {
                table #runs {
                    thead { tr {
                        th { "finished (UTC)" } th { "run" } th { "commit" } th { "verdict" }
                        th.num { "blocking" } th.num { "introduced" } th.num { "resolved" }
                        th.num { "Δ with a proxy" } th.num { "Δ STRICT" }
                    } }
                    tbody {
                        @for r in p.runs {
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
        },
    )
    .into_string()
}

/// At most this many findings are listed on a run's page.
pub const MAX_FINDINGS_SHOWN: usize = 500;

/// `/repos/{owner}/{repo}/runs/{id}`: one run (the page check runs link to).
pub fn run_page(
    repo: &str,
    run: &RunView,
    findings: &[crate::store::FindingRecord],
    namespaces: &[(String, Metrics)],
) -> String {
    let title = match run.pr {
        Some(n) => format!("Run {} · PR #{n}", run.id),
        None => format!("Run {} · baseline", run.id),
    };
    let head = run.coverage.head.as_ref().map(|c| c.counts());
    let base = run.coverage.base.as_ref().map(|c| c.counts());
    layout(
        &title,
        true,
        html! {
            p.muted { a href="/" { "Repositories" } " / " a href={"/repos/" (repo)} { (repo) } " / run " (run.id) }
            h1 { (title) " " (verdict(run)) }
            p {
                "Commit " a href=(run.commit_url) { code { (short_sha(&run.commit)) } }
                @if let Some(b) = &run.base_commit { " compared with " code { (short_sha(b)) } }
                @if let (Some(n), Some(url)) = (&run.pr, &run.pr_url) { ", " a href=(url) { "pull request #" (n) } }
                ", finished " (run.finished_at) " (UTC)."
            }
            @if let Some(e) = &run.error { p.error #run-error { "The check could not run: " (e) } }
            p { (run.blocking) " blocking; " (run.findings.introduced) " introduced, " (run.findings.existing) " existing, "
                (run.findings.resolved) " resolved; " (run.suppressed) " suppressed by exceptions." }
            @if let Some(head) = &head {
                h2 { "Coverage" }
                table #coverage {
                    thead { tr { th { "count" } @if base.is_some() { th.num { "base" } } th.num { "head" } @if base.is_some() { th.num { "change" } } } }
                    tbody {
                        @for (i, (name, h)) in head.iter().enumerate() {
                            @let b = base.as_ref().and_then(|b| b[i].1);
                            tr {
                                td { (name.replace('_', " ")) }
                                @if base.is_some() { td.num { (b.map(|v| v.to_string()).unwrap_or_default()) } }
                                td.num { (h.map(|v| v.to_string()).unwrap_or_default()) }
                                @if base.is_some() { td.num { (match (h, b) { (Some(h), Some(b)) => signed(h - b), _ => String::new() }) } }
                            }
                        }
                    }
                }
            }
            h2 { "Findings" }
            @if findings.is_empty() {
                p.muted { "None." }
            } @else {
                table #findings {
                    thead { tr { th { "severity" } th { "status" } th { "rule" } th { "resource" } th { "where" } th { "message" } } }
                    tbody {
                        @for f in findings.iter().take(MAX_FINDINGS_SHOWN) {
                            tr {
                                td { (f.severity) } td { (f.status) } td { code { (f.rule) } }
                                td { (f.resource_kind.as_deref().unwrap_or("")) @if let Some(ns) = &f.resource_namespace { " " (ns) "/" } @else { " " } (f.resource_name.as_deref().unwrap_or("")) }
                                td { (f.file) ":" (f.line) }
                                td style="white-space:normal" { (f.message) }
                            }
                        }
                    }
                }
                @if findings.len() > MAX_FINDINGS_SHOWN {
                    p.muted { (findings.len() - MAX_FINDINGS_SHOWN) " more not shown; the API and the stored report have them all." }
                }
            }
            @if !namespaces.is_empty() {
                h2 { "Namespaces (head)" }
                table #namespaces {
                    thead { tr { th { "namespace" } th { "mTLS" } th.num { "workloads with a proxy" } th.num { "selectors effective" } th.num { "errors" } } }
                    tbody {
                        @for (ns, m) in namespaces {
                            tr {
                                td { (ns) } td { (m.coverage.mtls_mode.as_deref().unwrap_or("")) }
                                td.num { (m.coverage.workloads_with_proxy) " / " (m.coverage.workloads) }
                                td.num { (m.coverage.selectors_effective) " / " (m.coverage.selectors_effective + m.coverage.selectors_ineffective) }
                                td.num { (m.findings.error) }
                            }
                        }
                    }
                }
            }
        },
    )
    .into_string()
}

/// A page saying what went wrong (bad parameter, unknown repository).
pub fn message_page(title: &str, message: &str) -> String {
    layout(
        title,
        true,
        html! {
            h1 { (title) }
            p.error { (message) }
            p { a href="/" { "Back to the repositories" } }
        },
    )
    .into_string()
}

#[cfg(test)]
mod tests;
