//! The ambient waypoint and data-plane rules (policies/ambient.rego) as a reviewer
//! reads them: what happens to the traffic, on which line, and how to fix it.

use crate::common;

use common::*;
use meshward::finding::Severity;

fn namespace(name: &str, labels: &str) -> String {
    format!("---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n{labels}")
}

const AMBIENT: &str = "    istio.io/dataplane-mode: ambient\n";

fn deployment(ns: &str, name: &str, pod_labels: &str) -> String {
    format!("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n{pod_labels}    spec:\n      serviceAccountName: {name}\n      containers:\n        - name: {name}\n          image: registry.example.com/shop/{name}:1.0.0\n")
}

fn service(ns: &str, name: &str, labels: &str) -> String {
    format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    app: {name}\n{labels}spec:\n  selector:\n    app: {name}\n  ports:\n    - name: http\n      port: 80\n      targetPort: 8080\n")
}

fn waypoint(ns: &str, name: &str, listener_extra: &str) -> String {
    format!("---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  gatewayClassName: istio-waypoint\n  listeners:\n    - name: mesh\n      port: 15008\n      protocol: HBONE\n{listener_extra}")
}

fn assert_facts(message: &str, facts: &[&str]) {
    for fact in facts {
        assert!(message.contains(fact), "{fact:?} not in {message}");
    }
}

/// A typo in istio.io/use-waypoint: an error on the label's line naming the missing
/// Gateway, the policy left applying nowhere, and how to create the waypoint.
#[test]
fn a_misspelt_waypoint_strands_the_policies_bound_at_it() {
    let dir = fixtures().join("rules/ambient__waypoint-not-found/fail");
    let report = check_dir(&dir);
    let found = with_rule(&report, "ambient/waypoint-not-found");
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = found[0];
    assert_eq!(f.severity, Severity::Error);
    assert_facts(
        &f.message,
        &[
            "Service shop/cart is labelled istio.io/use-waypoint: cart-waypoint",
            "there is no Gateway cart-waypoint in namespace shop",
            "WaypointIsNotReady",
            "goes through no waypoint",
            "AuthorizationPolicy shop/cart-admin",
            "gatewayClassName: istio-waypoint",
        ],
    );
    let line = line_text(&dir, &f.file, f.line);
    assert!(
        line.contains("istio.io/use-waypoint: cart-waypoint"),
        "line {} is {line:?}",
        f.line
    );
}

/// A waypoint in a namespace the repository holds nothing of may be deployed from
/// another repository: a warning that says so, not an error.
#[test]
fn a_waypoint_in_a_namespace_deployed_elsewhere_is_only_a_warning() {
    let repo = GitRepo::new();
    repo.write(
        "shop.yaml",
        &format!(
            "{}{}{}",
            namespace("shop", AMBIENT),
            deployment("shop", "cart", ""),
            service(
                "shop",
                "cart",
                "    istio.io/use-waypoint: shared\n    istio.io/use-waypoint-namespace: platform-waypoints\n"
            ),
        ),
    );
    let report = check_dir(&repo.path());
    let found = with_rule(&report, "ambient/waypoint-not-found");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].severity, Severity::Warning);
    assert_facts(
        &found[0].message,
        &[
            "namespace platform-waypoints, of which this repository holds nothing",
            "may be deployed from elsewhere",
            "Check that waypoint platform-waypoints/shared is deployed",
        ],
    );
}

/// A shared waypoint whose listener admits the namespace by kubernetes.io/metadata.name
/// (which the API server sets on every namespace) binds; one admitting only its own
/// namespace refuses, and the finding says how to open it.
#[test]
fn a_shared_waypoint_admits_namespaces_as_its_listener_says() {
    let shop = format!(
        "{}{}{}",
        namespace(
            "shop",
            "    istio.io/dataplane-mode: ambient\n    istio.io/use-waypoint: shared\n    istio.io/use-waypoint-namespace: mesh-gateways\n"
        ),
        deployment("shop", "cart", ""),
        service("shop", "cart", ""),
    );
    let by_name = "      allowedRoutes:\n        namespaces:\n          from: Selector\n          selector:\n            matchLabels:\n              kubernetes.io/metadata.name: shop\n";
    let repo = GitRepo::new();
    repo.write("shop.yaml", &shop);
    repo.write(
        "gateways.yaml",
        &format!(
            "{}{}",
            namespace("mesh-gateways", "    team: platform\n"),
            waypoint("mesh-gateways", "shared", by_name)
        ),
    );
    let report = check_dir(&repo.path());
    assert!(
        with_rule(&report, "ambient/waypoint-cross-namespace").is_empty(),
        "{:#?}",
        report.findings
    );

    repo.write(
        "gateways.yaml",
        &format!(
            "{}{}",
            namespace("mesh-gateways", "    team: platform\n"),
            waypoint("mesh-gateways", "shared", "")
        ),
    );
    let report = check_dir(&repo.path());
    let found = with_rule(&report, "ambient/waypoint-cross-namespace");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].severity, Severity::Error);
    assert_facts(
        &found[0].message,
        &[
            "namespace shop is labelled istio.io/use-waypoint: shared (in namespace mesh-gateways)",
            "allowedRoutes.namespaces.from: Same",
            "AttachmentDenied",
            "from: All",
        ],
    );
    assert!(line_text(&repo.path(), &found[0].file, found[0].line)
        .contains("istio.io/use-waypoint: shared"));
    // A namespace holding only waypoints is not "not injected": istiod deploys their pods.
    assert!(
        with_rule(&report, "injection/namespace-not-injected").is_empty(),
        "{:#?}",
        report.findings
    );
}

