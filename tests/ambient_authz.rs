//! The ambient authorization rules (policies/ambient_authz.rego) as a reviewer reads
//! them: what happens at runtime, on which line, and how to fix it.

use crate::common;

use common::*;
use meshward::finding::Severity;

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    istio.io/dataplane-mode: ambient\n";

fn deployment(name: &str, pod_labels: &str) -> String {
    format!("---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n{pod_labels}    spec:\n      serviceAccountName: {name}\n      containers:\n        - name: {name}\n          image: registry.example.com/shop/{name}:1.0.0\n")
}

/// An ALLOW policy whose only rule names a method: ztunnel drops the rule and refuses
/// every connection, and the finding points at the method.
#[test]
fn an_allow_policy_left_without_rules_refuses_every_connection() {
    let dir = fixtures().join("rules/ambient__l7-policy-at-ztunnel/fail");
    let report = check_dir(&dir);
    let found = with_rule(&report, "ambient/l7-policy-at-ztunnel");
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = found[0];
    assert_eq!(f.severity, Severity::Error);
    for fact in [
        "AuthorizationPolicy catalog/images-read-only (ALLOW) has no targetRefs",
        "ztunnel, which sees no HTTP",
        "(rules[0].to[0].operation.methods)",
        "Every connection to Deployment catalog/images is refused (connection reset, curl exit 56)",
        "istio.io/use-waypoint",
        "L4 fields only",
    ] {
        assert!(f.message.contains(fact), "{fact:?} not in {}", f.message);
    }
    let line = line_text(&dir, &f.file, f.line);
    assert!(line.contains("methods:"), "line {} is {line:?}", f.line);
}

/// A DENY of POSTs on port 8080: ztunnel keeps the port and drops the method, so it
/// denies every connection to 8080. The pod that opted into a sidecar still enforces
/// it as written, and the message says both.
#[test]
fn a_deny_that_loses_its_method_denies_the_whole_port() {
    let repo = GitRepo::new();
    repo.write(
        "shop.yaml",
        &format!(
            "{NAMESPACE}{}{}---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: no-writes\n  namespace: shop\nspec:\n  action: DENY\n  rules:\n    - to:\n        - operation:\n            ports: [\"8080\"]\n            methods: [\"POST\", \"DELETE\"]\n",
            deployment("cart", ""),
            deployment("legacy", "        sidecar.istio.io/inject: \"true\"\n"),
        ),
    );
    let report = check_dir(&repo.path());
    let found = with_rule(&report, "ambient/l7-policy-at-ztunnel");
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = found[0];
    assert_eq!(f.severity, Severity::Warning);
    for fact in [
        "for ambient workload Deployment shop/cart",
        "rules[0] denies every connection that matches what is left (to.operation.ports 8080)",
        "connection reset (curl exit 56)",
        "Its workload with a sidecar still enforces it as written.",
        "sidecar clients",
    ] {
        assert!(f.message.contains(fact), "{fact:?} not in {}", f.message);
    }
    assert!(line_text(&repo.path(), &f.file, f.line).contains("methods:"));
}

/// The fix ambient/waypoint-hides-caller asks for (allow the waypoint's principal) is
/// not then called an unknown principal: istiod runs the waypoint as that account.
#[test]
fn allowing_the_waypoint_is_the_fix_and_no_unknown_principal() {
    let fail = check_dir(&fixtures().join("rules/ambient__waypoint-hides-caller/fail"));
    let found = with_rule(&fail, "ambient/waypoint-hides-caller");
    assert_eq!(found.len(), 1, "{found:#?}");
    for fact in [
        "traffic to Service ledger goes through waypoint Gateway payments/waypoint",
        "identity cluster.local/ns/payments/sa/waypoint",
        "503",
        "add principal cluster.local/ns/payments/sa/waypoint to this policy",
    ] {
        assert!(
            found[0].message.contains(fact),
            "{fact:?} not in {}",
            found[0].message
        );
    }
    let pass = check_dir(&fixtures().join("rules/ambient__waypoint-hides-caller/pass"));
    assert!(with_rule(&pass, "ambient/waypoint-hides-caller").is_empty());
    assert!(
        with_rule(&pass, "authz/unknown-principal").is_empty(),
        "{:#?}",
        with_rule(&pass, "authz/unknown-principal")
    );
}

/// A RequestAuthentication on an ambient pod validates nothing, and an
/// AuthorizationPolicy requiring a request principal there refuses everyone: both are
/// said, and the first names the second.
#[test]
fn jwt_policies_on_ambient_pods_are_reported_together() {
    let repo = GitRepo::new();
    repo.write(
        "shop.yaml",
        &format!(
            "{NAMESPACE}{}---\napiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata:\n  name: cart-jwt\n  namespace: shop\nspec:\n  selector:\n    matchLabels:\n      app: cart\n  jwtRules:\n    - issuer: https://auth.example.com\n      jwksUri: https://auth.example.com/jwks.json\n---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: require-jwt\n  namespace: shop\nspec:\n  selector:\n    matchLabels:\n      app: cart\n  action: ALLOW\n  rules:\n    - from:\n        - source:\n            requestPrincipals: [\"https://auth.example.com/*\"]\n",
            deployment("cart", ""),
        ),
    );
    let report = check_dir(&repo.path());
    let ra = with_rule(&report, "ambient/policy-needs-waypoint");
    assert_eq!(ra.len(), 1, "{ra:#?}");
    assert_eq!(ra[0].severity, Severity::Error);
    for fact in [
        "RequestAuthentication shop/cart-jwt selects ambient workload Deployment shop/cart",
        "JWTs sent to them are not validated",
        "(issuer https://auth.example.com)",
        "AuthorizationPolicy shop/require-jwt, which checks request principals",
    ] {
        assert!(
            ra[0].message.contains(fact),
            "{fact:?} not in {}",
            ra[0].message
        );
    }
    let ap = with_rule(&report, "ambient/l7-policy-at-ztunnel");
    assert_eq!(ap.len(), 1, "{ap:#?}");
    assert_eq!(ap[0].severity, Severity::Error);
    assert!(ap[0]
        .message
        .contains("(rules[0].from[0].source.requestPrincipals)"));
}
