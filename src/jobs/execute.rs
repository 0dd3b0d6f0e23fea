//! Running one job: fetch the trees of the commits from GitHub, run the same
//! pipeline as `meshward check`, return the report.

use super::Worker;
use crate::analysis::{self, Options, Revision};
use crate::github::tarball::{self, ExtractLimits};
use crate::github::RepoClient;
use crate::report::Report;
use crate::store::{Job, JobKind};
use crate::workspace::{self, TreeLimits};
use anyhow::{anyhow, Context, Result};
use tempfile::TempDir;

/// An error no retry can fix (the repository's config file is invalid): the job
/// fails at once, with the message stored on its run.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Permanent(pub String);

pub(super) struct Done {
    pub report: Report,
    /// The base commit compared against (the merge base of the PR), if any.
    pub base_sha: Option<String>,
}

pub(super) async fn execute(worker: &Worker, job: &Job) -> Result<Done> {
    let github = worker
        .github
        .as_ref()
        .ok_or_else(|| anyhow!("no GitHub credentials are configured (MESHWARD_GITHUB_APP_ID and a private key, or MESHWARD_GITHUB_TOKEN)"))?;
    let client = github.repo(&job.repo, job.installation_id).await?;
    let base_sha = match job.kind {
        JobKind::Baseline => None,
        JobKind::Check => {
            let base = job
                .base_sha
                .as_deref()
                .ok_or_else(|| anyhow!("check job without a base commit"))?;
            // Compare against where the branch left its base, not the base's tip:
            // what changed on the base since is not this PR's doing.
            Some(match client.merge_base(base, &job.head_sha).await {
                Ok(sha) => sha,
                Err(e) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "no merge base; comparing against the base branch tip"
                    );
                    base.to_string()
                }
            })
        }
    };
    let (head_dir, base_dir) = tokio::try_join!(fetch_tree(&client, &job.head_sha), async {
        match &base_sha {
            Some(sha) => fetch_tree(&client, sha).await.map(Some),
            None => Ok(None),
        }
    })?;
    let repo_urls = vec![format!("https://github.com/{}", job.repo)];
    let head_label = short(&job.head_sha);
    let base_label = base_sha.as_deref().map(short);
    // Evidence for the STRICT scopes a PR introduces (baselines judge no change).
    let prometheus = worker
        .evidence
        .clone()
        .filter(|_| job.kind == JobKind::Check);
    // The pipeline is CPU-bound and synchronous: off the async threads. The temp dirs
    // live until it is done (rendering reads files from them).
    let report = tokio::task::spawn_blocking(move || -> Result<Report> {
        let limits = TreeLimits::default();
        let head_tree = workspace::read_dir(head_dir.path(), &limits)?;
        let base_tree = match &base_dir {
            Some(dir) => Some(workspace::read_dir(dir.path(), &limits)?),
            None => None,
        };
        // Render only the roots that read a file the PR changes.
        let changed_paths = base_tree
            .as_ref()
            .and_then(|b| workspace::changed_paths(b, &head_tree));
        let opts = Options {
            repo_urls,
            changed_paths,
            prometheus,
            ..Options::new(chrono::Local::now().date_naive())
        };
        let report = analysis::analyze(
            base_tree.as_ref().map(|tree| Revision {
                label: base_label.clone().unwrap_or_default(),
                tree,
            }),
            Revision {
                label: head_label,
                tree: &head_tree,
            },
            &opts,
        )
        .map_err(|e| match e {
            crate::analysis::CheckError::Config(e) => {
                anyhow::Error::new(Permanent(format!("config error: {e}")))
            }
            crate::analysis::CheckError::Other(e) => e,
        })?;
        drop((head_dir, base_dir));
        Ok(report)
    })
    .await
    .context("the check panicked")??;
    Ok(Done { report, base_sha })
}

async fn fetch_tree(client: &RepoClient, sha: &str) -> Result<TempDir> {
    let bytes = client.tarball(sha).await?;
    let dir = tempfile::Builder::new()
        .prefix("meshward-tree-")
        .tempdir()
        .context("creating a temporary folder")?;
    let path = dir.path().to_path_buf();
    let stats = tokio::task::spawn_blocking(move || {
        tarball::extract(&bytes, &path, &ExtractLimits::default())
    })
    .await
    .context("unpacking panicked")?
    .with_context(|| format!("unpacking {} at {sha}", client.repo()))?;
    tracing::debug!(
        sha,
        files = stats.files,
        bytes = stats.bytes,
        "tree unpacked"
    );
    Ok(dir)
}

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}
