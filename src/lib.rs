//! meshward: finds Kubernetes and Istio config that is wrong or applies nowhere.
//!
//! The pipeline: [`workspace`] materializes revisions, [`manifest`] parses them with
//! source lines, [`model`] builds the mesh model, [`policy`] evaluates Rego over it,
//! [`analysis`] diffs base and head, [`report`] renders the result.

pub mod analysis;
pub mod changes;
pub(crate) mod child;
pub mod cli;
pub mod clock;
pub mod config;
pub(crate) mod dashboard;
pub mod evidence;
pub mod finding;
pub mod github;
pub mod jobs;
pub mod manifest;
pub mod metrics;
pub mod model;
pub(crate) mod pointer;
pub mod policy;
pub mod publish;
pub mod render;
pub mod report;
pub mod schema;
pub mod server;
pub mod service;
pub mod store;
pub mod trends;
pub mod units;
pub mod workspace;
pub mod yaml;

use analysis::{CheckError, Revision};
use anyhow::Context;
use std::path::PathBuf;

/// A local check, as `meshward check` runs it.
pub struct CheckRequest {
    pub path: PathBuf,
    pub base: Option<String>,
    /// A git revision; None means the working tree on disk.
    pub head: Option<String>,
    pub policy_dirs: Vec<PathBuf>,
    pub evidence: Option<PathBuf>,
    /// Gather evidence from Prometheus (`--prometheus`) for the STRICT scopes the change introduces.
    pub prometheus: Option<std::sync::Arc<evidence::PrometheusSource>>,
    pub fail_on: Option<finding::FailOn>,
    pub today: chrono::NaiveDate,
    /// Render every root even with a base (not only the roots the change touches).
    pub render_all: bool,
}

pub fn check(req: &CheckRequest) -> Result<report::Report, CheckError> {
    let started = std::time::Instant::now();
    let limits = workspace::TreeLimits::default();
    // Head's revision first, then base's: the repository and both commit ids are
    // asked of git at once.
    let revs: Vec<&str> = [&req.head, &req.base]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let (repo, mut commits) = if revs.is_empty() {
        (None, Vec::new())
    } else {
        let (repo, commits) = workspace::GitRepo::open(&req.path, &revs)?;
        (Some(repo), commits)
    };
    let base_commit = req.base.as_ref().and_then(|_| commits.pop());
    let head_commit = req.head.as_ref().and_then(|_| commits.pop());
    let label =
        |tree: &workspace::Tree| short(workspace::GitRepo::commit_of(tree).unwrap_or_default());
    let read_head = || -> anyhow::Result<(workspace::Tree, String)> {
        match (&head_commit, &repo) {
            (Some(commit), Some(repo)) => {
                let tree = repo.read_tree(commit, &limits)?;
                let head_label = label(&tree);
                Ok((tree, head_label))
            }
            _ => Ok((
                workspace::read_dir(&req.path, &limits)?,
                "working tree".to_string(),
            )),
        }
    };
    let read_base = || -> anyhow::Result<Option<(workspace::Tree, String)>> {
        match (&base_commit, &repo) {
            (Some(commit), Some(repo)) => {
                let tree = repo.read_tree(commit, &limits)?;
                let base_label = label(&tree);
                Ok(Some((tree, base_label)))
            }
            _ => Ok(None),
        }
    };
    let (head_tree, head_label, base) = match (&head_commit, &base_commit, &repo) {
        // Two revisions share most files: each blob is read once.
        (Some(head), Some(base), Some(repo)) => {
            let (head_tree, base_tree) = repo.read_trees(head, base, &limits)?;
            let (head_label, base_label) = (label(&head_tree), label(&base_tree));
            (head_tree, head_label, Some((base_tree, base_label)))
        }
        _ => {
            let (head, base) = rayon::join(read_head, read_base);
            let (head_tree, head_label) = head?;
            (head_tree, head_label, base?)
        }
    };
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "trees read"
    );
    let mut extra_policies = Vec::new();
    for dir in &req.policy_dirs {
        extra_policies.extend(policy::load_dir(dir, "")?);
    }
    let evidence = match &req.evidence {
        Some(path) => Some(evidence::Evidence::from_file(path)?),
        None => None,
    };
    // Asked of git only if an app object names a repository.
    let repo_urls = match &repo {
        Some(repo) => {
            let toplevel = repo.toplevel.clone();
            render::RepoUrls::asked(move || workspace::remote_urls(&toplevel))
        }
        None => {
            let path = req.path.clone();
            render::RepoUrls::asked(move || {
                workspace::GitRepo::discover(&path)
                    .map(|r| workspace::remote_urls(&r.toplevel))
                    .unwrap_or_default()
            })
        }
    };
    // Which branch a local run stands for is not known: the branch checked out is
    // most often a feature branch on its way into the one Flux follows.
    let branches = Vec::new();
    let mut report = analysis::check(
        base.as_ref().map(|(tree, label)| Revision {
            label: label.clone(),
            tree,
        }),
        Revision {
            label: head_label,
            tree: &head_tree,
        },
        analysis::CheckSettings {
            repo_urls,
            branches,
            extra_policies,
            evidence,
            prometheus: req.prometheus.clone(),
            fail_on: req.fail_on,
            today: req.today,
            render_all: req.render_all,
            every_policy_file: false,
        },
    )
    .map(|checked| checked.report);
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "analysed"
    );
    if let Ok(report) = &mut report {
        report.repo_prefix = match &repo {
            Some(repo) => repo.prefix.clone(),
            None => workspace::GitRepo::discover(&req.path)
                .map(|r| r.prefix)
                .unwrap_or_default(),
        };
    }
    report
}

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// Runs policy tests: the built-ins, or the `.rego` files of `dir` (with the
/// built-in library files available to them).
pub fn policy_test(dir: Option<&std::path::Path>) -> anyhow::Result<policy::TestReport> {
    let sources = match dir {
        None => policy::builtin(),
        Some(dir) => {
            let own = policy::load_dir(dir, "").context("loading policies to test")?;
            let own_names: Vec<String> = own
                .iter()
                .filter_map(|p| p.path.rsplit('/').next().map(str::to_string))
                .collect();
            let mut sources: Vec<_> = policy::builtin()
                .into_iter()
                .filter(|p| !p.is_test())
                .filter(|p| !own_names.iter().any(|n| p.path.ends_with(&format!(":{n}"))))
                .collect();
            sources.extend(own);
            sources
        }
    };
    policy::run_tests(&sources)
}
