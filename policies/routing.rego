# Routing: VirtualService and Gateway API destinations, subsets and gateways that
# apply nowhere, and DestinationRule TLS the server refuses. The joins (host lookup,
# subsets, the pods behind each) are in the model (input.model.traffic); these rules
# compare and explain. A reference is missing as a fact only where the repository owns
# the namespace it names; elsewhere it could not be checked, and the rule says so.
package meshward.rules.routing

import rego.v1

traffic := object.get(data.meshward.lib.model, "traffic", {})

destinations := object.get(traffic, "destinations", [])

parents := object.get(traffic, "parents", [])

destination_rules := object.get(traffic, "destination_rules", [])

finding(rule, severity, code, resource, path, message) := {
	"rule": rule,
	"severity": severity,
	"istio_code": code,
	"resource": resource,
	"path": path,
	"message": message,
}

# "routes to", "mirrors to", "sends to (backendRef)"
verb(d) := "mirrors traffic to" if d.role == "mirror" else := "routes to"

# What a caller sees when the destination does not exist.
symptom(d) := "the mirrored copies go nowhere (the original requests are unaffected)" if d.role == "mirror"

else := "the route's ResolvedRefs condition is False (BackendNotFound) and that backend's share of requests gets HTTP 500" if d.role == "backend"

else := "requests this route matches get HTTP 503 (no cluster for the host; NC in the access log) and TCP connections are closed"

host_text(d) := d.host if d.host == d.fqdn else := sprintf("%s (%s)", [d.host, d.fqdn])

# ---------------------------------------------------------------------------
# routing/host-not-found (error; warning when it could not be checked; IST0101)

findings contains f if {
	some d in destinations
	d.status == "not-found"
	f := finding("routing/host-not-found", "error", "IST0101", d.resource, d.path, sprintf(
		"%s %s %s, which does not exist: %s. At runtime %s. Point it at an existing Service or ServiceEntry, or add the Service.",
		[data.meshward.lib.display(d.resource), verb(d), host_text(d), d.reason, symptom(d)],
	))
}

findings contains f if {
	some d in destinations
	d.status == "not-qualified"
	f := finding("routing/host-not-found", "error", "IST0101", d.resource, d.path, sprintf(
		"%s %s %s, which resolves to nothing: %s. At runtime %s. Write the full name %s.svc.cluster.local, or the short name from the same namespace.",
		[data.meshward.lib.display(d.resource), verb(d), d.host, d.reason, symptom(d), trim_suffix(d.host, ".svc")],
	))
}

findings contains f if {
	some d in destinations
	d.status == "not-exported"
	f := finding("routing/host-not-found", "error", "IST0101", d.resource, d.path, sprintf(
		"%s %s %s, which is not visible where the route applies: %s. At runtime %s. Export it to those namespaces (spec.exportTo, or the networking.istio.io/exportTo annotation on a Service), or route to a host exported there.",
		[data.meshward.lib.display(d.resource), verb(d), host_text(d), d.reason, symptom(d)],
	))
}

findings contains f if {
	some d in destinations
	d.status == "invalid-kind"
	f := finding("routing/host-not-found", "error", null, d.resource, d.path, sprintf(
		"%s sends to %s, but %s: the route's ResolvedRefs condition is False (InvalidKind) and that backend's share of requests gets HTTP 500. Send to a Service (or an Istio ServiceEntry).",
		[data.meshward.lib.display(d.resource), d.host, d.reason],
	))
}

findings contains f if {
	some d in destinations
	d.status == "unknown"
	f := finding("routing/host-not-found", "warning", "IST0101", d.resource, d.path, sprintf(
		"%s %s %s, which meshward could not check: %s. If it does not exist at runtime, %s. Declare the namespace in the repository (a Namespace object) so its Services can be checked, or add an exception naming this host if it is defined elsewhere.",
		[data.meshward.lib.display(d.resource), verb(d), host_text(d), d.reason, symptom(d)],
	))
}

# A DestinationRule whose host resolves nowhere applies nowhere (IST0174).
findings contains f if {
	some dr in destination_rules
	dr.host_status in {"not-found", "not-qualified", "not-exported"}
	f := finding("routing/host-not-found", "warning", "IST0174", dr.resource, ["spec", "host"], sprintf(
		"%s is for host %s, which resolves to nothing: %s. Its traffic policy and subsets apply nowhere, silently. Name an existing Service (short name, or <name>.<namespace>.svc.cluster.local) or ServiceEntry host.",
		[data.meshward.lib.display(dr.resource), dr.host, dr.reason],
	))
}

