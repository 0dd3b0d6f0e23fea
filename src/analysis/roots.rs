//! What became of a revision's render roots, for the report: each root's outcome,
//! the render note, and the failures that block a change.

use crate::finding::Finding;
use crate::render::{failure_status, RenderedRevision, RootStatus, APPS, LINKED, TOUCHED};
use crate::report::RootOutcome;
use foldhash::HashSet;

pub(super) fn render_note(roots: &[RootOutcome], selective: bool) -> Option<String> {
    let count = |status: RootStatus| roots.iter().filter(|r| r.outcome == status).count();
    let excluded = count(RootStatus::Excluded);
    let planned = roots.len() - excluded;
    if roots.is_empty() {
        return Some("Rendered 0 of 0 render roots (kustomize, Helm, app objects): no kustomization or chart was found, and no app object points at one in this repository, so every manifest was read as plain YAML (the files of a folder an app object applies, in its namespace).".to_string());
    }
    let rendered = count(RootStatus::Rendered);
    let unchecked = count(RootStatus::Failed) + count(RootStatus::Refused);
    let not_needed = count(RootStatus::NotNeeded);
    let mut note =
        format!("Rendered {rendered} of {planned} render roots (kustomize, Helm, app objects)");
    if selective && not_needed > 0 {
        let selected = |why: &str| {
            roots
                .iter()
                .filter(|r| r.why.as_deref() == Some(why))
                .count()
        };
        let (touched, linked) = (selected(TOUCHED), selected(LINKED));
        let linked = if linked > 0 {
            format!(", {linked} more because they share a namespace with it or name one of its namespaces")
        } else {
            String::new()
        };
        let apps = match selected(APPS) {
            0 => String::new(),
            n => format!(
                ", {n} because they deploy app objects (followed to the apps they point at)"
            ),
        };
        note.push_str(&format!(
            ": {touched} read a file this change touches{linked}{apps}. The other {not_needed} neither read a changed file nor share or name a namespace with what it changes, so their objects were not checked in this run."
        ));
    } else {
        note.push('.');
    }
    if unchecked > 0 {
        note.push_str(&format!(
            " {unchecked} did not render (failed or refused): nothing they deploy was checked."
        ));
    }
    if excluded > 0 {
        note.push_str(&format!(
            " {excluded} excluded by render.exclude in .meshward.yaml."
        ));
    }
    Some(note)
}

/// Every root of a revision with its outcome, in plan order, excluded ones last.
pub(super) fn root_outcomes(p: &RenderedRevision) -> Vec<RootOutcome> {
    p.roots
        .iter()
        .zip(&p.outcomes)
        .map(|(r, o)| RootOutcome {
            root: r.root.label(),
            file: r.root.entry.clone(),
            line: r.root.entry_line,
            outcome: o.status,
            cluster: r.cluster.as_deref().map(str::to_string),
            reason: o.problem.clone().or(o.why.map(str::to_string)),
            why: o.why.map(str::to_string),
        })
        .chain(p.excluded.iter().map(|r| RootOutcome {
            root: r.label(),
            file: r.entry.clone(),
            line: r.entry_line,
            outcome: RootStatus::Excluded,
            cluster: None,
            reason: Some("render.exclude in .meshward.yaml".to_string()),
            why: None,
        }))
        .collect()
}

/// The failure findings of roots the change touches that did not render: they
/// block, whatever base did. (A root rendered only because it joins with the
/// change does not: the change did not touch it.)
pub(super) fn touched_failures(p: &RenderedRevision) -> HashSet<(String, String, String)> {
    let failed: Vec<_> = p
        .roots
        .iter()
        .zip(&p.outcomes)
        .filter(|(_, o)| o.status.unchecked() && o.why != Some(LINKED))
        .map(|(r, _)| (r.root.entry.as_str(), r.root.label()))
        .collect();
    // A failure is the root's by its label, or by its entry file for one said
    // without a root; a shared base's failure is each root's own.
    p.loaded
        .findings
        .iter()
        .filter(|f| failure_status(&f.rule).is_some())
        .filter(|f| {
            failed.iter().any(|(entry, label)| match &f.occurrence {
                Some(root) => root == label,
                None => f.file == *entry,
            })
        })
        .map(Finding::identity)
        .collect()
}
