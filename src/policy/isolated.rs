//! A repository's own policies are evaluated in a child process, `meshward
//! policy-worker`, under an address-space limit: Rego that allocates without bound
//! (`numbers.range(1, 2e9)`) ends that process, and meshward, with every other job in
//! flight, goes on. The worker compiles what the parent compiled and answers one line
//! per package, in order, so when it dies the package it was in is known: that one is
//! reported as stopped, and the packages after it run in a new worker.

use super::{eval_package, set_timeout, Outcome, Policies, PolicyLimits, PolicySource};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// The first line on the worker's stdin; the policy input follows it as JSON.
#[derive(Serialize, Deserialize)]
struct Request {
    trusted: Vec<PolicySource>,
    untrusted: Vec<PolicySource>,
    /// The packages to evaluate, in this order: one answer line each.
    packages: Vec<String>,
    timeout_ms: u64,
}

/// What the worker may print in all: findings, not data.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;
/// Time to start, read the input and compile, besides each package's own limit.
const START_MARGIN: Duration = Duration::from_secs(30);

/// The running binary, when it is meshward (whose `policy-worker` command this is);
/// None elsewhere (a test binary, a library user), where policies run in-process.
pub(super) fn runner() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    (exe.file_name()? == "meshward").then_some(exe)
}

/// How a worker ended before answering for every package it was given.
enum Ended {
    Spawn(String),
    TimedOut(Duration),
    OutOfMemory,
    TooMuchOutput,
    Crashed(String),
}

impl Ended {
    fn describe(&self, limits: &PolicyLimits) -> String {
        match self {
            Ended::Spawn(e) => format!("the policy worker could not be started ({e}), so the repository's policies did not run"),
            Ended::TimedOut(after) => format!(
                "stopped after {} s, so its rules did not run: the evaluation did not finish in time (policy.timeout_seconds, {} s per package). Look for a rule that iterates over a product of large collections.",
                after.as_secs(),
                limits.timeout.as_secs()
            ),
            Ended::OutOfMemory => format!(
                "stopped: evaluating it needed more than the policy memory limit of {} MiB (policy.max_memory_mib), so its rules did not run. Look for a rule that builds a large collection (numbers.range, a comprehension over a product).",
                limits.max_memory_bytes / (1024 * 1024)
            ),
            Ended::TooMuchOutput => format!(
                "its findings were more than {} MiB, so they were not read: its rules did not run as far as meshward can tell",
                MAX_ANSWER_BYTES / (1024 * 1024)
            ),
            Ended::Crashed(why) => format!("the policy worker ended while evaluating it ({why}), so its rules did not run"),
        }
    }
}

/// Evaluates the packages of `policies` at `chosen` (indices, in order) in workers of
/// `runner`: one outcome per chosen package, in that order.
pub(super) fn evaluate(
    policies: &Policies,
    runner: &Path,
    input: regorus::Value,
    chosen: &[usize],
    limits: &PolicyLimits,
) -> Vec<Outcome> {
    let all = chosen.len();
    let name = |i: usize| policies.packages[chosen[i]].0.clone();
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(all);
    while outcomes.len() < all {
        let rest: Vec<String> = (outcomes.len()..all).map(name).collect();
        let (answered, ended) = run_worker(policies, runner, &input, rest, limits);
        outcomes.extend(answered);
        let Some(ended) = ended else { continue };
        if outcomes.len() >= all {
            break;
        }
        let message = ended.describe(limits);
        tracing::warn!(
            package = name(outcomes.len()),
            message,
            "policy worker stopped"
        );
        if matches!(ended, Ended::Spawn(_)) {
            // No worker will start for the others either.
            outcomes.resize_with(all, || Outcome::Failed(message.clone()));
        } else {
            outcomes.push(Outcome::Failed(message));
        }
    }
    outcomes
}

