//! One revision rendered: its plain manifests read, its render roots chosen and
//! rendered (with the context roots a change joins), and what each root came to.
//! The one entry the pipeline calls: [`revision`], then for a change [`context`].

use super::apps::{is_app_object, AppNamespaceLabels};
use super::clusters::Clusters;
use super::discovery::{discover, Discovery};
use super::planned::PlannedRoot;
use super::planning::plan;
use super::roots::Root;
use super::running::{render_root, Rendered};
use super::tools::{RenderLimits, Tools};
use crate::config::{RepoConfig, CONFIG_FILE};
use crate::finding::Severity;
use crate::manifest::{self, input_finding, Limits, Resource, SourceFile};
use crate::workspace::{Materialized, Tree};
use std::collections::BTreeSet;

/// What rendering a revision takes, beyond its tree and config.
#[derive(Clone)]
pub(crate) struct Settings<'a> {
    pub(crate) tools: &'a Tools,
    /// The render limits, already lowered where the repository asks.
    pub(crate) limits: RenderLimits,
    /// Limits on reading manifests.
    pub(crate) manifest_limits: &'a Limits,
    /// URLs under which app objects name this repository (besides `render.repo_urls`).
    pub(crate) repo_urls: &'a super::RepoUrls,
    /// The branches the revision under check stands for, where known: a Flux
    /// GitRepository of this repository following another is not this checkout.
    pub(crate) branches: &'a [String],
    /// Paths the change touches; only roots reading one are rendered. None: every root.
    pub(crate) changed_paths: Option<&'a BTreeSet<String>>,
    /// Files parsed already, by the other revision of the check.
    pub(crate) parsed: Option<&'a manifest::Parsed>,
    /// Roots rendered already, by the other revision, by their inputs.
    pub(crate) rendered: Option<&'a RenderedRoots>,
    /// Go through the roots last to first: the other revision goes first to last, so
    /// each root both hold alike is rendered once, by whichever reaches it first.
    pub(crate) backwards: bool,
}

/// Renders of one check by a hash of everything they read: a root whose inputs are
/// byte-identical in base and head (every root a change leaves alone, with
/// `--render-all`) is rendered once.
#[derive(Default)]
pub(crate) struct RenderedRoots {
    renders: std::sync::Mutex<std::collections::HashMap<[u8; 32], Rendered>>,
}

impl RenderedRoots {
    fn get(&self, key: &[u8; 32]) -> Option<Rendered> {
        self.renders.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: [u8; 32], rendered: &Rendered) {
        if let Ok(mut renders) = self.renders.lock() {
            renders.insert(key, rendered.clone());
        }
    }
}

/// The folders of a chart's `file://` dependencies, which its render reads besides
/// its own folder.
fn dependency_folders(tree: &Tree, root: &PlannedRoot) -> Vec<String> {
    if root.root.kind != super::roots::RootKind::Helm {
        return Vec::new();
    }
    let read = |p: &str| {
        tree.get(p)
            .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
    };
    let is_dir = |p: &str| tree.dirs.contains(p);
    super::helm::local_dependencies(&root.root, &read, &is_dir)
        .into_iter()
        .map(|(_, folder)| folder)
        .collect()
}

/// What a root's render depends on: the planned root (entry, values, namespace,
/// cluster) and the paths and bytes of every file of the tree it reads, the folders
/// of its charts' `file://` dependencies included.
fn input_key(tree: &Tree, root: &PlannedRoot) -> [u8; 32] {
    use sha2::Digest;
    let dependencies: Vec<String> = dependency_folders(tree, root)
        .into_iter()
        .map(|folder| format!("{folder}/"))
        .collect();
    let mut files: Vec<&SourceFile> = tree
        .files
        .iter()
        .filter(|f| root.reads(&f.path) || dependencies.iter().any(|d| f.path.starts_with(d)))
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let mut hash = sha2::Sha256::new();
    hash.update(format!("{root:?}").as_bytes());
    for f in files {
        for part in [f.path.as_bytes(), &f.bytes] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
    }
    hash.finalize().into()
}

/// Is this file a manifest of the checked tree (not config, not policy, not a
/// dot-file or CI config unless `paths.include` names it)?
pub(crate) fn is_manifest(f: &SourceFile, config: &RepoConfig) -> bool {
    is_yaml_input(&f.path) && config.manifest_selected(&f.path)
}

