package meshward.rules.ambient_test

import rego.v1

import data.meshward.rules.ambient

# ---------------------------------------------------------------------------
# builders

ns(name, labels, extra) := object.union(
	{
		"name": name, "declared": true, "resource": sprintf("Namespace/%s", [name]),
		"labels_known": true, "labels_from": "namespace",
		"labels_resource": sprintf("Namespace/%s", [name]), "labels_path": ["metadata", "labels"],
		"unknown_reason": null, "labels": labels,
		"injection": {"enabled": object.get(labels, "istio-injection", "") == "enabled", "via": null, "revision": null, "explicitly_disabled": false, "conflict": false},
		"ambient": object.get(labels, "istio.io/dataplane-mode", "") == "ambient",
		"mtls": {"mode": "PERMISSIVE", "source": null},
		"workloads": 1, "workloads_with_proxy": 0, "workloads_ambient": 1, "workloads_waypoint": 0, "workloads_proxy_unknown": 0,
	},
	extra,
)

ambient_ns(name) := ns(name, {"istio.io/dataplane-mode": "ambient"}, {})

workload(namespace, name, extra) := object.union(
	{
		"id": sprintf("Deployment/%s/%s", [namespace, name]), "kind": "Deployment", "namespace": namespace, "name": name,
		"labels": {"app": name}, "annotations": {}, "service_account": name, "replicas": 1,
		"proxy": false, "proxy_known": true, "proxy_reason": "", "proxy_via": null,
		"dataplane": "ambient", "dataplane_reason": "", "ambient": true, "dataplane_conflict": null,
		"waypoint": null, "service_waypoints": [],
		"opted_out": false, "host_network": false, "native_sidecar": false, "pending_rollout": false, "template_hash": "h",
	},
	extra,
)

res(api, kind, namespace, name, spec) := {
	"id": sprintf("%s/%s/%s", [kind, namespace, name]), "apiVersion": api, "kind": kind,
	"namespace": namespace, "name": name, "body": {"metadata": {"name": name, "namespace": namespace}, "spec": spec},
	"file": "x.yaml", "line": 1,
}

service(namespace, name) := res("v1", "Service", namespace, name, {"selector": {"app": name}, "ports": [{"port": 80}]})

vs(namespace, name, spec) := res("networking.istio.io/v1", "VirtualService", namespace, name, spec)

dr(namespace, name, spec) := res("networking.istio.io/v1", "DestinationRule", namespace, name, spec)

route(namespace, name, spec) := res("gateway.networking.k8s.io/v1", "HTTPRoute", namespace, name, spec)

sidecar(namespace, name, spec) := res("networking.istio.io/v1", "Sidecar", namespace, name, spec)

waypoint(namespace, name, extra) := object.union(
	{
		"id": sprintf("Gateway/%s/%s", [namespace, name]), "namespace": namespace, "name": name,
		"class": "istio-waypoint", "waypoint_class": true, "traffic": "service",
		"allowed_from": "Same", "allowed_selector": null,
		"principal": sprintf("cluster.local/ns/%s/sa/%s", [namespace, name]),
	},
	extra,
)

binding(resource, kind, namespace, extra) := object.union(
	{
		"resource": resource, "kind": kind, "namespace": namespace,
		"path": ["metadata", "labels", "istio.io/use-waypoint"],
		"binds": "service", "waypoint": "waypoint", "waypoint_namespace": namespace,
		"gateway": sprintf("Gateway/%s/waypoint", [namespace]),
		"waypoint_namespace_known": true, "problem": null, "detail": null,
	},
	extra,
)

served(namespace, name, extra) := object.union(
	{
		"resource": sprintf("Service/%s/%s", [namespace, name]), "kind": "Service", "namespace": namespace, "name": name,
		"waypoint": sprintf("Gateway/%s/waypoint", [namespace]), "ingress_use_waypoint": false,
		"selects": [sprintf("Deployment/%s/%s", [namespace, name])],
	},
	extra,
)

target_ref(resource, target_kind, target_name, state, wp) := {
	"resource": resource, "kind": split(resource, "/")[0], "path": ["spec", "targetRefs", 0],
	"target_kind": target_kind, "target_name": target_name, "state": state, "waypoint": wp,
}

