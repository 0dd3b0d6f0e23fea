//! Traffic config that applies nowhere (routing/, gateway/, service/): a bookinfo-like
//! mesh in two namespaces changed in ways that break routing, and the cases real
//! repositories showed the model must get right.

use crate::common;

use common::*;
use meshward::finding::{Severity, Status};
use meshward::report::markdown::changes::section;

/// (rule, severity, resource id, file:line) of the findings of the traffic rules.
fn traffic_findings(report: &meshward::report::Report, status: Status) -> Vec<String> {
    let mut out: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.status == status)
        .filter(|f| {
            ["routing/", "gateway/", "service/"]
                .iter()
                .any(|p| f.rule.starts_with(p))
        })
        .map(|f| {
            format!(
                "{} {:?} {} {}:{}",
                f.rule,
                f.severity,
                f.resource.as_ref().map(|r| r.id()).unwrap_or_default(),
                f.file,
                f.line
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn bookinfo_canary_change_says_what_routes_nowhere_and_how_much_traffic_still_arrives() {
    let dir = fixtures().join("traffic/bookinfo");
    let repo = GitRepo::new();
    let base = repo.commit_dir(&dir.join("base"), "base");
    let head = repo.commit_dir(&dir.join("head"), "head");
    let report = check_change(&repo, &base, &head);
    // The base revision routes everything somewhere: nothing to fix there.
    assert!(traffic_findings(&report, Status::Existing).is_empty());
    assert_eq!(
        traffic_findings(&report, Status::Introduced),
        [
            "routing/gateway-not-found Error VirtualService/bookinfo/productpage routing.yaml:8",
            "routing/host-not-found Error VirtualService/bookinfo/ratings routing.yaml:73",
            "routing/subset-selects-no-pod Error DestinationRule/bookinfo/reviews routing.yaml:50",
            "routing/tls-conflicts-peer-authn Error DestinationRule/bookinfo/ratings routing.yaml:61",
        ]
    );
    let gateway = with_rule(&report, "routing/gateway-not-found");
    assert!(
        gateway[0]
            .message
            .contains("write istio-ingress/bookinfo-gateway"),
        "{}",
        gateway[0].message
    );
    // The summary's "what this change does": the canary's share that reaches pods.
    let changes = report.changes.as_ref().expect("a change");
    let reviews = changes
        .routes
        .iter()
        .find(|r| r.resource == "VirtualService/bookinfo/reviews")
        .expect("the reviews route changed");
    assert_eq!(reviews.base.as_ref().and_then(|b| b.reaching), Some(100));
    assert_eq!(reviews.head.reaching, Some(80));
    let text = section(changes);
    assert!(
        text.contains("20% `reviews` v4 ⚠️ the subset selects no pod"),
        "{text}"
    );
    assert!(text.contains("100% → 80% ⚠️"), "{text}");
    // The new ratings route reaches nothing: the host is not expanded.
    let ratings = changes
        .routes
        .iter()
        .find(|r| r.resource == "VirtualService/bookinfo/ratings")
        .expect("the ratings route is new");
    assert_eq!(ratings.head.reaching, Some(0));
    // Coverage counts the route destinations of each revision.
    let cov = |c: &meshward::model::coverage::TotalCoverage| {
        (c.routes_resolving, c.routes_nowhere, c.routes_unchecked)
    };
    assert_eq!(cov(&report.coverage.head.total), (2, 2, 0));
    let base_cov = report.coverage.base.as_ref().expect("base coverage");
    assert_eq!(cov(&base_cov.total), (2, 0, 0));
}

fn tree(name: &str) -> meshward::report::Report {
    check_dir(&fixtures().join("traffic").join(name))
}

#[test]
fn a_gateway_defined_twice_is_not_judged_on_one_of_its_definitions() {
    let report = tree("gateway-defined-twice");
    let found = traffic_findings(&report, Status::Existing);
    assert_eq!(
        found,
        ["gateway/parent-not-found Warning HTTPRoute/shop/cart route.yaml:44"]
    );
    let f = &with_rule(&report, "gateway/parent-not-found")[0];
    assert!(
        f.message.contains("defined more than once"),
        "{}",
        f.message
    );
}

#[test]
fn a_listener_admitting_a_namespace_by_its_name_label_needs_no_other_label() {
    // The route's namespace is not declared (its labels are unknown), but Kubernetes
    // sets kubernetes.io/metadata.name on every namespace.
    assert!(traffic_findings(&tree("namespace-name-selector"), Status::Existing).is_empty());
}

#[test]
fn a_namespace_wide_destination_rule_is_judged_against_the_services_it_covers() {
    let report = tree("wildcard-destination-rule");
    let f = with_rule(&report, "routing/tls-conflicts-peer-authn");
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].message.contains("PeerAuthentication mode DISABLE"),
        "{}",
        f[0].message
    );
}

#[test]
fn plain_http_servers_of_two_gateways_merge_and_tls_hosts_and_tcp_ports_conflict() {
    let report = tree("gateways-share-http");
    let conflicts: Vec<String> = with_rule(&report, "gateway/conflicting")
        .iter()
        .map(|f| {
            format!(
                "{}:{}",
                f.resource.as_ref().map(|r| r.id()).unwrap_or_default(),
                f.line
            )
        })
        .collect();
    // a and b both serve shop.example.com over plain HTTP on 80: merged, no conflict;
    // b and c both terminate TLS for it on 443; d's TCP server on 80 shares with no one.
    assert_eq!(
        conflicts,
        [
            "Gateway/shop/a:46",
            "Gateway/shop/b:58",
            "Gateway/shop/b:60",
            "Gateway/shop/c:73",
            "Gateway/shop/d:86"
        ]
    );
    let a = with_rule(&report, "gateway/conflicting")
        .into_iter()
        .find(|f| f.line == 46)
        .expect("a's conflict");
    assert!(
        a.message.contains("Gateway shop/d") && !a.message.contains("Gateway shop/b"),
        "{}",
        a.message
    );
}

#[test]
fn a_subset_on_node_topology_labels_is_not_claimed_to_select_nothing() {
    let report = tree("topology-subset");
    let f = with_rule(&report, "routing/subset-selects-no-pod");
    // zone-a: the pods' own labels match and the zone comes from their Node: not
    // known here. v9: no pod has version v9, whatever its zone.
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].message.contains("subset v9-zone-a"),
        "{}",
        f[0].message
    );
}

#[test]
fn a_flagger_canary_target_and_the_proxy_ports_are_not_workloads_without_a_service() {
    let report = tree("flagger-canary");
    let f = with_rule(&report, "service/workload-without-service");
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].message.contains("Deployment shop/worker"),
        "{}",
        f[0].message
    );
    assert!(f[0].message.contains("port 9090"), "{}", f[0].message);
}

#[test]
fn a_backend_of_a_kind_istio_does_not_resolve_fails_its_share() {
    let report = tree("backend-invalid-kind");
    let f = with_rule(&report, "routing/host-not-found");
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].message.contains("InvalidKind"), "{}", f[0].message);
    assert_eq!(f[0].line, 69);
}
