# Ambient mode: waypoint bindings istiod refuses, and config the ambient data plane
# (ztunnel, waypoints) never reads. The model resolves what istiod resolves
# (model.waypoints, waypoint_bindings, waypoint_services, target_refs; see
# docs/policy-input.md); this file says what that means for the traffic.
package meshward.rules.ambient

import rego.v1

# ---------------------------------------------------------------------------
# model parts and indexes

waypoints := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoints", []))

bindings := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoint_bindings", []))

waypoint_services := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoint_services", []))

target_refs := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "target_refs", []))

waypoint_by_id := {w.id: w | some w in waypoints}

# Services and ServiceEntries a waypoint serves, by resource id.
served := {s.resource: s | some s in waypoint_services}

service_list := [r |
	some r in data.meshward.lib.resources("Service")
	r.apiVersion == "v1"
]

# The ids of the tree's Kubernetes Services (a set: an id defined twice, a duplicate
# reported as such, must not stop the rules here).
services := {r.id | some r in service_list}

# The first Service with this id.
service_of(sid) := [r | some r in service_list; r.id == sid][0]

istio_resources(kind) := [r |
	some r in data.meshward.lib.resources(kind)
	is_string(r.apiVersion)
	startswith(r.apiVersion, "networking.istio.io/")
]

gateway_api_resources(kind) := [r |
	some r in data.meshward.lib.resources(kind)
	is_string(r.apiVersion)
	startswith(r.apiVersion, "gateway.networking.k8s.io/")
]

# The namespace and name of an id ("Kind/ns/name").
id_namespace(id) := split(id, "/")[1]

id_name(id) := split(id, "/")[2]

# istiod's DNS domain; meshward assumes the default, as istioctl does.
cluster_domain := "cluster.local"

# The Service id a host names, seen from namespace ns, as istiod resolves it
# (pilot/pkg/model/config.go ResolveShortnameToFQDN): a short name gets the
# namespace and the domain; any dotted name is taken as written, so only the full
# `name.ns.svc.cluster.local` names a Service (`name.ns` does not: istiod does not
# expand it).
service_of_host(host, ns) := sprintf("Service/%s/%s", [ns, host]) if {
	is_string(host)
	host != ""
	not contains(host, ".")
	not contains(host, "*")
} else := sprintf("Service/%s/%s", [parts[1], parts[0]]) if {
	is_string(host)
	parts := split(host, ".")
	count(parts) == 5
	parts[2] == "svc"
	concat(".", [parts[3], parts[4]]) == cluster_domain
}

# Hosts of the ServiceEntries a waypoint serves: the host string names the entry.
served_entries_of_host[h] contains s.resource if {
	some s in waypoint_services
	s.kind == "ServiceEntry"
	some r in istio_resources("ServiceEntry")
	r.id == s.resource
	some h in data.meshward.lib.array_of(data.meshward.lib.get(data.meshward.lib.spec_of(r), "hosts", []))
	is_string(h)
	not contains(h, "*")
}

# The waypoint-served Service or ServiceEntry a host names, from namespace ns (of
# two ServiceEntries with one host, the first by id).
served_of_host(host, ns) := served[id] if {
	id := service_of_host(host, ns)
} else := served[min(served_entries_of_host[host])]

# Namespaces whose pods ztunnel captures, by istioctl's test (an/util/in_mesh.go):
# istio.io/dataplane-mode=ambient, no istio-injection=enabled, no non-empty istio.io/rev.
ambient_namespace(ns) if {
	n := data.meshward.lib.model_namespaces[ns]
	n.ambient == true
	labels := data.meshward.lib.get(n, "labels", {})
	data.meshward.lib.get(labels, "istio-injection", "") != "enabled"
	data.meshward.lib.get(labels, "istio.io/rev", "") in {"", null}
}

# An ambient namespace with workloads ztunnel captures: their calls are ambient clients.
ambient_clients_in(ns) := k if {
	ambient_namespace(ns)
	k := data.meshward.lib.num(object.get(data.meshward.lib.model_namespaces[ns], "workloads_ambient", 0))
	k > 0
}

# A VirtualService for mesh traffic (no gateways, or `mesh` among them).
mesh_bound(r) if count(spec_list(r, "gateways")) == 0

mesh_bound(r) if "mesh" in spec_list(r, "gateways")

# A list field of a resource's spec ([] when absent or not a list).
spec_list(r, key) := data.meshward.lib.array_of(data.meshward.lib.get(data.meshward.lib.spec_of(r), key, []))

