//! A repository that deploys to several clusters is several meshes: its objects are
//! split by the cluster they land on, each part judged on its own, and the parts'
//! coverage and changes put side by side. One named cluster (or none) is one mesh,
//! reported exactly as a repository without clusters.

use crate::changes::Changes;
use crate::manifest::Loaded;
use crate::model::coverage::Coverage;
use crate::render::RenderedRevision;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What the objects no cluster claims are called, beside named clusters.
pub(crate) const NO_CLUSTER: &str = "(no cluster named)";

/// The meshes to judge: each named cluster of either revision, then what no
/// cluster claims (if anything). Empty when the repository names fewer than two
/// clusters: then nothing is split, and what names one cluster is told as before.
pub(super) fn meshes(
    head: &RenderedRevision,
    base: Option<&RenderedRevision>,
) -> Vec<Option<Arc<str>>> {
    let revisions = || std::iter::once(head).chain(base);
    let named: BTreeSet<Arc<str>> = revisions()
        .flat_map(|p| {
            p.loaded
                .resources
                .iter()
                .filter_map(|r| r.cluster.clone())
                .chain(p.roots.iter().filter_map(|r| r.cluster.clone()))
        })
        .collect();
    if named.len() < 2 {
        return Vec::new();
    }
    let unclaimed = revisions().any(|p| {
        p.loaded.resources.iter().any(|r| r.cluster.is_none())
            || p.loaded.findings.iter().any(|f| f.cluster.is_none())
    });
    let mut out: Vec<Option<Arc<str>>> = named.into_iter().map(Some).collect();
    if unclaimed {
        out.push(None);
    }
    out
}

/// One mesh: the cluster marks are dropped, so reports read as they did before
/// clusters were known.
pub(super) fn forget(p: &mut RenderedRevision) {
    for r in &mut p.loaded.resources {
        r.cluster = None;
    }
    for f in &mut p.loaded.findings {
        f.cluster = None;
    }
    for r in &mut p.roots {
        r.cluster = None;
    }
}

/// A revision's objects and findings, one part per mesh in `meshes` order. The
/// revision's file counts go with the first part, so parts add up to the whole.
pub(super) fn split(mut loaded: Loaded, meshes: &[Option<Arc<str>>]) -> Vec<Loaded> {
    let mut parts: Vec<Loaded> = meshes.iter().map(|_| Loaded::default()).collect();
    let at = |cluster: Option<&str>| {
        meshes
            .iter()
            .position(|m| m.as_deref() == cluster)
            .unwrap_or(meshes.len().saturating_sub(1))
    };
    for r in loaded.resources.drain(..) {
        let i = at(r.cluster.as_deref());
        parts[i].resources.push(r);
    }
    for f in loaded.findings.drain(..) {
        let i = at(f.cluster.as_deref());
        parts[i].findings.push(f);
    }
    if let Some(first) = parts.first_mut() {
        first.files = loaded.files;
        first.skipped_documents = loaded.skipped_documents;
        first.files_not_read = loaded.files_not_read;
    }
    parts
}

/// GitOps controllers' own objects (Argo CD Applications, Flux Kustomizations and
/// sources): they say where the mesh is, they are not part of it.
pub(super) fn controller_object(r: &crate::manifest::Resource) -> bool {
    r.api_version.starts_with("argoproj.io/") || r.api_version.contains(".toolkit.fluxcd.io/")
}

/// The name a mesh is shown and stored under.
pub(crate) fn name(cluster: Option<&str>) -> String {
    cluster.unwrap_or(NO_CLUSTER).to_string()
}

/// The repository's coverage over all its clusters: totals added up, each
/// namespace named `cluster/namespace`.
pub(super) fn whole_coverage<'a>(parts: impl Iterator<Item = (&'a str, &'a Coverage)>) -> Coverage {
    let mut out = Coverage::default();
    for (cluster, c) in parts {
        out.total.add(&c.total);
        for (ns, n) in &c.namespaces {
            out.namespaces.insert(format!("{cluster}/{ns}"), n.clone());
        }
    }
    out
}

/// The changes of every cluster in one: lists one after another, proxy counts
/// added up, each cluster's cost summary named by its cluster.
pub(super) fn whole_changes(parts: Vec<(String, Changes)>) -> Changes {
    let mut out = Changes::default();
    let mut summaries = Vec::new();
    for (cluster, c) in parts {
        out.identities.extend(c.identities);
        out.vm_bootstrap.extend(c.vm_bootstrap);
        out.selectors.extend(c.selectors);
        out.latency.extend(c.latency);
        out.dataplanes.extend(c.dataplanes);
        out.authz_enforcement.extend(c.authz_enforcement);
        let p = c.proxy_cost;
        let o = &mut out.proxy_cost;
        if let Some(s) = p.summary {
            summaries.push(format!("{cluster}: {s}"));
        }
        o.proxies_added += p.proxies_added;
        o.proxies_removed += p.proxies_removed;
        o.cpu_millicores += p.cpu_millicores;
        o.memory_bytes += p.memory_bytes;
        o.default_cpu = p.default_cpu;
        o.default_memory = p.default_memory;
        o.workloads.extend(p.workloads);
        o.uncounted.extend(p.uncounted);
    }
    if !summaries.is_empty() {
        out.proxy_cost.summary = Some(summaries.join("; "));
    }
    out
}
