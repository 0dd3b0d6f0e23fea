//! `meshward policy test`: runs the `test_*` rules of `*_test.rego` files, as
//! `opa test` does.

use super::{new_engine, PolicySource};
use anyhow::Result;

#[derive(Debug, Clone)]
pub struct TestOutcome {
    pub file: String,
    pub name: String,
    pub passed: bool,
    /// Why it failed: false, undefined, or an error.
    pub detail: Option<String>,
}

#[derive(Debug, Default)]
pub struct TestReport {
    pub outcomes: Vec<TestOutcome>,
}

impl TestReport {
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.passed).count()
    }
    pub fn failed(&self) -> usize {
        self.outcomes.len() - self.passed()
    }
}

/// Loads all sources into one engine and evaluates every `test_*` rule of every
/// test file.
pub fn run_tests(sources: &[PolicySource]) -> Result<TestReport> {
    let mut engine = new_engine(super::EVAL_LIMIT);
    for p in sources {
        engine
            .add_policy(p.path.clone(), p.text.clone())
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.path))?;
    }
    let mut report = TestReport::default();
    for p in sources.iter().filter(|p| p.is_test()) {
        let Some(package) = p.package() else { continue };
        let mut names: Vec<String> = p
            .text
            .lines()
            .filter_map(|l| {
                let name: String = l
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                name.starts_with("test_").then_some(name)
            })
            .collect();
        names.dedup();
        for name in names {
            let rule = format!("data.{package}.{name}");
            let (passed, detail) = match engine.eval_rule(rule) {
                Ok(regorus::Value::Bool(true)) => (true, None),
                Ok(regorus::Value::Undefined) => (
                    false,
                    Some("undefined (a condition in its body did not hold)".into()),
                ),
                Ok(other) => (false, Some(format!("evaluated to {other}"))),
                Err(e) => (false, Some(format!("error: {e}"))),
            };
            report.outcomes.push(TestOutcome {
                file: p.path.clone(),
                name,
                passed,
                detail,
            });
        }
    }
    Ok(report)
}
