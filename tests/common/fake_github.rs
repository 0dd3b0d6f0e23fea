//! A fake GitHub for tests: a wiremock server backed by an in-memory model of
//! installations, repositories, commits, pull requests (with their diffs), check
//! runs, commit statuses, issue comments, reviews and review comments (with thread
//! resolution over GraphQL). meshward reaches it through the real octocrab client
//! (MESHWARD_GITHUB_API_URL); tests assert on the model's end state and on its log
//! of calls.
//!
//! It enforces what GitHub enforces and meshward must respect: only Apps create
//! check runs, 50 annotations per request, 65,535 characters of check output,
//! 65,536 characters of comment, review comments only on lines of the diff.
//!
//! Extend [`Model`] and [`Responder::route`] for new endpoints: keep the state in
//! the model, so tests can read what meshward did.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const APP_ID: i64 = 4242;
pub const APP_SLUG: &str = "meshward-test";

/// The App's private key (test only) and its public half, to verify JWTs.
pub fn app_private_key() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/test-app-key.pem"
    ))
    .expect("test key")
}

fn app_public_key() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/test-app-key.pub.pem"
    ))
    .expect("test public key")
}

#[derive(Debug, Clone, Default)]
pub struct Commit {
    pub files: BTreeMap<String, Vec<u8>>,
    pub parent: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Pull {
    pub number: i64,
    pub head_sha: String,
    pub base_sha: String,
    pub base_ref: String,
    /// Where the head branch lives: this repository, or a fork.
    pub head_repo: String,
}

#[derive(Debug, Clone, Default)]
pub struct CheckRun {
    pub id: i64,
    pub name: String,
    pub head_sha: String,
    pub status: String,
    pub conclusion: Option<String>,
    pub external_id: Option<String>,
    pub details_url: Option<String>,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub text: Option<String>,
    /// Every annotation received (GitHub appends them).
    pub annotations: Vec<serde_json::Value>,
    /// How many annotations each request carried (requests without any: not listed).
    pub annotation_batches: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct CommitStatus {
    pub sha: String,
    pub state: String,
    pub context: String,
    pub description: Option<String>,
    pub target_url: Option<String>,
}

#[derive(Debug, Clone)]
pub struct IssueComment {
    pub id: i64,
    pub number: i64,
    pub body: String,
    pub login: String,
    pub user_type: String,
    pub edits: usize,
}

#[derive(Debug, Clone)]
pub struct Review {
    pub id: i64,
    pub number: i64,
    pub commit_id: String,
    pub event: String,
    pub body: String,
    pub comment_ids: Vec<i64>,
}

#[derive(Debug, Clone)]
pub struct ReviewComment {
    pub id: i64,
    pub number: i64,
    pub review_id: Option<i64>,
    pub path: String,
    pub line: Option<u32>,
    pub body: String,
    pub in_reply_to: Option<i64>,
    pub login: String,
    pub commit_id: String,
}

#[derive(Debug, Clone)]
pub struct Repo {
    pub id: i64,
    pub full_name: String,
    pub default_branch: String,
    pub installation_id: i64,
    pub commits: BTreeMap<String, Commit>,
    /// Branch name → tip commit, for the compare endpoint.
    pub branches: BTreeMap<String, String>,
    pub pulls: BTreeMap<i64, Pull>,
    pub check_runs: BTreeMap<i64, CheckRun>,
    pub statuses: Vec<CommitStatus>,
    pub issue_comments: BTreeMap<i64, IssueComment>,
    pub reviews: BTreeMap<i64, Review>,
    pub review_comments: BTreeMap<i64, ReviewComment>,
    /// Review threads marked resolved, by the id of their first comment.
    pub resolved_threads: BTreeSet<i64>,
}

impl Repo {
    /// Top-level review comments (not replies).
    pub fn inline_comments(&self) -> Vec<&ReviewComment> {
        self.review_comments
            .values()
            .filter(|c| c.in_reply_to.is_none())
            .collect()
    }
    pub fn replies_to(&self, id: i64) -> Vec<&ReviewComment> {
        self.review_comments
            .values()
            .filter(|c| c.in_reply_to == Some(id))
            .collect()
    }
}

#[derive(Debug, Clone)]
pub struct Token {
    pub installation_id: i64,
    pub expires_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub status: u16,
}

/// An answer forced on the next `times` requests whose path contains `path` (and,
/// if given, whose method is `method`).
#[derive(Debug, Clone, Default)]
pub struct Fault {
    pub path_contains: String,
    pub method: Option<String>,
    pub status: u16,
    pub retry_after: Option<u64>,
    /// More headers on the answer (`x-ratelimit-reset`, …).
    pub headers: Vec<(String, String)>,
    pub message: String,
    pub times: usize,
}

#[derive(Debug)]
pub struct Model {
    pub repos: BTreeMap<String, Repo>,
    /// Installation tokens issued, by token.
    pub tokens: BTreeMap<String, Token>,
    /// Plain tokens that may read every repository.
    pub personal_tokens: BTreeSet<String>,
    /// Lifetime of the installation tokens issued.
    pub token_ttl: chrono::Duration,
    pub calls: Vec<Call>,
    pub faults: VecDeque<Fault>,
    /// Answers to paths containing the key are held back this long.
    pub delays: Vec<(String, std::time::Duration)>,
    /// Serve as GitHub Enterprise Server does: REST under `/api/v3`, GraphQL at
    /// `/api/graphql` (and not under `/api/v3`).
    pub enterprise: bool,
    /// Review threads per GraphQL page (GitHub allows up to 100).
    pub graphql_page_size: usize,
    next_token: u64,
    next_id: i64,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            repos: BTreeMap::new(),
            tokens: BTreeMap::new(),
            personal_tokens: BTreeSet::new(),
            token_ttl: chrono::Duration::minutes(60),
            calls: Vec::new(),
            faults: VecDeque::new(),
            delays: Vec::new(),
            enterprise: false,
            graphql_page_size: 100,
            next_token: 0,
            next_id: 1000,
        }
    }
}

