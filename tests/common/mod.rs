//! Shared test helpers: real temporary git repositories and checks run through the
//! library's public pipeline.
#![allow(dead_code)]

use meshward::finding::{FailOn, Finding, Status};
use meshward::report::Report;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn today() -> chrono::NaiveDate {
    chrono::NaiveDate::from_ymd_opt(2026, 11, 30).expect("date")
}

/// The text of 1-based line `line` of `file` under `root` (where a finding points).
pub fn line_text(root: &Path, file: &str, line: u32) -> String {
    let text = std::fs::read_to_string(root.join(file)).expect("read");
    text.lines()
        .nth(line as usize - 1)
        .expect("line exists")
        .to_string()
}

/// Copies a folder's files (recursively) into `dst`.
pub fn copy_tree(src: &Path, dst: &Path) {
    for entry in std::fs::read_dir(src).expect("read fixture dir") {
        let entry = entry.expect("entry");
        let target = dst.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A git repository in a temp dir, committing snapshots one after the other.
pub struct GitRepo {
    pub dir: tempfile::TempDir,
}

impl GitRepo {
    pub fn new() -> GitRepo {
        let repo = GitRepo {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        repo.git(&["init", "--quiet", "--initial-branch=main"]);
        repo
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.dir.path())
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Replaces the work tree with `files` (path, text) and commits; returns the sha.
    pub fn commit_files(&self, files: &[(&str, &str)], message: &str) -> String {
        self.clear();
        for (path, text) in files {
            self.write(path, text);
        }
        self.commit(message)
    }

    /// Replaces the work tree with a fixture folder's content and commits.
    pub fn commit_dir(&self, src: &Path, message: &str) -> String {
        self.clear();
        copy_tree(src, self.dir.path());
        self.commit(message)
    }

    pub fn write(&self, path: &str, text: &str) {
        let p = self.dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "--quiet", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    fn clear(&self) {
        for entry in std::fs::read_dir(self.dir.path()).expect("read") {
            let entry = entry.expect("entry");
            if entry.file_name() == ".git" {
                continue;
            }
            if entry.file_type().expect("type").is_dir() {
                std::fs::remove_dir_all(entry.path()).expect("rm");
            } else {
                std::fs::remove_file(entry.path()).expect("rm");
            }
        }
    }
}

pub fn request(path: &Path) -> meshward::CheckRequest {
    meshward::CheckRequest {
        path: path.to_path_buf(),
        base: None,
        head: None,
        policy_dirs: Vec::new(),
        evidence: None,
        prometheus: None,
        fail_on: None,
        today: today(),
        render_all: false,
    }
}

pub fn check(req: &meshward::CheckRequest) -> Report {
    match meshward::check(req) {
        Ok(r) => r,
        Err(e) => panic!("check of {} failed: {e}", req.path.display()),
    }
}

pub fn check_dir(path: &Path) -> Report {
    check(&request(path))
}

pub fn check_change(repo: &GitRepo, base: &str, head: &str) -> Report {
    let mut req = request(&repo.path());
    req.base = Some(base.to_string());
    req.head = Some(head.to_string());
    check(&req)
}

pub fn with_rule<'a>(report: &'a Report, rule: &str) -> Vec<&'a Finding> {
    report.findings.iter().filter(|f| f.rule == rule).collect()
}

pub fn rules_with_status(report: &Report, status: Status) -> Vec<String> {
    let mut v: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.status == status)
        .map(|f| f.rule.clone())
        .collect();
    v.sort();
    v
}

pub fn fail_on(report: &Report) -> FailOn {
    report.summary.fail_on
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}