# parts: an object of model fields and "resources".
mk_input(parts) := {
	"resources": object.get(parts, "resources", []),
	"by_kind": {k: [r | some r in object.get(parts, "resources", []); r.kind == k] | some k in {r.kind | some r in object.get(parts, "resources", [])}},
	"model": {
		"namespaces": object.get(parts, "namespaces", {}),
		"workloads": object.get(parts, "workloads", []),
		"workload_entries": [],
		"selectors": object.get(parts, "selectors", []),
		"peer_authentications": [],
		"service_accounts": {},
		"mtls_scopes": {},
		"waypoints": object.get(parts, "waypoints", []),
		"waypoint_bindings": object.get(parts, "bindings", []),
		"waypoint_services": object.get(parts, "served", []),
		"ztunnel_authz": [],
		"target_refs": object.get(parts, "target_refs", []),
	},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

rules_of(parts, rule) := {f | some f in ambient.findings with input as mk_input(parts); f.rule == rule}

# ---------------------------------------------------------------------------
# ambient/waypoint-not-found

missing := binding("Service/shop/cart", "Service", "shop", {
	"waypoint": "waypiont", "gateway": null, "problem": "not-found",
	"detail": "there is no Gateway waypiont in namespace shop",
})

test_not_found_is_an_error_when_the_namespace_is_known if {
	parts := {
		"bindings": [missing],
		"target_refs": [target_ref("AuthorizationPolicy/shop/cart-admin", "Service", "cart", "not-bound", null)],
	}
	fs := rules_of(parts, "ambient/waypoint-not-found")
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.resource == "Service/shop/cart"
	f.path == ["metadata", "labels", "istio.io/use-waypoint"]
	contains(f.message, "no Gateway waypiont in namespace shop")
	contains(f.message, "WaypointIsNotReady")
	contains(f.message, "AuthorizationPolicy shop/cart-admin")
	contains(f.message, "gatewayClassName: istio-waypoint")
}

test_not_found_is_a_warning_when_the_namespace_is_elsewhere if {
	b := object.union(missing, {"waypoint": "shared", "waypoint_namespace": "mesh-gw", "waypoint_namespace_known": false})
	some f in rules_of({"bindings": [b]}, "ambient/waypoint-not-found")
	f.severity == "warning"
	contains(f.message, "istio.io/use-waypoint-namespace: mesh-gw")
	contains(f.message, "holds nothing")
	contains(f.message, "may be deployed from elsewhere")
}

test_not_found_names_a_namespace_binding if {
	b := binding("Namespace/shop", "Namespace", "shop", {"binds": "both", "gateway": null, "problem": "not-found"})
	some f in rules_of({"bindings": [b]}, "ambient/waypoint-not-found")
	startswith(f.message, "namespace shop is labelled")
	contains(f.message, "traffic to the Services of namespace shop")
}

test_not_found_quiet_when_bound if {
	count(rules_of({"bindings": [binding("Service/shop/cart", "Service", "shop", {})]}, "ambient/waypoint-not-found")) == 0
}

# ---------------------------------------------------------------------------
# ambient/waypoint-traffic-type

test_traffic_type_service_on_a_workload_waypoint if {
	b := binding("Service/shop/cart", "Service", "shop", {"problem": "traffic-type"})
	parts := {"bindings": [b], "waypoints": [waypoint("shop", "waypoint", {"traffic": "workload"})]}
	fs := rules_of(parts, "ambient/waypoint-traffic-type")
	count(fs) == 1
	some f in fs
	f.severity == "error"
	contains(f.message, "handles only workload traffic")
	contains(f.message, "a Service needs one for service traffic")
	contains(f.message, "UnsupportedTrafficType; istio.io/WaypointBound False")
	contains(f.message, "istio.io/waypoint-for: all (or service)")
}

test_traffic_type_pod_on_a_service_waypoint if {
	b := binding("Deployment/shop/cart", "Deployment", "shop", {"binds": "workload", "problem": "traffic-type", "path": ["spec", "template", "metadata", "labels", "istio.io/use-waypoint"]})
	some f in rules_of({"bindings": [b], "waypoints": [waypoint("shop", "waypoint", {})]}, "ambient/waypoint-traffic-type")
	contains(f.message, "traffic addressed to its pods")
	contains(f.message, "istio.io/waypoint-for: all (or workload)")
	not contains(f.message, "WaypointBound")
}

test_traffic_type_namespace_on_a_none_waypoint if {
	b := binding("Namespace/shop", "Namespace", "shop", {"binds": "both", "problem": "traffic-type"})
	some f in rules_of({"bindings": [b], "waypoints": [waypoint("shop", "waypoint", {"traffic": "none"})]}, "ambient/waypoint-traffic-type")
	contains(f.message, "handles only none traffic")
}

# ---------------------------------------------------------------------------
# ambient/waypoint-cross-namespace

shared := waypoint("mesh-gw", "shared", {})

cross := binding("Service/shop/cart", "Service", "shop", {"waypoint": "shared", "waypoint_namespace": "mesh-gw", "gateway": shared.id, "problem": "cross-namespace"})

test_cross_namespace_same_is_an_error if {
	some f in rules_of({"bindings": [cross], "waypoints": [shared], "namespaces": {"shop": ambient_ns("shop")}}, "ambient/waypoint-cross-namespace")
	f.severity == "error"
	contains(f.message, "admits only its own namespace (allowedRoutes.namespaces.from: Same)")
	contains(f.message, "AttachmentDenied")
	contains(f.message, "kubernetes.io/metadata.name: shop")
}

test_cross_namespace_selector_on_unknown_labels_is_a_warning if {
	g := object.union(shared, {"allowed_from": "Selector", "allowed_selector": {"mesh": "on"}})
	n := object.union(ambient_ns("shop"), {"labels_known": false, "labels": {}})
	some f in rules_of({"bindings": [cross], "waypoints": [g], "namespaces": {"shop": n}}, "ambient/waypoint-cross-namespace")
	f.severity == "warning"
	contains(f.message, "cannot tell whether namespace shop is admitted")
}

# A selector on kubernetes.io/metadata.name is decided whatever else is known.
test_cross_namespace_selector_on_the_name_is_an_error if {
	g := object.union(shared, {"allowed_from": "Selector", "allowed_selector": {"kubernetes.io/metadata.name": "payments"}})
	n := object.union(ambient_ns("shop"), {"labels_known": false, "labels": {}})
	some f in rules_of({"bindings": [cross], "waypoints": [g], "namespaces": {"shop": n}}, "ambient/waypoint-cross-namespace")
	f.severity == "error"
	contains(f.message, "only the namespaces its selector matches")
}

test_cross_namespace_quiet_when_bound if {
	b := object.union(cross, {"problem": null})
	count(rules_of({"bindings": [b], "waypoints": [shared]}, "ambient/waypoint-cross-namespace")) == 0
}

# ---------------------------------------------------------------------------
# ambient/sidecar-ignored

egress := sidecar("shop", "default", {"egress": [{"hosts": ["./*", "istio-system/*"]}]})

test_sidecar_without_selector_in_an_ambient_namespace if {
	parts := {"namespaces": {"shop": ambient_ns("shop")}, "workloads": [workload("shop", "cart", {})], "resources": [egress]}
	fs := rules_of(parts, "ambient/sidecar-ignored")
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.istio_code == "IST0167"
	contains(f.message, "shop is an ambient namespace")
	contains(f.message, "applies nowhere")
}

# istioctl's namespace test: istio-injection=enabled or istio.io/rev make it a sidecar namespace.
test_sidecar_quiet_in_a_namespace_that_injects if {
	n := ns("shop", {"istio.io/dataplane-mode": "ambient", "istio-injection": "enabled"}, {})
	count(rules_of({"namespaces": {"shop": n}, "resources": [egress]}, "ambient/sidecar-ignored")) == 0
	r := ns("shop", {"istio.io/dataplane-mode": "ambient", "istio.io/rev": "1-27"}, {})
	count(rules_of({"namespaces": {"shop": r}, "resources": [egress]}, "ambient/sidecar-ignored")) == 0
}

# A pod that opted in to a sidecar in the ambient namespace is configured by it.
test_sidecar_quiet_while_a_sidecar_runs_in_the_namespace if {
	w := workload("shop", "legacy", {"proxy": true, "ambient": false, "dataplane": "sidecar"})
	count(rules_of({"namespaces": {"shop": ambient_ns("shop")}, "workloads": [w], "resources": [egress]}, "ambient/sidecar-ignored")) == 0
}

test_sidecar_quiet_in_the_root_namespace if {
	s := sidecar("istio-system", "default", {})
	count(rules_of({"namespaces": {"istio-system": ambient_ns("istio-system")}, "resources": [s]}, "ambient/sidecar-ignored")) == 0
}

sidecar_selector(extra) := object.union(
	{
		"resource": "Sidecar/shop/cart", "kind": "Sidecar", "namespace": "shop",
		"path": ["spec", "workloadSelector", "labels"], "scope": "workload", "labels": {"app": "cart"},
		"counts": "injected_workloads", "matches": [], "match_count": 0, "unknown_matches": [],
		"spec_only_matches": [], "workload_entry_matches": 0, "ambient_matches": ["Deployment/shop/cart"],
		"invalid": [], "workload_groups": [],
	},
	extra,
)

test_sidecar_selecting_ambient_workloads_only if {
	some f in rules_of({"selectors": [sidecar_selector({})]}, "ambient/sidecar-ignored")
	f.path == ["spec", "workloadSelector", "labels"]
	contains(f.message, "selects only one workload (Deployment shop/cart), and it is ambient")
}

test_sidecar_selecting_a_sidecar_workload_quiet if {
	s := sidecar_selector({"match_count": 1, "matches": ["Deployment/shop/legacy"]})
	count(rules_of({"selectors": [s]}, "ambient/sidecar-ignored")) == 0
}

# ---------------------------------------------------------------------------
# ambient/sidecar-and-ambient

test_pod_labelled_ambient_in_an_injected_namespace if {
	w := workload("shop", "cart", {
		"labels": {"app": "cart", "istio.io/dataplane-mode": "ambient"},
		"proxy": true, "ambient": false, "dataplane": "sidecar", "proxy_via": "namespace-label",
		"dataplane_conflict": "its pods are labelled istio.io/dataplane-mode=ambient, but they get a sidecar (namespace shop has istio-injection=enabled), and the sidecar wins: ztunnel skips them",
	})
	fs := rules_of({"workloads": [w]}, "ambient/sidecar-and-ambient")
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.path == ["spec", "template", "metadata", "labels", "istio.io/dataplane-mode"]
	contains(f.message, "the sidecar wins")
	contains(f.message, "sidecar.istio.io/inject: \"false\"")
}

test_pod_opting_in_to_a_sidecar_in_an_ambient_namespace if {
	w := workload("shop", "cart", {
		"labels": {"app": "cart", "sidecar.istio.io/inject": "true"},
		"proxy": true, "ambient": false, "dataplane": "sidecar", "proxy_via": "pod-opt-in",
		"dataplane_conflict": "namespace shop is ambient (istio.io/dataplane-mode=ambient), but the pod opts in with sidecar.istio.io/inject: \"true\", and the sidecar wins: ztunnel skips them",
	})
	some f in rules_of({"workloads": [w]}, "ambient/sidecar-and-ambient")
	f.path == ["spec", "template", "metadata", "labels", "sidecar.istio.io/inject"]
	contains(f.message, "istio.io/dataplane-mode: none")
}

test_pod_revision_in_an_ambient_namespace_points_at_the_revision if {
	w := workload("shop", "cart", {
		"labels": {"app": "cart", "istio.io/rev": "1-27"},
		"proxy": true, "ambient": false, "proxy_via": "pod-revision", "dataplane_conflict": "namespace shop is ambient …",
	})
	some f in rules_of({"workloads": [w]}, "ambient/sidecar-and-ambient")
	f.path == ["spec", "template", "metadata", "labels", "istio.io/rev"]
}

# Both on the namespace is injection/conflicting-labels (IST0123); none on the pod is a decision.
test_sidecar_and_ambient_quiet_for_namespace_conflicts_and_explicit_none if {
	by_ns := workload("shop", "cart", {"proxy": true, "ambient": false, "proxy_via": "namespace-label", "dataplane_conflict": "namespace shop is ambient …"})
	count(rules_of({"workloads": [by_ns]}, "ambient/sidecar-and-ambient")) == 0
	none := workload("shop", "legacy", {
		"labels": {"app": "legacy", "sidecar.istio.io/inject": "true", "istio.io/dataplane-mode": "none"},
		"proxy": true, "ambient": false, "proxy_via": "pod-opt-in", "dataplane_conflict": "namespace shop is ambient …",
	})
	count(rules_of({"workloads": [none]}, "ambient/sidecar-and-ambient")) == 0
}

# ---------------------------------------------------------------------------
# ambient/route-not-at-waypoint

routed := {
	"served": [served("shop", "reviews", {})],
	"waypoints": [waypoint("shop", "waypoint", {})],
	"namespaces": {"shop": ambient_ns("shop"), "web": ambient_ns("web")},
}

with_resources(parts, rs) := object.union(parts, {"resources": rs})

test_destination_rule_in_a_client_namespace if {
	d := dr("web", "reviews", {"host": "reviews.shop.svc.cluster.local", "subsets": [{"name": "v2", "labels": {"version": "v2"}}]})
	fs := rules_of(with_resources(routed, [d]), "ambient/route-not-at-waypoint")
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.path == ["spec", "host"]
	contains(f.message, "waypoint Gateway shop/waypoint")
	contains(f.message, "in namespace web")
	contains(f.message, "sidecar clients, which skip the waypoint, still apply it")
	contains(f.message, "Move it to namespace shop")
}

test_destination_rule_read_by_the_waypoint_quiet if {
	in_service := dr("shop", "reviews", {"host": "reviews", "subsets": [{"name": "v2", "labels": {"version": "v2"}}]})
	in_root := dr("istio-system", "reviews", {"host": "reviews.shop.svc.cluster.local"})
	count(rules_of(with_resources(routed, [in_service, in_root]), "ambient/route-not-at-waypoint")) == 0
}

# A waypoint in another namespace reads the service's DestinationRules only when exported to it.
test_destination_rule_not_exported_to_the_waypoint if {
	parts := object.union(routed, {
		"served": [served("shop", "reviews", {"waypoint": "Gateway/mesh-gw/shared"})],
		"waypoints": [waypoint("mesh-gw", "shared", {"allowed_from": "All"})],
	})
	private := dr("shop", "reviews", {"host": "reviews", "exportTo": ["."]})
	some f in rules_of(with_resources(parts, [private]), "ambient/route-not-at-waypoint")
	contains(f.message, "with exportTo")
	contains(f.message, "(exported to namespace mesh-gw)")
	open := dr("shop", "reviews", {"host": "reviews", "exportTo": [".", "mesh-gw"]})
	count(rules_of(with_resources(parts, [open]), "ambient/route-not-at-waypoint")) == 0
}

test_virtual_service_in_a_client_namespace if {
	v := vs("web", "reviews", {"hosts": ["reviews.shop.svc.cluster.local"], "http": [{"route": [{"destination": {"host": "reviews.shop.svc.cluster.local", "subset": "v2"}}]}]})
	some f in rules_of(with_resources(routed, [v]), "ambient/route-not-at-waypoint")
	f.path == ["spec", "hosts", 0]
	contains(f.message, "splits, subsets")
}

# Gateway-only VirtualServices are the gateway's; a dotted short host names no Service.
test_virtual_service_quiet_cases if {
	in_service := vs("shop", "reviews", {"hosts": ["reviews"]})
	ingress := vs("web", "reviews-ingress", {"hosts": ["reviews.example.com", "reviews.shop.svc.cluster.local"], "gateways": ["istio-system/public"]})
	dotted := vs("web", "reviews-dotted", {"hosts": ["reviews.shop"]})
	count(rules_of(with_resources(routed, [in_service, ingress, dotted]), "ambient/route-not-at-waypoint")) == 0
}

# ---------------------------------------------------------------------------
# ambient/route-without-waypoint

unserved := {"namespaces": {"shop": ambient_ns("shop")}}

# A Service defined twice (a duplicate, reported as such) does not stop the rules.
test_a_duplicate_service_does_not_stop_the_rules if {
	v := vs("shop", "ratings", {"hosts": ["ratings"], "http": [{"timeout": "2s", "route": [{"destination": {"host": "ratings"}}]}]})
	again := object.union(service("shop", "ratings"), {"line": 20})
	fs := rules_of(with_resources(unserved, [service("shop", "ratings"), again, v]), "ambient/route-without-waypoint")
	count(fs) == 1
}

test_virtual_service_for_a_service_without_waypoint if {
	v := vs("shop", "ratings", {"hosts": ["ratings"], "http": [{"timeout": "2s", "route": [{"destination": {"host": "ratings"}}]}]})
	fs := rules_of(with_resources(unserved, [service("shop", "ratings"), v]), "ambient/route-without-waypoint")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "hosts", 0]
	contains(f.message, "no waypoint serves that Service")
	contains(f.message, "1 ambient workload")
	contains(f.message, "reads no VirtualService")
	contains(f.message, "istio.io/use-waypoint")
}

