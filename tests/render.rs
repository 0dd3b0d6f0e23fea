//! Rendering what GitOps controllers render, with the real helm and kustomize
//! binaries (scripts/install-tools puts them in .tools/bin).

use crate::common;

use common::*;
use meshward::finding::Status;
use std::path::Path;

fn render_fixture(name: &str) -> std::path::PathBuf {
    fixtures().join("render").join(name)
}

/// 1-based line of the first line of `file` containing `needle`.
fn line_of(root: &Path, file: &str, needle: &str) -> u32 {
    let text = std::fs::read_to_string(root.join(file)).expect("fixture file");
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle in file") as u32
        + 1
}

#[test]
fn kustomize_patch_finding_points_at_the_patch_line() {
    let root = render_fixture("kustomize");
    let report = check_dir(&root);
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    // Only the prod overlay patches resolution to NONE; staging renders clean, and the
    // base's files are not also checked on their own.
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    let r = f[0].resource.as_ref().expect("resource");
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_str()),
        (Some("egress"), "partner-api")
    );
    assert_eq!(f[0].file, "overlays/prod/resolution.yaml");
    assert_eq!(
        f[0].line,
        line_of(&root, "overlays/prod/resolution.yaml", "resolution: NONE")
    );
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.contains("Rendered 2 of 2")),
        "{:?}",
        report.summary.notes
    );
    // The base's resource as it is (resolution DNS) would be clean: 2 roots x 2 objects.
    assert_eq!(report.summary.head.resources, 4);
}

#[test]
fn helm_values_finding_points_at_the_values_line() {
    let root = render_fixture("helm");
    let report = check_dir(&root);
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "charts/egress/values-prod.yaml");
    assert_eq!(
        f[0].line,
        line_of(&root, "charts/egress/values-prod.yaml", "resolution: NONE")
    );
    // Templates are inputs of the chart, not YAML to parse on their own.
    assert!(
        with_rule(&report, "manifest/parse-error").is_empty(),
        "{:#?}",
        report.findings
    );
}

#[test]
fn argo_application_with_helm_source_and_value_files() {
    let root = render_fixture("argo");
    let report = check_dir(&root);
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "charts/egress/values-prod.yaml");
    assert_eq!(
        f[0].resource.as_ref().and_then(|r| r.namespace.as_deref()),
        Some("egress")
    );
    // The app from another repository is said, not silently skipped.
    let ext = with_rule(&report, "render/external-source");
    assert_eq!(ext.len(), 1);
    assert!(ext[0].message.contains("vendor-dashboards"));
}

#[test]
fn flux_kustomization_renders_its_path_into_its_target_namespace_with_its_patches() {
    // The file says resolution DNS; the Flux Kustomization's own patch makes it
    // DNS_ROUND_ROBIN, which conflicts with two endpoints.
    let root = render_fixture("flux");
    let report = check_dir(&root);
    let f = with_rule(&report, "serviceentry/round-robin-multiple-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    // The field was set by the Flux object's patch: the finding points there.
    assert_eq!(f[0].file, "clusters/prod/egress.yaml");
    assert_eq!(
        f[0].line,
        line_of(
            &root,
            "clusters/prod/egress.yaml",
            "resolution: DNS_ROUND_ROBIN"
        )
    );
    assert!(!f[0].message.contains("could not"), "{}", f[0].message);
    assert_eq!(
        f[0].resource.as_ref().and_then(|r| r.namespace.as_deref()),
        Some("egress")
    );
}

#[test]
fn inline_patches_in_a_kustomization_point_at_their_own_lines() {
    let repo = GitRepo::new();
    let entry = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: partner-api\nspec:\n  hosts: [api.partner.example]\n  location: MESH_EXTERNAL\n  resolution: DNS\n  ports: [{number: 443, name: https, protocol: HTTPS}]\n  endpoints:\n    - address: a.partner.example\n    - address: b.partner.example\n";
    repo.write("base/partner-api.yaml", entry);
    repo.write(
        "base/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - partner-api.yaml\n",
    );
    // A strategic-merge patch written into the overlay's kustomization.
    repo.write(
        "overlays/merge/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: merge\nresources:\n  - ../../base\npatches:\n  - patch: |-\n      apiVersion: networking.istio.io/v1\n      kind: ServiceEntry\n      metadata:\n        name: partner-api\n      spec:\n        resolution: NONE\n",
    );
    // A JSON 6902 patch, the same way.
    repo.write(
        "overlays/ops/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: ops\nresources:\n  - ../../base\npatches:\n  - target:\n      kind: ServiceEntry\n      name: partner-api\n    patch: |\n      - op: replace\n        path: /spec/resolution\n        value: NONE\n",
    );
    let report = check_dir(&repo.path());
    let mut f: Vec<(String, u32, bool)> = with_rule(&report, "serviceentry/none-with-endpoints")
        .iter()
        .map(|f| (f.file.clone(), f.line, f.message.contains("could not")))
        .collect();
    f.sort();
    let merge = "overlays/merge/kustomization.yaml";
    let ops = "overlays/ops/kustomization.yaml";
    assert_eq!(
        f,
        vec![
            (
                merge.to_string(),
                line_of(&repo.path(), merge, "resolution: NONE"),
                false
            ),
            (
                ops.to_string(),
                line_of(&repo.path(), ops, "- op: replace"),
                false
            ),
        ],
        "{:#?}",
        report.findings
    );
}

#[test]
fn chart_with_a_remote_dependency_is_refused() {
    let report = check_dir(&render_fixture("remote-chart"));
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "chart/Chart.yaml");
    assert!(f[0].message.contains("redis") && f[0].message.contains("not vendored"));
    assert_eq!(report.summary.head.resources, 0);
}

/// A `.tgz` holding `files` under `dir/`, as `helm package` makes them.
fn chart_archive(dir: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (name, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("{dir}/{name}"), text.as_bytes())
            .expect("append");
    }
    tar.into_inner().expect("tar").finish().expect("gzip")
}

#[test]
fn vendored_dependency_with_a_version_range_renders() {
    let repo = GitRepo::new();
    repo.write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n  - name: egress\n    version: 1.x.x\n    repository: https://charts.example.com\n",
    );
    repo.write(
        "chart/templates/ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ .Release.Namespace }}\n",
    );
    let archive = chart_archive(
        "egress",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: egress\nversion: 1.2.3\n"),
            (
                "templates/se.yaml",
                "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: partner\nspec:\n  hosts: [partner.example.com]\n  location: MESH_EXTERNAL\n  resolution: NONE\n  ports: [{number: 443, name: https, protocol: TLS}]\n  endpoints: [{address: 10.0.0.1}]\n",
            ),
        ],
    );
    std::fs::create_dir_all(repo.path().join("chart/charts")).expect("mkdir");
    std::fs::write(repo.path().join("chart/charts/egress-1.2.3.tgz"), archive).expect("tgz");
    let report = check_dir(&repo.path());
    assert!(
        with_rule(&report, "render/refused").is_empty(),
        "{:#?}",
        report.findings
    );
    // The subchart was rendered: its ServiceEntry is checked.
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
}

