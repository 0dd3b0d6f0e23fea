//! What a run publishes, from the bundled example change (examples/gitops as base,
//! examples/pr over it), snapshot-tested: the summary comment, the check run's
//! output and annotations, the inline comments and the commit status.

use crate::common;

use common::*;
use meshward::publish::{self, check, inline, selectors, Conclusion, Context};
use std::collections::BTreeSet;
use std::path::PathBuf;

const HEAD: &str = "1111111111111111111111111111111111111111";
const BASE: &str = "2222222222222222222222222222222222222222";

fn example_report() -> meshward::report::Report {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let repo = GitRepo::new();
    copy_tree(&root.join("gitops"), &repo.path());
    let base = repo.commit("base");
    copy_tree(&root.join("pr"), &repo.path());
    std::fs::remove_file(repo.path().join("README.md")).expect("pr README");
    let head = repo.commit("head");
    check_change(&repo, &base, &head)
}

fn ctx(changed: &BTreeSet<String>) -> Context<'_> {
    Context {
        repo: "acme/gitops",
        pr_number: 7,
        web_url: "https://github.com",
        head_sha: HEAD,
        base_sha: Some(BASE),
        changed_paths: Some(changed),
        inline_comments: true,
    }
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    // Commit ids of the temporary repository differ on every run.
    s.add_filter(r"\b[0-9a-f]{12}\b", "[sha]");
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn summary_comment_check_run_inline_comments_and_status() {
    let report = example_report();
    let changed: BTreeSet<String> = ["apps/shop/authz.yaml".to_string()].into();
    let plan = publish::plan(&report, &ctx(&changed));
    assert_eq!(plan.conclusion, Conclusion::Failure);
    assert!(plan.comment.starts_with(publish::summary::MARKER));
    settings().bind(|| {
        insta::assert_snapshot!("publish_comment", plan.comment);
        insta::assert_snapshot!("publish_check_summary", plan.check.summary);
        let mut check = plan.check.clone();
        check.summary = "(publish_check_summary.snap)".into();
        insta::assert_yaml_snapshot!("publish_check_run", check);
        let inline: Vec<String> = plan
            .inline
            .iter()
            .map(|c| format!("{}:{}\n{}", c.path, c.line, c.body))
            .collect();
        insta::assert_snapshot!("publish_inline", inline.join("\n---\n"));
        insta::assert_snapshot!("publish_status", plan.status_description);
    });
}

#[test]
fn the_selectors_the_change_touches_with_their_counts() {
    let report = example_report();
    let touched = selectors::touched(&report);
    // The example edits the reports ServiceEntry's WorkloadEntry labels: the entry
    // it selected is gone, so it selects nothing now.
    let reports = touched
        .iter()
        .find(|t| t.resource == "ServiceEntry/vm-apps/reports")
        .expect("the reports ServiceEntry is touched");
    assert_eq!(
        reports.head,
        selectors::Counts {
            workloads: 0,
            entries: 0
        }
    );
    assert_eq!(
        reports.base,
        Some(selectors::Counts {
            workloads: 0,
            entries: 1
        })
    );
    // The report's own changes section lists the selectors whose selection moved;
    // the publisher's table adds the touched ones it leaves out, without repeating.
    let section = selectors::section(&report);
    assert!(
        section.contains("AuthorizationPolicy/shop/cart-allow-web"),
        "{section}"
    );
    assert!(
        !section.contains("ServiceEntry/vm-apps/reports"),
        "{section}"
    );
    let changes =
        meshward::report::markdown::render(&report, &meshward::report::markdown::Links::None);
    assert!(
        changes.contains("`ServiceEntry/vm-apps/reports`"),
        "{changes}"
    );
}

#[test]
fn annotations_point_at_introduced_findings_errors_first() {
    let report = example_report();
    let changed = BTreeSet::new();
    let out = check::output(&report, &ctx(&changed), Conclusion::Failure);
    let introduced = report
        .findings
        .iter()
        .filter(|f| f.status == meshward::finding::Status::Introduced)
        .count();
    assert_eq!(out.annotations.len(), introduced);
    let levels: Vec<&str> = out
        .annotations
        .iter()
        .map(|a| a.annotation_level.as_str())
        .collect();
    let first_warning = levels.iter().position(|l| *l != "failure").unwrap();
    assert!(
        levels[first_warning..].iter().all(|l| *l != "failure"),
        "{levels:?}"
    );
    for a in &out.annotations {
        assert!(a.start_line >= 1 && a.start_line == a.end_line, "{a:?}");
    }
}

#[test]
fn nothing_to_check_is_neutral_but_never_when_findings_change() {
    let report = example_report();
    let docs: BTreeSet<String> = ["docs/runbook.md".to_string()].into();
    // The example introduces findings, so even a docs-only path list is not neutral.
    assert_eq!(check::conclusion(&report, Some(&docs)), Conclusion::Failure);
    let mut passing = report.clone();
    passing.summary.verdict = meshward::report::Verdict::Pass;
    assert_eq!(
        check::conclusion(&passing, Some(&docs)),
        Conclusion::Success
    );
    passing.summary.introduced = 0;
    passing.summary.resolved = 0;
    assert_eq!(
        check::conclusion(&passing, Some(&docs)),
        Conclusion::Neutral
    );
    let yaml: BTreeSet<String> = ["apps/x.yaml".to_string()].into();
    assert_eq!(
        check::conclusion(&passing, Some(&yaml)),
        Conclusion::Success
    );
    assert_eq!(check::conclusion(&passing, None), Conclusion::Success);
}

#[test]
fn inline_keys_ignore_lines_so_moved_findings_are_not_posted_again() {
    let report = example_report();
    let cands = inline::candidates(&report);
    let mut moved = report.clone();
    for f in &mut moved.findings {
        f.line += 3;
    }
    let again = inline::candidates(&moved);
    let keys = |c: &[inline::Candidate]| c.iter().map(|c| c.key.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&cands), keys(&again));
    for c in &cands {
        assert_eq!(inline::key_in(&c.body), Some(c.key.as_str()));
    }
}
