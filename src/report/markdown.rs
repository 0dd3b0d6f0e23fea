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
            Links::None => code(&label),
            Links::Blob {
                base_url,
                sha,
                prefix,
            } => {
                let label = cell(&label).replace('[', "\\[").replace(']', "\\]");
                format!(
                    "[{label}]({base_url}/blob/{sha}/{prefix}{}#L{})",
                    url_path(&f.file),
                    f.line
                )
            }
        }
    }
}

/// A repository path in a link: what is not a plain path character percent-encoded.
fn url_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn icon(s: Severity) -> &'static str {
    match s {
        Severity::Error => "🔴 error",
        Severity::Warning => "🟠 warning",
        Severity::Info => "🔵 info",
    }
}

/// Markdown table cells cannot hold `|` or newlines; control characters are shown
/// escaped (a file name must not forge a row).
fn cell(s: &str) -> String {
    super::visible(&s.replace('\n', " ")).replace('|', "\\|")
}

/// Findings in a table; in a repository with several clusters, one table per
/// cluster under its name, what no cluster claims last.
fn table(out: &mut String, findings: &[&Finding], links: &Links) {
    if findings.iter().all(|f| f.cluster.is_none()) {
        rows(out, findings, links);
        return;
    }
    let mut clusters: Vec<Option<&str>> = findings.iter().map(|f| f.cluster.as_deref()).collect();
    clusters.sort_by_key(|c| (c.is_none(), *c));
    clusters.dedup();
    for (i, cluster) in clusters.into_iter().enumerate() {
        let of: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.cluster.as_deref() == cluster)
            .copied()
            .collect();
        if i > 0 {
            out.push('\n');
        }
        let _ = match cluster {
            Some(c) => writeln!(out, "**Cluster {}** ({})\n", code(c), of.len()),
            None => writeln!(out, "**On no named cluster** ({})\n", of.len()),
        };
        rows(out, &of, links);
    }
}

