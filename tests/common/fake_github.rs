//! A fake GitHub for tests: a wiremock server backed by an in-memory model of
//! installations, repositories, commits and pull requests. meshward reaches it
//! through the real octocrab client (MESHWARD_GITHUB_API_URL); tests assert on the
//! model's end state and on its log of calls.
//!
//! Extend [`Model`] and [`Responder::route`] for new endpoints (check runs, comments,
//! reviews): keep the state in the model, so tests can read what meshward did.
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
}

#[derive(Debug, Clone)]
pub struct Repo {
    pub id: i64,
    pub full_name: String,
    pub default_branch: String,
    pub installation_id: i64,
    pub commits: BTreeMap<String, Commit>,
    pub pulls: BTreeMap<i64, Pull>,
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

/// An answer forced on the next `times` requests whose path contains `path`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub path_contains: String,
    pub status: u16,
    pub retry_after: Option<u64>,
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
    next_token: u64,
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
            next_token: 0,
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

    /// The API root to give meshward.
    pub fn url(&self) -> String {
        self.server.uri()
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
                pulls: BTreeMap::new(),
            },
        );
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

    pub fn open_pull(&self, repo: &str, number: i64, base_sha: &str, head_sha: &str) {
        let mut m = self.model();
        let r = m.repos.get_mut(repo).expect("repo exists");
        r.pulls.insert(
            number,
            Pull {
                number,
                head_sha: head_sha.to_string(),
                base_sha: base_sha.to_string(),
                base_ref: "main".to_string(),
            },
        );
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
                match merge_base(r, base, head) {
                    Some(mb) => json(
                        200,
                        serde_json::json!({"merge_base_commit": {"sha": mb}, "status": "ahead"}),
                    ),
                    None => not_found(),
                }
            }
            _ => not_found(),
        }
    }
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
            .find(|f| f.times > 0 && path.contains(&f.path_contains))
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
