//! README "Writing a policy": the example policy and its test, taken from the README
//! itself (each ```rego block whose first line is `# .meshward/policies/NAME.rego`),
//! pass `meshward policy test`, and the policy reports what it says it reports when a
//! repository holding it is checked.

use assert_cmd::Command;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README's example policy files: (path, text).
fn readme_policy_files() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let mut files = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "```rego" {
            continue;
        }
        let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        let Some(path) = block
            .first()
            .and_then(|l| l.strip_prefix("# "))
            .filter(|p| p.starts_with(".meshward/policies/") && p.ends_with(".rego"))
        else {
            continue;
        };
        files.push((path.to_string(), block[1..].join("\n") + "\n"));
    }
    files
}

fn write_repo(dir: &Path, files: &[(String, String)]) {
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
}

#[test]
fn readme_policy_example_passes_its_tests() {
    let files = readme_policy_files();
    let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        names.iter().any(|p| p.ends_with("_test.rego"))
            && names.iter().any(|p| !p.ends_with("_test.rego")),
        "README's \"Writing a policy\" shows a policy and its test as ```rego blocks \
         starting with `# .meshward/policies/NAME.rego`; found {names:?}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    write_repo(dir.path(), &files);

    let out = Command::cargo_bin("meshward")
        .expect("binary")
        .args(["policy", "test"])
        .arg(dir.path().join(".meshward/policies"))
        .output()
        .expect("meshward policy test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "meshward policy test failed on the README's example:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passes = stdout.lines().filter(|l| l.starts_with("PASS ")).count();
    assert!(
        passes >= 2,
        "expected the example's tests to run:\n{stdout}"
    );
    assert!(stdout.contains(" 0 failed"), "{stdout}");
}

#[test]
fn readme_policy_example_reports_a_route_without_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = readme_policy_files();
    files.push((
        "apps/cart/virtualservice.yaml".into(),
        "apiVersion: networking.istio.io/v1\n\
         kind: VirtualService\n\
         metadata:\n  name: cart\n  namespace: shop\n\
         spec:\n  hosts: [cart]\n  http:\n\
         \x20   - timeout: 5s\n      route:\n        - destination: {host: cart}\n\
         \x20   - route:\n        - destination: {host: cart}\n"
            .into(),
    ));
    write_repo(dir.path(), &files);
    let out = Command::cargo_bin("meshward")
        .expect("binary")
        .arg("check")
        .arg(dir.path())
        .args(["--format", "json", "--fail-on", "never"])
        .output()
        .expect("meshward check");
    let report: Json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON report ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let ours: Vec<&Json> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["rule"] == "myteam/route-timeout")
        .collect();
    assert_eq!(ours.len(), 1, "{report:#}");
    assert_eq!(ours[0]["severity"], "warning");
    assert_eq!(ours[0]["path"], serde_json::json!(["spec", "http", 1]));
    assert_eq!(ours[0]["file"], "apps/cart/virtualservice.yaml");
    assert_eq!(ours[0]["line"], 12, "the second route's line");
}
