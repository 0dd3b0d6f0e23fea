//! Every rule has a fixture that must produce it and a corrected twin that must not.
//! Layout: tests/fixtures/rules/<rule with / as __>/{fail,pass}/, either plain YAML
//! (checked as a tree) or base/ + head/ (checked as a change between two commits of a
//! real git repository), with an optional evidence.json.

use crate::common;

use common::*;
use meshward::finding::Status;
use std::path::Path;

fn run_case(rule: &str, case: &Path) -> meshward::report::Report {
    let evidence = case.join("evidence.json");
    let evidence = evidence.exists().then_some(evidence);
    if case.join("head").is_dir() {
        let repo = GitRepo::new();
        let base = repo.commit_dir(&case.join("base"), "base");
        let head = repo.commit_dir(&case.join("head"), "head");
        let mut req = request(&repo.path());
        req.base = Some(base);
        req.head = Some(head);
        req.evidence = evidence;
        let report = check(&req);
        // Differential cases: what fires must be introduced by the change.
        for f in with_rule(&report, rule) {
            assert_eq!(
                f.status,
                Status::Introduced,
                "{rule} in {}: {f:?}",
                case.display()
            );
        }
        report
    } else {
        let mut req = request(case);
        req.evidence = evidence;
        check(&req)
    }
}

