//! Benchmark: `meshward check --base --head` on a generated GitOps tree of 10,000
//! resources (100 namespaces), where the head commit changes 1% of them. Reports the
//! median wall time and peak memory of the release binary over several runs.
//!
//! `cargo bench --bench check_10k` runs it; under `cargo test` it runs once on a
//! small tree as a smoke test.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use support::{git, median, write};

/// One namespace's worth of config: ~100 resources.
fn namespace(root: &Path, n: usize, changed: bool) -> usize {
    let ns = format!("team-{n:03}");
    let mut count = 0;
    let mut doc = |path: String, text: String| {
        write(root, &path, &text);
        count += text.matches("\nkind: ").count() + usize::from(text.starts_with("kind: "));
    };
    doc(
        format!("clusters/prod/{ns}/namespace.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    istio-injection: enabled\n---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: {ns}\nspec:\n  mtls:\n    mode: PERMISSIVE\n"),
    );
    for a in 0..30 {
        let image_tag = if changed && a == 0 { "2.0.1" } else { "2.0.0" };
        doc(
            format!("apps/{ns}/app-{a:02}.yaml"),
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{a:02}\n  namespace: {ns}\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {{app: app-{a:02}}}\n  template:\n    metadata:\n      labels: {{app: app-{a:02}, version: v1}}\n    spec:\n      serviceAccountName: app-{a:02}\n      containers:\n        - name: app\n          image: registry.example.com/{ns}/app-{a:02}:{image_tag}\n          ports: [{{containerPort: 8080}}]\n          resources: {{requests: {{cpu: 100m, memory: 128Mi}}}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app-{a:02}\n  namespace: {ns}\nspec:\n  selector: {{app: app-{a:02}}}\n  ports: [{{name: http, port: 80, targetPort: 8080}}]\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: app-{a:02}\n  namespace: {ns}\n"
            ),
        );
    }
    for p in 0..4 {
        let principal = if changed && p == 0 {
            "app-99"
        } else {
            "app-01"
        };
        doc(
            format!("apps/{ns}/authz-{p}.yaml"),
            format!("apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: allow-{p}\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels: {{app: app-{p:02}}}\n  action: ALLOW\n  rules:\n    - from:\n        - source:\n            principals: [\"cluster.local/ns/{ns}/sa/{principal}\"]\n"),
        );
    }
    for v in 0..2 {
        doc(
            format!("vm/{ns}/vm-{v}.yaml"),
            format!("apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata:\n  name: vm-{v}\n  namespace: {ns}\n  labels: {{app: vm-{v}}}\nspec:\n  address: 10.{n}.{v}.10\n  serviceAccount: vm-{v}\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: vm-{v}\n  namespace: {ns}\nspec:\n  hosts: [vm-{v}.{ns}.internal]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 8080, name: http, protocol: HTTP}}]\n  workloadSelector:\n    labels: {{app: vm-{v}}}\n"),
        );
    }
    count
}

fn generate(root: &Path, namespaces: usize) -> usize {
    git(root, &["init", "--quiet"]);
    let mut resources = 0;
    for n in 0..namespaces {
        resources += namespace(root, n, false);
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "base"]);
    // Head: one namespace in a hundred changes an image and a principal.
    for n in (0..namespaces).step_by(100) {
        namespace(root, n, true);
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "head"]);
    // Packed, as a clone is: loose objects would make git, not meshward, the cost.
    git(root, &["repack", "-a", "-d", "-q"]);
    resources
}

/// Runs the binary under /usr/bin/time; returns (seconds, peak RSS in MB, exit code).
fn run(bin: &Path, repo: &Path) -> (f64, f64, i32) {
    let start = Instant::now();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M"])
        .arg(bin)
        .arg("check")
        .arg(repo)
        .args([
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
            "--format",
            "json",
            "-o",
            "/dev/null",
        ])
        .output()
        .expect("run meshward under /usr/bin/time");
    let secs = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kb: f64 = stderr
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no RSS in {stderr}"));
    (secs, kb / 1024.0, out.status.code().unwrap_or(-1))
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let bin = Path::new(env!("CARGO_BIN_EXE_meshward"));
    let dir = tempfile::tempdir().expect("tmp");
    // MESHWARD_BENCH_DIR keeps the generated tree for profiling.
    let root = std::env::var_os("MESHWARD_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().to_path_buf());
    std::fs::create_dir_all(&root).expect("bench dir");
    // MESHWARD_BENCH_NAMESPACES scales the tree (about 100 resources each; 1000 for
    // the 100k row of the scaling table), MESHWARD_BENCH_RUNS the number of runs.
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
    };
    let (namespaces, runs) = if bench {
        (
            env("MESHWARD_BENCH_NAMESPACES").unwrap_or(100),
            env("MESHWARD_BENCH_RUNS").unwrap_or(7),
        )
    } else {
        (2, 1)
    };
    let resources = generate(&root, namespaces);
    let mut times = Vec::new();
    let mut mems = Vec::new();
    for _ in 0..runs {
        let (t, m, code) = run(bin, &root);
        // The head commit introduces an unknown principal (a warning): exit 0.
        assert_eq!(code, 0, "meshward failed on the generated tree");
        times.push(t);
        mems.push(m);
    }
    println!(
        "check_10k: {resources} resources per revision, base+head, {runs} runs: median {:.3} s, peak RSS median {:.0} MB (min {:.3} s, max {:.3} s)",
        median(times.clone()),
        median(mems),
        times.iter().cloned().fold(f64::MAX, f64::min),
        times.iter().cloned().fold(0.0, f64::max),
    );
}
