//! What a webhook delivery asks the service to do: the jobs to queue and the
//! repositories to record, from the typed events of `github::events`. Pure: no I/O,
//! so every case is unit-tested.

use crate::github::events::*;
use crate::store::{DeliveryEffect, JobKind, NewJob, RepoRecord};

/// A delivery, understood.
#[derive(Debug, Clone)]
pub struct Interpreted {
    pub action: Option<String>,
    pub repo: Option<String>,
    pub pr: Option<i64>,
    pub head_sha: Option<String>,
    pub decision: Decision,
}

#[derive(Debug, Clone)]
pub enum Decision {
    /// Nothing to do (answered 204); the reason is logged.
    Ignore(String),
    /// Record the delivery and apply the effect (answered 202).
    Act {
        /// `enqueued` or `repos`: the delivery's outcome, for the record and metrics.
        outcome: &'static str,
        effect: DeliveryEffect,
    },
}

const ZERO_SHA: &str = "0000000000000000000000000000000000000000";

/// Understands a delivery of event `event` (the `X-GitHub-Event` header). An error
/// means a handled event whose body does not have the expected shape.
pub fn interpret(
    event: &str,
    body: &[u8],
    app: &AppIdentity,
) -> Result<Interpreted, serde_json::Error> {
    let ignore = |action: Option<String>, why: String| Interpreted {
        action,
        repo: None,
        pr: None,
        head_sha: None,
        decision: Decision::Ignore(why),
    };
    match event {
        "pull_request" => {
            let e: PullRequestEvent = serde_json::from_slice(body)?;
            let mut out = Interpreted {
                action: Some(e.action.clone()),
                repo: Some(e.repository.full_name.clone()),
                pr: Some(e.number),
                head_sha: Some(e.pull_request.head.sha.clone()),
                decision: Decision::Ignore(String::new()),
            };
            let via = e
                .performed_via_github_app
                .as_ref()
                .or(e.pull_request.performed_via_github_app.as_ref());
            out.decision = if app.is_us(&e.sender, via) {
                Decision::Ignore("caused by meshward's own app".into())
            } else {
                let relevant = match e.action.as_str() {
                    "opened" | "synchronize" | "reopened" | "ready_for_review" => true,
                    "edited" => e
                        .changes
                        .as_ref()
                        .and_then(|c| c.get("base"))
                        .is_some_and(|b| !b.is_null()),
                    _ => false,
                };
                if relevant {
                    let repo = repo_record(&e.repository, e.installation.as_ref());
                    let job = NewJob {
                        kind: JobKind::Check,
                        repo_id: e.repository.id,
                        repo: e.repository.full_name.clone(),
                        installation_id: e.installation.as_ref().map(|i| i.id),
                        pr_number: Some(e.number),
                        head_sha: e.pull_request.head.sha.clone(),
                        base_sha: Some(e.pull_request.base.sha.clone()),
                        base_ref: Some(e.pull_request.base.name.clone()),
                        delivery_id: None,
                    };
                    enqueue(repo, vec![job])
                } else if e.action == "edited" {
                    Decision::Ignore("pull request edited without a base branch change".into())
                } else {
                    Decision::Ignore(format!("pull_request action {} is not checked", e.action))
                }
            };
            Ok(out)
        }
        "check_run" | "check_suite" => {
            let (action, head_sha, head_branch, prs, check_app, repository, installation, sender) =
                if event == "check_run" {
                    let e: CheckRunEvent = serde_json::from_slice(body)?;
                    let branch = e.check_run.check_suite.and_then(|s| s.head_branch);
                    (
                        e.action,
                        e.check_run.head_sha,
                        branch,
                        e.check_run.pull_requests,
                        e.check_run.app,
                        e.repository,
                        e.installation,
                        e.sender,
                    )
                } else {
                    let e: CheckSuiteEvent = serde_json::from_slice(body)?;
                    (
                        e.action,
                        e.check_suite.head_sha,
                        e.check_suite.head_branch,
                        e.check_suite.pull_requests,
                        e.check_suite.app,
                        e.repository,
                        e.installation,
                        e.sender,
                    )
                };
            let mut out = Interpreted {
                action: Some(action.clone()),
                repo: Some(repository.full_name.clone()),
                pr: prs.first().map(|p| p.number),
                head_sha: Some(head_sha.clone()),
                decision: Decision::Ignore(String::new()),
            };
            out.decision = if action != "rerequested" {
                Decision::Ignore(format!("{event} action {action} is not handled"))
            } else if app.is_us(&sender, None) {
                Decision::Ignore("caused by meshward's own app".into())
            } else if matches!((app.id, &check_app), (Some(ours), Some(theirs)) if ours != theirs.id)
            {
                Decision::Ignore(format!("{event} of another app"))
            } else {
                let repo = repo_record(&repository, installation.as_ref());
                let installation_id = installation.as_ref().map(|i| i.id);
                let jobs: Vec<NewJob> = if prs.is_empty() {
                    let on_default = matches!(
                        (&head_branch, &repository.default_branch),
                        (Some(h), Some(d)) if h == d
                    );
                    // An empty list is what GitHub sends for a pull request from a
                    // fork: a check job without a PR number, whose worker finds the
                    // pull request of the head commit. A fork's branch may be named
                    // like the default branch, so the name alone does not make a
                    // baseline: the worker runs one only if the commit is on the
                    // default branch (`base_ref`) of this repository.
                    vec![NewJob {
                        kind: JobKind::Check,
                        repo_id: repository.id,
                        repo: repository.full_name.clone(),
                        installation_id,
                        pr_number: None,
                        head_sha: head_sha.clone(),
                        base_sha: None,
                        base_ref: if on_default {
                            head_branch.clone()
                        } else {
                            None
                        },
                        delivery_id: None,
                    }]
                } else {
                    prs.iter()
                        .map(|pr| NewJob {
                            kind: JobKind::Check,
                            repo_id: repository.id,
                            repo: repository.full_name.clone(),
                            installation_id,
                            pr_number: Some(pr.number),
                            head_sha: head_sha.clone(),
                            base_sha: Some(pr.base.sha.clone()),
                            base_ref: Some(pr.base.name.clone()),
                            delivery_id: None,
                        })
                        .collect()
                };
                enqueue(repo, jobs)
            };
            Ok(out)
        }
        "push" => {
            let e: PushEvent = serde_json::from_slice(body)?;
            let mut out = Interpreted {
                action: None,
                repo: Some(e.repository.full_name.clone()),
                pr: None,
                head_sha: Some(e.after.clone()),
                decision: Decision::Ignore(String::new()),
            };
            let default_ref = e
                .repository
                .default_branch
                .as_ref()
                .map(|b| format!("refs/heads/{b}"));
            out.decision = if app.is_us(&e.sender, None) {
                Decision::Ignore("caused by meshward's own app".into())
            } else if default_ref.as_deref() != Some(e.git_ref.as_str()) {
                Decision::Ignore(format!("push to {}, not the default branch", e.git_ref))
            } else if e.deleted || e.after == ZERO_SHA {
                Decision::Ignore("the default branch was deleted".into())
            } else {
                let repo = repo_record(&e.repository, e.installation.as_ref());
                let job = NewJob {
                    kind: JobKind::Baseline,
                    repo_id: e.repository.id,
                    repo: e.repository.full_name.clone(),
                    installation_id: e.installation.as_ref().map(|i| i.id),
                    pr_number: None,
                    head_sha: e.after.clone(),
                    base_sha: None,
                    base_ref: e.repository.default_branch.clone(),
                    delivery_id: None,
                };
                enqueue(repo, vec![job])
            };
            Ok(out)
        }
        "installation" => {
            let e: InstallationEvent = serde_json::from_slice(body)?;
            let inst = e.installation.id;
            let listed = |installed: bool| -> Vec<RepoRecord> {
                e.repositories
                    .iter()
                    .flatten()
                    .map(|r| lite_record(r, inst, installed))
                    .collect()
            };
            let effect = match e.action.as_str() {
                "created" | "unsuspend" | "new_permissions_accepted" => DeliveryEffect {
                    upsert_repos: listed(true),
                    ..Default::default()
                },
                "deleted" | "suspend" => DeliveryEffect {
                    remove_installation: Some(inst),
                    ..Default::default()
                },
                _ => {
                    return Ok(ignore(
                        Some(e.action.clone()),
                        format!("installation action {} is not handled", e.action),
                    ))
                }
            };
            Ok(repos_changed(e.action, effect))
        }
        "installation_repositories" => {
            let e: InstallationReposEvent = serde_json::from_slice(body)?;
            let inst = e.installation.id;
            let effect = DeliveryEffect {
                upsert_repos: e
                    .repositories_added
                    .iter()
                    .map(|r| lite_record(r, inst, true))
                    .collect(),
                remove_repos: e.repositories_removed.iter().map(|r| r.id).collect(),
                ..Default::default()
            };
            Ok(repos_changed(e.action, effect))
        }
        other => Ok(ignore(None, format!("event {other} is not handled"))),
    }
}

