//! GitHub: webhook verification and event parsing, the API client (App or token
//! auth, retries, metrics) with the endpoints meshward calls ([`api`]), and
//! unpacking the tarballs it serves.

pub(crate) mod api;
pub mod client;
mod config;
mod error;
pub mod events;
mod names;
mod retry;
pub mod tarball;
mod threads;
pub mod webhook;

pub use client::{
    GitHub, GitHubAuth, GitHubConfig, GitHubError, RepoClient, RetryPolicy, Timeouts,
};
pub use events::AppIdentity;
pub(crate) use names::{CommitSha, PrNumber, RepoName};
pub use webhook::WebhookSecrets;
