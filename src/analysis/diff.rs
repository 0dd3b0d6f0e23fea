//! Base against head: which findings a change introduces, keeps and resolves.

use crate::finding::{Finding, Status};
use std::collections::{HashMap, HashSet};

/// Marks each head finding introduced or existing, and adds base-only ones as resolved.
/// A finding base had too is introduced still when it names a subject base's did
/// not: a second workload left without a proxy is a new breakage.
pub(super) fn diff(base: &[Finding], head: &[Finding]) -> Vec<Finding> {
    let mut remaining: HashMap<(String, String, String), usize> = HashMap::new();
    let mut base_subjects: HashMap<(String, String, String), HashSet<&str>> = HashMap::new();
    for f in base {
        let id = f.identity();
        base_subjects
            .entry(id.clone())
            .or_default()
            .extend(f.subjects.iter().map(String::as_str));
        *remaining.entry(id).or_default() += 1;
    }
    let mut out = Vec::with_capacity(head.len());
    for f in head {
        let mut f = f.clone();
        let id = f.identity();
        let new_subject = f.subjects.iter().any(|s| {
            !base_subjects
                .get(&id)
                .is_some_and(|known| known.contains(s.as_str()))
        });
        f.status = match remaining.get_mut(&id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                if new_subject {
                    Status::Introduced
                } else {
                    Status::Existing
                }
            }
            _ => Status::Introduced,
        };
        out.push(f);
    }
    let mut head_left: HashMap<(String, String, String), usize> = HashMap::new();
    for f in head {
        *head_left.entry(f.identity()).or_default() += 1;
    }
    for f in base {
        match head_left.get_mut(&f.identity()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                let mut f = f.clone();
                f.status = Status::Resolved;
                out.push(f);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Severity;
    use crate::manifest::input_finding;

    fn finding(rule: &str, file: &str, line: u32) -> Finding {
        input_finding(
            rule,
            Severity::Error,
            file,
            line,
            format!("{rule} in {file}"),
        )
    }

    fn statuses(out: &[Finding]) -> Vec<(String, Status)> {
        out.iter().map(|f| (f.rule.clone(), f.status)).collect()
    }

    #[test]
    fn a_change_introduces_keeps_and_resolves_findings_whatever_their_lines() {
        let base = [
            finding("a/kept", "x.yaml", 3),
            finding("a/gone", "y.yaml", 1),
        ];
        // The kept finding moved down two lines: still the same finding.
        let head = [
            finding("a/kept", "x.yaml", 5),
            finding("a/new", "z.yaml", 1),
        ];
        assert_eq!(
            statuses(&diff(&base, &head)),
            [
                ("a/kept".to_string(), Status::Existing),
                ("a/new".to_string(), Status::Introduced),
                ("a/gone".to_string(), Status::Resolved),
            ]
        );
    }

    #[test]
    fn a_second_copy_or_a_new_subject_is_introduced() {
        let base = [finding("a/dup", "x.yaml", 1)];
        let head = [finding("a/dup", "x.yaml", 1), finding("a/dup", "x.yaml", 9)];
        assert_eq!(
            statuses(&diff(&base, &head))
                .into_iter()
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            [Status::Existing, Status::Introduced]
        );
        let mut before = finding("a/scope", "ns.yaml", 1);
        before.subjects = vec!["web".into()];
        let mut after = before.clone();
        after.subjects = vec!["web".into(), "api".into()];
        assert_eq!(diff(&[before], &[after])[0].status, Status::Introduced);
    }
}
