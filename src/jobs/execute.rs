//! Running one job: fetch the trees of the commits from GitHub, run the same
//! pipeline as `meshward check`, store the run, and publish it to the pull request.

use super::{JobError, Phase, Progress, Worker};
use crate::analysis::{self, Revision};
use crate::github::tarball::{self, ExtractLimits};
use crate::github::{CommitSha, GitHub, PrNumber, RepoClient, RepoName};
use crate::publish::{self, post::Target, Plan};
use crate::report::Report;
use crate::store::{Job, JobKind, NewRun, RunFilter, RunOutcome};
use crate::workspace::{self, TreeLimits};
use anyhow::{anyhow, Context, Result};
use std::collections::BTreeSet;
use tempfile::TempDir;

pub(super) enum Done {
    /// The run is stored (and, for a pull request, published).
    Stored { run_id: i64, outcome: RunOutcome },
    /// Another worker took the job before the run was stored.
    LeaseLost,
}

/// What checking the commits gave.
struct Checked {
    report: Report,
    /// The base commit compared against (the merge base of the PR), if any.
    base_sha: Option<String>,
    changed_paths: Option<BTreeSet<String>>,
}

fn client_of(worker: &Worker) -> Result<&GitHub> {
    worker
        .github
        .as_ref()
        .ok_or_else(|| anyhow!("no GitHub credentials are configured (MESHWARD_GITHUB_APP_ID and a private key, or MESHWARD_GITHUB_TOKEN)"))
}

async fn repo_client(github: &GitHub, job: &Job) -> Result<RepoClient> {
    github
        .repo(&RepoName::parse(&job.repo)?, job.installation_id)
        .await
}

/// Where a check job of a pull request publishes; None for baselines.
fn target<'a>(
    worker: &'a Worker,
    client: &'a RepoClient,
    job: &'a Job,
) -> Result<Option<Target<'a>>> {
    let (JobKind::Check, Some(pr)) = (job.kind, job.pr_number) else {
        return Ok(None);
    };
    Ok(Some(Target {
        client,
        store: &worker.store,
        job,
        pr: PrNumber::new(pr),
        head: CommitSha::parse(&job.head_sha)?,
        checks_api: worker.github.as_ref().is_some_and(|g| g.is_app()),
        public_url: worker.public_url.as_deref(),
        now_ms: worker.clock.now_ms(),
    }))
}

/// One attempt at a job. Its errors are classified here, once: what a step raised
/// decides whether the job is tried again.
pub(super) async fn execute(
    worker: &Worker,
    job: &Job,
    started_ms: i64,
    progress: &Progress,
) -> Result<Done, JobError> {
    let classify = |e| JobError::classify(&job.repo, e);
    let github = client_of(worker).map_err(classify)?;
    // The base repository's installation, also for a pull request from a fork: its
    // commits are read through the base repository, and nothing of the fork runs.
    let client = repo_client(github, job).await.map_err(classify)?;
    let resolved;
    let job = if job.kind == JobKind::Check && job.pr_number.is_none() {
        resolved = resolve_rerun(worker, &client, job)
            .await
            .map_err(classify)?;
        &resolved
    } else {
        job
    };
    let target = target(worker, &client, job).map_err(classify)?;

    // An earlier attempt stored the run and then failed to publish it: publish that
    // run, as it was, instead of checking again.
    if let Some(done) = publish_stored(worker, job, target.as_ref())
        .await
        .map_err(classify)?
    {
        return Ok(done);
    }

    if let Some(t) = &target {
        let started = progress
            .within(Phase::Publish, worker.config.phases.publish, t.start())
            .await;
        if let Err(e) = started {
            match classify(e) {
                refused @ JobError::Refused { .. } => return Err(refused),
                // Not fatal: the check run is created when the result is published.
                e => tracing::warn!(error = %e, "could not mark the check as started"),
            }
        }
    }

    check_and_publish(
        worker,
        github,
        &client,
        job,
        target.as_ref(),
        started_ms,
        progress,
    )
    .await
    .map_err(classify)
}

/// The run an earlier attempt stored, published again; None when there is none.
async fn publish_stored(
    worker: &Worker,
    job: &Job,
    target: Option<&Target<'_>>,
) -> Result<Option<Done>> {
    let Some((run_id, plan)) = worker.store.job_run(job.id).await? else {
        return Ok(None);
    };
    if let (Some(t), Some(plan)) = (target, plan) {
        let plan: Plan =
            serde_json::from_str(&plan).context("the stored publication does not parse")?;
        t.publish(run_id, &plan).await?;
    }
    let outcome = worker
        .store
        .runs(&RunFilter {
            job_id: Some(job.id),
            ..RunFilter::default()
        })
        .await?
        .first()
        .map(|r| r.outcome)
        .unwrap_or(RunOutcome::Error);
    Ok(Some(Done::Stored { run_id, outcome }))
}