pub struct FakeGitHub {
    pub server: MockServer,
    pub model: Arc<Mutex<Model>>,
}

impl FakeGitHub {
    pub async fn start() -> FakeGitHub {
        let server = MockServer::start().await;
        let model = Arc::new(Mutex::new(Model::default()));
        Mock::given(wiremock::matchers::any())
            .respond_with(Responder {
                model: model.clone(),
                base: server.uri(),
            })
            .mount(&server)
            .await;
        FakeGitHub { server, model }
    }

    /// A fake GitHub Enterprise Server: the same API under its paths.
    pub async fn start_enterprise() -> FakeGitHub {
        let fake = FakeGitHub::start().await;
        fake.model().enterprise = true;
        fake
    }

    /// The API root to give meshward.
    pub fn url(&self) -> String {
        if self.model().enterprise {
            format!("{}/api/v3", self.server.uri())
        } else {
            self.server.uri()
        }
    }

    pub fn model(&self) -> std::sync::MutexGuard<'_, Model> {
        self.model.lock().expect("fake GitHub model")
    }

    pub fn add_repo(&self, full_name: &str, id: i64, installation_id: i64) {
        self.model().repos.insert(
            full_name.to_string(),
            Repo {
                id,
                full_name: full_name.to_string(),
                default_branch: "main".to_string(),
                installation_id,
                commits: BTreeMap::new(),
                branches: BTreeMap::new(),
                pulls: BTreeMap::new(),
                check_runs: BTreeMap::new(),
                statuses: Vec::new(),
                issue_comments: BTreeMap::new(),
                reviews: BTreeMap::new(),
                review_comments: BTreeMap::new(),
                resolved_threads: BTreeSet::new(),
            },
        );
    }

    /// A copy of a repository's state.
    pub fn repo(&self, full_name: &str) -> Repo {
        self.model().repos[full_name].clone()
    }

    /// Adds a commit with exactly `files` (path, content) and returns its sha.
    pub fn commit(&self, repo: &str, parent: Option<&str>, files: &[(&str, &str)]) -> String {
        let files: BTreeMap<String, Vec<u8>> = files
            .iter()
            .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
            .collect();
        let sha = fake_sha(&format!("{repo}{parent:?}{files:?}"));
        let mut m = self.model();
        let r = m.repos.get_mut(repo).expect("repo exists");
        r.commits.insert(
            sha.clone(),
            Commit {
                files,
                parent: parent.map(str::to_string),
            },
        );
        sha
    }

    /// Points `branch` of `repo` at `sha`.
    pub fn set_branch(&self, repo: &str, branch: &str, sha: &str) {
        let mut m = self.model();
        let r = m.repos.get_mut(repo).expect("repo exists");
        r.branches.insert(branch.to_string(), sha.to_string());
    }

    pub fn open_pull(&self, repo: &str, number: i64, base_sha: &str, head_sha: &str) {
        self.open_pull_from(repo, repo, number, base_sha, head_sha);
    }

    /// A pull request whose head branch is in `head_repo` (a fork). Its commits are
    /// readable through the base repository, as on GitHub.
    pub fn open_pull_from(
        &self,
        repo: &str,
        head_repo: &str,
        number: i64,
        base_sha: &str,
        head_sha: &str,
    ) {
        let mut m = self.model();
        let r = m.repos.get_mut(repo).expect("repo exists");
        r.pulls.insert(
            number,
            Pull {
                number,
                head_sha: head_sha.to_string(),
                base_sha: base_sha.to_string(),
                base_ref: "main".to_string(),
                head_repo: head_repo.to_string(),
            },
        );
    }

    /// A push to a pull request's branch.
    pub fn push_pull(&self, repo: &str, number: i64, head_sha: &str) {
        let mut m = self.model();
        let r = m.repos.get_mut(repo).expect("repo exists");
        r.pulls.get_mut(&number).expect("pull exists").head_sha = head_sha.to_string();
    }

    pub fn add_personal_token(&self, token: &str) {
        self.model().personal_tokens.insert(token.to_string());
    }

    pub fn inject(&self, fault: Fault) {
        self.model().faults.push_back(fault);
    }

    pub fn delay(&self, path_contains: &str, by: std::time::Duration) {
        self.model().delays.push((path_contains.to_string(), by));
    }

    pub fn calls(&self) -> Vec<Call> {
        self.model().calls.clone()
    }

    /// Calls whose path contains `part`.
    pub fn calls_to(&self, part: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.contains(part))
            .collect()
    }
}