/// A workload labelled ambient in an injected namespace gets a sidecar; opting it out
/// of injection moves it to ambient, and that opt-out is not reported as leaving the
/// mesh.
#[test]
fn a_workload_moved_to_ambient_by_opting_out_of_injection() {
    let repo = GitRepo::new();
    let injected = namespace("shop", "    istio-injection: enabled\n");
    repo.write(
        "shop.yaml",
        &format!(
            "{injected}{}",
            deployment("shop", "cart", "        istio.io/dataplane-mode: ambient\n")
        ),
    );
    let report = check_dir(&repo.path());
    let found = with_rule(&report, "ambient/sidecar-and-ambient");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_facts(
        &found[0].message,
        &[
            "Deployment shop/cart asks for both data planes",
            "the sidecar wins: ztunnel skips them",
            "the sidecar, not ztunnel, enforces",
            "sidecar.istio.io/inject: \"false\"",
        ],
    );
    assert!(line_text(&repo.path(), &found[0].file, found[0].line)
        .contains("istio.io/dataplane-mode: ambient"));

    repo.write(
        "shop.yaml",
        &format!(
            "{injected}{}",
            deployment(
                "shop",
                "cart",
                "        istio.io/dataplane-mode: ambient\n        sidecar.istio.io/inject: \"false\"\n"
            )
        ),
    );
    let report = check_dir(&repo.path());
    for rule in [
        "ambient/sidecar-and-ambient",
        "injection/workload-opted-out",
    ] {
        assert!(
            with_rule(&report, rule).is_empty(),
            "{rule}: {:#?}",
            report.findings
        );
    }
}

/// A Sidecar selecting ambient pods only is said as ignored (IST0167), not as a
/// selector that selects nothing.
#[test]
fn a_sidecar_on_ambient_pods_is_ignored_not_unmatched() {
    let repo = GitRepo::new();
    repo.write(
        "shop.yaml",
        &format!(
            "{}{}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata:\n  name: cart\n  namespace: shop\nspec:\n  workloadSelector:\n    labels:\n      app: cart\n  egress:\n    - hosts: [\"./*\"]\n",
            namespace("shop", AMBIENT),
            deployment("shop", "cart", ""),
        ),
    );
    let report = check_dir(&repo.path());
    assert!(
        with_rule(&report, "selector/matches-nothing").is_empty(),
        "{:#?}",
        report.findings
    );
    let found = with_rule(&report, "ambient/sidecar-ignored");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].istio_code.as_deref(), Some("IST0167"));
    assert_facts(
        &found[0].message,
        &["Deployment shop/cart", "ambient", "applies nowhere"],
    );
}

/// Routing for a waypoint's Service kept in the client's namespace: the waypoint does
/// not read it. Moved to the Service's namespace, it does.
#[test]
fn routing_in_the_clients_namespace_does_not_reach_the_waypoint() {
    let report = check_dir(&fixtures().join("rules/ambient__route-not-at-waypoint/fail"));
    let found = with_rule(&report, "ambient/route-not-at-waypoint");
    let kinds: Vec<String> = found
        .iter()
        .filter_map(|f| f.resource.as_ref().map(|r| r.id()))
        .collect();
    assert!(
        kinds.contains(&"DestinationRule/web/reviews".to_string())
            && kinds.contains(&"VirtualService/web/reviews".to_string()),
        "{kinds:?}"
    );
    for f in &found {
        assert_facts(
            &f.message,
            &[
                "waypoint Gateway shop/waypoint",
                "in namespace web",
                "sidecar clients, which skip the waypoint, still apply it",
                "Move it to namespace shop",
            ],
        );
    }
}

/// An ingress route to a Service whose waypoint carries a DENY: the ingress skips the
/// waypoint, and the finding names the route, the policy and the label that fixes it.
#[test]
fn ingress_that_skips_the_waypoint_names_the_route_and_the_policy() {
    let report = check_dir(&fixtures().join("rules/ambient__ingress-skips-waypoint/fail"));
    let found = with_rule(&report, "ambient/ingress-skips-waypoint");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(
        found[0].resource.as_ref().map(|r| r.id()),
        Some("Service/shop/cart".to_string())
    );
    assert_facts(
        &found[0].message,
        &[
            "VirtualService shop/cart-public via gateway istio-ingress/public",
            "AuthorizationPolicy shop/cart-admin",
            "skipping the waypoint",
            "istio.io/ingress-use-waypoint: \"true\"",
        ],
    );
}
