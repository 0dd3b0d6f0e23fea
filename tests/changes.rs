//! What a change does to the mesh (`changes` in the JSON, "What this change does to
//! the mesh" in markdown), checked as real changes between two git commits.

use crate::common;

use common::*;
use meshward::changes::{Change, Changes};
use meshward::report::markdown::changes::section;
use std::path::Path;

/// Checks `<dir>/base` → `<dir>/head` as a change and returns its report.
fn change(dir: &Path) -> meshward::report::Report {
    let repo = GitRepo::new();
    let base = repo.commit_dir(&dir.join("base"), "base");
    let head = repo.commit_dir(&dir.join("head"), "head");
    check_change(&repo, &base, &head)
}

fn changes_of(report: &meshward::report::Report) -> &Changes {
    report
        .changes
        .as_ref()
        .expect("a change has a changes section")
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn namespace_labelled_for_injection_counts_replicas_and_hpa_max() {
    let report = change(&fixtures().join("changes/injection-cost"));
    let c = changes_of(&report);
    let cost = &c.proxy_cost;
    assert_eq!(
        cost.summary.as_deref(),
        Some("enables 24 proxies: +2.4 CPU, +3 GiB requested")
    );
    let by: Vec<(&str, i64, i64, &str)> = cost
        .workloads
        .iter()
        .map(|w| {
            (
                w.workload.as_str(),
                w.base_proxies,
                w.head_proxies,
                w.counted_from.as_str(),
            )
        })
        .collect();
    assert_eq!(
        by,
        [
            ("Deployment/orders/api", 0, 3, "replicas"),
            ("Deployment/orders/worker", 0, 21, "autoscaler"),
        ]
    );
    // The pods predate the label: the cost comes with the rollout, and says so.
    assert!(cost.workloads.iter().all(|w| w.pending_rollout));
    assert!(cost.workloads[0].reason.contains("istio-injection=enabled"));

    // api calls worker (env and AuthorizationPolicy): a new hop, both ways of knowing named.
    assert_eq!(c.latency.len(), 1, "{:?}", c.latency);
    let hop = &c.latency[0];
    assert_eq!(
        (
            hop.caller.as_str(),
            hop.callee.as_str(),
            hop.proxies_before,
            hop.proxies_after
        ),
        ("Deployment/orders/api", "Deployment/orders/worker", 0, 2)
    );
    assert!(hop.decided_by.iter().any(|d| d.contains("env WORKER_URL")));
    assert!(hop
        .decided_by
        .iter()
        .any(|d| d.contains("AuthorizationPolicy orders/worker-allow-api allows principal")));

    settings().bind(|| insta::assert_snapshot!("changes_injection_cost", section(c)));
}

#[test]
fn proxy_annotations_and_configured_defaults_set_the_requests() {
    let repo = GitRepo::new();
    let deployment = |ns_labels: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: jobs\n{ns_labels}---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: big\n  namespace: jobs\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: big}}\n  template:\n    metadata:\n      labels: {{app: big}}\n      annotations:\n        sidecar.istio.io/proxyCPU: 500m\n        sidecar.istio.io/proxyMemory: 1Gi\n    spec:\n      containers: [{{name: big, image: big:1}}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: small\n  namespace: jobs\nspec:\n  replicas: 4\n  selector:\n    matchLabels: {{app: small}}\n  template:\n    metadata:\n      labels: {{app: small}}\n      annotations:\n        sidecar.istio.io/proxyCPU: lots\n    spec:\n      containers: [{{name: small, image: small:1}}]\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: jobs\nspec:\n  selector:\n    matchLabels: {{app: agent}}\n  template:\n    metadata:\n      labels: {{app: agent}}\n    spec:\n      containers: [{{name: agent, image: agent:1}}]\n"
        )
    };
    let config = (
        ".meshward.yaml",
        "mesh:\n  proxy_cpu: 50m\n  proxy_memory: 64Mi\n",
    );
    let base = repo.commit_files(&[config, ("ns.yaml", &deployment(""))], "base");
    let head = repo.commit_files(
        &[
            config,
            (
                "ns.yaml",
                &deployment("  labels:\n    istio-injection: enabled\n"),
            ),
        ],
        "head",
    );
    let report = check_change(&repo, &base, &head);
    let cost = &changes_of(&report).proxy_cost;
    // big: 2 × (500m, 1Gi); small: 4 × the configured defaults, its bad annotation reported.
    assert_eq!(cost.cpu_millicores, 2 * 500 + 4 * 50);
    assert_eq!(cost.memory_bytes, (2 * 1024 + 4 * 64) * 1024 * 1024);
    let small = cost
        .workloads
        .iter()
        .find(|w| w.workload == "Deployment/jobs/small")
        .expect("small");
    assert_eq!(small.cpu_per_proxy, "50m");
    assert!(
        small.problems[0].contains("sidecar.istio.io/proxyCPU"),
        "{small:?}"
    );
    // A DaemonSet's proxies cannot be counted from the repository: said, not skipped.
    assert_eq!(cost.uncounted.len(), 1);
    assert_eq!(cost.uncounted[0].workload, "DaemonSet/jobs/agent");
    let summary = cost.summary.as_deref().unwrap_or_default();
    assert!(
        summary.starts_with("enables 6 proxies: +1.2 CPU, +2.25 GiB requested"),
        "{summary}"
    );
    assert!(
        summary.contains("1 more workload not counted (DaemonSet jobs/agent)"),
        "{summary}"
    );
}

