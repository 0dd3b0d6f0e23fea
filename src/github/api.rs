//! The GitHub endpoints meshward calls, one method each, with typed requests and
//! answers. Paths and the shapes of GitHub's JSON live here only: callers get ids
//! and values, and send structs, never JSON they build or index themselves.
//!
//! Answers are read with only the fields meshward uses; a field GitHub documents as
//! nullable is an `Option`.

use super::client::{GitHub, GitHubError, RepoClient};
use super::names::{CommitSha, PrNumber, RepoName};
use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Method, StatusCode};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

/// Pages read of a pull request's lists (100 items each): GitHub lists at most
/// 3,000 files of a pull request.
const MAX_PAGES: u32 = 30;

/// Pages of open pull requests read to find a re-run's (100 each).
const MAX_OPEN_PULL_PAGES: u32 = 10;

/// GitHub's answer to a call whose refusal with one status the caller expects and
/// handles (a comment someone deleted, a review of lines no longer in the diff).
pub(crate) enum Answer<T> {
    Done(T),
    Refused {
        /// GitHub's reason.
        message: String,
        error: anyhow::Error,
    },
}

pub(crate) trait Refusable<T> {
    /// GitHub refusing with `status` as an [`Answer`]; any other error stays one.
    fn or_refused(self, status: StatusCode) -> Result<Answer<T>>;
}

impl<T> Refusable<T> for Result<T> {
    fn or_refused(self, status: StatusCode) -> Result<Answer<T>> {
        match self {
            Ok(v) => Ok(Answer::Done(v)),
            Err(error) => match GitHubError::with_status_in(&error, status) {
                Some(g) => Ok(Answer::Refused {
                    message: g.message.clone(),
                    error,
                }),
                None => Err(error),
            },
        }
    }
}

/// Timestamps as the Checks API takes them.
fn now_iso() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What GitHub answers when it creates something: only its id is kept.
#[derive(Deserialize)]
struct Created {
    id: i64,
}

#[derive(Serialize)]
struct CommentBody<'a> {
    body: &'a str,
}

#[derive(Deserialize)]
struct Installation {
    id: i64,
}

/// An installation's access token.
pub(super) struct InstallationToken {
    pub(super) token: String,
    /// None: GitHub did not say (an hour is assumed).
    pub(super) expires_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: String,
    expires_at: Option<DateTime<Utc>>,
}

/// A pull request: its number and the commits of its head and base.
#[derive(Debug, Deserialize)]
pub(crate) struct PullRequest {
    pub(crate) number: PrNumber,
    pub(crate) head: Head,
    pub(crate) base: Base,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Head {
    pub(crate) sha: CommitSha,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Base {
    pub(crate) sha: CommitSha,
    /// The base branch.
    #[serde(rename = "ref", default)]
    pub(crate) branch: Option<String>,
}

/// A file a pull request changes.
#[derive(Debug, Deserialize)]
pub(crate) struct PullFile {
    pub(crate) filename: String,
    /// The hunks; large and binary files come without.
    #[serde(default)]
    pub(crate) patch: Option<String>,
}

/// A comment on a pull request's conversation.
#[derive(Debug, Deserialize)]
pub(crate) struct IssueComment {
    pub(crate) id: i64,
    #[serde(default)]
    pub(crate) body: Option<String>,
    #[serde(default)]
    user: Option<User>,
}

#[derive(Debug, Deserialize)]
struct User {
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

impl IssueComment {
    /// Written by an app (a bot account), not a person.
    pub(crate) fn by_bot(&self) -> bool {
        self.user.as_ref().and_then(|u| u.kind.as_deref()) == Some("Bot")
    }
}

/// An inline comment of a review.
#[derive(Debug, Deserialize)]
pub(crate) struct ReviewComment {
    pub(crate) id: i64,
    #[serde(default)]
    pub(crate) body: Option<String>,
    /// Set on a reply; None on the comment that starts a thread.
    #[serde(default)]
    pub(crate) in_reply_to_id: Option<i64>,
    #[serde(default)]
    pub(crate) commit_id: Option<String>,
    /// The commit the comment was made on (`commit_id` moves with later pushes).
    #[serde(default)]
    pub(crate) original_commit_id: Option<String>,
    #[serde(default)]
    pub(crate) pull_request_review_id: Option<i64>,
}

#[derive(Deserialize)]
struct Comparison {
    #[serde(default)]
    merge_base_commit: Option<CommitRef>,
}

#[derive(Deserialize)]
struct CommitRef {
    sha: CommitSha,
}

/// A check run, as it is created: in progress.
#[derive(Serialize)]
pub(crate) struct NewCheckRun<'a> {
    name: &'a str,
    head_sha: &'a CommitSha,
    status: &'static str,
    started_at: String,
    /// meshward's id for it (the job).
    external_id: String,
}

impl<'a> NewCheckRun<'a> {
    pub(crate) fn in_progress(
        name: &'a str,
        head_sha: &'a CommitSha,
        external_id: String,
    ) -> NewCheckRun<'a> {
        NewCheckRun {
            name,
            head_sha,
            status: "in_progress",
            started_at: now_iso(),
            external_id,
        }
    }
}

/// A change to a check run: more output, or its completion.
#[derive(Serialize)]
pub(crate) struct CheckRunUpdate<'a, A> {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conclusion: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details_url: Option<String>,
    output: CheckRunOutput<'a, A>,
}

