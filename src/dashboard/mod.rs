//! The dashboard's pages: server-rendered HTML (maud escapes every value), inline
//! SVG charts and CSS, no script and nothing fetched from elsewhere, so it works
//! offline. Pure functions of the data the handlers read; snapshot-tested.

pub mod chart;
mod repo;
mod run;

pub(crate) use repo::MAX_CLUSTER_LINES;
pub use repo::{repo_page, RepoPage};
pub use run::run_page;

use crate::store::{Metrics, RunOutcome};
use crate::trends::views::{RepoView, RunView};
use crate::trends::{percent, short_sha, Interval, Series};
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
nav#clusters{margin-top:6px}
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