gateway_names(r) := [g |
	some g in spec_list(r, "gateways")
	is_string(g)
	g != "mesh"
]

# The hosts a VirtualService routes to (http, tcp, tls routes; mirrors are copies).
route_hosts(r) := {h |
	spec := data.meshward.lib.spec_of(r)
	some section in ["http", "tcp", "tls"]
	some rule in data.meshward.lib.array_of(data.meshward.lib.get(spec, section, []))
	some d in data.meshward.lib.array_of(data.meshward.lib.get(rule, "route", []))
	h := data.meshward.lib.get(data.meshward.lib.get(d, "destination", {}), "host", null)
	is_string(h)
}

# Subsets a VirtualService's routes name, by host.
route_subsets(r) := {[h, s] |
	spec := data.meshward.lib.spec_of(r)
	some rule in data.meshward.lib.array_of(data.meshward.lib.get(spec, "http", []))
	some d in data.meshward.lib.array_of(data.meshward.lib.get(rule, "route", []))
	dest := data.meshward.lib.get(d, "destination", {})
	h := data.meshward.lib.get(dest, "host", null)
	s := data.meshward.lib.get(dest, "subset", null)
	is_string(h)
	is_string(s)
}

# A Gateway API parentRef names a Gateway (the default kind and group).
gateway_parent(p) if {
	data.meshward.lib.get(p, "kind", "Gateway") == "Gateway"
	data.meshward.lib.get(p, "group", "gateway.networking.k8s.io") == "gateway.networking.k8s.io"
}

# A parentRef to a core Service (a mesh route, used by the Service's waypoint).
service_parent(p) if {
	data.meshward.lib.get(p, "kind", "") == "Service"
	data.meshward.lib.get(p, "group", null) == ""
}

# The waypoint Gateway a parentRef names, if it is one.
parent_is_waypoint(p, ns) if {
	some w in waypoints
	w.waypoint_class == true
	w.namespace == data.meshward.lib.get(p, "namespace", ns)
	w.name == data.meshward.lib.get(p, "name", "")
}

route_kinds := ["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"]

# Service ids a Gateway API route sends to.
backend_services(r) := {sprintf("Service/%s/%s", [data.meshward.lib.get(b, "namespace", r.namespace), name]) |
	some rule in spec_list(r, "rules")
	some b in data.meshward.lib.array_of(data.meshward.lib.get(rule, "backendRefs", []))
	data.meshward.lib.get(b, "kind", "Service") == "Service"
	data.meshward.lib.get(b, "group", "") == ""
	name := data.meshward.lib.get(b, "name", null)
	is_string(name)
}

# Ingress routes into a Service: [route id, how the gateway is named], for
# VirtualServices bound to a gateway other than `mesh` and Gateway API routes whose
# parent is a Gateway that is not a waypoint.
# (Comprehensions rather than partial rules: they are defined, as empty, when nothing
# matches.)
ingress_triples := {[sid, r.id, concat(", ", gws)] |
	some r in istio_resources("VirtualService")
	gws := gateway_names(r)
	count(gws) > 0
	some h in route_hosts(r)
	sid := service_of_host(h, r.namespace)
} | {[sid, r.id, gw] |
	some kind in route_kinds
	some r in gateway_api_resources(kind)
	some p in spec_list(r, "parentRefs")
	is_object(p)
	gateway_parent(p)
	not parent_is_waypoint(p, r.namespace)
	gw := sprintf("%s/%s", [data.meshward.lib.get(p, "namespace", r.namespace), data.meshward.lib.get(p, "name", "")])
	some sid in backend_services(r)
}

ingress_routes(sid) := {[t[1], t[2]] | some t in ingress_triples; t[0] == sid}

# ---------------------------------------------------------------------------
# text

# What a binding's label sits on.
bound_text(b) := sprintf("namespace %s", [b.namespace]) if b.kind == "Namespace" else := data.meshward.lib.display(b.resource)

# The traffic a binding sends through the waypoint.
traffic_text(b) := sprintf("traffic to the Services of namespace %s", [b.namespace]) if {
	b.kind == "Namespace"
} else := "traffic addressed to its pods" if {
	b.binds == "workload"
} else := "traffic addressed to it"

waypoint_text(b) := sprintf("%s/%s", [b.waypoint_namespace, b.waypoint])

# The namespace hint: only when the label names another namespace.
namespace_label_text(b) := sprintf(" (istio.io/use-waypoint-namespace: %s)", [b.waypoint_namespace]) if {
	b.waypoint_namespace != b.namespace
} else := ""

