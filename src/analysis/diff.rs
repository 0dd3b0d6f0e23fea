//! Base against head: which findings a change introduces, keeps and resolves.

use crate::finding::{Finding, Status};
use crate::manifest::Resource;
use std::collections::{HashMap, HashSet};

/// Objects a template names at random (`randAlphaNum`), by the name they have in
/// one render (`Kind/namespace/name`) to what stays the same across renders: the
/// template, kind, namespace and their order among its objects of that kind.
pub(crate) type RandomNames = HashMap<String, String>;

pub(super) fn random_names(resources: &[Resource]) -> RandomNames {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = RandomNames::new();
    for r in resources {
        let Some(template) = r.origin.as_ref().and_then(|o| o.random_name_source()) else {
            continue;
        };
        let namespace = r.namespace.as_deref().unwrap_or_default();
        let key = format!("{}/{namespace}/(named at random by {template})", r.kind);
        let n = seen.entry(key.clone()).or_default();
        *n += 1;
        out.insert(r.reference().id(), format!("{key}#{n}"));
    }
    out
}

/// A finding's identity with a randomly named subject replaced by its stable name.
fn identity(f: &Finding, random: &RandomNames) -> (String, String, String) {
    let (rule, subject, path) = f.identity();
    match random.get(&subject) {
        Some(stable) => (rule, stable.clone(), path),
        None => (rule, subject, path),
    }
}

/// Marks each head finding introduced or existing, and adds base-only ones as resolved.
/// A finding base had too is introduced still when it names a subject base's did
/// not: a second workload left without a proxy is a new breakage. An object a
/// template names at random is the same object in base and head whatever its name.
pub(super) fn diff(
    (base, base_random): (&[Finding], &RandomNames),
    (head, head_random): (&[Finding], &RandomNames),
) -> Vec<Finding> {
    let mut remaining: HashMap<(String, String, String), usize> = HashMap::new();
    let mut same_message: HashMap<((String, String, String), &str), usize> = HashMap::new();
    let mut base_subjects: HashMap<(String, String, String), HashSet<&str>> = HashMap::new();
    for f in base {
        let id = identity(f, base_random);
        base_subjects
            .entry(id.clone())
            .or_default()
            .extend(f.subjects.iter().map(String::as_str));
        *same_message
            .entry((id.clone(), f.message.as_str()))
            .or_default() += 1;
        *remaining.entry(id).or_default() += 1;
    }
    let ids: Vec<_> = head.iter().map(|f| identity(f, head_random)).collect();
    // Of several findings with one identity (two documents of a file that fail to
    // parse), those whose message base has are base's; the others are matched after.
    let mut matched = vec![false; head.len()];
    for ((f, id), matched) in head.iter().zip(&ids).zip(&mut matched) {
        if let Some(n) = same_message.get_mut(&(id.clone(), f.message.as_str())) {
            if *n > 0 && remaining.get(id).is_some_and(|r| *r > 0) {
                *n -= 1;
                *matched = true;
                if let Some(r) = remaining.get_mut(id) {
                    *r -= 1;
                }
            }
        }
    }
    let mut out = Vec::with_capacity(head.len());
    for ((f, id), matched) in head.iter().zip(&ids).zip(matched) {
        let mut f = f.clone();
        let new_subject = f.subjects.iter().any(|s| {
            !base_subjects
                .get(id)
                .is_some_and(|known| known.contains(s.as_str()))
        });
        let in_base = matched
            || match remaining.get_mut(id) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            };
        f.status = if in_base && !new_subject {
            Status::Existing
        } else {
            Status::Introduced
        };
        out.push(f);
    }
    let mut head_left: HashMap<(String, String, String), usize> = HashMap::new();
    for f in head {
        *head_left.entry(identity(f, head_random)).or_default() += 1;
    }
    for f in base {
        match head_left.get_mut(&identity(f, base_random)) {
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

    fn none() -> RandomNames {
        RandomNames::new()
    }

    fn statuses(out: &[Finding]) -> Vec<(String, Status)> {
        out.iter().map(|f| (f.rule.clone(), f.status)).collect()
    }

    /// Two documents of a file that fail to parse: the one base had is existing,
    /// whatever order their messages sort in.
    #[test]
    fn of_findings_alike_the_one_with_base_message_is_existing() {
        let at = |line: u32| {
            input_finding(
                "manifest/parse-error",
                Severity::Error,
                "broken.yaml",
                line,
                format!("invalid YAML (while parsing a flow sequence at line {line})"),
            )
        };
        let out = diff((&[at(6)], &none()), (&[at(13), at(6)], &none()));
        let lines: Vec<(u32, Status)> = out.iter().map(|f| (f.line, f.status)).collect();
        assert_eq!(lines, [(13, Status::Introduced), (6, Status::Existing)]);
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
            statuses(&diff((&base, &none()), (&head, &none()))),
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
            statuses(&diff((&base, &none()), (&head, &none())))
                .into_iter()
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            [Status::Existing, Status::Introduced]
        );
        let mut before = finding("a/scope", "ns.yaml", 1);
        before.subjects = vec!["web".into()];
        let mut after = before.clone();
        after.subjects = vec!["web".into(), "api".into()];
        assert_eq!(
            diff((&[before], &none()), (&[after], &none()))[0].status,
            Status::Introduced
        );
    }

    #[test]
    fn an_object_named_at_random_is_the_same_object_in_base_and_head() {
        let on = |name: &str| {
            let mut f = finding("a/pod", "templates/tests/test.yaml", 4);
            f.resource = Some(crate::finding::ResourceRef {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("shop".into()),
                name: name.into(),
            });
            f
        };
        let stable = |id: &str| {
            RandomNames::from([(
                id.to_string(),
                "Pod/shop/(named at random by templates/tests/test.yaml)#1".to_string(),
            )])
        };
        let base = [on("web-test-k3x9q")];
        let head = [on("web-test-p0z2m")];
        assert_eq!(
            statuses(&diff(
                (&base, &stable("Pod/shop/web-test-k3x9q")),
                (&head, &stable("Pod/shop/web-test-p0z2m"))
            )),
            [("a/pod".to_string(), Status::Existing)]
        );
        // Without the template's word for it, a renamed object is another object.
        assert_eq!(statuses(&diff((&base, &none()), (&head, &none()))).len(), 2);
    }
}
