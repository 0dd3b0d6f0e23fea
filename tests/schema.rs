//! The API server's net (schema/): objects checked against the repository's CRDs (a
//! Widget kind of our own with three CEL rules), an Istio-like CRD that overrides
//! meshward's built-in schema, `.meshward.yaml` `schemas:`, and meshward's schemas and
//! webhook checks of the Istio kinds against one document per constraint class.

use crate::common;

use common::*;
use meshward::finding::{Severity, Status};
use std::path::Path;

/// (object name, file:line, field) of each schema/invalid finding, sorted.
fn invalid(report: &meshward::report::Report) -> Vec<String> {
    let mut out: Vec<String> = with_rule(report, "schema/invalid")
        .iter()
        .map(|f| {
            let field = f
                .message
                .split(": ")
                .find(|part| part.starts_with("spec") || part.starts_with("apiVersion"))
                .unwrap_or("")
                .to_string();
            format!(
                "{} {}:{} {}",
                f.resource.as_ref().map(|r| r.name.as_str()).unwrap_or(""),
                f.file,
                f.line,
                field
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_repository_crd_checks_its_objects_with_its_schema_and_cel_rules() {
    let report = check_dir(&fixtures().join("schema/widget"));
    assert_eq!(
        invalid(&report),
        [
            "bad-endpoint apps/widgets.yaml:72 spec.endpoint",
            "bad-enum apps/widgets.yaml:24 spec.size",
            "bad-field apps/widgets.yaml:89 spec.replicaz",
            "bad-maximum apps/widgets.yaml:33 spec.replicas",
            "bad-pattern apps/widgets.yaml:42 spec.owner",
            "bad-port apps/widgets.yaml:53 spec.ports[0].port",
            "bad-replicas apps/widgets.yaml:63 spec.minReplicas",
            "bad-required apps/widgets.yaml:79 spec.size",
            "bad-type apps/widgets.yaml:98 spec.replicas",
            "bad-version apps/widgets.yaml:100 ",
        ]
    );
    let by_name = |name: &str| {
        with_rule(&report, "schema/invalid")
            .into_iter()
            .find(|f| f.resource.as_ref().is_some_and(|r| r.name == name))
            .map(|f| f.message.clone())
            .unwrap_or_default()
    };
    // The CEL rule's own message, the rule, and what happens after merge.
    let m = by_name("bad-replicas");
    assert!(m.contains("minReplicas may not exceed replicas"), "{m}");
    assert!(m.contains("Argo CD and Flux fail to sync it"), "{m}");
    assert!(m.contains("widgets.example.com (crds/widget.yaml)"), "{m}");
    let m = by_name("bad-version");
    assert!(m.contains("version v1beta1 is not served"), "{m}");
    assert!(by_name("bad-field").contains("drops the field"));
    assert_eq!(report.summary.verdict, meshward::report::Verdict::Fail);
}

#[test]
fn the_repository_crd_decides_for_its_versions_and_meshward_schemas_stand_in_without_one() {
    let istio_like = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: serviceentries.networking.istio.io
spec:
  group: networking.istio.io
  names: {kind: ServiceEntry, plural: serviceentries}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
              x-kubernetes-validations:
                - rule: size(self.hosts) <= 1
                  message: one host per ServiceEntry in this cluster
"#;
    let entry = |name: &str, version: &str, extra: &str| {
        let hosts = if name == "two-hosts" {
            "a.example.com, b.example.com"
        } else {
            "a.example.com"
        };
        format!(
            "---\napiVersion: networking.istio.io/{version}\nkind: ServiceEntry\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  hosts: [{hosts}]\n  location: MESH_EXTERNAL\n  resolution: DNS\n  ports:\n    - number: 443\n      name: tls\n      protocol: TLS\n{extra}"
        )
    };
    let objects = [
        entry("two-hosts", "v1", ""),
        entry("older-version", "v1beta1", ""),
        entry("extra-field", "v1", "  exportToo: ['.']\n"),
    ]
    .concat();
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("crd.yaml"), istio_like).expect("write");
    std::fs::write(dir.path().join("entries.yaml"), &objects).expect("write");
    let report = check_dir(dir.path());
    let got = invalid(&report);
    // The repository's CRD: its CEL rule, its versions, its leniency on fields.
    assert!(got.iter().any(|g| g.starts_with("two-hosts")), "{got:?}");
    assert!(
        got.iter().any(|g| g.starts_with("older-version")),
        "{got:?}"
    );
    assert!(!got.iter().any(|g| g.starts_with("extra-field")), "{got:?}");
    // Without it, meshward's schema of ServiceEntry knows no `exportToo`.
    std::fs::remove_file(dir.path().join("crd.yaml")).expect("rm");
    let report = check_dir(dir.path());
    let got = invalid(&report);
    assert!(
        got.iter()
            .any(|g| g.starts_with("extra-field") && g.ends_with("spec.exportToo")),
        "{got:?}"
    );
    assert!(
        !got.iter().any(|g| g.starts_with("older-version")),
        "{got:?}"
    );
}

#[test]
fn schemas_in_the_config_add_crds_the_manifests_do_not_hold() {
    let repo = GitRepo::new();
    let src = fixtures().join("schema/widget");
    copy_tree(&src, &repo.path());
    repo.write(
        ".meshward.yaml",
        "paths:\n  exclude: [\"crds/**\"]\nschemas: [crds/, vendor/missing]\n",
    );
    repo.commit("widgets");
    let report = check_dir(&repo.path());
    assert_eq!(invalid(&report).len(), 10, "{:?}", invalid(&report));
    let missing = with_rule(&report, "schema/not-checked");
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(missing[0].message.contains("vendor/missing"));
    assert_eq!(missing[0].severity, Severity::Warning);
}

fn widget_crd(rule: &str, pattern: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {{kind: Widget, plural: widgets}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                owner: {{type: string, pattern: '{pattern}'}}
                sizes: {{type: array, items: {{type: integer}}}}
              x-kubernetes-validations:
                - rule: "{rule}"
"#
    )
}

fn widget(sizes: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: shop\nspec:\n  sizes: {sizes}\n")
}

#[test]
fn a_rule_meshward_cannot_evaluate_is_said_and_a_change_to_its_object_does_not_pass() {
    let repo = GitRepo::new();
    let crd = widget_crd("self.sizes.isSorted()", "^[a-z]+$");
    let base = repo.commit_files(&[("crd.yaml", &crd), ("w.yaml", &widget("[1, 2]"))], "base");
    let head = repo.commit_files(&[("crd.yaml", &crd), ("w.yaml", &widget("[2, 1]"))], "head");
    let report = check_change(&repo, &base, &head);
    let gaps = with_rule(&report, "schema/not-checked");
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(gaps[0].status, Status::Existing);
    assert!(gaps[0].message.contains("isSorted"), "{}", gaps[0].message);
    assert!(gaps[0].message.contains("does not pass unchecked"));
    assert_eq!(report.summary.verdict, meshward::report::Verdict::Fail);
    // A change elsewhere leaves the same gap on an untouched object: it does not block.
    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
    let other = repo.commit_files(
        &[
            ("crd.yaml", &crd),
            ("w.yaml", &widget("[2, 1]")),
            ("ns.yaml", namespace),
        ],
        "other",
    );
    let report = check_change(&repo, &head, &other);
    assert_eq!(with_rule(&report, "schema/not-checked").len(), 1);
    assert_eq!(report.summary.blocking, 0, "{:?}", report.findings);
}

#[test]
fn a_crd_the_api_server_refuses_is_a_finding_on_the_crd() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("crd.yaml"),
        widget_crd("self.sizes.all(s, s > 0", "^[a-z(+$"),
    )
    .expect("write");
    std::fs::write(dir.path().join("w.yaml"), widget("[1]")).expect("write");
    let report = check_dir(dir.path());
    let on_crd: Vec<_> = with_rule(&report, "schema/invalid")
        .into_iter()
        .filter(|f| {
            f.resource
                .as_ref()
                .is_some_and(|r| r.kind == "CustomResourceDefinition")
        })
        .collect();
    assert_eq!(on_crd.len(), 2, "{on_crd:?}");
    assert!(on_crd
        .iter()
        .any(|f| f.message.contains("does not compile")));
    assert!(on_crd.iter().all(|f| f.file == "crd.yaml" && f.line > 1));
}

fn refusals(file: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::copy(file, dir.path().join("object.yaml")).expect("copy");
    let report = check_dir(dir.path());
    report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .filter(|f| {
            f.rule == "schema/invalid"
                || meshward::schema::RESTATING
                    .iter()
                    .any(|r| f.rule.starts_with(r))
        })
        .map(|f| format!("{}:{} {}", f.rule, f.line, f.message))
        .collect()
}

#[test]
fn built_in_istio_schemas_refuse_every_invalid_document_and_accept_every_valid_one() {
    let root = fixtures().join("schema/istio");
    let mut wrong = Vec::new();
    let mut counted = (0, 0);
    for (sub, expect_refusal) in [("invalid", true), ("valid", false)] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(sub))
            .expect("fixtures/schema/istio")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for file in files {
            let found = refusals(&file);
            let name = file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if expect_refusal {
                counted.0 += 1;
                if found.is_empty() {
                    wrong.push(format!("{sub}/{name}: accepted"));
                }
            } else {
                counted.1 += 1;
                if !found.is_empty() {
                    wrong.push(format!("{sub}/{name}: refused: {found:?}"));
                }
            }
        }
    }
    assert!(counted.0 >= 50 && counted.1 >= 30, "{counted:?}");
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

