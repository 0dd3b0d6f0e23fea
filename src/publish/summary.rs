//! The sticky summary comment: one per pull request, found again by its marker and
//! edited in place. Its body is the markdown report (so every section the report
//! renderers add appears here too), with findings linked to their line at the head
//! commit, plus the selectors the change touches.

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
