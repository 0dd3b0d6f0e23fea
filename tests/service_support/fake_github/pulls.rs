//! Pull requests: one, the open ones, those of a commit, and their files with
//! GitHub's patches.

use super::*;

pub(super) fn route(method: &str, rest: &[&str], r: &mut Repo, cx: &Ctx) -> Option<Answer> {
    let req = cx.req;
    Some(match (method, rest) {
        ("GET", ["pulls", number]) => {
            let Some(p) = number.parse().ok().and_then(|n: i64| r.pulls.get(&n)) else {
                return Some(not_found());
            };
            json(
                200,
                serde_json::json!({
                    "number": p.number, "state": "open",
                    "head": {"sha": p.head_sha, "ref": "feature", "repo": {"full_name": p.head_repo}},
                    "base": {"sha": p.base_sha, "ref": p.base_ref, "repo": {"full_name": r.full_name}},
                }),
            )
        }
        ("GET", ["pulls"]) => {
            // Every pull request of the fake is open; a fork's is listed like any.
            let q: BTreeMap<String, String> = req.url.query_pairs().into_owned().collect();
            if q.get("state").is_some_and(|s| s != "open" && s != "all") {
                return Some(page(req, Vec::new()));
            }
            let list = r
                .pulls
                .values()
                .map(|p| {
                    serde_json::json!({
                        "number": p.number, "state": "open",
                        "head": {"sha": p.head_sha, "ref": "feature", "repo": {"full_name": p.head_repo}},
                        "base": {"sha": p.base_sha, "ref": p.base_ref, "repo": {"full_name": r.full_name}},
                    })
                })
                .collect();
            page(req, list)
        }
        ("GET", ["commits", sha, "pulls"]) => {
            // Like GitHub: pull requests whose head branch is in this repository
            // only, never a fork's.
            let list = r
                .pulls
                .values()
                .filter(|p| p.head_sha == *sha && p.head_repo == r.full_name)
                .map(|p| serde_json::json!({"number": p.number, "head": {"sha": p.head_sha}}))
                .collect();
            page(req, list)
        }
        ("GET", ["pulls", number, "files"]) => {
            let Some(p) = number.parse().ok().and_then(|n: i64| r.pulls.get(&n)) else {
                return Some(not_found());
            };
            let files = pull_files(r, p)
                .into_iter()
                .map(|(filename, status, patch, _)| serde_json::json!({"filename": filename, "status": status, "patch": patch}))
                .collect();
            page(req, files)
        }
        _ => return None,
    })
}

/// A unified diff of one file, hunks only (GitHub's `patch`), and the head-side
/// lines a review comment may be put on.
pub fn file_patch(old: &str, new: &str) -> (String, BTreeSet<u32>) {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut patch = String::new();
    let mut lines = BTreeSet::new();
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        patch.push_str(&hunk.to_string());
        for change in hunk.iter_changes() {
            if change.tag() != similar::ChangeTag::Delete {
                if let Some(i) = change.new_index() {
                    lines.insert(i as u32 + 1);
                }
            }
        }
    }
    (patch, lines)
}

/// A pull request's files: what changed between the merge base and the head.
pub(super) fn pull_files(r: &Repo, p: &Pull) -> Vec<(String, &'static str, String, BTreeSet<u32>)> {
    let empty = Commit::default();
    let base_sha = merge_base(r, &p.base_sha, &p.head_sha).unwrap_or_else(|| p.base_sha.clone());
    let base = r.commits.get(&base_sha).unwrap_or(&empty);
    let head = r.commits.get(&p.head_sha).unwrap_or(&empty);
    let paths: BTreeSet<&String> = base.files.keys().chain(head.files.keys()).collect();
    let mut out = Vec::new();
    for path in paths {
        let (old, new) = (base.files.get(path), head.files.get(path));
        if old == new {
            continue;
        }
        let text = |b: Option<&Vec<u8>>| {
            b.map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        let status = match (old, new) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "modified",
        };
        let (patch, lines) = file_patch(&text(old), &text(new));
        out.push((path.clone(), status, patch, lines));
    }
    out
}
