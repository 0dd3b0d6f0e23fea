//! How meshward reaches GitHub: the API root (github.com or Enterprise), how it
//! authenticates, its timeouts and retries, and the octocrab client built from them.

use super::retry::RetryPolicy;
use anyhow::{Context, Result};
use octocrab::Octocrab;
use secrecy::{ExposeSecret, SecretString};
use std::time::Duration;

/// How meshward authenticates to GitHub.
pub enum GitHubAuth {
    /// As a GitHub App: JWTs signed with the private key, then an installation token
    /// per repository.
    App {
        app_id: u64,
        private_key_pem: SecretString,
    },
    /// A plain token (single-repo use).
    Token(SecretString),
}

pub struct GitHubConfig {
    /// API root, e.g. `https://ghe.example.com/api/v3`; None: api.github.com.
    pub api_url: Option<String>,
    pub auth: GitHubAuth,
    pub retry: RetryPolicy,
    /// Largest tarball downloaded (compressed bytes).
    pub max_tarball_bytes: usize,
    /// An installation token is replaced when it has less than this left.
    pub token_refresh_margin: Duration,
    pub timeouts: Timeouts,
}

/// How long a GitHub call may take: a peer that stops answering fails the call (and
/// the retries, then the job, go on) instead of holding a worker forever.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    /// Longest silence while waiting for or reading an answer.
    pub read: Duration,
    /// One attempt, answer body included (a tarball is the longest).
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(30),
            call: Duration::from_secs(300),
        }
    }
}

impl GitHubConfig {
    pub fn new(api_url: Option<String>, auth: GitHubAuth) -> GitHubConfig {
        GitHubConfig {
            api_url,
            auth,
            retry: RetryPolicy::default(),
            max_tarball_bytes: 256 * 1024 * 1024,
            token_refresh_margin: Duration::from_secs(5 * 60),
            timeouts: Timeouts::default(),
        }
    }
}

/// Whether the client calls as an App (then as its installations) or with a token.
pub(super) enum Mode {
    App,
    Token,
}

/// An octocrab client for an API root, authenticated as the config says.
pub(super) fn client(
    api_url: Option<&str>,
    auth: &GitHubAuth,
    timeouts: &Timeouts,
) -> Result<(Octocrab, Mode)> {
    let mut builder = Octocrab::builder()
        .set_connect_timeout(Some(timeouts.connect))
        .set_read_timeout(Some(timeouts.read))
        .set_write_timeout(Some(timeouts.read));
    if let Some(url) = api_url {
        builder = builder
            .base_uri(url)
            .with_context(|| format!("bad GitHub API URL {url:?}"))?;
    }
    let mode = match auth {
        GitHubAuth::App {
            app_id,
            private_key_pem,
        } => {
            let key =
                jsonwebtoken::EncodingKey::from_rsa_pem(private_key_pem.expose_secret().as_bytes())
                    .context("the GitHub App private key is not an RSA key in PEM form")?;
            builder = builder.app((*app_id).into(), key);
            Mode::App
        }
        GitHubAuth::Token(token) => {
            builder = builder.personal_token(token.expose_secret().to_string());
            Mode::Token
        }
    };
    Ok((builder.build().context("building the GitHub client")?, mode))
}

/// Enterprise's GraphQL root (`https://ghe.example.com/api`, serving `/graphql`),
/// when the REST root is Enterprise's `/api/v3`.
pub(super) fn graphql_root(api_url: Option<&str>) -> Option<String> {
    let api = api_url?.trim_end_matches('/');
    api.strip_suffix("/v3")
        .filter(|root| root.ends_with("/api"))
        .map(str::to_string)
}

/// github.com's API is api.github.com; Enterprise serves it under `/api/v3` of the
/// web host.
pub(super) fn web_url(api_url: Option<&str>) -> String {
    let api = api_url
        .unwrap_or("https://api.github.com")
        .trim_end_matches('/');
    if api == "https://api.github.com" {
        return "https://github.com".to_string();
    }
    api.strip_suffix("/api/v3").unwrap_or(api).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_roots_of_github_and_enterprise() {
        assert_eq!(graphql_root(None), None);
        assert_eq!(graphql_root(Some("https://api.github.com")), None);
        assert_eq!(
            graphql_root(Some("https://ghe.example.com/api/v3/")).as_deref(),
            Some("https://ghe.example.com/api")
        );
        assert_eq!(graphql_root(Some("http://127.0.0.1:8080")), None);
    }

    #[test]
    fn web_urls_of_github_and_enterprise() {
        assert_eq!(web_url(None), "https://github.com");
        assert_eq!(
            web_url(Some("https://api.github.com/")),
            "https://github.com"
        );
        assert_eq!(
            web_url(Some("https://ghe.example.com/api/v3")),
            "https://ghe.example.com"
        );
        assert_eq!(web_url(Some("http://127.0.0.1:9")), "http://127.0.0.1:9");
    }
}
