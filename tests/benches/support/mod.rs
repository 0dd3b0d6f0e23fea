//! Helpers shared by the benchmarks: writing generated trees, committing them, medians.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

pub fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Where a bench generates its repository: `MESHWARD_BENCH_DIR` keeps it for
/// profiling, else `tmp`, removed with it.
pub fn work_dir(tmp: &tempfile::TempDir) -> PathBuf {
    let root = std::env::var_os("MESHWARD_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&root).expect("bench dir");
    root
}
