//! Every rule has a fixture that must produce it and a corrected twin that must not.
//! Layout: tests/fixtures/rules/<rule with / as __>/{fail,pass}/, either plain YAML
//! (checked as a tree) or base/ + head/ (checked as a change between two commits of a
//! real git repository), with an optional evidence.json.

mod common;

use common::*;
use meshward::finding::Status;
use std::path::Path;

fn run_case(rule: &str, case: &Path) -> meshward::report::Report {
    let evidence = case.join("evidence.json");
    let evidence = evidence.exists().then_some(evidence);
    if case.join("head").is_dir() {
        let repo = GitRepo::new();
        let base = repo.commit_dir(&case.join("base"), "base");
        let head = repo.commit_dir(&case.join("head"), "head");
        let mut req = request(&repo.path());
        req.base = Some(base);
        req.head = Some(head);
        req.evidence = evidence;
        let report = check(&req);
        // Differential cases: what fires must be introduced by the change.
        for f in with_rule(&report, rule) {
            assert_eq!(
                f.status,
                Status::Introduced,
                "{rule} in {}: {f:?}",
                case.display()
            );
        }
        report
    } else {
        let mut req = request(case);
        req.evidence = evidence;
        check(&req)
    }
}

#[test]
fn every_rule_fires_on_its_failing_fixture_and_not_on_its_passing_one() {
    let root = fixtures().join("rules");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("fixtures/rules")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .collect();
    cases.sort_by_key(|e| e.file_name());
    assert!(
        cases.len() >= 30,
        "expected a fixture per rule, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in cases {
        let rule = case.file_name().to_string_lossy().replace("__", "/");
        let fail = run_case(&rule, &case.path().join("fail"));
        let fired = with_rule(&fail, &rule);
        if fired.is_empty() {
            failures.push(format!(
                "{rule}: did not fire on fail/ (got {:?})",
                fail.findings.iter().map(|f| &f.rule).collect::<Vec<_>>()
            ));
        }
        for f in &fired {
            // Each finding names its file and the line of the offending field.
            if f.file.is_empty() || f.line == 0 {
                failures.push(format!("{rule}: finding without file/line: {f:?}"));
            }
            if f.message.len() < 40 {
                failures.push(format!(
                    "{rule}: message too thin to act on: {:?}",
                    f.message
                ));
            }
        }
        let pass = run_case(&rule, &case.path().join("pass"));
        let wrongly = with_rule(&pass, &rule);
        if !wrongly.is_empty() {
            failures.push(format!("{rule}: fired on pass/: {:?}", wrongly));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn rule_fixture_lines_point_at_the_field() {
    // A spot check that the line is the field's, not the document's.
    let report = check_dir(&fixtures().join("rules/serviceentry__none-with-endpoints/fail"));
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    let text = std::fs::read_to_string(
        fixtures()
            .join("rules/serviceentry__none-with-endpoints/fail")
            .join(&f[0].file),
    )
    .expect("fixture");
    let line = text
        .lines()
        .nth(f[0].line as usize - 1)
        .expect("line exists");
    assert!(
        line.contains("endpoints") || line.contains("resolution"),
        "line {} is {line:?}",
        f[0].line
    );
}

#[test]
fn builtin_policy_tests_pass() {
    let report = meshward::policy_test(None).expect("policy tests load");
    let failed: Vec<_> = report.outcomes.iter().filter(|o| !o.passed).collect();
    assert!(
        report.outcomes.len() > 60,
        "only {} policy tests",
        report.outcomes.len()
    );
    assert!(failed.is_empty(), "{failed:#?}");
}