findings contains f if {
	some dr in destination_rules
	dr.host_status == "unknown"
	f := finding("routing/host-not-found", "info", "IST0174", dr.resource, ["spec", "host"], sprintf(
		"%s is for host %s, which meshward could not check: %s. If no such host exists at runtime, the rule applies nowhere.",
		[data.meshward.lib.display(dr.resource), dr.host, dr.reason],
	))
}

# ---------------------------------------------------------------------------
# routing/port-not-found (error; IST0101 host:port, IST0112)

ports_text(d) := sprintf("port %d only", [d.target_ports[0]]) if count(d.target_ports) == 1

else := sprintf("ports %s", [concat(", ", [sprintf("%d", [p]) | some p in sort(d.target_ports)])]) if count(d.target_ports) > 1

else := "no ports"

findings contains f if {
	some d in destinations
	d.status == "found"
	is_number(d.port)
	not d.port in d.target_ports
	f := finding("routing/port-not-found", "error", "IST0101", d.resource, d.port_path, sprintf(
		"%s %s port %d of %s, which exposes %s: %s. Use one of its ports (the Service's port, not its targetPort).",
		[data.meshward.lib.display(d.resource), verb(d), d.port, data.meshward.lib.display(d.target), ports_text(d), symptom(d)],
	))
}

findings contains f if {
	some d in destinations
	d.status == "found"
	d.role == "route"
	d.gateway_only
	d.port == null
	count(d.target_ports) > 1
	f := finding("routing/port-not-found", "error", "IST0112", d.resource, d.path, sprintf(
		"%s is bound to gateways only and %s %s without a port, but it exposes %s: at a gateway istiod picks the port the request arrived on, which is the gateway's listening port, so requests fail with 503 unless the Service has that port. Set destination.port.number.",
		[data.meshward.lib.display(d.resource), verb(d), data.meshward.lib.display(d.target), ports_text(d)],
	))
}

findings contains f if {
	some d in destinations
	d.role == "backend"
	d.status == "found"
	d.port == null
	f := finding("routing/port-not-found", "error", null, d.resource, d.path, sprintf(
		"%s sends to %s without a port: a backendRef to a Service must name one, so istiod rejects the backend (ResolvedRefs False) and its share of requests gets HTTP 500. Set port to one of its %s.",
		[data.meshward.lib.display(d.resource), data.meshward.lib.display(d.target), ports_text(d)],
	))
}

# ---------------------------------------------------------------------------
# routing/subset-not-found (error; IST0101)

known_text(d) := sprintf("the DestinationRules for it define %s", [data.meshward.lib.enumerate(d.known_subsets, 5)]) if {
	count(d.known_subsets) > 0
} else := "no DestinationRule for it defines any subset"

findings contains f if {
	some d in destinations
	d.subset_status == "not-found"
	f := finding("routing/subset-not-found", "error", "IST0101", d.resource, d.subset_path, sprintf(
		"%s %s subset %s of %s, but %s: %s. Define the subset in a DestinationRule for %s (in this namespace, the Service's, or the root namespace), or route to an existing one.",
		[data.meshward.lib.display(d.resource), verb(d), d.subset, d.host, known_text(d), symptom(d), d.fqdn],
	))
}

findings contains f if {
	some d in destinations
	d.subset_status == "unknown"
	f := finding("routing/subset-not-found", "warning", "IST0101", d.resource, d.subset_path, sprintf(
		"%s %s subset %s of %s, which meshward could not check: no DestinationRule of the repository is for %s, and one may live in a namespace the repository does not declare (%s, the Service's, or the root namespace). If none defines the subset, %s.",
		[data.meshward.lib.display(d.resource), verb(d), d.subset, d.host, d.fqdn, d.namespace, symptom(d)],
	))
}

# ---------------------------------------------------------------------------
# routing/subset-selects-no-pod (error; IST0173)

findings contains f if {
	some dr in destination_rules
	some s in dr.subsets
	s.status == "none"
	f := finding("routing/subset-selects-no-pod", "error", "IST0173", dr.resource, s.path, sprintf(
		"%s subset %s (%s) selects none of the %s behind %s (%s): requests routed to this subset get HTTP 503 \"no healthy upstream\" (UH). Match the subset's labels to the pod labels of the version you mean.",
		[data.meshward.lib.display(dr.resource), s.name, data.meshward.lib.labels_text(s.labels), data.meshward.lib.counted(count(s.candidates), "workload", "workloads"), dr.host, data.meshward.lib.enumerate_ids(s.candidates, 3)],
	))
}

# ---------------------------------------------------------------------------
# routing/gateway-not-found (error; warning when it could not be checked; IST0101)

