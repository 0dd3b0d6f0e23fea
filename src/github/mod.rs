//! GitHub: webhook verification and event parsing, the API client (App or token
//! auth, retries, metrics) with the endpoints meshward calls ([`api`]), and
//! unpacking the tarballs it serves.

pub(crate) mod api;
pub mod client;
pub mod events;
mod names;
pub mod tarball;
pub mod webhook;

pub use client::{
    GitHub, GitHubAuth, GitHubConfig, GitHubError, RepoClient, RetryPolicy, Timeouts,
};
pub use events::{interpret, AppIdentity, Decision, Interpreted};
pub(crate) use names::{CommitSha, PrNumber, RepoName};
pub use webhook::WebhookSecrets;
