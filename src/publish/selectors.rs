//! What each selector the change touches selects, before and after: "this
//! ServiceEntry selects 0 WorkloadEntries" is the fact a reviewer cannot see in the
//! YAML. A selector is touched when the change adds or edits its resource, or when
//! what it selects changes (labels edited elsewhere, workloads added or removed).

use crate::model::Selector;
use crate::report::Report;
use std::fmt::Write;

/// Rows shown; the rest are counted.
pub const MAX_ROWS: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub workloads: usize,
    pub entries: usize,
}

impl Counts {
    fn of(s: &Selector) -> Counts {
        Counts {
            workloads: s.match_count.saturating_sub(s.workload_entry_matches),
            entries: s.workload_entry_matches,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touched {
    pub resource: String,
    /// In a repository with several clusters, the one it is on.
    pub cluster: Option<String>,
    /// `spec.workloadSelector.labels`, or empty for a namespace- or mesh-wide policy.
    pub field: String,
    /// `app=reports`, or the scope (`namespace`, `mesh`).
    pub selects_by: String,
    /// Only workloads with a proxy count (policies), or every workload (ServiceEntry).
    pub proxied_only: bool,
    pub head: Counts,
    /// None: the selector is new in this change.
    pub base: Option<Counts>,
}

/// The selectors of head the change touches, in model order (cluster by cluster,
/// in a repository with several).
pub fn touched(report: &Report) -> Vec<Touched> {
    report
        .models
        .meshes()
        .into_iter()
        .flat_map(|(cluster, models)| touched_in(cluster, models))
        .collect()
}

fn touched_in(cluster: Option<&str>, models: &crate::report::Models) -> Vec<Touched> {
    let Some(base) = models.base.as_ref() else {
        return Vec::new();
    };
    // The first base selector of each (resource, path).
    let mut before_of: std::collections::HashMap<(&str, &[String]), &crate::model::Selector> =
        std::collections::HashMap::new();
    for b in &base.selectors {
        before_of
            .entry((b.resource.as_str(), b.path.as_slice()))
            .or_insert(b);
    }
    models
        .head
        .selectors
        .iter()
        .filter_map(|s| {
            let before = before_of
                .get(&(s.resource.as_str(), s.path.as_slice()))
                .copied();
            let edited = models.changed.contains(&s.resource);
            let moved = before.is_none_or(|b| b.matches != s.matches || b.labels != s.labels);
            if !edited && !moved {
                return None;
            }
            Some(Touched {
                resource: s.resource.clone(),
                cluster: cluster.map(str::to_string),
                field: s.path.join("."),
                selects_by: match &s.labels {
                    Some(l) => l
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    None => format!("the whole {}", s.scope),
                },
                proxied_only: s.counts == "injected_workloads",
                head: Counts::of(s),
                base: before.map(Counts::of),
            })
        })
        .collect()
}

fn describe(c: Counts, proxied_only: bool) -> String {
    let w = match (c.workloads, proxied_only) {
        (1, true) => "1 workload with a proxy".to_string(),
        (n, true) => format!("{n} workloads with a proxy"),
        (1, false) => "1 workload".to_string(),
        (n, false) => format!("{n} workloads"),
    };
    let e = match c.entries {
        1 => "1 WorkloadEntry".to_string(),
        n => format!("{n} WorkloadEntries"),
    };
    format!("{w}, {e}")
}

/// Markdown table cells cannot hold `|` or newlines.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The section of the summary; empty when the change touches no selector.
pub fn section(report: &Report) -> String {
    // Selectors the report's "what this change does" section already lists (their
    // selection moved) are not repeated: this table adds the touched ones it leaves out.
    let listed: std::collections::HashSet<&str> = report
        .changes
        .as_ref()
        .map(|c| c.selectors.iter().map(|s| s.resource.as_str()).collect())
        .unwrap_or_default();
    let rows: Vec<_> = touched(report)
        .into_iter()
        .filter(|t| !listed.contains(&t.resource.as_str()))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let title = if listed.is_empty() {
        "Selectors this change touches"
    } else {
        "Other selectors this change touches"
    };
    let mut out = format!("### {title} ({})\n\n", rows.len());
    out.push_str("| Selector | Selects by | Now selects | Before |\n|---|---|---|---|\n");
    for t in rows.iter().take(MAX_ROWS) {
        let now = describe(t.head, t.proxied_only);
        let now = if t.head.workloads + t.head.entries == 0 {
            format!("⚠️ **nothing** ({now})")
        } else {
            now
        };
        let before = match t.base {
            Some(b) if b == t.head => "the same".to_string(),
            Some(b) => describe(b, t.proxied_only),
            None => "new in this change".to_string(),
        };
        let by = if t.field.is_empty() {
            cell(&t.selects_by)
        } else {
            format!("`{}`: `{}`", t.field, cell(&t.selects_by))
        };
        let on = t
            .cluster
            .as_ref()
            .map(|c| format!(" on cluster `{}`", cell(c)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{}`{on} | {by} | {now} | {before} |",
            cell(&t.resource)
        );
    }
    if rows.len() > MAX_ROWS {
        let _ = writeln!(out, "\n…and {} more.", rows.len() - MAX_ROWS);
    }
    out.push('\n');
    out
}
