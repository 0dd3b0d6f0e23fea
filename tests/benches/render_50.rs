//! Benchmark: a change touching 1 of 50 kustomize overlays, checked with affected-root
//! selection (1 root rendered per revision) and with `--render-all` (50 per revision).
//! `cargo bench --bench render_50`; under `cargo test` a small smoke run.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use support::{git, median, work_dir, write};

fn overlay(root: &Path, i: usize, replicas: usize) {
    write(
        root,
        &format!("overlays/env-{i:02}/kustomization.yaml"),
        &format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: env-{i:02}\nresources:\n  - ../../base\npatches:\n  - path: replicas.yaml\n"),
    );
    write(
        root,
        &format!("overlays/env-{i:02}/replicas.yaml"),
        &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-00\nspec:\n  replicas: {replicas}\n"),
    );
}

fn generate(root: &Path, overlays: usize) {
    git(root, &["init", "--quiet"]);
    let mut resources = String::from(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for a in 0..20 {
        resources.push_str(&format!("  - app-{a:02}.yaml\n"));
        write(
            root,
            &format!("base/app-{a:02}.yaml"),
            &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{a:02}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: app-{a:02}}}\n  template:\n    metadata:\n      labels: {{app: app-{a:02}}}\n    spec:\n      containers:\n        - name: app\n          image: registry.example.com/app-{a:02}:1.0.0\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app-{a:02}\nspec:\n  selector: {{app: app-{a:02}}}\n  ports: [{{name: http, port: 80}}]\n"),
        );
    }
    write(root, "base/kustomization.yaml", &resources);
    for i in 0..overlays {
        overlay(root, i, 3);
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "base"]);
    overlay(root, 7 % overlays, 5);
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "scale one environment"]);
    git(root, &["repack", "-a", "-d", "-q"]);
}

fn run(bin: &Path, repo: &Path, all: bool) -> f64 {
    let start = Instant::now();
    let mut cmd = Command::new(bin);
    cmd.arg("check").arg(repo).args([
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--format",
        "json",
        "-o",
        "/dev/null",
    ]);
    if all {
        cmd.arg("--render-all");
    }
    let status = cmd.status().expect("run meshward");
    assert!(
        status.code().is_some_and(|c| c <= 1),
        "meshward failed: {status}"
    );
    start.elapsed().as_secs_f64()
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let bin = Path::new(env!("CARGO_BIN_EXE_meshward"));
    let dir = tempfile::tempdir().expect("tmp");
    let root = work_dir(&dir);
    let (overlays, runs) = if bench { (50, 5) } else { (3, 1) };
    generate(&root, overlays);
    let touched: Vec<f64> = (0..runs).map(|_| run(bin, &root, false)).collect();
    let all: Vec<f64> = (0..runs).map(|_| run(bin, &root, true)).collect();
    println!(
        "render_{overlays}: change touching 1 of {overlays} overlays, {runs} runs: affected roots only median {:.3} s; --render-all median {:.3} s ({:.1}x)",
        median(touched.clone()),
        median(all.clone()),
        median(all) / median(touched)
    );
}
