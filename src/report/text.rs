//! Terminal output: findings grouped by file, then a summary.

use super::{Report, Verdict};
use crate::finding::{Severity, Status};
use owo_colors::OwoColorize;
use std::fmt::Write;

pub fn render(report: &Report, color: bool) -> String {
    let mut out = String::new();
    let mut current_file: Option<&str> = None;
    for f in &report.findings {
        if current_file != Some(f.file.as_str()) {
            if current_file.is_some() {
                out.push('\n');
            }
            let header = if f.file.is_empty() {
                "(no file)".into()
            } else {
                super::visible(&f.file)
            };
            if color {
                let _ = writeln!(out, "{}", header.bold());
            } else {
                let _ = writeln!(out, "{header}");
            }
            current_file = Some(&f.file);
        }
        let sev = match (f.severity, color) {
            (Severity::Error, true) => format!("{}", "error".red().bold()),
            (Severity::Warning, true) => format!("{}", "warning".yellow().bold()),
            (Severity::Info, true) => format!("{}", "info".blue()),
            (s, false) => s.to_string(),
        };
        let status = match f.status {
            Status::Introduced => " [introduced]",
            Status::Existing if f.unchecked && report.summary.base.is_some() => {
                " [not checked: blocks]"
            }
            Status::Existing => "",
            Status::Resolved => " [resolved]",
        };
        let resource = f
            .resource
            .as_ref()
            .map(|r| format!(" {}:", super::visible(&r.id())))
            .unwrap_or_default();
        let code = f.istio_code_suffix();
        let cluster = f
            .cluster
            .as_ref()
            .map(|c| format!(" [cluster {}]", super::visible(c)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}:{} {} {}{}{}{}{} {}",
            super::visible(&f.file),
            f.line,
            sev,
            super::visible(&f.rule),
            code,
            status,
            cluster,
            resource,
            super::visible(&f.message)
        );
    }
    if !report.findings.is_empty() {
        out.push('\n');
    }
    let s = &report.summary;
    let verdict = match (s.verdict, color) {
        (Verdict::Pass, true) => format!("{}", "PASS".green().bold()),
        (Verdict::Fail, true) => format!("{}", "FAIL".red().bold()),
        (Verdict::Pass, false) => "PASS".to_string(),
        (Verdict::Fail, false) => "FAIL".to_string(),
    };
    let _ = writeln!(
        out,
        "meshward: {verdict}: {} blocking (fail-on {}); {} introduced, {} existing, {} resolved; {} errors, {} warnings, {} info{}",
        s.blocking,
        s.fail_on.as_str(),
        s.introduced,
        s.existing,
        s.resolved,
        s.errors,
        s.warnings,
        s.infos,
        if s.suppressed > 0 { format!("; {} suppressed by exceptions", s.suppressed) } else { String::new() },
    );
    let rev = |r: &super::RevisionSummary| {
        let not_read = match r.files_not_read {
            0 => String::new(),
            n => format!("; {n} dot-files and CI configs not read as manifests"),
        };
        format!(
            "{}: {} resources in {} files ({} documents that are not cluster objects skipped{not_read})",
            r.revision, r.resources, r.files, r.skipped_documents
        )
    };
    if let Some(b) = &s.base {
        let _ = writeln!(out, "  base {}", rev(b));
    }
    let _ = writeln!(out, "  head {}", rev(&s.head));
    let coverage = |t: &crate::model::coverage::TotalCoverage| {
        // With ambient workloads, "a proxy" would not say which: the data planes.
        let workloads = if t.workloads_ambient > 0 {
            format!(
                "{} workloads ({} sidecar, {} ambient of which {} behind a waypoint, {} none)",
                t.workloads,
                t.workloads_with_proxy,
                t.workloads_ambient,
                t.workloads_waypoint,
                t.workloads_without_dataplane()
            )
        } else {
            format!(
                "{}/{} workloads with a proxy",
                t.workloads_with_proxy, t.workloads
            )
        };
        let authz = if t.authz_weakened() {
            format!(
                ", AuthorizationPolicies: {} enforced as written, {} reduced to L4 by ztunnel, {} not enforced",
                t.authz_as_written, t.authz_reduced_to_l4, t.authz_not_enforced
            )
        } else {
            String::new()
        };
        let routes = if t.routes() > 0 {
            format!(
                ", routes: {}/{} reach pods, {} go nowhere, {} not checked",
                t.routes_resolving,
                t.routes(),
                t.routes_nowhere,
                t.routes_unchecked
            )
        } else {
            String::new()
        };
        format!(
            "{workloads}, {}/{} namespaces under STRICT, {}/{} selectors select something, {}/{} WorkloadEntries selected{authz}{routes}",
            t.namespaces_strict,
            t.namespaces,
            t.selectors_effective,
            t.selectors_effective + t.selectors_ineffective,
            t.workload_entries_selected,
            t.workload_entries_total
        )
    };
    let _ = writeln!(out, "  coverage: {}", coverage(&report.coverage.head.total));
    for c in &report.coverage.clusters {
        let _ = writeln!(
            out,
            "    cluster {}: {}",
            super::visible(&c.cluster),
            coverage(&c.head.total)
        );
    }
    if let Some(c) = report.changes.as_ref().filter(|c| !c.is_empty()) {
        changes(&mut out, c);
    }
    if let Some(e) = &report.evidence {
        let _ = writeln!(
            out,
            "  evidence: {} over {}",
            e.source.as_deref().unwrap_or("(no source given)"),
            e.window.as_deref().unwrap_or("(no window given)")
        );
        for (subject, t) in e.subjects() {
            let what = match &t.error {
                Some(err) => format!("no evidence: {err}"),
                None => format!(
                    "{} of {} requests and {} of {} TCP connections plaintext{}",
                    t.requests_plaintext,
                    t.requests_total,
                    t.tcp_connections_plaintext,
                    t.tcp_connections_total,
                    plaintext_bytes(t.tcp_bytes_plaintext)
                ),
            };
            let _ = writeln!(out, "    {subject}: {what}");
        }
    }
    for n in &s.notes {
        let _ = writeln!(out, "  note: {}", super::visible(n));
    }
    if !s.roots.is_empty() {
        let _ = writeln!(out, "  render roots:");
        for r in &s.roots {
            let reason = r
                .reason
                .as_deref()
                .map(|w| format!(": {}", super::visible(w)))
                .unwrap_or_default();
            let cluster = r
                .cluster
                .as_ref()
                .map(|c| format!(" on cluster {}", super::visible(c)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    {}{cluster} ({}:{}): {}{reason}",
                super::visible(&r.root),
                super::visible(&r.file),
                r.line,
                r.outcome.as_str()
            );
        }
    }
    out
}

/// Lines per part of the change summary; the rest are counted and left to JSON.
const MAX_LINES: usize = 10;

fn more(out: &mut String, total: usize) {
    if total > MAX_LINES {
        let _ = writeln!(
            out,
            "      …and {} more (--format json, under `changes`)",
            total - MAX_LINES
        );
    }
}

fn list(ids: &[String]) -> String {
    if ids.is_empty() {
        "none".into()
    } else {
        ids.join(", ")
    }
}

/// What the change does to the mesh, in brief (the markdown report has the tables).
fn changes(out: &mut String, c: &crate::changes::Changes) {
    use crate::units::quantity::{bytes_text, cores_text, signed_text};
    let _ = writeln!(out, "  what this change does to the mesh:");
    let p = &c.proxy_cost;
    if let Some(summary) = &p.summary {
        let _ = writeln!(out, "    proxy cost: {summary}");
        for w in p.workloads.iter().take(MAX_LINES) {
            let _ = writeln!(
                out,
                "      {}: {} → {} proxies{}, {} CPU, {} memory ({})",
                w.workload,
                w.base_proxies,
                w.head_proxies,
                if w.autoscaler.is_some() {
                    " (HPA max)"
                } else {
                    ""
                },
                signed_text(w.cpu_millicores, cores_text(w.cpu_millicores)),
                signed_text(w.memory_bytes, bytes_text(w.memory_bytes)),
                w.reason
            );
        }
        more(out, p.workloads.len());
        for u in &p.uncounted {
            let _ = writeln!(out, "      {} not counted: {}", u.workload, u.reason);
        }
    }
    for h in c.latency.iter().take(MAX_LINES) {
        let _ = writeln!(
            out,
            "    new hop: {} → {}: {} → {} proxies per call (from {})",
            h.caller,
            h.callee,
            h.proxies_before,
            h.proxies_after,
            h.decided_by.join("; ")
        );
    }
    more(out, c.latency.len());
    for i in c.identities.iter().take(MAX_LINES) {
        let mut line = format!(
            "    identity: {} ({}): {}",
            i.subject,
            i.change.as_str(),
            i.spiffe_id
        );
        if let Some(old) = &i.base_service_account {
            line.push_str(&format!(", service account {old} → {}", i.service_account));
        }
        line.push_str(&format!(
            "; allowed by {}; denied by {}",
            list(&i.allowed_by),
            list(&i.denied_by)
        ));
        if !i.proxy {
            line.push_str("; no proxy: presents no identity, its calls are plaintext");
        }
        let _ = writeln!(out, "{line}");
    }
    more(out, c.identities.len());
    for v in c.vm_bootstrap.iter().take(MAX_LINES) {
        let selected = match (v.service_entry_count, v.services.is_empty()) {
            (0, true) => {
                "no ServiceEntry selects it: its VMs get no name to be called by".to_string()
            }
            (0, false) => format!(
                "no ServiceEntry selects it; Kubernetes Services do: {}",
                list(&v.services)
            ),
            _ => format!("selected by {}", list(&v.service_entries)),
        };
        let _ = writeln!(
            out,
            "    VM bootstrap: {} ({}): identity {}, token for {}/{}; {selected}",
            v.workload_group,
            v.change.as_str(),
            v.spiffe_id,
            v.token.namespace,
            v.token.service_account
        );
    }
    more(out, c.vm_bootstrap.len());
    for s in c.selectors.iter().take(MAX_LINES) {
        let what = match &s.labels {
            Some(l) => format!(
                "{} [{}]",
                s.path.join("."),
                if l.is_empty() {
                    "no labels".to_string()
                } else {
                    l.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                }
            ),
            None => format!("({}-wide)", s.scope),
        };
        let now = s.head.total();
        let counts = match &s.base {
            Some(b) => format!("{} → {now}", b.total()),
            None => format!("new → {now}"),
        };
        let mut line = format!(
            "    selector: {} {what} selects {counts} ({})",
            s.resource,
            s.change.as_str()
        );
        if now == 0 {
            line.push_str(": selects nothing");
        }
        if !s.lost.is_empty() {
            line.push_str(&format!("; no longer selects {}", s.lost.join(", ")));
        }
        let _ = writeln!(out, "{line}");
    }
    more(out, c.selectors.len());
    for d in c.dataplanes.iter().take(MAX_LINES) {
        let waypoints = if d.head_waypoints.is_empty() {
            String::new()
        } else {
            format!(" ({})", d.head_waypoints.join(", "))
        };
        let _ = writeln!(
            out,
            "    data plane: {}: {} → {}{waypoints}: {}",
            d.workload,
            d.base_label(),
            d.head_label(),
            d.reason
        );
    }
    more(out, c.dataplanes.len());
    for e in c.authz_enforcement.iter().take(MAX_LINES) {
        let _ = writeln!(
            out,
            "    AuthorizationPolicy enforcement: {}: {} → {}: {}",
            e.policy,
            e.base.map_or("new or selecting nothing", |b| b.text()),
            e.head.text(),
            e.why
        );
    }
    more(out, c.authz_enforcement.len());
}

/// Plaintext bytes, shown only when there are some (a plaintext connection opened
/// before the evidence window and still open).
pub(super) fn plaintext_bytes(bytes: u64) -> String {
    if bytes == 0 {
        String::new()
    } else {
        format!(", {bytes} bytes received in plaintext")
    }
}