impl<'a, A> CheckRunUpdate<'a, A> {
    /// More output, the run still in progress (GitHub appends the annotations).
    pub(crate) fn output(output: CheckRunOutput<'a, A>) -> Self {
        CheckRunUpdate {
            status: None,
            conclusion: None,
            completed_at: None,
            details_url: None,
            output,
        }
    }

    /// The run completed now, with `conclusion` and its last output.
    pub(crate) fn completed(
        conclusion: &'a str,
        output: CheckRunOutput<'a, A>,
        details_url: Option<String>,
    ) -> Self {
        CheckRunUpdate {
            status: Some("completed"),
            conclusion: Some(conclusion),
            completed_at: Some(now_iso()),
            details_url,
            output,
        }
    }
}

/// A check run's output. `A`: the annotations, as the Checks API takes them.
#[derive(Serialize)]
pub(crate) struct CheckRunOutput<'a, A> {
    pub(crate) title: &'a str,
    pub(crate) summary: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) annotations: Option<&'a [A]>,
}

/// A commit status.
#[derive(Serialize)]
pub(crate) struct NewStatus<'a> {
    state: &'a str,
    context: &'a str,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_url: Option<String>,
}

impl<'a> NewStatus<'a> {
    /// GitHub takes at most 140 characters of description: the rest is cut.
    pub(crate) fn new(
        state: &'a str,
        context: &'a str,
        description: &str,
        target_url: Option<String>,
    ) -> NewStatus<'a> {
        NewStatus {
            state,
            context,
            description: description.chars().take(140).collect(),
            target_url,
        }
    }
}

/// A review that comments (neither approves nor asks for changes).
#[derive(Serialize)]
pub(crate) struct NewReview<'a> {
    commit_id: &'a CommitSha,
    event: &'static str,
    body: &'a str,
    comments: Vec<NewReviewComment<'a>>,
}

impl<'a> NewReview<'a> {
    pub(crate) fn comment(
        commit_id: &'a CommitSha,
        body: &'a str,
        comments: Vec<NewReviewComment<'a>>,
    ) -> NewReview<'a> {
        NewReview {
            commit_id,
            event: "COMMENT",
            body,
            comments,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct NewReviewComment<'a> {
    path: &'a str,
    line: u32,
    side: &'static str,
    body: &'a str,
}

impl<'a> NewReviewComment<'a> {
    /// A comment on a line of the head side of the diff.
    pub(crate) fn on_head(path: &'a str, line: u32, body: &'a str) -> NewReviewComment<'a> {
        NewReviewComment {
            path,
            line,
            side: "RIGHT",
            body,
        }
    }
}

/// Calls as the app itself.
impl GitHub {
    /// The app's installation on `repo`.
    pub(super) async fn installation_of(&self, repo: &RepoName) -> Result<i64> {
        let found: Installation = self
            .as_app(Method::GET, &format!("/repos/{repo}/installation"), None)
            .await
            .with_context(|| format!("finding the app installation for {repo}"))?;
        Ok(found.id)
    }

    /// A new access token for installation `id`.
    pub(super) async fn create_installation_token(&self, id: i64) -> Result<InstallationToken> {
        let t: TokenAnswer = self
            .as_app(
                Method::POST,
                &format!("/app/installations/{id}/access_tokens"),
                Some(&serde_json::json!({})),
            )
            .await
            .with_context(|| format!("requesting a token for installation {id}"))?;
        Ok(InstallationToken {
            token: t.token,
            expires_at: t.expires_at,
        })
    }
}

