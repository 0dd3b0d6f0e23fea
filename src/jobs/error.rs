//! Why an attempt failed, as far as the queue cares: whether trying again can help,
//! and when. Decided once, where an attempt ends ([`JobError::classify`]); the
//! worker only matches on it.

use crate::github::GitHubError;
use http::StatusCode;
use std::time::Duration;

/// A failed attempt. Its text is what the job, its error run and the pull request
/// record.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JobError {
    /// Nothing a retry can fix: the repository's config file is invalid, or a
    /// re-run names nothing to check. The job fails at once.
    #[error("{0}")]
    Permanent(String),
    /// GitHub refuses for good (the app uninstalled, a permission missing, an
    /// object gone): as final as a bad config file, and no retry storm.
    #[error("{reason}")]
    Refused { reason: String },
    /// GitHub asked for a longer wait than the client waits in place: the next
    /// attempt waits at least this long.
    #[error("{error:#}")]
    RateLimited {
        retry_after: Duration,
        error: anyhow::Error,
    },
    /// Anything else: tried again after the backoff, while attempts last.
    #[error("{0:#}")]
    Transient(anyhow::Error),
}

impl JobError {
    /// What `e`, the end of an attempt on `repo`, means for the job. A
    /// [`JobError::Permanent`] raised inside the attempt keeps its class (`?` carries
    /// it in an `anyhow::Error`); GitHub's answers are read here.
    pub(crate) fn classify(repo: &str, e: anyhow::Error) -> JobError {
        if let Some(reason) = refusal_reason(repo, &e) {
            return JobError::Refused { reason };
        }
        let permanent = e
            .chain()
            .any(|c| matches!(c.downcast_ref(), Some(JobError::Permanent(_))));
        if permanent {
            return JobError::Permanent(format!("{e:#}"));
        }
        match GitHubError::retry_after_in(&e) {
            Some(retry_after) => JobError::RateLimited {
                retry_after,
                error: e,
            },
            None => JobError::Transient(e),
        }
    }
}

/// The reason recorded when GitHub refuses a call for good: what happened, and what
/// to do about it.
fn refusal_reason(repo: &str, e: &anyhow::Error) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn github(status: StatusCode, retry_after: Option<Duration>) -> anyhow::Error {
        anyhow::Error::new(GitHubError {
            status,
            method: Method::POST,
            path: "/repos/o/r/check-runs".into(),
            message: "no".into(),
            retry_after,
        })
        .context("creating the check run")
    }

    #[test]
    fn errors_are_classified_once_with_the_text_the_job_records() {
        let refused = JobError::classify("o/r", github(StatusCode::FORBIDDEN, None));
        assert!(matches!(refused, JobError::Refused { .. }), "{refused:?}");
        assert!(refused.to_string().starts_with(
            "creating the check run: GitHub answered 403 Forbidden to POST /repos/o/r/check-runs: no. GitHub refused this for good: the app lacks a permission on o/r"
        ), "{refused}");

        let wait = Duration::from_secs(600);
        let limited = JobError::classify("o/r", github(StatusCode::FORBIDDEN, Some(wait)));
        assert!(
            matches!(limited, JobError::RateLimited { retry_after, .. } if retry_after == wait)
        );

        let permanent = JobError::classify(
            "o/r",
            anyhow::Error::new(JobError::Permanent("config error: bad".into())),
        );
        assert!(matches!(&permanent, JobError::Permanent(m) if m == "config error: bad"));

        let transient = JobError::classify(
            "o/r",
            anyhow::anyhow!("connection reset").context("downloading o/r"),
        );
        assert!(matches!(transient, JobError::Transient(_)));
        assert_eq!(transient.to_string(), "downloading o/r: connection reset");
    }
}