/// Fetches and checks the commits, stores the run and publishes it.
async fn check_and_publish(
    worker: &Worker,
    github: &GitHub,
    client: &RepoClient,
    job: &Job,
    target: Option<&Target<'_>>,
    started_ms: i64,
    progress: &Progress,
) -> Result<Done> {
    let deadlines = &worker.config.phases;
    let fetched = progress
        .within(Phase::Fetch, deadlines.fetch, fetch(client, job))
        .await?;
    let checked = progress
        .within(
            Phase::Check,
            deadlines.check,
            check(fetched, job, worker.evidence.clone()),
        )
        .await?;
    let plan = target.map(|t| {
        publish::plan(
            &checked.report,
            &publish::Context {
                repo: &job.repo,
                pr_number: t.pr.get(),
                web_url: github.web_url(),
                head_sha: &job.head_sha,
                base_sha: checked.base_sha.as_deref(),
                changed_paths: checked.changed_paths.as_ref(),
                inline_comments: checked.report.publish.inline_comments,
            },
        )
    });
    let plan_json = plan.as_ref().map(serde_json::to_string).transpose()?;
    let run = NewRun {
        kind: job.kind,
        repo_id: job.repo_id,
        repo: &job.repo,
        pr_number: job.pr_number,
        head_sha: &job.head_sha,
        base_sha: checked.base_sha.as_deref(),
        started_at_ms: started_ms,
        finished_at_ms: worker.clock.now_ms(),
        report: Some(&checked.report),
        error: None,
    };
    let outcome = run.outcome();
    let store_and_publish = async {
        let Some(run_id) = worker
            .store
            .save_run(
                job,
                &worker.name,
                &run,
                plan_json.as_deref(),
                worker.clock.now_ms(),
            )
            .await?
        else {
            return Ok(Done::LeaseLost);
        };
        tracing::info!(
            run_id,
            verdict = outcome.as_str(),
            findings = checked.report.findings.len(),
            "run stored"
        );
        if let (Some(t), Some(plan)) = (target, &plan) {
            t.publish(run_id, plan).await?;
        }
        Ok(Done::Stored { run_id, outcome })
    };
    progress
        .within(Phase::Publish, deadlines.publish, store_and_publish)
        .await
}

/// A re-run that names no pull request: a baseline when its branch was named like
/// the default branch (`base_ref`) and the commit is on that branch here; else
/// the check of a fork's pull request, whose pull request is found.
async fn resolve_rerun(worker: &Worker, client: &RepoClient, job: &Job) -> Result<Job> {
    if let Some(branch) = &job.base_ref {
        if client
            .on_branch(branch, &CommitSha::parse(&job.head_sha)?)
            .await
            .with_context(|| format!("is {} on {branch}?", short(&job.head_sha)))?
        {
            tracing::info!(
                branch,
                "re-run of a commit on the default branch: a baseline"
            );
            return Ok(Job {
                kind: JobKind::Baseline,
                ..job.clone()
            });
        }
    }
    resolve_pull_request(worker, client, job).await
}

/// A check job queued without a pull request: a re-run requested in GitHub's UI
/// for a pull request from a fork, whose check run and suite list no pull request.
/// Its pull request is the one a stored check job checked at this head commit,
/// else the open pull request whose head is this commit (GitHub's
/// `commits/{sha}/pulls` does not list a fork's pull requests). What is found is
/// stored on the job, for its retries and its failure report.
async fn resolve_pull_request(worker: &Worker, client: &RepoClient, job: &Job) -> Result<Job> {
    let stored = worker
        .store
        .pull_request_of_commit(job.repo_id, &job.head_sha)
        .await?;
    let found = match stored {
        Some(found) => Some(found),
        None => client
            .open_pull_requests()
            .await
            .context("finding the pull request of the re-run commit")?
            .into_iter()
            .filter(|p| p.head.sha.as_str() == job.head_sha)
            .min_by_key(|p| p.number)
            .map(|p| (p.number.get(), p.base.sha.to_string(), p.base.branch)),
    };
    let Some((pr, base_sha, base_ref)) = found else {
        return Err(JobError::Permanent(format!(
            "a re-run was requested for commit {}, but no open pull request of {} has it at its head: nothing to check",
            short(&job.head_sha),
            job.repo
        ))
        .into());
    };
    tracing::info!(pr, base_sha, "re-run: the pull request of the commit found");
    worker
        .store
        .set_job_pull_request(
            job.id,
            pr,
            &base_sha,
            base_ref.as_deref(),
            worker.clock.now_ms(),
        )
        .await?;
    Ok(Job {
        pr_number: Some(pr),
        base_sha: Some(base_sha),
        base_ref,
        ..job.clone()
    })
}