# targetRef policies that would have applied at the waypoint: on the bound Service or
# ServiceEntry, or, for a namespace, on any of its Services, and left unbound.
stranded(b) := {t.resource |
	some t in target_refs
	t.state == "not-bound"
	id_namespace(t.resource) == b.namespace
	stranded_target(t, b)
}

stranded_target(t, b) if {
	t.target_kind == b.kind
	t.target_name == id_name(b.resource)
}

stranded_target(t, b) if {
	b.kind == "Namespace"
	t.target_kind in {"Service", "ServiceEntry"}
}

stranded_text(b) := sprintf(" (here: %s)", [data.meshward.lib.enumerate_ids(ids, 3)]) if {
	ids := stranded(b)
	count(ids) > 0
} else := ""

# ---------------------------------------------------------------------------
# ambient/waypoint-not-found (error; warning when the waypoint's namespace is not in
# the repository)
# istiod binds by name and reports a missing Gateway exactly like one whose pods are
# not ready yet: WaypointIsNotReady (pilot/pkg/serviceregistry/ambient/waypoints.go).

findings contains f if {
	some b in bindings
	b.problem == "not-found"
	b.waypoint_namespace_known == true
	f := {
		"rule": "ambient/waypoint-not-found",
		"severity": "error",
		"resource": b.resource,
		"path": b.path,
		"message": sprintf(
			"%s is labelled istio.io/use-waypoint: %s%s, but there is no Gateway %s in namespace %s: istiod reports the binding as not ready (WaypointIsNotReady; istio.io/WaypointBound False on Services), and %s goes through no waypoint, so the waypoint policies bound by targetRefs%s and the routes meant for it apply to nothing. Create the waypoint (istioctl waypoint generate -n %s %s: a Gateway with gatewayClassName: istio-waypoint and an HBONE listener on port 15008), or correct the name in istio.io/use-waypoint (or istio.io/use-waypoint-namespace).",
			[
				bound_text(b), b.waypoint, namespace_label_text(b), b.waypoint, b.waypoint_namespace,
				traffic_text(b), stranded_text(b), b.waypoint_namespace, b.waypoint,
			],
		),
	}
}

findings contains f if {
	some b in bindings
	b.problem == "not-found"
	not b.waypoint_namespace_known == true
	f := {
		"rule": "ambient/waypoint-not-found",
		"severity": "warning",
		"resource": b.resource,
		"path": b.path,
		"message": sprintf(
			"%s is labelled istio.io/use-waypoint: %s%s, a waypoint in namespace %s, of which this repository holds nothing: it may be deployed from elsewhere. If no Gateway %s exists there, istiod reports the binding as not ready (WaypointIsNotReady) and %s goes through no waypoint, so the waypoint policies bound by targetRefs%s and the routes meant for it apply to nothing. Check that waypoint %s/%s is deployed, or correct istio.io/use-waypoint (or istio.io/use-waypoint-namespace).",
			[
				bound_text(b), b.waypoint, namespace_label_text(b), b.waypoint_namespace,
				b.waypoint, traffic_text(b), stranded_text(b), b.waypoint_namespace, b.waypoint,
			],
		),
	}
}

# ---------------------------------------------------------------------------
# ambient/waypoint-traffic-type (error)
# A Service or ServiceEntry needs a waypoint for service traffic, a pod or
# WorkloadEntry labelled directly one for workload traffic, a namespace one that is
# not `none` (pilot/pkg/serviceregistry/ambient/waypoints.go: UnsupportedTrafficType).

needed_traffic := {"service": "service", "workload": "workload", "both": "service or workload"}

fixed_traffic := {"service": "all (or service)", "workload": "all (or workload)", "both": "all (or service, or workload)"}

findings contains f if {
	some b in bindings
	b.problem == "traffic-type"
	g := waypoint_by_id[b.gateway]
	f := {
		"rule": "ambient/waypoint-traffic-type",
		"severity": "error",
		"resource": b.resource,
		"path": b.path,
		"message": sprintf(
			"%s is labelled istio.io/use-waypoint: %s, but waypoint %s handles only %s traffic (istio.io/waypoint-for: %s on its Gateway), and %s needs one for %s traffic: istiod does not bind it (UnsupportedTrafficType%s), so %s goes through no waypoint and the waypoint policies and routes meant for it apply to nothing%s. Set istio.io/waypoint-for: %s on the Gateway, or name a waypoint of that type.",
			[
				bound_text(b), b.waypoint, waypoint_text(b), g.traffic, g.traffic,
				kind_text(b.kind), needed_traffic[b.binds], status_text(b), traffic_text(b),
				stranded_text(b), fixed_traffic[b.binds],
			],
		),
	}
}

