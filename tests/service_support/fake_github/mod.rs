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
//! One file a resource: [`auth`] (who calls), [`contents`] (tarballs, merge bases),
//! [`pulls`], [`checks`] (check runs, statuses), [`comments`], [`reviews`] (with
//! GraphQL threads). Extend [`Model`] and the resource's `route` for new endpoints:
//! keep the state in the model, so tests can read what meshward did.
#![allow(dead_code)]

mod auth;
mod checks;
mod comments;
mod contents;
mod pulls;
mod reviews;

pub use auth::app_private_key;
use auth::{app_public_key, Auth, Reader};
use contents::merge_base;
pub use contents::tarball;
use pulls::pull_files;
use reviews::graphql;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const APP_ID: i64 = 4242;
pub const APP_SLUG: &str = "meshward-test";

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

/// What a publishing endpoint knows of its call.
struct Ctx<'a> {
    req: &'a Request,
    who: Reader,
    body: serde_json::Value,
    /// The id of what the call creates, if it creates something.
    new_id: i64,
    /// The author GitHub records for what it creates.
    login: String,
    user_type: String,
}

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
    let (login, user_type) = who.author();
    let cx = Ctx {
        req,
        who,
        body: body_of(req),
        new_id,
        login,
        user_type,
    };
    checks::route(method, rest, r, &cx)
        .or_else(|| pulls::route(method, rest, r, &cx))
        .or_else(|| comments::route(method, rest, r, &cx))
        .or_else(|| reviews::route(method, rest, r, &cx))
}

const COMMENT_LIMIT: usize = 65_536;
const OUTPUT_LIMIT: usize = 65_535;

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
