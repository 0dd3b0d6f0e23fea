//! Carrying out a [`Plan`] on GitHub. Every step reads what the store recorded
//! before it posts and records what GitHub answered right after, so carrying out a
//! plan again (a retry, a restart) edits and continues instead of posting twice:
//! the check run is created once per job and its annotations are sent once; the
//! summary comment is the one recorded (or found by its marker); an inline comment
//! is posted once per finding key.

use super::{inline, Conclusion, Plan, CHECK_NAME};
use crate::github::{GitHubError, RepoClient};
use crate::store::{Job, Publication, ReviewCommentRecord, Store};
use anyhow::{anyhow, Context as _, Result};
use http::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Pages read of a pull request's lists (100 items each): GitHub lists at most
/// 3,000 files of a pull request.
const MAX_PAGES: u32 = 30;

/// Where and how one job publishes.
pub struct Target<'a> {
    pub client: &'a RepoClient,
    pub store: &'a Store,
    pub job: &'a Job,
    pub pr_number: i64,
    /// A GitHub App posts a check run; a plain token cannot, and posts a commit
    /// status instead.
    pub checks_api: bool,
    /// meshward's page for the run (`MESHWARD_PUBLIC_URL`), if configured.
    pub public_url: Option<&'a str>,
    /// The queue's clock, for the history's timestamps.
    pub now_ms: i64,
}

fn now_iso() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Is this error GitHub answering `status`?
fn answered(e: &anyhow::Error, status: StatusCode) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<GitHubError>())
        .any(|g| g.status == status)
}

fn id_of(v: &Value, what: &str) -> Result<i64> {
    v["id"]
        .as_i64()
        .ok_or_else(|| anyhow!("GitHub's answer for {what} has no id"))
}