kind_text(kind) := "a Service" if kind == "Service"
else := "a ServiceEntry" if kind == "ServiceEntry"
else := "a WorkloadEntry" if kind == "WorkloadEntry"
else := "a namespace" if kind == "Namespace"
else := "a workload labelled directly"

# Where istiod writes why (pilot/pkg/model/service.go): a condition on Services,
# ServiceEntries and WorkloadEntries.
status_text(b) := "; istio.io/WaypointBound False" if b.kind in {"Service", "ServiceEntry", "WorkloadEntry"} else := ""

# ---------------------------------------------------------------------------
# ambient/waypoint-cross-namespace (error; warning when the namespace's labels, or
# the listener's selector, are not known)
# A waypoint admits bindings from other namespaces only as its HBONE listener's
# allowedRoutes says (default Same): AttachmentDenied.

findings contains f if {
	some b in bindings
	b.problem == "cross-namespace"
	g := waypoint_by_id[b.gateway]
	not admission_unknown(b, g)
	f := {
		"rule": "ambient/waypoint-cross-namespace",
		"severity": "error",
		"resource": b.resource,
		"path": b.path,
		"message": sprintf(
			"%s is labelled istio.io/use-waypoint: %s (in namespace %s), but that waypoint's HBONE listener admits %s (allowedRoutes.namespaces.from: %s), not namespace %s: istiod refuses the binding (AttachmentDenied), so %s goes through no waypoint and the waypoint policies and routes meant for it apply to nothing%s. On the listener of %s on port 15008 set allowedRoutes.namespaces.from: All, or Selector with a selector matching namespace %s (kubernetes.io/metadata.name: %s).",
			[
				bound_text(b), b.waypoint, b.waypoint_namespace, admitted_text(g), g.allowed_from, b.namespace,
				traffic_text(b), stranded_text(b), data.meshward.lib.display(g.id), b.namespace, b.namespace,
			],
		),
	}
}

findings contains f if {
	some b in bindings
	b.problem == "cross-namespace"
	g := waypoint_by_id[b.gateway]
	admission_unknown(b, g)
	f := {
		"rule": "ambient/waypoint-cross-namespace",
		"severity": "warning",
		"resource": b.resource,
		"path": b.path,
		"message": sprintf(
			"%s is labelled istio.io/use-waypoint: %s (in namespace %s), whose HBONE listener admits only namespaces its selector matches (allowedRoutes.namespaces.from: Selector), and %s, so meshward cannot tell whether namespace %s is admitted. If it is not, istiod refuses the binding (AttachmentDenied) and %s goes through no waypoint. Make sure namespace %s carries the labels the selector asks for, or set allowedRoutes.namespaces.from: All on the listener of %s.",
			[
				bound_text(b), b.waypoint, b.waypoint_namespace, unknown_admission_text(b, g), b.namespace,
				traffic_text(b), b.namespace, data.meshward.lib.display(g.id),
			],
		),
	}
}

admitted_text(g) := "only the namespaces its selector matches" if g.allowed_from == "Selector" else := "only its own namespace"

# A Selector listener with matchExpressions (not read), or a namespace whose labels the
# repository does not declare: admission is not known.
admission_unknown(_, g) if {
	g.allowed_from == "Selector"
	g.allowed_selector == null
}

admission_unknown(b, g) if {
	g.allowed_from == "Selector"
	not data.meshward.lib.model_namespaces[b.namespace].labels_known == true
	# kubernetes.io/metadata.name is on every namespace: a selector on it is decided.
	data.meshward.lib.get(g.allowed_selector, "kubernetes.io/metadata.name", b.namespace) == b.namespace
	some k, _ in g.allowed_selector
	k != "kubernetes.io/metadata.name"
}

unknown_admission_text(b, g) := "its selector uses matchExpressions, which meshward does not evaluate" if {
	g.allowed_selector == null
} else := sprintf("the labels of namespace %s are not declared in this repository", [b.namespace])

