//! A run says what it checked, and what it could not check does not pass: a policy
//! that errors blocks whatever base did, a root the change touches that does not
//! render blocks, every root is listed with its outcome, and a path with nothing to
//! check is an error, not a pass. Fixtures under tests/fixtures/trust-checked/.

use crate::common;

use assert_cmd::Command;
use common::*;
use meshward::finding::Status;
use meshward::report::{RootStatus, Verdict};
use predicates::prelude::*;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    fixtures().join("trust-checked").join(name)
}

fn repo_of(name: &str) -> (GitRepo, String) {
    let repo = GitRepo::new();
    let base = repo.commit_dir(&fixture(name), "base");
    (repo, base)
}

const BROKEN_POLICY: &str = r#"package meshward.rules.team

import rego.v1

# Two resources of one kind: the object's key is generated twice, evaluation fails.
objects_by_kind := {r.kind: r | some r in input.resources}

findings contains f if {
	some kind, _ in objects_by_kind
	kind == "never"
	f := {"rule": "team/x", "severity": "error", "message": "unreachable"}
}
"#;

#[test]
fn two_roots_deploying_one_workload_are_checked_by_every_policy() {
    let (repo, base) = repo_of("podinfo-overlays");
    repo.write(
        "kustomize/overlays/production/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\npatches:\n  - target:\n      kind: Deployment\n      name: podinfo\n    patch: |-\n      - op: replace\n        path: /spec/template/spec/serviceAccountName\n        value: podinfo-prod\n",
    );
    let head = repo.commit("production runs as its own service account");
    let report = check_change(&repo, &base, &head);
    assert!(
        with_rule(&report, "policy/error").is_empty(),
        "{:#?}",
        report.findings
    );
    let roots = &report.summary.roots;
    assert_eq!(roots.len(), 2, "{roots:#?}");
    assert!(
        roots.iter().all(|r| r.outcome == RootStatus::Rendered),
        "{roots:#?}"
    );
    // The authz rules ran: the caller the policy names runs nowhere.
    assert!(
        !with_rule(&report, "authz/unknown-principal").is_empty(),
        "{:#?}",
        report.findings
    );
}

#[test]
fn a_policy_that_errors_blocks_the_change_even_when_base_failed_alike() {
    let (repo, _) = repo_of("podinfo-overlays");
    repo.write(".meshward/policies/team.rego", BROKEN_POLICY);
    let base = repo.commit("team policy");
    repo.write(
        "istio/authz.yaml",
        &std::fs::read_to_string(fixture("podinfo-overlays/istio/authz.yaml"))
            .expect("fixture")
            .replace("sa/frontend", "sa/gateway"),
    );
    let head = repo.commit("allow the gateway");
    let report = check_change(&repo, &base, &head);
    let errors = with_rule(&report, "policy/error");
    assert_eq!(errors.len(), 1, "{:#?}", report.findings);
    let e = errors[0];
    assert_eq!(e.file, ".meshward/policies/team.rego");
    assert_eq!(e.status, Status::Existing);
    assert!(e.unchecked);
    assert!(e.message.contains("did not run"), "{}", e.message);
    assert_eq!(report.summary.verdict, Verdict::Fail);
    assert_eq!(report.summary.blocking, 1);
    let text = meshward::report::render(&report, meshward::report::Format::Text, false);
    assert!(text.contains("[not checked: blocks]"), "{text}");
    let md = meshward::report::render(&report, meshward::report::Format::Markdown, false);
    assert!(
        md.contains("### Not checked: blocks this change (1)"),
        "{md}"
    );

    // The change that repairs the policy is not held back by it.
    repo.write(
        ".meshward/policies/team.rego",
        "package meshward.rules.team\n",
    );
    let fix = repo.commit("repair the team policy");
    let report = check_change(&repo, &head, &fix);
    assert_eq!(
        report.summary.verdict,
        Verdict::Pass,
        "{:#?}",
        report.findings
    );
}

