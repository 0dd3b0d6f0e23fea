package meshward.rules.selector_test

import rego.v1

import data.meshward.rules.selector

# ---------------------------------------------------------------------------
# builders

sel(kind, namespace, name, extra) := object.union(
	{
		"resource": sprintf("%s/%s/%s", [kind, namespace, name]),
		"kind": kind,
		"namespace": namespace,
		"path": ["spec", "selector", "matchLabels"],
		"scope": "workload",
		"labels": {"app": "cart"},
		"counts": "injected_workloads",
		"matches": [],
		"match_count": 0,
		"unknown_matches": [],
		"spec_only_matches": [],
		"workload_entry_matches": 0,
		"invalid": [],
	},
	extra,
)

ns(name, nworkloads) := {
	"name": name, "declared": true, "resource": sprintf("Namespace/%s", [name]), "labels": {},
	"injection": {"enabled": true, "via": "istio-injection", "revision": null, "explicitly_disabled": false, "conflict": false},
	"mtls": {"mode": "PERMISSIVE", "source": null},
	"workloads": nworkloads, "workloads_with_proxy": nworkloads,
}

workload(namespace, name, labels, proxy) := {
	"id": sprintf("Deployment/%s/%s", [namespace, name]), "kind": "Deployment", "namespace": namespace, "name": name,
	"labels": labels, "annotations": {}, "service_account": name, "replicas": 1, "proxy": proxy,
	"proxy_known": true, "proxy_reason": "", "opted_out": false, "host_network": false, "native_sidecar": false, "template_hash": "h",
}

mk_input(namespaces, workloads, entries, selectors, by_kind) := {
	"resources": [],
	"by_kind": by_kind,
	"model": {
		"namespaces": namespaces,
		"workloads": workloads,
		"workload_entries": entries,
		"selectors": selectors,
		"peer_authentications": [],
		"service_accounts": {},
		"mtls_scopes": {},
	},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

se_resource := {
	"id": "ServiceEntry/vm/reports", "apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
	"namespace": "vm", "name": "reports",
	"body": {"spec": {"hosts": ["reports.vm.example.com"], "workloadSelector": {"labels": {"app": "reportz"}}}},
	"file": "se.yaml", "line": 1,
}

rules_of(fs, rule) := {f | some f in fs; f.rule == rule}

# ---------------------------------------------------------------------------
# selector/matches-nothing

test_matches_nothing_authz_warning if {
	inp := mk_input({"shop": ns("shop", 1)}, [workload("shop", "web", {"app": "web"}, true)], [], [sel("AuthorizationPolicy", "shop", "allow-cart", {})], {})
	fs := rules_of(selector.findings, "selector/matches-nothing") with input as inp
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.istio_code == "IST0127"
	f.path == ["spec", "selector", "matchLabels"]
	contains(f.message, "app=cart")
	contains(f.message, "applies nowhere")
}

test_matches_nothing_names_unproxied_workload if {
	inp := mk_input({"shop": ns("shop", 1)}, [workload("shop", "cart", {"app": "cart", "v": "1"}, false)], [], [sel("PeerAuthentication", "shop", "cart", {})], {})
	some f in selector.findings with input as inp
	f.rule == "selector/matches-nothing"
	contains(f.message, "it matches Deployment shop/cart, which has no Istio proxy")
}

# A selector whose only matches sit in a namespace the repository does not declare
# may select them (if they have a proxy): "selects nothing" would be a guess.
test_matches_nothing_quiet_when_the_matches_proxy_is_unknown if {
	w := object.union(workload("pay", "cart", {"app": "cart"}, false), {"proxy_known": false})
	s := sel("AuthorizationPolicy", "pay", "allow-cart", {"unknown_matches": [w.id]})
	inp := mk_input({"pay": object.union(ns("pay", 1), {"injection": {"enabled": null}})}, [w], [], [s], {})
	count(rules_of(selector.findings, "selector/matches-nothing")) == 0 with input as inp
}

# The hint about matched workloads without a proxy names only those known to have none.
test_matches_nothing_hint_leaves_out_unknown_proxies if {
	unknown := object.union(workload("istio-system", "probe", {"app": "cart"}, false), {"proxy_known": false})
	s := sel("AuthorizationPolicy", "istio-system", "allow-cart", {})
	inp := mk_input({"istio-system": ns("istio-system", 1)}, [unknown], [], [s], {})
	some f in selector.findings with input as inp
	f.rule == "selector/matches-nothing"
	not contains(f.message, "probe")
}

test_matches_nothing_service_entry_error if {
	s := sel("ServiceEntry", "vm", "reports", {"path": ["spec", "workloadSelector", "labels"], "labels": {"app": "reportz"}, "counts": "workloads_and_entries"})
	inp := mk_input({"vm": ns("vm", 0)}, [], [], [s], {"ServiceEntry": [se_resource]})
	fs := rules_of(selector.findings, "selector/matches-nothing") with input as inp
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "workloadSelector", "labels"]
	contains(f.message, "reports.vm.example.com")
	contains(f.message, "503 no healthy upstream")
}