fn address_crd(extra_field: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: portals.example.com
spec:
  group: example.com
  names: {{kind: Portal, plural: portals}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:{extra_field}
                addresses:
                  type: array
                  items:
                    type: object
                    properties:
                      type: {{type: string, default: IPAddress}}
                      value: {{type: string}}
                    oneOf:
                      - properties:
                          type: {{enum: [IPAddress]}}
                          value: {{anyOf: [{{format: ipv4}}, {{format: ipv6}}]}}
                      - properties:
                          type: {{not: {{enum: [IPAddress]}}}}
"#
    )
}

/// The API server fills in defaults before it validates, and of two CRDs for one kind
/// the repository does not say which the cluster has: only what both refuse is.
#[test]
fn defaults_apply_before_validation_and_two_crds_of_a_kind_must_both_refuse() {
    let dir = tempfile::tempdir().expect("tmp");
    let portal = |name: &str, spec: &str| {
        format!("---\napiVersion: example.com/v1\nkind: Portal\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n{spec}")
    };
    let objects = [
        portal("untyped-ip", "  addresses: [{value: 10.0.0.1}]\n"),
        portal(
            "untyped-name",
            "  addresses: [{value: portal.example.com}]\n",
        ),
        portal(
            "hostname",
            "  addresses: [{type: Hostname, value: portal.example.com}]\n",
        ),
        portal(
            "class",
            "  className: fast\n  addresses: [{value: 10.0.0.2}]\n",
        ),
    ]
    .concat();
    std::fs::create_dir_all(dir.path().join("old")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("new")).expect("mkdir");
    std::fs::write(dir.path().join("old/crd.yaml"), address_crd("")).expect("write");
    std::fs::write(dir.path().join("portals.yaml"), &objects).expect("write");
    let got = invalid(&check_dir(dir.path()));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("class ") && got[0].ends_with("spec.className"),
        "{got:?}"
    );
    assert!(got[1].starts_with("untyped-name "), "{got:?}");
    // A newer CRD of the kind knows className: the object may be fine, so it is not
    // refused; the untyped host name both refuse.
    std::fs::write(
        dir.path().join("new/crd.yaml"),
        address_crd("\n                className: {type: string}"),
    )
    .expect("write");
    let report = check_dir(dir.path());
    let got = invalid(&report);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("untyped-name "), "{got:?}");
    let m = &with_rule(&report, "schema/invalid")[0].message;
    assert!(m.contains("Each of the 2 CustomResourceDefinitions"), "{m}");
}

