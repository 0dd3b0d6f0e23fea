//! Access to the trends API and the dashboard: a bearer token from
//! `MESHWARD_API_TOKENS`, or a session cookie the login form gives for one. Sessions
//! are stateless: the cookie holds its expiry and an HMAC of it keyed with the token,
//! so every replica accepts it, it cannot be forged or extended, and removing a token
//! from the configuration ends its sessions. The webhook has its own signatures.

use anyhow::{bail, Result};
use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

pub const SESSION_COOKIE: &str = "meshward_session";
const MIN_TOKEN_LEN: usize = 16;

/// The configured API tokens (secrets: never printed).
#[derive(Clone, Default)]
pub struct ApiTokens {
    tokens: Arc<Vec<SecretString>>,
}

impl std::fmt::Debug for ApiTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiTokens({} configured)", self.tokens.len())
    }
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    // Compare digests, so neither the length nor a prefix of a token leaks by timing.
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn session_mac(token: &SecretString, expires_ms: i64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(token.expose_secret().as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(format!("meshward-session-v1:{expires_ms}").as_bytes());
    mac
}

impl ApiTokens {
    /// Comma-separated tokens; blanks are ignored. A short token is refused: the API
    /// reads every repository's history.
    pub fn parse(value: &SecretString) -> Result<ApiTokens> {
        let mut tokens = Vec::new();
        for (i, t) in value.expose_secret().split(',').map(str::trim).enumerate() {
            if t.is_empty() {
                continue;
            }
            if t.len() < MIN_TOKEN_LEN {
                bail!(
                    "MESHWARD_API_TOKENS: token {} is shorter than {MIN_TOKEN_LEN} characters; use long random tokens (e.g. `openssl rand -hex 32`)",
                    i + 1
                );
            }
            tokens.push(SecretString::from(t.to_string()));
        }
        Ok(ApiTokens {
            tokens: Arc::new(tokens),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    fn find(&self, presented: &str) -> Option<&SecretString> {
        // Check every token (no early exit on a match of an earlier one).
        let mut found = None;
        for t in self.tokens.iter() {
            if ct_eq(t.expose_secret().as_bytes(), presented.as_bytes()) {
                found = Some(t);
            }
        }
        found
    }

    pub fn verify(&self, presented: &str) -> bool {
        self.find(presented).is_some()
    }

    /// A session cookie value for a valid token, expiring at `expires_ms`.
    pub fn session(&self, presented: &str, expires_ms: i64) -> Option<String> {
        let token = self.find(presented)?;
        let mac = session_mac(token, expires_ms).finalize().into_bytes();
        Some(format!("{expires_ms}.{}", hex::encode(mac)))
    }

    /// Is this session cookie value one a current token made, not expired?
    pub fn verify_session(&self, value: &str, now_ms: i64, max_ttl: Duration) -> bool {
        let Some((exp, mac)) = value.split_once('.') else {
            return false;
        };
        let (Ok(exp), Ok(mac)) = (exp.parse::<i64>(), hex::decode(mac)) else {
            return false;
        };
        if exp <= now_ms || exp > now_ms.saturating_add(max_ttl.as_millis() as i64) {
            return false;
        }
        let mut ok = false;
        for t in self.tokens.iter() {
            ok |= session_mac(t, exp).verify_slice(&mac).is_ok();
        }
        ok
    }

    /// Does this request carry a valid bearer token or session cookie?
    pub fn authorized(&self, headers: &HeaderMap, now_ms: i64, max_ttl: Duration) -> Access {
        if self.is_empty() {
            return Access::NotConfigured;
        }
        let authorization = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let bearer = authorization.and_then(|auth| {
            auth.strip_prefix("Bearer ")
                .or_else(|| auth.strip_prefix("bearer "))
        });
        if let Some(token) = bearer {
            return if self.verify(token.trim()) {
                Access::Granted
            } else {
                Access::Denied("the bearer token is not one of MESHWARD_API_TOKENS")
            };
        }
        // Another scheme (a proxy in front may add `Basic`) is not ours to judge: the
        // session cookie still decides.
        match cookie(headers, SESSION_COOKIE) {
            Some(v) if self.verify_session(v, now_ms, max_ttl) => Access::Granted,
            Some(_) => Access::Denied("the session expired or its token was revoked: log in again"),
            None if authorization.is_some() => Access::Denied(
                "only `Authorization: Bearer <token>` is accepted, with a token from MESHWARD_API_TOKENS",
            ),
            None => Access::Denied(
                "send `Authorization: Bearer <token>` with a token from MESHWARD_API_TOKENS",
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Granted,
    /// No token is configured: nothing is served.
    NotConfigured,
    Denied(&'static str),
}

/// A cookie's value from the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(s: &str) -> ApiTokens {
        ApiTokens::parse(&SecretString::from(s.to_string())).unwrap()
    }

    #[test]
    fn tokens_parse_and_short_ones_are_refused() {
        let t = tokens(" aaaaaaaaaaaaaaaa , ,bbbbbbbbbbbbbbbbbbbb");
        assert_eq!(t.len(), 2);
        assert!(t.verify("bbbbbbbbbbbbbbbbbbbb"));
        assert!(!t.verify("bbbbbbbbbbbbbbbbbbb"));
        let e = ApiTokens::parse(&SecretString::from("aaaaaaaaaaaaaaaa,short".to_string()))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("token 2 is shorter than 16"), "{e}");
        assert!(tokens("").is_empty());
    }

    #[test]
    fn sessions_verify_until_they_expire_and_die_with_their_token() {
        let t = tokens("aaaaaaaaaaaaaaaa,bbbbbbbbbbbbbbbb");
        let ttl = Duration::from_secs(3600);
        assert!(t.session("cccccccccccccccc", 10_000).is_none());
        let s = t.session("bbbbbbbbbbbbbbbb", 10_000).unwrap();
        assert!(t.verify_session(&s, 5_000, ttl));
        assert!(!t.verify_session(&s, 10_000, ttl), "expired");
        // Extending the expiry breaks the MAC.
        let forged = s.replacen("10000", "99999", 1);
        assert!(!t.verify_session(&forged, 5_000, ttl));
        // The token removed from the configuration: its sessions end.
        assert!(!tokens("aaaaaaaaaaaaaaaa").verify_session(&s, 5_000, ttl));
        assert!(!t.verify_session("garbage", 5_000, ttl));
    }

    #[test]
    fn requests_need_a_bearer_token_or_a_session() {
        let t = tokens("aaaaaaaaaaaaaaaa");
        let ttl = Duration::from_secs(3600);
        let mut h = HeaderMap::new();
        assert!(matches!(t.authorized(&h, 0, ttl), Access::Denied(_)));
        assert_eq!(
            ApiTokens::default().authorized(&h, 0, ttl),
            Access::NotConfigured
        );
        h.insert("authorization", "Bearer aaaaaaaaaaaaaaaa".parse().unwrap());
        assert_eq!(t.authorized(&h, 0, ttl), Access::Granted);
        h.insert("authorization", "Bearer nope".parse().unwrap());
        assert!(matches!(t.authorized(&h, 0, ttl), Access::Denied(_)));
        let mut h = HeaderMap::new();
        let s = t.session("aaaaaaaaaaaaaaaa", 1_000).unwrap();
        h.insert(
            "cookie",
            format!("x=1; {SESSION_COOKIE}={s}").parse().unwrap(),
        );
        assert_eq!(t.authorized(&h, 0, ttl), Access::Granted);
        // A proxy's Basic credentials beside the session do not lock the user out.
        h.insert("authorization", "Basic dXNlcjpwYXNz".parse().unwrap());
        assert_eq!(t.authorized(&h, 0, ttl), Access::Granted);
        let mut h = HeaderMap::new();
        h.insert("authorization", "Basic dXNlcjpwYXNz".parse().unwrap());
        assert!(matches!(t.authorized(&h, 0, ttl), Access::Denied(m) if m.contains("only")));
    }
}
