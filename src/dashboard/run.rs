//! `/repos/{owner}/{repo}/runs/{id}`: one run, with its coverage (per cluster where
//! the repository deploys to several), findings and namespaces.

use super::{layout, signed, verdict};
use crate::store::{CoverageRecord, FindingRecord, NamespaceMetrics};
use crate::trends::short_sha;
use crate::trends::views::RunView;
use maud::{html, Markup};

/// At most this many findings are listed on a run's page.
pub(crate) const MAX_FINDINGS_SHOWN: usize = 500;

/// `/repos/{owner}/{repo}/runs/{id}`: one run (the page check runs link to).
pub fn run_page(
    repo: &str,
    run: &RunView,
    findings: &[FindingRecord],
    namespaces: &[NamespaceMetrics],
    clusters: &[CoverageRecord],
) -> String {
    let title = match run.pr {
        Some(n) => format!("Run {} · PR #{n}", run.id),
        None => format!("Run {} · baseline", run.id),
    };
    let head = run.coverage.head.as_ref().map(|c| c.counts());
    let base = run.coverage.base.as_ref().map(|c| c.counts());
    let finding_clusters = findings.iter().any(|f| f.cluster.is_some());
    let namespace_clusters = namespaces.iter().any(|n| n.cluster.is_some());
    // Data planes and enforcement per namespace only where there is ambient or a
    // weakened policy to see.
    let namespace_ambient = namespaces
        .iter()
        .any(|n| n.metrics.coverage.workloads_ambient > 0);
    let namespace_authz = namespaces.iter().any(|n| {
        n.metrics.coverage.authz_reduced_to_l4 + n.metrics.coverage.authz_not_enforced > 0
    });
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
                                td { (crate::trends::metric(name).map_or_else(|| name.replace('_', " "), |m| m.label.to_string())) }
                                @if base.is_some() { td.num { (b.map(|v| v.to_string()).unwrap_or_default()) } }
                                td.num { (h.map(|v| v.to_string()).unwrap_or_default()) }
                                @if base.is_some() { td.num { (match (h, b) { (Some(h), Some(b)) => signed(h - b), _ => String::new() }) } }
                            }
                        }
                    }
                }
            }
            (clusters_table(clusters))
            h2 { "Findings" }
            @if findings.is_empty() {
                p.muted { "None." }
            } @else {
                table #findings {
                    thead { tr { th { "severity" } th { "status" } th { "rule" } @if finding_clusters { th { "cluster" } } th { "resource" } th { "where" } th { "message" } } }
                    tbody {
                        @for f in findings.iter().take(MAX_FINDINGS_SHOWN) {
                            tr {
                                td { (f.severity) } td { (f.status) } td { code { (f.rule) } }
                                @if finding_clusters { td { (f.cluster.as_deref().unwrap_or("")) } }
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
                    thead { tr { @if namespace_clusters { th { "cluster" } } th { "namespace" } th { "mTLS" } th.num { "workloads with a proxy" }
                        @if namespace_ambient { th.num { "ambient (with a waypoint)" } }
                        th.num { "selectors effective" } @if namespace_authz { th.num { "AuthorizationPolicies as written / reduced / not enforced" } } th.num { "errors" } } }
                    tbody {
                        @for n in namespaces {
                            @let m = &n.metrics;
                            tr {
                                @if namespace_clusters { td { (n.cluster.as_deref().unwrap_or("")) } }
                                td { (n.namespace) } td { (m.coverage.mtls_mode.as_deref().unwrap_or("")) }
                                td.num { (m.coverage.workloads_with_proxy) " / " (m.coverage.workloads) }
                                @if namespace_ambient { td.num { (m.coverage.workloads_ambient) " (" (m.coverage.workloads_waypoint) ")" } }
                                td.num { (m.coverage.selectors_effective) " / " (m.coverage.selectors_effective + m.coverage.selectors_ineffective) }
                                @if namespace_authz { td.num { (m.coverage.authz_as_written) " / " (m.coverage.authz_reduced_to_l4) " / " (m.coverage.authz_not_enforced) } }
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

/// Each cluster's coverage in a run of a repository that deploys to several: head,
/// and for a PR the change from base.
fn clusters_table(clusters: &[CoverageRecord]) -> Markup {
    let heads: Vec<&CoverageRecord> = clusters
        .iter()
        .filter(|c| c.cluster.is_some() && c.revision == "head")
        .collect();
    let base_of = |cluster: &Option<String>| {
        clusters
            .iter()
            .find(|c| &c.cluster == cluster && c.revision == "base")
            .map(|c| &c.total)
    };
    let with_base = heads.iter().any(|h| base_of(&h.cluster).is_some());
    let with_ambient = heads.iter().any(|h| h.total.workloads_ambient > 0);
    html! {
        @if !heads.is_empty() {
            h2 { "Clusters (head)" }
            table #clusters {
                thead { tr {
                    th { "cluster" } th.num { "workloads with a proxy" }
                    @if with_ambient { th.num { "ambient (with a waypoint)" } }
                    th.num { "namespaces STRICT" }
                    th.num { "selectors effective" } th.num { "WorkloadEntries selected" }
                    @if with_base { th.num { "Δ with a proxy" } th.num { "Δ STRICT" } }
                } }
                tbody {
                    @for h in &heads {
                        @let t = &h.total;
                        @let b = base_of(&h.cluster);
                        tr {
                            td { (h.cluster.as_deref().unwrap_or("")) }
                            td.num { (t.workloads_with_proxy) " / " (t.workloads) }
                            @if with_ambient { td.num { (t.workloads_ambient) " (" (t.workloads_waypoint) ")" } }
                            td.num { (t.namespaces_strict) " / " (t.namespaces) }
                            td.num { (t.selectors_effective) " / " (t.selectors_effective + t.selectors_ineffective) }
                            td.num { (t.workload_entries_selected) " / " (t.workload_entries_total) }
                            @if with_base {
                                td.num { (b.map(|b| signed(t.workloads_with_proxy - b.workloads_with_proxy)).unwrap_or_default()) }
                                td.num { (b.map(|b| signed(t.namespaces_strict - b.namespaces_strict)).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
        }
    }
}
