//! What is wrong with a root, and the finding that says so on its entry file.

use super::roots::Root;
use crate::finding::{Finding, Severity};
use crate::manifest::input_finding;

/// Something wrong with a root, reported as a finding on its entry file.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub rule: &'static str,
    pub severity: Severity,
    pub file: String,
    /// The line in `file`; 0 for the root's entry line (or the file's first line).
    pub line: u32,
    pub message: String,
}

impl Problem {
    pub fn refused(file: &str, message: &str) -> Problem {
        Problem {
            rule: "render/refused",
            severity: Severity::Error,
            file: file.to_string(),
            line: 0,
            message: message.to_string(),
        }
    }
    pub fn failed(file: &str, message: &str) -> Problem {
        Problem {
            rule: "render/failed",
            severity: Severity::Error,
            file: file.to_string(),
            line: 0,
            message: message.to_string(),
        }
    }
    /// A render stopped at one of meshward's limits (time, output, memory).
    pub fn limit(file: &str, message: String) -> Problem {
        Problem {
            rule: "render/limit-exceeded",
            severity: Severity::Error,
            file: file.to_string(),
            line: 0,
            message,
        }
    }
    /// The tool a root needs is not on this machine.
    pub fn tool_missing(file: &str, message: &str) -> Problem {
        Problem {
            rule: "render/tool-missing",
            severity: Severity::Error,
            file: file.to_string(),
            line: 0,
            message: message.to_string(),
        }
    }
    pub fn at(self, line: u32) -> Problem {
        Problem { line, ..self }
    }
}

pub(super) fn problem_finding(p: &Problem, root: &Root) -> Finding {
    let file = if p.file.is_empty() {
        root.entry.clone()
    } else {
        p.file.clone()
    };
    let line = if p.line > 0 {
        p.line
    } else if file == root.entry {
        root.entry_line
    } else {
        1
    };
    let mut f = input_finding(
        p.rule,
        p.severity,
        &file,
        line,
        format!("{}: {}", root.label(), p.message),
    );
    f.occurrence = Some(root.label());
    f
}
