//! The binary as a user runs it: exit codes, messages on stderr, no panics.

use crate::common;

use assert_cmd::Command;
use common::*;
use predicates::prelude::*;

fn meshward() -> Command {
    Command::cargo_bin("meshward").expect("binary")
}

#[test]
fn clean_tree_exits_0() {
    let repo = GitRepo::new();
    repo.write("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {istio-injection: enabled}\n");
    meshward()
        .arg("check")
        .arg(repo.path())
        .assert()
        .code(0)
        .stdout(predicate::str::contains("PASS"));
}

#[test]
fn blocking_findings_exit_1_and_fail_on_never_exits_0() {
    let dir = fixtures().join("rules/serviceentry__none-with-endpoints/fail");
    meshward()
        .arg("check")
        .arg(&dir)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("serviceentry/none-with-endpoints"));
    meshward()
        .arg("check")
        .arg(&dir)
        .args(["--fail-on", "never"])
        .assert()
        .code(0);
}

#[test]
fn warnings_block_only_with_fail_on_warning() {
    let repo = GitRepo::new();
    repo.write(
        "we.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: vm\n  labels: {istio-injection: enabled}\n---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata:\n  name: vm-1\n  namespace: vm\n  labels: {app: reports}\nspec:\n  address: 10.0.0.5\n",
    );
    meshward()
        .arg("check")
        .arg(repo.path())
        .assert()
        .code(0)
        .stdout(predicate::str::contains("workloadentry/unselected"));
    meshward()
        .arg("check")
        .arg(repo.path())
        .args(["--fail-on", "warning"])
        .assert()
        .code(1);
}

#[test]
fn unreadable_input_exits_2_without_a_panic() {
    meshward()
        .args(["check", "/nonexistent/meshward-test"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("/nonexistent/meshward-test")
                .and(predicate::str::contains("panicked").not()),
        );
}

#[test]
fn bad_usage_exits_2() {
    meshward()
        .args(["check", "--format", "pdf"])
        .assert()
        .code(2);
    meshward()
        .args(["check", ".", "--head", "HEAD"])
        .assert()
        .code(2);
}

#[test]
fn unknown_revision_exits_2() {
    let repo = GitRepo::new();
    repo.commit_files(&[("a.yaml", "a: 1\n")], "one");
    meshward()
        .arg("check")
        .arg(repo.path())
        .args(["--base", "no-such-branch"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no-such-branch"));
}

#[test]
fn config_errors_name_the_key_and_line() {
    let repo = GitRepo::new();
    repo.write(
        ".meshward.yaml",
        "fail_on: error\npaths:\n  includes: [\"apps/**\"]\n",
    );
    meshward()
        .arg("check")
        .arg(repo.path())
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(".meshward.yaml:3").and(predicate::str::contains("includes")),
        );
}

#[test]
fn bad_evidence_file_exits_2_naming_it() {
    let repo = GitRepo::new();
    repo.write(
        "evidence.json",
        "{\"namespaces\": {\"shop\": {\"requests_totl\": 3}}}",
    );
    meshward()
        .arg("check")
        .arg(repo.path())
        .arg("--evidence")
        .arg(repo.path().join("evidence.json"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("evidence.json")
                .and(predicate::str::contains("requests_totl")),
        );
}

#[test]
fn output_file_and_json_format() {
    let dir = fixtures().join("rules/serviceentry__none-with-endpoints/fail");
    let out = tempfile::tempdir().expect("tmp");
    let file = out.path().join("report.json");
    meshward()
        .arg("check")
        .arg(&dir)
        .args(["--format", "json", "-o"])
        .arg(&file)
        .assert()
        .code(1);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("written")).expect("json");
    assert_eq!(json["summary"]["verdict"], "fail");
    assert!(json["coverage"]["base"].is_null());
    let f = &json["findings"][0];
    for key in [
        "rule", "severity", "status", "resource", "file", "line", "message",
    ] {
        assert!(!f[key].is_null(), "finding lacks {key}: {f}");
    }
}

#[test]
fn policy_test_command_reports_counts() {
    meshward()
        .args(["policy", "test"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(" passed, 0 failed"));
}

#[test]
fn policy_test_command_fails_on_a_failing_test() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("p.rego"),
        "package t\n\nimport rego.v1\n\nx := 1\n",
    )
    .expect("w");
    // Tests in a subfolder are found too.
    std::fs::create_dir_all(dir.path().join("tests")).expect("mkdir");
    std::fs::write(dir.path().join("tests/p_test.rego"), "package t_test\n\nimport rego.v1\n\ntest_ok if data.t.x == 1\n\ntest_bad if data.t.x == 2\n").expect("w");
    meshward()
        .args(["policy", "test"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("FAIL")
                .and(predicate::str::contains("test_bad"))
                .and(predicate::str::contains("1 passed, 1 failed")),
        );
}

#[test]
fn sarif_paths_are_from_the_repository_root_when_a_subfolder_is_checked() {
    let repo = GitRepo::new();
    let fail = fixtures().join("rules/serviceentry__none-with-endpoints/fail");
    std::fs::create_dir_all(repo.path().join("clusters/prod")).expect("mkdir");
    copy_tree(&fail, &repo.path().join("clusters/prod"));
    repo.commit("prod");
    let out = meshward()
        .arg("check")
        .arg(repo.path().join("clusters/prod"))
        .args(["--format", "sarif", "--fail-on", "never"])
        .output()
        .expect("runs");
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sarif");
    let uris: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str())
        .collect();
    assert!(!uris.is_empty());
    for uri in uris {
        assert!(uri.starts_with("clusters/prod/"), "{uri}");
        assert!(repo.path().join(uri).is_file(), "{uri}");
    }
}