#[test]
fn kustomization_with_a_remote_base_is_refused() {
    let report = check_dir(&render_fixture("remote-base"));
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "overlay/kustomization.yaml");
    assert!(f[0].message.contains("remote"));
}

#[test]
fn flood_is_stopped_by_the_output_limit() {
    let report = check_dir(&render_fixture("flood"));
    let f = with_rule(&report, "render/limit-exceeded");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(f[0].message.contains("bytes"));
}

#[test]
fn endless_template_is_stopped_by_the_time_limit() {
    let report = check_dir(&render_fixture("loop"));
    let f = with_rule(&report, "render/limit-exceeded");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(f[0].message.contains("longer than 2s"));
}

#[test]
fn symlink_leaving_the_repository_is_refused() {
    let repo = GitRepo::new();
    let outside = tempfile::tempdir().expect("tmp");
    std::fs::write(
        outside.path().join("secret.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen}\n",
    )
    .expect("w");
    repo.write("app/kustomization.yaml", "resources: [cm.yaml]\n");
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        repo.path().join("app/cm.yaml"),
    )
    .expect("link");
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(f[0].message.contains("symbolic links"));
    assert!(report
        .findings
        .iter()
        .all(|f| !f.message.contains("stolen")));
}

#[test]
fn missing_tool_is_a_finding() {
    let root = render_fixture("helm");
    let tree = meshward::workspace::read_dir(&root, &Default::default()).expect("tree");
    let opts = meshward::analysis::Options {
        tools: meshward::render::Tools::default(),
        ..meshward::analysis::Options::new(today())
    };
    let report = meshward::analysis::analyze(
        None,
        meshward::analysis::Revision {
            label: "t".into(),
            tree: &tree,
        },
        &opts,
    )
    .expect("analysis");
    let f = with_rule(&report, "render/tool-missing");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(f[0].message.contains("helm"));
}

#[test]
fn roots_the_change_touches_are_rendered_with_those_sharing_its_namespace() {
    let fixture = render_fixture("kustomize");
    let repo = GitRepo::new();
    // Base: prod without its patch.
    copy_tree(&fixture, &repo.path());
    repo.write(
        "overlays/prod/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: egress\nresources:\n  - ../../base\n",
    );
    let base = repo.commit("base");
    copy_tree(&fixture, &repo.path());
    let head = repo.commit("prod switches to NONE");
    let report = check_change(&repo, &base, &head);
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].status, Status::Introduced);
    assert_eq!(f[0].file, "overlays/prod/resolution.yaml");
    // Staging reads no changed file but deploys into prod's namespace (egress), so
    // it is rendered too: rules joining objects in egress see both overlays.
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n == "Rendered 2 of 2 render roots (kustomize, Helm, app objects)."),
        "{:?}",
        report.summary.notes
    );
    assert_eq!(report.summary.head.resources, 4);

    // A change to the base touches both overlays.
    repo.write(
        "base/partner-api.yaml",
        &std::fs::read_to_string(fixture.join("base/partner-api.yaml"))
            .expect("r")
            .replace(
                "location: MESH_EXTERNAL",
                "location: MESH_EXTERNAL # shared",
            ),
    );
    let next = repo.commit("touch the base");
    let report = check_change(&repo, &head, &next);
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.contains("Rendered 2 of 2")),
        "{:?}",
        report.summary.notes
    );
    assert_eq!(
        with_rule(&report, "serviceentry/none-with-endpoints")[0].status,
        Status::Existing
    );
}

#[test]
fn applicationset_git_directories_render_with_their_template() {
    let report = check_dir(&render_fixture("appset"));
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    // The template's destination namespace, from the directory's basename.
    assert_eq!(
        f[0].resource.as_ref().and_then(|r| r.namespace.as_deref()),
        Some("egress-prod")
    );
    assert_eq!(f[0].file, "envs/prod/partner-api.yaml");
    // A generator meshward does not expand is said, not skipped.
    let ext = with_rule(&report, "render/external-source");
    assert_eq!(ext.len(), 1, "{:#?}", report.findings);
    assert!(
        ext[0].message.contains("clusters generator"),
        "{}",
        ext[0].message
    );
}

#[test]
fn applicationset_git_files_in_a_matrix_render_once_per_file() {
    let fixture = render_fixture("appset-files");
    let report = check_dir(&fixture);
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    let mut namespaces: Vec<_> = f
        .iter()
        .filter_map(|f| f.resource.as_ref().and_then(|r| r.namespace.clone()))
        .collect();
    namespaces.sort();
    // Each region file's namespace, through the template.
    assert_eq!(
        namespaces,
        ["egress-eu", "egress-us"],
        "{:#?}",
        report.findings
    );
    assert!(f.iter().all(|f| f.file == "mesh/egress/partner-api.yaml"));
    assert!(with_rule(&report, "render/external-source").is_empty());

    // Editing one region's parameter file touches the root generated from it only.
    let repo = GitRepo::new();
    let base = repo.commit_dir(&fixture, "base");
    repo.write(
        "regions/eu/region.json",
        r#"{"region": "eu", "egress": {"namespace": "egress-europe"}}"#,
    );
    let head = repo.commit("rename the eu egress namespace");
    let report = check_change(&repo, &base, &head);
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.contains("Rendered 1 of 2")),
        "{:?}",
        report.summary.notes
    );
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    let moved: Vec<_> = f
        .iter()
        .map(|f| {
            (
                f.status,
                f.resource.as_ref().and_then(|r| r.namespace.clone()),
            )
        })
        .collect();
    assert!(
        moved.contains(&(Status::Introduced, Some("egress-europe".into())))
            && moved.contains(&(Status::Resolved, Some("egress-eu".into()))),
        "{moved:?}"
    );
}