/// `.meshward.yaml` `rules:` lowers or turns off the schema rules as any other.
#[test]
fn the_repository_config_sets_the_schema_rules_severity() {
    let dir = tempfile::tempdir().expect("tmp");
    let crd = widget_crd("self.sizes.isSorted()", "^[a-z]+$");
    std::fs::write(dir.path().join("crd.yaml"), crd).expect("write");
    std::fs::write(dir.path().join("w.yaml"), widget("[2, 1]")).expect("write");
    std::fs::write(
        dir.path().join(".meshward.yaml"),
        "rules:\n  schema/not-checked: warning\n",
    )
    .expect("write");
    let report = check_dir(dir.path());
    let gaps = with_rule(&report, "schema/not-checked");
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(gaps[0].severity, Severity::Warning);
    assert_eq!(report.summary.blocking, 0);
    std::fs::write(
        dir.path().join(".meshward.yaml"),
        "rules:\n  schema/not-checked: off\n",
    )
    .expect("write");
    assert!(with_rule(&check_dir(dir.path()), "schema/not-checked").is_empty());
}

fn dry_run_policy(name: &str, value: &str) -> String {
    format!("apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: {name}\n  namespace: shop\n  annotations:\n    istio.io/dry-run: \"{value}\"\nspec:\n  action: DENY\n  rules:\n    - from:\n        - source:\n            namespaces: [\"shop\"]\n")
}

