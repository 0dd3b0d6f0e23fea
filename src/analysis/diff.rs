//! Base against head: which findings a change introduces, keeps and resolves.

use crate::finding::{Finding, Status};
use crate::manifest::Resource;
use foldhash::{HashMap, HashSet};

/// Objects a template names at random (`randAlphaNum`), by the name they have in
/// one render (`Kind/namespace/name`) to what stays the same across renders: the
/// template, kind, namespace and their order among its objects of that kind.
pub(crate) type RandomNames = HashMap<String, String>;

pub(super) fn random_names(resources: &[Resource]) -> RandomNames {
    let mut seen: HashMap<String, usize> = HashMap::default();
    let mut out = RandomNames::default();
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
    let keys = |findings: &[Finding], random: &RandomNames| -> Vec<Id> {
        findings.iter().map(|f| identity(f, random)).collect()
    };
    let (base_ids, head_ids) = (keys(base, base_random), keys(head, head_random));
    let mut base_subjects: HashMap<&Id, HashSet<&str>> = HashMap::default();
    for (f, id) in base.iter().zip(&base_ids) {
        base_subjects
            .entry(id)
            .or_default()
            .extend(f.subjects.iter().map(String::as_str));
    }
    let in_base = counterparts((head, &head_ids), (base, &base_ids));
    let in_head = counterparts((base, &base_ids), (head, &head_ids));
    let mut out = Vec::with_capacity(head.len());
    for ((f, id), in_base) in head.iter().zip(&head_ids).zip(in_base) {
        let mut f = f.clone();
        let new_subject = f.subjects.iter().any(|s| {
            !base_subjects
                .get(id)
                .is_some_and(|known| known.contains(s.as_str()))
        });
        f.status = if in_base && !new_subject {
            Status::Existing
        } else {
            Status::Introduced
        };
        out.push(f);
    }
    for (f, in_head) in base.iter().zip(in_head) {
        if !in_head {
            let mut f = f.clone();
            f.status = Status::Resolved;
            out.push(f);
        }
    }
    out
}

type Id = (String, String, String);

/// For each of `these` findings, whether one of `those` stands for it, each of
/// `those` standing for one at most: first one with the same identity and message,
/// then one left with the same identity. Of two findings with one identity (two
/// documents of a file that fail to parse), the one whose message the other
/// revision has is the one it had, whatever order they come in.
fn counterparts(
    (these, these_ids): (&[Finding], &[Id]),
    (those, those_ids): (&[Finding], &[Id]),
) -> Vec<bool> {
    let mut alike: HashMap<(&Id, &str), usize> = HashMap::default();
    let mut left: HashMap<&Id, usize> = HashMap::default();
    for (f, id) in those.iter().zip(those_ids) {
        *alike.entry((id, f.message.as_str())).or_default() += 1;
        *left.entry(id).or_default() += 1;
    }
    let mut found: Vec<bool> = these
        .iter()
        .zip(these_ids)
        .map(|(f, id)| match alike.get_mut(&(id, f.message.as_str())) {
            Some(n) if *n > 0 => {
                *n -= 1;
                if let Some(l) = left.get_mut(id) {
                    *l -= 1;
                }
                true
            }
            _ => false,
        })
        .collect();
    for (found, id) in found.iter_mut().zip(these_ids).filter(|(f, _)| !**f) {
        if let Some(l) = left.get_mut(id).filter(|l| **l > 0) {
            *l -= 1;
            *found = true;
        }
    }
    found
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
        RandomNames::default()
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
        // And the other way: the one that is gone is resolved.
        let out = diff((&[at(13), at(6)], &none()), (&[at(6)], &none()));
        let lines: Vec<(u32, Status)> = out.iter().map(|f| (f.line, f.status)).collect();
        assert_eq!(lines, [(6, Status::Existing), (13, Status::Resolved)]);
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
            RandomNames::from_iter([(
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
