//! Only cluster objects are checked as cluster objects: CI configs and dot-files are
//! not manifests, tools' own config documents are skipped and counted, IstioOperator
//! is install input, `generateName` is a name, and hooks are not mesh workloads.
//! Each fixture under tests/fixtures/trust/ is shaped like a public GitOps repository.

use crate::common;

use assert_cmd::Command;
use common::*;
use meshward::finding::Status;
use predicates::prelude::*;
use std::path::PathBuf;

fn trust(name: &str) -> PathBuf {
    fixtures().join("trust").join(name)
}

fn rules(report: &meshward::report::Report) -> Vec<&str> {
    report.findings.iter().map(|f| f.rule.as_str()).collect()
}

#[test]
fn ci_configs_and_dot_files_are_not_read_as_manifests() {
    let report = check_dir(&trust("ci-files"));
    assert!(
        report.findings.is_empty(),
        "nothing deployed here is wrong: {:?}",
        report.findings
    );
    let head = &report.summary.head;
    // clusters/production/shop.yaml, skaffold.yaml, hack/kubeconfig.yaml.
    assert_eq!(head.files, 3, "{head:?}");
    // .fluxschema.yml, .gitlab-ci.yml, .pre-commit-config.yaml, azure-pipelines.yml
    // and the three files under .github/.
    assert_eq!(head.files_not_read, 7, "{head:?}");
    // The skaffold config and the kubeconfig look like objects but are not.
    assert_eq!(head.skipped_documents, 2, "{head:?}");
    assert_eq!(head.resources, 2, "{head:?}");
}

#[test]
fn the_cli_passes_on_a_repository_with_ci_files_and_says_what_it_left_out() {
    Command::cargo_bin("meshward")
        .expect("binary")
        .arg("check")
        .arg(trust("ci-files"))
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("PASS")
                .and(predicate::str::contains(
                    "2 documents that are not cluster objects skipped; 7 dot-files and CI configs not read as manifests",
                ))
                .and(predicate::str::contains("manifest/invalid-object").not()),
        );
}

#[test]
fn paths_include_opts_a_dot_folder_in_when_it_names_it() {
    let repo = GitRepo::new();
    copy_tree(&trust("ci-files"), &repo.path());
    // A catch-all glob does not reach into dot-folders...
    repo.write(".meshward.yaml", "paths:\n  include: [\"**/*.yaml\"]\n");
    let report = check_dir(&repo.path());
    assert!(
        with_rule(&report, "serviceentry/none-with-endpoints").is_empty(),
        "{:?}",
        rules(&report)
    );
    // ...a glob that names one does.
    repo.write(
        ".meshward.yaml",
        "paths:\n  include: [\"clusters/**\", \".github/e2e/**\"]\n",
    );
    let report = check_dir(&repo.path());
    let found = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(found.len(), 1, "{:?}", rules(&report));
    assert_eq!(found[0].file, ".github/e2e/serviceentry.yaml");
    assert_eq!(report.summary.head.files, 2);
}

fn hooks_report() -> meshward::report::Report {
    let dir = trust("argo-hooks");
    let mut req = request(&dir);
    req.evidence = Some(dir.join("evidence.json"));
    check(&req)
}

#[test]
fn generate_name_is_a_name_and_hooks_are_not_workloads() {
    let report = hooks_report();
    assert!(
        report.findings.is_empty(),
        "hooks are neither invalid objects nor unproxied workloads under STRICT: {:?}",
        report.findings
    );
    assert_eq!(report.summary.verdict, meshward::report::Verdict::Pass);
    // The two Jobs named by the API server are objects with a marked identity, and
    // sharing a prefix does not make them duplicates.
    let generated: Vec<&String> = report
        .models
        .head_resources
        .iter()
        .filter(|id| *id == "Job/shop/schema-migrate-*")
        .collect();
    assert_eq!(generated.len(), 2, "{:?}", report.models.head_resources);
    // Only the Deployment is a workload of the mesh; the STRICT scope holds it alone.
    let workloads: Vec<&str> = report
        .models
        .head
        .workloads
        .iter()
        .map(|w| w.id.as_str())
        .collect();
    assert_eq!(workloads, ["Deployment/shop/frontend"]);
    assert_eq!(report.coverage.head.total.workloads, 1);
    assert_eq!(report.coverage.head.total.workloads_with_proxy, 1);
}

#[test]
fn a_generated_name_keeps_its_identity_from_base_to_head() {
    let repo = GitRepo::new();
    copy_tree(&trust("argo-hooks"), &repo.path());
    let base = repo.commit("base");
    let path = repo.path().join("apps/shop/frontend.yaml");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replace("frontend:3.1.0", "frontend:3.2.0")).expect("write");
    let head = repo.commit("head");
    let mut req = request(&repo.path());
    req.base = Some(base);
    req.head = Some(head);
    req.evidence = Some(trust("argo-hooks").join("evidence.json"));
    let report = check(&req);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert!(report
        .models
        .head_resources
        .iter()
        .any(|id| id == "Job/shop/schema-migrate-*"));
    assert_eq!(
        report.models.changed.iter().collect::<Vec<_>>(),
        ["Deployment/shop/frontend"]
    );
}

#[test]
fn istio_operator_is_install_input_whose_trust_domain_is_used() {
    let repo = GitRepo::new();
    let base = repo.commit_dir(&trust("istio-install").join("base"), "base");
    let head = repo.commit_dir(&trust("istio-install").join("head"), "head");
    let report = check_change(&repo, &base, &head);
    assert!(
        with_rule(&report, "manifest/invalid-object").is_empty(),
        "{:?}",
        report.findings
    );
    // The policy names web by its SPIFFE identity in the trust domain istioctl
    // installs: moving web to another service account locks it out of cart.
    let changed = with_rule(&report, "authz/identity-change");
    assert_eq!(changed.len(), 1, "{:?}", rules(&report));
    assert_eq!(changed[0].status, Status::Introduced);
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.contains("example.org") && n.contains("istio/istio-spire-config.yaml:8")),
        "{:?}",
        report.summary.notes
    );
    // Not an object of the cluster: skipped and counted, in both revisions.
    assert!(!report
        .models
        .head_resources
        .iter()
        .any(|id| id.starts_with("IstioOperator")));
    assert_eq!(report.summary.head.skipped_documents, 1);
    let changes = report.changes.as_ref().expect("a change report");
    assert!(
        changes
            .identities
            .iter()
            .any(|i| i.spiffe_id == "spiffe://example.org/ns/shop/sa/web-frontend"),
        "{:?}",
        changes.identities
    );
}

#[test]
fn the_config_file_wins_over_istio_operator_and_says_so() {
    let repo = GitRepo::new();
    copy_tree(&trust("istio-install").join("base"), &repo.path());
    repo.write(".meshward.yaml", "mesh:\n  trust_domain: cluster.local\n");
    let report = check_dir(&repo.path());
    assert!(
        report.summary.notes.iter().any(|n| n
            .contains(".meshward.yaml sets mesh.trust_domain: cluster.local")
            && n.contains("example.org")),
        "{:?}",
        report.summary.notes
    );
}