test_destination_rule_for_a_service_without_waypoint if {
	d := dr("shop", "ratings", {"host": "ratings", "trafficPolicy": {"connectionPool": {"tcp": {"maxConnections": 10}}}})
	some f in rules_of(with_resources(unserved, [service("shop", "ratings"), d]), "ambient/route-without-waypoint")
	contains(f.message, "reads no DestinationRule")
}

# A DestinationRule for a Service ingress reaches serves the gateway.
test_destination_rule_serving_ingress_quiet if {
	d := dr("shop", "ratings", {"host": "ratings"})
	ingress := vs("shop", "ratings-public", {"hosts": ["ratings.example.com"], "gateways": ["istio-system/public"], "http": [{"route": [{"destination": {"host": "ratings"}}]}]})
	count(rules_of(with_resources(unserved, [service("shop", "ratings"), d, ingress]), "ambient/route-without-waypoint")) == 0
}

test_http_route_on_a_service_without_waypoint if {
	r := route("shop", "ratings", {"parentRefs": [{"group": "", "kind": "Service", "name": "ratings", "port": 80}], "rules": [{"backendRefs": [{"name": "ratings", "port": 80}]}]})
	some f in rules_of(with_resources(unserved, [service("shop", "ratings"), r]), "ambient/route-without-waypoint")
	f.path == ["spec", "parentRefs", 0]
	contains(f.message, "MissingUseWaypointLabel")
}