/// A delivery that changes which repositories meshward serves.
fn repos_changed(action: String, effect: DeliveryEffect) -> Interpreted {
    Interpreted {
        action: Some(action),
        repo: None,
        pr: None,
        head_sha: None,
        decision: Decision::Act {
            outcome: "repos",
            effect,
        },
    }
}

fn enqueue(repo: RepoRecord, jobs: Vec<NewJob>) -> Decision {
    Decision::Act {
        outcome: "enqueued",
        effect: DeliveryEffect {
            upsert_repos: vec![repo],
            jobs,
            ..Default::default()
        },
    }
}

fn repo_record(r: &Repository, installation: Option<&Installation>) -> RepoRecord {
    RepoRecord {
        github_id: r.id,
        full_name: r.full_name.clone(),
        installation_id: installation.map(|i| i.id),
        default_branch: r.default_branch.clone(),
        installed: true,
    }
}

fn lite_record(r: &RepoLite, installation: i64, installed: bool) -> RepoRecord {
    RepoRecord {
        github_id: r.id,
        full_name: r.full_name.clone(),
        installation_id: Some(installation),
        default_branch: None,
        installed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rerequested(event: &str, head_branch: &str, prs: serde_json::Value) -> Vec<u8> {
        let suite = serde_json::json!({
            "head_sha": "abc123abc123abc123abc123abc123abc123abc1", "head_branch": head_branch,
            "pull_requests": prs, "app": {"id": 1},
        });
        let body = if event == "check_suite" {
            serde_json::json!({"action": "rerequested", "check_suite": suite})
        } else {
            serde_json::json!({"action": "rerequested", "check_run": {
                "head_sha": "abc123abc123abc123abc123abc123abc123abc1", "pull_requests": prs, "app": {"id": 1},
                "check_suite": {"head_branch": head_branch},
            }})
        };
        let mut body = body;
        body["repository"] =
            serde_json::json!({"id": 5, "full_name": "acme/gitops", "default_branch": "main"});
        body["installation"] = serde_json::json!({"id": 9});
        body["sender"] = serde_json::json!({"login": "octocat", "type": "User"});
        serde_json::to_vec(&body).unwrap()
    }

    fn jobs(event: &str, body: &[u8]) -> Vec<NewJob> {
        let app = AppIdentity {
            id: Some(1),
            slug: Some("meshward".into()),
        };
        match interpret(event, body, &app).unwrap().decision {
            Decision::Act { effect, .. } => effect.jobs,
            Decision::Ignore(why) => panic!("ignored: {why}"),
        }
    }

    /// GitHub lists no pull request on the check run or suite of a fork's pull
    /// request: a re-run of it is a check job whose worker finds the pull request.
    #[test]
    fn a_rerun_with_no_pull_request_off_the_default_branch_is_a_check_to_resolve() {
        for event in ["check_run", "check_suite"] {
            let j = jobs(event, &rerequested(event, "patch-1", serde_json::json!([])));
            assert_eq!(j.len(), 1, "{event}");
            assert_eq!(
                (j[0].kind, j[0].pr_number, j[0].base_sha.as_deref()),
                (JobKind::Check, None, None),
                "{event}"
            );
            assert_eq!(
                (j[0].head_sha.as_str(), j[0].installation_id),
                ("abc123abc123abc123abc123abc123abc123abc1", Some(9))
            );
            // Named like the default branch: the worker decides, by where the
            // commit is, whether it is a baseline.
            let j = jobs(event, &rerequested(event, "main", serde_json::json!([])));
            assert_eq!(
                (j[0].kind, j[0].pr_number, j[0].base_ref.as_deref()),
                (JobKind::Check, None, Some("main"))
            );
        }
    }

    /// What a payload names reaches API paths and the disk: a forged one is refused.
    #[test]
    fn a_payload_with_a_path_for_a_sha_a_repo_or_a_branch_is_refused() {
        let app = AppIdentity::default();
        let good = rerequested("check_run", "patch-1", serde_json::json!([]));
        assert!(interpret("check_run", &good, &app).is_ok());
        let forge = |pointer: &str, value: &str| {
            let mut body: serde_json::Value = serde_json::from_slice(&good).unwrap();
            *body.pointer_mut(pointer).unwrap() = value.into();
            serde_json::to_vec(&body).unwrap()
        };
        for (pointer, value) in [
            ("/check_run/head_sha", "../../../../etc/passwd"),
            ("/check_run/head_sha", "abc123"),
            ("/repository/full_name", "acme/../../admin"),
            ("/repository/full_name", "acme/gitops\nx"),
        ] {
            let err = interpret("check_run", &forge(pointer, value), &app)
                .err()
                .unwrap_or_else(|| panic!("{pointer} = {value:?} was accepted"));
            assert!(err.to_string().contains("is not a"), "{err}");
        }
        let mut pr = serde_json::json!({
            "action": "opened", "number": 3,
            "pull_request": {"head": {"sha": "a".repeat(40), "ref": "feature"}, "base": {"sha": "b".repeat(40), "ref": "main\u{1b}[2J"}},
            "repository": {"id": 5, "full_name": "acme/gitops"},
            "sender": {"login": "octocat"}
        });
        assert!(interpret("pull_request", &serde_json::to_vec(&pr).unwrap(), &app).is_err());
        pr["pull_request"]["base"]["ref"] = "main".into();
        assert!(interpret("pull_request", &serde_json::to_vec(&pr).unwrap(), &app).is_ok());
    }
}