/// A deterministic 40-hex-digit id.
pub fn fake_sha(seed: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(seed.as_bytes()))[..40].to_string()
}

/// A gzipped tarball laid out like GitHub's: a pax global header naming the commit,
/// then every file under `owner-repo-sha7/`.
pub fn tarball(full_name: &str, sha: &str, files: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(enc);
    let record = format!("comment={sha}\n");
    let mut len = record.len() + 3;
    if format!("{len} {record}").len() != len {
        len += 1;
    }
    let pax = format!("{len} {record}");
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::XGlobalHeader);
    h.set_path("pax_global_header").unwrap();
    h.set_size(pax.len() as u64);
    h.set_mode(0o666);
    h.set_cksum();
    b.append(&h, pax.as_bytes()).unwrap();
    let top = format!("{}-{}/", full_name.replace('/', "-"), &sha[..7]);
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_path(&top).unwrap();
    h.set_size(0);
    h.set_mode(0o775);
    h.set_cksum();
    b.append(&h, &[][..]).unwrap();
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(0o664);
        b.append_data(&mut h, format!("{top}{path}"), &data[..])
            .unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

struct Responder {
    model: Arc<Mutex<Model>>,
    base: String,
}

type Answer = (u16, ResponseTemplate);

/// An Enterprise path as the github.com path it serves; None where Enterprise
/// serves nothing.
fn enterprise_path(path: &str) -> Option<String> {
    if path == "/api/graphql" {
        return Some("/graphql".into());
    }
    if path.starts_with("/_codeload/") {
        return Some(path.to_string());
    }
    path.strip_prefix("/api/v3/")
        .filter(|rest| *rest != "graphql")
        .map(|rest| format!("/{rest}"))
}

fn json(status: u16, v: serde_json::Value) -> Answer {
    (
        status,
        ResponseTemplate::new(status)
            .insert_header("content-type", "application/json")
            .set_body_string(v.to_string()),
    )
}

fn not_found() -> Answer {
    json(404, serde_json::json!({"message": "Not Found"}))
}

enum Auth {
    None,
    App,
    Installation(i64),
    Personal,
    Invalid,
}

