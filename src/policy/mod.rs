//! The policy engine: Rego (regorus), compiled once, evaluated per revision.

pub(crate) mod input;
mod isolated;
mod test_runner;
mod value;

pub use isolated::serve_worker;

pub use test_runner::{run_tests, TestOutcome, TestReport};

use anyhow::{Context, Result};
use include_dir::{include_dir, Dir};
use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

static BUILTIN: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/policies");

/// One Rego file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySource {
    /// Where it came from: `builtin:selector.rego`, `.meshward/policies/x.rego`, a path.
    pub path: String,
    pub text: String,
}

impl PolicySource {
    pub fn package(&self) -> Option<String> {
        self.text.lines().find_map(|l| {
            let l = l.trim();
            l.strip_prefix("package ")
                .map(|p| p.split_whitespace().next().unwrap_or("").to_string())
        })
    }

    fn defines(&self, rule: &str) -> bool {
        self.text.lines().any(|l| {
            l.strip_prefix(rule).is_some_and(|rest| {
                rest.starts_with([' ', '\t', '[', ':', '=', '{']) || rest.is_empty()
            })
        })
    }

    pub fn is_test(&self) -> bool {
        self.path.ends_with("_test.rego")
    }

    fn marked_per_object(&self) -> bool {
        self.text.lines().any(|l| l.trim() == PER_OBJECT_MARK)
    }

    /// Whether a check whose revisions hold the kinds `held` says yes to needs this
    /// file: not when it is marked for kinds (`KINDS_MARK`) none of which is held.
    fn needed_with(&self, held: &dyn Fn(&str) -> bool) -> bool {
        let kinds = self.marked_kinds();
        kinds.is_empty() || kinds.into_iter().any(held)
    }

    /// The kinds the file is marked for (`KINDS_MARK`), if any.
    fn marked_kinds(&self) -> Vec<&str> {
        self.text
            .lines()
            .filter_map(|l| l.trim().strip_prefix(KINDS_MARK))
            .flat_map(|kinds| kinds.split(|c: char| c == ',' || c.is_whitespace()))
            .filter(|k| !k.is_empty())
            .collect()
    }
}

/// The line a built-in policy file carries when what its package finds on an object
/// depends on that object's body alone (and model facts drawn from it), and every
/// finding names its object: base and head then share the findings on the objects
/// they hold alike, and the package runs on parts of a revision side by side.
const PER_OBJECT_MARK: &str = "# meshward: per-object";

/// The line (`# meshward: only-for-kinds Sidecar`) a built-in policy file carries
/// when its rules find nothing unless a revision holds an object of one of the kinds
/// named (they read only those objects and model facts drawn from them, and call
/// only their own file's helpers and those of files without the mark): a check
/// whose revisions hold none does not compile it. Compiling the built-in policies is
/// most of what a small check costs.
const KINDS_MARK: &str = "# meshward: only-for-kinds ";

/// Which of the packages one evaluation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Packages {
    /// Those that are not per-object (every one, where none is): they read the
    /// revision as a whole.
    Joined,
    /// Only the per-object ones.
    PerObject,
}

