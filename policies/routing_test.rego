package meshward.rules.routing_test

import rego.v1

import data.meshward.rules.routing

# ---------------------------------------------------------------------------
# builders: the model's traffic facts (see src/model/traffic), one at a time

dest(extra) := object.union(
	{
		"resource": "VirtualService/shop/cart", "kind": "VirtualService", "namespace": "shop",
		"role": "route", "path": ["spec", "http", 0, "route", 0, "destination", "host"],
		"host": "cart", "fqdn": "cart.shop.svc.cluster.local", "status": "found", "reason": "",
		"target": "Service/shop/cart", "target_ports": [8080], "port": null,
		"port_path": ["spec", "http", 0, "route", 0, "destination", "port", "number"],
		"subset": null, "subset_path": [], "subset_status": "", "known_subsets": [],
		"subset_pods": null, "weight": null, "gateway_only": false, "reference_grant": "",
	},
	extra,
)

with_traffic(t) := {"model": {"traffic": t}}

rules_of(fs) := [[f.rule, f.severity] | some f in fs]

findings_for(t) := fs if {
	fs := routing.findings with input as with_traffic(t)
}

# ---------------------------------------------------------------------------
# routing/host-not-found

test_found_host_is_quiet if {
	count(findings_for({"destinations": [dest({})]})) == 0
}

test_missing_host_in_owned_namespace_is_an_error if {
	fs := findings_for({"destinations": [dest({"status": "not-found", "target": null, "target_ports": [], "reason": "namespace shop is the repository's and has no Service cart"})]})
	rules_of(fs) == [["routing/host-not-found", "error"]]
	some f in fs
	contains(f.message, "HTTP 503")
	contains(f.message, "has no Service cart")
}

test_unknown_host_is_a_warning_that_says_it_was_not_checked if {
	fs := findings_for({"destinations": [dest({"status": "unknown", "target": null, "host": "api.example.com", "fqdn": "api.example.com", "reason": "no Service or ServiceEntry in the repository defines it"})]})
	rules_of(fs) == [["routing/host-not-found", "warning"]]
	some f in fs
	contains(f.message, "could not check")
}

test_unqualified_two_label_host_names_the_full_form if {
	fs := findings_for({"destinations": [dest({"status": "not-qualified", "host": "cart.shop", "fqdn": "cart.shop", "target": null})]})
	some f in fs
	f.severity == "error"
	contains(f.message, "cart.shop.svc.cluster.local")
}

test_not_exported_host_tells_where_to_export if {
	fs := findings_for({"destinations": [dest({"status": "not-exported", "namespace": "web", "target": null, "reason": "Service/shop/cart defines it, exported only to shop, and this applies in web"})]})
	some f in fs
	contains(f.message, "exported only to shop, and this applies in web")
	contains(f.message, "Export it to those namespaces")
}

test_mirror_and_backend_say_their_own_symptom if {
	m := findings_for({"destinations": [dest({"status": "not-found", "role": "mirror"})]})
	some fm in m
	contains(fm.message, "mirrored copies go nowhere")
	b := findings_for({"destinations": [dest({"status": "not-found", "role": "backend", "kind": "HTTPRoute"})]})
	some fb in b
	contains(fb.message, "HTTP 500")
}

test_destination_rule_host_not_found_is_ist0174 if {
	dr := {"resource": "DestinationRule/shop/cart", "namespace": "shop", "host": "kart", "fqdn": "kart.shop.svc.cluster.local", "host_status": "not-found", "reason": "x", "target": null, "subsets": []}
	fs := findings_for({"destination_rules": [dr]})
	some f in fs
	f.istio_code == "IST0174"
	f.severity == "warning"
	wildcard := object.union(dr, {"host": "*.local", "host_status": "wildcard"})
	count(findings_for({"destination_rules": [wildcard]})) == 0
}

# ---------------------------------------------------------------------------
# routing/port-not-found

test_port_the_host_does_not_expose if {
	fs := findings_for({"destinations": [dest({"port": 80})]})
	rules_of(fs) == [["routing/port-not-found", "error"]]
	some f in fs
	f.path == ["spec", "http", 0, "route", 0, "destination", "port", "number"]
	contains(f.message, "exposes port 8080 only")
	count(findings_for({"destinations": [dest({"port": 8080})]})) == 0
}

test_gateway_only_route_without_port_to_multi_port_host if {
	fs := findings_for({"destinations": [dest({"gateway_only": true, "target_ports": [8080, 9090]})]})
	some f in fs
	f.istio_code == "IST0112"
	# For sidecars the listening port is the service port: no finding.
	count(findings_for({"destinations": [dest({"target_ports": [8080, 9090]})]})) == 0
}

test_backend_without_port if {
	fs := findings_for({"destinations": [dest({"role": "backend", "kind": "HTTPRoute"})]})
	rules_of(fs) == [["routing/port-not-found", "error"]]
}

# ---------------------------------------------------------------------------
# routing/subset-not-found

test_subset_not_found_lists_the_known_ones if {
	fs := findings_for({"destinations": [dest({"subset": "v3", "subset_status": "not-found", "known_subsets": ["v1", "v2"]})]})
	rules_of(fs) == [["routing/subset-not-found", "error"]]
	some f in fs
	contains(f.message, "define v1, v2")
	count(findings_for({"destinations": [dest({"subset": "v1", "subset_status": "found"})]})) == 0
}