/// A YAML file that is not meshward's own config or policy.
pub(crate) fn is_yaml_input(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    (lower.ends_with(".yaml") || lower.ends_with(".yml"))
        && path != CONFIG_FILE
        && !path.starts_with(".meshward/")
}

/// YAML files `paths` selects that are not read as manifests: dot-files, files
/// under dot-folders and CI configs (see `config::read_by_default`).
pub(crate) fn not_read_as_manifests(tree: &Tree, config: &RepoConfig) -> usize {
    tree.files
        .iter()
        .map(|f| f.path.as_str())
        .chain(tree.oversized.iter().map(|(p, _)| p.as_str()))
        .chain(tree.symlinks.iter().map(String::as_str))
        .filter(|p| is_yaml_input(p) && config.path_selected(p) && !config.manifest_selected(p))
        .count()
}

pub(crate) const TOUCHED: &str = "reads a file this change touches";

pub(crate) const LINKED: &str =
    "deploys into or names a namespace this change deploys into or names";

pub(crate) const APPS: &str = "deploys app objects, rendered to follow them";

pub(crate) const EVERY: &str = "every root is rendered";

/// What became of a render root in a run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RootStatus {
    Rendered,
    Failed,
    Refused,
    Excluded,
    /// A change that neither touches it nor joins with what it deploys.
    NotNeeded,
}

impl RootStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RootStatus::Rendered => "rendered",
            RootStatus::Failed => "failed",
            RootStatus::Refused => "refused",
            RootStatus::Excluded => "excluded",
            RootStatus::NotNeeded => "not needed for this change",
        }
    }

    /// Nothing it deploys was checked, though the change needed it.
    pub fn unchecked(self) -> bool {
        matches!(self, RootStatus::Failed | RootStatus::Refused)
    }
}

/// What became of one root of a revision.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) status: RootStatus,
    /// Why it was rendered ([`TOUCHED`], [`LINKED`], [`EVERY`]), failed or not;
    /// None while no render needed it.
    pub(crate) why: Option<&'static str>,
    /// Why it did not render: the render failure's message.
    pub(crate) problem: Option<String>,
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
pub(crate) fn failure_status(rule: &str) -> Option<RootStatus> {
    match rule {
        "render/refused" => Some(RootStatus::Refused),
        "render/failed" | "render/tool-missing" | "render/limit-exceeded" => {
            Some(RootStatus::Failed)
        }
        _ => None,
    }
}

/// What became of a rendered root: the first render failure among its findings.
pub(crate) fn outcome_of(r: &Rendered, why: &'static str) -> Outcome {
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

impl RenderedRevision {
    /// Roots rendered because the change's objects join with theirs.
    pub(crate) fn linked(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.why == Some(LINKED))
            .count()
    }
}

/// A revision's manifests, with the roots rendered so far.
pub(crate) struct RenderedRevision {
    pub(crate) loaded: manifest::Loaded,
    pub(crate) roots: Vec<PlannedRoot>,
    pub(crate) rendered: Vec<bool>,
    /// What became of each root: not needed until it is rendered.
    pub(crate) outcomes: Vec<Outcome>,
    /// Roots `render.exclude` leaves out.
    pub(crate) excluded: Vec<Root>,
    /// The revision on disk, once a render needed it (or why it is not there).
    pub(crate) dir: Option<Result<Materialized, String>>,
    /// Labels app objects set on the namespaces they create.
    pub(crate) namespace_labels: Vec<AppNamespaceLabels>,
}

/// The files read as manifests of their own: inputs of render roots are checked
/// through their rendered output only.
fn plain_files<'t>(
    tree: &'t Tree,
    discovery: &Discovery,
    config: &RepoConfig,
) -> Vec<&'t SourceFile> {
    tree.files
        .iter()
        .filter(|f| is_manifest(f, config) && !discovery.is_input(&f.path))
        .collect()
}

/// Parses the plain manifests of several revisions into `parsed`, each file they
/// hold alike once, before the revisions are read one by one: read side by side,
/// they would reach each shared file at the same moment, one waiting on the other.
pub(crate) fn parse_shared(trees: &[&Tree], config: &RepoConfig, settings: &Settings) {
    let Some(parsed) = settings.parsed else {
        return;
    };
    let files: Vec<&SourceFile> = trees
        .iter()
        .flat_map(|t| plain_files(t, &discover(t), config))
        .collect();
    parsed.parse_all(&files, settings.manifest_limits);
}