#[test]
fn service_account_change_shows_the_new_identity_and_the_lost_policy() {
    let report = change(&fixtures().join("rules/authz__identity-change/fail"));
    let c = changes_of(&report);
    let web = c
        .identities
        .iter()
        .find(|i| i.subject == "Deployment/shop/web")
        .expect("web is listed");
    assert_eq!(web.change, Change::Changed);
    assert_eq!(
        web.spiffe_id,
        "spiffe://cluster.local/ns/shop/sa/web-frontend"
    );
    assert_eq!(web.base_service_account.as_deref(), Some("web"));
    assert!(web.allowed_by.is_empty());
    assert_eq!(
        web.base_allowed_by,
        ["AuthorizationPolicy/shop/cart-allow-web"]
    );
    let f = with_rule(&report, "authz/identity-change");
    assert_eq!(f.len(), 1);
    assert!(f[0]
        .message
        .contains("calls from Deployment shop/web to Deployment shop/cart will now get 403"));
    settings().bind(|| insta::assert_snapshot!("changes_identity", section(c)));

    // The fixed change lists the new identity as allowed, and warns about nothing.
    let fixed = change(&fixtures().join("rules/authz__identity-change/pass"));
    let web = changes_of(&fixed)
        .identities
        .iter()
        .find(|i| i.subject == "Deployment/shop/web")
        .expect("web is listed")
        .clone();
    assert_eq!(web.allowed_by, ["AuthorizationPolicy/shop/cart-allow-web"]);
    assert!(with_rule(&fixed, "authz/identity-change").is_empty());
}

#[test]
fn trust_domain_comes_from_the_config() {
    let repo = GitRepo::new();
    let wg = "apiVersion: networking.istio.io/v1\nkind: WorkloadGroup\nmetadata:\n  name: db\n  namespace: data\nspec:\n  metadata:\n    labels: {app: db}\n  template:\n    serviceAccount: db\n";
    let config = (
        ".meshward.yaml",
        "mesh:\n  trust_domain: prod.acme.internal\n",
    );
    let base = repo.commit_files(&[config], "base");
    let head = repo.commit_files(&[config, ("wg.yaml", wg)], "head");
    let report = check_change(&repo, &base, &head);
    let vm = &changes_of(&report).vm_bootstrap[0];
    assert_eq!(vm.spiffe_id, "spiffe://prod.acme.internal/ns/data/sa/db");
    assert_eq!(vm.cluster_env["TRUST_DOMAIN"], "prod.acme.internal");
    // No ports: the proxy captures all inbound traffic, and the preview says so.
    assert_eq!(vm.cluster_env["ISTIO_INBOUND_PORTS"], "*");
    assert!(vm
        .notes
        .iter()
        .any(|n| n.contains("captures all inbound traffic")));
}

#[test]
fn new_workload_group_with_and_without_a_selecting_service_entry() {
    let unreachable = change(&fixtures().join("rules/workloadgroup__unreachable/fail"));
    let vm = &changes_of(&unreachable).vm_bootstrap;
    assert_eq!(vm.len(), 1, "only the new group is previewed: {vm:?}");
    assert_eq!(vm[0].workload_group, "WorkloadGroup/vm-apps/billing");
    assert_eq!(vm[0].change, Change::Added);
    assert_eq!(vm[0].service_entry_count, 0);
    assert_eq!(vm[0].cluster_env["SERVICE_ACCOUNT"], "billing");
    assert_eq!(vm[0].cluster_env["ISTIO_META_NETWORK"], "vm-network");
    assert_eq!(vm[0].cluster_env["ISTIO_INBOUND_PORTS"], "9090,9102");
    assert_eq!(vm[0].cluster_env["ISTIO_NAMESPACE"], "vm-apps");
    assert_eq!(
        vm[0].cluster_env["ISTIO_METAJSON_LABELS"],
        r#"{"app":"billing","service.istio.io/canonical-name":"billing","service.istio.io/canonical-revision":"v2","version":"v2"}"#
    );
    assert_eq!(vm[0].root_cert.config_map, "istio-ca-root-cert");
    assert_eq!(vm[0].root_cert.namespace, "vm-apps");
    assert_eq!(
        with_rule(&unreachable, "workloadgroup/unreachable").len(),
        1
    );

    let reachable = change(&fixtures().join("rules/workloadgroup__unreachable/pass"));
    let c = changes_of(&reachable);
    assert_eq!(
        c.vm_bootstrap[0].service_entries,
        ["ServiceEntry/vm-apps/billing"]
    );
    assert_eq!(c.vm_bootstrap[0].service_entry_count, 1);
    // The new ServiceEntry's selector is reported with what it selects: the group.
    let se = c
        .selectors
        .iter()
        .find(|s| s.resource == "ServiceEntry/vm-apps/billing")
        .expect("new selector listed");
    assert_eq!(se.change, Change::Added);
    assert_eq!(se.head.workload_groups, 1);
    // A ServiceEntry that selects a group's VMs is not "selecting nothing".
    assert!(with_rule(&reachable, "selector/matches-nothing").is_empty());
    settings().bind(|| {
        insta::assert_snapshot!("changes_vm_unreachable", section(changes_of(&unreachable)));
        insta::assert_snapshot!("changes_vm_reachable", section(c));
    });
}

