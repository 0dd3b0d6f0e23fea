//! Differential status on real temporary git repositories: introduced, existing,
//! resolved; config, exceptions and policies from the base revision only.

use crate::common;

use common::*;
use meshward::finding::Status;
use meshward::report::Verdict;

const NS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: egress\n  labels: {istio-injection: enabled}\n";

fn se(name: &str, resolution: &str, endpoints: bool) -> String {
    let mut s = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: {name}\n  namespace: egress\nspec:\n  hosts: [{name}.example.com]\n  location: MESH_EXTERNAL\n  resolution: {resolution}\n  ports:\n  - {{number: 443, name: https, protocol: TLS}}\n"
    );
    if endpoints {
        s.push_str("  endpoints:\n  - address: 203.0.113.10\n");
    }
    s
}

#[test]
fn introduced_existing_and_resolved() {
    let repo = GitRepo::new();
    let old_bad = se("old", "NONE", true);
    let fixed_later = se("fixed", "NONE", true);
    let base = repo.commit_files(
        &[
            ("ns.yaml", NS),
            ("old.yaml", &old_bad),
            ("fixed.yaml", &fixed_later),
        ],
        "base",
    );
    let now_fixed = se("fixed", "STATIC", true);
    let new_bad = se("new", "NONE", true);
    // Lines move in old.yaml (a comment on top): still the same finding.
    let old_moved = format!("# moved down\n# by two lines\n{old_bad}");
    let head = repo.commit_files(
        &[
            ("ns.yaml", NS),
            ("old.yaml", &old_moved),
            ("fixed.yaml", &now_fixed),
            ("new.yaml", &new_bad),
        ],
        "head",
    );
    let report = check_change(&repo, &base, &head);
    let rule = "serviceentry/none-with-endpoints";
    let status_of = |name: &str| {
        with_rule(&report, rule)
            .iter()
            .find(|f| f.resource.as_ref().is_some_and(|r| r.name == name))
            .map(|f| f.status)
    };
    assert_eq!(status_of("new"), Some(Status::Introduced));
    assert_eq!(status_of("old"), Some(Status::Existing));
    assert_eq!(status_of("fixed"), Some(Status::Resolved));
    // Only the introduced error blocks.
    assert_eq!(report.summary.blocking, 1);
    assert_eq!(report.summary.verdict, Verdict::Fail);
    let moved = with_rule(&report, rule)
        .into_iter()
        .find(|f| f.file == "old.yaml")
        .expect("old finding");
    let field_line = old_moved
        .lines()
        .position(|l| l.contains("resolution: NONE"))
        .expect("resolution") as u32
        + 1;
    assert_eq!(moved.line, field_line, "the line follows the head revision");
}

#[test]
fn existing_debt_does_not_block_an_unrelated_change() {
    let repo = GitRepo::new();
    let bad = se("old", "NONE", true);
    let base = repo.commit_files(&[("ns.yaml", NS), ("old.yaml", &bad)], "base");
    let head = repo.commit_files(
        &[
            ("ns.yaml", NS),
            ("old.yaml", &bad),
            ("README.yaml", "just: data\n"),
        ],
        "head",
    );
    let report = check_change(&repo, &base, &head);
    assert_eq!(report.summary.existing, 1);
    assert_eq!(report.summary.blocking, 0);
    assert_eq!(report.summary.verdict, Verdict::Pass);
}

#[test]
fn working_tree_is_the_default_head() {
    let repo = GitRepo::new();
    let base = repo.commit_files(&[("ns.yaml", NS)], "base");
    repo.write("new.yaml", &se("new", "NONE", true));
    let mut req = request(&repo.path());
    req.base = Some(base);
    let report = check(&req);
    assert_eq!(
        rules_with_status(&report, Status::Introduced),
        vec!["serviceentry/none-with-endpoints"]
    );
    assert_eq!(report.summary.head.revision, "working tree");
}

