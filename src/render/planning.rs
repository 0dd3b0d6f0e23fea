//! The final roots of a revision: discovery, joined with the app objects that
//! point at roots and the roots `.meshward.yaml` names or excludes.

use super::apps::{self as roots, AppNamespaceLabels};
use super::clusters::Clusters;
use super::discovery::{helm_root, kustomize_root, Discovery, TreeView};
use super::kustomize;
use super::planned::{DirectoryRoot, PlannedRoot};
use super::problem::Problem;
use super::roots::{join, Root, RootKind};
use crate::config::{ConfigRoot, RenderConfig};
use crate::finding::{Finding, Severity};
use crate::manifest::{input_finding, Resource};
use crate::workspace::Tree;

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

pub(crate) fn plan(
    tree: &Tree,
    discovery: &Discovery,
    resources: &[&Resource],
    config: &RenderConfig,
    repo_urls: &super::roots::SameRepo,
    branches: &[String],
    clusters: &Clusters,
) -> Plan {
    let view = TreeView::new(tree);
    let mut findings = Vec::new();
    let (apps, external) = roots::app_sources(resources, repo_urls, branches, &view, clusters);
    for e in external {
        let mut f = input_finding(
            "render/external-source",
            Severity::Info,
            &e.file,
            e.line,
            format!("{} was not rendered: {}.", e.resource, e.what),
        );
        f.occurrence = Some(e.resource.clone());
        f.cluster = e.cluster.as_deref().map(str::to_string);
        findings.push(f);
    }
    let mut planned: Vec<PlannedRoot> = discovery
        .kustomize
        .iter()
        .filter(|r| r.root.defined_by.is_none())
        .cloned()
        .collect();
    planned.extend(discovery.helm.iter().cloned());
    // A root no app object deploys lands where its folder says.
    for p in &mut planned {
        p.cluster = clusters.of_path(&p.root.path);
    }
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
            let mut f = input_finding(
                p.rule,
                p.severity,
                &p.file,
                line,
                format!("{}: {}", app.defined_by, p.message),
            );
            f.occurrence = Some(app.defined_by.clone());
            f.cluster = app.cluster.as_deref().map(str::to_string);
            f
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
                r.cluster = app.cluster.clone();
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
                        cluster: app.cluster.clone(),
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
            // A folder without YAML or JSON: Argo CD renders its `.jsonnet` files, or
            // a plugin its inputs; meshward runs neither.
            None if tree.dirs.contains(&app.path) => findings.push(input_finding(
                roots::SETTING_IGNORED,
                Severity::Info,
                &app.file,
                app.line,
                format!("{}: {:?} holds no YAML or JSON files; Argo CD renders such a folder with jsonnet or a config management plugin, which meshward does not run, so nothing it deploys was checked", app.defined_by, app.path),
            )),
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