/// Reads a revision's manifests and renders the roots the change touches (every
/// root without a change).
pub(crate) fn revision(tree: &Tree, config: &RepoConfig, settings: &Settings) -> RenderedRevision {
    let discovery = discover(tree);
    let files = plain_files(tree, &discovery, config);
    let clusters = Clusters::of(tree, config);
    let mut loaded = manifest::load_into(
        &files,
        settings.manifest_limits,
        None,
        settings.parsed,
        &|p| clusters.of_path(p),
    );
    // Count every manifest read, render inputs included.
    loaded.files = tree.files.iter().filter(|f| is_manifest(f, config)).count();
    loaded.files_not_read = not_read_as_manifests(tree, config);
    let same_repo = super::roots::SameRepo::new(settings.repo_urls, &config.render.repo_urls);
    // App objects a render produces (an app-of-apps chart's Applications, a Flux
    // Kustomization's HelmReleases) are app objects in turn: plan again with them
    // until no render adds one, each root rendered once however often it is planned.
    let mut dir = None;
    let mut done: Vec<(PlannedRoot, Rendered, &'static str)> = Vec::new();
    let mut app_objects: Vec<Resource> = Vec::new();
    let mut depth = 0;
    let plan = loop {
        let resources: Vec<&Resource> = loaded.resources.iter().chain(&app_objects).collect();
        let mut plan = plan(
            tree,
            &discovery,
            &resources,
            &config.render,
            &same_repo,
            settings.branches,
            &clusters,
        );
        let todo: Vec<(&PlannedRoot, &'static str)> = plan
            .roots
            .iter()
            .filter(|r| !done.iter().any(|(p, _, _)| p == *r))
            .filter_map(|r| why_rendered(tree, r, settings.changed_paths).map(|why| (r, why)))
            .collect();
        let roots: Vec<&PlannedRoot> = todo.iter().map(|(r, _)| *r).collect();
        let outputs = render_roots(tree, settings, &mut dir, &roots);
        for ((r, why), out) in todo.into_iter().zip(outputs) {
            done.push((r.clone(), out, why));
        }
        let found: Vec<Resource> = plan
            .roots
            .iter()
            .filter_map(|r| done.iter().find(|(p, _, _)| p == r))
            .flat_map(|(_, out, _)| out.resources.iter().filter(|o| is_app_object(o)))
            .cloned()
            .collect();
        // One app object on two clusters is followed on each.
        let ids = |rs: &[Resource]| -> BTreeSet<(String, Option<std::sync::Arc<str>>)> {
            rs.iter()
                .map(|r| (r.id.clone(), r.cluster.clone()))
                .collect()
        };
        if ids(&found) == ids(&app_objects) {
            break plan;
        }
        if depth == MAX_APP_DEPTH {
            if let Some(r) = found.iter().find(|r| {
                !app_objects
                    .iter()
                    .any(|a| a.id == r.id && a.cluster == r.cluster)
            }) {
                plan.findings.push(input_finding(
                    "render/failed",
                    Severity::Error,
                    &r.file,
                    r.line,
                    format!("{} was not followed: app objects render app objects more than {MAX_APP_DEPTH} levels deep here (a cycle of apps, or an app-of-apps nested too far), so what it deploys was not checked", r.id),
                ));
            }
            break plan;
        }
        app_objects = found;
        depth += 1;
    };
    // Inputs only the app objects reveal (a patch file an Application or an
    // ApplicationSet's template names, a component) are checked through the render,
    // not also as objects of their own.
    let app_files: BTreeSet<&str> = plan
        .roots
        .iter()
        .filter_map(|p| p.app_file.as_deref())
        .collect();
    let inputs: BTreeSet<&str> = plan
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
    // Apps sharing a folder each apply it, into their own namespaces.
    let applied: Vec<_> = plan
        .directories
        .iter()
        .filter(|d| d.namespace != "default" || d.cluster.is_some())
        .filter_map(|d| {
            let under: Vec<&SourceFile> = files
                .iter()
                .filter(|f| d.holds(&f.path) && !inputs.contains(f.path.as_str()))
                .copied()
                .collect();
            (!under.is_empty()).then_some((d, under))
        })
        .collect();
    let in_folders_with_default: Vec<_> = plan
        .directories
        .iter()
        .filter(|d| d.namespace == "default" && d.cluster.is_none())
        .collect();
    let held = |file: &str| applied.iter().any(|(d, _)| d.holds(file));
    let kept_as_plain = |file: &str| in_folders_with_default.iter().any(|d| d.holds(file));
    loaded
        .resources
        .retain(|r| !held(&r.file) || kept_as_plain(&r.file));
    loaded
        .findings
        .retain(|f| !held(&f.file) || kept_as_plain(&f.file));
    for (d, under) in &applied {
        let again = manifest::load_into(
            under,
            settings.manifest_limits,
            Some(&d.namespace),
            settings.parsed,
            &|p| d.cluster.clone().or_else(|| clusters.of_path(p)),
        );
        loaded.resources.extend(again.resources);
        // A broken file is said once, however many apps apply it.
        for f in again.findings {
            let said = loaded.findings.iter().any(|g| {
                (&g.rule, &g.file, g.line, &g.message) == (&f.rule, &f.file, f.line, &f.message)
            });
            if !said {
                loaded.findings.push(f);
            }
        }
    }
    let mut parsed = RenderedRevision {
        loaded,
        outcomes: vec![Outcome::default(); plan.roots.len()],
        rendered: vec![false; plan.roots.len()],
        excluded: plan.excluded,
        roots: plan.roots,
        dir,
        namespace_labels: plan.namespace_labels,
    };
    // The renders of the final roots; a root an app object replaced is dropped.
    for (i, root) in parsed.roots.iter().enumerate() {
        let Some(at) = done.iter().position(|(p, _, _)| p == root) else {
            continue;
        };
        let (_, mut r, why) = done.swap_remove(at);
        parsed.rendered[i] = true;
        parsed.outcomes[i] = outcome_of(&r, why);
        parsed.loaded.resources.append(&mut r.resources);
        parsed.loaded.findings.append(&mut r.findings);
    }
    let loaded = &mut parsed.loaded;
    for (path, size) in &tree.oversized {
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
    for path in &tree.symlinks {
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

/// App objects rendered from app objects: this many levels are followed.
const MAX_APP_DEPTH: usize = 5;

/// Why a root is rendered, if it is: every root without a change; with one, the
/// roots that read a changed file, and those that deploy app objects (an
/// app-of-apps), whose apps may read it.
fn why_rendered(
    tree: &Tree,
    root: &PlannedRoot,
    changed: Option<&BTreeSet<String>>,
) -> Option<&'static str> {
    let Some(changed) = changed else {
        return Some(EVERY);
    };
    if changed.iter().any(|p| root.reads(p)) {
        return Some(TOUCHED);
    }
    // The app object that defines the root is not what the root deploys.
    let deploys_apps = tree
        .files
        .iter()
        .filter(|f| root.reads(&f.path) && root.app_file.as_deref() != Some(f.path.as_str()))
        .any(|f| {
            let text = String::from_utf8_lossy(&f.bytes);
            (text.contains("argoproj.io") && text.contains("kind: Application"))
                || text.contains("kustomize.toolkit.fluxcd.io")
                || text.contains("helm.toolkit.fluxcd.io")
        });
    deploys_apps.then_some(APPS)
}

/// Renders `roots` from the revision's folder on disk, extracting it first if no
/// render of this revision has yet.
fn render_roots(
    tree: &Tree,
    settings: &Settings,
    dir: &mut Option<Result<Materialized, String>>,
    roots: &[&PlannedRoot],
) -> Vec<Rendered> {
    use rayon::prelude::*;
    if roots.is_empty() {
        // Nothing to render: the revision is not extracted (a whole tree to disk).
        return Vec::new();
    }
    let keys: Vec<Option<[u8; 32]>> = match settings.rendered {
        Some(_) => roots.par_iter().map(|r| Some(input_key(tree, r))).collect(),
        None => vec![None; roots.len()],
    };
    // Every root rendered already: nothing to extract.
    if let Some(cache) = settings.rendered {
        let done: Option<Vec<Rendered>> = roots
            .iter()
            .zip(&keys)
            .map(|(r, key)| {
                let refused = oversized_input(tree, r).is_some();
                key.as_ref()
                    .filter(|_| !refused)
                    .and_then(|k| cache.get(k))
                    .map(|out| on_cluster(out, r))
            })
            .collect();
        if let Some(done) = done {
            return done;
        }
    }
    let dir = dir.get_or_insert_with(|| match tree.source.as_ref() {
        Some(source) => crate::workspace::materialize(source).map_err(|e| format!("{e:#}")),
        None => Err("the revision is not available on disk".to_string()),
    });
    // From git, only what these roots read is extracted.
    let needs = render_inputs(tree, roots);
    let mut missing = Vec::new();
    let repo_dir = match dir {
        Ok(dir) => dir
            .ensure(&needs)
            .map(|_| {
                missing.extend(
                    dir.missing()
                        .into_iter()
                        .flatten()
                        .map(|(p, o)| (p.clone(), o.clone())),
                );
                dir.path().to_path_buf()
            })
            .map_err(|e| format!("{e:#}")),
        Err(why) => Err(why.clone()),
    };
    let repo_dir = match repo_dir {
        Ok(dir) => dir,
        Err(why) => {
            return roots
                .iter()
                .map(|r| {
                    let out = Rendered {
                        resources: Vec::new(),
                        findings: vec![of_root(
                            input_finding(
                                "render/failed",
                                Severity::Error,
                                &r.root.entry,
                                r.root.entry_line,
                                format!("{} was not rendered: {why}", r.root.label()),
                            ),
                            r,
                        )],
                    };
                    on_cluster(out, r)
                })
                .collect();
        }
    };
    let read = |p: &str| std::fs::read_to_string(repo_dir.join(p)).ok();
    let render = |(r, key): (&&PlannedRoot, &Option<[u8; 32]>)| {
        let out = match oversized_input(tree, r).or_else(|| unreadable_input(&missing, r)) {
            Some(refused) => refused,
            None => {
                let shared = settings.rendered.zip(key.as_ref());
                // The other revision may have rendered it since this one began.
                if let Some(done) = shared.and_then(|(cache, key)| cache.get(key)) {
                    return on_cluster(done, r);
                }
                let out = render_root(r, &repo_dir, settings.tools, &settings.limits, &read);
                if let Some((cache, key)) = shared {
                    cache.put(*key, &out);
                }
                out
            }
        };
        on_cluster(out, r)
    };
    let work = roots.par_iter().zip(keys.par_iter());
    if settings.backwards {
        let mut out: Vec<Rendered> = work.rev().map(render).collect();
        out.reverse();
        out
    } else {
        work.map(render).collect()
    }
}

/// The files rendering `roots` may read: every YAML and JSON file (values and
/// patches anywhere in the repository), each root's folders and files, and the
/// folders of its charts' `file://` dependencies.
fn render_inputs<'a>(tree: &'a Tree, roots: &'a [&PlannedRoot]) -> impl Fn(&str) -> bool + 'a {
    let mut folders: BTreeSet<String> = BTreeSet::new();
    for r in roots {
        folders.extend(r.dirs.iter().cloned());
        folders.extend(dependency_folders(tree, r));
    }
    move |path: &str| {
        let lower = path.to_ascii_lowercase();
        lower.ends_with(".yaml")
            || lower.ends_with(".yml")
            || lower.ends_with(".json")
            || roots.iter().any(|r| r.files.contains(path))
            || folders.iter().any(|d| {
                d.is_empty()
                    || path
                        .strip_prefix(d.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// What a root deploys lands on its cluster; so do the findings about it.
fn on_cluster(mut out: Rendered, root: &PlannedRoot) -> Rendered {
    if let Some(cluster) = &root.cluster {
        for r in &mut out.resources {
            r.cluster = Some(cluster.clone());
        }
        for f in &mut out.findings {
            f.cluster = Some(cluster.to_string());
        }
    }
    out
}

/// A finding about one root, told apart from other roots' by it.
fn of_root(mut f: crate::finding::Finding, root: &PlannedRoot) -> crate::finding::Finding {
    f.occurrence = Some(root.root.label());
    f
}

/// A root that reads a file over the size limit is not handed to its tool: the
/// file was left out of the check already, and kustomize or helm would spend the
/// whole time limit (and gigabytes) on it.
fn oversized_input(tree: &Tree, root: &PlannedRoot) -> Option<Rendered> {
    let (path, size) = tree.oversized.iter().find(|(p, _)| root.reads(p))?;
    Some(Rendered {
        resources: Vec::new(),
        findings: vec![of_root(
            input_finding(
                "render/limit-exceeded",
                Severity::Error,
                &root.root.entry,
                root.root.entry_line,
                format!(
                    "{} was not rendered: it reads {path} ({size} bytes), over the size limit for a file, so nothing it deploys was checked. Shrink or split the file, or exclude the root (render.exclude)",
                    root.root.label()
                ),
            ),
            root,
        )],
    })
}

/// A root that reads a file whose blob the clone lacks is not handed to its tool,
/// which would fail on the absent file with words that hide the cause.
fn unreadable_input(missing: &[(String, String)], root: &PlannedRoot) -> Option<Rendered> {
    let (path, object) = missing.iter().find(|(p, _)| root.reads(p))?;
    Some(Rendered {
        resources: Vec::new(),
        findings: vec![of_root(
            input_finding(
                "render/failed",
                Severity::Error,
                &root.root.entry,
                root.root.entry_line,
                format!(
                    "{} was not rendered, so nothing it deploys was checked: it reads {path}, and git cannot read that file's content (`git cat-file` says \"{object} missing\": the clone is shallow, partial or pruned). Fetch the missing objects (for example `git fetch --unshallow`, or clone without `--filter`) and run again",
                    root.root.label()
                ),
            ),
            root,
        )],
    })
}

/// For a change: renders the untouched roots its objects join with (see
/// `render::context`), in head and base alike. A root that is the same in both
/// reads no changed file, so it renders the same: head's output serves base too.
pub(crate) fn context(
    (head_tree, head): (&Tree, &mut RenderedRevision),
    base: Option<(&Tree, &mut RenderedRevision)>,
    changed: &BTreeSet<String>,
    config: &RepoConfig,
    settings: &Settings,
) {
    use super::context::{self, Reach};
    let mut reach = Reach::default();
    let parsed = std::iter::once(&*head).chain(base.as_ref().map(|(_, b)| &**b));
    for p in parsed {
        for r in &p.loaded.resources {
            if r.origin.is_some() || changed.contains(&r.file) {
                reach.add(r);
            }
        }
    }
    let linked = |tree: &Tree, p: &RenderedRevision| -> Vec<usize> {
        (0..p.roots.len())
            .filter(|&i| !p.rendered[i])
            .filter(|&i| {
                let root = &p.roots[i];
                // The app object's own file describes the root (its namespace is
                // in the root already); its objects come from the other files.
                let files: Vec<&SourceFile> = tree
                    .files
                    .iter()
                    .filter(|f| root.reads(&f.path) && root.app_file.as_ref() != Some(&f.path))
                    .collect();
                context::linked(root, &files, &reach, &config.mesh.root_namespace)
            })
            .collect()
    };
    let add = |p: &mut RenderedRevision, i: usize, r: Rendered| {
        p.rendered[i] = true;
        p.outcomes[i] = outcome_of(&r, LINKED);
        p.loaded.resources.extend(r.resources);
        p.loaded.findings.extend(r.findings);
    };
    let head_linked = linked(head_tree, head);
    let head_roots: Vec<&PlannedRoot> = head_linked.iter().map(|&i| &head.roots[i]).collect();
    let outputs = render_roots(head_tree, settings, &mut head.dir, &head_roots);
    let rendered: Vec<(PlannedRoot, Rendered)> = head_linked
        .iter()
        .map(|&i| head.roots[i].clone())
        .zip(outputs)
        .collect();
    if let Some((base_tree, base)) = base {
        let mut missing = Vec::new();
        for i in linked(base_tree, base) {
            match rendered.iter().find(|(root, _)| *root == base.roots[i]) {
                Some((_, out)) => add(base, i, out.clone()),
                None => missing.push(i),
            }
        }
        let roots: Vec<&PlannedRoot> = missing.iter().map(|&i| &base.roots[i]).collect();
        let outputs = render_roots(base_tree, settings, &mut base.dir, &roots);
        for (i, out) in missing.into_iter().zip(outputs) {
            add(base, i, out);
        }
    }
    for (i, (_, out)) in head_linked.into_iter().zip(rendered) {
        add(head, i, out);
    }
}