fn team_overlay(repo: &GitRepo, team: &str, app: &str) {
    repo.write(
        &format!("apps/{team}/kustomization.yaml"),
        &format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {team}\nresources:\n  - {app}.yaml\n"),
    );
    repo.write(
        &format!("apps/{team}/{app}.yaml"),
        &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {app}\nspec:\n  selector:\n    matchLabels: {{app: {app}}}\n  template:\n    metadata:\n      labels: {{app: {app}}}\n      annotations: {{sidecar.istio.io/inject: \"true\"}}\n    spec:\n      serviceAccountName: {app}\n      containers:\n        - name: {app}\n          image: registry.example.com/{app}:1\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {app}\n"),
    );
}

#[test]
fn untouched_roots_the_change_joins_with_are_rendered_as_context() {
    let repo = GitRepo::new();
    team_overlay(&repo, "shop", "web");
    team_overlay(&repo, "bank", "ledger");
    team_overlay(&repo, "games", "dice");
    let base = repo.commit("three teams");
    // A plain-YAML policy: it reads no file of any root, but selects shop's web and
    // admits bank's ledger. `ghost` selects nothing anywhere.
    repo.write(
        "policies/shop.yaml",
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: allow-ledger\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {app: web}\n  action: ALLOW\n  rules:\n    - from:\n        - source:\n            principals: [cluster.local/ns/bank/sa/ledger]\n---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: ghost\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {app: ghost}\n  action: ALLOW\n  rules:\n    - from:\n        - source:\n            principals: [cluster.local/ns/bank/sa/ledger]\n",
    );
    let head = repo.commit("shop admits the ledger");
    let report = check_change(&repo, &base, &head);
    let nothing: Vec<String> = with_rule(&report, "selector/matches-nothing")
        .iter()
        .filter_map(|f| f.resource.as_ref().map(|r| r.name.clone()))
        .collect();
    assert_eq!(nothing, vec!["ghost".to_string()], "{:#?}", report.findings);
    assert!(
        with_rule(&report, "authz/unknown-principal").is_empty()
            && with_rule(&report, "authz/unknown-namespace").is_empty(),
        "{:#?}",
        report.findings
    );
    let note = report
        .summary
        .notes
        .iter()
        .find(|n| n.starts_with("Rendered"))
        .expect("render note");
    assert!(note.starts_with("Rendered 2 of 3"), "{note}");
    assert!(
        note.contains("0 read a file this change touches, 2 more"),
        "{note}"
    );

    // A change to one overlay that names no other namespace renders that one alone.
    repo.write(
        "apps/games/dice.yaml",
        &std::fs::read_to_string(repo.path().join("apps/games/dice.yaml"))
            .expect("dice")
            .replace("dice:1", "dice:2"),
    );
    let next = repo.commit("dice 2");
    let report = check_change(&repo, &head, &next);
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.starts_with("Rendered 1 of 3 render roots (kustomize, Helm, app objects): 1 read a file this change touches. The other 2")),
        "{:?}",
        report.summary.notes
    );
}

#[test]
fn inline_helm_values_point_at_their_line_in_the_app_object() {
    let repo = GitRepo::new();
    copy_tree(&render_fixture("argo"), &repo.path());
    let app = "apps/egress-prod.yaml";
    let original = std::fs::read_to_string(repo.path().join(app)).expect("app");
    let variants = [
        // A values string (Argo helm.values), a block scalar.
        "      values: |\n        partner:\n          # set inline\n          resolution: NONE\n",
        // A values object (Argo helm.valuesObject).
        "      valuesObject:\n        partner:\n          resolution: NONE\n",
    ];
    for inline in variants {
        repo.write(
            app,
            &original.replace("      valueFiles:\n        - values-prod.yaml\n", inline),
        );
        let report = check_dir(&repo.path());
        let f = with_rule(&report, "serviceentry/none-with-endpoints");
        assert_eq!(f.len(), 1, "{inline}: {:#?}", report.findings);
        assert_eq!(
            (f[0].file.as_str(), f[0].line),
            (app, line_of(&repo.path(), app, "resolution: NONE")),
            "{inline}"
        );
    }
}

#[test]
fn kustomization_with_an_absolute_path_is_refused() {
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        outside.path().join("kustomization.yaml"),
        "resources: [cm.yaml]\n",
    )
    .expect("write");
    let repo = GitRepo::new();
    repo.write(
        "overlay/kustomization.yaml",
        &format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\n",
            outside.path().display()
        ),
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "overlay/kustomization.yaml");
    assert!(f[0].message.contains("absolute path"), "{}", f[0].message);
}

