//! What meshward posted on pull requests: per job its check run (or commit status)
//! and the plan it publishes; per pull request its summary comment and inline review
//! comments. Re-runs read these to edit and answer instead of posting again.

use super::pool::{with_pool, Backend};
use super::{Job, Store};
use anyhow::Result;

/// A check job's publication.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Publication {
    pub job_id: i64,
    pub repo_id: i64,
    pub pr_number: i64,
    pub head_sha: String,
    pub run_id: Option<i64>,
    pub plan_json: Option<String>,
    pub check_run_id: Option<i64>,
    /// App mode: `in_progress` or `completed`; token mode: the commit status posted.
    pub check_state: Option<String>,
    pub annotations_sent: i64,
    pub comment_id: Option<i64>,
    pub review_id: Option<i64>,
    /// `started`, `stored`, `published` or `failed`.
    pub state: String,
    /// Why it `failed`; for a `published` one, what GitHub would not take (the
    /// inline comments of a refused review, posted to the summary only).
    pub error: Option<String>,
    pub published_at_ms: Option<i64>,
}

/// An inline review comment meshward posted.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ReviewCommentRecord {
    pub repo_id: i64,
    pub pr_number: i64,
    pub finding_key: String,
    pub path: String,
    pub rule: String,
    pub subject: String,
    pub line: i64,
    pub comment_id: i64,
    pub review_id: Option<i64>,
    pub job_id: Option<i64>,
    pub head_sha: String,
    pub posted_at_ms: i64,
    pub resolved_at_ms: Option<i64>,
    pub reply_id: Option<i64>,
}

const PUBLICATION_COLUMNS: &str = "job_id, repo_id, pr_number, head_sha, run_id, plan_json, \
     check_run_id, check_state, annotations_sent, comment_id, review_id, state, error, published_at_ms";

const REVIEW_COLUMNS: &str = "repo_id, pr_number, finding_key, path, rule, subject, line, \
     comment_id, review_id, job_id, head_sha, posted_at_ms, resolved_at_ms, reply_id";

impl Store {
    /// The publication of a check job, created (`started`) if it has none.
    pub async fn start_publication(
        &self,
        job: &Job,
        pr_number: i64,
        now: i64,
    ) -> Result<Publication> {
        let insert = "INSERT INTO publications (job_id, repo_id, pr_number, head_sha, state, \
                          created_at_ms, updated_at_ms) \
                      VALUES ($1, $2, $3, $4, 'started', $5, $5) ON CONFLICT (job_id) DO NOTHING";
        with_pool!(self, p => {
            sqlx::query(insert)
                .bind(job.id)
                .bind(job.repo_id)
                .bind(pr_number)
                .bind(&job.head_sha)
                .bind(now)
                .execute(p)
                .await?;
        });
        self.publication(job.id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("publication of job {} vanished", job.id))
    }

    pub async fn publication(&self, job_id: i64) -> Result<Option<Publication>> {
        let sql = format!("SELECT {PUBLICATION_COLUMNS} FROM publications WHERE job_id = $1");
        let publication = with_pool!(self, p => {
            sqlx::query_as::<_, Publication>(&sql).bind(job_id).fetch_optional(p).await?
        });
        Ok(publication)
    }

    /// Every publication of a pull request, oldest job first.
    pub async fn publications(&self, repo_id: i64, pr_number: i64) -> Result<Vec<Publication>> {
        let sql = format!(
            "SELECT {PUBLICATION_COLUMNS} FROM publications WHERE repo_id = $1 AND pr_number = $2 ORDER BY job_id"
        );
        let publications = with_pool!(self, p => {
            sqlx::query_as::<_, Publication>(&sql).bind(repo_id).bind(pr_number).fetch_all(p).await?
        });
        Ok(publications)
    }

    pub(crate) async fn set_check_run(
        &self,
        job_id: i64,
        check_run_id: i64,
        now: i64,
    ) -> Result<()> {
        self.update_publication(
            "check_run_id = $2, check_state = COALESCE(check_state, 'in_progress')",
            job_id,
            Some(check_run_id),
            now,
        )
        .await
    }

    /// `in_progress`/`completed` (check run) or the commit status posted.
    pub async fn set_check_state(&self, job_id: i64, state: &str, now: i64) -> Result<()> {
        let sql = "UPDATE publications SET check_state = $2, updated_at_ms = $3 WHERE job_id = $1";
        with_pool!(self, p => sqlx::query(sql).bind(job_id).bind(state).bind(now).execute(p).await.map(|_| ())?);
        Ok(())
    }

    pub(crate) async fn set_annotations_sent(
        &self,
        job_id: i64,
        sent: i64,
        now: i64,
    ) -> Result<()> {
        self.update_publication("annotations_sent = $2", job_id, Some(sent), now)
            .await
    }