test_route_without_waypoint_quiet_cases if {
	v := vs("shop", "ratings", {"hosts": ["ratings"]})
	# served by a waypoint
	parts := object.union(unserved, {"served": [served("shop", "ratings", {})]})
	count(rules_of(with_resources(parts, [service("shop", "ratings"), v]), "ambient/route-without-waypoint")) == 0
	# a sidecar namespace
	sidecars := {"namespaces": {"shop": ns("shop", {"istio-injection": "enabled"}, {"workloads_ambient": 0})}}
	count(rules_of(with_resources(sidecars, [service("shop", "ratings"), v]), "ambient/route-without-waypoint")) == 0
	# an ambient namespace whose labels the injection label overrides
	both := {"namespaces": {"shop": ns("shop", {"istio-injection": "enabled", "istio.io/dataplane-mode": "ambient"}, {})}}
	count(rules_of(with_resources(both, [service("shop", "ratings"), v]), "ambient/route-without-waypoint")) == 0
	# no such Service
	count(rules_of(with_resources(unserved, [v]), "ambient/route-without-waypoint")) == 0
}

# ---------------------------------------------------------------------------
# ambient/ingress-skips-waypoint

guarded := {
	"served": [served("shop", "cart", {})],
	"waypoints": [waypoint("shop", "waypoint", {}), waypoint("istio-ingress", "public", {"class": "istio", "waypoint_class": false})],
	"target_refs": [target_ref("AuthorizationPolicy/shop/cart-admin", "Service", "cart", "bound", "Gateway/shop/waypoint")],
}

