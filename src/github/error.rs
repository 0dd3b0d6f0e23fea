//! GitHub's error answers, and what they mean for a job: a refusal (give up), a
//! rate limit (wait as asked), or something to retry.

use http::{Method, StatusCode};
use std::time::Duration;

/// An error answer from GitHub (after retries).
#[derive(Debug, thiserror::Error)]
#[error("GitHub answered {status} to {method} {path}: {message}")]
pub struct GitHubError {
    pub status: StatusCode,
    pub method: Method,
    pub path: String,
    pub message: String,
    /// A rate limit, or a server error with `Retry-After`, whose wait was longer
    /// than the client waits: how long GitHub asked to wait (the job's retry waits
    /// at least this long).
    pub retry_after: Option<Duration>,
}

impl GitHubError {
    /// GitHub refuses this for good: the app was uninstalled or lacks a permission
    /// (403), the repository or object is gone (404), or the request is invalid
    /// (422). Trying again cannot help, so the job fails at once.
    pub fn is_refusal(&self) -> bool {
        self.retry_after.is_none()
            && matches!(
                self.status,
                StatusCode::FORBIDDEN | StatusCode::NOT_FOUND | StatusCode::UNPROCESSABLE_ENTITY
            )
    }

    /// The wait a rate limit in an error's chain asks for, if any.
    pub fn retry_after_in(e: &anyhow::Error) -> Option<Duration> {
        e.chain()
            .filter_map(|c| c.downcast_ref::<GitHubError>())
            .find_map(|g| g.retry_after)
    }

    /// GitHub's answer with `status` in an error's chain, if any.
    pub(crate) fn with_status_in(e: &anyhow::Error, status: StatusCode) -> Option<&GitHubError> {
        e.chain()
            .filter_map(|c| c.downcast_ref::<GitHubError>())
            .find(|g| g.status == status)
    }

    /// The refusal found in an error's chain, if any.
    pub fn refusal_in(e: &anyhow::Error) -> Option<&GitHubError> {
        e.chain()
            .filter_map(|c| c.downcast_ref::<GitHubError>())
            .find(|g| g.is_refusal())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_403_404_422_but_not_rate_limits() {
        let e = |status: StatusCode, rate_limited: bool| GitHubError {
            status,
            method: Method::POST,
            path: "/x".into(),
            message: String::new(),
            retry_after: rate_limited.then(|| Duration::from_secs(61)),
        };
        assert!(e(StatusCode::FORBIDDEN, false).is_refusal());
        assert!(e(StatusCode::NOT_FOUND, false).is_refusal());
        assert!(e(StatusCode::UNPROCESSABLE_ENTITY, false).is_refusal());
        assert!(!e(StatusCode::FORBIDDEN, true).is_refusal());
        assert!(!e(StatusCode::BAD_GATEWAY, false).is_refusal());
        assert!(!e(StatusCode::UNAUTHORIZED, false).is_refusal());
        let wrapped = anyhow::Error::new(e(StatusCode::NOT_FOUND, false)).context("publishing");
        assert!(GitHubError::refusal_in(&wrapped).is_some());
    }
}