#[test]
fn a_failing_render_is_a_finding_with_the_tools_message() {
    let repo = GitRepo::new();
    repo.write(
        "overlay/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cm.yaml\npatches:\n  - path: patch.yaml\n",
    );
    repo.write(
        "overlay/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {a: b}\n",
    );
    // Patches an object the overlay does not have: kustomize refuses the build.
    repo.write(
        "overlay/patch.yaml",
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: partner-api-typo\nspec:\n  resolution: NONE\n",
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/failed");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "overlay/kustomization.yaml");
    assert!(
        f[0].message.contains("nothing it deploys was checked")
            && f[0].message.contains("partner-api-typo"),
        "{}",
        f[0].message
    );
    assert_eq!(fail_on(&report), meshward::finding::FailOn::Error);
    assert_eq!(report.summary.verdict, meshward::report::Verdict::Fail);
}

#[test]
fn config_roots_that_are_excluded_or_missing_are_said() {
    let repo = GitRepo::new();
    copy_tree(&render_fixture("helm"), &repo.path());
    repo.write(
        ".meshward.yaml",
        "render:\n  roots:\n    - path: charts/egress\n      values: [values-prod.yaml]\n    - path: charts/gone\n  exclude:\n    - charts/egress\n",
    );
    let report = check_dir(&repo.path());
    // The excluded chart is not rendered, and says so: its finding is not there.
    assert!(with_rule(&report, "serviceentry/none-with-endpoints").is_empty());
    let excluded = with_rule(&report, "render/excluded");
    assert_eq!(excluded.len(), 1, "{:#?}", report.findings);
    assert!(excluded[0].message.contains("charts/egress"));
    assert!(excluded[0]
        .message
        .contains("nothing it deploys is checked"));
    // A root that is neither a chart nor a kustomization is an error on the config.
    let failed = with_rule(&report, "render/failed");
    assert_eq!(failed.len(), 1, "{:#?}", report.findings);
    assert_eq!(failed[0].file, ".meshward.yaml");
    assert!(failed[0].message.contains("charts/gone"));
}

#[test]
fn a_field_no_line_can_be_found_for_says_so() {
    let repo = GitRepo::new();
    repo.write(
        "charts/egress/Chart.yaml",
        "apiVersion: v2\nname: egress\nversion: 0.1.0\n",
    );
    // The whole spec on one line: no line of the template starts with `resolution:`.
    repo.write(
        "charts/egress/templates/se.yaml",
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: partner-api\nspec: {hosts: [api.partner.example], location: MESH_EXTERNAL, resolution: NONE, ports: [{number: 443, name: https, protocol: TLS}], endpoints: [{address: 203.0.113.10}]}\n",
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(
        (f[0].file.as_str(), f[0].line),
        ("charts/egress/templates/se.yaml", 1)
    );
    assert!(
        f[0].message
            .contains("meshward could not find the line in the template"),
        "{}",
        f[0].message
    );
}

// App-object settings: each one applied as the controller applies it, or said.

const THIS_REPO: &str = "https://github.com/acme/gitops";

/// A repository with the `argo` fixture's chart and `.meshward.yaml`, and `files`.
fn argo_repo(files: &[(&str, &str)]) -> GitRepo {
    let repo = GitRepo::new();
    copy_tree(&render_fixture("argo"), &repo.path());
    std::fs::remove_file(repo.path().join("apps/egress-prod.yaml")).expect("rm");
    for (path, text) in files {
        repo.write(path, text);
    }
    repo
}

/// An Application deploying to `egress`, with `sources` (indented under spec).
fn argo_app(sources: &str) -> String {
    format!("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: egress-prod\n  namespace: argocd\nspec:\n  project: default\n{sources}  destination:\n    server: https://kubernetes.default.svc\n    namespace: egress\n")
}

/// A single-source Application of the egress chart with `helm` (indented under it).
fn egress_chart_app(helm: &str) -> String {
    argo_app(&format!(
        "  source:\n    repoURL: {THIS_REPO}\n    path: charts/egress\n    helm:\n{helm}"
    ))
}

fn rules(report: &meshward::report::Report) -> Vec<&str> {
    report.findings.iter().map(|f| f.rule.as_str()).collect()
}

/// The chart's resolution, as the rules see it: how many findings say NONE with
/// endpoints, and DNS_ROUND_ROBIN with several.
fn assert_resolution(report: &meshward::report::Report, none: usize, round_robin: usize) {
    let count = |rule| with_rule(report, rule).len();
    assert_eq!(
        (
            count("serviceentry/none-with-endpoints"),
            count("serviceentry/round-robin-multiple-endpoints")
        ),
        (none, round_robin),
        "{:#?}",
        report.findings
    );
}

#[test]
fn argo_helm_parameters_apply_after_the_values_files() {
    // values-prod.yaml says NONE; the parameter, passed after it, wins.
    let repo = argo_repo(&[(
        "apps/egress.yaml",
        &egress_chart_app("      valueFiles: [values-prod.yaml]\n      parameters:\n        - name: partner.resolution\n          value: DNS_ROUND_ROBIN\n        - name: partner.host\n          value: \"api.partner.example.com\"\n          forceString: true\n"),
    )]);
    let report = check_dir(&repo.path());
    assert_resolution(&report, 0, 1);
}

#[test]
fn argo_helm_file_parameters_read_files_of_the_repository_only() {
    let app = egress_chart_app(
        "      fileParameters:\n        - name: partner.resolution\n          path: resolution.txt\n",
    );
    let repo = argo_repo(&[("apps/egress.yaml", &app)]);
    std::fs::write(repo.path().join("charts/egress/resolution.txt"), "NONE").expect("w");
    let report = check_dir(&repo.path());
    assert_resolution(&report, 1, 0);

    // A path that leaves the repository is refused, naming it; nothing is rendered.
    let app = app.replace("path: resolution.txt", "path: ../../../etc/hostname");
    repo.write("apps/egress.yaml", &app);
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("../../../etc/hostname"),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].file, "apps/egress.yaml");
    assert_eq!(
        f[0].line,
        line_of(
            &repo.path(),
            "apps/egress.yaml",
            "- name: partner.resolution"
        )
    );
    assert_eq!(
        report.summary.head.resources, 1,
        "only the Application itself"
    );

    // So is a symlink that leaves the checkout.
    let outside = tempfile::tempdir().expect("tmp");
    std::fs::write(outside.path().join("secret"), "NONE").expect("w");
    std::fs::remove_file(repo.path().join("charts/egress/resolution.txt")).expect("rm");
    std::os::unix::fs::symlink(
        outside.path().join("secret"),
        repo.path().join("charts/egress/resolution.txt"),
    )
    .expect("link");
    repo.write(
        "apps/egress.yaml",
        &app.replace("path: ../../../etc/hostname", "path: resolution.txt"),
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(f[0].message.contains("symbolic link"), "{}", f[0].message);
    assert!(with_rule(&report, "serviceentry/none-with-endpoints").is_empty());
}

#[test]
fn argo_missing_value_files_fail_unless_ignored() {
    let helm = "      valueFiles: [values-prod.yaml, values-absent.yaml]\n";
    let repo = argo_repo(&[("apps/egress.yaml", &egress_chart_app(helm))]);
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/failed");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("values-absent.yaml"),
        "{}",
        f[0].message
    );

    let helm = format!("{helm}      ignoreMissingValueFiles: true\n");
    repo.write("apps/egress.yaml", &egress_chart_app(&helm));
    let report = check_dir(&repo.path());
    assert!(
        with_rule(&report, "render/failed").is_empty(),
        "{:#?}",
        report.findings
    );
    let f = with_rule(&report, "render/optional-input-missing");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("charts/egress/values-absent.yaml"),
        "{}",
        f[0].message
    );
    // The file that exists still applies.
    assert_resolution(&report, 1, 0);
}

#[test]
fn argo_values_object_wins_over_values() {
    let helm = "      values: |\n        partner:\n          resolution: NONE\n      valuesObject:\n        partner:\n          resolution: DNS_ROUND_ROBIN\n";
    let repo = argo_repo(&[("apps/egress.yaml", &egress_chart_app(helm))]);
    let report = check_dir(&repo.path());
    assert_resolution(&report, 0, 1);
}

#[test]
fn value_files_outside_the_repository_are_refused_not_dropped() {
    let helm = "      valueFiles:\n        - values-prod.yaml\n        - ../../../etc/meshward-values.yaml\n";
    let repo = argo_repo(&[("apps/egress.yaml", &egress_chart_app(helm))]);
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("../../../etc/meshward-values.yaml"),
        "{}",
        f[0].message
    );
    assert_eq!(
        f[0].line,
        line_of(&repo.path(), "apps/egress.yaml", "../../../etc/")
    );
    // Not rendered with the values that are left: what it would deploy is unknown.
    assert!(with_rule(&report, "serviceentry/none-with-endpoints").is_empty());

    // Flux HelmRelease valuesFiles alike.
    repo.write(
        "apps/egress.yaml",
        &flux_release("      valuesFiles: [../outside.yaml]\n", ""),
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(f[0].message.contains("../outside.yaml"), "{}", f[0].message);
}

#[test]
fn argo_multi_source_values_ref_reads_this_repository() {
    let sources = format!("  sources:\n    - repoURL: {THIS_REPO}\n      path: charts/egress\n      helm:\n        valueFiles:\n          - $values/envs/prod/egress.yaml\n          - $shared/egress/common.yaml\n    - repoURL: {THIS_REPO}.git\n      targetRevision: main\n      ref: values\n    - repoURL: https://github.com/acme/shared-values\n      ref: shared\n");
    let repo = argo_repo(&[
        ("apps/egress.yaml", &argo_app(&sources)),
        ("envs/prod/egress.yaml", "partner:\n  resolution: NONE\n"),
    ]);
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "envs/prod/egress.yaml");
    assert!(
        with_rule(&report, "render/failed").is_empty(),
        "{:#?}",
        report.findings
    );
    // The values from the other repository are said, and the rest rendered.
    let ext = with_rule(&report, "render/external-source");
    assert_eq!(ext.len(), 1, "{:#?}", report.findings);
    assert!(
        ext[0].message.contains("$shared/egress/common.yaml")
            && ext[0].message.contains("acme/shared-values"),
        "{}",
        ext[0].message
    );
}