/// A job that failed for good ends its check run with the reason. When GitHub
/// refused us, or the run was stored (its result stands), that is one last call
/// to complete a check run the job left in progress, and nothing more if it is
/// refused too (no retry storm); otherwise the check run is created if need be and
/// completed. Best effort: the failure is recorded either way.
pub(super) async fn report_failure(worker: &Worker, job: &Job, reason: &str, refused: bool) {
    let attempt = async {
        // The job as stored: a fork's re-run has its pull request only there.
        let job = worker
            .store
            .job(job.id)
            .await?
            .unwrap_or_else(|| job.clone());
        let client = repo_client(client_of(worker)?, &job).await?;
        let Some(t) = target(worker, &client, &job)? else {
            return Ok(());
        };
        // A run stored by the job (not the error run just recorded) stands.
        let stored = worker
            .store
            .publication(job.id)
            .await?
            .is_some_and(|p| p.run_id.is_some());
        if refused || stored {
            return t.end_check_once(reason).await;
        }
        t.fail_check(reason).await
    };
    if let Err(e) = attempt.await {
        tracing::warn!(
            error = format!("{e:#}"),
            "could not report the failure on the pull request"
        );
    }
}

/// The commits of a job, unpacked.
struct Fetched {
    head_dir: TempDir,
    /// The base commit compared against, and its tree.
    base: Option<(CommitSha, TempDir)>,
}

async fn fetch(client: &RepoClient, job: &Job) -> Result<Fetched> {
    let head = CommitSha::parse(&job.head_sha)?;
    let base_sha = match job.kind {
        JobKind::Baseline => None,
        JobKind::Check => {
            let base = job
                .base_sha
                .as_deref()
                .ok_or_else(|| anyhow!("check job without a base commit"))
                .and_then(CommitSha::parse)?;
            // Compare against where the branch left its base, not the base's tip:
            // what changed on the base since is not this PR's doing.
            Some(match client.merge_base(&base, &head).await {
                Ok(sha) => sha,
                Err(e) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "no merge base; comparing against the base branch tip"
                    );
                    base
                }
            })
        }
    };
    let (head_dir, base_dir) = tokio::try_join!(fetch_tree(client, &head), async {
        match &base_sha {
            Some(sha) => fetch_tree(client, sha).await.map(Some),
            None => Ok(None),
        }
    })?;
    Ok(Fetched {
        head_dir,
        base: base_sha.zip(base_dir),
    })
}

/// `evidence`: where check jobs gather zero-plaintext evidence (baselines judge no change).
async fn check(
    fetched: Fetched,
    job: &Job,
    evidence: Option<std::sync::Arc<crate::evidence::PrometheusSource>>,
) -> Result<Checked> {
    let Fetched { head_dir, base } = fetched;
    let (base_sha, base_dir) = base.unzip();
    let repo_urls =
        crate::render::RepoUrls::known(vec![format!("https://github.com/{}", job.repo)]);
    // The branch a pull request merges into, or the one a push moved.
    let branches: Vec<String> = job.base_ref.iter().cloned().collect();
    let head_label = short(&job.head_sha);
    let base_sha = base_sha.map(|sha| sha.to_string());
    let base_label = base_sha.as_deref().map(short);
    let prometheus = evidence.filter(|_| job.kind == JobKind::Check);
    // The pipeline is CPU-bound and synchronous: off the async threads. The temp dirs
    // live until it is done (rendering reads files from them).
    let checked = tokio::task::spawn_blocking(move || -> Result<Checked> {
        let limits = TreeLimits::default();
        let head_tree = workspace::read_dir(head_dir.path(), &limits)?;
        let base_tree = match &base_dir {
            Some(dir) => Some(workspace::read_dir(dir.path(), &limits)?),
            None => None,
        };
        // Render only the roots that read a file the PR changes.
        let checked = analysis::check(
            base_tree.as_ref().map(|tree| Revision {
                label: base_label.clone().unwrap_or_default(),
                tree,
            }),
            Revision {
                label: head_label,
                tree: &head_tree,
            },
            analysis::CheckSettings {
                repo_urls,
                branches,
                extra_policies: Vec::new(),
                evidence: None,
                prometheus,
                fail_on: None,
                today: chrono::Local::now().date_naive(),
                render_all: false,
                // One engine for every repository the service checks, compiled once.
                every_policy_file: true,
            },
        )
        .map_err(|e| match e {
            crate::analysis::CheckError::Config(e) => {
                anyhow::Error::new(JobError::Permanent(format!("config error: {e}")))
            }
            crate::analysis::CheckError::Other(e) => e,
        })?;
        drop((head_dir, base_dir));
        Ok(Checked {
            report: checked.report,
            base_sha: None,
            changed_paths: checked.changed_paths,
        })
    })
    .await
    .context("the check panicked")??;
    Ok(Checked {
        base_sha,
        ..checked
    })
}

async fn fetch_tree(client: &RepoClient, sha: &CommitSha) -> Result<TempDir> {
    let bytes = client.tarball(sha).await?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}tree-", crate::workspace::TEMP_PREFIX))
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
        %sha,
        files = stats.files,
        bytes = stats.bytes,
        "tree unpacked"
    );
    Ok(dir)
}

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}