impl Target<'_> {
    fn repo(&self) -> &str {
        self.client.repo()
    }

    fn details_url(&self, run_id: Option<i64>) -> Option<String> {
        let base = self.public_url?.trim_end_matches('/');
        Some(match run_id {
            Some(id) => format!("{base}/repos/{}/runs/{id}", self.repo()),
            None => format!("{base}/repos/{}", self.repo()),
        })
    }

    async fn publication(&self) -> Result<Publication> {
        self.store
            .start_publication(self.job, self.pr_number, self.now_ms)
            .await
    }

    /// When the job starts: the check run `in_progress` (a `pending` status with a
    /// token), so the pull request shows the check is running.
    pub async fn start(&self) -> Result<()> {
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
        let v = self
            .client
            .send_json(
                Method::POST,
                &format!("/repos/{}/check-runs", self.repo()),
                &json!({
                    "name": CHECK_NAME,
                    "head_sha": self.job.head_sha,
                    "status": "in_progress",
                    "started_at": now_iso(),
                    "external_id": self.job.id.to_string(),
                }),
            )
            .await
            .context("creating the check run")?;
        let id = id_of(&v, "the check run")?;
        self.store
            .set_check_run(self.job.id, id, self.now_ms)
            .await?;
        Ok(id)
    }

    async fn post_status(&self, state: &str, description: &str, url: Option<String>) -> Result<()> {
        let mut body = json!({
            "state": state,
            "context": CHECK_NAME,
            "description": description.chars().take(140).collect::<String>(),
        });
        if let Some(url) = url {
            body["target_url"] = url.into();
        }
        self.client
            .send_json(
                Method::POST,
                &format!("/repos/{}/statuses/{}", self.repo(), self.job.head_sha),
                &body,
            )
            .await
            .with_context(|| format!("setting the commit status to {state}"))?;
        self.store
            .set_check_state(self.job.id, state, self.now_ms)
            .await
    }

    /// Publishes a stored run: completes the check run (or sets the status), then,
    /// if the pull request is still at this commit, the summary comment and the
    /// review. Each step is skipped when the store shows it done.
    pub async fn publish(&self, run_id: i64, plan: &Plan) -> Result<()> {
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
                self.edit_comment(id, &with_note(&plan.comment, &note.comment))
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

    fn output(&self, plan: &Plan, annotations: &[super::check::Annotation]) -> Value {
        let mut out = json!({
            "title": plan.check.title,
            "summary": plan.check.summary,
            "annotations": annotations,
        });
        if let Some(text) = &plan.check.text {
            out["text"] = text.clone().into();
        }
        out
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
        let path = format!("/repos/{}/check-runs/{id}", self.repo());
        let all = &plan.check.annotations;
        let mut sent = usize::try_from(p.annotations_sent)
            .unwrap_or(0)
            .min(all.len());
        let per = super::check::ANNOTATIONS_PER_REQUEST;
        while all.len() - sent > per {
            let batch = &all[sent..sent + per];
            self.client
                .send_json(
                    Method::PATCH,
                    &path,
                    &json!({ "output": self.output(plan, batch) }),
                )
                .await?;
            sent += batch.len();
            self.store
                .set_annotations_sent(self.job.id, sent as i64, self.now_ms)
                .await?;
        }
        let mut body = json!({
            "status": "completed",
            "conclusion": plan.conclusion.as_str(),
            "completed_at": now_iso(),
            "output": self.output(plan, &all[sent..]),
        });
        if let Some(url) = self.details_url(Some(run_id)) {
            body["details_url"] = url.into();
        }
        self.client.send_json(Method::PATCH, &path, &body).await?;
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
    pub async fn fail_check(&self, reason: &str) -> Result<()> {
        let p = self.publication().await?;
        if self.checks_api {
            if p.check_state.as_deref() == Some("completed") {
                return Ok(());
            }
            let id = match p.check_run_id {
                Some(id) => id,
                None => self.create_check_run().await?,
            };
            let body = self.failed_check_body(reason);
            self.client
                .send_json(
                    Method::PATCH,
                    &format!("/repos/{}/check-runs/{id}", self.repo()),
                    &body,
                )
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

    /// The check run completed as `failure`, with the reason in its summary.
    fn failed_check_body(&self, reason: &str) -> Value {
        let mut body = json!({
            "status": "completed",
            "conclusion": Conclusion::Failure.as_str(),
            "completed_at": now_iso(),
            "output": {
                "title": "meshward could not check this change",
                "summary": super::fit(
                    &format!("meshward could not check this change:\n\n```\n{reason}\n```\n"),
                    super::check::OUTPUT_LIMIT,
                    "```\n(cut)\n",
                ),
            },
        });
        if let Some(url) = self.details_url(None) {
            body["details_url"] = url.into();
        }
        body
    }

    /// The last word of a job that failed for good after GitHub refused a call (or
    /// after its run was stored): a check run it left `in_progress` (a `pending`
    /// status with a token) is completed as failed, with the reason, in exactly one
    /// call; if GitHub refuses that too, nothing more is asked. Nothing is created:
    /// a job that never got its check run started leaves none behind.
    pub async fn end_check_once(&self, reason: &str) -> Result<()> {
        let p = self.publication().await?;
        let result = if self.checks_api {
            match p.check_run_id {
                Some(id) if p.check_state.as_deref() != Some("completed") => {
                    let sent = self
                        .client
                        .send_json_once(
                            Method::PATCH,
                            &format!("/repos/{}/check-runs/{id}", self.repo()),
                            &self.failed_check_body(reason),
                        )
                        .await
                        .context("completing the check run after the job failed");
                    match sent {
                        Ok(_) => {
                            self.store
                                .set_check_state(self.job.id, "completed", self.now_ms)
                                .await
                        }
                        Err(e) => Err(e),
                    }
                }
                _ => Ok(()),
            }
        } else if p.check_state.as_deref() == Some("pending") {
            let description = format!("meshward could not check this change: {reason}");
            let mut body = json!({
                "state": "error",
                "context": CHECK_NAME,
                "description": description.chars().take(140).collect::<String>(),
            });
            if let Some(url) = self.details_url(None) {
                body["target_url"] = url.into();
            }
            match self
                .client
                .send_json_once(
                    Method::POST,
                    &format!("/repos/{}/statuses/{}", self.repo(), self.job.head_sha),
                    &body,
                )
                .await
                .context("setting the commit status after the job failed")
            {
                Ok(_) => {
                    self.store
                        .set_check_state(self.job.id, "error", self.now_ms)
                        .await
                }
                Err(e) => Err(e),
            }
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
        let v = self
            .client
            .get_json(&format!("/repos/{}/pulls/{}", self.repo(), self.pr_number))
            .await
            .context("reading the pull request")?;
        Ok(v["head"]["sha"].as_str() == Some(self.job.head_sha.as_str()))
    }

    async fn edit_comment(&self, id: i64, body: &str) -> Result<()> {
        self.client
            .send_json(
                Method::PATCH,
                &format!("/repos/{}/issues/comments/{id}", self.repo()),
                &json!({ "body": body }),
            )
            .await?;
        Ok(())
    }

    /// meshward's summary comment among the pull request's comments: the marker
    /// first in the body and, for an App, written by a bot (a person quoting the
    /// marker does not get their comment overwritten).
    async fn find_summary_comment(&self) -> Result<Option<i64>> {
        let comments = self
            .client
            .get_pages(
                &format!("/repos/{}/issues/{}/comments", self.repo(), self.pr_number),
                MAX_PAGES,
            )
            .await?;
        Ok(comments
            .iter()
            .filter(|c| {
                c["body"]
                    .as_str()
                    .is_some_and(|b| b.trim_start().starts_with(super::summary::MARKER))
            })
            .filter(|c| !self.checks_api || c["user"]["type"].as_str() == Some("Bot"))
            .find_map(|c| c["id"].as_i64()))
    }

    /// Writes the summary comment; returns its id (None: a quiet neutral run).
    async fn summary_comment(&self, plan: &Plan) -> Result<Option<i64>> {
        let (repo_id, pr, job) = (self.job.repo_id, self.pr_number, self.job.id);
        let head = self.job.head_sha.as_str();
        let mut replacing = false;
        let recorded = self.store.pr_comment(repo_id, pr).await?;
        if recorded.is_none() && plan.conclusion == Conclusion::Neutral {
            // A change with nothing to check gets no comment to read (one written by
            // an earlier push is kept up to date, though).
            return Ok(None);
        }
        if let Some(id) = recorded {
            match self.edit_comment(id, &plan.comment).await {
                Ok(()) => {
                    self.store
                        .set_pr_comment(repo_id, pr, id, job, head, self.now_ms)
                        .await?;
                    self.store
                        .set_publication_comment(job, id, self.now_ms)
                        .await?;
                    return Ok(Some(id));
                }
                // Someone deleted it: write it again.
                Err(e) if answered(&e, StatusCode::NOT_FOUND) => replacing = true,
                Err(e) => return Err(e),
            }
        }
        let found = self.find_summary_comment().await?;
        let mut id = match found {
            Some(id) => {
                self.edit_comment(id, &plan.comment).await?;
                id
            }
            None => {
                let v = self
                    .client
                    .send_json(
                        Method::POST,
                        &format!("/repos/{}/issues/{pr}/comments", self.repo()),
                        &json!({ "body": plan.comment }),
                    )
                    .await?;
                id_of(&v, "the summary comment")?
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
                    self.client
                        .send_empty(
                            Method::DELETE,
                            &format!("/repos/{}/issues/comments/{id}", self.repo()),
                        )
                        .await?;
                }
                self.edit_comment(winner, &plan.comment).await?;
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
        let (repo_id, pr) = (self.job.repo_id, self.pr_number);
        let records = self.store.review_comments(repo_id, pr).await?;
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
        let listed = self
            .client
            .get_pages(
                &format!("/repos/{}/pulls/{pr}/comments", self.repo()),
                MAX_PAGES,
            )
            .await?;
        let head = self.job.head_sha.as_str();
        for c in listed.iter().filter(|c| {
            c["in_reply_to_id"].is_null()
                && c["id"].as_i64().is_some_and(|id| !known.contains(&id))
                && c["original_commit_id"].as_str().or(c["commit_id"].as_str()) == Some(head)
        }) {
            let (Some(key), Some(id)) = (
                c["body"].as_str().and_then(inline::key_in),
                c["id"].as_i64(),
            ) else {
                continue;
            };
            if let Some(cand) = to_post.iter().find(|p| p.key == key) {
                self.record(cand, id, c["pull_request_review_id"].as_i64())
                    .await?;
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
        let comments: Vec<Value> = to_post
            .iter()
            .map(|c| json!({"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body}))
            .collect();
        let posted = self
            .client
            .send_json(
                Method::POST,
                &format!("/repos/{}/pulls/{pr}/reviews", self.repo()),
                &json!({
                    "commit_id": self.job.head_sha,
                    "event": "COMMENT",
                    "body": body,
                    "comments": comments,
                }),
            )
            .await;
        let v = match posted {
            Ok(v) => v,
            Err(e) if answered(&e, StatusCode::UNPROCESSABLE_ENTITY) => {
                let why = e
                    .chain()
                    .find_map(|c| c.downcast_ref::<GitHubError>())
                    .map(|g| g.message.clone())
                    .unwrap_or_default();
                tracing::warn!(
                    error = format!("{e:#}"),
                    "GitHub refused the review; its findings are in the summary only"
                );
                return Ok(Some(LeftOut::refused_review(to_post.len(), &why)));
            }
            Err(e) => return Err(e),
        };
        let review_id = id_of(&v, "the review")?;
        self.store
            .set_publication_review(self.job.id, review_id, self.now_ms)
            .await?;
        let posted = self
            .client
            .get_pages(
                &format!(
                    "/repos/{}/pulls/{pr}/reviews/{review_id}/comments",
                    self.repo()
                ),
                MAX_PAGES,
            )
            .await
            .context("reading the review's comments back")?;
        for c in &posted {
            let (Some(key), Some(id)) = (
                c["body"].as_str().and_then(inline::key_in),
                c["id"].as_i64(),
            ) else {
                continue;
            };
            if let Some(cand) = to_post.iter().find(|p| p.key == key) {
                self.record(cand, id, Some(review_id)).await?;
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
                pr_number: self.pr_number,
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
            .get_pages(
                &format!("/repos/{}/pulls/{}/files", self.repo(), self.pr_number),
                MAX_PAGES,
            )
            .await
            .context("reading the pull request's diff")?;
        Ok(files
            .iter()
            .filter_map(|f| {
                let name = f["filename"].as_str()?;
                // Large and binary files come without a patch: no line can be commented.
                let patch = f["patch"].as_str().unwrap_or_default();
                Some((name.to_string(), super::diff::right_lines(patch)))
            })
            .collect())
    }

    /// Answers a comment whose finding is gone, and resolves its thread where the
    /// API allows (GraphQL; best effort).
    async fn answer_resolved(&self, r: &ReviewCommentRecord) -> Result<()> {
        let reply = self
            .client
            .send_json(
                Method::POST,
                &format!(
                    "/repos/{}/pulls/{}/comments/{}/replies",
                    self.repo(),
                    self.pr_number,
                    r.comment_id
                ),
                &json!({ "body": inline::resolved_body(&r.rule, &r.subject, &self.job.head_sha) }),
            )
            .await;
        let reply_id = match reply {
            Ok(v) => v["id"].as_i64(),
            // The comment was deleted: nothing to answer.
            Err(e) if answered(&e, StatusCode::NOT_FOUND) => None,
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
                self.pr_number,
                &r.finding_key,
                reply_id,
                self.now_ms,
            )
            .await
    }

    async fn resolve_thread(&self, comment_id: i64) -> Result<()> {
        const THREADS: &str = "query($owner: String!, $name: String!, $number: Int!, $after: String) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { reviewThreads(first: 100, after: $after) { pageInfo { hasNextPage endCursor } nodes { id isResolved comments(first: 1) { nodes { databaseId } } } } } } }";
        const RESOLVE: &str = "mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { id isResolved } } }";
        // A bound against endless paging: 5,000 threads on one pull request.
        const MAX_PAGES: usize = 50;
        let (owner, name) = self
            .repo()
            .split_once('/')
            .ok_or_else(|| anyhow!("bad repository name"))?;
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let v = self
                .graphql(json!({
                    "query": THREADS,
                    "variables": {"owner": owner, "name": name, "number": self.pr_number, "after": after},
                }))
                .await?;
            let page = &v["data"]["repository"]["pullRequest"]["reviewThreads"];
            let thread = page["nodes"].as_array().and_then(|threads| {
                threads
                    .iter()
                    .find(|t| t["comments"]["nodes"][0]["databaseId"].as_i64() == Some(comment_id))
            });
            match thread {
                Some(t) if t["isResolved"].as_bool() != Some(true) => {
                    let id = t["id"].as_str().unwrap_or_default();
                    self.graphql(json!({"query": RESOLVE, "variables": {"id": id}}))
                        .await?;
                    return Ok(());
                }
                Some(_) => return Ok(()),
                None => {}
            }
            match page["pageInfo"]["endCursor"].as_str() {
                Some(cursor) if page["pageInfo"]["hasNextPage"].as_bool() == Some(true) => {
                    after = Some(cursor.to_string());
                }
                _ => break,
            }
        }
        Err(anyhow!("no review thread starts with comment {comment_id}"))
    }

    async fn graphql(&self, query: Value) -> Result<Value> {
        self.client.graphql(&query).await
    }
}

/// What a publication left out, and why: said in the summary comment and recorded.
struct LeftOut {
    /// Appended to the summary comment.
    comment: String,
    /// Recorded on the publication.
    recorded: String,
}

impl LeftOut {
    fn refused_review(findings: usize, why: &str) -> LeftOut {
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
fn with_note(comment: &str, note: &str) -> String {
    let limit = super::summary::COMMENT_LIMIT;
    let room = limit.saturating_sub(note.chars().count() + 2);
    let kept = if comment.chars().count() <= room {
        comment.to_string()
    } else {
        super::fit(comment, room, "")
    };
    format!("{}\n\n{note}", kept.trim_end_matches('\n'))
}

/// The reason recorded when GitHub refuses a call for good: what happened, and what
/// to do about it.
pub fn refusal_reason(repo: &str, e: &anyhow::Error) -> Option<String> {
    let g = GitHubError::refusal_in(e)?;
    let advice = match g.status {
        StatusCode::NOT_FOUND => format!(
            "the app is no longer installed on {repo}, or the repository, pull request or commit is gone"
        ),
        StatusCode::FORBIDDEN => format!(
            "the app lacks a permission on {repo} (it needs Checks, Pull requests and Commit statuses: write) or was suspended; accept the new permissions in the app's installation settings"
        ),
        _ => "GitHub refused the request as invalid".to_string(),
    };
    Some(format!(
        "{e:#}. GitHub refused this for good: {advice}. meshward will not retry; re-run the check once that is fixed."
    ))
}
