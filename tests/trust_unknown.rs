//! What the repository does not say is unknown, not false; rules about a change fire
//! only on a change; IST0123 is reported as istioctl reports it. Each test checks one
//! fixture of tests/fixtures/trust-unknown/ the way a user would run meshward on it.

use crate::common;

use common::*;
use meshward::finding::{Severity, Status};
use meshward::report::{Report, Verdict};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    fixtures().join("trust-unknown").join(name)
}

fn rules(report: &Report) -> Vec<&str> {
    report.findings.iter().map(|f| f.rule.as_str()).collect()
}

/// A work tree holding a fixture, to add a `.meshward.yaml` to or edit.
fn copy_of(name: &str) -> GitRepo {
    let repo = GitRepo::new();
    copy_tree(&fixture(name), &repo.path());
    repo
}

#[test]
fn an_undeclared_namespace_is_said_to_be_unknown_not_uninjected() {
    let report = check_dir(&fixture("undeclared-namespace"));
    let all = rules(&report);
    for rule in [
        "injection/namespace-not-injected",
        "mtls/strict-unenforced-workloads",
        "selector/matches-nothing",
    ] {
        assert!(!all.contains(&rule), "{rule} claimed a fact: {all:?}");
    }
    let unknown = with_rule(&report, "injection/namespace-unknown");
    assert_eq!(unknown.len(), 1, "{all:?}");
    let f = unknown[0];
    assert!(
        f.message
            .starts_with("Namespace payments is not declared in this repository"),
        "{}",
        f.message
    );
    assert!(f.message.contains("whether it is injected is unknown"));
    assert!(f.message.contains("mesh.namespaces"));
    // A STRICT PeerAuthentication covers it: what is at stake is said, as a warning.
    assert_eq!(f.severity, Severity::Warning);
    assert!(f
        .message
        .contains("PeerAuthentication payments/default requires STRICT"));
    assert_eq!(f.file, "manifests.yaml");
    assert_eq!(report.summary.verdict, Verdict::Pass);

    let api = report
        .models
        .head
        .workloads
        .iter()
        .find(|w| w.id == "Deployment/payments/api")
        .expect("workload");
    assert!(!api.proxy_known, "{api:?}");
    let ns = &report.models.head.namespaces["payments"];
    assert_eq!(ns.injection.enabled, None);
    // Not counted as injected, nor as a selector that selects nothing.
    assert_eq!(report.coverage.head.total.namespaces_injected, 0);
    assert_eq!(report.coverage.head.total.selectors_ineffective, 0);
}

#[test]
fn mesh_namespaces_declares_the_labels_of_namespaces_managed_elsewhere() {
    // Known to have no injection label: now the facts are facts.
    let repo = copy_of("undeclared-namespace");
    repo.write(
        ".meshward.yaml",
        "mesh:\n  namespaces:\n    payments:\n      labels: {team: payments}\n",
    );
    let report = check_dir(&repo.path());
    let all = rules(&report);
    assert!(!all.contains(&"injection/namespace-unknown"), "{all:?}");
    let not_injected = with_rule(&report, "injection/namespace-not-injected");
    assert_eq!(not_injected.len(), 1, "{all:?}");
    assert!(
        not_injected[0]
            .message
            .contains("in mesh.namespaces of .meshward.yaml"),
        "{}",
        not_injected[0].message
    );
    // No object here holds the labels: the finding points at the workload.
    assert_eq!(not_injected[0].file, "manifests.yaml");
    assert!(all.contains(&"mtls/strict-unenforced-workloads"), "{all:?}");

    // Known to be injected: nothing to say.
    repo.write(
        ".meshward.yaml",
        "mesh:\n  namespaces:\n    payments:\n      labels: {istio-injection: enabled}\n",
    );
    let report = check_dir(&repo.path());
    let all = rules(&report);
    for rule in [
        "injection/namespace-unknown",
        "injection/namespace-not-injected",
        "mtls/strict-unenforced-workloads",
    ] {
        assert!(!all.contains(&rule), "{rule}: {all:?}");
    }
    assert_eq!(report.coverage.head.total.workloads_with_proxy, 1);
    assert_eq!(report.coverage.head.total.namespaces_injected, 1);
}

#[test]
fn a_bad_mesh_namespaces_entry_names_the_key_and_its_line() {
    let repo = copy_of("undeclared-namespace");
    repo.write(
        ".meshward.yaml",
        "mesh:\n  namespaces:\n    payments:\n      lables: {istio-injection: enabled}\n",
    );
    let err = meshward::check(&request(&repo.path()))
        .expect_err("an unknown key is an error")
        .to_string();
    assert!(err.contains(".meshward.yaml:4"), "{err}");
    assert!(err.contains("lables"), "{err}");
}