/// A folder with its kustomization: an injected namespace, a Deployment, and an
/// AuthorizationPolicy whose selector only the app object's labels make match.
fn shop_repo(app_kustomize: &str) -> GitRepo {
    let repo = GitRepo::new();
    repo.write(
        ".meshward.yaml",
        &format!("render:\n  repo_urls: [{THIS_REPO}]\n"),
    );
    repo.write(
        "mesh/shop/kustomization.yaml",
        "resources: [namespace.yaml, web.yaml, policy.yaml]\n",
    );
    repo.write("mesh/shop/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    istio-injection: enabled\n");
    repo.write("mesh/shop/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: registry.example.com/web:1\n");
    repo.write("mesh/shop/policy.yaml", "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: payments-only\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {team: payments}\n  action: ALLOW\n  rules:\n    - from:\n        - source:\n            namespaces: [shop]\n");
    repo.write("mesh/components/tier/kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n  - path: tier.yaml\n");
    repo.write("mesh/components/tier/tier.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  template:\n    metadata:\n      labels:\n        tier: backend\n");
    repo.write("mesh/patches/sa.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  template:\n    spec:\n      serviceAccountName: payments\n");
    repo.write(
        "apps/shop.yaml",
        &format!("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: shop\n  namespace: argocd\nspec:\n  source:\n    repoURL: {THIS_REPO}\n    path: mesh/shop\n    kustomize:\n{app_kustomize}  destination:\n    namespace: shop\n"),
    );
    repo
}

fn workload<'a>(report: &'a meshward::report::Report, name: &str) -> &'a meshward::model::Workload {
    report
        .models
        .head
        .workloads
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("no workload {name}: {:#?}", report.models.head.workloads))
}

#[test]
fn argo_kustomize_options_apply_as_argo_applies_them() {
    let repo = shop_repo(concat!(
        "      commonLabels: {team: payments}\n",
        "      replicas:\n        - name: web\n          count: \"3\"\n",
        "      components: [../components/tier]\n",
        "      patches:\n",
        "        - path: ../patches/sa.yaml\n",
        "        - target: {kind: Deployment, name: web}\n",
        "          patch: |-\n",
        "            - op: add\n",
        "              path: /spec/template/metadata/labels/patched\n",
        "              value: inline\n",
    ));
    let report = check_dir(&repo.path());
    assert!(
        !rules(&report).iter().any(|r| r.starts_with("render/")),
        "{:#?}",
        report.findings
    );
    let web = workload(&report, "web");
    assert_eq!(web.replicas, Some(3), "{:#?}", report.models.head.workloads);
    assert_eq!(web.service_account, "payments");
    // Argo's commonLabels reach the pod template (kustomize commonLabels), so the
    // policy's selector matches; the component's label is there too.
    assert_eq!(
        web.labels.get("team").map(String::as_str),
        Some("payments"),
        "{web:#?}"
    );
    assert_eq!(
        web.labels.get("tier").map(String::as_str),
        Some("backend"),
        "{web:#?}"
    );
    assert_eq!(
        web.labels.get("patched").map(String::as_str),
        Some("inline"),
        "{web:#?}"
    );
    assert!(
        with_rule(&report, "selector/matches-nothing").is_empty(),
        "{:#?}",
        report.findings
    );
    // The patch file is a fragment of the rendered Deployment, not a second one.
    assert!(
        with_rule(&report, "manifest/duplicate-resource").is_empty()
            && !report
                .findings
                .iter()
                .any(|f| f.rule.starts_with("manifest/") && f.file == "mesh/patches/sa.yaml"),
        "{:#?}",
        report.findings
    );

    // labelWithoutSelector keeps the labels off selectors and templates; common
    // annotations reach the pod template (here: the workload opts out of injection).
    let repo = shop_repo("      commonLabels: {team: payments}\n      labelWithoutSelector: true\n      commonAnnotations: {sidecar.istio.io/inject: \"false\"}\n");
    let report = check_dir(&repo.path());
    assert!(!workload(&report, "web").labels.contains_key("team"));
    assert_eq!(
        with_rule(&report, "selector/matches-nothing").len(),
        1,
        "{:#?}",
        report.findings
    );
    assert_eq!(
        with_rule(&report, "injection/workload-opted-out").len(),
        1,
        "{:#?}",
        report.findings
    );

    // A component outside the repository is refused.
    let repo = shop_repo("      components: [../../../../elsewhere]\n");
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("../../../../elsewhere"),
        "{}",
        f[0].message
    );
}

/// A Flux HelmRelease of the egress chart in namespace egress, with `chart_spec`
/// (indented under chart.spec) and `spec` (indented under spec).
fn flux_release(chart_spec: &str, spec: &str) -> String {
    format!("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: egress\n  namespace: egress\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/egress\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n        namespace: flux-system\n{chart_spec}{spec}")
}

#[test]
fn flux_values_from_merges_config_maps_and_secrets_of_the_repository_in_order() {
    let values_from = "  valuesFrom:\n    - kind: ConfigMap\n      name: egress-values\n    - kind: Secret\n      name: egress-secret\n      valuesKey: resolution\n      targetPath: partner.resolution\n    - kind: ConfigMap\n      name: egress-extra\n      optional: true\n    - kind: Secret\n      name: egress-credentials\n";
    let repo = argo_repo(&[
        ("apps/egress.yaml", &flux_release("", values_from)),
        (
            "apps/egress-values.yaml",
            // NONE (base64) through the Secret's targetPath wins over the ConfigMap.
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: egress-values\n  namespace: egress\ndata:\n  values.yaml: |\n    partner:\n      resolution: DNS_ROUND_ROBIN\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: egress-secret\n  namespace: egress\ndata:\n  resolution: Tk9ORQ==\n",
        ),
    ]);
    let report = check_dir(&repo.path());
    assert_resolution(&report, 1, 0);
    let optional = with_rule(&report, "render/optional-input-missing");
    assert_eq!(optional.len(), 1, "{:#?}", report.findings);
    assert!(
        optional[0].message.contains("egress/egress-extra"),
        "{}",
        optional[0].message
    );
    let f = with_rule(&report, "render/values-unresolved");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("Secret egress/egress-credentials")
            && f[0].message.contains("rendered without those values"),
        "{}",
        f[0].message
    );
    assert_eq!(
        f[0].line,
        line_of(&repo.path(), "apps/egress.yaml", "name: egress-credentials") - 1
    );

    // spec.values goes on top of everything valuesFrom brings.
    repo.write(
        "apps/egress.yaml",
        &flux_release(
            "",
            &format!("{values_from}  values:\n    partner:\n      resolution: DNS_ROUND_ROBIN\n"),
        ),
    );
    let report = check_dir(&repo.path());
    assert_resolution(&report, 0, 1);
}

