//! The markdown body a PR comment carries (and `check --format markdown`).

pub mod changes;

use super::{Report, Verdict};
use crate::finding::{Finding, Severity, Status};
use std::fmt::Write;

/// How file:line references become links.
pub enum Links {
    /// Plain `file:line`.
    None,
    /// `https://github.com/owner/repo/blob/<sha>/<prefix><file>#L<line>`.
    Blob {
        base_url: String,
        sha: String,
        prefix: String,
    },
}

impl Links {
    fn location(&self, f: &Finding) -> String {
        let label = format!("{}:{}", f.file, f.line);
        match self {
            Links::None => format!("`{label}`"),
            Links::Blob {
                base_url,
                sha,
                prefix,
            } => {
                format!(
                    "[{label}]({base_url}/blob/{sha}/{prefix}{}#L{})",
                    f.file, f.line
                )
            }
        }
    }
}

fn icon(s: Severity) -> &'static str {
    match s {
        Severity::Error => "🔴 error",
        Severity::Warning => "🟠 warning",
        Severity::Info => "🔵 info",
    }
}

/// Markdown table cells cannot hold `|` or newlines.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn table(out: &mut String, findings: &[&Finding], links: &Links) {
    let _ = writeln!(out, "| Severity | Rule | Where | What happens |");
    let _ = writeln!(out, "|---|---|---|---|");
    for f in findings {
        let resource = f
            .resource
            .as_ref()
            .map(|r| format!("<br>`{}`", r.id()))
            .unwrap_or_default();
        let code = f
            .istio_code
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | `{}`{} | {}{} | {} |",
            icon(f.severity),
            f.rule,
            code,
            links.location(f),
            resource,
            cell(&f.message)
        );
    }
}

pub fn render(report: &Report, links: &Links) -> String {
    let s = &report.summary;
    let mut out = String::new();
    let headline = match s.verdict {
        Verdict::Fail => format!(
            "❌ **meshward: {} blocking finding{}** (fail-on {})",
            s.blocking,
            if s.blocking == 1 { "" } else { "s" },
            s.fail_on.as_str()
        ),
        Verdict::Pass => format!(
            "✅ **meshward: no blocking findings** (fail-on {})",
            s.fail_on.as_str()
        ),
    };
    let _ = writeln!(out, "{headline}\n");
    let _ = writeln!(
        out,
        "{} introduced · {} existing · {} resolved{}\n",
        s.introduced,
        s.existing,
        s.resolved,
        if s.suppressed > 0 {
            format!(" · {} covered by exceptions", s.suppressed)
        } else {
            String::new()
        }
    );

    let by = |status: Status| -> Vec<&Finding> {
        report
            .findings
            .iter()
            .filter(|f| f.status == status)
            .collect()
    };
    let introduced = by(Status::Introduced);
    let existing = by(Status::Existing);
    let resolved = by(Status::Resolved);
    let has_base = s.base.is_some();

    if has_base {
        let _ = writeln!(
            out,
            "### Introduced by this change ({})\n",
            introduced.len()
        );
        if introduced.is_empty() {
            let _ = writeln!(out, "Nothing new.\n");
        } else {
            table(&mut out, &introduced, links);
            out.push('\n');
        }
    }

    if let Some(c) = &report.changes {
        out.push_str(&changes::section(c));
    }

    coverage_table(&mut out, report);

    if !resolved.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Resolved by this change ({})</summary>\n",
            resolved.len()
        );
        for f in &resolved {
            let _ = writeln!(
                out,
                "- `{}` {}: {}",
                f.rule,
                f.resource
                    .as_ref()
                    .map(|r| r.id())
                    .unwrap_or_else(|| f.file.clone()),
                cell(&f.message)
            );
        }
        let _ = writeln!(out, "\n</details>\n");
    }
    if !existing.is_empty() {
        if has_base {
            let _ = writeln!(
                out,
                "<details><summary>Existing findings ({})</summary>\n",
                existing.len()
            );
            table(&mut out, &existing, links);
            let _ = writeln!(out, "\n</details>\n");
        } else {
            let _ = writeln!(out, "### Findings ({})\n", existing.len());
            table(&mut out, &existing, links);
            out.push('\n');
        }
    }
    if !s.notes.is_empty() {
        for n in &s.notes {
            let _ = writeln!(out, "> {n}");
        }
        out.push('\n');
    }
    out
}

/// A row label inside a sentence: "Workloads with…" → "workloads with…", but
/// "WorkloadEntries…" stays as the kind is spelled.
fn in_sentence(label: &str) -> String {
    let first_word = label.split(' ').next().unwrap_or_default();
    if first_word.chars().skip(1).any(char::is_uppercase) {
        return label.to_string();
    }
    let mut chars = label.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn coverage_table(out: &mut String, report: &Report) {
    let head = &report.coverage.head.total;
    let base = report.coverage.base.as_ref().map(|c| &c.total);
    let rows: Vec<(&str, String, Option<String>)> = vec![
        (
            "Workloads with a proxy",
            format!("{}/{}", head.workloads_with_proxy, head.workloads),
            base.map(|b| format!("{}/{}", b.workloads_with_proxy, b.workloads)),
        ),
        (
            "Namespaces under STRICT",
            format!("{}/{}", head.namespaces_strict, head.namespaces),
            base.map(|b| format!("{}/{}", b.namespaces_strict, b.namespaces)),
        ),
        (
            "Selectors that select something",
            format!(
                "{}/{}",
                head.selectors_effective,
                head.selectors_effective + head.selectors_ineffective
            ),
            base.map(|b| {
                format!(
                    "{}/{}",
                    b.selectors_effective,
                    b.selectors_effective + b.selectors_ineffective
                )
            }),
        ),
        (
            "WorkloadEntries a ServiceEntry selects",
            format!(
                "{}/{}",
                head.workload_entries_selected, head.workload_entries_total
            ),
            base.map(|b| {
                format!(
                    "{}/{}",
                    b.workload_entries_selected, b.workload_entries_total
                )
            }),
        ),
    ];
    let _ = writeln!(out, "### Mesh coverage\n");
    match base {
        Some(_) => {
            // The delta first, in words: what a reviewer wants from the table.
            let changes: Vec<String> = rows
                .iter()
                .filter_map(|(name, h, b)| match b {
                    Some(b) if b != h => Some(format!("{} {b} → {h}", in_sentence(name))),
                    _ => None,
                })
                .collect();
            if changes.is_empty() {
                let _ = writeln!(out, "This change leaves coverage as it was.\n");
            } else {
                let _ = writeln!(out, "This change moves {}.\n", changes.join("; "));
            }
            let _ = writeln!(out, "| | base | head |\n|---|---|---|");
            for (name, h, b) in rows {
                let b = b.unwrap_or_default();
                let changed = if b != h { " **(changed)**" } else { "" };
                let _ = writeln!(out, "| {name} | {b} | {h}{changed} |");
            }
        }
        None => {
            let _ = writeln!(out, "| | now |\n|---|---|");
            for (name, h, _) in rows {
                let _ = writeln!(out, "| {name} | {h} |");
            }
        }
    }
    out.push('\n');
}
