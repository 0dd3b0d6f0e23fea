//! Benchmark: the API server's net on 10,000 custom resources. `meshward check --base
//! --head` on a generated tree of 10,000 Widgets (100 files; the head commit changes
//! one) checked against the repository's Widget CRD (a structural schema and three CEL
//! rules, four rule evaluations per object), beside the same tree without the CRD,
//! where the objects are read but no schema applies: the difference is what schema
//! validation costs. Reports the median wall time and peak memory of each.
//!
//! `cargo bench --bench schema_10k` runs it (MESHWARD_BENCH_RUNS runs, default 7);
//! under `cargo test` it runs once on 200 objects as a smoke test.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use support::{git, median, work_dir, write};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size: {type: string, enum: [small, medium, large]}
                replicas: {type: integer, minimum: 1, maximum: 10}
                minReplicas: {type: integer, minimum: 1}
                owner: {type: string, pattern: '^[a-z]+@example\.com$'}
                endpoint: {type: string}
                ports:
                  type: array
                  maxItems: 8
                  items:
                    type: object
                    required: [port]
                    properties:
                      name: {type: string, maxLength: 15}
                      port: {type: integer}
                    x-kubernetes-validations:
                      - rule: self.port >= 1 && self.port <= 65535
                        message: port must be between 1 and 65535
              x-kubernetes-validations:
                - rule: "!has(self.minReplicas) || !has(self.replicas) || self.minReplicas <= self.replicas"
                  message: minReplicas may not exceed replicas
                - rule: "!has(self.endpoint) || (isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https')"
                  message: endpoint must be an https URL
"#;

fn widgets(root: &Path, file: usize, per_file: usize, changed: bool) {
    let mut text = String::new();
    for i in 0..per_file {
        let replicas = if changed && i == 0 { 4 } else { 3 };
        text.push_str(&format!(
            "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w-{file:03}-{i:03}\n  namespace: team-{file:03}\nspec:\n  size: small\n  replicas: {replicas}\n  minReplicas: 2\n  owner: ops@example.com\n  endpoint: https://w-{i}.example.com/api\n  ports:\n    - {{name: http, port: 8080}}\n    - {{name: admin, port: 9090}}\n"
        ));
    }
    write(root, &format!("widgets/team-{file:03}.yaml"), &text);
}

fn generate(root: &Path, files: usize, per_file: usize, with_crd: bool) {
    git(root, &["init", "--quiet"]);
    if with_crd {
        write(root, "crds/widget.yaml", CRD);
    }
    for f in 0..files {
        widgets(root, f, per_file, false);
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "base"]);
    widgets(root, 0, per_file, true);
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "head"]);
    git(root, &["repack", "-a", "-d", "-q"]);
}

/// Wall seconds and peak RSS (MiB) of one check, and how many schema findings it had.
fn run(bin: &Path, repo: &Path) -> (f64, f64, usize) {
    let out_file = tempfile::NamedTempFile::new().expect("tmp");
    let start = Instant::now();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M"])
        .arg(bin)
        .arg("check")
        .arg(repo)
        .args([
            "--base", "HEAD~1", "--head", "HEAD", "--format", "json", "-o",
        ])
        .arg(out_file.path())
        .output()
        .expect("run meshward under /usr/bin/time");
    let secs = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kb: f64 = stderr
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no RSS in {stderr}"));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_file.path()).expect("report")).expect("json");
    let schema = report["findings"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter(|f| f["rule"].as_str().is_some_and(|r| r.starts_with("schema/")))
                .count()
        })
        .unwrap_or(0);
    (secs, kb / 1024.0, schema)
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let bin = Path::new(env!("CARGO_BIN_EXE_meshward"));
    let runs = std::env::var("MESHWARD_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|_| bench)
        .unwrap_or(if bench { 7 } else { 1 });
    let (files, per_file) = if bench { (100, 100) } else { (2, 100) };
    let mut rows = Vec::new();
    for with_crd in [true, false] {
        let dir = tempfile::tempdir().expect("tmp");
        let root = work_dir(&dir);
        generate(&root, files, per_file, with_crd);
        let mut times = Vec::new();
        let mut mems = Vec::new();
        for _ in 0..runs {
            let (secs, mb, schema) = run(bin, &root);
            // Every Widget is valid: the net finds nothing, having looked at all.
            assert_eq!(schema, 0, "the generated Widgets are valid");
            times.push(secs);
            mems.push(mb);
        }
        rows.push((with_crd, median(times), median(mems)));
    }
    println!(
        "schema_10k: {} Widgets per revision, {runs} runs",
        files * per_file
    );
    for (with_crd, secs, mb) in &rows {
        let label = if *with_crd {
            "against the Widget CRD"
        } else {
            "no CRD (not validated)"
        };
        println!("  {label:<24} median {secs:.3} s, peak RSS {mb:.0} MiB");
    }
    if let [(_, with, _), (_, without, _)] = rows[..] {
        println!("  schema validation: {:.3} s", with - without);
    }
}
