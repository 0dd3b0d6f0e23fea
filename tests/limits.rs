//! Hostile input: every limit gives a clear finding, and the other files are still
//! checked.

use crate::common;

use common::*;

const BAD_SE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: egress\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: api\n  namespace: egress\nspec:\n  hosts: [api.example.com]\n  resolution: NONE\n  ports:\n  - {number: 443, name: https, protocol: TLS}\n  endpoints:\n  - address: 203.0.113.10\n";

/// `meshward check REPO --format json --output OUT`, with no input and quiet.
fn check_command(repo: &GitRepo, out: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_meshward"));
    cmd.arg("check")
        .arg(repo.path())
        .args(["--format", "json", "--output"])
        .arg(out)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    cmd
}

/// Package `acme.loop`: 400 million steps (minutes), then `finding`.
fn looping_policy(finding: &str) -> String {
    format!("package acme.loop\n\nimport rego.v1\n\nfindings contains f if {{\n  n := count([x | some x in numbers.range(1, 20000); some y in numbers.range(1, 20000); x == y + 20001])\n  n >= 0\n  f := {finding}\n}}\n")
}

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

/// A repository policy that allocates without bound, and one that loops: each is a
/// `policy/error` on its own file, the other policies still report, and meshward
/// itself stays small (the allocation happens in its policy worker, under the
/// repository's lowered memory limit).
#[test]
fn a_policy_that_allocates_or_loops_without_bound_is_stopped_and_said() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    repo.write(
        ".meshward.yaml",
        "policy:\n  max_memory_mib: 512\n  timeout_seconds: 2\n",
    );
    let finding = "{\"rule\": \"acme/RULE\", \"severity\": \"warning\", \"resource\": null, \"message\": \"RULE ran\"}";
    repo.write(
        ".meshward/policies/bomb.rego",
        &format!("package acme.bomb\n\nimport rego.v1\n\nfindings contains f if {{\n  xs := numbers.range(1, 2000000000)\n  count(xs) > 0\n  f := {}\n}}\n", finding.replace("RULE", "bomb")),
    );
    repo.write(
        ".meshward/policies/loop.rego",
        &looping_policy(&finding.replace("RULE", "loop")),
    );
    repo.write(
        ".meshward/policies/zz_fine.rego",
        &format!(
            "package acme.fine\n\nimport rego.v1\n\nfindings contains f if {{\n  f := {}\n}}\n",
            finding.replace("RULE", "fine")
        ),
    );
    let out = repo.path().join("report.json");
    // Reaped by wait4 below, which std does not know of.
    #[allow(clippy::zombie_processes)]
    let child = check_command(&repo, &out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("meshward starts");
    // wait4: the exit status and the peak RSS of meshward and the workers it reaped.
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into locals of the right types.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32);
    assert!(libc::WIFEXITED(status), "meshward survives: {status}");
    assert_eq!(libc::WEXITSTATUS(status), 1, "policy errors fail the check");
    let peak_mib = usage.ru_maxrss / 1024;
    assert!(peak_mib < 1024, "peak RSS {peak_mib} MiB");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("report written")).expect("json");
    let findings = report["findings"].as_array().expect("findings");
    let of = |rule: &str| -> Vec<&serde_json::Value> {
        findings.iter().filter(|f| f["rule"] == rule).collect()
    };
    let errors = of("policy/error");
    let on = |file: &str| {
        errors
            .iter()
            .find(|f| f["file"] == file)
            .and_then(|f| f["message"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let bomb = on(".meshward/policies/bomb.rego");
    assert!(
        bomb.contains("policy memory limit of 512 MiB"),
        "{errors:#?}"
    );
    let looped = on(".meshward/policies/loop.rego");
    assert!(looped.contains("did not run"), "{errors:#?}");
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert_eq!(of("acme/fine").len(), 1, "the other policies still report");
    assert_eq!(
        of("serviceentry/none-with-endpoints").len(),
        1,
        "the built-in ones too"
    );
}

/// The operator's bound on a policy's time (`MESHWARD_POLICY_TIMEOUT_SECS`) is the
/// ceiling a repository's `policy.timeout_seconds` is held to: lowered, a policy that
/// loops is stopped there and a repository asking for more is told the operator's
/// figure; raised, the same request is within it.
#[test]
fn the_operator_sets_the_policy_time_bound() {
    let repo = GitRepo::new();
    repo.write("good.yaml", BAD_SE);
    repo.write(".meshward.yaml", "policy:\n  timeout_seconds: 45\n");
    repo.write(
        ".meshward/policies/loop.rego",
        &looping_policy(
            "{\"rule\": \"acme/loop\", \"severity\": \"warning\", \"resource\": null, \"message\": \"loop ran\"}",
        ),
    );
    let check_with = |secs: &str| -> Vec<serde_json::Value> {
        let out = repo.path().join("report.json");
        let status = check_command(&repo, &out)
            .env("MESHWARD_POLICY_TIMEOUT_SECS", secs)
            .status()
            .expect("meshward runs");
        assert!(status.code().is_some(), "meshward exits: {status}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&out).expect("report written")).expect("json");
        report["findings"].as_array().cloned().unwrap_or_default()
    };
    let of = |findings: &[serde_json::Value], rule: &str| -> Vec<String> {
        findings
            .iter()
            .filter(|f| f["rule"] == rule)
            .map(|f| f["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };

    let low = check_with("1");
    let above = of(&low, "policy/limit-above-ceiling");
    assert_eq!(above.len(), 1, "{low:#?}");
    assert!(
        above[0].contains("ceiling of 1 s; 1 s is used"),
        "{}",
        above[0]
    );
    let errors = of(&low, "policy/error");
    assert_eq!(errors.len(), 1, "{low:#?}");
    assert!(errors[0].contains("did not run"), "{}", errors[0]);
    assert_eq!(
        of(&low, "serviceentry/none-with-endpoints").len(),
        1,
        "the built-in policies still report"
    );

    std::fs::remove_file(repo.path().join(".meshward/policies/loop.rego")).expect("rm");
    let high = check_with("120");
    assert!(
        of(&high, "policy/limit-above-ceiling").is_empty(),
        "{high:#?}"
    );
    assert_eq!(of(&high, "serviceentry/none-with-endpoints").len(), 1);
}
