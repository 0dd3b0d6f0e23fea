//! A render root with the files it reads, and the plain folders app objects apply.

use super::problem::Problem;
use super::roots::{parent, Root, RootKind};
use std::collections::BTreeSet;

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
    /// The cluster what it deploys lands on, where the repository says.
    pub cluster: Option<std::sync::Arc<str>>,
}

impl PlannedRoot {
    pub fn reads(&self, path: &str) -> bool {
        self.files.contains(path)
            || self.app_file.as_deref() == Some(path)
            || self.dirs.iter().any(|d| match self.root.kind {
                // A chart reads everything under it but the values files of other
                // releases; a kustomization only its own folder's YAML.
                RootKind::Helm => {
                    (d.is_empty() || path.starts_with(&format!("{d}/")))
                        && !self.others_values(d, path)
                }
                RootKind::Kustomize => parent(path) == d,
            })
    }

    /// A values file at the top of chart folder `dir` that this release does not use
    /// (`values-prod.yaml` beside `values-staging.yaml`): helm reads only the chart's
    /// `values.yaml` and the files it is given, so a change to another environment's
    /// values does not touch this root.
    fn others_values(&self, dir: &str, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        let lower = name.to_ascii_lowercase();
        let Some(stem) = lower
            .strip_suffix(".yaml")
            .or_else(|| lower.strip_suffix(".yml"))
        else {
            return false;
        };
        let values_like = stem != "values"
            && (stem.starts_with("values-")
                || stem.starts_with("values.")
                || stem.starts_with("values_")
                || stem.ends_with("-values")
                || stem.ends_with(".values")
                || stem.ends_with("_values"));
        values_like && parent(path) == dir && !self.root.values.iter().any(|v| v == path)
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
    /// The cluster its objects land on, where the repository says.
    pub cluster: Option<std::sync::Arc<str>>,
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
