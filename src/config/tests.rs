use super::*;

#[test]
fn dot_paths_and_ci_configs_are_not_manifests_by_default() {
    for path in [
        ".github/workflows/ci.yaml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        ".pre-commit-config.yaml",
        ".fluxschema.yml",
        "apps/.archive/old.yaml",
        "azure-pipelines.yml",
        "services/api/cloudbuild.yaml",
    ] {
        assert!(!read_by_default(path), "{path}");
    }
    for path in ["apps/web.yaml", "clusters/prod/flux-system/gotk-sync.yaml"] {
        assert!(read_by_default(path), "{path}");
    }
    assert!(names_unread(".deploy/**"));
    assert!(names_unread("**/.k8s/*.yaml"));
    assert!(!names_unread("**/*.yaml"));
    assert!(!names_unread("./apps/**"));
}

#[test]
fn unknown_key_names_key_and_line() {
    let e = RepoConfig::parse("fail_on: error\nmesh:\n  root_namespace: x\n  trust_domian: y\n")
        .unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("trust_domian"), "{e}");
}

#[test]
fn exceptions_with_lines() {
    let c = RepoConfig::parse(
            "exceptions:\n  - rule: serviceentry/*\n    resource: ServiceEntry/vm/*\n    reason: INFRA-1\n    expires: 2027-03-31\n",
        )
        .unwrap();
    assert_eq!(c.exceptions.len(), 1);
    assert_eq!(c.exception_lines, vec![2]);
}

#[test]
fn bad_rule_setting_is_an_error() {
    let e = RepoConfig::parse("rules:\n  selector/matches-nothing: loud\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
}

#[test]
fn proxy_defaults_are_quantities() {
    let c = RepoConfig::parse("mesh:\n  proxy_cpu: 250m\n").unwrap();
    assert_eq!(c.mesh.proxy_cpu, "250m");
    assert_eq!(c.mesh.proxy_memory, "128Mi");
    let e = RepoConfig::parse("mesh:\n  trust_domain: x\n  proxy_memory: 128MB\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(e.message.contains("mesh.proxy_memory"), "{e}");
}

#[test]
fn mesh_namespaces_declare_labels() {
    let c = RepoConfig::parse(
            "mesh:\n  namespaces:\n    payments:\n      labels: {istio-injection: enabled}\n    legacy:\n      labels: {}\n",
        )
        .unwrap();
    assert_eq!(
        c.mesh.namespaces["payments"].labels["istio-injection"],
        "enabled"
    );
    assert!(c.mesh.namespaces["legacy"].labels.is_empty());
    for (text, line, needle) in [
            // An unknown key, at its line, named.
            ("mesh:\n  namespaces:\n    payments:\n      lables: {a: b}\n", 4, "lables"),
            // Labels are required: `{}` says "none", a missing key would be a guess.
            ("mesh:\n  namespaces:\n    payments: {}\n", 3, "labels"),
            ("mesh:\n  namespaces:\n    Payments:\n      labels: {}\n", 3, "Payments"),
            (
                "mesh:\n  namespaces:\n    payments:\n      labels:\n        istio-injection: \"en abled\"\n",
                5,
                "istio-injection",
            ),
            (
                "mesh:\n  namespaces:\n    payments:\n      labels:\n        \"bad key!\": x\n",
                5,
                "bad key!",
            ),
        ] {
            let e = RepoConfig::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
}

#[test]
fn evidence_prometheus() {
    let c = RepoConfig::parse(
            "evidence:\n  prometheus:\n    url: https://prometheus.internal\n    window: 14d\n    matchers: {cluster: prod-eu1}\n",
        )
        .unwrap();
    let p = c.evidence.prometheus.unwrap();
    assert_eq!(p.url.as_deref(), Some("https://prometheus.internal"));
    assert_eq!(p.window.as_deref(), Some("14d"));
    assert_eq!(p.matchers["cluster"], "prod-eu1");
    for (text, line, needle) in [
        (
            "evidence:\n  prometheus:\n    window: 7 days\n",
            3,
            "window",
        ),
        ("evidence:\n  prometheus:\n    window: 2y\n", 3, "outside"),
        ("evidence:\n  prometheus:\n    url: ftp://x\n", 3, "http"),
        (
            "evidence:\n  prometheus:\n    matchers:\n      reporter: source\n",
            4,
            "reporter",
        ),
        (
            "evidence:\n  prometheus:\n    matchers: {\"a-b\": x}\n",
            3,
            "label name",
        ),
        ("evidence:\n  prometheus:\n    token: secret\n", 3, "token"),
    ] {
        let e = RepoConfig::parse(text).unwrap_err();
        assert_eq!(e.line, line, "{text}: {e}");
        assert!(e.message.contains(needle), "{text}: {e}");
    }
}

#[test]
fn publish_switch_defaults_on_and_rejects_unknown_keys() {
    assert!(RepoConfig::default().publish.inline_comments);
    let c = RepoConfig::parse("publish: { inline_comments: false }\n").unwrap();
    assert!(!c.publish.inline_comments);
    let e = RepoConfig::parse("publish:\n  inline_comment: false\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert!(e.message.contains("inline_comment"), "{e}");
}

#[test]
fn path_globs() {
    let c =
        RepoConfig::parse("paths:\n  include: [\"apps/**\"]\n  exclude: [\"**/testdata/**\"]\n")
            .unwrap();
    assert!(c.path_selected("apps/a/b.yaml"));
    assert!(!c.path_selected("apps/testdata/b.yaml"));
    assert!(!c.path_selected("other/b.yaml"));
}

#[test]
fn dot_paths_are_manifests_only_when_a_glob_names_them() {
    let all = RepoConfig::default();
    assert!(all.manifest_selected("apps/web.yaml"));
    assert!(!all.manifest_selected(".github/workflows/ci.yaml"));
    let c = RepoConfig::parse(
        "paths:\n  include: [\"**/*.yaml\", \".deploy/**\"]\n  exclude: [\".deploy/old/**\"]\n",
    )
    .unwrap();
    assert!(c.manifest_selected("apps/web.yaml"));
    assert!(c.manifest_selected(".deploy/web.yaml"));
    assert!(!c.manifest_selected(".deploy/old/web.yaml"));
    assert!(!c.manifest_selected(".github/workflows/ci.yaml"));
}

#[test]
fn the_mesh_keys_the_file_sets_are_known() {
    let c = RepoConfig::parse("mesh:\n  trust_domain: prod.example\n").unwrap();
    assert_eq!(c.mesh_keys, vec!["trust_domain".to_string()]);
    assert!(RepoConfig::default().mesh_keys.is_empty());
}

#[test]
fn a_render_exclude_that_is_no_glob_is_an_error() {
    let e = RepoConfig::parse("render:\n  exclude:\n    - apps/**\n    - \"apps/[legacy\"\n")
        .unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("render.exclude"), "{e}");
}