impl Responder {
    fn auth(&self, m: &Model, req: &Request) -> Auth {
        let Some(value) = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
        else {
            return Auth::None;
        };
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("token "))
            .unwrap_or("");
        if let Some(t) = m.tokens.get(token) {
            return if t.expires_at > chrono::Utc::now() {
                Auth::Installation(t.installation_id)
            } else {
                Auth::Invalid
            };
        }
        if m.personal_tokens.contains(token) {
            return Auth::Personal;
        }
        #[derive(serde::Deserialize)]
        struct Claims {
            iss: serde_json::Value,
        }
        let key = jsonwebtoken::DecodingKey::from_rsa_pem(app_public_key().as_bytes())
            .expect("public key");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.set_required_spec_claims(&["exp"]);
        match jsonwebtoken::decode::<Claims>(token, &key, &validation) {
            Ok(data) if data.claims.iss.to_string().trim_matches('"') == APP_ID.to_string() => {
                Auth::App
            }
            Ok(_) => Auth::Invalid,
            Err(e) => {
                eprintln!("fake GitHub: JWT rejected: {e}");
                Auth::Invalid
            }
        }
    }

    fn route(&self, m: &mut Model, req: &Request) -> Answer {
        let path = req.url.path().to_string();
        let path = if m.enterprise {
            match enterprise_path(&path) {
                Some(p) => p,
                None => return not_found(),
            }
        } else {
            path
        };
        let method = req.method.as_str().to_string();
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let auth = self.auth(m, req);
        let can_read = |m: &Model, repo: &str| -> bool {
            match (&auth, m.repos.get(repo)) {
                (Auth::Personal, Some(_)) => true,
                (Auth::Installation(i), Some(r)) => r.installation_id == *i,
                _ => false,
            }
        };
        match (method.as_str(), parts.as_slice()) {
            ("POST", ["app", "installations", id, "access_tokens"]) => {
                if !matches!(auth, Auth::App) {
                    return json(
                        401,
                        serde_json::json!({"message": "A JSON web token could not be decoded"}),
                    );
                }
                let Ok(id) = id.parse::<i64>() else {
                    return not_found();
                };
                if !m.repos.values().any(|r| r.installation_id == id) {
                    return not_found();
                }
                m.next_token += 1;
                let token = format!("ghs_fake{}", m.next_token);
                let expires_at = chrono::Utc::now() + m.token_ttl;
                m.tokens.insert(
                    token.clone(),
                    Token {
                        installation_id: id,
                        expires_at,
                    },
                );
                json(
                    201,
                    serde_json::json!({
                        "token": token,
                        "expires_at": expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        "permissions": {"contents": "read", "checks": "write"},
                        "repository_selection": "selected"
                    }),
                )
            }
            ("GET", ["repos", owner, name, "installation"]) => {
                if !matches!(auth, Auth::App) {
                    return json(401, serde_json::json!({"message": "Bad credentials"}));
                }
                match m.repos.get(&format!("{owner}/{name}")) {
                    Some(r) => json(
                        200,
                        serde_json::json!({"id": r.installation_id, "app_id": APP_ID}),
                    ),
                    None => not_found(),
                }
            }
            ("GET", ["repos", owner, name, "tarball", sha]) => {
                let repo = format!("{owner}/{name}");
                if !can_read(m, &repo) {
                    return not_found();
                }
                if !m.repos[&repo].commits.contains_key(*sha) {
                    return not_found();
                }
                // Like GitHub: a redirect to the download host.
                (
                    302,
                    ResponseTemplate::new(302).insert_header(
                        "location",
                        format!("{}/_codeload/{owner}/{name}/legacy.tar.gz/{sha}", self.base)
                            .as_str(),
                    ),
                )
            }
            ("GET", ["_codeload", owner, name, "legacy.tar.gz", sha]) => {
                let repo = format!("{owner}/{name}");
                match m.repos.get(&repo).and_then(|r| r.commits.get(*sha)) {
                    Some(c) => (
                        200,
                        ResponseTemplate::new(200)
                            .insert_header("content-type", "application/x-gzip")
                            .set_body_bytes(tarball(&repo, sha, &c.files)),
                    ),
                    None => not_found(),
                }
            }
            ("GET", ["repos", owner, name, "compare", range]) => {
                let repo = format!("{owner}/{name}");
                if !can_read(m, &repo) {
                    return not_found();
                }
                let Some((base, head)) = range.split_once("...") else {
                    return not_found();
                };
                let r = &m.repos[&repo];
                let named = |s: &str| r.branches.get(s).cloned().unwrap_or_else(|| s.to_string());
                match merge_base(r, &named(base), &named(head)) {
                    Some(mb) => json(
                        200,
                        serde_json::json!({"merge_base_commit": {"sha": mb}, "status": "ahead"}),
                    ),
                    None => not_found(),
                }
            }
            _ => {
                let reader = match auth {
                    Auth::Installation(i) => Reader::Installation(i),
                    Auth::Personal => Reader::Personal,
                    _ => Reader::Nobody,
                };
                publishing(m, req, reader, &method, &parts).unwrap_or_else(not_found)
            }
        }
    }
}

/// Who calls, for the publishing endpoints.
#[derive(Clone, Copy)]
enum Reader {
    Installation(i64),
    Personal,
    Nobody,
}