/// The webhook checks run once on what base and head hold alike (head's findings on
/// them are base's too) and on each revision's own objects.
#[test]
fn webhook_findings_on_unchanged_objects_stay_existing_and_edits_are_judged() {
    let repo = GitRepo::new();
    let files = |a: &str, b: &str, c: &str| {
        [
            ("a.yaml", dry_run_policy("a", a)),
            ("b.yaml", dry_run_policy("b", b)),
            ("c.yaml", dry_run_policy("c", c)),
        ]
    };
    let commit = |a, b, c, message| {
        let f = files(a, b, c);
        let refs: Vec<(&str, &str)> = f.iter().map(|(p, t)| (*p, t.as_str())).collect();
        repo.commit_files(&refs, message)
    };
    // a stays invalid, b becomes invalid, c is repaired.
    let base = commit("maybe", "true", "perhaps", "base");
    let head = commit("maybe", "sometimes", "false", "head");
    let report = check_change(&repo, &base, &head);
    let mut seen: Vec<String> = with_rule(&report, "schema/invalid")
        .iter()
        .map(|f| {
            format!(
                "{} {:?} {}:{}",
                f.resource.as_ref().map(|r| r.name.as_str()).unwrap_or(""),
                f.status,
                f.file,
                f.line
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "a Existing a.yaml:7",
            "b Introduced b.yaml:7",
            "c Resolved c.yaml:7"
        ],
        "{:?}",
        report.findings
    );
    assert!(with_rule(&report, "schema/invalid")
        .iter()
        .all(|f| f.message.contains("not a boolean")));
}

/// An object both revisions hold alike is checked once when the CRDs are the same,
/// and against each revision's own CRD when the change edits it.
#[test]
fn an_unchanged_object_is_judged_against_each_revisions_crd() {
    let repo = GitRepo::new();
    let loose = widget_crd("self.sizes.all(s, s > 0)", "^[a-z]+$");
    let strict = widget_crd("self.sizes.all(s, s > 5)", "^[a-z]+$");
    let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
    let object = widget("[1, 2]");
    // The same object in every commit, beside `crd` (and a Namespace when `more`).
    let commit = |crd: &str, more: bool, message: &str| {
        let mut files = vec![("crd.yaml", crd), ("w.yaml", object.as_str())];
        if more {
            files.push(("ns.yaml", namespace));
        }
        repo.commit_files(&files, message)
    };
    let refused = |from: &str, to: &str| {
        let report = check_change(&repo, from, to);
        let found: Vec<meshward::finding::Finding> = with_rule(&report, "schema/invalid")
            .into_iter()
            .cloned()
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found.into_iter().next().expect("one")
    };
    let base = commit(&loose, false, "base");
    // Only the CRD changes: the untouched object is now refused, by this change.
    let head = commit(&strict, false, "head");
    let f = refused(&base, &head);
    assert_eq!(f.status, Status::Introduced);
    assert!(f.message.contains("s > 5"), "{}", f.message);
    // A change elsewhere: the same CRD, the same object, the same refusal, existing.
    let other = commit(&strict, true, "other");
    let f = refused(&head, &other);
    assert_eq!(f.status, Status::Existing);
    assert_eq!((f.file.as_str(), f.line), ("w.yaml", 6));
    // Relaxed again: resolved.
    let relaxed = commit(&loose, true, "relaxed");
    assert_eq!(refused(&other, &relaxed).status, Status::Resolved);
}
