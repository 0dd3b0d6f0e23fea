//! Issue comments on pull requests (65,536 characters at most).

use super::*;

pub(super) fn route(method: &str, rest: &[&str], r: &mut Repo, cx: &Ctx) -> Option<Answer> {
    let req = cx.req;
    let body = &cx.body;
    let new_id = cx.new_id;
    let login = cx.login.clone();
    let user_type = cx.user_type.clone();
    Some(match (method, rest) {
        ("GET", ["issues", number, "comments"]) => {
            let n: i64 = number.parse().unwrap_or(-1);
            let list = r
                .issue_comments
                .values()
                .filter(|c| c.number == n)
                .map(comment_json)
                .collect();
            page(req, list)
        }
        ("POST", ["issues", number, "comments"]) => {
            let n: i64 = number.parse().unwrap_or(-1);
            if !r.pulls.contains_key(&n) {
                return Some(not_found());
            }
            let text = body["body"].as_str().unwrap_or_default().to_string();
            if text.chars().count() > COMMENT_LIMIT {
                return Some(validation("Body is too long (maximum is 65536 characters)"));
            }
            let c = IssueComment {
                id: new_id,
                number: n,
                body: text,
                login,
                user_type,
                edits: 0,
            };
            let answer = comment_json(&c);
            r.issue_comments.insert(new_id, c);
            json(201, answer)
        }
        ("PATCH", ["issues", "comments", id]) => {
            let Some(c) = id
                .parse()
                .ok()
                .and_then(|id: i64| r.issue_comments.get_mut(&id))
            else {
                return Some(not_found());
            };
            let text = body["body"].as_str().unwrap_or_default().to_string();
            if text.chars().count() > COMMENT_LIMIT {
                return Some(validation("Body is too long (maximum is 65536 characters)"));
            }
            c.body = text;
            c.edits += 1;
            json(200, comment_json(c))
        }
        ("DELETE", ["issues", "comments", id]) => {
            match id
                .parse()
                .ok()
                .and_then(|id: i64| r.issue_comments.remove(&id))
            {
                Some(_) => (204, ResponseTemplate::new(204)),
                None => not_found(),
            }
        }
        _ => return None,
    })
}

pub(super) fn comment_json(c: &IssueComment) -> serde_json::Value {
    serde_json::json!({
        "id": c.id, "body": c.body,
        "user": {"login": c.login, "type": c.user_type},
    })
}