#[test]
fn a_change_cannot_waive_its_own_findings() {
    let repo = GitRepo::new();
    let base = repo.commit_files(&[("ns.yaml", NS)], "base");
    let waiver = "exceptions:\n  - rule: serviceentry/*\n    resource: ServiceEntry/egress/*\n    reason: trust me\n    expires: 2099-01-01\nrules:\n  serviceentry/none-with-endpoints: off\nfail_on: never\n";
    let head = repo.commit_files(
        &[
            ("ns.yaml", NS),
            ("new.yaml", &se("new", "NONE", true)),
            (".meshward.yaml", waiver),
        ],
        "head waives itself",
    );
    let report = check_change(&repo, &base, &head);
    assert_eq!(
        report.summary.verdict,
        Verdict::Fail,
        "{:#?}",
        report.summary
    );
    assert_eq!(report.summary.suppressed, 0);
    assert!(report
        .summary
        .notes
        .iter()
        .any(|n| n.contains("take effect after merge")));

    // After merge (the waiver is in base), the next change is judged by it.
    let next = repo.commit_files(
        &[
            ("ns.yaml", NS),
            ("new.yaml", &se("new", "NONE", true)),
            ("other.yaml", &se("other", "NONE", true)),
            (".meshward.yaml", waiver),
        ],
        "next",
    );
    let report = check_change(&repo, &head, &next);
    assert!(with_rule(&report, "serviceentry/none-with-endpoints").is_empty());
    assert_eq!(report.summary.verdict, Verdict::Pass);
}

#[test]
fn repo_policies_come_from_base() {
    let policy = r#"package meshward.rules.team

import rego.v1

findings contains f if {
	some r in object.get(input.by_kind, "ServiceEntry", [])
	not r.body.spec.exportTo
	f := {"rule": "team/export-to", "severity": "error", "resource": r.id, "path": ["spec"],
	      "message": "set exportTo so the entry is not visible mesh-wide"}
}
"#;
    let repo = GitRepo::new();
    let base = repo.commit_files(
        &[("ns.yaml", NS), (".meshward/policies/team.rego", policy)],
        "base",
    );
    let head = repo.commit_files(
        &[
            ("ns.yaml", NS),
            ("new.yaml", &se("new", "STATIC", true)),
            (
                ".meshward/policies/team.rego",
                "package meshward.rules.team\n",
            ),
        ],
        "head disables the team policy",
    );
    let report = check_change(&repo, &base, &head);
    let team = with_rule(&report, "team/export-to");
    assert_eq!(team.len(), 1, "{:#?}", report.findings);
    assert_eq!(team[0].status, Status::Introduced);
}

#[test]
fn broken_repo_policy_is_a_finding_and_builtins_still_run() {
    let repo = GitRepo::new();
    repo.write("ns.yaml", NS);
    repo.write("new.yaml", &se("new", "NONE", true));
    repo.write(".meshward/policies/broken.rego", "package meshward.rules.broken\n\nimport rego.v1\n\nfindings contains f if {\n\tf := {\"rule\": x}\n}\n");
    let report = check_dir(&repo.path());
    let problems = with_rule(&report, "policy/error");
    assert_eq!(problems.len(), 1, "{:#?}", report.findings);
    assert_eq!(problems[0].file, ".meshward/policies/broken.rego");
    assert_eq!(
        with_rule(&report, "serviceentry/none-with-endpoints").len(),
        1
    );
}

#[test]
fn exceptions_expire_and_unused_ones_are_reported() {
    let repo = GitRepo::new();
    repo.write("ns.yaml", NS);
    repo.write("a.yaml", &se("a", "NONE", true));
    repo.write("b.yaml", &se("b", "NONE", true));
    repo.write(
        ".meshward.yaml",
        "exceptions:\n  - rule: serviceentry/none-with-endpoints\n    resource: ServiceEntry/egress/a\n    reason: INFRA-1 migration\n    expires: 2027-03-31\n  - rule: serviceentry/none-with-endpoints\n    resource: ServiceEntry/egress/b\n    reason: INFRA-2\n    expires: 2026-01-31\n  - rule: selector/matches-nothing\n    resource: ServiceEntry/egress/nothing\n    reason: INFRA-3\n    expires: 2027-01-01\n",
    );
    let report = check_dir(&repo.path());
    let se_findings = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(se_findings.len(), 1, "a is covered, b's exception expired");
    assert_eq!(
        se_findings[0].resource.as_ref().map(|r| r.name.as_str()),
        Some("b")
    );
    assert_eq!(report.summary.suppressed, 1);
    let expired = with_rule(&report, "exception/expired");
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].file.as_str(), expired[0].line),
        (".meshward.yaml", 6)
    );
    let unused = with_rule(&report, "exception/unused");
    assert_eq!(unused.len(), 1);
    assert_eq!(unused[0].line, 10);
}

