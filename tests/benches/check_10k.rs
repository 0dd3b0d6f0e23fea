//! Benchmark: `meshward check --base --head` on a generated GitOps tree of 10,000
//! resources (100 namespaces), where the head commit changes 1% of them. Reports the
//! median wall time and peak memory of the release binary over several runs.
//!
//! `cargo bench --bench check_10k` runs it; under `cargo test` it runs once on a
//! small tree as a smoke test.
//!
//! `MESHWARD_BENCH_SCALING=10,100,500,1000` (namespaces of about 100 resources)
//! prints the scaling table instead: per size, the median wall time, CPU time, peak
//! RSS and instructions of the check (instructions where `perf` counts them, or with
//! `MESHWARD_BENCH_CALLGRIND=1` by valgrind's callgrind where it cannot), beside
//! the floor: one thread parsing every manifest of both revisions with
//! `manifest::load`, the least a check of both revisions must do.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use support::{git, median, work_dir, write};

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

/// One run of the check.
struct Run {
    secs: f64,
    /// User + system CPU seconds.
    cpu: f64,
    rss_mb: f64,
    /// Instructions retired, where `perf` could count them.
    instructions: Option<f64>,
    code: i32,
}

/// The value of `event` in `perf stat -x ,` output, where perf could count it.
fn counted(perf_output: &str, event: &str) -> Option<f64> {
    perf_output
        .lines()
        .find(|l| l.split(',').nth(2) == Some(event))
        .and_then(|l| l.split(',').next()?.parse().ok())
}

/// User and system CPU seconds of every child process waited for so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// `cmd` (a wrapper) with the check of base HEAD~1 against head HEAD in `repo`.
fn check_of<'c>(cmd: &'c mut Command, bin: &Path, repo: &Path) -> &'c mut Command {
    let args = [
        "check", "--base", "HEAD~1", "--head", "HEAD", "--format", "json",
    ];
    cmd.arg(bin).args(args).args(["-o", "/dev/null"]).arg(repo)
}

/// Runs the binary under /usr/bin/time (and `perf stat` when asked and present).
fn run(bin: &Path, repo: &Path, count_instructions: bool) -> Run {
    let counts = tempfile::NamedTempFile::new().expect("tmp");
    let mut cmd = if count_instructions {
        let mut c = Command::new("perf");
        c.args(["stat", "-x", ",", "-e", "instructions,task-clock", "-o"])
            .arg(counts.path())
            .args(["/usr/bin/time", "-f", "%M %U %S"]);
        c
    } else {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-f", "%M %U %S"]);
        c
    };
    let children_before = children_cpu();
    let start = Instant::now();
    let out = check_of(&mut cmd, bin, repo)
        .output()
        .expect("run meshward under /usr/bin/time");
    let secs = start.elapsed().as_secs_f64();
    // From the kernel's accounting of waited-for children (the check, its git
    // processes, and /usr/bin/time itself, a fraction of a millisecond): time's own
    // report rounds to 10 ms, a tenth of the 1k check.
    let mut cpu = children_cpu() - children_before;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fields: Vec<f64> = stderr
        .lines()
        .last()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let [kb, _user, _sys] = fields[..] else {
        panic!("no RSS and CPU times in {stderr}");
    };
    let counts = std::fs::read_to_string(counts.path()).unwrap_or_default();
    let instructions = counted(&counts, "instructions");
    // Under perf, its own start-up is a child too: the check's CPU is perf's count.
    if let Some(msec) = counted(&counts, "task-clock") {
        cpu = msec / 1000.0;
    }
    Run {
        secs,
        cpu,
        rss_mb: kb / 1024.0,
        instructions,
        code: out.status.code().unwrap_or(-1),
    }
}

/// The floor: CPU seconds of one thread parsing every YAML file of both revisions.
fn parse_floor(repo: &Path) -> f64 {
    let base = tempfile::tempdir().expect("tmp");
    let archive = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "git -C '{}' archive HEAD~1 | tar -x -C '{}'",
            repo.display(),
            base.path().display()
        ))
        .status()
        .expect("git archive");
    assert!(archive.success(), "git archive HEAD~1");
    let files = |root: &Path| {
        let mut out = Vec::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                let p = e.path();
                if p.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "yaml") {
                    out.push(meshward::manifest::SourceFile {
                        path: p
                            .strip_prefix(root)
                            .expect("under root")
                            .display()
                            .to_string(),
                        bytes: std::fs::read(&p).expect("read"),
                    });
                }
            }
        }
        out
    };
    let revisions = [files(repo), files(base.path())];
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let start = Instant::now();
    let resources: usize = one_thread.install(|| {
        revisions
            .iter()
            .map(|f| {
                meshward::manifest::load(f, &Default::default())
                    .resources
                    .len()
            })
            .sum()
    });
    assert!(resources > 0, "the floor parsed nothing");
    start.elapsed().as_secs_f64()
}

