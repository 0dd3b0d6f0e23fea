//! GitHub: webhook verification and event parsing, the API client (App or token
//! auth, retries, metrics) with the endpoints meshward calls ([`api`]), and
//! unpacking the tarballs it serves.

pub(crate) mod api;
pub mod client;
pub mod events;
pub mod tarball;
pub mod webhook;

pub(crate) use api::{CommitSha, PrNumber, RepoName};
pub use client::{
    GitHub, GitHubAuth, GitHubConfig, GitHubError, RepoClient, RetryPolicy, Timeouts,
};
pub use events::{interpret, AppIdentity, Decision, Interpreted};
pub use webhook::WebhookSecrets;
