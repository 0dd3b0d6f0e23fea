//! A mesh with every data plane: a sidecar namespace, an ambient namespace with a
//! waypoint, an ambient namespace without one, and a namespace outside the mesh. The
//! coverage numbers and the findings are what the control plane would enforce.

use crate::common;

use common::*;
use meshward::finding::Severity;
use serde_json::Value as Json;

fn mixed() -> meshward::report::Report {
    check_dir(&fixtures().join("ambient/mixed"))
}

fn num(v: &Json, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Json::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v:#}"))
}

#[test]
fn coverage_counts_workloads_by_data_plane_and_policies_by_enforcement() {
    let report = mixed();
    let head = serde_json::to_value(&report.coverage.head).expect("coverage as JSON");
    // shop: 2 sidecars; payments: ledger (ambient, behind the waypoint) and
    // reconciler (opted out); catalog: 2 ambient, no waypoint; legacy: reports.
    assert_eq!(num(&head, "/total/workloads"), 7);
    assert_eq!(num(&head, "/total/workloads_with_proxy"), 2);
    assert_eq!(num(&head, "/total/workloads_ambient"), 3);
    assert_eq!(num(&head, "/total/workloads_waypoint"), 1);
    assert_eq!(num(&head, "/total/namespaces_ambient"), 2);
    assert_eq!(num(&head, "/namespaces/payments/workloads_ambient"), 1);
    assert_eq!(num(&head, "/namespaces/payments/workloads_waypoint"), 1);
    assert_eq!(num(&head, "/namespaces/catalog/workloads_ambient"), 2);
    assert_eq!(num(&head, "/namespaces/catalog/workloads_waypoint"), 0);
    assert_eq!(num(&head, "/namespaces/legacy/workloads_ambient"), 0);
    // ledger-writes (targetRefs, bound) and search-callers (L4 only) as written;
    // images-read-only loses its only rule at ztunnel; block-scrapers can never match.
    assert_eq!(num(&head, "/total/authz_as_written"), 2);
    assert_eq!(num(&head, "/total/authz_reduced_to_l4"), 1);
    assert_eq!(num(&head, "/total/authz_not_enforced"), 1);
    // Both selector policies select their ambient pods.
    assert_eq!(num(&head, "/namespaces/catalog/selectors_ineffective"), 0);
}

#[test]
fn ambient_workloads_are_enforced_and_l7_rules_at_ztunnel_are_said() {
    let report = mixed();
    for rule in [
        "mtls/strict-unenforced-workloads",
        "selector/matches-nothing",
        "injection/namespace-unknown",
    ] {
        assert!(
            with_rule(&report, rule).is_empty(),
            "{rule}: {:#?}",
            with_rule(&report, rule)
        );
    }
    // Only legacy is outside the mesh by omission; the ambient namespaces are not.
    let not_injected: Vec<_> = with_rule(&report, "injection/namespace-not-injected")
        .iter()
        .map(|f| f.message.clone())
        .collect();
    assert_eq!(not_injected.len(), 1, "{not_injected:#?}");
    assert!(not_injected[0].contains("legacy"));

    let at_ztunnel = with_rule(&report, "ambient/l7-policy-at-ztunnel");
    let of = |name: &str| {
        at_ztunnel
            .iter()
            .find(|f| {
                f.resource
                    .as_ref()
                    .is_some_and(|r| r.name == name && r.namespace.as_deref() == Some("catalog"))
            })
            .unwrap_or_else(|| panic!("{name}: {at_ztunnel:#?}"))
    };
    assert_eq!(of("images-read-only").severity, Severity::Error);
    assert_eq!(of("block-scrapers").severity, Severity::Error);
    assert_eq!(at_ztunnel.len(), 2, "{at_ztunnel:#?}");
    // The policy bound at the waypoint is enforced there, HTTP included.
    assert!(report.findings.iter().all(|f| f
        .resource
        .as_ref()
        .is_none_or(|r| r.name != "ledger-writes")));
}