/// Instructions of one check, its git processes included, counted by valgrind's
/// callgrind (exact, and the same on a loaded host: one run is enough), for a VM
/// whose perf has no counter. About 50 times slower than the check, so the policy
/// time bound is raised to its most (at 100k a package overran the default 30 s
/// under valgrind); a run that still fails where the timed ones passed is not the
/// check's count (None).
fn callgrind_instructions(bin: &Path, repo: &Path) -> Option<f64> {
    let out_dir = tempfile::tempdir().expect("tmp");
    let mut cmd = Command::new("valgrind");
    cmd.env("MESHWARD_POLICY_TIMEOUT_SECS", "3600")
        .args(["--tool=callgrind", "--trace-children=yes"])
        .arg(format!(
            "--callgrind-out-file={}/callgrind.%p",
            out_dir.path().display()
        ));
    let out = check_of(&mut cmd, bin, repo)
        .output()
        .expect("run meshward under valgrind (is it installed?)");
    // One "==PID== Collected : N" line per process.
    let total: f64 = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.split_once("Collected :"))
        .filter_map(|(_, n)| n.trim().parse::<f64>().ok())
        .sum();
    assert!(total > 0.0, "callgrind counted nothing");
    out.status.success().then_some(total)
}

/// The scaling table: one row per size, the check beside its parse floor.
fn scaling(bin: &Path, sizes: &[usize], runs: usize) {
    // Only where it counts instructions: a VM without a performance counter says
    // `<not supported>`, and perf itself would then only add its own CPU time.
    let perf = Command::new("perf")
        .args(["stat", "-x", ",", "-e", "instructions", "true"])
        .output()
        .is_ok_and(|o| counted(&String::from_utf8_lossy(&o.stderr), "instructions").is_some());
    // Without a counter, MESHWARD_BENCH_CALLGRIND=1 counts them with valgrind instead.
    let callgrind = !perf && std::env::var_os("MESHWARD_BENCH_CALLGRIND").is_some();
    println!("| resources per revision | wall | CPU | parse floor (CPU) | CPU / floor | CPU per resource | instructions per resource | peak RSS |");
    println!("|---|---|---|---|---|---|---|---|");
    for &namespaces in sizes {
        let dir = tempfile::tempdir().expect("tmp");
        let resources = generate(dir.path(), namespaces);
        // Side by side, run by run: what slows the machine for a while slows both.
        let (floors, checks): (Vec<f64>, Vec<Run>) = (0..runs)
            .map(|_| (parse_floor(dir.path()), run(bin, dir.path(), perf)))
            .unzip();
        assert!(checks.iter().all(|r| r.code == 0), "meshward failed");
        let med = |f: &dyn Fn(&Run) -> f64| median(checks.iter().map(f).collect());
        let floor = median(floors);
        let cpu = med(&|r| r.cpu);
        let counted = if callgrind {
            callgrind_instructions(bin, dir.path()).ok_or("(cut off under valgrind)")
        } else {
            checks
                .iter()
                .map(|r| r.instructions)
                .collect::<Option<Vec<f64>>>()
                .map(median)
                // A VM without a performance counter: perf says `<not supported>`.
                .ok_or("(no counter)")
        };
        let per_resource = counted
            .map(|n| format!("{:.0}", n / (2 * resources) as f64))
            .unwrap_or_else(str::to_string);
        println!(
            "| {resources} | {:.2} s | {cpu:.3} s | {floor:.3} s | {:.2}x | {:.1} µs | {per_resource} | {:.0} MiB |",
            med(&|r| r.secs),
            cpu / floor,
            cpu * 1e6 / (2 * resources) as f64,
            med(&|r| r.rss_mb),
        );
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let bin = Path::new(env!("CARGO_BIN_EXE_meshward"));
    let dir = tempfile::tempdir().expect("tmp");
    let root = work_dir(&dir);
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
    if let Some(sizes) = std::env::var("MESHWARD_BENCH_SCALING")
        .ok()
        .filter(|_| bench)
    {
        let sizes: Vec<usize> = sizes
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        scaling(bin, &sizes, runs);
        return;
    }
    let resources = generate(&root, namespaces);
    let mut times = Vec::new();
    let mut mems = Vec::new();
    for _ in 0..runs {
        let r = run(bin, &root, false);
        // The head commit introduces an unknown principal (a warning): exit 0.
        assert_eq!(r.code, 0, "meshward failed on the generated tree");
        times.push(r.secs);
        mems.push(r.rss_mb);
    }
    println!(
        "check_10k: {resources} resources per revision, base+head, {runs} runs: median {:.3} s, peak RSS median {:.0} MB (min {:.3} s, max {:.3} s)",
        median(times.clone()),
        median(mems),
        times.iter().cloned().fold(f64::MAX, f64::min),
        times.iter().cloned().fold(0.0, f64::max),
    );
}
