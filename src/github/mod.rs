//! GitHub: webhook verification and event parsing, the API client (App or token
//! auth, retries, metrics), and unpacking the tarballs it serves.

pub mod client;
pub mod events;
pub mod tarball;
pub mod webhook;

pub use client::{
    GitHub, GitHubAuth, GitHubConfig, GitHubError, RepoClient, RetryPolicy, Timeouts,
};
pub use events::{interpret, AppIdentity, Decision, Interpreted};
pub use webhook::WebhookSecrets;
