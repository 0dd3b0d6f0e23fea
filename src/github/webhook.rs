//! Webhook signatures: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
//! Several secrets may be configured at once, so a secret can be rotated without
//! losing deliveries: GitHub signs with the new one while the old one still verifies.

use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The secrets a delivery may be signed with. Never printed.
#[derive(Clone, Default)]
pub struct WebhookSecrets(Vec<SecretString>);

impl std::fmt::Debug for WebhookSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebhookSecrets([{} redacted])", self.0.len())
    }
}

impl WebhookSecrets {
    /// Parses a comma-separated list (blank entries and surrounding spaces ignored).
    pub fn parse(list: &SecretString) -> WebhookSecrets {
        WebhookSecrets(
            list.expose_secret()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| SecretString::from(s.to_string()))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Is `header` (the `X-Hub-Signature-256` value) a valid signature of `body` under
    /// one of the secrets? The MAC comparison is constant-time.
    pub fn verify(&self, header: Option<&str>, body: &[u8]) -> bool {
        let Some(hex_sig) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else {
            return false;
        };
        let Ok(sig) = hex::decode(hex_sig) else {
            return false;
        };
        if sig.len() != 32 {
            return false;
        }
        let mut ok = false;
        for secret in &self.0 {
            let mut mac = HmacSha256::new_from_slice(secret.expose_secret().as_bytes())
                .expect("HMAC accepts keys of any length");
            mac.update(body);
            // Check every secret: the time taken does not tell which one matched.
            ok |= mac.verify_slice(&sig).is_ok();
        }
        ok
    }
}

/// The `X-Hub-Signature-256` header value for `body` under `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(s: &str) -> WebhookSecrets {
        WebhookSecrets::parse(&SecretString::from(s.to_string()))
    }

    #[test]
    fn verifies_with_any_configured_secret() {
        let body = br#"{"zen":"hi"}"#;
        let s = secrets(" old , new ,");
        assert_eq!(s.len(), 2);
        assert!(s.verify(Some(&sign("old", body)), body));
        assert!(s.verify(Some(&sign("new", body)), body));
        assert!(!s.verify(Some(&sign("other", body)), body));
        assert!(!s.verify(Some(&sign("new", body)), b"tampered"));
    }

    #[test]
    fn rejects_missing_or_malformed_headers() {
        let s = secrets("k");
        let body = b"x";
        assert!(!s.verify(None, body));
        assert!(!s.verify(Some("sha1=abcd"), body));
        assert!(!s.verify(Some("sha256=zz"), body));
        assert!(!s.verify(Some("sha256=abcd"), body));
        assert!(!secrets("").verify(Some(&sign("", body)), body));
    }

    #[test]
    fn debug_does_not_print_secrets() {
        assert_eq!(
            format!("{:?}", secrets("hunter2")),
            "WebhookSecrets([1 redacted])"
        );
    }
}