# ---------------------------------------------------------------------------
# routing/subset-selects-no-pod

dr_with(subset) := {"resource": "DestinationRule/shop/cart", "namespace": "shop", "host": "cart", "fqdn": "cart.shop.svc.cluster.local", "host_status": "found", "reason": "", "target": "Service/shop/cart", "subsets": [subset]}

test_subset_selecting_no_pod if {
	s := {"name": "v2", "path": ["spec", "subsets", 0, "labels"], "labels": {"version": "v2"}, "status": "none", "selects": [], "candidates": ["Deployment/shop/cart-v1"]}
	fs := findings_for({"destination_rules": [dr_with(s)]})
	rules_of(fs) == [["routing/subset-selects-no-pod", "error"]]
	some f in fs
	contains(f.message, "no healthy upstream")
	# Pods behind the host unknown: not claimed.
	count(findings_for({"destination_rules": [dr_with(object.union(s, {"status": "unknown"}))]})) == 0
}

# ---------------------------------------------------------------------------
# routing/gateway-not-found

gw_ref(extra) := object.union(
	{
		"resource": "VirtualService/shop/cart", "kind": "VirtualService", "namespace": "shop",
		"path": ["spec", "gateways", 0], "written": "public", "parent_kind": "Gateway",
		"parent_namespace": "shop", "parent_name": "public", "status": "found", "reason": "",
		"parent": "Gateway/shop/public", "elsewhere": [],
	},
	extra,
)

test_gateway_in_another_namespace_says_how_to_write_it if {
	fs := findings_for({"parents": [gw_ref({"status": "not-found", "parent": null, "elsewhere": ["Gateway/istio-system/public"]})]})
	rules_of(fs) == [["routing/gateway-not-found", "error"]]
	some f in fs
	contains(f.message, "write istio-system/public")
}

test_gateway_unknown_is_a_warning if {
	fs := findings_for({"parents": [gw_ref({"status": "unknown", "parent": null})]})
	rules_of(fs) == [["routing/gateway-not-found", "warning"]]
	count(findings_for({"parents": [gw_ref({})]})) == 0
}

test_gateway_api_parents_are_not_this_rule if {
	count(findings_for({"parents": [gw_ref({"kind": "HTTPRoute", "status": "not-found"})]})) == 0
}

# ---------------------------------------------------------------------------
# routing/conflicting-mesh-hosts

test_conflicting_mesh_hosts if {
	c := {"resource": "VirtualService/shop/a", "path": ["spec", "hosts", 0], "host": "cart.shop.svc.cluster.local", "scope": "*", "others": ["VirtualService/shop/b"]}
	fs := findings_for({"mesh_host_conflicts": [c]})
	rules_of(fs) == [["routing/conflicting-mesh-hosts", "error"]]
	some f in fs
	contains(f.message, "every namespace")
}

# ---------------------------------------------------------------------------
# routing/tls-conflicts-peer-authn

tls(problem, mode, server_mode) := {
	"resource": "DestinationRule/shop/cart", "path": ["spec", "trafficPolicy", "tls", "mode"], "host": "cart",
	"mode": mode, "port": null, "problem": problem, "server_mode": server_mode,
	"server_mode_source": "PeerAuthentication/shop/default", "workloads": ["Deployment/shop/cart"],
}

test_tls_conflicts_name_the_symptom_and_the_cause if {
	fs := findings_for({"tls_conflicts": [tls("plaintext-to-strict", "DISABLE", "STRICT")]})
	rules_of(fs) == [["routing/tls-conflicts-peer-authn", "error"]]
	some f in fs
	contains(f.message, "upstream connect error")
	contains(f.message, "refuses plaintext under STRICT mTLS (set by PeerAuthentication shop/default)")
	ms := findings_for({"tls_conflicts": [tls("mesh-tls-to-plaintext", "ISTIO_MUTUAL", "DISABLE")]})
	some m in ms
	contains(m.message, "PeerAuthentication mode DISABLE")
	os := findings_for({"tls_conflicts": [tls("own-tls-to-strict", "SIMPLE", "STRICT")]})
	some o in os
	contains(o.message, "certificates of its own")
}

test_no_traffic_model_no_findings if {
	fs := routing.findings with input as {"model": {}}
	count(fs) == 0
}

test_backend_of_invalid_kind_is_an_error if {
	fs := findings_for({"destinations": [dest({"status": "invalid-kind", "role": "backend", "kind": "HTTPRoute", "reason": "a backendRef of kind Bucket.example.com is not one Istio resolves"})]})
	rules_of(fs) == [["routing/host-not-found", "error"]]
	some f in fs
	contains(f.message, "InvalidKind")
}

test_tls_fix_toward_disable_does_not_ask_for_a_sidecar if {
	fs := findings_for({"tls_conflicts": [tls("mesh-tls-to-plaintext", "ISTIO_MUTUAL", "DISABLE")]})
	some f in fs
	contains(f.message, "PERMISSIVE or STRICT")
	not contains(f.message, "give them a sidecar")
}

test_subset_where_no_destination_rule_is_known_is_a_warning if {
	fs := findings_for({"destinations": [dest({"subset": "v1", "subset_status": "unknown"})]})
	rules_of(fs) == [["routing/subset-not-found", "warning"]]
	some f in fs
	contains(f.message, "could not check")
}
