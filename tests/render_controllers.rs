//! Rendering as Argo CD, Flux and Helm do on the layouts real repositories use:
//! one folder deployed by many apps, charts in folders with any name, remote
//! clusters, and render failures matched to their own root from base to head.

use crate::common;

use common::*;
use meshward::finding::Status;

fn render_fixture(name: &str) -> std::path::PathBuf {
    fixtures().join("render").join(name)
}

fn deployments(report: &meshward::report::Report) -> Vec<&str> {
    let mut d: Vec<&str> = report
        .models
        .head_resources
        .iter()
        .map(String::as_str)
        .filter(|r| r.starts_with("Deployment/"))
        .collect();
    d.sort();
    d
}

/// Three Applications deploy one plain folder, three more one kustomization, each
/// into its own namespace: Argo CD applies six copies, and each is checked in its
/// namespace; none is read again as plain files in `default`.
#[test]
fn apps_sharing_a_source_path_each_deploy_it_into_their_namespace() {
    let report = check_dir(&render_fixture("shared-path"));
    assert_eq!(
        deployments(&report),
        [
            "Deployment/team-blue/guestbook-ui",
            "Deployment/team-green/guestbook-ui",
            "Deployment/team-red/guestbook-ui",
            "Deployment/tenant-blue/api",
            "Deployment/tenant-green/api",
            "Deployment/tenant-red/api",
        ]
    );
    assert!(
        with_rule(&report, "manifest/duplicate-resource").is_empty(),
        "{:#?}",
        report.findings
    );
    let tenant_roots: Vec<_> = report
        .summary
        .roots
        .iter()
        .filter(|r| r.root.starts_with("kustomize root tenant/base"))
        .collect();
    assert_eq!(tenant_roots.len(), 3, "{:#?}", report.summary.roots);
    assert!(tenant_roots
        .iter()
        .all(|r| r.outcome.as_str() == "rendered"));
}

/// A chart in a folder Helm would not take as a release name (`grpcGateway`),
/// with a kustomization among its templates: the chart renders as release
/// `grpcgateway`, and the templated kustomization is no root of its own.
#[test]
fn a_chart_renders_whatever_its_folder_is_named_and_its_templates_hold() {
    let report = check_dir(&render_fixture("chart-folder"));
    assert!(
        with_rule(&report, "render/failed").is_empty(),
        "{:#?}",
        report.findings
    );
    assert_eq!(deployments(&report), ["Deployment/gateway/grpcgateway"]);
    let roots: Vec<&str> = report
        .summary
        .roots
        .iter()
        .map(|r| r.root.as_str())
        .collect();
    assert_eq!(roots, ["helm root grpcGateway"]);
}

/// `spec.kubeConfig` sends what a Flux Kustomization or HelmRelease deploys to a
/// remote cluster: said on the field, for each.
#[test]
fn flux_objects_for_a_remote_cluster_are_said() {
    let repo = GitRepo::new();
    let kubeconfig = "  kubeConfig:\n    secretRef:\n      name: edge-kubeconfig\n";
    repo.commit_files(
        &[
            (
                "clusters/hub/edge.yaml",
                &format!("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: edge\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./edge\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  targetNamespace: edge\n{kubeconfig}---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: gateway\n  namespace: flux-system\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/gateway\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n  targetNamespace: edge\n{kubeconfig}"),
            ),
            (
                "edge/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: edge\ndata:\n  region: eu\n",
            ),
            ("charts/gateway/Chart.yaml", "apiVersion: v2\nname: gateway\nversion: 0.1.0\n"),
            (
                "charts/gateway/templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  port: \"8443\"\n",
            ),
        ],
        "edge cluster",
    );
    let report = check_dir(&repo.path());
    let said: Vec<_> = with_rule(&report, "render/setting-ignored")
        .into_iter()
        .filter(|f| f.message.contains("kubeConfig"))
        .collect();
    assert_eq!(said.len(), 2, "{:#?}", report.findings);
    let text = std::fs::read_to_string(repo.path().join("clusters/hub/edge.yaml")).expect("read");
    let kubeconfig_lines: Vec<u32> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "kubeConfig:")
        .map(|(i, _)| i as u32 + 1)
        .collect();
    let mut lines: Vec<u32> = said.iter().map(|f| f.line).collect();
    lines.sort();
    assert_eq!(lines, kubeconfig_lines);
    assert!(said.iter().all(|f| f.message.contains("remote cluster")));
    // Flux names the release `<targetNamespace>-<name>`.
    assert!(
        report
            .models
            .head_resources
            .iter()
            .any(|r| r == "ConfigMap/edge/edge-gateway"),
        "{:?}",
        report.models.head_resources
    );
}