    pub(crate) async fn set_publication_comment(
        &self,
        job_id: i64,
        comment_id: i64,
        now: i64,
    ) -> Result<()> {
        self.update_publication("comment_id = $2", job_id, Some(comment_id), now)
            .await
    }

    pub(crate) async fn set_publication_review(
        &self,
        job_id: i64,
        review_id: i64,
        now: i64,
    ) -> Result<()> {
        self.update_publication("review_id = $2", job_id, Some(review_id), now)
            .await
    }

    async fn update_publication(
        &self,
        set: &str,
        job_id: i64,
        value: Option<i64>,
        now: i64,
    ) -> Result<()> {
        let sql = format!("UPDATE publications SET {set}, updated_at_ms = $3 WHERE job_id = $1");
        with_pool!(self, p => sqlx::query(&sql).bind(job_id).bind(value).bind(now).execute(p).await.map(|_| ())?);
        Ok(())
    }

    /// `published`, or `failed` with the reason (the run itself stays stored).
    pub async fn finish_publication(
        &self,
        job_id: i64,
        error: Option<&str>,
        now: i64,
    ) -> Result<()> {
        let sql = "UPDATE publications SET state = CASE WHEN $2 IS NULL THEN 'published' ELSE 'failed' END, \
                       error = $2, updated_at_ms = $3, \
                       published_at_ms = CASE WHEN $2 IS NULL THEN $3 ELSE published_at_ms END \
                   WHERE job_id = $1";
        let sql = match self.backend() {
            // PostgreSQL cannot infer the type of a parameter used only in IS NULL.
            Backend::Postgres => sql.replace("$2 IS NULL", "$2::TEXT IS NULL"),
            Backend::Sqlite => sql.to_string(),
        };
        with_pool!(self, p => sqlx::query(&sql).bind(job_id).bind(error).bind(now).execute(p).await.map(|_| ())?);
        Ok(())
    }

    /// Notes on a publication what was left out of it (its state is unchanged).
    pub(crate) async fn note_publication(&self, job_id: i64, note: &str, now: i64) -> Result<()> {
        let sql = "UPDATE publications SET error = $2, updated_at_ms = $3 WHERE job_id = $1";
        with_pool!(self, p => sqlx::query(sql).bind(job_id).bind(note).bind(now).execute(p).await.map(|_| ())?);
        Ok(())
    }

    // ------------------------------------------------------------ pull request of a commit

    /// The pull request a check job of this repository checked at `head_sha` (the
    /// latest such job): its number, base commit and base branch. A re-run of a
    /// fork's pull request names no pull request; this is where it is found first.
    pub(crate) async fn pull_request_of_commit(
        &self,
        repo_id: i64,
        head_sha: &str,
    ) -> Result<Option<(i64, String, Option<String>)>> {
        let sql = "SELECT pr_number, base_sha, base_ref FROM jobs \
                   WHERE repo_id = $1 AND head_sha = $2 AND kind = 'check' \
                       AND pr_number IS NOT NULL AND base_sha IS NOT NULL \
                   ORDER BY id DESC LIMIT 1";
        let pr = with_pool!(self, p => {
            sqlx::query_as::<_, (i64, String, Option<String>)>(sql)
                .bind(repo_id)
                .bind(head_sha)
                .fetch_optional(p)
                .await?
        });
        Ok(pr)
    }

    /// Gives a check job queued without a pull request (a fork's re-run) the pull
    /// request found for it, so its retries and its failure report know it.
    pub(crate) async fn set_job_pull_request(
        &self,
        job_id: i64,
        pr_number: i64,
        base_sha: &str,
        base_ref: Option<&str>,
        now: i64,
    ) -> Result<()> {
        let sql =
            "UPDATE jobs SET pr_number = $2, base_sha = $3, base_ref = $4, updated_at_ms = $5 \
                   WHERE id = $1 AND pr_number IS NULL";
        with_pool!(self, p => {
            sqlx::query(sql)
                .bind(job_id)
                .bind(pr_number)
                .bind(base_sha)
                .bind(base_ref)
                .bind(now)
                .execute(p)
                .await?;
        });
        Ok(())
    }

    // ------------------------------------------------------------ summary comment

    /// The summary comment of a pull request.
    pub async fn pr_comment(&self, repo_id: i64, pr_number: i64) -> Result<Option<i64>> {
        let sql = "SELECT comment_id FROM pr_comments WHERE repo_id = $1 AND pr_number = $2";
        let comment = with_pool!(self, p => {
            sqlx::query_scalar::<_, i64>(sql).bind(repo_id).bind(pr_number).fetch_optional(p).await?
        });
        Ok(comment)
    }