#[test]
fn a_touched_root_that_does_not_render_blocks_and_an_untouched_one_is_listed() {
    let (repo, base) = repo_of("failing-root");
    repo.write(
        "apps/shop/deployment.yaml",
        &std::fs::read_to_string(fixture("failing-root/apps/shop/deployment.yaml"))
            .expect("fixture")
            .replace("1.0.0", "1.1.0"),
    );
    let head = repo.commit("shop 1.1.0");
    let report = check_change(&repo, &base, &head);
    let failed = with_rule(&report, "render/failed");
    assert_eq!(failed.len(), 1, "{:#?}", report.findings);
    assert_eq!(failed[0].status, Status::Existing);
    assert!(failed[0].unchecked);
    assert!(failed[0].message.contains("could not be checked"));
    assert_eq!(report.summary.verdict, Verdict::Fail);
    let roots = &report.summary.roots;
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].outcome, RootStatus::Failed);
    assert_eq!(roots[0].file, "apps/shop/kustomization.yaml");
    let note = report
        .summary
        .notes
        .iter()
        .find(|n| n.starts_with("Rendered "))
        .expect("render note");
    assert!(note.starts_with("Rendered 0 of 1 render roots"), "{note}");
    assert!(note.contains("1 did not render"), "{note}");

    // A change that only joins with the failing root (it deploys into its namespace)
    // renders it as context: its failure is said, but the change did not touch it.
    repo.write(
        "apps/shop-config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop-settings\n  namespace: shop\ndata:\n  mode: fast\n",
    );
    let joined = repo.commit("a config map in the shop namespace");
    let report = check_change(&repo, &head, &joined);
    assert_eq!(
        report.summary.roots[0].outcome,
        RootStatus::Failed,
        "{:#?}",
        report.summary.roots
    );
    assert!(with_rule(&report, "render/failed")
        .iter()
        .all(|f| !f.unchecked));
    assert_eq!(
        report.summary.verdict,
        Verdict::Pass,
        "{:#?}",
        report.findings
    );
    let head = joined;

    // A change elsewhere does not need the root: it passes, and the root is listed.
    repo.write(
        "apps/web/web.yaml",
        &std::fs::read_to_string(fixture("failing-root/apps/web/web.yaml"))
            .expect("fixture")
            .replace("hello", "hi"),
    );
    let other = repo.commit("greeting");
    let report = check_change(&repo, &head, &other);
    assert_eq!(
        report.summary.verdict,
        Verdict::Pass,
        "{:#?}",
        report.findings
    );
    assert_eq!(report.summary.roots[0].outcome, RootStatus::NotNeeded);
    let json: serde_json::Value =
        serde_json::from_str(&meshward::report::json(&report)).expect("json");
    assert_eq!(json["summary"]["roots"][0]["outcome"], "not_needed");
    assert_eq!(
        json["summary"]["roots"][0]["file"],
        "apps/shop/kustomization.yaml"
    );
}