/// A tree of plain manifests is said to be one: no root was rendered because
/// there was none, not because something was skipped.
#[test]
fn a_tree_without_roots_says_its_manifests_were_read_as_plain_yaml() {
    let repo = GitRepo::new();
    repo.commit_files(
        &[(
            "mesh/peer.yaml",
            "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: istio-system\nspec:\n  mtls:\n    mode: PERMISSIVE\n",
        )],
        "plain",
    );
    let report = check_dir(&repo.path());
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.starts_with("Rendered 0 of 0 render roots") && n.contains("plain YAML")),
        "{:?}",
        report.summary.notes
    );
}

fn argo_web_app(name: &str) -> String {
    format!("---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: https://github.com/acme/platform.git\n    path: charts/web\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: {name}\n")
}

fn overlay(name: &str) -> String {
    format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {name}\nresources:\n  - ../../shared\n")
}

/// Roots that fail on one shared file (a base's remote URL, a chart's remote
/// dependency) fail each on its own: from base to head, the failure of a root the
/// change adds is introduced, one it removes is resolved and one it keeps stays
/// existing, for kustomize overlays and for the Helm roots of Applications alike.
#[test]
fn render_failures_keep_their_own_root_from_base_to_head() {
    let repo = GitRepo::new();
    let shared = |r: &str| {
        format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - https://github.com/acme/bases//mesh?ref={r}\n")
    };
    let chart = |r: &str| {
        format!("apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n  - name: redis\n    version: {r}\n    repository: https://charts.example.com\n")
    };
    repo.commit_files(
        &[(
            ".meshward.yaml",
            "render:\n  repo_urls: [https://github.com/acme/platform.git]\n",
        )],
        "config",
    );
    repo.write("shared/kustomization.yaml", &shared("v1"));
    repo.write("overlays/kept/kustomization.yaml", &overlay("kept"));
    repo.write("overlays/gone/kustomization.yaml", &overlay("gone"));
    repo.write("charts/web/Chart.yaml", &chart("18.0.0"));
    repo.write(
        "apps/web.yaml",
        &format!("{}{}", argo_web_app("web-eu"), argo_web_app("web-ca")),
    );
    let base = repo.commit("base");
    repo.write("shared/kustomization.yaml", &shared("v2"));
    repo.git(&["rm", "-q", "-r", "overlays/gone"]);
    repo.write("overlays/new/kustomization.yaml", &overlay("new"));
    repo.write("charts/web/Chart.yaml", &chart("18.1.0"));
    repo.write(
        "apps/web.yaml",
        &format!("{}{}", argo_web_app("web-us"), argo_web_app("web-ca")),
    );
    let head = repo.commit("head");
    let report = check_change(&repo, &base, &head);
    let status_of = |needle: &str| -> Vec<Status> {
        report
            .findings
            .iter()
            .filter(|f| f.rule == "render/refused" && f.message.contains(needle))
            .map(|f| f.status)
            .collect()
    };
    assert_eq!(
        status_of("overlays/kept"),
        [Status::Existing],
        "{:#?}",
        report.findings
    );
    assert_eq!(
        status_of("overlays/new"),
        [Status::Introduced],
        "{:#?}",
        report.findings
    );
    assert_eq!(
        status_of("overlays/gone"),
        [Status::Resolved],
        "{:#?}",
        report.findings
    );
    assert_eq!(
        status_of("Application argocd/web-ca"),
        [Status::Existing],
        "{:#?}",
        report.findings
    );
    assert_eq!(
        status_of("Application argocd/web-us"),
        [Status::Introduced],
        "{:#?}",
        report.findings
    );
    assert_eq!(
        status_of("Application argocd/web-eu"),
        [Status::Resolved],
        "{:#?}",
        report.findings
    );
    // What the change left unchecked blocks, whatever base did.
    assert!(report
        .findings
        .iter()
        .filter(|f| f.rule == "render/refused" && f.status != Status::Resolved)
        .all(|f| f.unchecked));
}

