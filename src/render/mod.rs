//! Rendering: kustomize overlays, Helm charts, and the Argo CD / Flux app objects that
//! point at them, turned into the objects a GitOps controller would apply. Rendering
//! is untrusted work: real binaries, no network, no plugins or exec, confined to the
//! checkout, with time and output limits. Every failure is a finding on the root.

pub mod appset;
pub mod context;
pub mod helm;
pub mod kustomize;
pub mod roots;
pub mod tools;
pub mod values;

pub use crate::child::memory_limit;
use crate::config::{ConfigRoot, RenderConfig};
use crate::finding::{Finding, Severity};
use crate::manifest::{self, input_finding, Limits, Location, Origin, Resource, SourceFile};
use crate::workspace::Tree;
use crate::yaml::Node;
pub use roots::AppNamespaceLabels;
use roots::{join, parent, Root, RootKind};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
pub use tools::{RenderLimits, Tools};

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
    pub fn at(self, line: u32) -> Problem {
        Problem { line, ..self }
    }
}

#[derive(Debug, Clone)]
pub enum Patch {
    Merge {
        file: String,
        doc: Arc<Node>,
    },
    Json {
        file: String,
        ops: Vec<(String, u32)>,
    },
}

/// How fields of a rendered object map back to the files that produced them.
#[derive(Debug, Clone)]
pub enum SourceMap {
    Kustomize {
        origin: Option<(String, Arc<Node>)>,
        patches: Vec<Patch>,
        entry: (String, u32),
    },
    Helm {
        template: Option<(String, Arc<String>)>,
        values: Vec<(String, Arc<Node>)>,
        entry: (String, u32),
    },
}

fn has_path(node: &Node, path: &[Json]) -> bool {
    let mut n = node;
    for step in path {
        let next = match (step, &n.value) {
            (Json::String(k), _) => n.get(k),
            (Json::Number(i), crate::yaml::Value::Seq(items)) => {
                i.as_u64().and_then(|i| items.get(i as usize))
            }
            _ => None,
        };
        match next {
            Some(x) => n = x,
            None => return false,
        }
    }
    true
}

fn pointer(path: &[Json]) -> String {
    path.iter()
        .map(|p| match p {
            Json::String(s) => format!("/{}", s.replace('~', "~0").replace('/', "~1")),
            other => format!("/{other}"),
        })
        .collect()
}

impl manifest::Origin for SourceMap {
    fn locate(&self, path: &[Json]) -> Location {
        match self {
            SourceMap::Kustomize { origin, patches, entry } => {
                let wanted = pointer(path);
                for p in patches.iter().rev() {
                    match p {
                        Patch::Merge { file, doc } if !path.is_empty() && has_path(doc, path) => {
                            return Location {
                                file: file.clone(),
                                line: doc.line_of(path),
                                note: None,
                            }
                        }
                        Patch::Json { file, ops } => {
                            if let Some((_, line)) = ops.iter().rev().find(|(op, _)| !path.is_empty() && (wanted == *op || wanted.starts_with(&format!("{op}/")))) {
                                return Location {
                                    file: file.clone(),
                                    line: *line,
                                    note: None,
                                };
                            }
                        }
                        _ => {}
                    }
                }
                match origin {
                    Some((file, doc)) => Location {
                        file: file.clone(),
                        line: doc.line_of(path),
                        note: None,
                    },
                    None => Location {
                        file: entry.0.clone(),
                        line: entry.1,
                        note: Some("meshward could not trace this rendered object to its source file; the location is the root's kustomization".into()),
                    },
                }
            }
            SourceMap::Helm { template, values, entry } => match helm::locate(template.as_ref(), values, path) {
                Some((file, line)) => Location { file, line, note: None },
                None => match template {
                    Some((file, _)) => Location {
                        file: file.clone(),
                        line: 1,
                        note: Some("meshward could not find the line in the template that sets this field".into()),
                    },
                    None => Location {
                        file: entry.0.clone(),
                        line: entry.1,
                        note: Some("meshward could not trace this rendered object to its template; the location is the chart's Chart.yaml".into()),
                    },
                },
            },
        }
    }
}

/// A root with what it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRoot {
    pub root: Root,
    /// Folders whose files it reads (kustomization folders, the chart folder).
    pub dirs: BTreeSet<String>,
    pub files: BTreeSet<String>,
    /// The app object's file, whose change also touches the root.
    pub app_file: Option<String>,
    /// What keeps it from being rendered: reported instead.
    pub problems: Vec<Problem>,
    /// Said with its render: settings not applied, optional inputs left out.
    pub notes: Vec<Problem>,
}

impl PlannedRoot {
    pub fn reads(&self, path: &str) -> bool {
        self.files.contains(path)
            || self.app_file.as_deref() == Some(path)
            || self.dirs.iter().any(|d| match self.root.kind {
                // A chart reads everything under it; a kustomization only its own folder's YAML.
                RootKind::Helm => d.is_empty() || path.starts_with(&format!("{d}/")),
                RootKind::Kustomize => parent(path) == d,
            })
    }
}

