//! Publishing a run to its pull request: the `meshward` check run (or, with a plain
//! token, a commit status), one sticky summary comment, and inline review comments
//! on the changed lines.
//!
//! What a run publishes is a [`Plan`], computed by pure functions from the report
//! (the modules below, snapshot-tested) when the run is stored, and stored with it:
//! a retry, also after a restart, posts exactly what the run found, without checking
//! again. [`post`] carries a plan out against GitHub and records every id it gets
//! back in the history, so a plan carried out twice posts nothing twice.

pub mod check;
pub mod diff;
pub mod inline;
pub mod post;
pub mod selectors;
pub mod summary;

use crate::report::Report;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The name of the check run and the context of the commit status.
pub const CHECK_NAME: &str = "meshward";

/// How a check run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Conclusion {
    /// Introduced findings at or above the configured level.
    Failure,
    Success,
    /// The change touches nothing meshward reads.
    Neutral,
}

impl Conclusion {
    pub fn as_str(self) -> &'static str {
        match self {
            Conclusion::Failure => "failure",
            Conclusion::Success => "success",
            Conclusion::Neutral => "neutral",
        }
    }
    /// The commit status state (statuses know no `neutral`: nothing to check
    /// passes).
    pub fn status_state(self) -> &'static str {
        match self {
            Conclusion::Failure => "failure",
            Conclusion::Success | Conclusion::Neutral => "success",
        }
    }
}

/// What one run publishes. Stored with the run (JSON), so retries post the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub conclusion: Conclusion,
    pub check: check::CheckOutput,
    /// The commit status description (token mode), at most 140 characters.
    pub status_description: String,
    /// The sticky comment's body, marker included, under GitHub's limit.
    pub comment: String,
    /// Introduced findings that may be commented inline, if their line is in the diff.
    pub inline: Vec<inline::Candidate>,
    /// Keys of every finding still present in head: a comment whose key is not here
    /// is answered as resolved.
    pub live: BTreeSet<String>,
    /// `publish.inline_comments` of the repository's config (from base).
    pub inline_comments: bool,
}

/// Where the run is published, for links and wording.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// `owner/name`.
    pub repo: &'a str,
    pub pr_number: i64,
    /// `https://github.com` or the Enterprise host.
    pub web_url: &'a str,
    pub head_sha: &'a str,
    pub base_sha: Option<&'a str>,
    /// Paths the change touches, when known.
    pub changed_paths: Option<&'a BTreeSet<String>>,
    /// `publish.inline_comments` from the repository's config (base revision).
    pub inline_comments: bool,
}

impl Context<'_> {
    /// The pull request's checks tab, where the full report lives.
    pub fn checks_url(&self) -> String {
        format!(
            "{}/{}/pull/{}/checks",
            self.web_url, self.repo, self.pr_number
        )
    }
}

/// Everything a run will publish, from its report.
pub fn plan(report: &Report, ctx: &Context) -> Plan {
    let conclusion = check::conclusion(report, ctx.changed_paths);
    Plan {
        conclusion,
        check: check::output(report, ctx, conclusion),
        status_description: check::status_description(report, conclusion),
        comment: summary::comment(report, ctx),
        inline: inline::candidates(report),
        live: inline::live_keys(report),
        inline_comments: ctx.inline_comments,
    }
}

/// Cuts `text` to at most `limit` characters (not bytes: GitHub counts characters)
/// at a line end, closes a `<details>` left open, and ends with `note`. Text that
/// fits is returned as it is.
pub fn fit(text: &str, limit: usize, note: &str) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    const CLOSE: &str = "\n</details>\n";
    let budget = limit.saturating_sub(note.chars().count() + CLOSE.len() + 2);
    let cut: String = text.chars().take(budget).collect();
    let mut kept = match cut.rfind('\n') {
        Some(i) => cut[..=i].to_string(),
        None => String::new(),
    };
    if kept.matches("<details>").count() > kept.matches("</details>").count() {
        kept.push_str(CLOSE);
    }
    kept.push('\n');
    kept.push_str(note);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_keeps_short_text_and_cuts_long_text_at_a_line_with_the_note() {
        assert_eq!(fit("a\nb\n", 10, "NOTE"), "a\nb\n");
        let long = "line é\n".repeat(100);
        let out = fit(&long, 100, "NOTE");
        assert!(out.chars().count() <= 100, "{}", out.chars().count());
        assert!(out.ends_with("\nNOTE"));
        assert!(out.starts_with("line é\n"));
        assert!(out.contains("line é\n\nNOTE"), "cut at a line end: {out}");
    }

    #[test]
    fn fit_closes_an_open_details_block() {
        let text = format!(
            "head\n<details><summary>x</summary>\n\n{}</details>\n",
            "row\n".repeat(50)
        );
        let out = fit(&text, 80, "NOTE");
        assert_eq!(out.matches("<details>").count(), 1);
        assert_eq!(out.matches("</details>").count(), 1);
        assert!(out.chars().count() <= 80);
    }
}