public_vs := vs("shop", "cart-public", {"hosts": ["shop.example.com"], "gateways": ["istio-ingress/public"], "http": [{"route": [{"destination": {"host": "cart.shop.svc.cluster.local", "port": {"number": 80}}}]}]})

test_ingress_virtual_service_skips_the_waypoint if {
	fs := rules_of(with_resources(guarded, [service("shop", "cart"), public_vs]), "ambient/ingress-skips-waypoint")
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.resource == "Service/shop/cart"
	f.path == ["metadata", "labels"]
	f.subjects == ["AuthorizationPolicy/shop/cart-admin"]
	contains(f.message, "VirtualService shop/cart-public via gateway istio-ingress/public")
	contains(f.message, "AuthorizationPolicy shop/cart-admin applies")
	contains(f.message, "istio.io/ingress-use-waypoint: \"true\"")
}

test_ingress_http_route_skips_the_waypoint if {
	r := route("shop", "cart-public", {"parentRefs": [{"name": "public", "namespace": "istio-ingress"}], "rules": [{"backendRefs": [{"name": "cart", "port": 80}]}]})
	parts := object.union(guarded, {"target_refs": [target_ref("AuthorizationPolicy/shop/waypoint-deny", "Gateway", "waypoint", "bound", "Gateway/shop/waypoint")]})
	some f in rules_of(with_resources(parts, [service("shop", "cart"), r]), "ambient/ingress-skips-waypoint")
	contains(f.message, "HTTPRoute shop/cart-public via gateway istio-ingress/public")
	contains(f.message, "AuthorizationPolicy shop/waypoint-deny")
}