/// A plain folder an app object applies, with the namespace its objects default to.
#[derive(Debug, Clone)]
pub struct DirectoryRoot {
    pub path: String,
    pub namespace: String,
    pub recurse: bool,
    /// Argo CD `directory.include` / `directory.exclude`: globs over the path below
    /// the folder (`*` also matches `/`, as in Argo CD).
    pub include: Option<globset::GlobMatcher>,
    pub exclude: Option<globset::GlobMatcher>,
}

impl DirectoryRoot {
    pub fn holds(&self, file: &str) -> bool {
        let dir = parent(file);
        let under = if self.recurse {
            self.path.is_empty() || dir == self.path || dir.starts_with(&format!("{}/", self.path))
        } else {
            dir == self.path
        };
        let rel = if self.path.is_empty() {
            file
        } else {
            file.strip_prefix(&format!("{}/", self.path))
                .unwrap_or(file)
        };
        under
            && self.include.as_ref().is_none_or(|m| m.is_match(rel))
            && !self.exclude.as_ref().is_some_and(|m| m.is_match(rel))
    }
}

/// Render roots found in the file listing, before app objects are read.
pub struct Discovery {
    pub kustomize: Vec<PlannedRoot>,
    pub helm: Vec<PlannedRoot>,
    /// Library charts (`type: library`): templates other charts include, never
    /// installed (helm refuses to), so no root; their files are chart inputs still.
    pub library: Vec<PlannedRoot>,
}

struct TreeView<'a> {
    files: BTreeMap<&'a str, &'a SourceFile>,
    dirs: BTreeSet<String>,
}

impl<'a> TreeView<'a> {
    fn new(tree: &'a Tree) -> Self {
        let mut dirs = BTreeSet::new();
        for f in &tree.files {
            let mut d = parent(&f.path);
            loop {
                if !dirs.insert(d.to_string()) || d.is_empty() {
                    break;
                }
                d = parent(d);
            }
        }
        TreeView {
            files: tree.files.iter().map(|f| (f.path.as_str(), f)).collect(),
            dirs,
        }
    }
    fn exists(&self, p: &str) -> bool {
        self.files.contains_key(p)
    }
    fn glob(pattern: &str) -> Option<globset::GlobMatcher> {
        globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .ok()
            .map(|g| g.compile_matcher())
    }
    fn is_dir(&self, p: &str) -> bool {
        self.dirs.contains(p)
    }
    fn read(&self, p: &str) -> Option<String> {
        self.files
            .get(p)
            .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
    }
}

fn kustomize_root(dir: &str, view: &TreeView) -> Option<PlannedRoot> {
    let entry = kustomize::kustomization_file(dir, &|p| view.exists(p))?;
    let g = kustomize::graph(dir, &|p| view.exists(p), &|p| view.is_dir(p), &|p| {
        view.read(p)
    });
    Some(PlannedRoot {
        root: Root::kustomize(dir, &entry, 1),
        dirs: g.dirs,
        files: g.files,
        app_file: None,
        problems: g.problems,
        notes: Vec::new(),
    })
}