const FLUX_EGRESS_PLAIN: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: egress\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./apps/egress\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  targetNamespace: egress\n";

#[test]
fn flux_kustomization_of_a_plain_folder_applies_its_options() {
    let repo = GitRepo::new();
    copy_tree(&render_fixture("flux"), &repo.path());
    std::fs::remove_file(repo.path().join("apps/egress/kustomization.yaml")).expect("rm");
    // A sub-folder with its own kustomization is a resource of the generated one.
    repo.write(
        "apps/egress/extra/kustomization.yaml",
        "resources: [se.yaml]\n",
    );
    repo.write(
        "apps/egress/extra/se.yaml",
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: other-api\nspec:\n  hosts: [other.example.com]\n  location: MESH_EXTERNAL\n  resolution: NONE\n  ports: [{number: 443, name: https, protocol: TLS}]\n  endpoints: [{address: 10.0.0.1}]\n",
    );
    let report = check_dir(&repo.path());
    // The Flux object's own patch applies to the plain folder's file.
    let f = with_rule(&report, "serviceentry/round-robin-multiple-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "clusters/prod/egress.yaml");
    let r = f[0].resource.as_ref().expect("resource");
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_str()),
        (Some("egress"), "partner-api")
    );
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "apps/egress/extra/se.yaml");
    // Checked once, through the render: not also as plain files.
    assert_eq!(
        report.summary.head.resources, 3,
        "{:?}",
        report.models.head_resources
    );
    assert!(with_rule(&report, "manifest/duplicate-resource").is_empty());

    // Without any option it stays a plain folder in the target namespace.
    repo.write("clusters/prod/egress.yaml", FLUX_EGRESS_PLAIN);
    let report = check_dir(&repo.path());
    assert!(with_rule(&report, "serviceentry/round-robin-multiple-endpoints").is_empty());
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert_eq!(f[0].file, "apps/egress/extra/se.yaml");
}

#[test]
fn settings_meshward_does_not_apply_are_said() {
    let repo = GitRepo::new();
    copy_tree(&render_fixture("flux"), &repo.path());
    repo.write(
        "clusters/prod/egress.yaml",
        &format!("{FLUX_EGRESS_PLAIN}  postBuild:\n    substitute:\n      cluster: prod\n"),
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/setting-ignored");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("postBuild.substitute"),
        "{}",
        f[0].message
    );
    assert_eq!(
        f[0].line,
        line_of(&repo.path(), "clusters/prod/egress.yaml", "substitute:")
    );

    let repo = argo_repo(&[(
        "apps/egress.yaml",
        &argo_app(&format!("  source:\n    repoURL: {THIS_REPO}\n    path: charts/egress\n    plugin:\n      name: envsubst\n")),
    )]);
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/setting-ignored");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(f[0].message.contains("plugin"), "{}", f[0].message);
}

#[test]
fn argo_directory_options_select_the_files_the_app_applies() {
    let repo = GitRepo::new();
    repo.write(
        ".meshward.yaml",
        &format!("render:\n  repo_urls: [{THIS_REPO}]\n"),
    );
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n");
    repo.write("plain/a.yaml", &cm("a"));
    repo.write("plain/sub/b.yaml", &cm("b"));
    repo.write("plain/legacy/c.yaml", &cm("c"));
    repo.write(
        "apps/plain.yaml",
        &format!("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: plain\n  namespace: argocd\nspec:\n  source:\n    repoURL: {THIS_REPO}\n    path: plain\n    directory:\n      recurse: true\n      exclude: 'legacy/*'\n  destination:\n    namespace: shop\n"),
    );
    let report = check_dir(&repo.path());
    let ids = &report.models.head_resources;
    let namespace_of = |name: &str| {
        ids.iter()
            .find(|id| id.ends_with(&format!("/{name}")))
            .unwrap_or_else(|| panic!("{name} in {ids:?}"))
            .clone()
    };
    // Applied by the app: in its namespace, sub-folders too; the excluded file is not.
    assert!(namespace_of("a").contains("/shop/"), "{ids:?}");
    assert!(namespace_of("b").contains("/shop/"), "{ids:?}");
    assert!(namespace_of("c").contains("/default/"), "{ids:?}");
}

#[test]
fn a_values_file_that_links_out_of_the_repository_is_refused() {
    let outside = tempfile::tempdir().expect("tempdir");
    let secret = outside.path().join("values.yaml");
    std::fs::write(&secret, "partner:\n  resolution: NONE\n").expect("write");
    let repo = GitRepo::new();
    copy_tree(&render_fixture("argo"), &repo.path());
    // Outside the chart folder, so the chart folder's own link check does not see it.
    std::fs::create_dir_all(repo.path().join("env")).expect("mkdir");
    std::os::unix::fs::symlink(&secret, repo.path().join("env/prod.yaml")).expect("link");
    let app = "apps/egress-prod.yaml";
    let text = std::fs::read_to_string(repo.path().join(app)).expect("app");
    repo.write(
        app,
        &text.replace("- values-prod.yaml", "- ../../env/prod.yaml"),
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("env/prod.yaml") && f[0].message.contains("symbolic link"),
        "{}",
        f[0].message
    );
    assert!(with_rule(&report, "serviceentry/none-with-endpoints").is_empty());
}

#[test]
fn flux_target_namespace_moves_a_plain_folders_objects_that_name_their_own() {
    let repo = GitRepo::new();
    repo.write(
        "clusters/prod/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps/web\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  targetNamespace: shop\n",
    );
    // No kustomization here: Flux generates one, and its namespace wins over the file's.
    repo.write(
        "apps/web/policy.yaml",
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: ghost\n  namespace: staging\nspec:\n  selector:\n    matchLabels: {app: ghost}\n  action: ALLOW\n  rules:\n    - from:\n        - source:\n            namespaces: [shop]\n",
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "selector/matches-nothing");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    let r = f[0].resource.as_ref().expect("resource");
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_str()),
        (Some("shop"), "ghost")
    );
    assert_eq!(f[0].file, "apps/web/policy.yaml");
}

