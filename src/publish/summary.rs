//! The sticky summary comment: one per pull request, found again by its marker and
//! edited in place. Its body is the markdown report (so every section the report
//! renderers add appears here too), with findings linked to their line at the head
//! commit, plus the selectors the change touches. When GitHub refuses the inline
//! comments, a note at its end says so.

use super::{fit, selectors, Context};
use crate::report::markdown::{self, Links};
use crate::report::Report;
use std::fmt::Write;

/// Hidden in the rendered comment; how meshward finds its comment again.
pub const MARKER: &str = "<!-- meshward:summary -->";
/// GitHub refuses comment bodies over 65,536 characters.
pub const COMMENT_LIMIT: usize = 65_536;

/// The report as markdown, linked to the head commit, with the selector section.
pub fn report_body(report: &Report, ctx: &Context) -> String {
    let links = Links::Blob {
        base_url: format!("{}/{}", ctx.web_url, ctx.repo),
        sha: ctx.head_sha.to_string(),
        prefix: String::new(),
    };
    let mut out = markdown::render(report, &links);
    out.push_str(&selectors::section(report));
    out
}

fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// The comment body: marker, report, a footer saying what was compared; cut under
/// GitHub's limit with a note pointing at the check run.
pub fn comment(report: &Report, ctx: &Context) -> String {
    let mut body = format!("{MARKER}\n{}", report_body(report, ctx));
    let _ = writeln!(
        body,
        "<sub>meshward checked {}{}. This comment is updated on every push.</sub>",
        short(ctx.head_sha),
        ctx.base_sha
            .map(|b| format!(" against {}", short(b)))
            .unwrap_or_default()
    );
    let note = format!(
        "> **This report is longer than a GitHub comment allows, so it is cut here.** The full report is in the [meshward check run]({}).\n",
        ctx.checks_url()
    );
    fit(&body, COMMENT_LIMIT, &note)
}

/// What a publication left out, and why: said in the summary comment and recorded.
pub(crate) struct LeftOut {
    /// Appended to the summary comment.
    pub(crate) comment: String,
    /// Recorded on the publication.
    pub(crate) recorded: String,
}

impl LeftOut {
    /// GitHub refused the review of `findings` inline comments as invalid; `why`:
    /// its message.
    pub(crate) fn refused_review(findings: usize, why: &str) -> LeftOut {
        let what = match findings {
            1 => "1 finding".to_string(),
            n => format!("{n} findings"),
        };
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" (\"{}\")", why.chars().take(200).collect::<String>())
        };
        LeftOut {
            comment: format!(
                "> **Inline comments were not posted.** GitHub refused the review of {what} on the changed lines{why}, most likely because the pull request changed while meshward was checking it. They are listed above; the next run comments them inline if they are still there.\n"
            ),
            recorded: format!(
                "inline comments not posted: GitHub answered 422 to the review of {what}{why}; the findings are in the summary comment only"
            ),
        }
    }
}

/// The summary comment with `note` at its end, under GitHub's limit.
pub(crate) fn with_note(comment: &str, note: &str) -> String {
    let limit = COMMENT_LIMIT;
    let room = limit.saturating_sub(note.chars().count() + 2);
    let kept = if comment.chars().count() <= room {
        comment.to_string()
    } else {
        fit(comment, room, "")
    };
    format!("{}\n\n{note}", kept.trim_end_matches('\n'))
}
