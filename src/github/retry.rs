//! When to try a GitHub call again, and how long to wait: exponential backoff,
//! `Retry-After`, and GitHub's rate-limit headers.

use chrono::{DateTime, Utc};
use http::{HeaderMap, StatusCode};
use std::time::Duration;

/// How often and how long meshward tries a GitHub call again.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first try (server errors, transport errors, rate limits).
    pub max_retries: u32,
    /// First backoff after a server error; doubled each time.
    pub base_delay: Duration,
    /// Longest wait, also for a rate limit's `Retry-After` (longer: give up, the job
    /// retries later).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// The wait before retry `attempt` (0-based) after a server error.
pub(super) fn backoff(retry: &RetryPolicy, attempt: u32) -> Duration {
    retry
        .base_delay
        .saturating_mul(2u32.saturating_pow(attempt))
        .min(retry.max_delay)
}

/// GitHub's `message`, with the details of a validation error (`errors`: objects
/// with a `message`, or strings) after it.
pub(super) fn error_message(body: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
    };
    let Some(message) = v["message"].as_str() else {
        return String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
    };
    let details: Vec<&str> = v["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().or_else(|| e["message"].as_str()))
        .take(5)
        .collect();
    if details.is_empty() {
        message.to_string()
    } else {
        format!("{message}: {}", details.join("; "))
    }
}

/// The longest wait meshward takes from GitHub's `Retry-After`: a longer (or absurd)
/// value is cut to this, so a job is never parked for days.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// `Retry-After` as seconds or as an HTTP date, at most [`MAX_RETRY_AFTER`].
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    let wait = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => {
            let at = DateTime::parse_from_rfc2822(value).ok()?;
            (at.with_timezone(&Utc) - Utc::now())
                .to_std()
                .unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The wait before retrying a server error: the backoff, or GitHub's `Retry-After`
/// when that is longer.
pub(super) fn server_error_wait(
    retry: &RetryPolicy,
    attempt: u32,
    headers: &HeaderMap,
) -> Duration {
    let backoff = backoff(retry, attempt);
    retry_after(headers).map_or(backoff, |asked| asked.max(backoff))
}

/// How long a rate-limited answer asks us to wait: `Retry-After`, else the primary
/// limit's reset time, else a minute for a secondary limit. None: not a rate limit.
pub(super) fn rate_limit_wait(
    status: StatusCode,
    headers: &HeaderMap,
    message: &str,
) -> Option<Duration> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(wait) = retry_after(headers) {
        return Some(wait);
    }
    if header("x-ratelimit-remaining") == Some("0") {
        if let Some(reset) = header("x-ratelimit-reset").and_then(|v| v.parse::<i64>().ok()) {
            let secs = (reset - Utc::now().timestamp()).max(0) as u64 + 1;
            return Some(Duration::from_secs(secs));
        }
    }
    if status == StatusCode::TOO_MANY_REQUESTS || message.to_lowercase().contains("rate limit") {
        return Some(Duration::from_secs(60));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_errors_keep_their_details() {
        let body = br#"{"message": "Validation Failed", "errors": [{"message": "Pull request review thread line must be part of the diff"}, "and this"]}"#;
        assert_eq!(
            error_message(body),
            "Validation Failed: Pull request review thread line must be part of the diff; and this"
        );
        assert_eq!(error_message(br#"{"message": "Not Found"}"#), "Not Found");
        assert_eq!(error_message(b"<html>"), "<html>");
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn server_errors_wait_for_retry_after_when_it_is_longer_than_the_backoff() {
        let retry = RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(2),
        };
        // No Retry-After: the backoff.
        assert_eq!(
            server_error_wait(&retry, 1, &headers(&[])),
            Duration::from_millis(10)
        );
        // Seconds.
        assert_eq!(
            server_error_wait(&retry, 0, &headers(&[("retry-after", "1")])),
            Duration::from_secs(1)
        );
        // Shorter than the backoff: the backoff.
        let slow = RetryPolicy {
            base_delay: Duration::from_secs(4),
            max_delay: Duration::from_secs(10),
            ..retry.clone()
        };
        assert_eq!(
            server_error_wait(&slow, 0, &headers(&[("retry-after", "1")])),
            Duration::from_secs(4)
        );
        // An HTTP date, about 30 s from now.
        let at = (Utc::now() + chrono::Duration::seconds(30)).to_rfc2822();
        let wait = server_error_wait(&retry, 0, &headers(&[("retry-after", &at)]));
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        // A date in the past: no wait beyond the backoff.
        let past = (Utc::now() - chrono::Duration::seconds(30)).to_rfc2822();
        assert_eq!(
            server_error_wait(&retry, 0, &headers(&[("retry-after", &past)])),
            Duration::from_millis(5)
        );
        // Bounded: a week is cut to an hour; garbage is ignored.
        assert_eq!(
            server_error_wait(&retry, 0, &headers(&[("retry-after", "604800")])),
            MAX_RETRY_AFTER
        );
        assert_eq!(
            server_error_wait(&retry, 0, &headers(&[("retry-after", "soon")])),
            Duration::from_millis(5)
        );
    }
}