impl Reader {
    fn may(self, r: &Repo) -> bool {
        match self {
            Reader::Installation(i) => r.installation_id == i,
            Reader::Personal => true,
            Reader::Nobody => false,
        }
    }
    /// The author GitHub records: the App's bot, or the token's user.
    fn author(self) -> (String, String) {
        match self {
            Reader::Installation(_) => (format!("{APP_SLUG}[bot]"), "Bot".to_string()),
            _ => ("token-user".to_string(), "User".to_string()),
        }
    }
}

fn validation(message: &str) -> Answer {
    json(
        422,
        serde_json::json!({"message": "Validation Failed", "errors": [{"message": message}]}),
    )
}

fn body_of(req: &Request) -> serde_json::Value {
    serde_json::from_slice(&req.body).unwrap_or(serde_json::Value::Null)
}

/// One page of a list, as `per_page` (default 30, at most 100) and `page` ask.
fn page(req: &Request, items: Vec<serde_json::Value>) -> Answer {
    let q: BTreeMap<String, String> = req.url.query_pairs().into_owned().collect();
    let per: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .min(100);
    let page: usize = q
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let items: Vec<serde_json::Value> =
        items.into_iter().skip((page - 1) * per).take(per).collect();
    json(200, serde_json::Value::Array(items))
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
fn pull_files(r: &Repo, p: &Pull) -> Vec<(String, &'static str, String, BTreeSet<u32>)> {
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

fn comment_json(c: &IssueComment) -> serde_json::Value {
    serde_json::json!({
        "id": c.id, "body": c.body,
        "user": {"login": c.login, "type": c.user_type},
    })
}

fn review_comment_json(c: &ReviewComment) -> serde_json::Value {
    serde_json::json!({
        "id": c.id, "body": c.body, "path": c.path, "line": c.line, "side": "RIGHT",
        "commit_id": c.commit_id, "original_commit_id": c.commit_id,
        "pull_request_review_id": c.review_id,
        "in_reply_to_id": c.in_reply_to, "user": {"login": c.login},
    })
}

const COMMENT_LIMIT: usize = 65_536;
const OUTPUT_LIMIT: usize = 65_535;

/// Check runs, statuses, pull requests, comments, reviews, GraphQL.
fn publishing(
    m: &mut Model,
    req: &Request,
    who: Reader,
    method: &str,
    parts: &[&str],
) -> Option<Answer> {
    if method == "POST" && parts == ["graphql"] {
        return Some(graphql(m, req, who));
    }
    let ["repos", owner, name, rest @ ..] = parts else {
        return None;
    };
    let full = format!("{owner}/{name}");
    if !m.repos.get(&full).is_some_and(|r| who.may(r)) {
        return Some(not_found());
    }
    m.next_id += 1;
    let new_id = m.next_id;
    let r = m.repos.get_mut(&full)?;
    let body = body_of(req);
    let (login, user_type) = who.author();
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

/// The two GraphQL operations meshward sends: a pull request's review threads, and
/// resolving one.
fn graphql(m: &mut Model, req: &Request, who: Reader) -> Answer {
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

fn ancestors(r: &Repo, sha: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = Some(sha.to_string());
    while let Some(s) = cur {
        let Some(c) = r.commits.get(&s) else { break };
        out.push(s.clone());
        cur = c.parent.clone();
    }
    out
}

fn merge_base(r: &Repo, base: &str, head: &str) -> Option<String> {
    let base_line: BTreeSet<String> = ancestors(r, base).into_iter().collect();
    if base_line.is_empty() {
        return None;
    }
    ancestors(r, head)
        .into_iter()
        .find(|s| base_line.contains(s))
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut m = self.model.lock().expect("model");
        let path = req.url.path().to_string();
        let method = req.method.as_str().to_string();
        let forced = m
            .faults
            .iter_mut()
            .find(|f| {
                f.times > 0
                    && path.contains(&f.path_contains)
                    && f.method.as_deref().is_none_or(|m| m == method)
            })
            .map(|f| {
                f.times -= 1;
                f.clone()
            });
        let response = match forced {
            Some(f) => {
                let (status, mut r) = json(f.status, serde_json::json!({"message": f.message}));
                if let Some(secs) = f.retry_after {
                    r = r.insert_header("retry-after", secs.to_string().as_str());
                }
                for (k, v) in &f.headers {
                    r = r.insert_header(k.as_str(), v.as_str());
                }
                (status, r)
            }
            None => self.route(&mut m, req),
        };
        let delay = m
            .delays
            .iter()
            .find(|(part, _)| path.contains(part.as_str()))
            .map(|(_, d)| *d);
        m.calls.push(Call {
            method,
            path,
            status: response.0,
        });
        match delay {
            Some(d) => response.1.set_delay(d),
            None => response.1,
        }
    }
}