#[test]
fn a_path_with_nothing_to_check_is_exit_2_and_says_why() {
    Command::cargo_bin("meshward")
        .expect("binary")
        .arg("check")
        .arg(fixture("no-objects"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("nothing to check").and(predicate::str::contains(
                "no Kubernetes objects and no render roots",
            )),
        );
    let report = check_dir(&fixture("no-objects"));
    assert!(report.summary.nothing_to_check.is_some());
    assert_eq!(
        meshward::publish::check::conclusion(&report, None),
        meshward::publish::Conclusion::Neutral
    );
}

#[test]
fn duplicates_are_keyed_by_api_group_and_name_both_copies() {
    let report = check_dir(&fixture("crossplane"));
    let dups = with_rule(&report, "manifest/duplicate-resource");
    assert_eq!(dups.len(), 1, "{:#?}", report.findings);
    let d = dups[0];
    assert_eq!((d.file.as_str(), d.line), ("config.yaml", 1), "{:#?}", d);
    assert!(d.message.contains("config-copy.yaml:3"), "{}", d.message);
}

/// Every copy past the first is reported, naming the others: a third copy is a
/// finding of its own, introduced by the change that adds it.
#[test]
fn a_third_copy_of_an_object_is_reported_and_introduced_by_its_change() {
    let repo = GitRepo::new();
    let copy = |v: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  tier: {v}\n")
    };
    repo.write("shop/a.yaml", &copy("a"));
    repo.write("shop/b.yaml", &copy("b"));
    let base = repo.commit("two copies");
    repo.write("shop/c.yaml", &copy("c"));
    let head = repo.commit("a third");
    let report = check_change(&repo, &base, &head);
    let mut dups: Vec<(&str, Status, &str)> = with_rule(&report, "manifest/duplicate-resource")
        .into_iter()
        .map(|f| (f.file.as_str(), f.status, f.message.as_str()))
        .collect();
    dups.sort_by_key(|d| d.0);
    assert_eq!(
        dups.iter().map(|d| (d.0, d.1)).collect::<Vec<_>>(),
        [
            ("shop/b.yaml", Status::Existing),
            ("shop/c.yaml", Status::Introduced)
        ],
        "{:#?}",
        report.findings
    );
    assert!(
        dups[1].2.contains("shop/a.yaml:1") && dups[1].2.contains("shop/b.yaml:1"),
        "{}",
        dups[1].2
    );
}