    /// Records `comment_id` as the pull request's summary comment unless one is
    /// recorded already, and returns the one that is: when two runs each created a
    /// comment, the first recorded wins and the other deletes its own.
    pub async fn claim_pr_comment(
        &self,
        repo_id: i64,
        pr_number: i64,
        comment_id: i64,
        job_id: i64,
        head_sha: &str,
        now: i64,
    ) -> Result<i64> {
        let sql = "INSERT INTO pr_comments (repo_id, pr_number, comment_id, job_id, head_sha, updated_at_ms) \
                   VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (repo_id, pr_number) DO NOTHING";
        with_pool!(self, p => {
            sqlx::query(sql)
                .bind(repo_id)
                .bind(pr_number)
                .bind(comment_id)
                .bind(job_id)
                .bind(head_sha)
                .bind(now)
                .execute(p)
                .await?;
        });
        self.pr_comment(repo_id, pr_number)
            .await?
            .ok_or_else(|| anyhow::anyhow!("summary comment record vanished"))
    }

    /// Records the summary comment unconditionally (the recorded one was deleted on
    /// GitHub and replaced), or notes which run last wrote it.
    pub(crate) async fn set_pr_comment(
        &self,
        repo_id: i64,
        pr_number: i64,
        comment_id: i64,
        job_id: i64,
        head_sha: &str,
        now: i64,
    ) -> Result<()> {
        let sql = "INSERT INTO pr_comments (repo_id, pr_number, comment_id, job_id, head_sha, updated_at_ms) \
                   VALUES ($1, $2, $3, $4, $5, $6) \
                   ON CONFLICT (repo_id, pr_number) DO UPDATE SET comment_id = excluded.comment_id, \
                       job_id = excluded.job_id, head_sha = excluded.head_sha, updated_at_ms = excluded.updated_at_ms";
        with_pool!(self, p => {
            sqlx::query(sql)
                .bind(repo_id)
                .bind(pr_number)
                .bind(comment_id)
                .bind(job_id)
                .bind(head_sha)
                .bind(now)
                .execute(p)
                .await?;
        });
        Ok(())
    }

    // ------------------------------------------------------------ review comments

    pub async fn review_comments(
        &self,
        repo_id: i64,
        pr_number: i64,
    ) -> Result<Vec<ReviewCommentRecord>> {
        let sql = format!(
            "SELECT {REVIEW_COLUMNS} FROM review_comments WHERE repo_id = $1 AND pr_number = $2 ORDER BY id"
        );
        let comments = with_pool!(self, p => {
            sqlx::query_as::<_, ReviewCommentRecord>(&sql).bind(repo_id).bind(pr_number).fetch_all(p).await?
        });
        Ok(comments)
    }

    /// Records an inline comment for a finding key (a key commented again after it
    /// was resolved gets its new comment).
    pub async fn record_review_comment(&self, c: &ReviewCommentRecord) -> Result<()> {
        let sql = "INSERT INTO review_comments (repo_id, pr_number, finding_key, path, rule, subject, line, \
                       comment_id, review_id, job_id, head_sha, posted_at_ms, resolved_at_ms, reply_id) \
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULL, NULL) \
                   ON CONFLICT (repo_id, pr_number, finding_key) DO UPDATE SET path = excluded.path, \
                       rule = excluded.rule, subject = excluded.subject, line = excluded.line, \
                       comment_id = excluded.comment_id, review_id = excluded.review_id, \
                       job_id = excluded.job_id, head_sha = excluded.head_sha, \
                       posted_at_ms = excluded.posted_at_ms, resolved_at_ms = NULL, reply_id = NULL";
        with_pool!(self, p => {
            sqlx::query(sql)
                .bind(c.repo_id)
                .bind(c.pr_number)
                .bind(&c.finding_key)
                .bind(&c.path)
                .bind(&c.rule)
                .bind(&c.subject)
                .bind(c.line)
                .bind(c.comment_id)
                .bind(c.review_id)
                .bind(c.job_id)
                .bind(&c.head_sha)
                .bind(c.posted_at_ms)
                .execute(p)
                .await?;
        });
        Ok(())
    }

    /// Marks an inline comment answered as resolved (`reply_id`: the answer, None
    /// when the comment was gone).
    pub async fn resolve_review_comment(
        &self,
        repo_id: i64,
        pr_number: i64,
        finding_key: &str,
        reply_id: Option<i64>,
        now: i64,
    ) -> Result<()> {
        let sql = "UPDATE review_comments SET resolved_at_ms = $4, reply_id = $5 \
                   WHERE repo_id = $1 AND pr_number = $2 AND finding_key = $3";
        with_pool!(self, p => {
            sqlx::query(sql)
                .bind(repo_id)
                .bind(pr_number)
                .bind(finding_key)
                .bind(now)
                .bind(reply_id)
                .execute(p)
                .await?;
        });
        Ok(())
    }
}