#[test]
fn argo_cd_managed_namespace_metadata_counts_as_the_namespaces_labels() {
    let report = check_dir(&fixture("argocd-managed-namespace"));
    let all = rules(&report);
    assert!(!all.contains(&"injection/namespace-unknown"), "{all:?}");
    assert!(
        !all.contains(&"mtls/strict-unenforced-workloads"),
        "{all:?}"
    );
    let head = &report.models.head;
    assert_eq!(head.namespaces["payments"].injection.enabled, Some(true));
    assert!(head
        .workloads
        .iter()
        .any(|w| w.id == "Deployment/payments/api" && w.proxy));
    // The ApplicationSet's generated Application labels orders, without injection:
    // the finding points at the labels in its template.
    let not_injected = with_rule(&report, "injection/namespace-not-injected");
    assert_eq!(not_injected.len(), 1, "{all:?}");
    let f = not_injected[0];
    assert_eq!(f.file, "apps/orders.yaml");
    let text = std::fs::read_to_string(fixture("argocd-managed-namespace/apps/orders.yaml"))
        .expect("fixture");
    let line = text.lines().nth(f.line as usize - 1).expect("line");
    assert!(line.contains("labels:"), "line {}: {line:?}", f.line);
    assert!(
        f.message
            .contains("managedNamespaceMetadata of ApplicationSet argocd/teams"),
        "{}",
        f.message
    );

    // Without CreateNamespace=true Argo CD sets no labels: unknown again.
    let repo = copy_of("argocd-managed-namespace");
    let app = text_of(&repo, "apps/payments.yaml").replace(
        "      - CreateNamespace=true\n",
        "      - ServerSideApply=true\n",
    );
    repo.write("apps/payments.yaml", &app);
    let report = check_dir(&repo.path());
    let unknown = with_rule(&report, "injection/namespace-unknown");
    assert_eq!(unknown.len(), 1, "{:?}", rules(&report));
    assert!(unknown[0].message.contains("payments"));
}

fn text_of(repo: &GitRepo, path: &str) -> String {
    std::fs::read_to_string(repo.path().join(path)).expect("read")
}

#[test]
fn without_a_base_an_already_strict_namespace_is_not_a_change_to_judge() {
    let report = check_dir(&fixture("strict-already"));
    let all = rules(&report);
    assert!(!all.contains(&"mtls/strict-without-evidence"), "{all:?}");
    assert_eq!(report.summary.verdict, Verdict::Pass, "{all:?}");
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.contains("mtls/strict-without-evidence") && n.contains("not evaluated")),
        "{:?}",
        report.summary.notes
    );

    // The same STRICT as a change from PERMISSIVE: judged, and blocked without evidence.
    let repo = GitRepo::new();
    let strict =
        std::fs::read_to_string(fixture("strict-already/manifests.yaml")).expect("fixture");
    let base = repo.commit_files(
        &[(
            "manifests.yaml",
            &strict.replace("mode: STRICT", "mode: PERMISSIVE"),
        )],
        "permissive",
    );
    let head = repo.commit_files(&[("manifests.yaml", &strict)], "strict");
    let report = check_change(&repo, &base, &head);
    let fired = with_rule(&report, "mtls/strict-without-evidence");
    assert_eq!(fired.len(), 1, "{:?}", rules(&report));
    assert_eq!(fired[0].status, Status::Introduced);
    assert_eq!(report.summary.verdict, Verdict::Fail);

    // STRICT already in base: an unrelated change is not held up by it.
    let base = head;
    let head = repo.commit_files(
        &[(
            "manifests.yaml",
            &strict.replace("replicas: 2", "replicas: 3"),
        )],
        "scale",
    );
    let report = check_change(&repo, &base, &head);
    assert!(with_rule(&report, "mtls/strict-without-evidence").is_empty());
    assert_eq!(
        report.summary.verdict,
        Verdict::Pass,
        "{:?}",
        rules(&report)
    );
}

#[test]
fn declaring_a_namespace_that_was_there_all_along_is_not_turning_injection_on() {
    let repo = GitRepo::new();
    let dir = fixture("declare-existing-namespace");
    let base = repo.commit_dir(&dir.join("base"), "base");
    let head = repo.commit_dir(&dir.join("head"), "head");
    let report = check_change(&repo, &base, &head);
    let all = rules(&report);
    // Base did not say whether payments was injected: no claim that this change
    // turns injection on, or that STRICT skips an uninjected stage.
    assert!(!all.contains(&"injection/rollout-required"), "{all:?}");
    assert!(!all.contains(&"mtls/strict-skips-permissive"), "{all:?}");
    assert!(
        !all.contains(&"mtls/strict-unenforced-workloads"),
        "{all:?}"
    );
    // Turning STRICT on is a change, and still needs its evidence.
    assert!(all.contains(&"mtls/strict-without-evidence"), "{all:?}");
}

#[test]
fn ist0123_is_reported_as_istioctl_reports_it() {
    let report = check_dir(&fixture("ist0123"));
    let fired = with_rule(&report, "injection/conflicting-labels");
    let namespaces: Vec<String> = fired
        .iter()
        .filter_map(|f| f.resource.as_ref().map(|r| r.name.clone()))
        .collect();
    assert_eq!(namespaces, ["edge"], "{fired:?}");
    assert_eq!(fired[0].istio_code.as_deref(), Some("IST0123"));
    assert!(
        fired[0].message.contains("its pods get a sidecar"),
        "{}",
        fired[0].message
    );
}
