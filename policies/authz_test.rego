package meshward.rules.authz_test

import rego.v1

import data.meshward.rules.authz

res(kind, name, spec) := {
	"id": sprintf("%s/shop/%s", [kind, name]),
	"apiVersion": "security.istio.io/v1",
	"kind": kind,
	"namespace": "shop",
	"name": name,
	"body": {"apiVersion": "security.istio.io/v1", "kind": kind, "metadata": {"name": name, "namespace": "shop"}, "spec": spec},
	"file": "policy.yaml",
	"line": 1,
}

ap(spec) := res("AuthorizationPolicy", "allow-cart", spec)

ns(name) := {
	"name": name, "declared": true, "resource": sprintf("Namespace/%s", [name]), "labels": {},
	"injection": {"enabled": true, "via": "istio-injection", "revision": null, "explicitly_disabled": false, "conflict": false},
	"mtls": {"mode": "PERMISSIVE", "source": null}, "workloads": 1, "workloads_with_proxy": 1,
}

mk_input(by_kind) := {
	"resources": [],
	"by_kind": by_kind,
	"model": {
		"namespaces": {
			"shop": object.union(ns("shop"), {"service_accounts": ["cart"]}),
			"web": object.union(ns("web"), {"service_accounts": ["frontend"]}),
		},
		"workloads": [],
		"workload_entries": [{
			"id": "WorkloadEntry/vm/vm-1", "namespace": "vm", "name": "vm-1", "labels": {}, "metadata_labels": {}, "spec_labels": {},
			"address": "10.0.0.5", "network": null, "address_problem": null, "service_account": "reports", "selected_by": [],
		}],
		"selectors": [],
		"peer_authentications": [],
		"service_accounts": {"shop/cart": ["Deployment/shop/cart"], "web/frontend": ["Deployment/web/frontend"]},
		"mtls_scopes": {},
	},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

from_source(source) := {"action": "ALLOW", "rules": [{"from": [{"source": source}], "to": [{"operation": {"methods": ["GET"]}}]}]}

rules_of(by_kind, rule) := {f | some f in authz.findings with input as mk_input(by_kind); f.rule == rule}

# ---------------------------------------------------------------------------
# authz/selector-and-target-ref

test_selector_and_target_ref_fires if {
	spec := {"selector": {"matchLabels": {"app": "cart"}}, "targetRef": {"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "gw"}}
	fs := rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/selector-and-target-ref")
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "targetRef"]
	contains(f.message, "spec.selector and spec.targetRef")
}

test_selector_and_target_refs_on_telemetry_fires if {
	spec := {"selector": {"matchLabels": {"app": "cart"}}, "targetRefs": [{"kind": "Service", "name": "cart"}]}
	fs := rules_of({"Telemetry": [res("Telemetry", "t", spec)]}, "authz/selector-and-target-ref")
	count(fs) == 1
}

test_selector_or_target_ref_alone_quiet if {
	by_kind := {
		"AuthorizationPolicy": [ap({"selector": {"matchLabels": {"app": "cart"}}})],
		"RequestAuthentication": [res("RequestAuthentication", "jwt", {"targetRefs": [{"kind": "Gateway", "name": "gw"}], "selector": {}})],
	}
	count(rules_of(by_kind, "authz/selector-and-target-ref")) == 0
}

# ---------------------------------------------------------------------------
# authz/service-accounts-with-principals

test_service_accounts_with_principals_fires if {
	spec := from_source({"serviceAccounts": ["shop/cart"], "principals": ["cluster.local/ns/shop/sa/cart"]})
	fs := rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/service-accounts-with-principals")
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "rules", 0, "from", 0, "source", "serviceAccounts"]
}

test_not_service_accounts_with_not_namespaces_fires if {
	spec := from_source({"notServiceAccounts": ["shop/cart"], "notNamespaces": ["web"]})
	some f in rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/service-accounts-with-principals")
	f.path == ["spec", "rules", 0, "from", 0, "source", "notServiceAccounts"]
}

test_service_accounts_alone_quiet if {
	spec := from_source({"serviceAccounts": ["shop/cart"], "notPrincipals": ["cluster.local/ns/web/sa/frontend"]})
	count(rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/service-accounts-with-principals")) == 0
}

# ---------------------------------------------------------------------------
# authz/unknown-principal

test_unknown_principal_fires if {
	spec := from_source({"principals": ["cluster.local/ns/shop/sa/cartt", "cluster.local/ns/shop/sa/cart"]})
	fs := rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/unknown-principal")
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.path == ["spec", "rules", 0, "from", 0, "source", "principals", 0]
	contains(f.message, "403 RBAC: access denied")
	contains(f.message, "shop/cartt")
	contains(f.message, "service accounts in use in shop: cart")
}

test_unknown_principal_malformed_fires if {
	spec := from_source({"principals": ["spiffe://cluster.local/ns/shop/sa/cart"]})
	some f in rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/unknown-principal")
	contains(f.message, "drop the spiffe:// prefix")
}

test_unknown_principal_deny_effect if {
	spec := object.union(from_source({"principals": ["cluster.local/ns/shop/sa/nobody"]}), {"action": "DENY"})
	some f in rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/unknown-principal")
	contains(f.message, "not blocked")
}

test_known_principals_quiet if {
	spec := from_source({"principals": [
		"cluster.local/ns/shop/sa/cart",
		"cluster.local/ns/vm/sa/reports",
		"cluster.local/ns/vm/sa/batch",
		"*",
		"cluster.local/ns/web/*",
	]})
	wg := {
		"id": "WorkloadGroup/vm/batch", "apiVersion": "networking.istio.io/v1", "kind": "WorkloadGroup", "namespace": "vm", "name": "batch",
		"body": {"spec": {"template": {"serviceAccount": "batch"}}}, "file": "wg.yaml", "line": 1,
	}
	count(rules_of({"AuthorizationPolicy": [ap(spec)], "WorkloadGroup": [wg]}, "authz/unknown-principal")) == 0
}

# A waypoint's pods run as a service account named after its Gateway, which istiod
# creates: allowing that principal (as ambient/waypoint-hides-caller asks) is no typo.
test_waypoint_principal_is_known if {
	spec := from_source({"principals": ["cluster.local/ns/shop/sa/waypoint", "cluster.local/ns/shop/sa/gateway"]})
	inp := mk_input({"AuthorizationPolicy": [ap(spec)]})
	waypoints := [
		{"id": "Gateway/shop/waypoint", "namespace": "shop", "name": "waypoint", "waypoint_class": true, "principal": "cluster.local/ns/shop/sa/waypoint"},
		{"id": "Gateway/shop/gateway", "namespace": "shop", "name": "gateway", "waypoint_class": false, "principal": "cluster.local/ns/shop/sa/gateway"},
	]
	fs := {f |
		some f in authz.findings with input as object.union(inp, {"model": {"waypoints": waypoints}})
		f.rule == "authz/unknown-principal"
	}
	count(fs) == 1
	some f in fs
	contains(f.message, "shop/gateway")
}

# ---------------------------------------------------------------------------
# authz/unknown-namespace

test_unknown_namespace_fires if {
	spec := from_source({"namespaces": ["web", "paymnts"]})
	fs := rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/unknown-namespace")
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.istio_code == "IST0101"
	f.path == ["spec", "rules", 0, "from", 0, "source", "namespaces", 1]
	contains(f.message, "paymnts")
	contains(f.message, "403 RBAC: access denied")
}

test_known_namespaces_quiet if {
	spec := from_source({"namespaces": ["web", "istio-system", "kube-system", "default", "team-*"]})
	count(rules_of({"AuthorizationPolicy": [ap(spec)]}, "authz/unknown-namespace")) == 0
}

# Hostile shapes never make evaluation fail.
test_hostile_shapes_do_not_error if {
	by_kind := {
		"AuthorizationPolicy": [
			ap({"rules": "nope"}),
			ap({"rules": [7, {"from": "x"}, {"from": [3, {"source": "y"}, {"source": {"principals": "z", "namespaces": 5}}]}]}),
			ap({"rules": [{"from": [{"source": {"principals": [1, null, "bad"], "namespaces": [2, "nowhere"]}}]}]}),
			object.union(ap({}), {"body": {"spec": null}}),
		],
		"Telemetry": [object.union(res("Telemetry", "t", {}), {"body": {"spec": "x"}})],
	}
	fs := authz.findings with input as mk_input(by_kind)
	{f.rule | some f in fs} == {"authz/unknown-principal", "authz/unknown-namespace"}
}

# ---------------------------------------------------------------------------
# authz/identity-change

web(sa) := {
	"id": "Deployment/shop/web", "kind": "Deployment", "namespace": "shop", "name": "web",
	"service_account": sa, "proxy": true, "labels": {"app": "web"},
}

identity(sa, allowed) := {"namespace": "shop", "service_account": sa, "allowed_by": allowed, "denied_by": []}

cart_policy := res("AuthorizationPolicy", "cart-allow-web", from_source({"principals": ["cluster.local/ns/shop/sa/web"]}))

change_input(head_sa, head_allowed, base_allowed) := {
	"resources": [cart_policy],
	"by_kind": {"AuthorizationPolicy": [cart_policy]},
	"model": {
		"namespaces": {"shop": ns("shop")},
		"workloads": [web(head_sa)],
		"workload_entries": [],
		"selectors": [{
			"resource": "AuthorizationPolicy/shop/cart-allow-web", "kind": "AuthorizationPolicy", "namespace": "shop",
			"scope": "workload", "matches": ["Deployment/shop/cart"], "match_count": 1,
		}],
		"service_accounts": {sprintf("shop/%s", [head_sa]): ["Deployment/shop/web"]},
		"service_account_changed": sa_changed(head_sa),
		"identities": {sprintf("shop/%s", [head_sa]): identity(head_sa, head_allowed)},
	},
	"base": {
		"workloads": [web("web")],
		"identities": {"shop/web": identity("web", base_allowed)},
	},
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

# What the model says (src/model) when head's web runs as head_sa and base's as web.
sa_changed(head_sa) := [] if head_sa == "web" else := ["Deployment/shop/web"]

identity_findings(inp) := {f | some f in authz.findings with input as inp; f.rule == "authz/identity-change"}

test_identity_change_fires_when_no_allow_policy_names_the_new_identity if {
	fs := identity_findings(change_input("web-v2", [], ["AuthorizationPolicy/shop/cart-allow-web"]))
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.resource == "Deployment/shop/web"
	f.path == ["spec", "template", "spec", "serviceAccountName"]
	contains(f.message, "calls from Deployment shop/web to Deployment shop/cart will now get 403")
	contains(f.message, "cluster.local/ns/shop/sa/web-v2")
	contains(f.message, "AuthorizationPolicy shop/cart-allow-web")
}

test_identity_change_quiet_when_a_policy_admits_the_new_identity if {
	count(identity_findings(change_input("web-v2", ["AuthorizationPolicy/shop/cart-allow-web"], ["AuthorizationPolicy/shop/cart-allow-web"]))) == 0
}

test_identity_change_quiet_when_no_policy_admitted_the_old_identity if {
	count(identity_findings(change_input("web-v2", [], []))) == 0
}

test_identity_change_quiet_when_service_account_unchanged if {
	count(identity_findings(change_input("web", [], ["AuthorizationPolicy/shop/cart-allow-web"]))) == 0
}

test_identity_change_quiet_without_base if {
	inp := object.union(change_input("web-v2", [], ["AuthorizationPolicy/shop/cart-allow-web"]), {"base": null})
	count(identity_findings(inp)) == 0
}

reports_group(sa) := {"id": "WorkloadGroup/shop/reports", "namespace": "shop", "name": "reports", "service_account": sa}

test_identity_change_for_workload_group if {
	inp := object.union(change_input("web", [], ["AuthorizationPolicy/shop/cart-allow-web"]), {
		"model": {"workload_groups": [reports_group("reports-v2")], "identities": {"shop/reports-v2": identity("reports-v2", [])}},
		"base": {"workload_groups": [reports_group("web")]},
	})
	fs := identity_findings(inp)
	count(fs) == 1
	some f in fs
	f.resource == "WorkloadGroup/shop/reports"
	f.path == ["spec", "template", "serviceAccount"]
}

# Two roots deploy one workload under two accounts: neither copy changed, nothing is
# said, and the rules run (an object keyed by id would have failed to evaluate).
test_identity_change_quiet_for_copies_of_one_workload_that_keep_their_accounts if {
	inp := change_input("web", [], ["AuthorizationPolicy/shop/cart-allow-web"])
	copies := {"workloads": [web("web"), web("web-staging")], "identities": inp.base.identities}
	head := object.union(inp.model, {"workloads": [web("web-staging"), web("web")]})
	count(identity_findings(object.union(inp, {"base": copies, "model": head}))) == 0
}

test_identity_change_fires_for_the_copy_that_changes_its_account if {
	inp := change_input("web-v2", [], ["AuthorizationPolicy/shop/cart-allow-web"])
	copies := {"workloads": [web("web"), web("web-staging")], "identities": inp.base.identities}
	head := object.union(inp.model, {"workloads": [web("web-staging"), web("web-v2")]})
	fs := identity_findings(object.union(inp, {"base": copies, "model": head}))
	count(fs) > 0
	every f in fs {
		contains(f.message, "web-v2")
	}
}