#[test]
fn a_patch_file_an_applicationset_template_names_is_checked_through_the_render_only() {
    let repo = GitRepo::new();
    copy_tree(&render_fixture("appset"), &repo.path());
    std::fs::remove_file(repo.path().join("apps/envs.yaml")).expect("rm");
    repo.write(
        "apps/envs.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata:\n  name: envs\n  namespace: argocd\nspec:\n  generators:\n    - list:\n        elements: [{env: prod}]\n  template:\n    metadata:\n      name: \"egress-{{env}}\"\n    spec:\n      project: default\n      source:\n        repoURL: https://github.com/acme/gitops.git\n        targetRevision: main\n        path: \"envs/{{env}}\"\n        kustomize:\n          patches:\n            - path: ../../patches/{{env}}.yaml\n              target: {kind: ServiceEntry}\n      destination:\n        server: https://kubernetes.default.svc\n        namespace: \"egress-{{env}}\"\n",
    );
    // A partial object: on its own it would be a ServiceEntry without hosts.
    repo.write(
        "patches/prod.yaml",
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: partner-api\nspec:\n  location: MESH_EXTERNAL\n",
    );
    let report = check_dir(&repo.path());
    let stray: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.file == "patches/prod.yaml")
        .filter(|f| {
            f.resource
                .as_ref()
                .is_none_or(|r| r.namespace.as_deref() != Some("egress-prod"))
        })
        .collect();
    assert!(stray.is_empty(), "{stray:#?}");
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.starts_with("Rendered 1 of 1")),
        "{:?}",
        report.summary.notes
    );
    // The patch was applied: the rendered object is in egress-prod.
    assert!(report
        .models
        .head_resources
        .iter()
        .any(|id| id.contains("egress-prod") && id.contains("partner-api")));
}

#[test]
fn a_chart_dependency_at_an_absolute_path_is_refused() {
    let repo = GitRepo::new();
    repo.write(
        "charts/egress/Chart.yaml",
        "apiVersion: v2\nname: egress\nversion: 0.1.0\ndependencies:\n  - name: lib\n    version: 0.1.0\n    repository: file:///opt/charts/lib\n",
    );
    repo.write(
        "charts/egress/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    );
    let report = check_dir(&repo.path());
    let f = with_rule(&report, "render/refused");
    assert_eq!(f.len(), 1, "{:#?}", report.findings);
    assert!(
        f[0].message.contains("outside the repository"),
        "{}",
        f[0].message
    );
}

/// The app-of-apps layout of argocd-example-apps: `apps/` is a chart whose
/// templates are Applications, each with its own path and namespace. The rendered
/// Applications are followed: each app's objects land in its namespace (two
/// Deployments both named `web` are no duplicate), not in `default`.
#[test]
fn an_app_of_apps_chart_deploys_each_app_into_its_own_namespace() {
    let report = check_dir(&render_fixture("app-of-apps"));
    assert!(
        with_rule(&report, "manifest/duplicate-resource").is_empty(),
        "{:#?}",
        report.findings
    );
    let ns = &report.coverage.head.namespaces;
    for app in ["guestbook", "shop"] {
        assert_eq!(
            ns.get(app).map(|n| n.workloads),
            Some(1),
            "{app}: {:#?}",
            ns.keys().collect::<Vec<_>>()
        );
    }
    assert!(
        ns.get("default").is_none_or(|n| n.workloads == 0),
        "{:#?}",
        ns.get("default")
    );
    let roots: Vec<(&str, &str)> = report
        .summary
        .roots
        .iter()
        .map(|r| (r.root.as_str(), r.outcome.as_str()))
        .collect();
    assert!(
        roots.contains(&(
            "kustomize root shop/base (Application argocd/shop)",
            "rendered"
        )),
        "{roots:?}"
    );
    // An app of jsonnet files: a folder meshward cannot render, said as such, not
    // reported missing.
    assert!(
        with_rule(&report, "render/failed").is_empty(),
        "{:#?}",
        report.findings
    );
    let jsonnet = with_rule(&report, "render/setting-ignored");
    assert_eq!(jsonnet.len(), 1, "{:#?}", report.findings);
    assert!(
        jsonnet[0]
            .message
            .contains("\"dashboards\" holds no YAML or JSON files"),
        "{}",
        jsonnet[0].message
    );
}

/// A change to one app of an app-of-apps: the parent chart is rendered to learn
/// where the app lands, so the changed app is checked in its own namespace and the
/// untouched app is not reported as new or duplicate.
#[test]
fn a_change_to_one_app_of_an_app_of_apps_is_checked_in_its_namespace() {
    let repo = GitRepo::new();
    let base = repo.commit_dir(&render_fixture("app-of-apps"), "base");
    let web = std::fs::read_to_string(render_fixture("app-of-apps").join("shop/base/web.yaml"))
        .expect("fixture");
    repo.write(
        "shop/base/web.yaml",
        &web.replace("nginx:1.27", "nginx:1.28"),
    );
    let head = repo.commit("bump shop");
    let report = check_change(&repo, &base, &head);
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.status != Status::Introduced),
        "{:#?}",
        report.findings
    );
    let ns = &report.coverage.head.namespaces;
    assert_eq!(
        ns.get("shop").map(|n| n.workloads),
        Some(1),
        "{:#?}",
        ns.keys().collect::<Vec<_>>()
    );
    let why: Vec<(&str, Option<&str>)> = report
        .summary
        .roots
        .iter()
        .map(|r| (r.root.as_str(), r.why.as_deref()))
        .collect();
    assert!(
        why.iter()
            .any(|(root, why)| root.starts_with("helm root apps")
                && *why == Some("deploys app objects, rendered to follow them")),
        "{why:?}"
    );
}

/// The flux2-kustomize-helm-example layout: a Flux Kustomization applies an
/// overlay that holds a HelmRelease of a chart from a Helm repository. The rendered
/// HelmRelease is an app object too: its chart is not in this repository, and that
/// is said, naming it, instead of passing in silence.
#[test]
fn a_helm_release_inside_an_overlay_is_followed_and_its_outside_chart_said() {
    let report = check_dir(&render_fixture("flux-nested"));
    let ext = with_rule(&report, "render/external-source");
    assert_eq!(ext.len(), 1, "{:#?}", report.findings);
    assert!(
        ext[0].message.contains("HelmRelease") && ext[0].message.contains("podinfo"),
        "{}",
        ext[0].message
    );
}

/// A root that reads a file over the size limit is refused before its tool runs
/// (kustomize would spend the whole time limit on it): the root's finding names
/// the file, and the file's own finding says it was not read.
#[test]
fn a_root_with_an_oversized_input_is_refused_before_the_tool_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("app")).expect("mkdir");
    std::fs::write(
        root.join("app/kustomization.yaml"),
        "resources:\n  - big.yaml\n",
    )
    .expect("write");
    let mut big = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n");
    let line = format!("  k: \"{}\"\n", "x".repeat(1000));
    while big.len() <= 5 * 1024 * 1024 {
        big.push_str(&line.replacen('k', &format!("k{}", big.len()), 1));
    }
    std::fs::write(root.join("app/big.yaml"), big).expect("write");
    let report = check_dir(root);
    let refused = with_rule(&report, "render/limit-exceeded");
    assert_eq!(refused.len(), 1, "{:#?}", report.findings);
    assert_eq!(refused[0].file, "app/kustomization.yaml");
    assert!(
        refused[0].message.contains("app/big.yaml"),
        "{}",
        refused[0].message
    );
    assert_eq!(with_rule(&report, "manifest/limit-exceeded").len(), 1);
    let root_outcome = report
        .summary
        .roots
        .iter()
        .find(|r| r.file == "app/kustomization.yaml")
        .expect("the root is listed");
    assert_eq!(root_outcome.outcome.as_str(), "failed");
}