test_matches_nothing_namespace_scope_empty_namespace if {
	s := sel("AuthorizationPolicy", "ghost", "deny-all", {"scope": "namespace", "path": [], "labels": null})
	inp := mk_input({"ghost": ns("ghost", 0)}, [], [], [s], {})
	some f in selector.findings with input as inp
	f.rule == "selector/matches-nothing"
	f.path == []
	contains(f.message, "namespace ghost has no workloads")
}

# Selecting ambient workloads only is said by the ambient rules (a Sidecar:
# ambient/sidecar-ignored), not as "selects nothing".
test_matches_nothing_quiet_when_it_selects_ambient_workloads if {
	amb := object.union(workload("shop", "cart", {"app": "cart"}, false), {"ambient": true})
	s := sel("Sidecar", "shop", "cart", {"path": ["spec", "workloadSelector", "labels"], "ambient_matches": [amb.id]})
	inp := mk_input({"shop": ns("shop", 1)}, [amb], [], [s], {})
	count(rules_of(selector.findings, "selector/matches-nothing")) == 0 with input as inp
}

# ambient/policy-needs-waypoint speaks for an EnvoyFilter on ambient workloads.
test_matches_nothing_quiet_for_an_envoy_filter_on_ambient_workloads if {
	amb := object.union(workload("shop", "cart", {"app": "cart"}, false), {"ambient": true})
	s := sel("EnvoyFilter", "shop", "cart-lua", {"path": ["spec", "workloadSelector", "labels"], "ambient_matches": [amb.id]})
	inp := mk_input({"shop": ns("shop", 1)}, [amb], [], [s], {})
	count(rules_of(selector.findings, "selector/matches-nothing")) == 0 with input as inp
}

# ztunnel applies a root-namespace selector policy to the root namespace's pods only:
# ambient pods it matches elsewhere leave it applying nowhere, and that is said here.
test_matches_nothing_root_selector_on_ambient_workloads_elsewhere if {
	amb := object.union(workload("shop", "cart", {"app": "cart"}, false), {"ambient": true})
	s := sel("AuthorizationPolicy", "istio-system", "allow-cart", {"ambient_matches": [amb.id]})
	inp := mk_input({"shop": ns("shop", 1), "istio-system": ns("istio-system", 0)}, [amb], [], [s], {})
	some f in selector.findings with input as inp
	f.rule == "selector/matches-nothing"
	contains(f.message, "matches only Deployment shop/cart, which ztunnel captures (ambient)")
	contains(f.message, "own namespace (istio-system)")
	not contains(f.message, "no Istio proxy")
}

# An ambient workload has no sidecar but is in the mesh: the hint does not call it proxy-less.
test_matches_nothing_hint_leaves_out_ambient_workloads if {
	amb := object.union(workload("shop", "cart", {"app": "cart"}, false), {"ambient": true})
	s := sel("AuthorizationPolicy", "shop", "allow-cart", {})
	inp := mk_input({"shop": ns("shop", 1)}, [amb], [], [s], {})
	some f in selector.findings with input as inp
	f.rule == "selector/matches-nothing"
	not contains(f.message, "no Istio proxy")
}