/// A tool's error names files as the repository does: not this machine's
/// temporary folders, nor the way up from meshward's wrapper kustomization.
#[test]
fn render_failures_name_repository_paths_only() {
    let repo = GitRepo::new();
    repo.commit_files(
        &[(
            "overlays/bad/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - missing.yaml\n",
        )],
        "a kustomization naming a file that is not there",
    );
    for report in [check_dir(&repo.path()), {
        let head = repo.git(&["rev-parse", "HEAD"]);
        let mut req = request(&repo.path());
        req.head = Some(head);
        check(&req)
    }] {
        let failed = with_rule(&report, "render/failed");
        assert_eq!(failed.len(), 1, "{:#?}", report.findings);
        let m = &failed[0].message;
        assert!(m.contains("'overlays/bad/missing.yaml'"), "{m}");
        let tmp = std::env::temp_dir().display().to_string();
        assert!(
            !m.contains("../") && !m.contains(&tmp) && !m.contains("/wrap"),
            "{m}"
        );
    }
}

/// Flux sources that are not this checkout are named for what they are: a
/// GitRepository of this repository pinned to a tag, an ExternalArtifact an
/// ArtifactGenerator assembles (Flux 2.7), for a Kustomization and a HelmRelease.
#[test]
fn flux_sources_that_are_not_this_checkout_are_said_as_such() {
    let repo = GitRepo::new();
    repo.commit_files(
        &[
            (".meshward.yaml", "render:\n  repo_urls: [https://github.com/acme/fleet]\n"),
            (
                "clusters/prod/sources.yaml",
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: fleet-release\n  namespace: flux-system\nspec:\n  interval: 10m\n  url: https://github.com/acme/fleet\n  ref:\n    tag: v1.4.0\n",
            ),
            (
                "clusters/prod/apps.yaml",
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: pinned\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: fleet-release\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: generated\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./\n  prune: true\n  sourceRef:\n    kind: ExternalArtifact\n    name: platform-bundle\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: gateway\n  namespace: flux-system\nspec:\n  interval: 10m\n  chartRef:\n    kind: ExternalArtifact\n    name: gateway-chart\n",
            ),
            (
                "apps/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  tier: gold\n",
            ),
        ],
        "pinned and generated sources",
    );
    let report = check_dir(&repo.path());
    let external = with_rule(&report, "render/external-source");
    let about = |name: &str| {
        external
            .iter()
            .find(|f| f.message.contains(name))
            .map(|f| f.message.clone())
            .unwrap_or_else(|| panic!("{name} is said: {:#?}", report.findings))
    };
    assert!(
        about("Kustomization/flux-system/pinned").contains("follows tag v1.4.0 of this repository")
    );
    assert!(about("Kustomization/flux-system/generated")
        .contains("ExternalArtifact flux-system/platform-bundle"));
    assert!(about("HelmRelease/flux-system/gateway").contains("ArtifactGenerator"));
    assert_eq!(external.len(), 3, "{:#?}", report.findings);
}