/// The built-in policies, embedded in the binary so a fresh install needs nothing else.
pub fn builtin() -> Vec<PolicySource> {
    let mut out: Vec<PolicySource> = BUILTIN
        .files()
        .filter(|f| f.path().extension().is_some_and(|e| e == "rego"))
        .filter_map(|f| {
            Some(PolicySource {
                path: format!("builtin:{}", f.path().display()),
                text: f.contents_utf8()?.to_string(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Every `.rego` file in `dir` and its subfolders (sorted), named by
/// `display_prefix/relative path`.
pub fn load_dir(dir: &Path, display_prefix: &str) -> Result<Vec<PolicySource>> {
    let mut out = Vec::new();
    // Subfolders too, as `.meshward/policies/` is read from a revision; symbolic
    // links are not followed (file_type does not follow them).
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, rel)) = stack.pop() {
        let entries = std::fs::read_dir(&folder)
            .with_context(|| format!("cannot read policy folder {}", folder.display()))?;
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            let name = entry.file_name().to_string_lossy().to_string();
            let rel_name = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if kind.is_dir() && !name.starts_with('.') {
                if rel_name.matches('/').count() >= 16 {
                    anyhow::bail!(
                        "policy folder {} is nested more than 16 levels deep; meshward reads no deeper",
                        path.display()
                    );
                }
                stack.push((path, rel_name));
            } else if path.extension().is_some_and(|e| e == "rego") && kind.is_file() {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                out.push(PolicySource {
                    path: if display_prefix.is_empty() {
                        path.display().to_string()
                    } else {
                        format!("{display_prefix}/{rel_name}")
                    },
                    text,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A finding as a policy returns it.
#[derive(Debug, Clone, Deserialize)]
pub struct RawFinding {
    pub rule: String,
    pub severity: String,
    pub resource: Option<String>,
    #[serde(default)]
    pub path: Vec<serde_json::Value>,
    pub message: String,
    #[serde(default)]
    pub istio_code: Option<String>,
    #[serde(default)]
    pub subjects: Vec<String>,
}

/// A policy that could not be loaded or evaluated: reported, never silently dropped.
#[derive(Debug, Clone)]
pub struct PolicyProblem {
    pub file: String,
    pub message: String,
}

/// How long one package may take on one revision, unless the operator says otherwise.
const EVAL_LIMIT: Duration = Duration::from_secs(30);

/// Limits on evaluating policies; a repository's `policy:` settings may lower them.
#[derive(Debug, Clone)]
pub struct PolicyLimits {
    /// How long one package may take on one revision before it is stopped.
    pub timeout: Duration,
    /// Address space of the process that evaluates a repository's own policies.
    pub max_memory_bytes: u64,
    /// The meshward binary whose hidden `policy-worker` command evaluates when the
    /// repository has policies of its own (a child process under `max_memory_bytes`,
    /// so a policy that allocates without bound ends there, not in meshward). None:
    /// in this process, bounded by time only.
    pub runner: Option<PathBuf>,
}

impl Default for PolicyLimits {
    fn default() -> Self {
        PolicyLimits {
            timeout: timeout_ceiling(),
            max_memory_bytes: memory_ceiling(),
            runner: isolated::runner(),
        }
    }
}

/// The operator's bound on one package's evaluation of one revision:
/// `MESHWARD_POLICY_TIMEOUT_SECS` (1 to 3600), else 30 s. Raised for a slow host
/// (or a check run under valgrind); a repository may only lower it.
fn timeout_ceiling() -> Duration {
    operator_number("MESHWARD_POLICY_TIMEOUT_SECS")
        .map_or(EVAL_LIMIT, |s| Duration::from_secs(s.clamp(1, 3600)))
}

/// A whole number the operator set in the environment variable `name`.
fn operator_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The operator's ceiling on the policy worker's memory: `MESHWARD_POLICY_MEMORY_MIB`
/// (at least 256), else 3 GiB.
fn memory_ceiling() -> u64 {
    const MIB: u64 = 1024 * 1024;
    operator_number("MESHWARD_POLICY_MEMORY_MIB")
        .map_or(3072 * MIB, |m| m.max(256).saturating_mul(MIB))
}

/// Compiled policies, ready to evaluate any number of inputs.
#[derive(Clone)]
pub struct Policies {
    engine: regorus::Engine,
    /// Packages (`data.x.y`) that define `findings`, with the file that says so.
    packages: Vec<(String, String)>,
    /// Per `packages` entry: whether it is per-object (see `PER_OBJECT_MARK`).
    per_object: Vec<bool>,
    /// What was compiled, for a child process to compile the same.
    trusted: Arc<Trusted>,
    untrusted: Vec<PolicySource>,
    pub problems: Vec<PolicyProblem>,
    pub count: usize,
}

fn new_engine(timeout: Duration) -> regorus::Engine {
    let mut engine = regorus::Engine::new();
    set_timeout(&mut engine, timeout);
    engine
}

fn set_timeout(engine: &mut regorus::Engine, limit: Duration) {
    engine.set_execution_timer_config(regorus::utils::limits::ExecutionTimerConfig {
        limit,
        check_interval: NonZeroU32::new(1000).unwrap_or(NonZeroU32::MIN),
    });
}

/// What evaluating one package's `findings` gave.
#[derive(Debug, Serialize, Deserialize)]
enum Outcome {
    /// Its value as JSON (null when undefined).
    Value(serde_json::Value),
    Failed(String),
}

impl Policies {
    /// Compiles `trusted` (built-in: a failure is an error) and then `untrusted`
    /// (from the repository: a file that does not compile is a problem, reported,
    /// and the rest still run). Test files are not loaded for checks.
    pub fn compile(trusted: &[PolicySource], untrusted: &[PolicySource]) -> Result<Policies> {
        Self::compile_for(trusted, untrusted, &|_| true)
    }

    /// As [`Policies::compile`], for a check whose revisions hold the kinds `held`
    /// says yes to: where every file is meshward's own, a file marked for other kinds
    /// (`KINDS_MARK`) is left out. A file of the repository's or the operator's may
    /// call any built-in rule, so with one every file is compiled.
    pub(crate) fn compile_for(
        trusted: &[PolicySource],
        untrusted: &[PolicySource],
        held: &dyn Fn(&str) -> bool,
    ) -> Result<Policies> {
        let needed = needed_files(trusted, untrusted, held);
        Self::on(Trusted::compiled(&needed)?, trusted, untrusted)
    }

    /// `untrusted` compiled onto `trusted`: the files of `all_trusted` a check needs,
    /// compiled (every one of them counts).
    fn on(
        trusted: Arc<Trusted>,
        all_trusted: &[PolicySource],
        untrusted: &[PolicySource],
    ) -> Result<Policies> {
        let mut engine = trusted.engine.clone();
        let mut packages = trusted.packages.clone();
        let mut problems = Vec::new();
        // Every file counts as loaded, compiled or not: the report says the same
        // number whatever kinds a change holds.
        let mut count = all_trusted.iter().filter(|p| !p.is_test()).count();
        let mut accepted = Vec::new();
        for p in untrusted.iter().filter(|p| !p.is_test()) {
            let mut candidate = engine.clone();
            // Some errors (unsafe variables, conflicts) only show when the modules are
            // analysed together, so each file is analysed before it is accepted.
            let added = candidate
                .add_policy(p.path.clone(), p.text.clone())
                .map_err(|e| anyhow::anyhow!("{e}"))
                .and_then(|_| prepare(&mut candidate));
            match added {
                Ok(_) => {
                    engine = candidate;
                    count += 1;
                    register(p, &mut packages);
                    accepted.push(p.clone());
                }
                Err(e) => problems.push(PolicyProblem {
                    file: p.path.clone(),
                    message: format!("policy does not compile, so its rules did not run: {e}"),
                }),
            }
        }
        packages.sort();
        packages.dedup();
        // Only where every compiled file is meshward's own: a file of the
        // repository's or the operator's may add rules to any package (from a parent
        // package, too), and such rules may read other objects.
        let only_built_in = accepted.is_empty()
            && trusted
                .sources
                .iter()
                .all(|p| p.path.starts_with("builtin:"));
        let per_object = packages
            .iter()
            .map(|(package, _)| {
                let of = |p: &&PolicySource| p.package().as_deref() == Some(package.as_str());
                let mut files = trusted.sources.iter().filter(of).peekable();
                only_built_in
                    && files.peek().is_some()
                    && files.all(PolicySource::marked_per_object)
            })
            .collect();
        Ok(Policies {
            engine,
            packages,
            per_object,
            trusted,
            untrusted: accepted,
            problems,
            count,
        })
    }

    /// Whether any package is per-object: only then do inputs of part of a revision
    /// (`Packages::PerObject`) find anything.
    pub(crate) fn has_per_object(&self) -> bool {
        self.per_object.iter().any(|p| *p)
    }

    /// Evaluates the chosen packages' `findings` on each input, side by side on every
    /// core: one (findings, problems) per request, in order. A package that fails is a
    /// problem; the others still report. With policies of the repository's own (which
    /// may add rules to any package), in a child process per request when
    /// `limits.runner` names one.
    pub(crate) fn evaluate_many(
        &self,
        requests: Vec<(regorus::Value, Packages)>,
        limits: &PolicyLimits,
    ) -> Vec<(Vec<RawFinding>, Vec<PolicyProblem>)> {
        use rayon::prelude::*;
        let chosen: Vec<Vec<usize>> = requests
            .iter()
            .map(|(_, which)| {
                (0..self.packages.len())
                    .filter(|&i| match which {
                        Packages::Joined => !self.per_object[i],
                        Packages::PerObject => self.per_object[i],
                    })
                    .collect()
            })
            .collect();
        let outcomes: Vec<Vec<Outcome>> = match (&limits.runner, self.untrusted.is_empty()) {
            (Some(runner), false) => requests
                .into_par_iter()
                .zip(&chosen)
                .map(|((input, _), packages)| {
                    isolated::evaluate(self, runner, input, packages, limits)
                })
                .collect(),
            _ => {
                // One task per input, side by side: at 100k resources a revision's
                // packages together take about as long as the per-object parts.
                requests
                    .par_iter()
                    .zip(&chosen)
                    .with_max_len(1)
                    .map(|((input, _), packages)| {
                        let mut engine = self.engine.clone();
                        set_timeout(&mut engine, limits.timeout);
                        engine.set_input(input.clone());
                        let names: Vec<&str> = packages
                            .iter()
                            .map(|&p| self.packages[p].0.as_str())
                            .collect();
                        eval_packages(&mut engine, &names)
                    })
                    .collect()
            }
        };
        chosen
            .iter()
            .zip(outcomes)
            .map(|(packages, outcomes)| {
                let mut findings = Vec::new();
                let mut problems = Vec::new();
                for (&p, outcome) in packages.iter().zip(outcomes) {
                    let (package, file) = &self.packages[p];
                    interpret(package, file, outcome, &mut findings, &mut problems);
                }
                (findings, problems)
            })
            .collect()
    }
}

/// The files of `trusted` (test files left out) a check whose revisions hold the
/// kinds `held` says yes to needs: where every file is meshward's own, not those
/// marked for other kinds (`KINDS_MARK`).
fn needed_files(
    trusted: &[PolicySource],
    untrusted: &[PolicySource],
    held: &dyn Fn(&str) -> bool,
) -> Vec<PolicySource> {
    let loaded = trusted.iter().filter(|p| !p.is_test());
    let only_ours = untrusted.iter().all(PolicySource::is_test)
        && loaded.clone().all(|p| p.path.starts_with("builtin:"));
    loaded
        .filter(|p| !only_ours || p.needed_with(held))
        .cloned()
        .collect()
}

/// The trusted policies (built-in and the operator's) a check needs, compiled: the
/// same for every check of a process that needs the same files, so the service (which
/// compiles every file) compiles them once, not for each job (about 25 ms of CPU and
/// 13 MB of scheduling and hoisting tables each time).
pub(crate) struct Trusted {
    /// What was compiled (test files left out), in order.
    pub(crate) sources: Vec<PolicySource>,
    /// Prepared: each clone evaluates without compiling again.
    engine: regorus::Engine,
    /// Packages that define `findings`, with the file that says so.
    packages: Vec<(String, String)>,
}

impl Trusted {
    /// Sets of trusted policies kept: a process has one (`serve` compiles every file
    /// for every repository; tests have a few more).
    const KEPT: usize = 4;

    /// `sources` compiled, or as compiled for an earlier check of this process.
    fn compiled(sources: &[PolicySource]) -> Result<Arc<Trusted>> {
        static KEPT: std::sync::Mutex<Vec<Arc<Trusted>>> = std::sync::Mutex::new(Vec::new());
        let sources: Vec<PolicySource> = sources.iter().filter(|p| !p.is_test()).cloned().collect();
        let kept = |list: &[Arc<Trusted>], sources: &[PolicySource]| {
            list.iter().find(|t| t.sources == sources).cloned()
        };
        if let Some(found) = KEPT.lock().ok().and_then(|list| kept(&list, &sources)) {
            return Ok(found);
        }
        let compiled = Arc::new(Self::compile(sources)?);
        if let Ok(mut list) = KEPT.lock() {
            // Another check may have compiled the same meanwhile: one copy is kept.
            if let Some(found) = kept(&list, &compiled.sources) {
                return Ok(found);
            }
            if list.len() == Self::KEPT {
                list.remove(0);
            }
            list.push(compiled.clone());
        }
        Ok(compiled)
    }

    /// `sources` (no test file among them) compiled.
    fn compile(sources: Vec<PolicySource>) -> Result<Trusted> {
        let mut engine = new_engine(EVAL_LIMIT);
        let mut packages = Vec::new();
        for p in &sources {
            engine
                .add_policy(p.path.clone(), p.text.clone())
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("policy {} does not compile", p.path))?;
            register(p, &mut packages);
        }
        prepare(&mut engine).context("the built-in policies do not compile")?;
        Ok(Trusted {
            sources,
            engine,
            packages,
        })
    }
}

/// Evaluates `packages` on one engine: together in one query when there are several
/// (what they share, and regorus's setup of an evaluation, done once). When that
/// query fails or runs out of time, each package is evaluated on its own engine, side
/// by side, each within the time limit, so that a failure names its package and the
/// others still report; so is one that came back undefined, which may also mean it
/// has no `findings` rule at all (an error on its own).
fn eval_packages(engine: &mut regorus::Engine, packages: &[&str]) -> Vec<Outcome> {
    use rayon::prelude::*;
    if let [one] = packages {
        return vec![eval_package(engine, one)];
    }
    let mut outcomes: Vec<Option<Outcome>> = match eval_together(engine, packages) {
        Ok(outcomes) => outcomes,
        Err(why) => {
            tracing::debug!(why, "packages evaluated one by one");
            packages.iter().map(|_| None).collect()
        }
    };
    let again: Vec<(usize, Outcome)> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.is_none())
        .map(|(i, _)| i)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|i| (i, eval_package(&mut engine.clone(), packages[i])))
        .collect();
    for (i, outcome) in again {
        outcomes[i] = Some(outcome);
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or(Outcome::Value(serde_json::Value::Null)))
        .collect()
}

/// Each package's `findings` from one query (None: undefined); Err says why the
/// query could not tell.
fn eval_together(
    engine: &mut regorus::Engine,
    packages: &[&str],
) -> Result<Vec<Option<Outcome>>, String> {
    let plain = |p: &&str| {
        p.split('.').all(|s| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    if !packages.iter().all(plain) {
        return Err("a package name is not a plain path".to_string());
    }
    let started = std::time::Instant::now();
    // Per package an array of its value, empty when undefined: the query always is.
    let each: Vec<String> = packages
        .iter()
        .map(|p| format!("[f | f := data.{p}.findings]"))
        .collect();
    let results = engine
        .eval_query(format!("x := [{}]", each.join(", ")), false)
        .map_err(|e| brief(&e.to_string()))?;
    let unexpected = || "the query returned an unexpected shape".to_string();
    let [result] = results.result.as_slice() else {
        return Err(unexpected());
    };
    let regorus::Value::Array(values) = &result.bindings["x"] else {
        return Err(unexpected());
    };
    if values.len() != packages.len() {
        return Err(unexpected());
    }
    let mut out = Vec::with_capacity(packages.len());
    for value in values.iter() {
        let regorus::Value::Array(found) = value else {
            return Err(unexpected());
        };
        out.push(match found.first() {
            None => None,
            Some(v) => Some(Outcome::Value(
                serde_json::to_value(v).map_err(|e| e.to_string())?,
            )),
        });
    }
    tracing::debug!(
        packages = packages.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "packages evaluated together"
    );
    Ok(out)
}

fn eval_package(engine: &mut regorus::Engine, package: &str) -> Outcome {
    let started = std::time::Instant::now();
    let rule = format!("data.{package}.findings");
    let outcome = match engine.eval_rule(rule.clone()) {
        Err(e) => Outcome::Failed(format!(
            "evaluating {rule} failed, so its rules did not run: {}",
            brief(&e.to_string())
        )),
        Ok(regorus::Value::Undefined) => Outcome::Value(serde_json::Value::Null),
        Ok(value) => match serde_json::to_value(&value) {
            Ok(json) => Outcome::Value(json),
            Err(e) => Outcome::Failed(format!("{rule} returned a value that is not JSON: {e}")),
        },
    };
    tracing::debug!(
        package,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "package evaluated"
    );
    outcome
}

fn interpret(
    package: &str,
    file: &str,
    outcome: Outcome,
    findings: &mut Vec<RawFinding>,
    problems: &mut Vec<PolicyProblem>,
) {
    let problem = |message: String| PolicyProblem {
        file: file.to_string(),
        message,
    };
    let items = match outcome {
        Outcome::Failed(message) => return problems.push(problem(message)),
        Outcome::Value(serde_json::Value::Null) => return,
        Outcome::Value(serde_json::Value::Array(items)) => items,
        Outcome::Value(other) => vec![other],
    };
    for item in items {
        match serde_json::from_value::<RawFinding>(item.clone()) {
            Ok(f) => findings.push(f),
            Err(e) => problems.push(problem(format!(
                "data.{package}.findings returned a malformed finding ({e}): {item}"
            ))),
        }
    }
}

/// An engine error as a finding can carry it: regorus quotes whole values (a
/// workload of the model, twice), which would drown the PR comment.
fn brief(error: &str) -> String {
    const MAX: usize = 600;
    let text = error.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Analyses the loaded modules once, so every clone evaluates without redoing it.
fn prepare(engine: &mut regorus::Engine) -> Result<()> {
    engine.set_input(regorus::Value::new_object());
    engine
        .eval_query("true".to_string(), false)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn register(p: &PolicySource, packages: &mut Vec<(String, String)>) {
    if let Some(pkg) = p.package() {
        if p.defines("findings") {
            packages.push((pkg, p.path.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(path: &str, text: &str) -> PolicySource {
        PolicySource {
            path: path.into(),
            text: text.into(),
        }
    }

    /// The rules that found something on `input`, evaluated in this process.
    fn rules_found(policies: &Policies, input: &str) -> Vec<String> {
        let limits = PolicyLimits {
            runner: None,
            ..PolicyLimits::default()
        };
        let input = regorus::Value::from_json_str(input).expect("input");
        let mut results = policies.evaluate_many(vec![(input, Packages::Joined)], &limits);
        let (found, problems) = results.pop().expect("one result");
        assert!(problems.is_empty(), "{problems:?}");
        let mut rules: Vec<String> = found.into_iter().map(|f| f.rule).collect();
        rules.sort();
        rules.dedup();
        rules
    }

    /// Packages are evaluated together on one engine; one that fails is still named
    /// alone, and the others' findings are kept.
    #[test]
    fn a_package_that_fails_among_others_is_named_and_the_others_report() {
        let finds = |package: &str, rule: &str| {
            source(
                &format!("{package}.rego"),
                &format!(
                    "package {package}

import rego.v1

findings contains f if {{
	some r in input.resources
	f := {{\"rule\": \"{rule}\", \"severity\": \"notice\", \"resource\": r.id, \"message\": \"seen\"}}
}}
"
                ),
            )
        };
        // Two resources of one kind: the object's key is generated twice.
        let fails = source(
            "fails.rego",
            "package fails

import rego.v1

by_kind := {r.kind: r | some r in input.resources}

findings contains f if {
	some kind, _ in by_kind
	f := {\"rule\": \"fails/never\", \"severity\": \"error\", \"message\": kind}
}
",
        );
        // Read as defining `findings` (a line of its text begins so), it has no such
        // rule: evaluating it is an error, as on its own.
        let none = source(
            "none.rego",
            "package none\n\nimport rego.v1\n\nabout := `\nfindings: see the other packages\n`\n",
        );
        let trusted = [
            finds("first", "first/seen"),
            fails,
            finds("last", "last/seen"),
            none,
        ];
        let policies = Policies::compile(&trusted, &[]).expect("compile");
        let limits = PolicyLimits {
            runner: None,
            ..PolicyLimits::default()
        };
        let one = r#"{"resources": [{"id": "Namespace/a", "kind": "Namespace"}]}"#;
        let two = r#"{"resources": [{"id": "Namespace/a", "kind": "Namespace"}, {"id": "Namespace/b", "kind": "Namespace"}]}"#;
        let requests = [one, two]
            .iter()
            .map(|i| {
                (
                    regorus::Value::from_json_str(i).expect("input"),
                    Packages::Joined,
                )
            })
            .collect();
        let results = policies.evaluate_many(requests, &limits);
        let rules = |found: &[RawFinding]| {
            let mut r: Vec<String> = found.iter().map(|f| f.rule.clone()).collect();
            r.sort();
            r
        };
        let files = |problems: &[PolicyProblem]| {
            let mut f: Vec<String> = problems.iter().map(|p| p.file.clone()).collect();
            f.sort();
            f
        };
        let (found, problems) = &results[0];
        assert_eq!(rules(found), ["fails/never", "first/seen", "last/seen"]);
        assert_eq!(files(problems), ["none.rego"], "{problems:?}");
        let (found, problems) = &results[1];
        assert_eq!(
            rules(found),
            ["first/seen", "first/seen", "last/seen", "last/seen"]
        );
        assert_eq!(files(problems), ["fails.rego", "none.rego"], "{problems:?}");
        let failed = problems.iter().find(|p| p.file == "fails.rego");
        assert!(
            failed.is_some_and(|p| p.message.contains("data.fails.findings failed")),
            "{problems:?}"
        );
    }

    /// The service checks one repository after another: the built-in and operator
    /// policies are compiled for the first and reused, and what one repository adds
    /// stays with its own check.
    #[test]
    fn trusted_policies_are_compiled_once_and_repository_policies_stay_with_their_check() {
        // A file that says `rule` of every Namespace.
        let every_namespace = |path: &str, package: &str, rule: &str| {
            source(
                path,
                &format!(
                    "package {package}

import rego.v1

findings contains f if {{
	some r in input.resources
	r.kind == \"Namespace\"
	f := {{\"rule\": \"{rule}\", \"severity\": \"notice\", \"resource\": r.id, \"message\": \"seen\"}}
}}
"
                ),
            )
        };
        let operator = every_namespace(
            "/etc/meshward/policies/operator.rego",
            "operator.every_namespace",
            "operator/seen",
        );
        let repository = every_namespace(
            ".meshward/policies/own.rego",
            "own.every_namespace",
            "own/seen",
        );
        let mut trusted = builtin();
        trusted.push(operator);
        let input = r#"{"resources": [{"id": "Namespace/shop", "kind": "Namespace", "apiVersion": "v1", "name": "shop", "namespace": null, "file": "ns.yaml", "line": 1, "body": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}}], "by_kind": {}, "model": {}, "base": null, "evidence": null, "config": {}}"#;

        let first =
            Policies::compile(&trusted, std::slice::from_ref(&repository)).expect("compile");
        assert!(first.problems.is_empty(), "{:?}", first.problems);
        let second = Policies::compile(&trusted, &[]).expect("compile");
        assert!(
            Arc::ptr_eq(&first.trusted, &second.trusted),
            "the trusted policies were compiled again"
        );
        assert_eq!(rules_found(&first, input), ["operator/seen", "own/seen"]);
        assert_eq!(rules_found(&second, input), ["operator/seen"]);
        assert_eq!(second.count + 1, first.count);

        // Other trusted policies are compiled for themselves.
        let built_in = Policies::compile(&builtin(), &[]).expect("compile");
        assert!(!Arc::ptr_eq(&built_in.trusted, &first.trusted));
        assert!(rules_found(&built_in, input).is_empty());
    }

    /// A built-in file marked for kinds finds nothing where no object of its kinds
    /// is: a check holding none, which does not compile it, finds what one compiling
    /// every file finds. And with only its kinds present, it needs no other marked
    /// file. Checked on the schema fixtures (every webhook constraint class).
    #[test]
    fn a_file_for_kinds_a_check_does_not_hold_is_left_out_and_changes_nothing() {
        use crate::manifest::{fixture_files, load, Limits, Resource};
        let mut files = fixture_files("schema/istio/invalid", "invalid/");
        files.extend(fixture_files("schema/istio/valid", "valid/"));
        let loaded = load(&files, &Limits::default());
        let all = Policies::compile(&builtin(), &[]).expect("compile");
        let limits = PolicyLimits {
            runner: None,
            ..PolicyLimits::default()
        };
        // Every finding and problem on `resources`.
        let found =
            |policies: &Policies, resources: &[Resource]| {
                let model = crate::model::build(resources, &Default::default(), None);
                let bodies = input::BodyValues::of(resources.iter()).of_each(resources);
                let parts = input::InputParts::new(
                    resources,
                    bodies,
                    || input::policy_value(&model),
                    None,
                    None,
                    &Default::default(),
                );
                let requests = [Packages::Joined, Packages::PerObject]
                    .map(|which| (parts.input(0..parts.len()), which))
                    .to_vec();
                let mut out: Vec<String> = Vec::new();
                for (findings, problems) in policies.evaluate_many(requests, &limits) {
                    out.extend(findings.iter().map(|f| {
                        format!("{:?} {:?} {} {}", f.resource, f.path, f.rule, f.message)
                    }));
                    out.extend(
                        problems
                            .iter()
                            .map(|p| format!("{}: {}", p.file, p.message)),
                    );
                }
                out.sort();
                out
            };
        // Compiled for a check holding what `held` says yes to, past the process's
        // cache (other tests count on what it keeps).
        let exactly = |held: &dyn Fn(&str) -> bool| {
            let needed = needed_files(&builtin(), &[], held);
            let compiled = Trusted::compile(needed).expect("compile");
            Policies::on(Arc::new(compiled), &builtin(), &[]).expect("compile")
        };
        // Says what one has and the other lacks.
        let same = |left: Vec<String>, right: Vec<String>, what: &str| {
            let only = |a: &[String], b: &[String]| -> Vec<String> {
                a.iter()
                    .filter(|x| !b.contains(x))
                    .take(3)
                    .cloned()
                    .collect()
            };
            assert!(
                left == right,
                "{what}: {:?} against {:?}",
                only(&left, &right),
                only(&right, &left)
            );
        };
        let marked: Vec<(PolicySource, Vec<String>)> = builtin()
            .into_iter()
            .filter_map(|p| {
                let kinds: Vec<String> = p.marked_kinds().into_iter().map(String::from).collect();
                (!kinds.is_empty()).then_some((p, kinds))
            })
            .collect();
        assert!(marked.len() >= 8, "{}", marked.len());
        for (file, kinds) in &marked {
            let of = |k: &str| kinds.iter().any(|m| m == k);
            let mut seen = std::collections::HashMap::<&str, usize>::new();
            // The other kinds, a few objects each: whatever they are, the file left
            // out has nothing to find on them.
            let others: Vec<Resource> = loaded
                .resources
                .iter()
                .filter(|r| !of(&r.kind))
                .filter(|r| {
                    let n = seen.entry(r.kind.as_str()).or_default();
                    *n += 1;
                    *n <= 4
                })
                .cloned()
                .collect();
            let without = exactly(&|k| !of(k));
            assert!(
                !without.trusted.sources.contains(file),
                "{} compiled for a check without {kinds:?}",
                file.path
            );
            assert_eq!(without.count, all.count, "every file counts");
            same(
                found(&without, &others),
                found(&all, &others),
                &format!("leaving out {} changed what the others find", file.path),
            );
            let own: Vec<Resource> = loaded
                .resources
                .iter()
                .filter(|r| of(&r.kind))
                .cloned()
                .collect();
            let only = exactly(&of);
            assert!(only.trusted.sources.contains(file));
            let on_its_own = found(&only, &own);
            assert!(
                on_its_own.iter().any(|f| f.contains("schema/invalid")),
                "{}: the fixtures hold no invalid {kinds:?}",
                file.path
            );
            same(
                on_its_own,
                found(&all, &own),
                &format!("{} needs another marked file", file.path),
            );
        }
        // Files of anyone else's may call any built-in rule: then every file is compiled.
        let operator = source(
            "/etc/meshward/policies/p.rego",
            "package p\n\nimport rego.v1\n\nx := 1\n",
        );
        let mut trusted = builtin();
        trusted.push(operator);
        let with_operator = needed_files(&trusted, &[], &|_| false);
        assert!(marked.iter().all(|(f, _)| with_operator.contains(f)));
    }
}
