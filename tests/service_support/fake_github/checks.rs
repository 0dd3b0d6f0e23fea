//! Check runs (Apps only, 50 annotations a request, 65,535 characters of output)
//! and commit statuses.

use super::*;

pub(super) fn route(method: &str, rest: &[&str], r: &mut Repo, cx: &Ctx) -> Option<Answer> {
    let who = cx.who;
    let body = &cx.body;
    let new_id = cx.new_id;
    Some(match (method, rest) {
        ("POST", ["check-runs"]) => {
            if !matches!(who, Reader::Installation(_)) {
                return Some(json(
                    403,
                    serde_json::json!({"message": "Resource not accessible by personal access token"}),
                ));
            }
            let sha = body["head_sha"].as_str().unwrap_or_default().to_string();
            if !r.commits.contains_key(&sha) {
                return Some(validation("No commit found for SHA"));
            }
            let run = CheckRun {
                id: new_id,
                name: body["name"].as_str().unwrap_or_default().to_string(),
                head_sha: sha,
                status: body["status"].as_str().unwrap_or("queued").to_string(),
                external_id: body["external_id"].as_str().map(str::to_string),
                ..CheckRun::default()
            };
            r.check_runs.insert(new_id, run);
            json(
                201,
                serde_json::json!({"id": new_id, "status": "in_progress"}),
            )
        }
        ("PATCH", ["check-runs", id]) => {
            if !matches!(who, Reader::Installation(_)) {
                return Some(json(
                    403,
                    serde_json::json!({"message": "Resource not accessible by personal access token"}),
                ));
            }
            let Some(run) = id
                .parse()
                .ok()
                .and_then(|id: i64| r.check_runs.get_mut(&id))
            else {
                return Some(not_found());
            };
            let out = &body["output"];
            let annotations = out["annotations"].as_array().cloned().unwrap_or_default();
            if annotations.len() > 50 {
                return Some(validation("Only 50 annotations are allowed per request"));
            }
            for field in ["summary", "text"] {
                if out[field]
                    .as_str()
                    .is_some_and(|t| t.chars().count() > OUTPUT_LIMIT)
                {
                    return Some(validation(&format!(
                        "output.{field} is too long (maximum is 65535 characters)"
                    )));
                }
            }
            if let Some(status) = body["status"].as_str() {
                if status == "completed" && body["conclusion"].as_str().is_none() {
                    return Some(validation(
                        "conclusion is required when status is completed",
                    ));
                }
                run.status = status.to_string();
            }
            if let Some(c) = body["conclusion"].as_str() {
                if ![
                    "success",
                    "failure",
                    "neutral",
                    "cancelled",
                    "skipped",
                    "timed_out",
                    "action_required",
                ]
                .contains(&c)
                {
                    return Some(validation("conclusion is not included in the list"));
                }
                run.conclusion = Some(c.to_string());
                run.status = "completed".into();
            }
            if let Some(u) = body["details_url"].as_str() {
                run.details_url = Some(u.to_string());
            }
            if out.is_object() {
                run.title = out["title"].as_str().map(str::to_string);
                run.summary = out["summary"].as_str().map(str::to_string);
                if let Some(t) = out["text"].as_str() {
                    run.text = Some(t.to_string());
                }
                if !annotations.is_empty() {
                    run.annotation_batches.push(annotations.len());
                    run.annotations.extend(annotations);
                }
            }
            json(
                200,
                serde_json::json!({"id": run.id, "status": run.status, "conclusion": run.conclusion}),
            )
        }
        ("POST", ["statuses", sha]) => {
            let state = body["state"].as_str().unwrap_or_default();
            if !["error", "failure", "pending", "success"].contains(&state) {
                return Some(validation("state is not included in the list"));
            }
            let description = body["description"].as_str().map(str::to_string);
            if description
                .as_ref()
                .is_some_and(|d| d.chars().count() > 140)
            {
                return Some(validation(
                    "description is too long (maximum is 140 characters)",
                ));
            }
            r.statuses.push(CommitStatus {
                sha: sha.to_string(),
                state: state.to_string(),
                context: body["context"].as_str().unwrap_or("default").to_string(),
                description,
                target_url: body["target_url"].as_str().map(str::to_string),
            });
            json(201, serde_json::json!({"id": new_id, "state": state}))
        }
        _ => return None,
    })
}
