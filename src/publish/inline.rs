//! Inline review comments: introduced findings on lines the pull request's diff
//! shows, posted as one review per run. A finding is "the same" across pushes when
//! its path, rule and resource are (not its line, which moves): such a finding is
//! commented once, and its comment is answered when it goes away.

use crate::finding::{Finding, Severity, Status};
use crate::report::Report;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};

/// New inline comments per run; the rest are in the summary (and come later if
/// still there). Keeps a large change from burying the pull request.
pub const MAX_PER_RUN: usize = 50;
const MARKER_PREFIX: &str = "<!-- meshward:finding:";

/// A finding that may be commented on its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// [`key`] of the finding.
    pub key: String,
    pub path: String,
    pub line: u32,
    pub rule: String,
    /// The resource id, or the file for findings about a file.
    pub subject: String,
    pub body: String,
}

/// What identifies a finding across pushes: a hash of path, rule and subject, safe
/// to put in a hidden HTML comment whatever the names hold.
pub fn key(path: &str, rule: &str, subject: &str) -> String {
    let digest = sha2::Sha256::digest(format!("{path}\0{rule}\0{subject}").as_bytes());
    hex::encode(&digest[..10])
}

/// What a finding is about; on which cluster, in a repository with several (a
/// shared file is one comment per cluster it breaks).
fn subject(f: &Finding) -> String {
    let what = f
        .resource
        .as_ref()
        .map(|r| r.id())
        .unwrap_or_else(|| f.file.clone());
    match &f.cluster {
        Some(c) => format!("{what} on cluster {c}"),
        None => what,
    }
}

fn key_of(f: &Finding) -> String {
    key(&f.file, &f.rule, &subject(f))
}

/// The marker a comment for `key` carries.
pub fn marker(key: &str) -> String {
    format!("{MARKER_PREFIX}{key} -->")
}

/// The key in a comment body meshward wrote, if any.
pub fn key_in(body: &str) -> Option<&str> {
    let start = body.find(MARKER_PREFIX)? + MARKER_PREFIX.len();
    let rest = &body[start..];
    let end = rest.find(" -->")?;
    let k = &rest[..end];
    k.chars().all(|c| c.is_ascii_hexdigit()).then_some(k)
}

fn icon(s: Severity) -> &'static str {
    match s {
        Severity::Error => "🔴 **error**",
        Severity::Warning => "🟠 **warning**",
        Severity::Info => "🔵 **info**",
    }
}

pub fn comment_body(f: &Finding) -> String {
    let code = f
        .istio_code
        .as_ref()
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    format!(
        "{}\n{} · `{}`{code} · `{}`\n\n{}\n",
        marker(&key_of(f)),
        icon(f.severity),
        f.rule,
        subject(f),
        f.message
    )
}

/// The reply to a comment whose finding is gone.
pub fn resolved_body(rule: &str, subject: &str, head_sha: &str) -> String {
    format!(
        "<!-- meshward:resolved -->\n✅ **Resolved** in {}: meshward no longer finds `{rule}` on `{subject}`.\n",
        head_sha.get(..7).unwrap_or(head_sha)
    )
}

/// Introduced findings at a file and line, one per key (the first by line).
pub fn candidates(report: &Report) -> Vec<Candidate> {
    let mut seen = BTreeSet::new();
    report
        .findings
        .iter()
        .filter(|f| f.status == Status::Introduced && !f.file.is_empty() && f.line >= 1)
        .filter(|f| seen.insert(key_of(f)))
        .map(|f| Candidate {
            key: key_of(f),
            path: f.file.clone(),
            line: f.line,
            rule: f.rule.clone(),
            subject: subject(f),
            body: comment_body(f),
        })
        .collect()
}

/// Keys of every finding head still has (introduced or existing).
pub fn live_keys(report: &Report) -> BTreeSet<String> {
    report
        .findings
        .iter()
        .filter(|f| f.status != Status::Resolved)
        .map(key_of)
        .collect()
}

/// The candidates to post now: on a line of the diff, not commented before
/// (`commented`: keys with an open meshward comment), at most [`MAX_PER_RUN`].
pub fn to_post<'a>(
    candidates: &'a [Candidate],
    diff: &BTreeMap<String, BTreeSet<u32>>,
    commented: &BTreeSet<String>,
) -> Vec<&'a Candidate> {
    candidates
        .iter()
        .filter(|c| !commented.contains(&c.key))
        .filter(|c| {
            diff.get(&c.path)
                .is_some_and(|lines| lines.contains(&c.line))
        })
        .take(MAX_PER_RUN)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_survive_hostile_names_and_are_found_again() {
        let k = key("a.yaml", "r/x", "ServiceEntry/ns/--> <b>");
        assert_eq!(k.len(), 20);
        let body = format!("{}\ntext", marker(&k));
        assert_eq!(key_in(&body), Some(k.as_str()));
        assert_eq!(key_in("<!-- meshward:finding:zz --> x"), None);
        assert_eq!(key_in("no marker"), None);
        assert_ne!(k, key("a.yaml", "r/x", "ServiceEntry/ns/other"));
    }

    fn candidate(key: &str, path: &str, line: u32) -> Candidate {
        Candidate {
            key: key.into(),
            path: path.into(),
            line,
            rule: "r".into(),
            subject: "s".into(),
            body: String::new(),
        }
    }

    #[test]
    fn only_uncommented_findings_on_diff_lines_are_posted() {
        let cands = vec![
            candidate("a", "x.yaml", 3),
            candidate("b", "x.yaml", 9),
            candidate("c", "y.yaml", 1),
            candidate("d", "x.yaml", 4),
        ];
        let diff = BTreeMap::from([("x.yaml".to_string(), BTreeSet::from([3, 4, 5]))]);
        let commented = BTreeSet::from(["d".to_string()]);
        let keys: Vec<&str> = to_post(&cands, &diff, &commented)
            .iter()
            .map(|c| c.key.as_str())
            .collect();
        assert_eq!(keys, vec!["a"]);
    }
}
