//! Output formats on the bundled example change, snapshot-tested; SARIF validated
//! against the SARIF 2.1.0 JSON schema.

use crate::common;

use common::*;
use meshward::report::{self, Format};
use std::path::PathBuf;

/// The bundled example as a PR: examples/gitops as base, examples/pr laid over it.
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

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    // Commit ids differ on every run.
    s.add_filter(r"\b[0-9a-f]{12}\b", "[sha]");
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn text_snapshot() {
    let r = example_report();
    settings()
        .bind(|| insta::assert_snapshot!("example_text", report::render(&r, Format::Text, false)));
}

#[test]
fn markdown_snapshot() {
    let r = example_report();
    settings().bind(|| {
        insta::assert_snapshot!(
            "example_markdown",
            report::render(&r, Format::Markdown, false)
        )
    });
}

#[test]
fn json_snapshot() {
    let r = example_report();
    let json: serde_json::Value =
        serde_json::from_str(&report::render(&r, Format::Json, false)).expect("json");
    settings().bind(|| insta::assert_json_snapshot!("example_json", json));
}

#[test]
fn sarif_snapshot_and_schema() {
    let r = example_report();
    let sarif: serde_json::Value =
        serde_json::from_str(&report::render(&r, Format::Sarif, false)).expect("json");
    settings().bind(|| insta::assert_json_snapshot!("example_sarif", sarif));

    let schema_path = std::env::var("MESHWARD_SARIF_SCHEMA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/sarif-2.1.0.json")
        });
    let schema_text = std::fs::read_to_string(&schema_path).unwrap_or_else(|e| {
        panic!(
            "SARIF schema missing at {} ({e}): run scripts/install-tools",
            schema_path.display()
        )
    });
    let schema: serde_json::Value = serde_json::from_str(&schema_text).expect("schema json");
    let validator = jsonschema::draft4::new(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "SARIF invalid:\n{}", errors.join("\n"));
    // And it says something: results with physical locations, rules with help.
    let run = &sarif["runs"][0];
    assert!(run["results"].as_array().is_some_and(|r| !r.is_empty()));
    assert!(
        run["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"]
            .as_u64()
            .unwrap_or(0)
            >= 1
    );
    assert!(run["tool"]["driver"]["rules"][0]["help"]["text"].is_string());

    // A document with a broken SARIF shape is rejected by the same validator.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["level"] = serde_json::json!("fatal");
    assert!(!validator.is_valid(&broken));
}
