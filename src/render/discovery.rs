//! Render roots found in the file listing (kustomizations, charts, Flux's
//! generated kustomizations), before app objects are read.

use super::apps::appset;
use super::apps::has_content;
use super::kustomize;
use super::planned::PlannedRoot;
use super::roots::{self, join, parent, Root, RootKind};
use crate::manifest;
use crate::manifest::SourceFile;
use crate::pointer::At;
use crate::workspace::Tree;
use crate::yaml::Limits;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

/// Render roots found in the file listing, before app objects are read.
pub struct Discovery {
    pub kustomize: Vec<PlannedRoot>,
    pub helm: Vec<PlannedRoot>,
    /// Library charts (`type: library`): templates other charts include, never
    /// installed (helm refuses to), so no root; their files are chart inputs still.
    pub library: Vec<PlannedRoot>,
}

pub(super) struct TreeView<'a> {
    files: BTreeMap<&'a str, &'a SourceFile>,
    dirs: BTreeSet<String>,
}

impl<'a> TreeView<'a> {
    pub(super) fn new(tree: &'a Tree) -> Self {
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
    pub(super) fn exists(&self, p: &str) -> bool {
        self.files.contains_key(p)
    }
    fn glob(pattern: &str) -> Option<globset::GlobMatcher> {
        globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .ok()
            .map(|g| g.compile_matcher())
    }
    pub(super) fn is_dir(&self, p: &str) -> bool {
        self.dirs.contains(p)
    }
    pub(super) fn read(&self, p: &str) -> Option<String> {
        self.files
            .get(p)
            .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
    }
}

pub(super) fn kustomize_root(dir: &str, view: &TreeView) -> Option<PlannedRoot> {
    let entry = kustomize::kustomization_file(dir, &|p| view.exists(p))?;
    let g = kustomize::graph(dir, &|p| view.exists(p), &|p| view.is_dir(p), &|p| {
        view.read(p)
    });
    Some(PlannedRoot {
        cluster: None,
        root: Root::kustomize(dir, &entry, 1),
        dirs: g.dirs,
        files: g.files,
        app_file: None,
        problems: g.problems,
        notes: Vec::new(),
    })
}

/// The release name of a chart no app object deploys: its folder's name, made one
/// Helm accepts (lowercase letters, digits, `-` and `.`, at most 53 characters), as
/// `grpcGateway` becomes `grpcgateway`; helm refuses the folder name as it is.
pub(super) fn release_name(folder: &str) -> String {
    let mapped: String = folder
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.') => c,
            _ => '-',
        })
        .collect();
    let mut name = String::new();
    for part in mapped
        .split('.')
        .map(|p| p.trim_matches('-'))
        .filter(|p| !p.is_empty())
    {
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(part);
    }
    name.truncate(53);
    let name = name.trim_end_matches(['-', '.']);
    if name.is_empty() {
        "release".to_string()
    } else {
        name.to_string()
    }
}

pub(super) fn helm_root(dir: &str) -> PlannedRoot {
    let entry = join(dir, "Chart.yaml").unwrap_or_default();
    PlannedRoot {
        cluster: None,
        root: Root {
            kind: RootKind::Helm,
            path: dir.to_string(),
            entry: entry.clone(),
            entry_line: 1,
            namespace: None,
            release: Some(release_name(dir.rsplit('/').next().unwrap_or_default())),
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
            .is_some_and(has_content)
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
            .at("/spec/path")
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
                cluster: None,
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
    let charts: Vec<(String, bool)> = tree
        .files
        .iter()
        .filter(|f| f.path == "Chart.yaml" || f.path.ends_with("/Chart.yaml"))
        .map(|f| (parent(&f.path).to_string(), is_library_chart(&f.bytes)))
        .collect();
    // A kustomization among a chart's templates is a template helm renders (into
    // a kustomize config object it leaves alone), not a root of its own.
    let in_templates = |dir: &str| {
        charts.iter().any(|(chart, _)| {
            let templates = join(chart, "templates").unwrap_or_default();
            dir == templates || dir.starts_with(&format!("{templates}/"))
        })
    };
    let mut kdirs: Vec<String> = tree
        .files
        .iter()
        .filter(|f| {
            roots::KUSTOMIZATION_FILES
                .iter()
                .any(|k| f.path == *k || f.path.ends_with(&format!("/{k}")))
        })
        .map(|f| parent(&f.path).to_string())
        .filter(|d| !in_templates(d))
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

#[cfg(test)]
mod tests {
    use super::release_name;

    #[test]
    fn folder_names_become_release_names_helm_accepts() {
        assert_eq!(release_name("grpcGateway"), "grpcgateway");
        assert_eq!(release_name("my_chart"), "my-chart");
        assert_eq!(release_name("-web.v2-"), "web.v2");
        assert_eq!(release_name("__"), "release");
        assert_eq!(release_name(&"a".repeat(80)).len(), 53);
    }
}