# ---------------------------------------------------------------------------
# ambient/sidecar-ignored (warning, IST0167)
# A Sidecar configures sidecars only: ambient pods have none, and ztunnel and
# waypoints never read it (pilot/pkg/model/push_context.go doGetSidecarScope;
# istioctl: pkg/config/analysis/analyzers/sidecar/selector.go). Unlike istioctl, a
# selector-less Sidecar is not reported while its namespace still holds a workload
# with a sidecar (one opted in): it configures that one.

sidecar_has_selector(r) if {
	labels := data.meshward.lib.get(data.meshward.lib.get(data.meshward.lib.spec_of(r), "workloadSelector", {}), "labels", {})
	is_object(labels)
	count(labels) > 0
}

sidecar_in_namespace(ns) if {
	some w in data.meshward.lib.model_workloads
	w.namespace == ns
	w.proxy == true
}

findings contains f if {
	some r in istio_resources("Sidecar")
	not sidecar_has_selector(r)
	ns := r.namespace
	ns != data.meshward.lib.root_namespace
	ambient_namespace(ns)
	not sidecar_in_namespace(ns)
	f := {
		"rule": "ambient/sidecar-ignored",
		"severity": "warning",
		"istio_code": "IST0167",
		"resource": r.id,
		"path": ["metadata", "namespace"],
		"message": sprintf(
			"%s has no workloadSelector, so it is meant for every sidecar of namespace %s, but %s is an ambient namespace (istio.io/dataplane-mode=ambient): its pods have no sidecar, and ztunnel and waypoints never read a Sidecar, so it applies nowhere and its egress and ingress settings limit nothing. Remove it; in ambient, limit what workloads may call with AuthorizationPolicies (at the destination's ztunnel or waypoint) instead.",
			[data.meshward.lib.display(r.id), ns, ns],
		),
	}
}

findings contains f if {
	some s in data.meshward.lib.model_selectors
	s.kind == "Sidecar"
	s.scope == "workload"
	s.match_count == 0
	ambient := data.meshward.lib.array_of(object.get(s, "ambient_matches", []))
	count(ambient) > 0
	f := {
		"rule": "ambient/sidecar-ignored",
		"severity": "warning",
		"istio_code": "IST0167",
		"resource": s.resource,
		"path": s.path,
		"message": sprintf(
			"%s selects %s (%s), and %s ambient: ztunnel captures %s, there is no sidecar to configure, and ztunnel and waypoints never read a Sidecar, so it applies nowhere. Remove it, or, if %s should keep a sidecar, opt %s in (sidecar.istio.io/inject: \"true\") and label %s istio.io/dataplane-mode: none.",
			[
				data.meshward.lib.display(s.resource), data.meshward.lib.plural(count(ambient), "only one workload", "only workloads"), data.meshward.lib.enumerate_ids(ambient, 3),
				data.meshward.lib.plural(count(ambient), "it is", "they are"), data.meshward.lib.plural(count(ambient), "its pods", "their pods"),
				data.meshward.lib.plural(count(ambient), "it", "they"), data.meshward.lib.plural(count(ambient), "it", "them"),
				data.meshward.lib.plural(count(ambient), "its pods", "their pods"),
			],
		),
	}
}

# ---------------------------------------------------------------------------
# ambient/sidecar-and-ambient (warning)
# A pod asking for both a sidecar and ambient gets the sidecar (istio-cni skips pods
# that have one: cni/pkg/util/enablement_selector.go). Kiali KIA1311 (pod labelled
# ambient in an injected namespace), KIA1315/KIA1316 (a pod of an ambient namespace
# opting in to a sidecar). Both labels on the namespace alone are
# injection/conflicting-labels (IST0123) and not repeated here; a pod labelled
# istio.io/dataplane-mode: none says plainly that it keeps its sidecar.

pod_label(w, key) := data.meshward.lib.get(data.meshward.lib.get(w, "labels", {}), key, "")

findings contains f if {
	some w in data.meshward.lib.model_workloads
	is_string(w.dataplane_conflict)
	pod_label(w, "istio.io/dataplane-mode") != "none"
	path := conflict_path(w)
	f := {
		"rule": "ambient/sidecar-and-ambient",
		"severity": "warning",
		"resource": w.id,
		"path": path,
		"message": sprintf(
			"%s asks for both data planes: %s. Its pods run with a sidecar: the sidecar, not ztunnel, enforces mTLS and AuthorizationPolicies on them (as written, HTTP rules included), waypoints do not see the traffic they send, and ambient-only settings do not apply to them. %s",
			[data.meshward.lib.display(w.id), w.dataplane_conflict, conflict_fix(w)],
		),
	}
}