/// Calls as the installation on one repository.
impl RepoClient {
    fn path(&self, rest: &str) -> String {
        format!("/repos/{}/{rest}", self.repo())
    }

    /// The gzipped tarball of the repository at `sha` (redirects followed).
    pub(crate) async fn tarball(&self, sha: &CommitSha) -> Result<Bytes> {
        self.download(&self.path(&format!("tarball/{sha}")))
            .await
            .with_context(|| format!("downloading {} at {sha}", self.repo()))
    }

    async fn compare(&self, base: &str, head: &str) -> Result<Comparison> {
        self.get(&self.path(&format!("compare/{base}...{head}")))
            .await
    }

    /// The merge base of `base` and `head`: what a pull request is compared against.
    pub(crate) async fn merge_base(&self, base: &CommitSha, head: &CommitSha) -> Result<CommitSha> {
        self.compare(base.as_str(), head.as_str())
            .await?
            .merge_base_commit
            .map(|c| c.sha)
            .with_context(|| format!("compare {base}...{head} has no merge base"))
    }

    /// Whether `sha` is on `branch` of this repository (the branch's tip or an
    /// ancestor of it): a commit of a fork's branch of the same name is not.
    pub(crate) async fn on_branch(&self, branch: &str, sha: &CommitSha) -> Result<bool> {
        let ok = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
        if branch.is_empty() || branch.contains("..") || !branch.chars().all(ok) {
            bail!("{branch:?} is not a branch name meshward reads");
        }
        let compared = self.compare(sha.as_str(), branch).await?;
        Ok(compared.merge_base_commit.is_some_and(|c| &c.sha == sha))
    }

    pub(crate) async fn pull_request(&self, pr: PrNumber) -> Result<PullRequest> {
        self.get(&self.path(&format!("pulls/{pr}"))).await
    }

    /// The open pull requests (up to a bound).
    pub(crate) async fn open_pull_requests(&self) -> Result<Vec<PullRequest>> {
        self.get_pages(&self.path("pulls?state=open"), MAX_OPEN_PULL_PAGES)
            .await
    }

    pub(crate) async fn pull_request_files(&self, pr: PrNumber) -> Result<Vec<PullFile>> {
        self.get_pages(&self.path(&format!("pulls/{pr}/files")), MAX_PAGES)
            .await
    }

    /// Creates a check run; its id.
    pub(crate) async fn create_check_run(&self, run: &NewCheckRun<'_>) -> Result<i64> {
        let created: Created = self
            .send(Method::POST, &self.path("check-runs"), run)
            .await?;
        Ok(created.id)
    }

    pub(crate) async fn update_check_run<A: Serialize>(
        &self,
        id: i64,
        update: &CheckRunUpdate<'_, A>,
    ) -> Result<()> {
        self.send::<IgnoredAny>(
            Method::PATCH,
            &self.path(&format!("check-runs/{id}")),
            update,
        )
        .await?;
        Ok(())
    }

