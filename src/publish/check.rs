//! The check run: its conclusion, title, summary (the markdown report) and
//! annotations, and the commit status that stands in for it with a plain token.

use super::{fit, summary, Conclusion, Context};
use crate::config::CONFIG_FILE;
use crate::finding::{Finding, Severity, Status};
use crate::report::{Report, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt::Write;

/// GitHub takes at most 50 annotations per request.
pub const ANNOTATIONS_PER_REQUEST: usize = 50;
/// Annotations sent per run: each batch is one request, so this bounds the calls
/// (10). The rest are counted in the summary.
pub const MAX_ANNOTATIONS: usize = 500;
/// GitHub's limit on a check run's `summary` and `text`, in characters.
pub const OUTPUT_LIMIT: usize = 65_535;
/// Longest annotation message sent (GitHub allows 64 KB; a finding is far shorter).
const MAX_MESSAGE: usize = 4_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckOutput {
    pub title: String,
    pub summary: String,
    /// Set when the summary had to be cut: every finding, one line each.
    pub text: Option<String>,
    pub annotations: Vec<Annotation>,
}

/// One annotation, as the Checks API takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// `failure`, `warning` or `notice`.
    pub annotation_level: String,
    /// The rule id.
    pub title: String,
    pub message: String,
}

/// `failure` when the run fails; `neutral` when the change touches no file meshward
/// reads and nothing was introduced or resolved; else `success`.
pub fn conclusion(report: &Report, changed_paths: Option<&BTreeSet<String>>) -> Conclusion {
    let s = &report.summary;
    if s.verdict == Verdict::Fail {
        return Conclusion::Failure;
    }
    if s.nothing_to_check.is_some() {
        return Conclusion::Neutral;
    }
    let untouched = changed_paths.is_some_and(|changed| {
        !changed.iter().any(|p| {
            crate::workspace::wanted(p)
                || p == CONFIG_FILE
                || p.starts_with(".meshward/")
                || p.ends_with(".tpl")
        })
    });
    if s.base.is_some() && untouched && s.introduced == 0 && s.resolved == 0 {
        Conclusion::Neutral
    } else {
        Conclusion::Success
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub fn title(report: &Report, conclusion: Conclusion) -> String {
    let s = &report.summary;
    match conclusion {
        Conclusion::Failure => format!(
            "{} (fail-on {})",
            plural(s.blocking, "blocking finding", "blocking findings"),
            s.fail_on.as_str()
        ),
        Conclusion::Neutral if s.nothing_to_check.is_some() => {
            "Nothing to check: no Kubernetes objects and no render roots".to_string()
        }
        Conclusion::Neutral => "Nothing to check in this change".to_string(),
        Conclusion::Success if s.introduced > 0 => format!(
            "No blocking findings; {} below fail-on {}",
            plural(s.introduced, "new finding", "new findings"),
            s.fail_on.as_str()
        ),
        Conclusion::Success => "No new findings".to_string(),
    }
}

/// At most 140 characters, as statuses allow.
pub fn status_description(report: &Report, conclusion: Conclusion) -> String {
    let s = &report.summary;
    let text = match conclusion {
        Conclusion::Neutral => title(report, conclusion),
        _ => format!(
            "{}: {} introduced, {} resolved",
            title(report, conclusion),
            s.introduced,
            s.resolved
        ),
    };
    text.chars().take(140).collect()
}

/// Findings that get an annotation: what this change introduces (everything,
/// without a base), at a real file and line; errors first.
fn annotated(report: &Report) -> Vec<&Finding> {
    let has_base = report.summary.base.is_some();
    let mut list: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| match f.status {
            Status::Introduced => true,
            Status::Existing => !has_base || f.unchecked,
            Status::Resolved => false,
        })
        .filter(|f| !f.file.is_empty() && !f.file.starts_with('(') && f.line >= 1)
        .collect();
    // Stable: report order (file, line) within a severity.
    list.sort_by_key(|f| std::cmp::Reverse(f.severity));
    list
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "failure",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    }
}

fn annotation(f: &Finding) -> Annotation {
    // Messages name their resource already: the annotation is the message.
    let message = &f.message;
    Annotation {
        path: f.file.clone(),
        start_line: f.line,
        end_line: f.line,
        annotation_level: level(f.severity).to_string(),
        title: f.rule.clone(),
        message: message.chars().take(MAX_MESSAGE).collect(),
    }
}

pub fn output(report: &Report, ctx: &Context, conclusion: Conclusion) -> CheckOutput {
    let candidates = annotated(report);
    let annotations: Vec<Annotation> = candidates
        .iter()
        .take(MAX_ANNOTATIONS)
        .map(|f| annotation(f))
        .collect();
    let mut head = String::new();
    if candidates.len() > annotations.len() {
        let _ = writeln!(
            head,
            "> {} of {} findings are annotated on the changed files (meshward sends at most {MAX_ANNOTATIONS}); the other {} are listed in this report.\n",
            annotations.len(),
            candidates.len(),
            candidates.len() - annotations.len()
        );
    }
    let full = format!("{head}{}", summary::report_body(report, ctx));
    let summary = fit(
        &full,
        OUTPUT_LIMIT,
        "> **This report is longer than GitHub allows here; it is cut. Every finding is listed, one per line, below.**\n",
    );
    let text = (summary != full).then(|| finding_lines(report));
    CheckOutput {
        title: title(report, conclusion),
        summary,
        text,
        annotations,
    }
}

/// Every finding, one line each, for when the summary is cut.
fn finding_lines(report: &Report) -> String {
    let mut out =
        String::from("| Status | Severity | Rule | Where | Resource |\n|---|---|---|---|---|\n");
    for f in &report.findings {
        let _ = writeln!(
            out,
            "| {} | {} | `{}` | `{}:{}` | {} |",
            f.status.as_str(),
            f.severity.as_str(),
            f.rule,
            f.file,
            f.line,
            f.resource
                .as_ref()
                .map(|r| format!("`{}`", r.id()))
                .unwrap_or_default()
        );
    }
    fit(
        &out,
        OUTPUT_LIMIT,
        "> **Cut at GitHub's limit.** The whole report is kept in meshward's history for this run.\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_have_no_neutral_state() {
        assert_eq!(Conclusion::Neutral.status_state(), "success");
        assert_eq!(Conclusion::Failure.status_state(), "failure");
    }
}
