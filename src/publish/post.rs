//! Carrying out a [`Plan`] on GitHub. Every step reads what the store recorded
//! before it posts and records what GitHub answered right after, so carrying out a
//! plan again (a retry, a restart) edits and continues instead of posting twice:
//! the check run is created once per job and its annotations are sent once; the
//! summary comment is the one recorded (or found by its marker); an inline comment
//! is posted once per finding key.

use super::check::Annotation;
use super::summary::{with_note, LeftOut};
use super::{inline, Conclusion, Plan, CHECK_NAME};
use crate::github::api::{
    Answer, CheckRunOutput, CheckRunUpdate, NewCheckRun, NewReview, NewReviewComment, NewStatus,
    Refusable as _,
};
use crate::github::{CommitSha, PrNumber, RepoClient};
use crate::store::{Job, Publication, ReviewCommentRecord, Store};
use anyhow::{anyhow, Context as _, Result};
use http::StatusCode;
use std::collections::{BTreeMap, BTreeSet};

/// Where and how one job publishes.
pub(crate) struct Target<'a> {
    pub(crate) client: &'a RepoClient,
    pub(crate) store: &'a Store,
    pub(crate) job: &'a Job,
    pub(crate) pr: PrNumber,
    /// The job's head commit, checked once for the paths it goes into.
    pub(crate) head: CommitSha,
    /// A GitHub App posts a check run; a plain token cannot, and posts a commit
    /// status instead.
    pub(crate) checks_api: bool,
    /// meshward's page for the run (`MESHWARD_PUBLIC_URL`), if configured.
    pub(crate) public_url: Option<&'a str>,
    /// The queue's clock, for the history's timestamps.
    pub(crate) now_ms: i64,
}