fn rows(out: &mut String, findings: &[&Finding], links: &Links) {
    let _ = writeln!(out, "| Severity | Rule | Where | What happens |");
    let _ = writeln!(out, "|---|---|---|---|");
    for f in findings {
        let resource = f
            .resource
            .as_ref()
            .map(|r| format!("<br>{}", code(&r.id())))
            .unwrap_or_default();
        let code = f.istio_code_suffix();
        let _ = writeln!(
            out,
            "| {} | {}{} | {}{} | {} |",
            icon(f.severity),
            self::code(&f.rule),
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
    let has_base = s.base.is_some();
    // Existing findings that still block (what could not be checked) are shown, not
    // folded away with the old debt.
    let (unchecked, existing): (Vec<&Finding>, Vec<&Finding>) = by(Status::Existing)
        .into_iter()
        .partition(|f| has_base && f.unchecked);
    let resolved = by(Status::Resolved);

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

    if !unchecked.is_empty() {
        let _ = writeln!(
            out,
            "### Not checked: blocks this change ({})\n",
            unchecked.len()
        );
        table(&mut out, &unchecked, links);
        out.push('\n');
    }

    if let Some(c) = &report.changes {
        out.push_str(&changes::section(c));
    }

    coverage_table(&mut out, report);
    if let Some(e) = &report.evidence {
        out.push_str(&evidence_section(e));
    }

    if !resolved.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Resolved by this change ({})</summary>\n",
            resolved.len()
        );
        for f in &resolved {
            let cluster = f
                .cluster
                .as_ref()
                .map(|c| format!("cluster {}, ", code(c)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "- {cluster}{} {}: {}",
                code(&f.rule),
                cell(
                    &f.resource
                        .as_ref()
                        .map(|r| r.id())
                        .unwrap_or_else(|| f.file.clone())
                ),
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
            let _ = writeln!(out, "> {}", cell(n));
        }
        out.push('\n');
    }
    roots_section(&mut out, &s.roots);
    out
}

/// Every render root with its outcome, folded: the note above gives the counts.
fn roots_section(out: &mut String, roots: &[super::RootOutcome]) {
    if roots.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<details><summary>Render roots ({})</summary>\n",
        roots.len()
    );
    let _ = writeln!(out, "| Root | Defined in | Outcome |");
    let _ = writeln!(out, "|---|---|---|");
    for r in roots {
        let reason = r
            .reason
            .as_deref()
            .map(|w| format!(": {}", cell(w)))
            .unwrap_or_default();
        let cluster = r
            .cluster
            .as_ref()
            .map(|c| format!(" on cluster {}", code(c)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {}{cluster} | {} | {}{reason} |",
            cell(&r.root),
            code(&format!("{}:{}", r.file, r.line)),
            r.outcome.as_str()
        );
    }
    let _ = writeln!(out, "\n</details>\n");
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
    use crate::model::coverage::TotalCoverage;
    let head = &report.coverage.head.total;
    let base = report.coverage.base.as_ref().map(|c| &c.total);
    let either = |f: fn(&TotalCoverage) -> bool| f(head) || base.is_some_and(f);
    // Data planes and enforcement only where they say something: a repository without
    // ambient workloads or weakened policies reads as before.
    let ambient = either(|t| t.workloads_ambient > 0);
    let weakened = either(TotalCoverage::authz_weakened);
    type Ratio = fn(&TotalCoverage) -> (usize, usize);
    let mut picks: Vec<(&str, Ratio)> = Vec::new();
    if ambient {
        picks.push(("Workloads with a sidecar", |t| {
            (t.workloads_with_proxy, t.workloads)
        }));
        picks.push(("Workloads in ambient (ztunnel)", |t| {
            (t.workloads_ambient, t.workloads)
        }));
        picks.push(("Ambient workloads behind a waypoint", |t| {
            (t.workloads_waypoint, t.workloads_ambient)
        }));
        picks.push(("Workloads with neither", |t| {
            (t.workloads_without_dataplane(), t.workloads)
        }));
    } else {
        picks.push(("Workloads with a proxy", |t| {
            (t.workloads_with_proxy, t.workloads)
        }));
    }
    picks.push(("Namespaces under STRICT", |t| {
        (t.namespaces_strict, t.namespaces)
    }));
    picks.push(("Selectors that select something", |t| {
        (
            t.selectors_effective,
            t.selectors_effective + t.selectors_ineffective,
        )
    }));
    picks.push(("WorkloadEntries a ServiceEntry selects", |t| {
        (t.workload_entries_selected, t.workload_entries_total)
    }));
    if either(|t| t.routes() > 0) {
        picks.push(("Route destinations that reach pods", |t| {
            (t.routes_resolving, t.routes())
        }));
    }
    if weakened {
        picks.push(("AuthorizationPolicies enforced as written", |t| {
            (t.authz_as_written, t.authz_counted())
        }));
        picks.push(("AuthorizationPolicies reduced to L4 by ztunnel", |t| {
            (t.authz_reduced_to_l4, t.authz_counted())
        }));
        picks.push(("AuthorizationPolicies not enforced", |t| {
            (t.authz_not_enforced, t.authz_counted())
        }));
    }
    let ratio = |t: &TotalCoverage, pick: Ratio| {
        let (n, of) = pick(t);
        format!("{n}/{of}")
    };
    let rows: Vec<(&str, String, Option<String>)> = picks
        .into_iter()
        .map(|(name, pick)| (name, ratio(head, pick), base.map(|b| ratio(b, pick))))
        .collect();
    let _ = writeln!(out, "### Mesh coverage\n");
    if !report.coverage.clusters.is_empty() {
        let _ = writeln!(
            out,
            "Added up over the {} clusters this repository deploys to; each is judged on its own (table below).\n",
            report.coverage.clusters.len()
        );
    }
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
    clusters_coverage(out, &report.coverage.clusters);
}

/// Each cluster's coverage, in a repository with several: base → head where the
/// change moves it.
fn clusters_coverage(out: &mut String, clusters: &[super::ClusterCoverage]) {
    use crate::model::coverage::TotalCoverage;
    if clusters.is_empty() {
        return;
    }
    let any = |f: fn(&TotalCoverage) -> bool| {
        clusters
            .iter()
            .any(|c| f(&c.head.total) || c.base.as_ref().is_some_and(|b| f(&b.total)))
    };
    type Cell = fn(&TotalCoverage) -> String;
    let mut columns: Vec<(&str, Cell)> = vec![
        ("Workloads with a proxy", |t| {
            format!("{}/{}", t.workloads_with_proxy, t.workloads)
        }),
        ("Namespaces under STRICT", |t| {
            format!("{}/{}", t.namespaces_strict, t.namespaces)
        }),
        ("Selectors that select something", |t| {
            format!(
                "{}/{}",
                t.selectors_effective,
                t.selectors_effective + t.selectors_ineffective
            )
        }),
        ("WorkloadEntries selected", |t| {
            format!(
                "{}/{}",
                t.workload_entries_selected, t.workload_entries_total
            )
        }),
    ];
    if any(|t| t.workloads_ambient > 0) {
        columns[0] = ("Workloads: sidecar · ambient (waypoint) · neither", |t| {
            format!(
                "{} · {} ({}) · {}",
                t.workloads_with_proxy,
                t.workloads_ambient,
                t.workloads_waypoint,
                t.workloads_without_dataplane()
            )
        });
    }
    if any(|t| t.routes() > 0) {
        columns.push(("Routes: reach pods · nowhere · not checked", |t| {
            format!(
                "{} · {} · {}",
                t.routes_resolving, t.routes_nowhere, t.routes_unchecked
            )
        }));
    }
    if any(TotalCoverage::authz_weakened) {
        columns.push((
            "AuthorizationPolicies: as written · reduced to L4 · not enforced",
            |t| {
                format!(
                    "{} · {} · {}",
                    t.authz_as_written, t.authz_reduced_to_l4, t.authz_not_enforced
                )
            },
        ));
    }
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let _ = writeln!(
        out,
        "| Cluster | {} |\n|---|{}",
        names.join(" | "),
        "---|".repeat(columns.len())
    );
    for c in clusters {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, cell)| {
                let head = cell(&c.head.total);
                match c.base.as_ref().map(|b| cell(&b.total)) {
                    Some(b) if b != head => format!("{b} → **{head}**"),
                    _ => head,
                }
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", code(&c.cluster), cells.join(" | "));
    }
    out.push('\n');
}

/// The telemetry evidence the mTLS rules were judged on: numbers per subject, and the
/// queries, so a reviewer can rerun them over the same window.
pub fn evidence_section(e: &crate::evidence::Evidence) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### Telemetry evidence\n");
    let mut header = Vec::new();
    if let Some(source) = &e.source {
        header.push(format!("Source: {}", cell(source)));
    }
    if let Some(w) = &e.window {
        header.push(format!("window **{}**", cell(w)));
    }
    if let Some(t) = &e.taken_at {
        header.push(format!("taken {}", cell(t)));
    }
    if !header.is_empty() {
        let _ = writeln!(out, "{}\n", header.join(" · "));
    }
    let subjects: Vec<(String, &crate::evidence::TrafficEvidence)> = e.subjects().collect();
    if subjects.is_empty() {
        let _ = writeln!(out, "No scope was asked about.\n");
        return out;
    }
    let _ = writeln!(
        out,
        "| Scope | Requests plaintext / total | TCP connections plaintext / total | Result |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    // A PR comment has a size limit: the worst rows first, at most MAX_ROWS of them.
    let mut subjects = subjects;
    subjects.sort_by_key(|(key, t)| (rank(t), key.clone()));
    for (key, t) in subjects.iter().take(MAX_ROWS) {
        let (requests, tcp) = match &t.error {
            Some(_) => ("–".to_string(), "–".to_string()),
            None => (
                format!("{} / {}", t.requests_plaintext, t.requests_total),
                format!(
                    "{} / {}{}",
                    t.tcp_connections_plaintext,
                    t.tcp_connections_total,
                    super::text::plaintext_bytes(t.tcp_bytes_plaintext)
                ),
            ),
        };
        let result = match &t.error {
            Some(err) => format!("⚠️ no evidence: {}", cell(err)),
            None if t.plaintext() > 0 => "❌ plaintext present".to_string(),
            None if t.total() == 0 => "⚠️ no traffic (no data is not evidence)".to_string(),
            None => "✅ zero plaintext".to_string(),
        };
        let cached = t
            .taken_at
            .as_ref()
            .map(|at| format!(" (answer from {})", cell(at)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {requests} | {tcp} | {result}{cached} |",
            subject_label(key, t)
        );
    }
    if subjects.len() > MAX_ROWS {
        let _ = writeln!(
            out,
            "| … and {} more (all of them in the JSON report and the history) | | | |",
            subjects.len() - MAX_ROWS
        );
    }
    out.push('\n');
    let with_queries: Vec<&(String, &crate::evidence::TrafficEvidence)> = subjects
        .iter()
        .take(MAX_QUERY_SUBJECTS)
        .filter(|(_, t)| !t.queries.is_empty() || t.query.is_some())
        .collect();
    if !with_queries.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>Queries (instant queries; rerun them in Prometheus)</summary>\n"
        );
        for (key, t) in with_queries {
            let mut text: Vec<String> = t
                .queries
                .iter()
                .map(|(name, q)| format!("# {name}\n{q}"))
                .collect();
            if let Some(q) = &t.query {
                text.push(q.clone());
            }
            let body = text.join("\n");
            let fence = "`".repeat(longest_backtick_run(&body).max(2) + 1);
            let _ = writeln!(
                out,
                "{}:\n\n{fence}promql\n{body}\n{fence}\n",
                subject_label(key, t)
            );
        }
        let _ = writeln!(out, "</details>\n");
    }
    out
}

const MAX_ROWS: usize = 50;
const MAX_QUERY_SUBJECTS: usize = 10;

/// Order of rows: plaintext first, then no evidence, no traffic, zero plaintext.
fn rank(t: &crate::evidence::TrafficEvidence) -> u8 {
    match &t.error {
        None if t.plaintext() > 0 => 0,
        Some(_) => 1,
        None if t.total() == 0 => 2,
        None => 3,
    }
}

/// `mesh` → the whole mesh; `namespace:shop` → namespace `shop`; `workload:shop:app=cart` → the workloads.
fn subject_label(key: &str, t: &crate::evidence::TrafficEvidence) -> String {
    if key == "mesh" {
        return "the whole mesh".to_string();
    }
    if let Some(ns) = key.strip_prefix("namespace:") {
        return format!("namespace {}", code(ns));
    }
    let mut parts = key.splitn(3, ':');
    let (_, ns, labels) = (parts.next(), parts.next(), parts.next());
    let workloads = if t.workloads.is_empty() {
        "workloads".to_string()
    } else {
        let names: Vec<String> = t.workloads.iter().map(|w| code(w)).collect();
        format!("workloads {}", names.join(", "))
    };
    format!(
        "{workloads} in {} (selector {})",
        code(ns.unwrap_or("")),
        code(labels.unwrap_or(""))
    )
}

/// Inline code that survives backticks and pipes in the value.
fn code(s: &str) -> String {
    let s = cell(s);
    let fence = "`".repeat(longest_backtick_run(&s) + 1);
    if s.starts_with('`') || s.ends_with('`') {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}