/// A chart of `apiVersion: v1` lists its dependencies in requirements.yaml: one
/// from a Helm repository that is not vendored is refused with the advice to vendor
/// it (not helm's raw error), and one vendored in charts/ renders.
#[test]
fn v1_chart_requirements_are_dependencies_like_chart_yaml_ones() {
    let report = check_dir(&render_fixture("helm-v1"));
    let refused = with_rule(&report, "render/refused");
    assert_eq!(refused.len(), 1, "{:#?}", report.findings);
    assert_eq!(refused[0].file, "legacy-remote/requirements.yaml");
    assert!(
        refused[0].message.contains("dependency redis")
            && refused[0].message.contains("helm dependency build"),
        "{}",
        refused[0].message
    );
    assert!(
        with_rule(&report, "render/failed").is_empty(),
        "{:#?}",
        report.findings
    );
    let vendored = report
        .summary
        .roots
        .iter()
        .find(|r| r.file == "legacy-vendored/Chart.yaml")
        .expect("the vendored chart is a root");
    assert_eq!(vendored.outcome.as_str(), "rendered", "{vendored:?}");
}

/// A chart that names a Job and its test hook with `randAlphaNum` renders new
/// names every time: a comment-only change introduces nothing, and the Job's
/// finding is the one base had, matched by the template that made it.
#[test]
fn objects_named_at_random_are_the_same_objects_after_a_change_that_does_not_touch_them() {
    let fixture = render_fixture("helm-random");
    let repo = GitRepo::new();
    let base = repo.commit_dir(&fixture, "base");
    let values = std::fs::read_to_string(fixture.join("shop/values.yaml")).expect("values");
    repo.write("shop/values.yaml", &format!("# Web tier.\n{values}"));
    let head = repo.commit("a comment");
    let report = check_change(&repo, &base, &head);
    assert!(
        rules_with_status(&report, Status::Introduced).is_empty()
            && rules_with_status(&report, Status::Resolved).is_empty(),
        "{:#?}",
        report.findings
    );
    let opted_out = with_rule(&report, "injection/workload-opted-out");
    assert_eq!(opted_out.len(), 1, "{:#?}", report.findings);
    assert_eq!(opted_out[0].status, Status::Existing);
    let job = opted_out[0].resource.as_ref().expect("on the Job");
    assert!(
        job.kind == "Job" && job.name.starts_with("migrate-"),
        "{job:?}"
    );
    // The test hook runs once and is gone: not a workload any rule reports.
    assert!(
        report.findings.iter().all(|f| f
            .resource
            .as_ref()
            .is_none_or(|r| !r.name.starts_with("web-test-"))),
        "{:#?}",
        report.findings
    );
}

/// One chart, one Argo CD Application per environment, each with its values file;
/// templates name the release namespace as `$.Release.Namespace` inside `range`.
fn environments_repo(envs: usize) -> GitRepo {
    let repo = GitRepo::new();
    repo.write(
        ".meshward.yaml",
        "render:\n  repo_urls: [https://github.com/acme/gitops.git]\n",
    );
    repo.write(
        "charts/web/Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 1.0.0\n",
    );
    repo.write("charts/web/values.yaml", "apps: [web]\nreplicas: 1\n");
    repo.write(
        "charts/web/templates/apps.yaml",
        "{{- range .Values.apps }}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ . }}\n  namespace: {{ $.Release.Namespace }}\nspec:\n  replicas: {{ $.Values.replicas }}\n  selector:\n    matchLabels: {app: {{ . }}}\n  template:\n    metadata:\n      labels: {app: {{ . }}}\n    spec:\n      containers:\n        - name: app\n          image: registry.example.com/{{ . }}:1\n{{- end }}\n",
    );
    for n in 0..envs {
        repo.write(&format!("charts/web/values-env-{n}.yaml"), "replicas: 2\n");
        repo.write(
            &format!("apps/env-{n}.yaml"),
            &format!("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web-env-{n}\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: {THIS_REPO}\n    path: charts/web\n    helm:\n      valueFiles: [values-env-{n}.yaml]\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: env-{n}\n"),
        );
    }
    repo
}

#[test]
fn a_changed_values_file_renders_only_the_release_that_reads_it() {
    let repo = environments_repo(20);
    let base = repo.commit("20 environments");
    repo.write("charts/web/values-env-7.yaml", "replicas: 3\n");
    let head = repo.commit("env-7 scales up");
    let report = check_change(&repo, &base, &head);
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.starts_with("Rendered 1 of 20 render roots")),
        "{:?}",
        report.summary.notes
    );
    // The chart's own values.yaml is every release's input.
    repo.write(
        "charts/web/values.yaml",
        "apps: [web]\nreplicas: 1 # shared\n",
    );
    let next = repo.commit("shared values");
    let report = check_change(&repo, &head, &next);
    assert!(
        report
            .summary
            .notes
            .iter()
            .any(|n| n.starts_with("Rendered 20 of 20 render roots")),
        "{:?}",
        report.summary.notes
    );
}

#[test]
fn with_render_all_a_root_both_revisions_hold_alike_is_rendered_once() {
    let repo = GitRepo::new();
    for (team, app) in [("shop", "web"), ("pay", "api"), ("ads", "bid")] {
        team_overlay(&repo, team, app);
    }
    let base = repo.commit("three teams");
    team_overlay(&repo, "pay", "api-v2");
    let head = repo.commit("pay renames its app");
    // Every kustomize run goes through this wrapper, which counts it.
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/kubectl");
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("runs.log");
    let wrapper = dir.path().join("kubectl");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    )
    .expect("wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = assert_cmd::Command::cargo_bin("meshward")
        .expect("binary")
        .env("MESHWARD_KUBECTL", &wrapper)
        .env_remove("MESHWARD_KUSTOMIZE")
        .current_dir(repo.path())
        .args(["check", "--base", &base, "--head", &head, "--render-all"])
        .args(["--format", "json"])
        .output()
        .expect("run");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let runs = std::fs::read_to_string(&log).unwrap_or_default();
    let builds: Vec<&str> = runs.lines().filter(|l| l.contains("kustomize")).collect();
    // Three roots in each revision; only pay differs, so base renders pay alone
    // and head all three: 4 runs, not 6.
    assert_eq!(builds.len(), 4, "{runs}");
    // Head's objects are all there, the unchanged teams' included.
    let head_resources = report["summary"]["head"]["resources"].as_u64();
    let base_resources = report["summary"]["base"]["resources"].as_u64();
    assert_eq!(head_resources, base_resources, "{report:#}");
    assert_eq!(head_resources, Some(6), "{report:#}");
}