# The pod's own label that asks for the other data plane; undefined when the conflict
# is the namespace's alone.
conflict_path(w) := array.concat(data.meshward.lib.pod_labels_path(w.kind), ["istio.io/dataplane-mode"]) if {
	pod_label(w, "istio.io/dataplane-mode") == "ambient"
} else := array.concat(data.meshward.lib.pod_labels_path(w.kind), ["sidecar.istio.io/inject"]) if {
	w.proxy_via == "pod-opt-in"
	pod_label(w, "sidecar.istio.io/inject") != ""
} else := array.concat(data.meshward.lib.pod_annotations_path(w.kind), ["sidecar.istio.io/inject"]) if {
	w.proxy_via == "pod-opt-in"
} else := array.concat(data.meshward.lib.pod_labels_path(w.kind), ["istio.io/rev"]) if {
	w.proxy_via == "pod-revision"
}

conflict_fix(w) := "To move it to ambient, label its pod template sidecar.istio.io/inject: \"false\" and roll it out (the sidecar goes only when the pods are recreated); to keep the sidecar, drop istio.io/dataplane-mode: ambient from the pod template." if {
	pod_label(w, "istio.io/dataplane-mode") == "ambient"
} else := "To move it to ambient, remove the opt-in from its pod template and roll it out (the sidecar goes only when the pods are recreated); to keep the sidecar, say so by labelling its pod template istio.io/dataplane-mode: none."

# ---------------------------------------------------------------------------
# ambient/route-not-at-waypoint (warning)
# Ambient clients' requests to a Service a waypoint serves are routed by that
# waypoint. It uses the VirtualServices of the Service's namespace and of its own
# (mesh-bound ones: pilot/pkg/networking/core/listener_waypoint.go
# getVirtualServiceForWaypoint), and looks DestinationRules up as a client in its own
# namespace: its own, then the Service's (if exported there), then the root
# namespace (pilot/pkg/model/push_context.go destinationRule). Subsets work there;
# config in any other namespace does not reach it.

waypoint_namespace(s) := waypoint_by_id[s.waypoint].namespace

waypoint_namespace(s) := id_namespace(s.waypoint) if not waypoint_by_id[s.waypoint]

# exportTo of a DestinationRule admits namespace ns (unset or `*`: everyone; `.`: its own).
exported_to(r, _) if count(spec_list(r, "exportTo")) == 0

exported_to(r, _) if "*" in spec_list(r, "exportTo")

exported_to(r, ns) if ns in spec_list(r, "exportTo")

exported_to(r, ns) if {
	"." in spec_list(r, "exportTo")
	r.namespace == ns
}

dr_read_by_waypoint(r, _, wns) if r.namespace == wns

dr_read_by_waypoint(r, s, wns) if {
	r.namespace == s.namespace
	exported_to(r, wns)
}

dr_read_by_waypoint(r, _, wns) if {
	r.namespace == data.meshward.lib.root_namespace
	exported_to(r, wns)
}

# DestinationRules for all sidecars (a workloadSelector limits one to the pods it selects).
mesh_destination_rules := [r |
	some r in istio_resources("DestinationRule")
	not data.meshward.lib.non_empty(data.meshward.lib.get(data.meshward.lib.get(data.meshward.lib.spec_of(r), "workloadSelector", {}), "matchLabels", null))
]

findings contains f if {
	some r in mesh_destination_rules
	host := data.meshward.lib.spec_of(r).host
	s := served_of_host(host, r.namespace)
	wns := waypoint_namespace(s)
	not dr_read_by_waypoint(r, s, wns)
	f := {
		"rule": "ambient/route-not-at-waypoint",
		"severity": "warning",
		"resource": r.id,
		"path": ["spec", "host"],
		"message": sprintf(
			"%s is for %s, which waypoint %s serves: requests from ambient clients go through that waypoint, and it reads DestinationRules only from %s and the root namespace (%s). This one, in namespace %s%s, is not among them: for ambient clients its subsets and traffic policy do not exist (a route to one of its subsets at the waypoint finds none), while sidecar clients, which skip the waypoint, still apply it. Move it to namespace %s%s.",
			[
				data.meshward.lib.display(r.id), data.meshward.lib.display(s.resource), data.meshward.lib.display(s.waypoint), dr_namespaces_text(s, wns),
				data.meshward.lib.root_namespace, r.namespace, export_text(r, s, wns), s.namespace, export_fix(s, wns),
			],
		),
	}
}

