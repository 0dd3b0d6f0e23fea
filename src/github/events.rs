//! Webhook events: the few fields meshward reads, parsed into typed events. What
//! each one asks the service to do is `jobs::intake`'s to say.

use serde::Deserialize;

/// Who meshward is on GitHub, to ignore what its own app causes.
#[derive(Debug, Clone, Default)]
pub struct AppIdentity {
    pub id: Option<i64>,
    /// The app's slug: its bot user is `<slug>[bot]`.
    pub slug: Option<String>,
}

impl AppIdentity {
    pub(crate) fn is_us(&self, sender: &Sender, via_app: Option<&AppRef>) -> bool {
        let bot = match &self.slug {
            Some(slug) => {
                sender.kind.as_deref() == Some("Bot") && sender.login == format!("{slug}[bot]")
            }
            None => false,
        };
        let via = matches!((self.id, via_app), (Some(id), Some(app)) if app.id == id);
        bot || via
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct Repository {
    pub(crate) id: i64,
    #[serde(deserialize_with = "repo_name")]
    pub(crate) full_name: String,
    pub(crate) default_branch: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Installation {
    pub(crate) id: i64,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Sender {
    pub(crate) login: String,
    #[serde(rename = "type")]
    pub(crate) kind: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct AppRef {
    pub(crate) id: i64,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GitRef {
    #[serde(deserialize_with = "sha")]
    pub(crate) sha: String,
    #[serde(rename = "ref", deserialize_with = "ref_name")]
    pub(crate) name: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PullRequest {
    pub(crate) head: GitRef,
    pub(crate) base: GitRef,
    #[serde(default)]
    pub(crate) performed_via_github_app: Option<AppRef>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PullRequestEvent {
    pub(crate) action: String,
    pub(crate) number: i64,
    pub(crate) pull_request: PullRequest,
    pub(crate) repository: Repository,
    pub(crate) installation: Option<Installation>,
    pub(crate) sender: Sender,
    #[serde(default)]
    pub(crate) changes: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) performed_via_github_app: Option<AppRef>,
}

/// A pull request as check runs and suites list them.
#[derive(Debug, Deserialize)]
pub(crate) struct PrRef {
    pub(crate) number: i64,
    pub(crate) base: GitRef,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CheckSuite {
    #[serde(deserialize_with = "sha")]
    pub(crate) head_sha: String,
    pub(crate) head_branch: Option<String>,
    #[serde(default)]
    pub(crate) pull_requests: Vec<PrRef>,
    pub(crate) app: Option<AppRef>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CheckSuiteLite {
    pub(crate) head_branch: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CheckRun {
    #[serde(deserialize_with = "sha")]
    pub(crate) head_sha: String,
    #[serde(default)]
    pub(crate) pull_requests: Vec<PrRef>,
    pub(crate) app: Option<AppRef>,
    pub(crate) check_suite: Option<CheckSuiteLite>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CheckRunEvent {
    pub(crate) action: String,
    pub(crate) check_run: CheckRun,
    pub(crate) repository: Repository,
    pub(crate) installation: Option<Installation>,
    pub(crate) sender: Sender,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CheckSuiteEvent {
    pub(crate) action: String,
    pub(crate) check_suite: CheckSuite,
    pub(crate) repository: Repository,
    pub(crate) installation: Option<Installation>,
    pub(crate) sender: Sender,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PushEvent {
    #[serde(rename = "ref")]
    pub(crate) git_ref: String,
    #[serde(deserialize_with = "sha")]
    pub(crate) after: String,
    #[serde(default)]
    pub(crate) deleted: bool,
    pub(crate) repository: Repository,
    pub(crate) installation: Option<Installation>,
    pub(crate) sender: Sender,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RepoLite {
    pub(crate) id: i64,
    #[serde(deserialize_with = "repo_name")]
    pub(crate) full_name: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct InstallationEvent {
    pub(crate) action: String,
    pub(crate) installation: Installation,
    #[serde(default)]
    pub(crate) repositories: Option<Vec<RepoLite>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct InstallationReposEvent {
    pub(crate) action: String,
    pub(crate) installation: Installation,
    #[serde(default)]
    pub(crate) repositories_added: Vec<RepoLite>,
    #[serde(default)]
    pub(crate) repositories_removed: Vec<RepoLite>,
}

// What a payload names goes into API paths and onto disk: it is checked as it is
// read, so a delivery that does not have GitHub's shapes is refused, not used.

/// A commit id: 40 (SHA-1) or 64 (SHA-256) hex digits.
fn sha<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if matches!(s.len(), 40 | 64) && s.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "{:?} is not a commit id",
            s.chars().take(80).collect::<String>()
        )))
    }
}

/// `owner/name` as GitHub allows them: letters, digits, `-`, `_` and `.`, neither
/// part `.` or `..`.
fn repo_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 100
            && p != "."
            && p != ".."
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match s.split_once('/') {
        Some((owner, name)) if part(owner) && part(name) => Ok(s),
        _ => Err(serde::de::Error::custom(format!(
            "{:?} is not a repository name",
            s.chars().take(80).collect::<String>()
        ))),
    }
}

/// A branch name as `git check-ref-format` allows it (the parts meshward relies on:
/// no control characters, no `..`, none of ` ~^:?*[\`, no leading `-` or `/`).
fn ref_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    let ok = !s.is_empty()
        && s.len() <= 255
        && !s.contains("..")
        && !s.starts_with(['-', '/'])
        && !s.chars().any(|c| c.is_control() || " ~^:?*[\\".contains(c));
    if ok {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "{:?} is not a branch name",
            s.chars().take(80).collect::<String>()
        )))
    }
}

/// The events meshward subscribes to; everything else is answered 204 unparsed.
pub const HANDLED_EVENTS: &[&str] = &[
    "pull_request",
    "check_run",
    "check_suite",
    "push",
    "installation",
    "installation_repositories",
];