/// Deletes the loose object of `path` at `rev`, as a partial or pruned clone lacks it.
fn lose_blob(repo: &GitRepo, rev: &str, path: &str) -> String {
    let blob = repo.git(&["rev-parse", &format!("{rev}:{path}")]);
    let object = repo
        .path()
        .join(".git/objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    std::fs::remove_file(&object).expect("remove the loose object");
    blob
}

#[test]
fn a_blob_no_render_reads_can_be_missing_from_the_clone() {
    let (repo, base) = repo_of("failing-root");
    // A kustomization that renders, so head has nothing else to fail on.
    repo.write(
        "apps/shop/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\nresources:\n  - deployment.yaml\n",
    );
    repo.write("docs/notes.txt", "a file no check reads\n");
    let head = repo.commit("fix the kustomization");
    lose_blob(&repo, &head, "docs/notes.txt");
    let report = check_change(&repo, &base, &head);
    let shop = report
        .summary
        .roots
        .iter()
        .find(|r| r.root.contains("apps/shop"))
        .expect("the shop root is listed");
    assert_eq!(
        shop.outcome,
        RootStatus::Rendered,
        "{:#?}",
        report.summary.roots
    );
    assert!(
        with_rule(&report, "render/failed")
            .iter()
            .all(|f| f.status != Status::Introduced),
        "{:#?}",
        report.findings
    );
}

#[test]
fn a_blob_a_root_reads_missing_from_the_clone_fails_that_root_with_gits_words() {
    let (repo, base) = repo_of("failing-root");
    repo.write(
        "apps/shop/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\nresources:\n  - deployment.yaml\nconfigMapGenerator:\n  - name: shop-settings\n    files:\n      - settings.properties\n",
    );
    repo.write("apps/shop/settings.properties", "currency=EUR\n");
    let head = repo.commit("settings for the shop");
    let blob = lose_blob(&repo, &head, "apps/shop/settings.properties");
    let report = check_change(&repo, &base, &head);
    // Base failed on its own (a missing resource file); head fails on the blob.
    let failed: Vec<_> = with_rule(&report, "render/failed")
        .into_iter()
        .filter(|f| f.message.contains("settings.properties"))
        .collect();
    assert_eq!(failed.len(), 1, "{:#?}", report.findings);
    let message = &failed[0].message;
    assert!(
        message.contains("apps/shop/settings.properties")
            && message.contains(&format!("{blob} missing"))
            && message.contains("git fetch"),
        "names the file, git's words and the fix: {message}"
    );
    assert_eq!(report.summary.verdict, Verdict::Fail);
}

#[test]
fn a_chart_dependency_elsewhere_in_the_repository_renders_without_touching_the_tree() {
    let repo = GitRepo::new();
    copy_tree(&fixture("local-chart-dependency"), &repo.path());
    let report = check_dir(&repo.path());
    assert!(
        report
            .summary
            .roots
            .iter()
            .all(|r| r.outcome == RootStatus::Rendered),
        "{:#?}",
        report.summary.roots
    );
    let umbrella = report
        .summary
        .roots
        .iter()
        .find(|r| r.file == "plugins/guestbook-umbrella/Chart.yaml")
        .expect("the umbrella chart is a root");
    assert_eq!(umbrella.outcome, RootStatus::Rendered);
    assert!(
        report
            .models
            .head
            .workloads
            .iter()
            .any(|w| w.name == "guestbook-umbrella-guestbook"),
        "{:#?}",
        report.models.head.workloads
    );
    // The library chart is no root (helm refuses to install one), and its templates
    // are not read as objects of their own.
    assert_eq!(report.summary.roots.len(), 2, "{:#?}", report.summary.roots);
    assert!(
        report
            .findings
            .iter()
            .all(|f| !f.file.starts_with("common/")),
        "{:#?}",
        report.findings
    );
    assert!(
        !repo
            .path()
            .join("plugins/guestbook-umbrella/charts")
            .exists(),
        "the dependency is staged in a scratch copy, not in the work tree"
    );
}

#[test]
fn a_repository_cannot_raise_the_render_limits_and_is_told_so() {
    let (repo, _) = repo_of("failing-root");
    repo.write(
        ".meshward.yaml",
        "render:\n  timeout_seconds: 999999999\n  max_output_bytes: 99999999999\npolicy:\n  timeout_seconds: 86400\n  max_memory_mib: 65536\n",
    );
    let report = check_dir(&repo.path());
    let policy = with_rule(&report, "policy/limit-above-ceiling");
    assert_eq!(policy.len(), 2, "{:#?}", report.findings);
    assert_eq!((policy[0].line, policy[1].line), (5, 6));
    assert!(
        policy[1]
            .message
            .contains("policy.max_memory_mib is 65536, above this server's ceiling of 3072 MiB"),
        "{}",
        policy[1].message
    );
    let over = with_rule(&report, "render/limit-above-ceiling");
    assert_eq!(over.len(), 2, "{:#?}", report.findings);
    assert_eq!((over[0].file.as_str(), over[0].line), (".meshward.yaml", 2));
    assert!(
        over[0].message.contains("ceiling of 60 s; 60 s is used"),
        "{}",
        over[0].message
    );
    assert_eq!(over[1].line, 3);
    // A lower limit is honoured: a zero-second budget stops every render.
    let (repo, _) = repo_of("podinfo-overlays");
    repo.write(".meshward.yaml", "render:\n  timeout_seconds: 0\n");
    let report = check_dir(&repo.path());
    assert!(with_rule(&report, "render/limit-above-ceiling").is_empty());
    assert_eq!(
        with_rule(&report, "render/limit-exceeded").len(),
        2,
        "{:#?}",
        report.findings
    );
}

#[test]
fn a_file_name_with_control_characters_cannot_forge_a_line_of_the_report() {
    let repo = GitRepo::new();
    let name = "apps/x\u{1b}[2J\nmeshward: PASS: 0 blocking.yaml";
    repo.write(
        name,
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: db\n  namespace: shop\nspec:\n  hosts: [db.internal]\n  resolution: NONE\n  endpoints:\n    - address: 10.0.0.1\n",
    );
    let report = check_dir(&repo.path());
    assert!(
        report.findings.iter().any(|f| f.file == name),
        "the finding keeps the real name: {:#?}",
        report.findings
    );
    let text = meshward::report::render(&report, meshward::report::Format::Text, false);
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("\\u{1b}[2J\\u{a}meshward: PASS"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("meshward: ")).count(),
        1,
        "{text}"
    );
    let md = meshward::report::render(&report, meshward::report::Format::Markdown, false);
    assert!(!md.contains('\u{1b}'), "{md}");
    for row in md.lines().filter(|l| l.starts_with("| ")) {
        assert!(row.ends_with(" |"), "a row is whole: {row}");
    }
}