#[test]
fn every_rule_fires_on_its_failing_fixture_and_not_on_its_passing_one() {
    let root = fixtures().join("rules");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("fixtures/rules")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .collect();
    cases.sort_by_key(|e| e.file_name());
    // Every rule the policies raise, and the parse error, has its pair of fixtures
    // (the other manifest/, render/ and exception/ findings have tests of their own:
    // tests/limits.rs, tests/render.rs, tests/diff.rs).
    let have: Vec<String> = cases
        .iter()
        .map(|e| e.file_name().to_string_lossy().replace("__", "/"))
        .collect();
    let missing: Vec<&str> = meshward::report::rules::RULES
        .iter()
        .map(|r| r.id)
        .filter(|id| {
            *id == "manifest/parse-error"
                || !["manifest/", "render/", "policy/", "exception/"]
                    .iter()
                    .any(|p| id.starts_with(p))
        })
        .filter(|id| !have.iter().any(|h| h == id))
        .collect();
    assert!(missing.is_empty(), "rules without fixtures: {missing:?}");
    let mut failures = Vec::new();
    for case in cases {
        let rule = case.file_name().to_string_lossy().replace("__", "/");
        let fail = run_case(&rule, &case.path().join("fail"));
        let fired = with_rule(&fail, &rule);
        if fired.is_empty() {
            failures.push(format!(
                "{rule}: did not fire on fail/ (got {:?})",
                fail.findings.iter().map(|f| &f.rule).collect::<Vec<_>>()
            ));
        }
        for f in &fired {
            // Each finding names its file and the line of the offending field.
            if f.file.is_empty() || f.line == 0 {
                failures.push(format!("{rule}: finding without file/line: {f:?}"));
            }
            if f.message.len() < 40 {
                failures.push(format!(
                    "{rule}: message too thin to act on: {:?}",
                    f.message
                ));
            }
        }
        let pass = run_case(&rule, &case.path().join("pass"));
        let wrongly = with_rule(&pass, &rule);
        if !wrongly.is_empty() {
            failures.push(format!("{rule}: fired on pass/: {:?}", wrongly));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn rule_fixture_lines_point_at_the_field() {
    // A spot check that the line is the field's, not the document's.
    let report = check_dir(&fixtures().join("rules/serviceentry__none-with-endpoints/fail"));
    let f = with_rule(&report, "serviceentry/none-with-endpoints");
    let text = std::fs::read_to_string(
        fixtures()
            .join("rules/serviceentry__none-with-endpoints/fail")
            .join(&f[0].file),
    )
    .expect("fixture");
    let line = text
        .lines()
        .nth(f[0].line as usize - 1)
        .expect("line exists");
    assert!(
        line.contains("endpoints") || line.contains("resolution"),
        "line {} is {line:?}",
        f[0].line
    );
}

#[test]
fn builtin_policy_tests_pass() {
    let report = meshward::policy_test(None).expect("policy tests load");
    let failed: Vec<_> = report.outcomes.iter().filter(|o| !o.passed).collect();
    assert!(
        report.outcomes.len() > 60,
        "only {} policy tests",
        report.outcomes.len()
    );
    assert!(failed.is_empty(), "{failed:#?}");
}

const STRICT_SHOP: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    istio-injection: enabled\n---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: shop\nspec:\n  mtls:\n    mode: STRICT\n";

fn deployment(name: &str, ns: &str, pod_spec: &str) -> String {
    format!("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n{pod_spec}")
}

fn unenforced_names(report: &meshward::report::Report) -> String {
    with_rule(report, "mtls/strict-unenforced-workloads")
        .iter()
        .map(|f| f.message.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A proxy injected as a native sidecar (an init container that keeps running) is a
/// proxy; anything on the host network is never injected.
#[test]
fn native_sidecars_count_as_a_proxy_and_host_network_pods_never_do() {
    let repo = GitRepo::new();
    let native = "      initContainers:\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.28.0\n          restartPolicy: Always\n      containers:\n        - name: app\n          image: registry.example.com/app:1\n";
    let host = "      hostNetwork: true\n      containers:\n        - name: app\n          image: registry.example.com/app:1\n";
    repo.write(
        "shop.yaml",
        &format!(
            "{}{}{}",
            // Not injected by the namespace: the proxies are in the templates
            // (istioctl kube-inject), so the template alone decides.
            STRICT_SHOP.replace("    istio-injection: enabled\n", "    team: shop\n"),
            deployment("native", "shop", native),
            deployment("node-agent", "shop", host),
        ),
    );
    let report = check_dir(&repo.path());
    let text = unenforced_names(&report);
    assert!(text.contains("node-agent"), "{text}");
    assert!(
        !text.contains("native"),
        "a native sidecar is a proxy: {text}"
    );
}

#[test]
fn an_istio_proxy_init_container_that_exits_is_not_a_proxy() {
    let repo = GitRepo::new();
    let one_shot = "      initContainers:\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.28.0\n      containers:\n        - name: app\n          image: registry.example.com/app:1\n";
    // Opted out of injection, so only the template's own containers count.
    let spec = deployment("oneshot", "shop", one_shot).replace(
        "        app: oneshot\n    spec:",
        "        app: oneshot\n        sidecar.istio.io/inject: \"false\"\n    spec:",
    );
    repo.write("shop.yaml", &format!("{STRICT_SHOP}{spec}"));
    let text = unenforced_names(&check_dir(&repo.path()));
    assert!(text.contains("oneshot"), "{text}");
}

/// A mesh-wide STRICT is about the mesh's workloads: not the control plane's or the
/// system namespaces' pods (never injected by design), and not a namespace that sets
/// its own mode, which wins over the mesh-wide one.
#[test]
fn mesh_wide_strict_leaves_out_system_pods_and_namespaces_with_their_own_mode() {
    let repo = GitRepo::new();
    let plain =
        "      containers:\n        - name: app\n          image: registry.example.com/app:1\n";
    repo.write(
        "mesh.yaml",
        &format!(
            "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: istio-system\nspec:\n  mtls:\n    mode: STRICT\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: legacy\n---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: legacy\nspec:\n  mtls:\n    mode: PERMISSIVE\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: batch\n{}{}{}{}",
            deployment("istiod", "istio-system", plain),
            deployment("coredns", "kube-system", plain),
            deployment("old-crm", "legacy", plain),
            deployment("nightly", "batch", plain),
        ),
    );
    let text = unenforced_names(&check_dir(&repo.path()));
    assert!(text.contains("batch/nightly"), "{text}");
    for left_out in ["istiod", "coredns", "old-crm"] {
        assert!(
            !text.contains(left_out),
            "{left_out} is not governed: {text}"
        );
    }
}

/// The README's table of rules is the catalogue's, as `meshward policy rules`
/// prints it: a rule added, renamed or reworded in one place only shows here.
#[test]
fn the_readme_table_of_rules_is_generated_from_the_catalogue() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let begin = readme.find("<!-- rules:begin").expect("rules:begin marker");
    let body = &readme[begin..];
    let table_at = body.find('\n').expect("line after the marker") + 1;
    let end = body.find("<!-- rules:end -->").expect("rules:end marker");
    assert_eq!(
        &body[table_at..end],
        meshward::report::rules::markdown_table(),
        "README.md's table of rules is stale: regenerate it with `meshward policy rules`"
    );
}

/// Every rule a built-in policy raises has its entry in the catalogue (SARIF's rule
/// metadata and the README read it), and no entry names a rule nothing raises.
#[test]
fn every_rule_the_policies_raise_is_in_the_catalogue() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut raised = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("policies/") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if !name.ends_with(".rego") || name.ends_with("_test.rego") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("policy");
        // A rule id is set as `"rule": "<id>"`, or passed first to a policy's
        // `finding("<id>", ...)` helper.
        for line in text.lines() {
            for start in ["\"rule\": \"", "finding(\""] {
                if let Some((_, rest)) = line.split_once(start) {
                    raised.insert(rest.split('"').next().unwrap_or_default().to_string());
                }
            }
        }
    }
    let catalogue: std::collections::BTreeSet<String> = meshward::report::rules::RULES
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    let missing: Vec<&String> = raised.difference(&catalogue).collect();
    assert!(missing.is_empty(), "raised but not catalogued: {missing:?}");
    let policy_rules: Vec<&String> = catalogue
        .iter()
        .filter(|id| {
            !["manifest/", "render/", "policy/", "exception/", "schema/"]
                .iter()
                .any(|p| id.starts_with(p))
        })
        .filter(|id| !raised.contains(*id))
        .collect();
    assert!(
        policy_rules.is_empty(),
        "catalogued but raised by no policy: {policy_rules:?}"
    );
}

/// `selector: {matchLabels: {}}` is no selector to Istio: the policy applies to
/// the whole namespace, and where that namespace is empty it is said as a
/// namespace-wide policy with nothing to apply to, on the line of the empty labels.
#[test]
fn an_empty_selector_is_namespace_wide() {
    let repo = GitRepo::new();
    let plain =
        "      containers:\n        - name: app\n          image: registry.example.com/app:1\n";
    let deny_all = |ns: &str| {
        format!("---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: deny-all\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels: {{}}\n")
    };
    repo.write(
        "mesh.yaml",
        &format!(
            "{STRICT_SHOP}{}---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ledger\n  labels:\n    istio-injection: enabled\n{}{}",
            deployment("web", "shop", plain),
            deny_all("shop"),
            deny_all("ledger"),
        ),
    );
    let report = check_dir(&repo.path());
    let nothing = with_rule(&report, "selector/matches-nothing");
    assert_eq!(nothing.len(), 1, "{:#?}", report.findings);
    let f = nothing[0];
    assert_eq!(
        f.resource.as_ref().map(|r| r.id()),
        Some("AuthorizationPolicy/ledger/deny-all".to_string())
    );
    assert!(
        f.message
            .contains("is namespace-wide (its selector is empty")
            && f.message.contains("namespace ledger has no workloads"),
        "{}",
        f.message
    );
    let text = std::fs::read_to_string(repo.path().join("mesh.yaml")).expect("read");
    let selector_line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "matchLabels: {}")
        .map(|(i, _)| i as u32 + 1)
        .last();
    assert_eq!(Some(f.line), selector_line);
}
