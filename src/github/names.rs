//! The names GitHub's URLs are built from: repository, commit and pull request,
//! checked when they are made, so no path is built from an unchecked string.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A repository's full name, `owner/name`. It goes into URL paths, so only
/// GitHub's characters are taken.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RepoName(String);

impl RepoName {
    pub(crate) fn parse(repo: &str) -> Result<RepoName> {
        let ok = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        };
        match repo.split_once('/') {
            Some((owner, name)) if ok(owner) && ok(name) => Ok(RepoName(repo.to_string())),
            _ => bail!("{repo:?} is not a repository name"),
        }
    }

    /// Owner and name apart, as GraphQL takes them.
    pub(crate) fn owner_and_name(&self) -> (&str, &str) {
        self.0.split_once('/').unwrap_or((&self.0, ""))
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A commit id. It goes into URL paths, so hex only; one GitHub sends is checked
/// like one from a webhook.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub(crate) struct CommitSha(String);

impl CommitSha {
    pub(crate) fn parse(sha: &str) -> Result<CommitSha> {
        if sha.is_empty() || sha.len() > 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!("{sha:?} is not a commit id");
        }
        Ok(CommitSha(sha.to_string()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for CommitSha {
    type Error = anyhow::Error;
    fn try_from(sha: String) -> Result<CommitSha> {
        CommitSha::parse(&sha)
    }
}

impl Serialize for CommitSha {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl fmt::Display for CommitSha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A pull request's number in its repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct PrNumber(i64);

impl PrNumber {
    pub(crate) fn new(number: i64) -> PrNumber {
        PrNumber(number)
    }

    pub(crate) fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for PrNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