impl Target<'_> {
    fn details_url(&self, run_id: Option<i64>) -> Option<String> {
        let base = self.public_url?.trim_end_matches('/');
        let repo = self.client.repo();
        Some(match run_id {
            Some(id) => format!("{base}/repos/{repo}/runs/{id}"),
            None => format!("{base}/repos/{repo}"),
        })
    }

    async fn publication(&self) -> Result<Publication> {
        self.store
            .start_publication(self.job, self.pr.get(), self.now_ms)
            .await
    }

    /// When the job starts: the check run `in_progress` (a `pending` status with a
    /// token), so the pull request shows the check is running.
    pub(crate) async fn start(&self) -> Result<()> {
        let p = self.publication().await?;
        if self.checks_api {
            if p.check_run_id.is_none() {
                self.create_check_run().await?;
            }
        } else if p.check_state.is_none() {
            self.post_status("pending", "meshward is checking this change", None)
                .await?;
        }
        Ok(())
    }

    async fn create_check_run(&self) -> Result<i64> {
        let run = NewCheckRun::in_progress(CHECK_NAME, &self.head, self.job.id.to_string());
        let id = self
            .client
            .create_check_run(&run)
            .await
            .context("creating the check run")?;
        self.store
            .set_check_run(self.job.id, id, self.now_ms)
            .await?;
        Ok(id)
    }

    async fn post_status(&self, state: &str, description: &str, url: Option<String>) -> Result<()> {
        let status = NewStatus::new(state, CHECK_NAME, description, url);
        self.client
            .create_status(&self.head, &status)
            .await
            .with_context(|| format!("setting the commit status to {state}"))?;
        self.store
            .set_check_state(self.job.id, state, self.now_ms)
            .await
    }

    /// Publishes a stored run: completes the check run (or sets the status), then,
    /// if the pull request is still at this commit, the summary comment and the
    /// review. Each step is skipped when the store shows it done.
    pub(crate) async fn publish(&self, run_id: i64, plan: &Plan) -> Result<()> {
        let p = self.publication().await?;
        if self.checks_api {
            self.complete_check_run(&p, run_id, plan)
                .await
                .context("completing the check run")?;
        } else if p.check_state.as_deref() != Some(plan.conclusion.status_state()) {
            self.post_status(
                plan.conclusion.status_state(),
                &plan.status_description,
                self.details_url(Some(run_id)),
            )
            .await?;
        }
        let mut left_out = None;
        if self.pull_request_is_at_this_commit().await? {
            let comment = self
                .summary_comment(plan)
                .await
                .context("writing the summary comment")?;
            left_out = self.review(plan).await.context("posting review comments")?;
            if let (Some(note), Some(id)) = (&left_out, comment) {
                // The findings are in the summary; say there why none is inline.
                self.client
                    .edit_issue_comment(id, &with_note(&plan.comment, &note.comment))
                    .await
                    .context("noting the refused review in the summary comment")?;
            }
        } else {
            tracing::info!(
                "the pull request has moved on to a newer commit: its summary and review comments are left to that commit's run"
            );
        }
        self.store
            .finish_publication(self.job.id, None, self.now_ms)
            .await?;
        if let Some(note) = left_out {
            self.store
                .note_publication(self.job.id, &note.recorded, self.now_ms)
                .await?;
        }
        Ok(())
    }

    /// Annotations go 50 a request (GitHub appends them); the last batch goes with
    /// the conclusion. The store counts what was sent, so a retry sends the rest.
    async fn complete_check_run(&self, p: &Publication, run_id: i64, plan: &Plan) -> Result<()> {
        if p.check_state.as_deref() == Some("completed") {
            return Ok(());
        }
        let id = match p.check_run_id {
            Some(id) => id,
            None => self.create_check_run().await?,
        };
        let all = &plan.check.annotations;
        let mut sent = usize::try_from(p.annotations_sent)
            .unwrap_or(0)
            .min(all.len());
        let per = super::check::ANNOTATIONS_PER_REQUEST;
        while all.len() - sent > per {
            let batch = &all[sent..sent + per];
            self.client
                .update_check_run(id, &CheckRunUpdate::output(output(plan, batch)))
                .await?;
            sent += batch.len();
            self.store
                .set_annotations_sent(self.job.id, sent as i64, self.now_ms)
                .await?;
        }
        let last = CheckRunUpdate::completed(
            plan.conclusion.as_str(),
            output(plan, &all[sent..]),
            self.details_url(Some(run_id)),
        );
        self.client.update_check_run(id, &last).await?;
        self.store
            .set_annotations_sent(self.job.id, all.len() as i64, self.now_ms)
            .await?;
        self.store
            .set_check_state(self.job.id, "completed", self.now_ms)
            .await
    }

    /// A check job that cannot produce a result (an invalid `.meshward.yaml`, or out
    /// of attempts) still ends its check run, with the reason: nothing is left
    /// spinning, and the reason is where people look.
    pub(crate) async fn fail_check(&self, reason: &str) -> Result<()> {
        let p = self.publication().await?;
        if self.checks_api {
            if p.check_state.as_deref() == Some("completed") {
                return Ok(());
            }
            let id = match p.check_run_id {
                Some(id) => id,
                None => self.create_check_run().await?,
            };
            let summary = failure_summary(reason);
            self.client
                .update_check_run(id, &self.failed_check(&summary))
                .await?;
            self.store
                .set_check_state(self.job.id, "completed", self.now_ms)
                .await?;
        } else {
            let description = format!("meshward could not check this change: {reason}");
            self.post_status("error", &description, self.details_url(None))
                .await?;
        }
        self.store
            .finish_publication(self.job.id, Some(reason), self.now_ms)
            .await
    }

    /// The check run completed as `failure`, with [`failure_summary`].
    fn failed_check<'a>(&self, summary: &'a str) -> CheckRunUpdate<'a, Annotation> {
        let output = CheckRunOutput {
            title: "meshward could not check this change",
            summary,
            text: None,
            annotations: None,
        };
        CheckRunUpdate::completed(Conclusion::Failure.as_str(), output, self.details_url(None))
    }

    /// The last word of a job that failed for good after GitHub refused a call (or
    /// after its run was stored): a check run it left `in_progress` (a `pending`
    /// status with a token) is completed as failed, with the reason, in exactly one
    /// call; if GitHub refuses that too, nothing more is asked. Nothing is created:
    /// a job that never got its check run started leaves none behind.
    pub(crate) async fn end_check_once(&self, reason: &str) -> Result<()> {
        let p = self.publication().await?;
        let result = if self.checks_api {
            match p.check_run_id {
                Some(id) if p.check_state.as_deref() != Some("completed") => {
                    let summary = failure_summary(reason);
                    async {
                        self.client
                            .update_check_run_once(id, &self.failed_check(&summary))
                            .await
                            .context("completing the check run after the job failed")?;
                        self.store
                            .set_check_state(self.job.id, "completed", self.now_ms)
                            .await
                    }
                    .await
                }
                _ => Ok(()),
            }
        } else if p.check_state.as_deref() == Some("pending") {
            let description = format!("meshward could not check this change: {reason}");
            let status = NewStatus::new("error", CHECK_NAME, &description, self.details_url(None));
            async {
                self.client
                    .create_status_once(&self.head, &status)
                    .await
                    .context("setting the commit status after the job failed")?;
                self.store
                    .set_check_state(self.job.id, "error", self.now_ms)
                    .await
            }
            .await
        } else {
            Ok(())
        };
        // The job's reason is recorded whether or not GitHub took the last word.
        self.store
            .finish_publication(self.job.id, Some(reason), self.now_ms)
            .await?;
        result
    }

    async fn pull_request_is_at_this_commit(&self) -> Result<bool> {
        let pr = self
            .client
            .pull_request(self.pr)
            .await
            .context("reading the pull request")?;
        Ok(pr.head.sha == self.head)
    }

    /// meshward's summary comment among the pull request's comments: the marker
    /// first in the body and, for an App, written by a bot (a person quoting the
    /// marker does not get their comment overwritten).
    async fn find_summary_comment(&self) -> Result<Option<i64>> {
        let comments = self.client.issue_comments(self.pr).await?;
        Ok(comments
            .iter()
            .filter(|c| {
                c.body
                    .as_deref()
                    .is_some_and(|b| b.trim_start().starts_with(super::summary::MARKER))
            })
            .find(|c| !self.checks_api || c.by_bot())
            .map(|c| c.id))
    }

    /// Writes the summary comment; returns its id (None: a quiet neutral run).
    async fn summary_comment(&self, plan: &Plan) -> Result<Option<i64>> {
        let (repo_id, pr, job) = (self.job.repo_id, self.pr.get(), self.job.id);
        let head = self.job.head_sha.as_str();
        let mut replacing = false;
        let recorded = self.store.pr_comment(repo_id, pr).await?;
        if recorded.is_none() && plan.conclusion == Conclusion::Neutral {
            // A change with nothing to check gets no comment to read (one written by
            // an earlier push is kept up to date, though).
            return Ok(None);
        }
        if let Some(id) = recorded {
            let edited = self.client.edit_issue_comment(id, &plan.comment).await;
            match edited.or_refused(StatusCode::NOT_FOUND)? {
                Answer::Done(()) => {
                    self.store
                        .set_pr_comment(repo_id, pr, id, job, head, self.now_ms)
                        .await?;
                    self.store
                        .set_publication_comment(job, id, self.now_ms)
                        .await?;
                    return Ok(Some(id));
                }
                // Someone deleted it: write it again.
                Answer::Refused { .. } => replacing = true,
            }
        }
        let found = self.find_summary_comment().await?;
        let mut id = match found {
            Some(id) => {
                self.client.edit_issue_comment(id, &plan.comment).await?;
                id
            }
            None => {
                self.client
                    .create_issue_comment(self.pr, &plan.comment)
                    .await?
            }
        };
        if replacing {
            self.store
                .set_pr_comment(repo_id, pr, id, job, head, self.now_ms)
                .await?;
        } else {
            let winner = self
                .store
                .claim_pr_comment(repo_id, pr, id, job, head, self.now_ms)
                .await?;
            if winner != id {
                // Another run of this pull request recorded its comment first: keep
                // that one, so there is never a second.
                if found.is_none() {
                    self.client.delete_issue_comment(id).await?;
                }
                self.client
                    .edit_issue_comment(winner, &plan.comment)
                    .await?;
                id = winner;
            }
        }
        self.store
            .set_publication_comment(job, id, self.now_ms)
            .await?;
        Ok(Some(id))
    }

    /// Answers the comments of resolved findings and posts the new inline comments
    /// as one review. Some(note): GitHub refused the review as invalid (422: a line
    /// no longer in the diff, after a push raced this run); its findings are in the
    /// summary only, and the note says why.
    async fn review(&self, plan: &Plan) -> Result<Option<LeftOut>> {
        let (repo_id, pr) = (self.job.repo_id, self.pr);
        let records = self.store.review_comments(repo_id, pr.get()).await?;
        for r in records
            .iter()
            .filter(|r| r.resolved_at_ms.is_none() && !plan.live.contains(&r.finding_key))
        {
            self.answer_resolved(r).await?;
        }
        if !plan.inline_comments {
            return Ok(None);
        }
        let mut open: BTreeSet<String> = records
            .iter()
            .filter(|r| r.resolved_at_ms.is_none() && plan.live.contains(&r.finding_key))
            .map(|r| r.finding_key.clone())
            .collect();
        if plan.inline.iter().all(|c| open.contains(&c.key)) {
            return Ok(None);
        }
        let diff = self.diff_lines().await?;
        let mut to_post = inline::to_post(&plan.inline, &diff, &open);
        if to_post.is_empty() {
            return Ok(None);
        }
        // Posted before but not recorded (the process stopped in between): record
        // those instead of posting them again. Only a comment this commit's run
        // posted and no record knows qualifies: the old, answered comment of a
        // finding that was fixed and has come back is history, and the finding
        // gets a new comment.
        let known: BTreeSet<i64> = records.iter().map(|r| r.comment_id).collect();
        let listed = self.client.review_comments(pr).await?;
        let head = self.head.as_str();
        for c in listed.iter().filter(|c| {
            c.in_reply_to_id.is_none()
                && !known.contains(&c.id)
                && c.original_commit_id.as_deref().or(c.commit_id.as_deref()) == Some(head)
        }) {
            let Some(key) = c.body.as_deref().and_then(inline::key_in) else {
                continue;
            };
            if let Some(cand) = to_post.iter().find(|p| p.key == key) {
                self.record(cand, c.id, c.pull_request_review_id).await?;
                open.insert(key.to_string());
            }
        }
        to_post.retain(|c| !open.contains(&c.key));
        if to_post.is_empty() {
            return Ok(None);
        }
        let body = format!(
            "meshward: {} on lines this pull request changes. The summary comment has the whole report.",
            match to_post.len() {
                1 => "1 new finding".to_string(),
                n => format!("{n} new findings"),
            }
        );
        let comments = to_post
            .iter()
            .map(|c| NewReviewComment::on_head(&c.path, c.line, &c.body))
            .collect();
        let review = NewReview::comment(&self.head, &body, comments);
        let posted = self.client.create_review(pr, &review).await;
        let review_id = match posted.or_refused(StatusCode::UNPROCESSABLE_ENTITY)? {
            Answer::Done(id) => id,
            Answer::Refused { message, error } => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "GitHub refused the review; its findings are in the summary only"
                );
                return Ok(Some(LeftOut::refused_review(to_post.len(), &message)));
            }
        };
        self.store
            .set_publication_review(self.job.id, review_id, self.now_ms)
            .await?;
        let posted = self
            .client
            .comments_of_review(pr, review_id)
            .await
            .context("reading the review's comments back")?;
        for c in &posted {
            let Some(key) = c.body.as_deref().and_then(inline::key_in) else {
                continue;
            };
            if let Some(cand) = to_post.iter().find(|p| p.key == key) {
                self.record(cand, c.id, Some(review_id)).await?;
            }
        }
        Ok(None)
    }

    async fn record(
        &self,
        c: &inline::Candidate,
        comment_id: i64,
        review_id: Option<i64>,
    ) -> Result<()> {
        self.store
            .record_review_comment(&ReviewCommentRecord {
                repo_id: self.job.repo_id,
                pr_number: self.pr.get(),
                finding_key: c.key.clone(),
                path: c.path.clone(),
                rule: c.rule.clone(),
                subject: c.subject.clone(),
                line: i64::from(c.line),
                comment_id,
                review_id,
                job_id: Some(self.job.id),
                head_sha: self.job.head_sha.clone(),
                posted_at_ms: self.now_ms,
                resolved_at_ms: None,
                reply_id: None,
            })
            .await
    }

    /// The head-side lines of the pull request's diff, per file.
    async fn diff_lines(&self) -> Result<BTreeMap<String, BTreeSet<u32>>> {
        let files = self
            .client
            .pull_request_files(self.pr)
            .await
            .context("reading the pull request's diff")?;
        Ok(files
            .into_iter()
            .map(|f| {
                // Large and binary files come without a patch: no line can be commented.
                let lines = super::diff::right_lines(f.patch.as_deref().unwrap_or_default());
                (f.filename, lines)
            })
            .collect())
    }

    /// Answers a comment whose finding is gone, and resolves its thread where the
    /// API allows (GraphQL; best effort).
    async fn answer_resolved(&self, r: &ReviewCommentRecord) -> Result<()> {
        let body = inline::resolved_body(&r.rule, &r.subject, self.head.as_str());
        let reply = self
            .client
            .reply_to_review_comment(self.pr, r.comment_id, &body)
            .await
            .or_refused(StatusCode::NOT_FOUND);
        let reply_id = match reply {
            Ok(Answer::Done(id)) => Some(id),
            // The comment was deleted: nothing to answer.
            Ok(Answer::Refused { .. }) => None,
            Err(e) => return Err(e.context("answering a resolved finding's comment")),
        };
        if reply_id.is_some() {
            if let Err(e) = self.resolve_thread(r.comment_id).await {
                tracing::warn!(
                    comment = r.comment_id,
                    error = format!("{e:#}"),
                    "could not mark the review thread resolved"
                );
            }
        }
        self.store
            .resolve_review_comment(
                self.job.repo_id,
                self.pr.get(),
                &r.finding_key,
                reply_id,
                self.now_ms,
            )
            .await
    }

    /// Marks the thread that comment `comment_id` starts resolved (GraphQL).
    async fn resolve_thread(&self, comment_id: i64) -> Result<()> {
        match self
            .client
            .review_thread_starting_with(self.pr, comment_id)
            .await?
        {
            Some(t) if !t.is_resolved => self.client.resolve_review_thread(&t).await,
            Some(_) => Ok(()),
            None => Err(anyhow!("no review thread starts with comment {comment_id}")),
        }
    }
}

/// One request's worth of the check run's output: the summary with `annotations`.
fn output<'a>(plan: &'a Plan, annotations: &'a [Annotation]) -> CheckRunOutput<'a, Annotation> {
    CheckRunOutput {
        title: &plan.check.title,
        summary: &plan.check.summary,
        text: plan.check.text.as_deref(),
        annotations: Some(annotations),
    }
}

/// A failed check run's summary: the reason, cut to GitHub's limit.
fn failure_summary(reason: &str) -> String {
    super::fit(
        &format!("meshward could not check this change:\n\n```\n{reason}\n```\n"),
        super::check::OUTPUT_LIMIT,
        "```\n(cut)\n",
    )
}