test_ingress_skips_waypoint_quiet_cases if {
	rs := [service("shop", "cart"), public_vs]
	# ingress uses the waypoint
	labelled := object.union(guarded, {"served": [served("shop", "cart", {"ingress_use_waypoint": true})]})
	count(rules_of(with_resources(labelled, rs), "ambient/ingress-skips-waypoint")) == 0
	# nothing bound at the waypoint
	bare := object.union(guarded, {"target_refs": []})
	count(rules_of(with_resources(bare, rs), "ambient/ingress-skips-waypoint")) == 0
	# a mesh VirtualService is not ingress; a route whose parent is the waypoint neither
	mesh := vs("shop", "cart", {"hosts": ["cart"], "http": [{"route": [{"destination": {"host": "cart"}}]}]})
	at_waypoint := route("shop", "cart-w", {"parentRefs": [{"name": "waypoint"}], "rules": [{"backendRefs": [{"name": "cart", "port": 80}]}]})
	count(rules_of(with_resources(guarded, [service("shop", "cart"), mesh, at_waypoint]), "ambient/ingress-skips-waypoint")) == 0
}

test_ingress_headless_service_is_said if {
	headless := res("v1", "Service", "shop", "cart", {"clusterIP": "None", "selector": {"app": "cart"}})
	some f in rules_of(with_resources(guarded, [headless, public_vs]), "ambient/ingress-skips-waypoint")
	contains(f.message, "headless")
}

# ---------------------------------------------------------------------------
# robustness: manifests are hostile input

test_hostile_shapes_do_not_error if {
	rs := [
		vs("shop", "a", {"hosts": "cart", "gateways": "mesh", "http": "x"}),
		vs("shop", "b", {"hosts": [7, null], "gateways": [1], "http": [{"route": [{"destination": "x"}, 3]}]}),
		dr("shop", "c", {"host": ["cart"], "exportTo": "."}),
		dr("shop", "d", {"host": 5, "workloadSelector": "x"}),
		route("shop", "e", {"parentRefs": "x", "rules": [{"backendRefs": "y"}]}),
		route("shop", "f", {"parentRefs": [7, {"kind": "Service", "group": ""}], "rules": [{"backendRefs": [1, {"name": 2}]}]}),
		sidecar("shop", "g", {"workloadSelector": {"labels": "x"}}),
		res("networking.istio.io/v1", "Sidecar", "shop", "h", "x"),
		service("shop", "cart"),
	]
	parts := object.union(guarded, {"resources": rs, "namespaces": {"shop": ambient_ns("shop")}})
	fs := ambient.findings with input as mk_input(parts)
	every f in fs {
		is_string(f.message)
	}
}
