//! Who calls: the App (a JWT), one of its installations (a token it was issued),
//! a personal token, or nobody.

use super::*;

/// The App's private key (test only) and its public half, to verify JWTs.
pub fn app_private_key() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/test-app-key.pem"
    ))
    .expect("test key")
}

pub(super) fn app_public_key() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/test-app-key.pub.pem"
    ))
    .expect("test public key")
}

pub(super) enum Auth {
    None,
    App,
    Installation(i64),
    Personal,
    Invalid,
}

/// Who calls, for the publishing endpoints.
#[derive(Clone, Copy)]
pub(super) enum Reader {
    Installation(i64),
    Personal,
    Nobody,
}

impl Reader {
    pub(super) fn may(self, r: &Repo) -> bool {
        match self {
            Reader::Installation(i) => r.installation_id == i,
            Reader::Personal => true,
            Reader::Nobody => false,
        }
    }
    /// The author GitHub records: the App's bot, or the token's user.
    pub(super) fn author(self) -> (String, String) {
        match self {
            Reader::Installation(_) => (format!("{APP_SLUG}[bot]"), "Bot".to_string()),
            _ => ("token-user".to_string(), "User".to_string()),
        }
    }
}
