//! The policy engine: Rego (regorus), compiled once, evaluated per revision.

mod test_runner;

pub use test_runner::{run_tests, TestOutcome, TestReport};

use anyhow::{Context, Result};
use include_dir::{include_dir, Dir};
use serde::Deserialize;
use std::num::NonZeroU32;
use std::path::Path;
use std::time::Duration;

static BUILTIN: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/policies");

/// One Rego file.
#[derive(Debug, Clone)]
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

/// Compiled policies, ready to evaluate any number of inputs.
#[derive(Clone)]
pub struct Policies {
    engine: regorus::Engine,
    /// Packages (`data.x.y`) that define `findings`.
    packages: Vec<(String, String)>,
    pub problems: Vec<PolicyProblem>,
    pub count: usize,
}

/// How long one package may take on one revision before it is stopped.
const EVAL_LIMIT: Duration = Duration::from_secs(30);

fn new_engine() -> regorus::Engine {
    let mut engine = regorus::Engine::new();
    engine.set_execution_timer_config(regorus::utils::limits::ExecutionTimerConfig {
        limit: EVAL_LIMIT,
        check_interval: NonZeroU32::new(1000).unwrap_or(NonZeroU32::MIN),
    });
    engine
}

impl Policies {
    /// Compiles `trusted` (built-in: a failure is an error) and then `untrusted`
    /// (from the repository: a file that does not compile is a problem, reported,
    /// and the rest still run). Test files are not loaded for checks.
    pub fn compile(trusted: &[PolicySource], untrusted: &[PolicySource]) -> Result<Policies> {
        let mut engine = new_engine();
        let mut packages = Vec::new();
        let mut problems = Vec::new();
        let mut count = 0;
        for p in trusted.iter().filter(|p| !p.is_test()) {
            engine
                .add_policy(p.path.clone(), p.text.clone())
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("policy {} does not compile", p.path))?;
            count += 1;
            register(p, &mut packages);
        }
        prepare(&mut engine).context("the built-in policies do not compile")?;
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
                }
                Err(e) => problems.push(PolicyProblem {
                    file: p.path.clone(),
                    message: format!("policy does not compile, so its rules did not run: {e}"),
                }),
            }
        }
        packages.sort();
        packages.dedup();
        Ok(Policies {
            engine,
            packages,
            problems,
            count,
        })
    }

    /// Evaluates every package's `findings` on `input`. A package that fails is a
    /// problem; the others still report.
    pub fn evaluate(&self, input: regorus::Value) -> (Vec<RawFinding>, Vec<PolicyProblem>) {
        let mut engine = self.engine.clone();
        engine.set_input(input);
        let mut findings = Vec::new();
        let mut problems = Vec::new();
        for (package, file) in &self.packages {
            let started = std::time::Instant::now();
            let rule = format!("data.{package}.findings");
            let value = match engine.eval_rule(rule.clone()) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(PolicyProblem {
                        file: file.clone(),
                        message: format!(
                            "evaluating {rule} failed, so its rules did not run: {}",
                            brief(&e.to_string())
                        ),
                    });
                    continue;
                }
            };
            tracing::debug!(
                package,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "package evaluated"
            );
            if value == regorus::Value::Undefined {
                continue;
            }
            let json = match serde_json::to_value(&value) {
                Ok(j) => j,
                Err(e) => {
                    problems.push(PolicyProblem {
                        file: file.clone(),
                        message: format!("{rule} returned a value that is not JSON: {e}"),
                    });
                    continue;
                }
            };
            let items = match json {
                serde_json::Value::Array(items) => items,
                other => vec![other],
            };
            for item in items {
                match serde_json::from_value::<RawFinding>(item.clone()) {
                    Ok(f) => findings.push(f),
                    Err(e) => problems.push(PolicyProblem {
                        file: file.clone(),
                        message: format!("{rule} returned a malformed finding ({e}): {item}"),
                    }),
                }
            }
        }
        (findings, problems)
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