fn helm_root(dir: &str) -> PlannedRoot {
    let entry = join(dir, "Chart.yaml").unwrap_or_default();
    PlannedRoot {
        root: Root {
            kind: RootKind::Helm,
            path: dir.to_string(),
            entry: entry.clone(),
            entry_line: 1,
            namespace: None,
            release: Some(
                dir.rsplit('/')
                    .next()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("release")
                    .to_string(),
            ),
            values: Vec::new(),
            inline_values: None,
            kustomize: Default::default(),
            helm: Default::default(),
            generated: None,
            defined_by: None,
        },
        dirs: [dir.to_string()].into(),
        files: [entry].into(),
        app_file: None,
        problems: Vec::new(),
        notes: Vec::new(),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Whether a Flux Kustomization sets options that need a kustomization to apply.
fn flux_needs_kustomization(body: &Json) -> bool {
    [
        // Flux sets it on every namespaced object, also those naming their own: a
        // plain folder's objects only default to it.
        "targetNamespace",
        "patches",
        "patchesStrategicMerge",
        "patchesJson6902",
        "images",
        "namePrefix",
        "nameSuffix",
        "commonMetadata",
        "components",
    ]
    .iter()
    .any(|f| {
        body.get("spec")
            .and_then(|s| s.get(*f))
            .is_some_and(roots::has_content)
    })
}

/// Folders without kustomization that a Flux Kustomization applies with options
/// (target namespace, patches, images, name prefix or suffix, common metadata,
/// components): Flux
/// generates a kustomization listing the folder's `.yaml`/`.yml` files, recursively,
/// and the folders below it that hold a kustomization (not descended into). They are
/// roots like any kustomization, so their files are checked through the render only.
/// A folder that also holds app objects is left plain: those objects must be read
/// to know the roots at all.
fn flux_generated(tree: &Tree, view: &TreeView) -> Vec<PlannedRoot> {
    let candidates: Vec<SourceFile> = tree
        .files
        .iter()
        .filter(|f| contains(&f.bytes, b"kustomize.toolkit.fluxcd.io"))
        .cloned()
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let app_files: BTreeSet<&str> = tree
        .files
        .iter()
        .filter(|f| contains(&f.bytes, b"toolkit.fluxcd.io") || contains(&f.bytes, b"argoproj.io"))
        .map(|f| f.path.as_str())
        .collect();
    let exists = |p: &str| view.exists(p);
    let mut out: BTreeMap<String, PlannedRoot> = BTreeMap::new();
    for r in manifest::load(&candidates, &Limits::default()).resources {
        if r.kind != "Kustomization" || !r.api_version.starts_with("kustomize.toolkit.fluxcd.io/") {
            continue;
        }
        let rel = r
            .body
            .pointer("/spec/path")
            .and_then(Json::as_str)
            .unwrap_or(".");
        let Some(path) = join("", rel) else { continue };
        if out.contains_key(&path)
            || !view.is_dir(&path)
            || kustomize::kustomization_file(&path, &exists).is_some()
            || view.exists(&join(&path, "Chart.yaml").unwrap_or_default())
            || !flux_needs_kustomization(&r.body)
        {
            continue;
        }
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        let mut resources = Vec::new();
        let mut subs = BTreeSet::new();
        let mut dirs: BTreeSet<String> = [path.clone()].into();
        let mut files = BTreeSet::new();
        let mut holds_apps = false;
        for f in view.files.keys().filter(|f| f.starts_with(&prefix)) {
            // The topmost folder below `path` on the way to the file with a kustomization.
            let below = &f[prefix.len()..];
            let mut sub = None;
            let mut d = path.clone();
            for seg in parent(below).split('/').filter(|s| !s.is_empty()) {
                d = join(&d, seg).unwrap_or_default();
                if kustomize::kustomization_file(&d, &exists).is_some() {
                    sub = Some(d.clone());
                    break;
                }
            }
            if let Some(sub) = sub {
                subs.insert(sub);
                continue;
            }
            let lower = f.to_ascii_lowercase();
            if !lower.ends_with(".yaml") && !lower.ends_with(".yml") {
                continue;
            }
            holds_apps |= app_files.contains(*f);
            resources.push(f.to_string());
            files.insert(f.to_string());
            dirs.insert(parent(f).to_string());
        }
        if holds_apps {
            continue;
        }
        let mut problems = Vec::new();
        for sub in subs {
            let g = kustomize::graph(&sub, &exists, &|p| view.is_dir(p), &|p| view.read(p));
            dirs.extend(g.dirs);
            files.extend(g.files);
            problems.extend(g.problems);
            resources.push(sub);
        }
        let line = r.line_of(&[Json::from("spec"), Json::from("path")]);
        out.insert(
            path.clone(),
            PlannedRoot {
                root: Root {
                    generated: Some(resources),
                    ..Root::kustomize(&path, &r.file, line)
                },
                dirs,
                files,
                app_file: None,
                problems,
                notes: Vec::new(),
            },
        );
    }
    out.into_values().collect()
}

/// Finds kustomization folders (those no other kustomization includes are roots) and
/// charts (not inside another chart).
pub fn discover(tree: &Tree) -> Discovery {
    let view = TreeView::new(tree);
    let mut kdirs: Vec<String> = tree
        .files
        .iter()
        .filter(|f| {
            roots::KUSTOMIZATION_FILES
                .iter()
                .any(|k| f.path == *k || f.path.ends_with(&format!("/{k}")))
        })
        .map(|f| parent(&f.path).to_string())
        .collect();
    kdirs.dedup();
    let mut all: Vec<PlannedRoot> = kdirs
        .iter()
        .filter_map(|d| kustomize_root(d, &view))
        .collect();
    let included: BTreeSet<String> = all
        .iter()
        .flat_map(|r| {
            r.dirs
                .iter()
                .filter(|d| **d != r.root.path)
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect();
    // Components are never applied on their own.
    let is_component = |r: &PlannedRoot| {
        view.read(&r.root.entry)
            .and_then(|t| yaml_serde::from_str::<Json>(&t).ok())
            .and_then(|k| {
                k.get("kind")
                    .and_then(Json::as_str)
                    .map(|k| k == "Component")
            })
            .unwrap_or(false)
    };
    let generated = flux_generated(tree, &view);
    let mut included = included;
    included.extend(
        generated
            .iter()
            .flat_map(|g| g.dirs.iter().filter(|d| **d != g.root.path).cloned()),
    );
    let (kustomize, bases): (Vec<_>, Vec<_>) = all
        .drain(..)
        .partition(|r| !included.contains(&r.root.path) && !is_component(r));
    let mut kustomize = kustomize;
    kustomize.extend(generated);
    // Bases stay known (an app object may point at one), but are not rendered alone.
    kustomize.extend(bases.into_iter().map(|mut b| {
        b.root.defined_by = Some("base".into());
        b
    }));
    let charts: Vec<(String, bool)> = tree
        .files
        .iter()
        .filter(|f| f.path == "Chart.yaml" || f.path.ends_with("/Chart.yaml"))
        .map(|f| (parent(&f.path).to_string(), is_library_chart(&f.bytes)))
        .collect();
    let (mut helm, mut library) = (Vec::new(), Vec::new());
    for (d, is_library) in charts.iter().filter(|(d, _)| {
        !charts
            .iter()
            .any(|(outer, _)| outer != d && d.starts_with(&format!("{outer}/charts/")))
    }) {
        match is_library {
            true => library.push(helm_root(d)),
            false => helm.push(helm_root(d)),
        }
    }
    Discovery {
        kustomize,
        helm,
        library,
    }
}

/// `type: library` in a Chart.yaml.
fn is_library_chart(chart: &[u8]) -> bool {
    yaml_serde::from_slice::<Json>(chart)
        .ok()
        .and_then(|c| c.get("type").and_then(Json::as_str).map(|t| t == "library"))
        .unwrap_or(false)
}

impl Discovery {
    /// Files that are inputs of some kustomization or chart: not checked on their own.
    pub fn is_input(&self, path: &str) -> bool {
        self.kustomize
            .iter()
            .chain(&self.helm)
            .chain(&self.library)
            .any(|r| r.reads(path))
    }
}

impl appset::RepoLookup for TreeView<'_> {
    fn dirs(&self, pattern: &str) -> Vec<String> {
        let Some(m) = Self::glob(pattern) else {
            return Vec::new();
        };
        self.dirs
            .iter()
            .filter(|d| !d.is_empty() && m.is_match(d.as_str()))
            .cloned()
            .collect()
    }
    fn files(&self, pattern: &str) -> Vec<(String, String)> {
        let Some(m) = Self::glob(pattern) else {
            return Vec::new();
        };
        self.files
            .iter()
            .filter(|(p, _)| m.is_match(*p))
            .map(|(p, f)| {
                (
                    p.to_string(),
                    String::from_utf8_lossy(&f.bytes).into_owned(),
                )
            })
            .collect()
    }
    fn read(&self, path: &str) -> Option<String> {
        TreeView::read(self, path)
    }
    fn is_dir(&self, path: &str) -> bool {
        TreeView::is_dir(self, path)
    }
}

/// The final set of roots of a revision, once app objects and config are read.
pub struct Plan {
    pub roots: Vec<PlannedRoot>,
    /// Roots `render.exclude` leaves out: listed, never rendered.
    pub excluded: Vec<Root>,
    pub directories: Vec<DirectoryRoot>,
    pub findings: Vec<Finding>,
    /// Labels Argo CD Applications set on the namespaces they create.
    pub namespace_labels: Vec<AppNamespaceLabels>,
}

pub fn plan(
    tree: &Tree,
    discovery: &Discovery,
    resources: &[Resource],
    config: &RenderConfig,
    repo_urls: &BTreeSet<String>,
) -> Plan {
    let view = TreeView::new(tree);
    let mut findings = Vec::new();
    let (apps, external) = roots::app_sources(resources, repo_urls, &view);
    for e in external {
        findings.push(input_finding(
            "render/external-source",
            Severity::Info,
            &e.file,
            e.line,
            format!("{} was not rendered: {}.", e.resource, e.what),
        ));
    }
    let mut planned: Vec<PlannedRoot> = discovery
        .kustomize
        .iter()
        .filter(|r| r.root.defined_by.is_none())
        .cloned()
        .collect();
    planned.extend(discovery.helm.iter().cloned());
    let mut directories = Vec::new();
    let mut app_roots = Vec::new();
    for app in apps {
        let template = discovery
            .kustomize
            .iter()
            .chain(&discovery.helm)
            .find(|r| r.root.path == app.path)
            .cloned()
            .or_else(|| kustomize_root(&app.path, &view));
        let said = |p: &Problem| {
            let line = if p.line > 0 { p.line } else { app.line };
            input_finding(
                p.rule,
                p.severity,
                &p.file,
                line,
                format!("{}: {}", app.defined_by, p.message),
            )
        };
        match template {
            Some(mut r) => {
                r.root.namespace = app.namespace.clone();
                if r.root.kind == RootKind::Helm {
                    r.root.release = app.release.clone();
                    r.root.values = app.values.clone();
                    r.root.inline_values = app.inline_values.clone();
                    r.root.helm = app.helm.clone();
                } else {
                    // Components are kustomizations of their own: what they read
                    // touches the root, and what they reference is checked alike.
                    for c in &app.kustomize.components {
                        let g = kustomize::graph(c, &|p| view.exists(p), &|p| view.is_dir(p), &|p| view.read(p));
                        r.dirs.extend(g.dirs);
                        r.files.extend(g.files);
                        r.problems.extend(g.problems);
                    }
                    r.root.kustomize = app.kustomize.clone();
                }
                r.files.extend(app.inputs.iter().cloned());
                r.problems.extend(app.problems.iter().cloned());
                r.notes.extend(app.notes.iter().cloned());
                r.root.defined_by = Some(app.defined_by.clone());
                r.root.entry = app.file.clone();
                r.root.entry_line = app.line;
                r.app_file = Some(app.file.clone());
                app_roots.push(r);
            }
            None if view.is_dir(&app.path) => {
                findings.extend(app.problems.iter().chain(&app.notes).map(said));
                if !app.kustomize.is_empty() {
                    findings.push(input_finding(
                        roots::SETTING_IGNORED,
                        Severity::Info,
                        &app.file,
                        app.line,
                        format!(
                            "{}: its kustomize options (patches, images, name prefix or suffix, common metadata, components, replicas) are set, but {:?} has no kustomization{}, so meshward checked its files as they are: what the options change was not checked",
                            app.defined_by,
                            app.path,
                            if app.directory.recurse { " and also holds app objects (which meshward must read as they are)" } else { "" }
                        ),
                    ));
                }
                let glob = |pattern: &Option<String>| -> Result<Option<globset::GlobMatcher>, String> {
                    pattern
                        .as_ref()
                        .map(|p| globset::Glob::new(p).map(|g| g.compile_matcher()).map_err(|e| format!("{p:?}: {e}")))
                        .transpose()
                };
                match (glob(&app.directory.include), glob(&app.directory.exclude)) {
                    (Ok(include), Ok(exclude)) => directories.push(DirectoryRoot {
                        path: app.path.clone(),
                        namespace: app.namespace.clone().unwrap_or_else(|| "default".into()),
                        recurse: app.directory.recurse,
                        include,
                        exclude,
                    }),
                    (Err(e), _) | (_, Err(e)) => findings.push(input_finding(
                        "render/failed",
                        Severity::Error,
                        &app.file,
                        app.line,
                        format!("{}: directory.include or directory.exclude is not a valid glob ({e}); Argo CD cannot select the files to apply either", app.defined_by),
                    )),
                }
            }
            None => findings.push(input_finding(
                "render/failed",
                Severity::Error,
                &app.file,
                app.line,
                format!("{} points at {:?}, which is not a folder of this repository: it would deploy nothing (or fail to sync)", app.defined_by, app.path),
            )),
        }
    }
    // An app object's root replaces the standalone root of the same folder.
    planned.retain(|p| !app_roots.iter().any(|a| a.root.path == p.root.path));
    planned.extend(app_roots);
    for c in &config.roots {
        let path = join("", &c.path).unwrap_or_default();
        let values: Vec<String> = c.values.iter().filter_map(|v| join(&path, v)).collect();
        let mut found = false;
        for p in planned.iter_mut().filter(|p| p.root.path == path) {
            found = true;
            apply_config_root(p, c, &values);
        }
        if !found {
            let root = if view.exists(&join(&path, "Chart.yaml").unwrap_or_default()) {
                Some(helm_root(&path))
            } else {
                kustomize_root(&path, &view)
            };
            match root {
                Some(mut p) => {
                    apply_config_root(&mut p, c, &values);
                    planned.push(p);
                }
                None => findings.push(input_finding(
                    "render/failed",
                    Severity::Error,
                    crate::config::CONFIG_FILE,
                    1,
                    format!("render root {:?} in .meshward.yaml has neither a Chart.yaml nor a kustomization", c.path),
                )),
            }
        }
    }
    let excluded: Vec<globset::GlobMatcher> = config
        .exclude
        .iter()
        .filter_map(|g| globset::Glob::new(g).ok().map(|g| g.compile_matcher()))
        .collect();
    let (kept, dropped): (Vec<_>, Vec<_>) = planned
        .into_iter()
        .partition(|p| !excluded.iter().any(|m| m.is_match(&p.root.path)));
    let mut excluded_roots = Vec::new();
    for p in dropped {
        excluded_roots.push(p.root.clone());
        findings.push(input_finding(
            "render/excluded",
            Severity::Info,
            &p.root.entry,
            p.root.entry_line,
            format!(
                "{} is excluded in .meshward.yaml (render.exclude): nothing it deploys is checked",
                p.root.label()
            ),
        ));
    }
    Plan {
        roots: kept,
        excluded: excluded_roots,
        directories,
        findings,
        namespace_labels: roots::app_namespace_labels(resources, repo_urls, &view),
    }
}

fn apply_config_root(p: &mut PlannedRoot, c: &ConfigRoot, values: &[String]) {
    if c.release.is_some() {
        p.root.release = c.release.clone();
    }
    if c.namespace.is_some() {
        p.root.namespace = c.namespace.clone();
    }
    if !values.is_empty() {
        p.root.values = values.to_vec();
        p.files.extend(values.iter().cloned());
    }
    p.root.defined_by = Some(
        p.root
            .defined_by
            .clone()
            .unwrap_or_else(|| ".meshward.yaml".into()),
    );
}

/// The result of rendering one root.
#[derive(Clone)]
pub struct Rendered {
    pub resources: Vec<Resource>,
    pub findings: Vec<Finding>,
}

fn problem_finding(p: &Problem, root: &Root) -> Finding {
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
    input_finding(
        p.rule,
        p.severity,
        &file,
        line,
        format!("{}: {}", root.label(), p.message),
    )
}

/// Symlinks under `dir` that resolve outside `repo` (or nowhere).
/// Names of the regular files in `dir` (none when it cannot be read).
/// Copies a folder's files and subfolders; links are left out (one could point
/// outside the repository). Bounded by the revision, which is bounded on read.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn list_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn escaping_symlinks(repo: &Path, dir: &Path) -> Vec<String> {
    let Ok(repo) = repo.canonicalize() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_symlink() {
                let inside = path
                    .canonicalize()
                    .map(|t| t.starts_with(&repo))
                    .unwrap_or(false);
                if !inside {
                    out.push(
                        path.strip_prefix(&repo)
                            .unwrap_or(&path)
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            } else if ft.is_dir() && e.file_name() != ".git" {
                stack.push(path);
            }
        }
    }
    out
}

/// Where `path` (a file of the repository) leaves the repository through a symbolic
/// link, if it does: the link's target, for the message.
fn escaping_link(repo: &Path, path: &str) -> Option<String> {
    let full = repo.join(path);
    let repo = repo.canonicalize().ok()?;
    // A link anywhere along the path counts, not only the file itself.
    let is_link = full
        .ancestors()
        .take_while(|a| a.starts_with(&repo) && *a != repo)
        .any(|a| {
            a.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        });
    if !is_link {
        return None;
    }
    match full.canonicalize() {
        Ok(target) if target.starts_with(&repo) => None,
        Ok(target) => Some(target.display().to_string()),
        Err(_) => Some("a target that does not exist".into()),
    }
}

/// Writes the kustomization Flux generates for a plain folder into `scratch/gen`:
/// copies of its YAML files (regular files only) at their paths below the folder,
/// and the folders below it that hold a kustomization, by relative path.
fn generate(
    scratch: &Path,
    repo_dir: &Path,
    folder: &str,
    resources: &[String],
    relative: &dyn Fn(&str) -> String,
) -> std::io::Result<()> {
    let gen = scratch.join("gen");
    std::fs::create_dir_all(&gen)?;
    let mut listed = Vec::new();
    for r in resources {
        let below = if folder.is_empty() {
            r.as_str()
        } else {
            r.strip_prefix(&format!("{folder}/")).unwrap_or(r)
        };
        let source = repo_dir.join(r);
        let meta = source.symlink_metadata()?;
        if meta.is_dir() {
            // `relative` is from the wrapper folder, a sibling of gen/.
            listed.push(relative(r));
        } else if meta.is_file() {
            let target = gen.join(below);
            if let Some(dir) = target.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::copy(&source, &target)?;
            listed.push(below.to_string());
        }
    }
    let k = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": listed,
    });
    std::fs::write(
        gen.join("kustomization.yaml"),
        serde_json::to_string_pretty(&k).unwrap_or_default(),
    )
}