elsewhere_text(p) := sprintf(" (%s exists: write %s)", [data.meshward.lib.enumerate_ids(p.elsewhere, 2), concat(" or ", sort([qualified_name(id) | some id in p.elsewhere]))]) if {
	count(p.elsewhere) > 0
} else := ""

# "Gateway/istio-system/main" -> "istio-system/main"
qualified_name(id) := concat("/", array.slice(split(id, "/"), 1, 3))

findings contains f if {
	some p in parents
	p.kind == "VirtualService"
	p.status == "not-found"
	f := finding("routing/gateway-not-found", "error", "IST0101", p.resource, p.path, sprintf(
		"%s is bound to gateway %s, read as %s/%s, which does not exist: %s%s. Its routes apply at no gateway, so requests through the gateway you meant get 404 (no route). Write the gateway as <namespace>/<name>.",
		[data.meshward.lib.display(p.resource), p.written, p.parent_namespace, p.parent_name, p.reason, elsewhere_text(p)],
	))
}

findings contains f if {
	some p in parents
	p.kind == "VirtualService"
	p.status == "unknown"
	f := finding("routing/gateway-not-found", "warning", "IST0101", p.resource, p.path, sprintf(
		"%s is bound to gateway %s/%s, which meshward could not check: %s. If it does not exist at runtime, these routes apply at no gateway (404 through the gateway you meant).",
		[data.meshward.lib.display(p.resource), p.parent_namespace, p.parent_name, p.reason],
	))
}

# ---------------------------------------------------------------------------
# routing/conflicting-mesh-hosts (error; IST0109)

scope_text(c) := "every namespace" if c.scope == "*" else := sprintf("namespace %s", [c.scope])

findings contains f if {
	some c in object.get(traffic, "mesh_host_conflicts", [])
	f := finding("routing/conflicting-mesh-hosts", "error", "IST0109", c.resource, c.path, sprintf(
		"%s and %s both route host %s for sidecars in %s: sidecars take one VirtualService per host and silently ignore the other's routes (which one wins depends on creation order). Merge them into one VirtualService, or bind one of them to a gateway.",
		[data.meshward.lib.display(c.resource), data.meshward.lib.enumerate_ids(c.others, 3), c.host, scope_text(c)],
	))
}

# ---------------------------------------------------------------------------
# routing/tls-conflicts-peer-authn (error)

server_source(c) := sprintf("set by %s", [data.meshward.lib.display(c.server_mode_source)]) if {
	is_string(c.server_mode_source)
} else := "Istio's default"

port_text(c) := sprintf(" for port %d", [c.port]) if is_number(c.port) else := ""

tls_problem(c) := sprintf("the client sidecar sends plaintext, and %s refuse%s plaintext under STRICT mTLS (%s)", [data.meshward.lib.enumerate_ids(c.workloads, 3), plural_s(c.workloads), server_source(c)]) if {
	c.problem == "plaintext-to-strict"
}

else := sprintf("the client sidecar originates TLS with certificates of its own, not the mesh's, and %s accept%s only Istio mTLS under STRICT (%s)", [data.meshward.lib.enumerate_ids(c.workloads, 3), plural_s(c.workloads), server_source(c)]) if {
	c.problem == "own-tls-to-strict"
}

else := sprintf("the client sidecar sends Istio mTLS, but %s serve%s plaintext (%s), so the TLS bytes reach the application", [data.meshward.lib.enumerate_ids(c.workloads, 3), plural_s(c.workloads), no_proxy_text(c)])

no_proxy_text(c) := sprintf("PeerAuthentication mode DISABLE, %s", [server_source(c)]) if c.server_mode == "DISABLE" else := "no Istio proxy"

plural_s(ids) := "" if count(ids) > 1 else := "s"

tls_fix(c) := "Remove the tls block (auto-mTLS then picks Istio mTLS for sidecars and plaintext for the rest), or set mode: ISTIO_MUTUAL." if c.problem != "mesh-tls-to-plaintext"

else := "Remove the tls block so auto-mTLS follows the server's mode, or set their PeerAuthentication to PERMISSIVE or STRICT." if c.server_mode == "DISABLE"

else := "Remove the tls block so auto-mTLS sends plaintext to workloads without a proxy, or give them a sidecar."

findings contains f if {
	some c in object.get(traffic, "tls_conflicts", [])
	f := finding("routing/tls-conflicts-peer-authn", "error", null, c.resource, c.path, sprintf(
		"%s sets tls.mode %s%s for %s, which turns auto-mTLS off: %s. HTTP callers get 503 \"upstream connect error or disconnect/reset before headers\" and TCP connections are reset. %s",
		[data.meshward.lib.display(c.resource), c.mode, port_text(c), c.host, tls_problem(c), tls_fix(c)],
	))
}
