//! Reviews, review comments (only on lines of the diff), replies, and review
//! threads over GraphQL.

use super::*;

pub(super) fn route(method: &str, rest: &[&str], r: &mut Repo, cx: &Ctx) -> Option<Answer> {
    let req = cx.req;
    let body = &cx.body;
    let new_id = cx.new_id;
    let login = cx.login.clone();
    Some(match (method, rest) {
        ("POST", ["pulls", number, "reviews"]) => {
            let Some(p) = number
                .parse()
                .ok()
                .and_then(|n: i64| r.pulls.get(&n))
                .cloned()
            else {
                return Some(not_found());
            };
            let event = body["event"].as_str().unwrap_or_default().to_string();
            if !["COMMENT", "APPROVE", "REQUEST_CHANGES"].contains(&event.as_str()) {
                return Some(validation("event is not included in the list"));
            }
            let text = body["body"].as_str().unwrap_or_default().to_string();
            if event == "COMMENT" && text.is_empty() {
                return Some(validation("Body is required for a COMMENT review"));
            }
            let diff: BTreeMap<String, BTreeSet<u32>> = pull_files(r, &p)
                .into_iter()
                .map(|(f, _, _, lines)| (f, lines))
                .collect();
            let commit_id = body["commit_id"]
                .as_str()
                .unwrap_or(&p.head_sha)
                .to_string();
            let mut ids = Vec::new();
            let mut comments = Vec::new();
            for (i, c) in body["comments"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let path = c["path"].as_str().unwrap_or_default().to_string();
                let line = c["line"].as_u64().map(|l| l as u32);
                let on_diff = line.is_some_and(|l| diff.get(&path).is_some_and(|d| d.contains(&l)));
                if c["side"].as_str().unwrap_or("RIGHT") != "RIGHT" || !on_diff {
                    return Some(validation(
                        "Pull request review thread line must be part of the diff",
                    ));
                }
                let id = new_id * 1000 + i as i64 + 1;
                ids.push(id);
                comments.push(ReviewComment {
                    id,
                    number: p.number,
                    review_id: Some(new_id),
                    path,
                    line,
                    body: c["body"].as_str().unwrap_or_default().to_string(),
                    in_reply_to: None,
                    login: login.clone(),
                    commit_id: commit_id.clone(),
                });
            }
            for c in comments {
                r.review_comments.insert(c.id, c);
            }
            r.reviews.insert(
                new_id,
                Review {
                    id: new_id,
                    number: p.number,
                    commit_id,
                    event,
                    body: text,
                    comment_ids: ids,
                },
            );
            json(200, serde_json::json!({"id": new_id, "state": "COMMENTED"}))
        }
        ("GET", ["pulls", number, "reviews", id, "comments"]) => {
            let n: i64 = number.parse().unwrap_or(-1);
            let Some(review) = id
                .parse()
                .ok()
                .and_then(|id: i64| r.reviews.get(&id))
                .filter(|rv| rv.number == n)
            else {
                return Some(not_found());
            };
            let list = review
                .comment_ids
                .iter()
                .filter_map(|id| r.review_comments.get(id))
                .map(review_comment_json)
                .collect();
            page(req, list)
        }
        ("GET", ["pulls", number, "comments"]) => {
            let n: i64 = number.parse().unwrap_or(-1);
            let list = r
                .review_comments
                .values()
                .filter(|c| c.number == n)
                .map(review_comment_json)
                .collect();
            page(req, list)
        }
        ("POST", ["pulls", number, "comments", id, "replies"]) => {
            let n: i64 = number.parse().unwrap_or(-1);
            let Some(parent) = id
                .parse()
                .ok()
                .and_then(|id: i64| r.review_comments.get(&id))
                .filter(|c| c.number == n)
                .cloned()
            else {
                return Some(not_found());
            };
            let c = ReviewComment {
                id: new_id,
                number: n,
                review_id: None,
                path: parent.path.clone(),
                line: parent.line,
                body: body["body"].as_str().unwrap_or_default().to_string(),
                in_reply_to: Some(parent.id),
                login,
                commit_id: parent.commit_id.clone(),
            };
            let answer = review_comment_json(&c);
            r.review_comments.insert(new_id, c);
            json(201, answer)
        }
        _ => return None,
    })
}