dr_namespaces_text(s, wns) := sprintf("its own namespace, which is the service's (%s)", [wns]) if {
	wns == s.namespace
} else := sprintf("its own namespace (%s), the service's (%s, when exported to the waypoint's)", [wns, s.namespace])

vs_namespaces_text(s, wns) := sprintf("of its own namespace, which is the service's (%s)", [wns]) if {
	wns == s.namespace
} else := sprintf("of the service's namespace (%s) and of its own (%s)", [s.namespace, wns])

export_text(r, s, wns) := sprintf(" with exportTo %v", [data.meshward.lib.spec_of(r).exportTo]) if {
	r.namespace == s.namespace
	wns != s.namespace
} else := ""

export_fix(s, wns) := sprintf(" (exported to namespace %s)", [wns]) if wns != s.namespace else := ""

findings contains f if {
	some r in istio_resources("VirtualService")
	mesh_bound(r)
	some i, host in spec_list(r, "hosts")
	s := served_of_host(host, r.namespace)
	wns := waypoint_namespace(s)
	not r.namespace in {s.namespace, wns}
	f := {
		"rule": "ambient/route-not-at-waypoint",
		"severity": "warning",
		"resource": r.id,
		"path": ["spec", "hosts", i],
		"message": sprintf(
			"%s routes %s, which waypoint %s serves: requests from ambient clients go through that waypoint, and it applies only the VirtualServices %s. This one is in namespace %s, so for ambient clients its routes (matches, splits%s, retries, timeouts, faults) do not exist, while sidecar clients, which skip the waypoint, still apply it. Move it to namespace %s.",
			[data.meshward.lib.display(r.id), host, data.meshward.lib.display(s.waypoint), vs_namespaces_text(s, wns), r.namespace, subset_text(r), s.namespace],
		),
	}
}

subset_text(r) := ", subsets" if count(route_subsets(r)) > 0 else := ""

# ---------------------------------------------------------------------------
# ambient/route-without-waypoint (warning)
# ztunnel reads no VirtualService, DestinationRule or route (ztunnel src/xds/types.rs):
# for a Service no waypoint serves, they do nothing for ambient clients; sidecar
# clients and gateways apply them themselves. An HTTPRoute on such a Service gets
# ResolvedWaypoints False, MissingUseWaypointLabel (pilot/pkg/config/kube/gateway/
# conditions.go). Reported for Services of ambient namespaces with ambient
# workloads: their own calls to each other are ambient clients.

# A Service of an ambient namespace with ambient workloads that no waypoint serves.
unserved_ambient_service(sid) := k if {
	services[sid]
	not served[sid]
	k := ambient_clients_in(id_namespace(sid))
}

no_waypoint_fix(sid) := sprintf(
	"Give the Service a waypoint (istioctl waypoint apply -n %s, then label Service %s or namespace %s istio.io/use-waypoint: waypoint); if it is meant for sidecar clients and gateways only, record an exception",
	[id_namespace(sid), id_name(sid), id_namespace(sid)],
)

findings contains f if {
	some r in istio_resources("VirtualService")
	mesh_bound(r)
	some i, host in spec_list(r, "hosts")
	sid := service_of_host(host, r.namespace)
	k := unserved_ambient_service(sid)
	f := {
		"rule": "ambient/route-without-waypoint",
		"severity": "warning",
		"resource": r.id,
		"path": ["spec", "hosts", i],
		"message": sprintf(
			"%s routes %s (%s) for mesh traffic, but no waypoint serves that Service, and namespace %s is ambient (%s): ambient clients' requests are carried by ztunnel, which reads no VirtualService, so for them these routes (matches, splits, retries, timeouts, faults) do not exist; only sidecar clients and gateways apply them. %s.",
			[data.meshward.lib.display(r.id), host, data.meshward.lib.display(sid), id_namespace(sid), data.meshward.lib.counted(k, "ambient workload", "ambient workloads"), no_waypoint_fix(sid)],
		),
	}
}

findings contains f if {
	some r in mesh_destination_rules
	host := data.meshward.lib.spec_of(r).host
	sid := service_of_host(host, r.namespace)
	k := unserved_ambient_service(sid)
	# A DestinationRule for a Service that ingress routes reach serves the gateway.
	count(ingress_routes(sid)) == 0
	f := {
		"rule": "ambient/route-without-waypoint",
		"severity": "warning",
		"resource": r.id,
		"path": ["spec", "host"],
		"message": sprintf(
			"%s is for %s, but no waypoint serves that Service, and namespace %s is ambient (%s): ambient clients' connections are carried by ztunnel, which reads no DestinationRule, so for them its subsets, load balancing, connection pool and outlier detection do not exist; only sidecar clients and gateways apply it. %s.",
			[data.meshward.lib.display(r.id), data.meshward.lib.display(sid), id_namespace(sid), data.meshward.lib.counted(k, "ambient workload", "ambient workloads"), no_waypoint_fix(sid)],
		),
	}
}

