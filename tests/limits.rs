//! Hostile input: every limit gives a clear finding, and the other files are still
//! checked.

use crate::common;

use common::*;

const BAD_SE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: egress\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: api\n  namespace: egress\nspec:\n  hosts: [api.example.com]\n  resolution: NONE\n  ports:\n  - {number: 443, name: https, protocol: TLS}\n  endpoints:\n  - address: 203.0.113.10\n";

fn assert_rest_checked(report: &meshward::report::Report) {
    assert_eq!(
        with_rule(report, "serviceentry/none-with-endpoints").len(),
        1,
        "the good file's findings survive: {:#?}",
        report.findings
    );
}

#[test]
fn alias_bomb() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    let mut bomb = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for i in 0..9 {
        let prev = if i == 0 {
            "a".to_string()
        } else {
            format!("a{}", i - 1)
        };
        bomb.push_str(&format!("  a{i}: &a{i} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
    }
    repo.write("bomb.yaml", &bomb);
    let report = check_dir(&repo.path());
    let limit = with_rule(&report, "manifest/limit-exceeded");
    assert_eq!(limit.len(), 1);
    assert_eq!(limit[0].file, "bomb.yaml");
    assert!(limit[0].message.contains("aliases"));
    assert_rest_checked(&report);
}

/// Few nodes, much text: a 1 MiB anchored string repeated 3,000 times would ask for
/// 3 GB. The node count stays far under its limit, so the text is what must be
/// bounded.
#[test]
fn alias_bomb_of_long_strings() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    let mut bomb = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: lol}}\ndata:\n  a: &a \"{}\"\n  b: [",
        "x".repeat(1024 * 1024)
    );
    bomb.push_str(&vec!["*a"; 3000].join(","));
    bomb.push_str("]\n");
    repo.write("bomb.yaml", &bomb);
    let report = check_dir(&repo.path());
    let limit = with_rule(&report, "manifest/limit-exceeded");
    assert_eq!(limit.len(), 1);
    assert_eq!(limit[0].file, "bomb.yaml");
    assert!(
        limit[0].message.contains("MiB of text"),
        "{}",
        limit[0].message
    );
    assert_rest_checked(&report);
}

#[test]
fn deep_nesting() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    let depth = 10_000;
    repo.write(
        "deep.yaml",
        &format!("a: {}1{}\n", "[".repeat(depth), "]".repeat(depth)),
    );
    let report = check_dir(&repo.path());
    let limit = with_rule(&report, "manifest/limit-exceeded");
    assert_eq!(limit.len(), 1, "{:#?}", report.findings);
    assert!(limit[0].message.contains("nests deeper"));
    assert_rest_checked(&report);
}

#[test]
fn oversized_file() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    let big = "# padding\n".repeat(500_000);
    repo.write("big.yaml", &big);
    let report = check_dir(&repo.path());
    let limit = with_rule(&report, "manifest/limit-exceeded");
    assert_eq!(limit.len(), 1);
    assert_eq!(limit[0].file, "big.yaml");
    assert_rest_checked(&report);
}

#[test]
fn too_many_documents() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    repo.write("many.yaml", &"---\na: 1\n".repeat(25_000));
    let report = check_dir(&repo.path());
    let limit = with_rule(&report, "manifest/limit-exceeded");
    assert_eq!(limit.len(), 1);
    assert!(limit[0].message.contains("documents"));
    assert_rest_checked(&report);
}

#[test]
fn parse_error_names_file_and_line_and_keeps_the_rest() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    repo.write(
        "broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  key: [unclosed\n",
    );
    let report = check_dir(&repo.path());
    let errors = with_rule(&report, "manifest/parse-error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].file, "broken.yaml");
    assert!(errors[0].line >= 6, "line {}", errors[0].line);
    assert_rest_checked(&report);
}

#[test]
fn binary_and_non_kubernetes_yaml() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    repo.write("values.yaml", "replicaCount: 2\n");
    repo.write(".github/workflows/ci.yaml", "on: push\njobs: {}\n");
    std::fs::write(repo.path().join("blob.yaml"), [0xff, 0xfe, 0x00, 0x41]).expect("write");
    let report = check_dir(&repo.path());
    assert_eq!(report.summary.head.skipped_documents, 1);
    assert_eq!(report.summary.head.files_not_read, 1);
    assert_eq!(
        with_rule(&report, "manifest/parse-error")[0].file,
        "blob.yaml"
    );
    assert_rest_checked(&report);
}

#[cfg(unix)]
#[test]
fn symlinks_are_not_followed() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    let outside = tempfile::tempdir().expect("tmp");
    std::fs::write(
        outside.path().join("secret.yaml"),
        BAD_SE.replace("api", "secret"),
    )
    .expect("w");
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        repo.path().join("link.yaml"),
    )
    .expect("symlink");
    let report = check_dir(&repo.path());
    let links = with_rule(&report, "manifest/symlink-not-followed");
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].file, "link.yaml");
    assert_rest_checked(&report);
}

/// A chart whose template allocates without bound dies at the memory limit, fast,
/// and is said; the check (this process) goes on.
#[test]
fn a_chart_that_allocates_without_bound_is_stopped_and_said() {
    assert!(
        meshward::render::memory_limit(),
        "tools run under an address-space limit on Linux"
    );
    let repo = GitRepo::new();
    repo.write(
        "charts/bomb/Chart.yaml",
        "apiVersion: v2\nname: bomb\nversion: 0.1.0\n",
    );
    repo.write(
        "charts/bomb/templates/bomb.yaml",
        "{{- range until 200000000 }}\n# {{ . }}\n{{- end }}\n",
    );
    let started = std::time::Instant::now();
    let report = check_dir(&repo.path());
    let stopped = with_rule(&report, "render/limit-exceeded");
    assert_eq!(stopped.len(), 1, "{:#?}", report.findings);
    assert!(
        stopped[0].message.contains("MiB of memory"),
        "{}",
        stopped[0].message
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(45),
        "stopped by memory, not by the 60 s timer: {:?}",
        started.elapsed()
    );
}
