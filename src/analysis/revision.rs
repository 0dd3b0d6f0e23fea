//! One revision parsed: its plain manifests read, its render roots chosen and
//! rendered (with the context roots a change joins), and what each root came to.

use super::limits::render_limits;
use super::{Options, Revision};
use crate::config::{RepoConfig, CONFIG_FILE};
use crate::finding::{Finding, Severity};
use crate::manifest::{self, input_finding, SourceFile};
use crate::report::{RootOutcome, RootStatus};
use crate::workspace::Tree;
use anyhow::Result;
use std::collections::HashSet;

/// Is this file a manifest of the checked tree (not config, not policy, not a
/// dot-file or CI config unless `paths.include` names it)?
pub(super) fn is_manifest(f: &SourceFile, config: &RepoConfig) -> bool {
    is_yaml_input(&f.path) && config.manifest_selected(&f.path)
}

/// A YAML file that is not meshward's own config or policy.
pub(super) fn is_yaml_input(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    (lower.ends_with(".yaml") || lower.ends_with(".yml"))
        && path != CONFIG_FILE
        && !path.starts_with(".meshward/")
}

/// YAML files `paths` selects that are not read as manifests: dot-files, files
/// under dot-folders and CI configs (see `config::read_by_default`).
pub(super) fn not_read_as_manifests(tree: &Tree, config: &RepoConfig) -> usize {
    tree.files
        .iter()
        .map(|f| f.path.as_str())
        .chain(tree.oversized.iter().map(|(p, _)| p.as_str()))
        .chain(tree.symlinks.iter().map(String::as_str))
        .filter(|p| is_yaml_input(p) && config.path_selected(p) && !config.manifest_selected(p))
        .count()
}