findings contains f if {
	some kind in ["HTTPRoute", "GRPCRoute"]
	some r in gateway_api_resources(kind)
	some i, p in spec_list(r, "parentRefs")
	is_object(p)
	service_parent(p)
	sid := sprintf("Service/%s/%s", [data.meshward.lib.get(p, "namespace", r.namespace), data.meshward.lib.get(p, "name", "")])
	k := unserved_ambient_service(sid)
	f := {
		"rule": "ambient/route-without-waypoint",
		"severity": "warning",
		"resource": r.id,
		"path": ["spec", "parentRefs", i],
		"message": sprintf(
			"%s attaches to %s, but no waypoint serves that Service, and namespace %s is ambient (%s): istiod marks the route ResolvedWaypoints False (MissingUseWaypointLabel), and ambient clients, carried by ztunnel, do not honor it; only sidecar clients apply it. %s.",
			[data.meshward.lib.display(r.id), data.meshward.lib.display(sid), id_namespace(sid), data.meshward.lib.counted(k, "ambient workload", "ambient workloads"), no_waypoint_fix(sid)],
		),
	}
}

# ---------------------------------------------------------------------------
# ambient/ingress-skips-waypoint (warning)
# Ingress gateways send to a Service's pods directly, skipping its waypoint, unless
# the Service (else its namespace) has istio.io/ingress-use-waypoint=true
# (pilot/pkg/serviceregistry/ambient/services.go, pilot/pkg/xds/endpoints/
# endpoint_builder.go). Policies bound at the waypoint then do not see ingress traffic.

# Policies bound at a served Service's waypoint: on the Service, on the waypoint
# Gateway, or on the istio-waypoint class (root namespace only).
waypoint_policies(s) := {t.resource |
	some t in target_refs
	t.state == "bound"
	at_waypoint(t, s)
}

at_waypoint(t, s) if {
	t.target_kind == s.kind
	t.target_name == s.name
	id_namespace(t.resource) == s.namespace
}

at_waypoint(t, s) if {
	t.target_kind == "Gateway"
	t.waypoint == s.waypoint
}

at_waypoint(t, _) if {
	t.target_kind == "GatewayClass"
	t.target_name == "istio-waypoint"
	id_namespace(t.resource) == data.meshward.lib.root_namespace
}

headless_text(sid) := " It is headless (clusterIP: None), and only a Service with a cluster IP can send ingress through its waypoint: give it one as well." if {
	data.meshward.lib.get(data.meshward.lib.spec_of(service_of(sid)), "clusterIP", "") == "None"
} else := ""

findings contains f if {
	some s in waypoint_services
	s.kind == "Service"
	not s.ingress_use_waypoint == true
	routes := ingress_routes(s.resource)
	count(routes) > 0
	policies := waypoint_policies(s)
	count(policies) > 0
	f := {
		"rule": "ambient/ingress-skips-waypoint",
		"severity": "warning",
		"resource": s.resource,
		"path": ["metadata", "labels"],
		"subjects": sort(policies),
		"message": sprintf(
			"%s is served by waypoint %s, where %s %s (targetRefs), but ingress reaches it too (%s), and an ingress gateway sends straight to the Service's pods, skipping the waypoint: requests entering there are not checked by %s (an HTTP DENY or a JWT requirement there does not stop them; the destination's ztunnel sees only the gateway's identity). Label the Service (or namespace %s) istio.io/ingress-use-waypoint: \"true\" so ingress traffic goes through the waypoint.%s",
			[
				data.meshward.lib.display(s.resource), data.meshward.lib.display(s.waypoint), data.meshward.lib.enumerate_ids(policies, 3),
				data.meshward.lib.plural(count(policies), "applies", "apply"), routes_text(routes),
				data.meshward.lib.plural(count(policies), "it", "them"), s.namespace, headless_text(s.resource),
			],
		),
	}
}

routes_text(routes) := data.meshward.lib.enumerate([sprintf("%s via gateway %s", [data.meshward.lib.display(pair[0]), pair[1]]) | some pair in routes], 3)
