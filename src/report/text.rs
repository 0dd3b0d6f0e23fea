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
                "(no file)"
            } else {
                f.file.as_str()
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
            Status::Existing => "",
            Status::Resolved => " [resolved]",
        };
        let resource = f
            .resource
            .as_ref()
            .map(|r| format!(" {}:", r.id()))
            .unwrap_or_default();
        let code = f
            .istio_code
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}:{} {} {}{}{}{} {}",
            f.file, f.line, sev, f.rule, code, status, resource, f.message
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
        format!(
            "{}: {} resources in {} files ({} non-Kubernetes documents skipped)",
            r.revision, r.resources, r.files, r.skipped_documents
        )
    };
    if let Some(b) = &s.base {
        let _ = writeln!(out, "  base {}", rev(b));
    }
    let _ = writeln!(out, "  head {}", rev(&s.head));
    let t = &report.coverage.head.total;
    let _ = writeln!(
        out,
        "  coverage: {}/{} workloads with a proxy, {}/{} namespaces under STRICT, {}/{} selectors select something, {}/{} WorkloadEntries selected",
        t.workloads_with_proxy,
        t.workloads,
        t.namespaces_strict,
        t.namespaces,
        t.selectors_effective,
        t.selectors_effective + t.selectors_ineffective,
        t.workload_entries_selected,
        t.workload_entries_total
    );
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
                    "{} of {} requests and {} of {} TCP connections plaintext",
                    t.requests_plaintext,
                    t.requests_total,
                    t.tcp_connections_plaintext,
                    t.tcp_connections_total
                ),
            };
            let _ = writeln!(out, "    {subject}: {what}");
        }
    }
    for n in &s.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    out
}
