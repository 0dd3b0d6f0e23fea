//! Which cluster an object lands on, as the repository says: `.meshward.yaml`
//! `clusters:`, Flux entry points (`clusters/<name>/`, a folder holding a
//! `flux-system/gotk-sync.yaml`), and Argo CD destinations. An object nothing
//! places is on no named cluster.

use crate::config::RepoConfig;
use crate::workspace::Tree;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Argo CD's name for the cluster it runs in.
pub(crate) const IN_CLUSTER: &str = "in-cluster";
const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";

/// Where the repository's clusters are.
#[derive(Debug, Default)]
pub(crate) struct Clusters {
    /// Folder → cluster, longest folder first.
    folders: Vec<(String, Arc<str>)>,
    /// `destination.server` URL or `destination.name` → cluster, from the config.
    servers: BTreeMap<String, Arc<str>>,
}

impl Clusters {
    pub(crate) fn of(tree: &Tree, config: &RepoConfig) -> Clusters {
        let mut folders: BTreeMap<String, Arc<str>> = BTreeMap::new();
        // Layout first, so the config's folders win over it.
        for path in tree.files.iter().map(|f| f.path.as_str()) {
            if let Some(folder) = entry_point(path) {
                let name = folder.rsplit('/').next().unwrap_or(folder);
                if !name.is_empty() {
                    folders.insert(folder.to_string(), Arc::from(name));
                }
            }
        }
        let mut servers = BTreeMap::new();
        for c in &config.clusters {
            let name: Arc<str> = Arc::from(c.name.trim());
            for p in &c.paths {
                let folder = p.trim_matches('/').trim_start_matches("./").to_string();
                folders.insert(folder, name.clone());
            }
            for s in &c.servers {
                servers.insert(normalize_server(s), name.clone());
            }
        }
        let mut folders: Vec<(String, Arc<str>)> = folders.into_iter().collect();
        folders.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        Clusters { folders, servers }
    }

    /// The cluster a file's objects land on, by the folder it is in.
    pub(crate) fn of_path(&self, path: &str) -> Option<Arc<str>> {
        self.folders
            .iter()
            .find(|(folder, _)| {
                folder.is_empty()
                    || path == folder
                    || path
                        .strip_prefix(folder.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .map(|(_, c)| c.clone())
    }

    /// The cluster an Argo CD Application deploys to: its `destination.name` or
    /// `destination.server`. The cluster Argo CD runs in is the one the
    /// Application itself is on, where the repository says which that is.
    pub(crate) fn of_destination(
        &self,
        name: Option<&str>,
        server: Option<&str>,
        own: Option<&Arc<str>>,
    ) -> Option<Arc<str>> {
        let local = || Some(own.cloned().unwrap_or_else(|| Arc::from(IN_CLUSTER)));
        if let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) {
            if let Some(c) = self.servers.get(name) {
                return Some(c.clone());
            }
            return if name == IN_CLUSTER {
                local()
            } else {
                Some(Arc::from(name))
            };
        }
        let server = normalize_server(server?);
        if server.is_empty() {
            return None;
        }
        if let Some(c) = self.servers.get(&server) {
            return Some(c.clone());
        }
        if server == IN_CLUSTER_SERVER {
            return local();
        }
        Some(Arc::from(server.as_str()))
    }
}

fn normalize_server(s: &str) -> String {
    s.trim().trim_end_matches('/').to_string()
}

/// The entry-point folder a file marks: `…/clusters/<name>` for any file below
/// it, or the folder holding `flux-system/gotk-sync.yaml` (Flux bootstrap).
fn entry_point(path: &str) -> Option<&str> {
    if let Some(folder) = path.strip_suffix("/flux-system/gotk-sync.yaml") {
        return Some(folder);
    }
    let parts: Vec<&str> = path.split('/').collect();
    // `clusters/<name>/<file>` at least: a file directly in `clusters/` names none.
    let at = parts.iter().position(|p| *p == "clusters")?;
    if parts.len() < at + 3 {
        return None;
    }
    let end: usize = parts[..at + 2].iter().map(|p| p.len() + 1).sum::<usize>() - 1;
    Some(&path[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(paths: &[&str]) -> Tree {
        Tree {
            files: paths
                .iter()
                .map(|p| crate::manifest::SourceFile {
                    path: p.to_string(),
                    bytes: Vec::new(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn entry_points_name_the_clusters_their_folders_hold() {
        let t = tree(&[
            "clusters/staging/apps.yaml",
            "clusters/production/flux-system/gotk-sync.yaml",
            "clusters/README.yaml",
            "fleet/edge-1/flux-system/gotk-sync.yaml",
            "apps/base/podinfo/release.yaml",
        ]);
        let c = Clusters::of(&t, &RepoConfig::default());
        assert_eq!(
            c.of_path("clusters/staging/apps.yaml").as_deref(),
            Some("staging")
        );
        assert_eq!(
            c.of_path("clusters/production/infra/x.yaml").as_deref(),
            Some("production")
        );
        assert_eq!(
            c.of_path("fleet/edge-1/apps.yaml").as_deref(),
            Some("edge-1")
        );
        assert_eq!(c.of_path("apps/base/podinfo/release.yaml"), None);
        assert_eq!(c.of_path("clusters/README.yaml"), None);
        assert_eq!(c.of_path("clusters/stagingx/a.yaml"), None);
    }

    #[test]
    fn the_config_names_folders_and_servers_and_wins_over_the_layout() {
        let config = RepoConfig::parse(
            "clusters:\n  - name: prod-eu\n    paths: [clusters/production, ./eu/]\n    servers: ['https://10.0.0.1:6443/', edge]\n",
        )
        .expect("valid config");
        let c = Clusters::of(&tree(&["clusters/production/a.yaml"]), &config);
        assert_eq!(
            c.of_path("clusters/production/a.yaml").as_deref(),
            Some("prod-eu")
        );
        assert_eq!(c.of_path("eu/b.yaml").as_deref(), Some("prod-eu"));
        assert_eq!(
            c.of_destination(None, Some("https://10.0.0.1:6443"), None)
                .as_deref(),
            Some("prod-eu")
        );
        assert_eq!(
            c.of_destination(Some("edge"), None, None).as_deref(),
            Some("prod-eu")
        );
    }

    #[test]
    fn argo_destinations_in_cluster_are_where_the_application_is() {
        let c = Clusters::default();
        let own: Arc<str> = Arc::from("staging");
        assert_eq!(
            c.of_destination(None, Some("https://kubernetes.default.svc/"), Some(&own))
                .as_deref(),
            Some("staging")
        );
        assert_eq!(
            c.of_destination(Some("in-cluster"), None, None).as_deref(),
            Some(IN_CLUSTER)
        );
        assert_eq!(
            c.of_destination(None, Some("https://1.2.3.4"), None)
                .as_deref(),
            Some("https://1.2.3.4")
        );
        assert_eq!(c.of_destination(None, None, Some(&own)), None);
    }
}