#[test]
fn selector_whose_workloads_lose_their_labels_reports_selects_n_to_0() {
    let repo = GitRepo::new();
    let files = |app: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {{istio-injection: enabled}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: cart\n  namespace: shop\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {{app: {app}}}\n  template:\n    metadata:\n      labels: {{app: {app}}}\n    spec:\n      containers: [{{name: cart, image: cart:1}}]\n---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: cart\n  namespace: shop\nspec:\n  selector:\n    matchLabels: {{app: cart}}\n  rules: [{{}}]\n"
        )
    };
    let base = repo.commit_files(&[("shop.yaml", &files("cart"))], "base");
    let head = repo.commit_files(&[("shop.yaml", &files("cart-v2"))], "head");
    let report = check_change(&repo, &base, &head);
    let c = changes_of(&report);
    let s = &c.selectors[0];
    assert_eq!(s.resource, "AuthorizationPolicy/shop/cart");
    assert_eq!(s.change, Change::SelectionChanged);
    assert_eq!(s.base.as_ref().map(|b| b.total()), Some(1));
    assert_eq!(s.head.total(), 0);
    assert_eq!(s.lost, ["Deployment/shop/cart"]);
    let md = section(c);
    assert!(md.contains("| 1 → 0 ⚠️ |"), "{md}");
}

#[test]
fn no_base_means_no_changes_section() {
    let report = check_dir(&fixtures().join("rules/workloadgroup__unreachable/fail/head"));
    assert!(report.changes.is_none());
    let md = meshward::report::render(&report, meshward::report::Format::Markdown, false);
    assert!(!md.contains("What this change does"));
    let json: serde_json::Value =
        serde_json::from_str(&meshward::report::json(&report)).expect("json");
    assert!(json["changes"].is_null());
}

#[test]
fn hostile_names_do_not_break_the_markdown() {
    let repo = GitRepo::new();
    let wg = "apiVersion: networking.istio.io/v1\nkind: WorkloadGroup\nmetadata:\n  name: db\n  namespace: data\nspec:\n  metadata:\n    labels: {app: \"a|b```c\"}\n  template:\n    serviceAccount: \"x'y\"\n";
    let base = repo.commit_files(&[], "base");
    let head = repo.commit_files(&[("wg.yaml", wg)], "head");
    let report = check_change(&repo, &base, &head);
    let md = section(changes_of(&report));
    // The env block's fence is longer than the backticks in a label value.
    assert!(md.contains("````sh"), "{md}");
    // A quote in a value is shell-quoted as istioctl does.
    assert!(md.contains("SERVICE_ACCOUNT='x'\"'\"'y'"), "{md}");
    // No table row is split by a `|` in a label value.
    for line in md.lines().filter(|l| l.starts_with("| `")) {
        assert!(!line.contains("a|b"), "{line}");
    }
}

#[test]
fn reports_stored_before_changes_existed_still_load() {
    let report = change(&fixtures().join("changes/injection-cost"));
    let mut json: serde_json::Value =
        serde_json::from_str(&meshward::report::json(&report)).expect("json");
    assert!(json["changes"]["proxy_cost"]["summary"].is_string());
    // The history store keeps report JSON; older rows have no `changes` key.
    json.as_object_mut().expect("object").remove("changes");
    let old: meshward::report::Report = serde_json::from_value(json).expect("old report loads");
    assert!(old.changes.is_none());
    // And a stored report with changes renders the same section as a fresh one.
    let stored: meshward::report::Report =
        serde_json::from_str(&meshward::report::json(&report)).expect("round trip");
    assert_eq!(section(changes_of(&stored)), section(changes_of(&report)));
}