/// Renders one root from the revision's folder on disk.
pub fn render_root(
    p: &PlannedRoot,
    repo_dir: &Path,
    tools: &Tools,
    limits: &RenderLimits,
    view_read: &dyn Fn(&str) -> Option<String>,
) -> Rendered {
    let root = &p.root;
    let mut findings: Vec<Finding> = p
        .problems
        .iter()
        .map(|pr| problem_finding(pr, root))
        .collect();
    let fail = |findings: &mut Vec<Finding>, problem: Problem| {
        findings.push(problem_finding(&problem, root));
        Rendered {
            resources: Vec::new(),
            findings: std::mem::take(findings),
        }
    };
    let blocked = !findings.is_empty();
    // Said whether or not the root renders: they are about the app object.
    findings.splice(0..0, p.notes.iter().map(|n| problem_finding(n, root)));
    if blocked {
        return Rendered {
            resources: Vec::new(),
            findings,
        };
    }
    for d in &p.dirs {
        let links = escaping_symlinks(repo_dir, &repo_dir.join(d));
        if !links.is_empty() {
            return fail(
                &mut findings,
                Problem::refused(&root.entry, &format!("symbolic links leave the repository ({}); meshward does not render through them", links.join(", "))),
            );
        }
    }
    let Ok(scratch) = tempfile::Builder::new()
        .prefix(crate::workspace::TEMP_PREFIX)
        .tempdir()
    else {
        return fail(
            &mut findings,
            Problem::failed(&root.entry, "could not create a scratch folder"),
        );
    };
    let (cmd, wrap_dir) = match root.kind {
        RootKind::Kustomize => {
            let Some(k) = &tools.kustomize else {
                return fail(
                    &mut findings,
                    Problem {
                        rule: "render/tool-missing",
                        severity: Severity::Error,
                        file: root.entry.clone(),
                        line: 0,
                        message: "neither kustomize nor kubectl was found (MESHWARD_KUSTOMIZE, MESHWARD_KUBECTL, .tools/bin, PATH); nothing it deploys was checked. Run scripts/install-tools or install kustomize".into(),
                    },
                );
            };
            let wrap = scratch.path().join("wrap");
            let repo_abs = repo_dir
                .canonicalize()
                .unwrap_or_else(|_| repo_dir.to_path_buf());
            let wrap_abs = scratch
                .path()
                .canonicalize()
                .unwrap_or_else(|_| scratch.path().to_path_buf())
                .join("wrap");
            let relative =
                |p: &str| kustomize::relative(&wrap_abs, &repo_abs.join(p)).unwrap_or_default();
            let rel = match &root.generated {
                // The kustomization Flux generates for a plain folder, with copies of
                // its files (the load restrictor keeps kustomize inside a root).
                Some(resources) => match generate(scratch.path(), repo_dir, &root.path, resources, &relative) {
                    Ok(()) => "../gen".to_string(),
                    Err(e) => {
                        return fail(
                            &mut findings,
                            Problem::failed(&root.entry, &format!("could not write the kustomization Flux generates for the folder: {e}")),
                        )
                    }
                },
                None => relative(&root.path),
            };
            if std::fs::create_dir_all(&wrap)
                .and_then(|_| {
                    std::fs::write(
                        wrap.join("kustomization.yaml"),
                        kustomize::wrapper(&rel, &root.kustomize, &relative),
                    )
                })
                .is_err()
            {
                return fail(
                    &mut findings,
                    Problem::failed(&root.entry, "could not write the wrapper kustomization"),
                );
            }
            let mut cmd = match k {
                tools::Kustomize::Standalone(bin) => {
                    let mut c = std::process::Command::new(bin);
                    c.arg("build");
                    c
                }
                tools::Kustomize::Kubectl(bin) => {
                    let mut c = std::process::Command::new(bin);
                    c.arg("kustomize");
                    c
                }
            };
            cmd.arg("--load-restrictor")
                .arg("LoadRestrictionsRootOnly")
                .arg(&wrap_abs);
            (cmd, Some((wrap_abs, repo_abs)))
        }
        RootKind::Helm => {
            let Some(helm) = &tools.helm else {
                return fail(
                    &mut findings,
                    Problem {
                        rule: "render/tool-missing",
                        severity: Severity::Error,
                        file: root.entry.clone(),
                        line: 0,
                        message: "helm was not found (MESHWARD_HELM, .tools/bin, PATH); nothing this chart deploys was checked. Run scripts/install-tools or install helm".into(),
                    },
                );
            };
            let problems = helm::check_dependencies(
                root,
                view_read,
                &|p| list_files(&repo_dir.join(p)),
                &|p| repo_dir.join(p).is_dir(),
            );
            if !problems.is_empty() {
                let mut f = findings;
                f.extend(problems.iter().map(|pr| problem_finding(pr, root)));
                return Rendered {
                    resources: Vec::new(),
                    findings: f,
                };
            }
            // Local dependencies go into a copy of the chart: the revision on disk may
            // be the user's own work tree.
            let local = helm::local_dependencies(root, view_read, &|p| repo_dir.join(p).is_dir());
            let chart_dir = if local.is_empty() {
                repo_dir.join(&root.path)
            } else {
                let copy = scratch.path().join("chart");
                let staged = copy_dir(&repo_dir.join(&root.path), &copy).and_then(|()| {
                    local.iter().try_for_each(|(name, folder)| {
                        copy_dir(&repo_dir.join(folder), &copy.join("charts").join(name))
                    })
                });
                if let Err(e) = staged {
                    return fail(
                        &mut findings,
                        Problem::failed(
                            &root.entry,
                            &format!("could not stage the chart's local dependencies: {e}"),
                        ),
                    );
                }
                copy
            };
            let mut cmd = std::process::Command::new(helm);
            cmd.arg("template")
                .arg(root.release.clone().unwrap_or_else(|| "release".into()))
                .arg(&chart_dir)
                .arg("--namespace")
                .arg(
                    root.helm
                        .release_namespace
                        .clone()
                        .or_else(|| root.namespace.clone())
                        .unwrap_or_else(|| "default".into()),
                );
            if let Some(v) = &root.helm.kube_version {
                cmd.arg("--kube-version").arg(v);
            }
            for v in &root.helm.api_versions {
                cmd.arg("--api-versions").arg(v);
            }
            if root.helm.skip_schema_validation {
                cmd.arg("--skip-schema-validation");
            }
            for v in &root.values {
                if let Some(link) = escaping_link(repo_dir, v) {
                    return fail(&mut findings, Problem::refused(&root.entry, &format!("values file {v} is a symbolic link that leaves the repository ({link}); meshward does not render through it")));
                }
                if !repo_dir.join(v).is_file() {
                    if root.helm.ignore_missing_values {
                        findings.push(problem_finding(
                            &Problem {
                                rule: roots::OPTIONAL_INPUT_MISSING,
                                severity: Severity::Info,
                                file: root.entry.clone(),
                                line: 0,
                                message: format!("values file {v} does not exist; the app object ignores missing values files, so the chart was rendered without it, as the controller does"),
                            },
                            root,
                        ));
                        continue;
                    }
                    return fail(
                        &mut findings,
                        Problem::failed(&root.entry, &format!("values file {v} does not exist, so the controller fails to render this chart too. Fix the path, or set ignoreMissingValueFiles (Argo CD) / ignoreMissingValuesFiles (Flux) if it is optional")),
                    );
                }
                cmd.arg("--values").arg(repo_dir.join(v));
            }
            if let Some(inline) = &root.inline_values {
                let file = scratch.path().join("inline-values.yaml");
                if std::fs::write(&file, serde_json::to_string(inline).unwrap_or_default()).is_err()
                {
                    return fail(
                        &mut findings,
                        Problem::failed(&root.entry, "could not write inline values"),
                    );
                }
                cmd.arg("--values").arg(file);
            }
            // Parameters come after every values file, as Argo CD passes them.
            for param in &root.helm.parameters {
                match param {
                    roots::HelmParameter::Set { name, value } => {
                        cmd.arg("--set").arg(format!("{name}={value}"));
                    }
                    roots::HelmParameter::SetString { name, value } => {
                        cmd.arg("--set-string").arg(format!("{name}={value}"));
                    }
                    roots::HelmParameter::SetFile { name, path } => {
                        if let Some(link) = escaping_link(repo_dir, path) {
                            return fail(&mut findings, Problem::refused(&root.entry, &format!("file parameter {name} reads {path}, a symbolic link that leaves the repository ({link}); meshward does not render through it")));
                        }
                        if !repo_dir.join(path).is_file() {
                            return fail(&mut findings, Problem::failed(&root.entry, &format!("file parameter {name} reads {path}, which does not exist, so Argo CD fails to render this chart too. Fix the path")));
                        }
                        cmd.arg("--set-file")
                            .arg(format!("{name}={}", repo_dir.join(path).display()));
                    }
                }
            }
            (cmd, None)
        }
    };
    let output = match tools::run(cmd, scratch.path(), limits) {
        Ok(o) => o,
        Err(tools::RunError::Timeout(t)) => {
            return fail(&mut findings, Problem::limit(&root.entry, format!("rendering took longer than {}s and was stopped; nothing it deploys was checked", t.as_secs())))
        }
        Err(tools::RunError::OutputTooLarge(max)) => {
            return fail(&mut findings, Problem::limit(&root.entry, format!("rendering produced more than {max} bytes and was stopped; nothing it deploys was checked")))
        }
        Err(tools::RunError::OutOfMemory(max)) => {
            return fail(&mut findings, Problem::limit(&root.entry, format!("rendering needed more than {} MiB of memory and was stopped; nothing it deploys was checked. A template that loops without bound (`range until` a huge number) does this; so does a chart far larger than any real one", max / (1024 * 1024))))
        }
        Err(tools::RunError::Spawn(e)) => return fail(&mut findings, Problem::failed(&root.entry, &format!("could not run the render tool: {e}"))),
        Err(tools::RunError::Failed(msg)) => {
            // Paths as the repository names them, not as this machine's temp folders.
            let mut msg = msg;
            for dir in [repo_dir, scratch.path()] {
                if let Ok(abs) = std::fs::canonicalize(dir) {
                    msg = msg.replace(&format!("{}/", abs.display()), "");
                }
            }
            let msg: String = msg.chars().take(2000).collect();
            return fail(&mut findings, Problem::failed(&root.entry, &format!("the render tool failed, so nothing it deploys was checked: {msg}")));
        }
    };
    let text = String::from_utf8_lossy(&output).into_owned();
    let parse_limits = Limits {
        max_file_bytes: limits.max_output_bytes,
        ..Limits::default()
    };
    let namespace = root.namespace.clone().unwrap_or_else(|| "default".into());
    let mut loaded = manifest::load_with_namespace(
        &[SourceFile {
            path: root.entry.clone(),
            bytes: output,
        }],
        &parse_limits,
        Some(&namespace),
    );
    findings.append(&mut loaded.findings);
    let chart_name = view_read(&join(&root.path, "Chart.yaml").unwrap_or_default())
        .and_then(|t| yaml_serde::from_str::<Json>(&t).ok())
        .and_then(|c| c.get("name").and_then(Json::as_str).map(str::to_string))
        .unwrap_or_default();
    let entry = (root.entry.as_str(), root.entry_line);
    let helm_values = match root.kind {
        RootKind::Helm => helm::values_nodes(root, view_read, entry),
        RootKind::Kustomize => Vec::new(),
    };
    for r in &mut loaded.resources {
        let map = match (&root.kind, &wrap_dir) {
            (RootKind::Kustomize, Some((wrap, repo))) => {
                let (origin, patched_in) = kustomize::take_metadata(&mut r.body);
                let gen = wrap.with_file_name("gen");
                let to_repo = |rel: &str| {
                    kustomize::wrapper_to_repo(wrap, repo, rel).or_else(|| {
                        // A copy in the generated kustomization: the folder's file.
                        let below = kustomize::wrapper_to_repo(wrap, &gen, rel)?;
                        join(&root.path, &below)
                    })
                };
                kustomize::source_map(
                    &r.kind,
                    &r.name,
                    origin,
                    &patched_in,
                    &to_repo,
                    view_read,
                    entry,
                    &root.kustomize.patches,
                )
            }
            _ => helm::source_map(
                root,
                &chart_name,
                helm::source_of_line(&text, r.line),
                view_read,
                entry,
                &helm_values,
            ),
        };
        let here = map.locate(&[]);
        r.file = here.file;
        r.line = here.line;
        r.origin = Some(Arc::new(map));
    }
    Rendered {
        resources: loaded.resources,
        findings,
    }
}