pub(super) fn review_comment_json(c: &ReviewComment) -> serde_json::Value {
    serde_json::json!({
        "id": c.id, "body": c.body, "path": c.path, "line": c.line, "side": "RIGHT",
        "commit_id": c.commit_id, "original_commit_id": c.commit_id,
        "pull_request_review_id": c.review_id,
        "in_reply_to_id": c.in_reply_to, "user": {"login": c.login},
    })
}

/// The two GraphQL operations meshward sends: a pull request's review threads, and
/// resolving one.
pub(super) fn graphql(m: &mut Model, req: &Request, who: Reader) -> Answer {
    if matches!(who, Reader::Nobody) {
        return json(401, serde_json::json!({"message": "Bad credentials"}));
    }
    let body = body_of(req);
    let query = body["query"].as_str().unwrap_or_default();
    let vars = &body["variables"];
    if query.contains("resolveReviewThread") {
        let thread = vars["id"].as_str().unwrap_or_default();
        let Some(root) = thread
            .strip_prefix("T_")
            .and_then(|t| t.parse::<i64>().ok())
        else {
            return json(
                200,
                serde_json::json!({"errors": [{"message": "Could not resolve to a node"}]}),
            );
        };
        for r in m.repos.values_mut() {
            if r.review_comments.contains_key(&root) && who.may(r) {
                r.resolved_threads.insert(root);
                return json(
                    200,
                    serde_json::json!({"data": {"resolveReviewThread": {"thread": {"id": thread, "isResolved": true}}}}),
                );
            }
        }
        return json(
            200,
            serde_json::json!({"errors": [{"message": "Could not resolve to a node"}]}),
        );
    }
    if query.contains("reviewThreads") {
        let full = format!(
            "{}/{}",
            vars["owner"].as_str().unwrap_or_default(),
            vars["name"].as_str().unwrap_or_default()
        );
        let number = vars["number"].as_i64().unwrap_or(-1);
        let Some(r) = m.repos.get(&full).filter(|r| who.may(r)) else {
            return json(
                200,
                serde_json::json!({"errors": [{"message": "Could not resolve to a Repository"}]}),
            );
        };
        let all: Vec<serde_json::Value> = r
            .review_comments
            .values()
            .filter(|c| c.number == number && c.in_reply_to.is_none())
            .map(|c| {
                serde_json::json!({
                    "id": format!("T_{}", c.id),
                    "isResolved": r.resolved_threads.contains(&c.id),
                    "comments": {"nodes": [{"databaseId": c.id}]},
                })
            })
            .collect();
        // Cursors are "C_<index of the page's last thread>".
        let start = vars["after"]
            .as_str()
            .and_then(|c| c.strip_prefix("C_"))
            .and_then(|i| i.parse::<usize>().ok())
            .map_or(0, |i| i + 1);
        let page: Vec<serde_json::Value> = all
            .iter()
            .skip(start)
            .take(m.graphql_page_size)
            .cloned()
            .collect();
        let end = start + page.len();
        return json(
            200,
            serde_json::json!({"data": {"repository": {"pullRequest": {"reviewThreads": {
                "pageInfo": {
                    "hasNextPage": end < all.len(),
                    "endCursor": if page.is_empty() { serde_json::Value::Null } else { format!("C_{}", end - 1).into() },
                },
                "nodes": page,
            }}}}}),
        );
    }
    json(
        200,
        serde_json::json!({"errors": [{"message": "the fake GitHub does not know this query"}]}),
    )
}
