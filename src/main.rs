use clap::{Parser, Subcommand};
use meshward::analysis::CheckError;
use meshward::finding::FailOn;
use meshward::report::{self, Format, Verdict};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay`: the 16th of mimalloc.h's `mi_option_e` (libmimalloc-sys
/// names no constant for it; a test below checks it holds mimalloc's default).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// A command that runs once and exits keeps the memory it frees: mimalloc would give
/// it back to the system after a second and take it again as fresh zeroed pages a
/// moment later (at 100k resources, 0.7 to 1.4 s of system time in page faults).
/// The service, which lives on, returns it as usual.
fn keep_freed_memory() {
    // SAFETY: sets one of mimalloc's options to a documented value (-1: never purge);
    // option values are read atomically by the allocator.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

#[derive(Parser)]
#[command(
    name = "meshward",
    version,
    about = "Finds Kubernetes and Istio config that is wrong or applies nowhere"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a GitOps checkout (or the change between two revisions of it).
    Check {
        /// The checkout to check.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Base revision: findings get a status (introduced, existing, resolved) and
        /// only introduced ones fail the run.
        #[arg(long)]
        base: Option<String>,
        /// Head revision (default: the working tree).
        #[arg(long, requires = "base")]
        head: Option<String>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
        /// More policy folders (trusted like the built-ins).
        #[arg(long = "policies")]
        policies: Vec<PathBuf>,
        /// Telemetry evidence (JSON) for the mTLS rules.
        #[arg(long)]
        evidence: Option<PathBuf>,
        /// Ask this Prometheus for zero-plaintext evidence for every scope the change
        /// turns STRICT (credentials: MESHWARD_PROMETHEUS_BEARER_TOKEN, or _USERNAME
        /// and _PASSWORD).
        #[arg(long, value_name = "URL", conflicts_with = "evidence")]
        prometheus: Option<String>,
        /// The evidence window [default: the config file's evidence.prometheus.window, else 7d].
        #[arg(long, value_name = "DURATION", requires = "prometheus")]
        evidence_window: Option<String>,
        #[command(flatten)]
        prometheus_client: Box<meshward::cli::PrometheusClientArgs>,
        /// Severity at or above which findings fail the run [default: error, or the config file's].
        #[arg(long, value_enum)]
        fail_on: Option<FailOn>,
        /// Write the report here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// With --base, render every render root, not only those the change touches.
        #[arg(long)]
        render_all: bool,
    },
    /// Run the GitHub App service: webhooks in, a durable job queue, history stored.
    Serve(Box<meshward::cli::ServeArgs>),
    /// Apply the history store's database migrations.
    Migrate(meshward::cli::MigrateArgs),
    /// Show a repository's mesh coverage over time, from the history store.
    Trends(meshward::cli::TrendsArgs),
    /// Policy tools.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Evaluates a repository's own policies for a parent meshward, in a process of
    /// their own (request on stdin, one answer line per package on stdout).
    #[command(hide = true)]
    PolicyWorker,
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Run the `test_*` rules of `*_test.rego` files, like `opa test`.
    Test {
        /// Folder of policies and their tests (default: the built-in policies).
        dir: Option<PathBuf>,
    },
    /// Print the built-in rules as the README's markdown table (id, severity, what
    /// each catches).
    Rules,
}

fn main() -> ExitCode {
    // Never a backtrace for the user: a bug is reported in one line, exit 2.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("meshward: internal error: {info}");
    }));
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        keep_freed_memory();
        meshward::analysis::exits_after_check();
    }
    // The service logs at info unless MESHWARD_LOG says otherwise.
    let default_level = match cli.command {
        Command::Serve(_) | Command::Migrate(_) => "info",
        _ => "error",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::builder()
                .with_default_directive(default_level.parse().expect("level"))
                .with_env_var("MESHWARD_LOG")
                .from_env_lossy(),
        )
        .with_writer(std::io::stderr)
        .init();
    match std::panic::catch_unwind(|| run(cli)) {
        Ok(code) => code,
        Err(_) => ExitCode::from(2),
    }
}

/// `--prometheus URL`: that server, whatever the repository names; the window from
/// `--evidence-window`, else the repository's, else 7d.
fn prometheus_source(
    url: String,
    window: Option<String>,
    client: &meshward::cli::PrometheusClientArgs,
) -> anyhow::Result<std::sync::Arc<meshward::evidence::PrometheusSource>> {
    use anyhow::Context;
    use meshward::config::check_url;
    use meshward::evidence::prometheus::SourceSettings;
    check_url(&url)
        .map_err(|e| anyhow::anyhow!(e.replace("`url`", "--prometheus")))
        .context("--prometheus")?;
    if let Some(w) = &window {
        meshward::units::duration::parse(w)
            .map_err(|e| anyhow::anyhow!("--evidence-window: {e}"))?;
    }
    Ok(std::sync::Arc::new(
        meshward::evidence::PrometheusSource::new(SourceSettings {
            url: Some(url),
            url_from_repo: false,
            window_override: window,
            auth: client.auth()?,
            timeout: client.timeout(),
            ..SourceSettings::default()
        }),
    ))
}

fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Check {
            path,
            base,
            head,
            format,
            policies,
            evidence,
            prometheus,
            evidence_window,
            prometheus_client,
            fail_on,
            output,
            render_all,
        } => {
            let prometheus = match prometheus
                .map(|url| prometheus_source(url, evidence_window, &prometheus_client))
                .transpose()
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("meshward: error: {e:#}");
                    return ExitCode::from(2);
                }
            };
            let req = meshward::CheckRequest {
                path,
                base,
                head,
                policy_dirs: policies,
                evidence,
                prometheus,
                fail_on,
                today: chrono::Local::now().date_naive(),
                render_all,
            };
            let report = match meshward::check(&req) {
                Ok(r) => r,
                Err(CheckError::Config(e)) => {
                    eprintln!("meshward: config error: {e}");
                    return ExitCode::from(2);
                }
                Err(CheckError::Other(e)) => {
                    eprintln!("meshward: error: {e:#}");
                    return ExitCode::from(2);
                }
            };
            let color = output.is_none()
                && std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none();
            let rendered = report::render(&report, format, color);
            match output {
                Some(file) => {
                    if let Err(e) = std::fs::write(&file, rendered) {
                        eprintln!("meshward: error: cannot write {}: {e}", file.display());
                        return ExitCode::from(2);
                    }
                }
                None => print!("{rendered}"),
            }
            if let (Some(why), Verdict::Pass) =
                (&report.summary.nothing_to_check, report.summary.verdict)
            {
                eprintln!("meshward: {}: {why}", req.path.display());
                return ExitCode::from(2);
            }
            let code = match report.summary.verdict {
                Verdict::Pass => ExitCode::SUCCESS,
                Verdict::Fail => ExitCode::from(1),
            };
            // The process exits next: the system takes back the models of both
            // revisions at once, faster than they are freed piece by piece (40 ms at
            // 100k objects).
            std::mem::forget(report);
            code
        }
        Command::Serve(args) => match meshward::cli::serve_blocking(*args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("meshward: error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Migrate(args) => match meshward::cli::migrate_blocking(args) {
            Ok(msg) => {
                println!("{msg}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("meshward: error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Trends(args) => match meshward::cli::trends_blocking(args) {
            Ok(out) => {
                print!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("meshward: error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::PolicyWorker => match meshward::policy::serve_worker() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("meshward: policy worker: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Policy {
            command: PolicyCommand::Rules,
        } => {
            print!("{}", report::rules::markdown_table());
            ExitCode::SUCCESS
        }
        Command::Policy {
            command: PolicyCommand::Test { dir },
        } => match meshward::policy_test(dir.as_deref()) {
            Ok(report) => {
                for o in &report.outcomes {
                    match &o.detail {
                        None => println!("PASS {}: {}", o.file, o.name),
                        Some(d) => println!("FAIL {}: {}: {d}", o.file, o.name),
                    }
                }
                println!("{}", "-".repeat(72));
                println!("{} passed, {} failed", report.passed(), report.failed());
                if report.failed() == 0 && !report.outcomes.is_empty() {
                    ExitCode::SUCCESS
                } else {
                    if report.outcomes.is_empty() {
                        eprintln!("meshward: no test_* rules found");
                    }
                    ExitCode::from(1)
                }
            }
            Err(e) => {
                eprintln!("meshward: error: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_mimallocs_purge_delay() {
        // mimalloc 3's default purge delay, 1000 ms, which no neighbouring option has.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        let neighbours = unsafe {
            [
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY - 1),
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY + 1),
            ]
        };
        assert_eq!(delay, 1000);
        assert!(neighbours.iter().all(|n| *n != 1000), "{neighbours:?}");
    }
}