pub(super) fn render_note(roots: &[RootOutcome], selective: bool) -> Option<String> {
    let count = |status: RootStatus| roots.iter().filter(|r| r.outcome == status).count();
    let excluded = count(RootStatus::Excluded);
    let planned = roots.len() - excluded;
    if roots.is_empty() {
        return None;
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
        note.push_str(&format!(
            ": {touched} read a file this change touches{linked}. The other {not_needed} neither read a changed file nor share or name a namespace with what it changes, so their objects were not checked in this run."
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

pub(super) const TOUCHED: &str = "reads a file this change touches";

pub(super) const LINKED: &str =
    "deploys into or names a namespace this change deploys into or names";

pub(super) const EVERY: &str = "every root is rendered";

/// Every root of a revision with its outcome, in plan order, excluded ones last.
pub(super) fn root_outcomes(p: &Parsed) -> Vec<RootOutcome> {
    p.roots
        .iter()
        .zip(&p.outcomes)
        .map(|(r, o)| RootOutcome {
            root: r.root.label(),
            file: r.root.entry.clone(),
            line: r.root.entry_line,
            outcome: o.status,
            reason: o.problem.clone().or(o.why.map(str::to_string)),
            why: o.why.map(str::to_string),
        })
        .chain(p.excluded.iter().map(|r| RootOutcome {
            root: r.label(),
            file: r.entry.clone(),
            line: r.entry_line,
            outcome: RootStatus::Excluded,
            reason: Some("render.exclude in .meshward.yaml".to_string()),
            why: None,
        }))
        .collect()
}

/// What became of one root of a revision.
#[derive(Debug, Clone)]
pub(super) struct Outcome {
    pub(super) status: RootStatus,
    /// Why it was rendered ([`TOUCHED`], [`LINKED`], [`EVERY`]), failed or not;
    /// None while no render needed it.
    pub(super) why: Option<&'static str>,
    /// Why it did not render: the render failure's message.
    pub(super) problem: Option<String>,
}

impl Default for Outcome {
    fn default() -> Self {
        Outcome {
            status: RootStatus::NotNeeded,
            why: None,
            problem: None,
        }
    }
}

/// The outcome a render failure of this rule means, if it is one.
pub(super) fn failure_status(rule: &str) -> Option<RootStatus> {
    match rule {
        "render/refused" => Some(RootStatus::Refused),
        "render/failed" | "render/tool-missing" | "render/limit-exceeded" => {
            Some(RootStatus::Failed)
        }
        _ => None,
    }
}

/// What became of a rendered root: the first render failure among its findings.
pub(super) fn outcome_of(r: &crate::render::Rendered, why: &'static str) -> Outcome {
    let failure = r
        .findings
        .iter()
        .find_map(|f| failure_status(&f.rule).map(|s| (s, f.message.clone())));
    match failure {
        Some((status, message)) => Outcome {
            status,
            why: Some(why),
            problem: Some(message),
        },
        None => Outcome {
            status: RootStatus::Rendered,
            why: Some(why),
            problem: None,
        },
    }
}

/// The failure findings of roots the change touches that did not render: they
/// block, whatever base did. (A root rendered only because it joins with the
/// change does not: the change did not touch it.)
pub(super) fn touched_failures(p: &Parsed) -> HashSet<(String, String, String)> {
    let entries: HashSet<&str> = p
        .roots
        .iter()
        .zip(&p.outcomes)
        .filter(|(_, o)| o.status.unchecked() && o.why != Some(LINKED))
        .map(|(r, _)| r.root.entry.as_str())
        .collect();
    p.loaded
        .findings
        .iter()
        .filter(|f| failure_status(&f.rule).is_some() && entries.contains(f.file.as_str()))
        .map(Finding::identity)
        .collect()
}

impl Parsed {
    /// Roots rendered because the change's objects join with theirs.
    pub(super) fn linked(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.why == Some(LINKED))
            .count()
    }
}

/// A revision's manifests, with the roots rendered so far.
pub(super) struct Parsed {
    pub(super) loaded: manifest::Loaded,
    pub(super) roots: Vec<crate::render::PlannedRoot>,
    pub(super) rendered: Vec<bool>,
    /// What became of each root: not needed until it is rendered.
    pub(super) outcomes: Vec<Outcome>,
    /// Roots `render.exclude` leaves out.
    pub(super) excluded: Vec<crate::render::roots::Root>,
    /// The revision on disk, once a render needed it (or why it is not there).
    pub(super) dir: Option<Result<crate::workspace::Materialized, String>>,
    /// Labels app objects set on the namespaces they create.
    pub(super) namespace_labels: Vec<crate::render::AppNamespaceLabels>,
}

pub(super) fn parse_revision(rev: &Revision, config: &RepoConfig, opts: &Options) -> Parsed {
    let discovery = crate::render::discover(rev.tree);
    // Inputs of render roots are checked through their rendered output only.
    let files: Vec<SourceFile> = rev
        .tree
        .files
        .iter()
        .filter(|f| is_manifest(f, config) && !discovery.is_input(&f.path))
        .cloned()
        .collect();
    let mut loaded = manifest::load(&files, &opts.limits);
    // Count every manifest read, render inputs included.
    loaded.files = rev
        .tree
        .files
        .iter()
        .filter(|f| is_manifest(f, config))
        .count();
    loaded.files_not_read = not_read_as_manifests(rev.tree, config);
    let mut repo_urls: std::collections::BTreeSet<String> = opts
        .repo_urls
        .iter()
        .chain(&config.render.repo_urls)
        .map(|u| crate::render::roots::normalize_repo_url(u))
        .collect();
    repo_urls.retain(|u| !u.is_empty());
    let plan = crate::render::plan(
        rev.tree,
        &discovery,
        &loaded.resources,
        &config.render,
        &repo_urls,
    );
    // Inputs only the app objects reveal (a patch file an Application or an
    // ApplicationSet's template names, a component) are checked through the render,
    // not also as objects of their own.
    let app_files: std::collections::BTreeSet<&str> = plan
        .roots
        .iter()
        .filter_map(|p| p.app_file.as_deref())
        .collect();
    let inputs: std::collections::BTreeSet<&str> = plan
        .roots
        .iter()
        .flat_map(|p| p.files.iter().map(String::as_str))
        .filter(|f| !app_files.contains(f))
        .collect();
    loaded
        .resources
        .retain(|r| !inputs.contains(r.file.as_str()));
    loaded
        .findings
        .retain(|f| !(f.rule.starts_with("manifest/") && inputs.contains(f.file.as_str())));
    loaded.findings.extend(plan.findings.iter().cloned());
    // Plain folders an app object applies: their objects default to its namespace.
    for d in &plan.directories {
        let under: Vec<SourceFile> = files
            .iter()
            .filter(|f| d.holds(&f.path) && !inputs.contains(f.path.as_str()))
            .cloned()
            .collect();
        if under.is_empty() || d.namespace == "default" {
            continue;
        }
        loaded.resources.retain(|r| !d.holds(&r.file));
        loaded.findings.retain(|f| !d.holds(&f.file));
        let mut again = manifest::load_with_namespace(&under, &opts.limits, Some(&d.namespace));
        loaded.resources.append(&mut again.resources);
        loaded.findings.append(&mut again.findings);
    }
    let rendered: Vec<bool> = plan
        .roots
        .iter()
        .map(|r| match &opts.changed_paths {
            None => true,
            Some(changed) => changed.iter().any(|p| r.reads(p)),
        })
        .collect();
    let mut parsed = Parsed {
        loaded,
        outcomes: vec![Outcome::default(); plan.roots.len()],
        excluded: plan.excluded,
        roots: plan.roots,
        rendered,
        dir: None,
        namespace_labels: plan.namespace_labels,
    };
    let selected: Vec<usize> = (0..parsed.roots.len())
        .filter(|&i| parsed.rendered[i])
        .collect();
    if !selected.is_empty() {
        let roots: Vec<&crate::render::PlannedRoot> =
            selected.iter().map(|&i| &parsed.roots[i]).collect();
        let why = match opts.changed_paths {
            Some(_) => TOUCHED,
            None => EVERY,
        };
        let outputs = render_roots(rev, config, opts, &mut parsed.dir, &roots);
        for (i, mut r) in selected.into_iter().zip(outputs) {
            parsed.outcomes[i] = outcome_of(&r, why);
            parsed.loaded.resources.append(&mut r.resources);
            parsed.loaded.findings.append(&mut r.findings);
        }
    }
    let loaded = &mut parsed.loaded;
    for (path, size) in &rev.tree.oversized {
        if config.path_selected(path) && config.manifest_selected(path) {
            loaded.findings.push(input_finding(
                "manifest/limit-exceeded",
                Severity::Error,
                path,
                1,
                format!("file is {size} bytes, over the size limit; nothing in it was checked, so its mesh config is unverified"),
            ));
        }
    }
    for path in &rev.tree.symlinks {
        if config.path_selected(path) && config.manifest_selected(path) {
            loaded.findings.push(input_finding(
                "manifest/symlink-not-followed",
                Severity::Warning,
                path,
                1,
                "this YAML file is a symbolic link; meshward does not follow links (one could point outside the repository), so what it points at was not checked".to_string(),
            ));
        }
    }
    parsed
}

/// Renders `roots` from the revision's folder on disk, extracting it first if no
/// render of this revision has yet.
pub(super) fn render_roots(
    rev: &Revision,
    config: &RepoConfig,
    opts: &Options,
    dir: &mut Option<Result<crate::workspace::Materialized, String>>,
    roots: &[&crate::render::PlannedRoot],
) -> Vec<crate::render::Rendered> {
    use rayon::prelude::*;
    if roots.is_empty() {
        // Nothing to render: the revision is not extracted (a whole tree to disk).
        return Vec::new();
    }
    let dir = dir.get_or_insert_with(|| match rev.tree.source.as_ref() {
        Some(source) => crate::workspace::materialize(source).map_err(|e| format!("{e:#}")),
        None => Err("the revision is not available on disk".to_string()),
    });
    let repo_dir = match dir {
        Ok(dir) => dir.path().to_path_buf(),
        Err(why) => {
            return roots
                .iter()
                .map(|r| crate::render::Rendered {
                    resources: Vec::new(),
                    findings: vec![input_finding(
                        "render/failed",
                        Severity::Error,
                        &r.root.entry,
                        r.root.entry_line,
                        format!("{} was not rendered: {why}", r.root.label()),
                    )],
                })
                .collect();
        }
    };
    let limits = render_limits(config, &opts.render_limits);
    let read = |p: &str| std::fs::read_to_string(repo_dir.join(p)).ok();
    roots
        .par_iter()
        .map(|r| crate::render::render_root(r, &repo_dir, &opts.tools, &limits, &read))
        .collect()
}

/// For a change: renders the untouched roots its objects join with (see
/// `render::context`), in head and base alike. A root that is the same in both
/// reads no changed file, so it renders the same: head's output serves base too.
pub(super) fn render_context(
    (head_rev, head): (&Revision, &mut Parsed),
    base: Option<(&Revision, &mut Parsed)>,
    changed: &std::collections::BTreeSet<String>,
    config: &RepoConfig,
    opts: &Options,
) {
    use crate::render::context::{self, Reach};
    let mut reach = Reach::default();
    let parsed = std::iter::once(&*head).chain(base.as_ref().map(|(_, b)| &**b));
    for p in parsed {
        for r in &p.loaded.resources {
            if r.origin.is_some() || changed.contains(&r.file) {
                reach.add(r);
            }
        }
    }
    let linked = |rev: &Revision, p: &Parsed| -> Vec<usize> {
        (0..p.roots.len())
            .filter(|&i| !p.rendered[i])
            .filter(|&i| {
                let root = &p.roots[i];
                // The app object's own file describes the root (its namespace is
                // in the root already); its objects come from the other files.
                let files: Vec<&SourceFile> = rev
                    .tree
                    .files
                    .iter()
                    .filter(|f| root.reads(&f.path) && root.app_file.as_ref() != Some(&f.path))
                    .collect();
                context::linked(root, &files, &reach, &config.mesh.root_namespace)
            })
            .collect()
    };
    let add = |p: &mut Parsed, i: usize, r: crate::render::Rendered| {
        p.rendered[i] = true;
        p.outcomes[i] = outcome_of(&r, LINKED);
        p.loaded.resources.extend(r.resources);
        p.loaded.findings.extend(r.findings);
    };
    let head_linked = linked(head_rev, head);
    let head_roots: Vec<&crate::render::PlannedRoot> =
        head_linked.iter().map(|&i| &head.roots[i]).collect();
    let outputs = render_roots(head_rev, config, opts, &mut head.dir, &head_roots);
    let rendered: Vec<(crate::render::PlannedRoot, crate::render::Rendered)> = head_linked
        .iter()
        .map(|&i| head.roots[i].clone())
        .zip(outputs)
        .collect();
    if let Some((base_rev, base)) = base {
        let mut missing = Vec::new();
        for i in linked(base_rev, base) {
            match rendered.iter().find(|(root, _)| *root == base.roots[i]) {
                Some((_, out)) => add(base, i, out.clone()),
                None => missing.push(i),
            }
        }
        let roots: Vec<&crate::render::PlannedRoot> =
            missing.iter().map(|&i| &base.roots[i]).collect();
        let outputs = render_roots(base_rev, config, opts, &mut base.dir, &roots);
        for (i, out) in missing.into_iter().zip(outputs) {
            add(base, i, out);
        }
    }
    for (i, (_, out)) in head_linked.into_iter().zip(rendered) {
        add(head, i, out);
    }
}