/// One worker over `packages`: the outcomes it answered, and why it stopped early
/// (None: it answered for all).
fn run_worker(
    policies: &Policies,
    runner: &Path,
    input: &regorus::Value,
    packages: Vec<String>,
    limits: &PolicyLimits,
) -> (Vec<Outcome>, Option<Ended>) {
    let count = packages.len();
    let request = Request {
        trusted: policies.trusted.sources.clone(),
        untrusted: policies.untrusted.clone(),
        packages,
        timeout_ms: limits.timeout.as_millis() as u64,
    };
    let mut cmd = Command::new(runner);
    cmd.arg("policy-worker")
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::child::limit_memory(&mut cmd, limits.max_memory_bytes);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return (Vec::new(), Some(Ended::Spawn(e.to_string()))),
    };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return (Vec::new(), Some(Ended::Spawn("no pipes".into())));
    };
    let input = input.clone();
    // A worker that dies early closes its stdin: the write fails, and that is all.
    let writer = std::thread::spawn(move || {
        let mut stdin = std::io::BufWriter::new(stdin);
        serde_json::to_writer(&mut stdin, &request)
            .map_err(std::io::Error::other)
            .and_then(|_| stdin.write_all(b"\n"))
            .and_then(|_| serde_json::to_writer(&mut stdin, &input).map_err(std::io::Error::other))
            .and_then(|_| stdin.flush())
    });
    let reader = std::thread::spawn(move || read_answers(stdout));
    let err_reader = crate::child::drain(stderr, 16 * 1024);
    let deadline = limits.timeout.saturating_mul(count as u32) + START_MARGIN;
    let status = match crate::child::wait_within(&mut child, deadline) {
        Ok(Some(status)) => Ok(status),
        Ok(None) => Err(Ended::TimedOut(deadline)),
        Err(e) => Err(Ended::Crashed(e.to_string())),
    };
    let _ = writer.join();
    let (answers, overflow) = reader.join().unwrap_or_default();
    let (err, _) = err_reader.join().unwrap_or_default();
    if answers.len() >= count {
        return (answers, None);
    }
    let ended = match status {
        Err(ended) => ended,
        Ok(_) if overflow => Ended::TooMuchOutput,
        Ok(status) => why_it_ended(status, &String::from_utf8_lossy(&err)),
    };
    (answers, Some(ended))
}

fn read_answers(stdout: impl Read) -> (Vec<Outcome>, bool) {
    let mut answers = Vec::new();
    let mut total = 0usize;
    let mut lines = BufReader::new(stdout.take(MAX_ANSWER_BYTES as u64 + 1));
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
        if total > MAX_ANSWER_BYTES || !line.ends_with('\n') {
            return (answers, total > MAX_ANSWER_BYTES);
        }
        match serde_json::from_str::<Outcome>(&line) {
            Ok(o) => answers.push(o),
            Err(_) => break,
        }
    }
    (answers, false)
}

fn why_it_ended(status: ExitStatus, stderr: &str) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    // Rust's allocation-failure handler says so, then aborts; an OOM killer's
    // SIGKILL says nothing.
    if stderr.contains("memory allocation of")
        || stderr.contains("unable to allocate")
        || status.signal() == Some(libc::SIGKILL)
    {
        return Ended::OutOfMemory;
    }
    let said = stderr.lines().last().unwrap_or("").trim();
    let how = match status.signal() {
        Some(sig) => format!("signal {sig}"),
        None => format!("{status}"),
    };
    Ended::Crashed(if said.is_empty() {
        how
    } else {
        format!("{how}: {}", super::brief(said))
    })
}

/// `meshward policy-worker`: reads a request and the input on stdin, answers one
/// line per package on stdout.
pub fn serve_worker() -> Result<()> {
    let mut stdin = BufReader::new(std::io::stdin().lock());
    let mut header = String::new();
    stdin
        .read_line(&mut header)
        .context("reading the request")?;
    let request: Request = serde_json::from_str(&header).context("the request does not parse")?;
    drop(header);
    let mut text = String::new();
    stdin
        .read_to_string(&mut text)
        .context("reading the input")?;
    let input = regorus::Value::from_json_str(&text)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("the input does not parse")?;
    drop(text);
    let policies = Policies::compile(&request.trusted, &request.untrusted)?;
    let mut engine = policies.engine;
    set_timeout(&mut engine, Duration::from_millis(request.timeout_ms));
    engine.set_input(input);
    let mut out = std::io::stdout().lock();
    for package in &request.packages {
        let outcome = eval_package(&mut engine, package);
        serde_json::to_writer(&mut out, &outcome)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}
