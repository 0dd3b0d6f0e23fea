package meshward.rules.gateway_test

import rego.v1

import data.meshward.rules.gateway

findings_for(t) := fs if {
	fs := gateway.findings with input as {"model": {"traffic": t}}
}

rules_of(fs) := [[f.rule, f.severity] | some f in fs]

gw(extra) := object.union(
	{
		"resource": "Gateway/istio-ingress/public", "namespace": "istio-ingress",
		"selector": {"istio": "ingressgateway"}, "selector_path": ["spec", "selector"],
		"pods": ["Deployment/istio-ingress/ingressgateway"], "service_ports": [80, 8080],
		"services": ["Service/istio-ingress/ingressgateway"],
		"servers": [{"port": 80, "path": ["spec", "servers", 0, "port", "number"], "hosts": ["shop.example.com"]}],
	},
	extra,
)

# ---------------------------------------------------------------------------
# gateway/selector-matches-nothing

test_selector_without_pods_is_an_error_when_gateway_pods_are_known if {
	fs := findings_for({"gateway_pods_known": true, "gateways": [gw({"pods": [], "service_ports": null})]})
	rules_of(fs) == [["gateway/selector-matches-nothing", "error"]]
}

test_selector_without_pods_is_info_when_no_gateway_is_in_the_repository if {
	fs := findings_for({"gateway_pods_known": false, "gateways": [gw({"pods": [], "service_ports": null})]})
	rules_of(fs) == [["gateway/selector-matches-nothing", "info"]]
	some f in fs
	contains(f.message, "could not check")
}

test_empty_selector_picks_every_pod if {
	# object.union merges objects, so the selector is replaced by hand.
	g := object.union(object.remove(gw({"pods": []}), ["selector"]), {"selector": {}})
	count(findings_for({"gateway_pods_known": true, "gateways": [g]})) == 0
}

# ---------------------------------------------------------------------------
# gateway/port-not-on-service

test_server_port_not_on_the_service if {
	fs := findings_for({"gateway_pods_known": true, "gateways": [gw({"servers": [{"port": 443, "path": ["spec", "servers", 0, "port", "number"], "hosts": ["*"]}]})]})
	rules_of(fs) == [["gateway/port-not-on-service", "warning"]]
	some f in fs
	contains(f.message, "exposes 80, 8080 only")
	# No Service of the repository in front of the pods: not claimed.
	count(findings_for({"gateway_pods_known": true, "gateways": [gw({"service_ports": null, "servers": [{"port": 443, "path": [], "hosts": []}]})]})) == 0
}

test_server_port_on_the_service_is_quiet if {
	count(findings_for({"gateway_pods_known": true, "gateways": [gw({})]})) == 0
}

# ---------------------------------------------------------------------------
# gateway/conflicting

test_conflicting_gateways if {
	c := {"resource": "Gateway/istio-ingress/a", "path": ["spec", "servers", 0, "port", "number"], "port": 443, "host": "shop.example.com", "protocol": "HTTPS", "others": ["Gateway/istio-ingress/b"]}
	fs := findings_for({"gateway_conflicts": [c]})
	rules_of(fs) == [["gateway/conflicting", "error"]]
	some f in fs
	contains(f.message, "terminate TLS for host shop.example.com")
	ps := findings_for({"gateway_conflicts": [object.union(c, {"host": "", "protocol": "TCP"})]})
	some p in ps
	contains(p.message, "this one is TCP")
}

# ---------------------------------------------------------------------------
# gateway/parent-not-found, gateway/route-not-allowed

parent(extra) := object.union(
	{
		"resource": "HTTPRoute/shop/cart", "kind": "HTTPRoute", "namespace": "shop",
		"path": ["spec", "parentRefs", 0], "written": "infra/web", "parent_kind": "Gateway",
		"parent_namespace": "infra", "parent_name": "web", "status": "found", "reason": "",
		"parent": "Gateway/infra/web", "elsewhere": [],
	},
	extra,
)

test_parent_not_found if {
	rules_of(findings_for({"parents": [parent({"status": "not-found", "parent": null})]})) == [["gateway/parent-not-found", "error"]]
	rules_of(findings_for({"parents": [parent({"status": "unknown", "reason": "the repository does not declare namespace infra"})]})) == [["gateway/parent-not-found", "warning"]]
	count(findings_for({"parents": [parent({})]})) == 0
}

test_route_not_allowed_says_the_reason if {
	fs := findings_for({"parents": [parent({"status": "not-allowed", "reason": "NotAllowedByListeners: no listener admits routes from namespace shop"})]})
	rules_of(fs) == [["gateway/route-not-allowed", "error"]]
	some f in fs
	contains(f.message, "NotAllowedByListeners")
}

test_route_allowed_by_unknown_namespace_labels_is_a_warning if {
	fs := findings_for({"parents": [parent({"status": "unknown", "reason": "listener http admits namespaces by label, and the labels of namespace shop are unknown"})]})
	rules_of(fs) == [["gateway/route-not-allowed", "warning"]]
}

test_virtual_service_gateways_are_not_this_rule if {
	count(findings_for({"parents": [parent({"kind": "VirtualService", "status": "not-found"})]})) == 0
}

# ---------------------------------------------------------------------------
# gateway/backend-not-permitted

backend(grant) := {
	"resource": "HTTPRoute/infra/cart", "kind": "HTTPRoute", "namespace": "infra", "role": "backend",
	"path": ["spec", "rules", 0, "backendRefs", 0, "name"], "host": "cart",
	"fqdn": "cart.shop.svc.cluster.local", "status": "found", "reference_grant": grant,
}

test_backend_without_grant if {
	fs := findings_for({"destinations": [backend("missing")]})
	rules_of(fs) == [["gateway/backend-not-permitted", "error"]]
	some f in fs
	contains(f.message, "Add a ReferenceGrant in shop from HTTPRoute infra")
	rules_of(findings_for({"destinations": [backend("unknown")]})) == [["gateway/backend-not-permitted", "warning"]]
	count(findings_for({"destinations": [backend("granted")]})) == 0
	count(findings_for({"destinations": [backend("")]})) == 0
}