#[test]
fn a_renewed_exception_after_the_expired_one_still_applies() {
    let repo = GitRepo::new();
    repo.write("ns.yaml", NS);
    repo.write("a.yaml", &se("a", "NONE", true));
    repo.write(
        ".meshward.yaml",
        "exceptions:\n  - rule: serviceentry/none-with-endpoints\n    resource: ServiceEntry/egress/a\n    reason: INFRA-1\n    expires: 2026-01-31\n  - rule: serviceentry/none-with-endpoints\n    resource: ServiceEntry/egress/a\n    reason: INFRA-1, renewed\n    expires: 2027-03-31\n",
    );
    let report = check_dir(&repo.path());
    assert!(with_rule(&report, "serviceentry/none-with-endpoints").is_empty());
    assert_eq!(report.summary.suppressed, 1);
    // The old entry is still reported as expired (delete it); the renewed one is used.
    assert_eq!(with_rule(&report, "exception/expired").len(), 1);
    assert!(with_rule(&report, "exception/unused").is_empty());
}

#[test]
fn subdirectory_of_a_repository() {
    let repo = GitRepo::new();
    let base = repo.commit_files(
        &[
            ("clusters/prod/ns.yaml", NS),
            ("other/x.yaml", &se("x", "NONE", true)),
        ],
        "base",
    );
    let head = repo.commit_files(
        &[
            ("clusters/prod/ns.yaml", NS),
            ("clusters/prod/new.yaml", &se("new", "NONE", true)),
            ("other/x.yaml", &se("x", "NONE", true)),
        ],
        "head",
    );
    let mut req = request(&repo.path().join("clusters/prod"));
    req.base = Some(base);
    req.head = Some(head);
    let report = check(&req);
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "only files under the checked folder: {f:#?}");
    assert_eq!(f[0].file, "new.yaml");
}

fn opted_out(name: &str) -> String {
    format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations: {{sidecar.istio.io/inject: \"false\"}}\n    spec:\n      containers:\n        - name: {name}\n          image: registry.example.com/{name}:1\n")
}

#[test]
fn a_second_workload_left_unenforced_under_strict_is_introduced() {
    let repo = GitRepo::new();
    let strict = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {istio-injection: enabled}\n---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: shop\nspec:\n  mtls: {mode: STRICT}\n";
    let base = repo.commit_files(
        &[("shop.yaml", strict), ("legacy.yaml", &opted_out("legacy"))],
        "STRICT shop with one known exception",
    );
    repo.write("batch.yaml", &opted_out("batch"));
    let head = repo.commit("a second workload without a proxy");
    let report = check_change(&repo, &base, &head);
    let f = with_rule(&report, "mtls/strict-unenforced-workloads");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].status, Status::Introduced);
    assert!(f[0].message.contains("shop/batch"), "{}", f[0].message);
    assert_eq!(report.summary.verdict, Verdict::Fail);

    // Fixing one of two leaves a finding base had, about fewer workloads: existing.
    std::fs::remove_file(repo.path().join("legacy.yaml")).expect("rm");
    let next = repo.commit("legacy retired");
    let report = check_change(&repo, &head, &next);
    let f = with_rule(&report, "mtls/strict-unenforced-workloads");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].status, Status::Existing);
}

/// Two documents of one file that fail to parse with the same words (kubectl's
/// message for a `?` in an unquoted flow value names no line) are two findings, each
/// at its line; the one base had is existing and the one the change adds blocks.
#[test]
fn documents_that_fail_alike_are_each_reported_and_the_new_one_is_introduced() {
    let config_map = |name: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: egress\ndata:\n  x: [{value}]\n"
        )
    };
    let repo = GitRepo::new();
    let one = config_map("a", "a?b:");
    let base = repo.commit_files(&[("ns.yaml", NS), ("maps.yaml", &one)], "one broken map");
    let two = format!("{one}---\n{}", config_map("b", "c?d:"));
    let head = repo.commit_files(&[("ns.yaml", NS), ("maps.yaml", &two)], "a second one");
    let report = check_change(&repo, &base, &head);
    let mut errors: Vec<(u32, Status)> = with_rule(&report, "manifest/parse-error")
        .iter()
        .map(|f| (f.line, f.status))
        .collect();
    errors.sort_by_key(|e| e.0);
    assert_eq!(
        errors,
        [(7, Status::Existing), (15, Status::Introduced)],
        "{:#?}",
        report.findings
    );
    assert_eq!(report.summary.verdict, Verdict::Fail);
}
