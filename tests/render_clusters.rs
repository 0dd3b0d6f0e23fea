//! One repository, several clusters: Flux entry points (`clusters/<name>/`), Argo CD
//! destinations and ApplicationSet cluster lists, `.meshward.yaml clusters:`. Each
//! cluster is judged on its own; a repository with one cluster reads as before.

use crate::common;

use common::*;
use meshward::finding::Status;
use meshward::report::Report;

fn render_fixture(name: &str) -> std::path::PathBuf {
    fixtures().join("render").join(name)
}

fn clusters_of(report: &Report) -> Vec<&str> {
    report
        .coverage
        .clusters
        .iter()
        .map(|c| c.cluster.as_str())
        .collect()
}

/// Workload ids of one cluster's head model.
fn workloads_on(report: &Report, cluster: &str) -> Vec<String> {
    let (_, models) = report
        .models
        .clusters
        .iter()
        .find(|(c, _)| c == cluster)
        .unwrap_or_else(|| panic!("no cluster {cluster}: {:?}", report.summary.clusters));
    let mut ids: Vec<String> = models
        .head_resources
        .iter()
        .filter(|r| r.starts_with("Deployment/"))
        .cloned()
        .collect();
    ids.sort();
    ids
}

/// flux2-kustomize-helm-example's layout: `clusters/staging` and
/// `clusters/production` apply `apps/<cluster>`, both built on one base whose
/// HelmRelease deploys a chart of the repository. Each cluster gets its own copy:
/// no duplicates, the HelmRelease followed on each, and a policy only production
/// has is judged against production's workloads alone.
#[test]
fn a_flux_repository_with_two_clusters_judges_each_on_its_own() {
    let report = check_dir(&render_fixture("flux-clusters"));
    assert_eq!(report.summary.clusters, ["production", "staging"]);
    assert_eq!(clusters_of(&report), ["production", "staging"]);
    assert!(
        with_rule(&report, "manifest/duplicate-resource").is_empty(),
        "{:#?}",
        report.findings
    );
    for cluster in ["production", "staging"] {
        assert_eq!(
            workloads_on(&report, cluster),
            ["Deployment/podinfo/podinfo"]
        );
    }
    let charts: Vec<_> = report
        .summary
        .roots
        .iter()
        .filter(|r| r.root.starts_with("helm root charts/podinfo"))
        .map(|r| (r.cluster.as_deref(), r.outcome.as_str()))
        .collect();
    assert_eq!(
        charts,
        [
            (Some("production"), "rendered"),
            (Some("staging"), "rendered")
        ]
    );
    let nothing = with_rule(&report, "selector/matches-nothing");
    assert_eq!(nothing.len(), 1, "{:#?}", report.findings);
    assert_eq!(nothing[0].cluster.as_deref(), Some("production"));
    let production = &report.coverage.clusters[0];
    let staging = &report.coverage.clusters[1];
    assert_eq!(production.head.total.selectors_ineffective, 1);
    assert_eq!(staging.head.total.selectors_ineffective, 0);
    // The whole repository adds the clusters up, each namespace named by its cluster.
    assert_eq!(report.coverage.head.total.workloads, 2);
    assert!(report
        .coverage
        .head
        .namespaces
        .contains_key("staging/podinfo"));
    let text = meshward::report::text::render(&report, false);
    assert!(
        text.contains("[cluster production]") && text.contains("cluster staging: 1/1 workloads"),
        "{text}"
    );
    let md = meshward::report::markdown::render(&report, &meshward::report::markdown::Links::None);
    assert!(md.contains("**Cluster `production`** (1)"), "{md}");
    assert!(md.contains("| `staging` | 1/1 |"), "{md}");
}

/// An ApplicationSet over a list of clusters, its servers named in
/// `.meshward.yaml`: each generated Application deploys to its own cluster.
#[test]
fn an_application_set_over_a_cluster_list_deploys_to_each_cluster() {
    let report = check_dir(&render_fixture("appset-clusters"));
    assert_eq!(report.summary.clusters, ["production", "staging"]);
    // The ApplicationSet itself is on no named cluster, and is not a mesh of its own.
    assert_eq!(clusters_of(&report), ["production", "staging"]);
    for cluster in ["production", "staging"] {
        assert_eq!(workloads_on(&report, cluster), ["Deployment/shop/cart"]);
    }
    assert!(
        with_rule(&report, "manifest/duplicate-resource").is_empty(),
        "{:#?}",
        report.findings
    );
}

/// A change that breaks production only is introduced on production; staging's
/// copy of the same base is untouched, and the finding names its cluster.
#[test]
fn a_change_to_one_cluster_is_introduced_on_that_cluster_only() {
    let repo = GitRepo::new();
    let base = repo.commit_dir(&render_fixture("appset-clusters"), "base");
    repo.write(
        "deploy/overlays/production/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\npatches:\n  - target:\n      kind: Deployment\n      name: cart\n    patch: |-\n      - op: replace\n        path: /spec/template/metadata/labels/app\n        value: basket\n      - op: replace\n        path: /spec/selector/matchLabels/app\n        value: basket\n",
    );
    let head = repo.commit("production relabels cart");
    let report = check_change(&repo, &base, &head);
    let introduced: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.status == Status::Introduced)
        .collect();
    assert!(!introduced.is_empty(), "{:#?}", report.findings);
    assert!(
        introduced
            .iter()
            .all(|f| f.cluster.as_deref() == Some("production")),
        "{introduced:#?}"
    );
    let production = &report.coverage.clusters[0];
    assert_eq!(production.cluster, "production");
    let before = production.base.as_ref().expect("base coverage");
    assert!(
        production.head.total.selectors_effective < before.total.selectors_effective,
        "{production:#?}"
    );
}

/// A comment-only change to a base both clusters deploy introduces nothing on
/// either.
#[test]
fn a_comment_only_change_on_a_shared_base_introduces_nothing() {
    let repo = GitRepo::new();
    let base = repo.commit_dir(&render_fixture("flux-clusters"), "base");
    let release = repo.path().join("apps/base/podinfo/release.yaml");
    let text = std::fs::read_to_string(&release).expect("read");
    repo.write(
        "apps/base/podinfo/release.yaml",
        &format!("# podinfo for every cluster\n{text}"),
    );
    let head = repo.commit("comment");
    let report = check_change(&repo, &base, &head);
    assert_eq!(report.summary.introduced, 0, "{:#?}", report.findings);
    assert_eq!(report.summary.resolved, 0, "{:#?}", report.findings);
    assert_eq!(report.summary.clusters, ["production", "staging"]);
}

/// A repository whose Argo CD Applications all deploy where Argo CD runs names
/// one cluster: it reads as a repository without clusters.
#[test]
fn one_named_cluster_reads_as_none() {
    let report = check_dir(&render_fixture("shared-path"));
    assert!(report.summary.clusters.is_empty());
    assert!(report.coverage.clusters.is_empty());
    assert!(report.models.clusters.is_empty());
    assert!(report.findings.iter().all(|f| f.cluster.is_none()));
    assert!(report.summary.roots.iter().all(|r| r.cluster.is_none()));
    let json = serde_json::to_string(&report).expect("json");
    assert!(!json.contains("\"cluster"), "{json}");
}