test_matches_nothing_quiet if {
	selectors := [
		sel("AuthorizationPolicy", "shop", "allow-cart", {"match_count": 1, "matches": ["Deployment/shop/cart"]}),
		# namespace-wide, namespace has (uninjected) workloads
		sel("PeerAuthentication", "shop", "default", {"scope": "namespace", "path": [], "labels": null}),
		# namespace-wide in a VM namespace
		sel("AuthorizationPolicy", "vm", "allow", {"scope": "namespace", "path": [], "labels": null}),
		# mesh-wide never fires
		sel("PeerAuthentication", "istio-system", "default", {"scope": "mesh", "path": [], "labels": null}),
	]
	entries := [{"id": "WorkloadEntry/vm/vm-1", "namespace": "vm", "name": "vm-1", "labels": {}, "metadata_labels": {}, "spec_labels": {}, "address": "10.0.0.5", "network": null, "address_problem": null, "service_account": null, "selected_by": []}]
	inp := mk_input({"shop": ns("shop", 2), "istio-system": ns("istio-system", 0)}, [], entries, selectors, {})
	count(rules_of(selector.findings, "selector/matches-nothing")) == 0 with input as inp
}

# ---------------------------------------------------------------------------
# selector/matches-spec-labels-only

test_spec_labels_only_fires if {
	s := sel("ServiceEntry", "vm", "reports", {"path": ["spec", "workloadSelector", "labels"], "labels": {"app": "reports"}, "match_count": 1, "spec_only_matches": ["WorkloadEntry/vm/vm-1"]})
	fs := rules_of(selector.findings, "selector/matches-spec-labels-only") with input as mk_input({}, [], [], [s], {})
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	contains(f.message, "WorkloadEntry vm/vm-1")
	contains(f.message, "metadata.labels")
}

test_spec_labels_only_quiet if {
	s := sel("ServiceEntry", "vm", "reports", {"match_count": 1, "matches": ["WorkloadEntry/vm/vm-1"]})
	count(rules_of(selector.findings, "selector/matches-spec-labels-only")) == 0 with input as mk_input({}, [], [], [s], {})
}

# ---------------------------------------------------------------------------
# selector/wildcard-value

test_wildcard_value_fires if {
	s := sel("AuthorizationPolicy", "shop", "allow", {"labels": {"app": "cart*"}, "invalid": [{"key": "app", "value": "cart*", "problem": "value contains *"}]})
	fs := rules_of(selector.findings, "selector/wildcard-value") with input as mk_input({}, [], [], [s], {})
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "selector", "matchLabels", "app"]
	contains(f.message, "app=cart*")
}

test_wildcard_value_empty_key_path if {
	s := sel("Sidecar", "shop", "default", {"path": ["spec", "workloadSelector", "labels"], "invalid": [{"key": "", "value": "x", "problem": "empty key"}]})
	some f in selector.findings with input as mk_input({}, [], [], [s], {})
	f.rule == "selector/wildcard-value"
	f.path == ["spec", "workloadSelector", "labels"]
}

test_wildcard_value_quiet if {
	s := sel("AuthorizationPolicy", "shop", "allow", {"match_count": 1})
	count(rules_of(selector.findings, "selector/wildcard-value")) == 0 with input as mk_input({}, [], [], [s], {})
}

test_matches_nothing_gateway_selector_says_gateway_traffic if {
	s := sel("AuthorizationPolicy", "istio-system", "ingress-allow", {"labels": {"istio": "ingressgateway"}})
	some f in selector.findings with input as mk_input({}, [], [], [s], {})
	f.rule == "selector/matches-nothing"
	contains(f.message, "traffic entering through that gateway")
	contains(f.message, "in any namespace")
}