    /// [`RepoClient::update_check_run`] in exactly one call, no retry.
    pub(crate) async fn update_check_run_once<A: Serialize>(
        &self,
        id: i64,
        update: &CheckRunUpdate<'_, A>,
    ) -> Result<()> {
        self.send_once::<IgnoredAny>(
            Method::PATCH,
            &self.path(&format!("check-runs/{id}")),
            update,
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn create_status(
        &self,
        sha: &CommitSha,
        status: &NewStatus<'_>,
    ) -> Result<()> {
        self.send::<IgnoredAny>(Method::POST, &self.path(&format!("statuses/{sha}")), status)
            .await?;
        Ok(())
    }

    /// [`RepoClient::create_status`] in exactly one call, no retry.
    pub(crate) async fn create_status_once(
        &self,
        sha: &CommitSha,
        status: &NewStatus<'_>,
    ) -> Result<()> {
        self.send_once::<IgnoredAny>(Method::POST, &self.path(&format!("statuses/{sha}")), status)
            .await?;
        Ok(())
    }

    /// The comments of a pull request's conversation.
    pub(crate) async fn issue_comments(&self, pr: PrNumber) -> Result<Vec<IssueComment>> {
        self.get_pages(&self.path(&format!("issues/{pr}/comments")), MAX_PAGES)
            .await
    }

    /// Comments on a pull request's conversation; the comment's id.
    pub(crate) async fn create_issue_comment(&self, pr: PrNumber, body: &str) -> Result<i64> {
        let created: Created = self
            .send(
                Method::POST,
                &self.path(&format!("issues/{pr}/comments")),
                &CommentBody { body },
            )
            .await?;
        Ok(created.id)
    }

    pub(crate) async fn edit_issue_comment(&self, id: i64, body: &str) -> Result<()> {
        self.send::<IgnoredAny>(
            Method::PATCH,
            &self.path(&format!("issues/comments/{id}")),
            &CommentBody { body },
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn delete_issue_comment(&self, id: i64) -> Result<()> {
        self.send_empty(Method::DELETE, &self.path(&format!("issues/comments/{id}")))
            .await
    }

    /// Every inline comment of a pull request, replies included.
    pub(crate) async fn review_comments(&self, pr: PrNumber) -> Result<Vec<ReviewComment>> {
        self.get_pages(&self.path(&format!("pulls/{pr}/comments")), MAX_PAGES)
            .await
    }

    /// Posts a review with its inline comments; the review's id.
    pub(crate) async fn create_review(&self, pr: PrNumber, review: &NewReview<'_>) -> Result<i64> {
        let created: Created = self
            .send(
                Method::POST,
                &self.path(&format!("pulls/{pr}/reviews")),
                review,
            )
            .await?;
        Ok(created.id)
    }

    pub(crate) async fn comments_of_review(
        &self,
        pr: PrNumber,
        review_id: i64,
    ) -> Result<Vec<ReviewComment>> {
        self.get_pages(
            &self.path(&format!("pulls/{pr}/reviews/{review_id}/comments")),
            MAX_PAGES,
        )
        .await
    }

    /// Answers an inline comment in its thread; the reply's id.
    pub(crate) async fn reply_to_review_comment(
        &self,
        pr: PrNumber,
        comment_id: i64,
        body: &str,
    ) -> Result<i64> {
        let created: Created = self
            .send(
                Method::POST,
                &self.path(&format!("pulls/{pr}/comments/{comment_id}/replies")),
                &CommentBody { body },
            )
            .await?;
        Ok(created.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_and_commit_ids_that_may_go_into_a_path() {
        assert!(RepoName::parse("acme/gitops.config").is_ok());
        for bad in [
            "acme", "acme/", "/x", "a/b/c", "../x", "a/..", "a b/c", "a/%2e",
        ] {
            assert!(RepoName::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            RepoName::parse("acme/web")
                .map(|r| r.owner_and_name() == ("acme", "web"))
                .ok(),
            Some(true)
        );
        assert!(CommitSha::parse(&"ab12".repeat(10)).is_ok());
        for bad in ["", "xyz", "../etc", &"a".repeat(65)] {
            assert!(CommitSha::parse(bad).is_err(), "{bad}");
        }
        let from_github: Result<CommitSha, _> = serde_json::from_str(r#""not a sha""#);
        assert!(from_github.is_err());
    }

    #[test]
    fn requests_carry_only_what_github_takes() {
        let sha = CommitSha::parse("abc123").expect("hex");
        let status = NewStatus::new("error", "meshward", &"x".repeat(300), None);
        let v = serde_json::to_value(&status).expect("json");
        assert_eq!(v["description"].as_str().map(str::len), Some(140));
        assert!(v.get("target_url").is_none());
        let batch: CheckRunUpdate<'_, u8> = CheckRunUpdate::output(CheckRunOutput {
            title: "t",
            summary: "s",
            text: None,
            annotations: Some(&[]),
        });
        assert_eq!(
            serde_json::to_value(&batch).expect("json"),
            serde_json::json!({"output": {"title": "t", "summary": "s", "annotations": []}})
        );
        let review = NewReview::comment(&sha, "b", vec![NewReviewComment::on_head("f", 3, "c")]);
        assert_eq!(
            serde_json::to_value(&review).expect("json"),
            serde_json::json!({"commit_id": "abc123", "event": "COMMENT", "body": "b",
                "comments": [{"path": "f", "line": 3, "side": "RIGHT", "body": "c"}]})
        );
    }
}
