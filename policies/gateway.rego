# Gateways: Istio Gateways whose selector or ports reach no gateway pod, Gateways that
# fight over one host, and Gateway API routes their parent does not accept. The joins
# are in the model (input.model.traffic).
package meshward.rules.gateway

import rego.v1

traffic := object.get(data.meshward.lib.model, "traffic", {})

finding(rule, severity, code, resource, path, message) := {
	"rule": rule,
	"severity": severity,
	"istio_code": code,
	"resource": resource,
	"path": path,
	"message": message,
}

# ---------------------------------------------------------------------------
# gateway/selector-matches-nothing (error; info when no gateway pod is in the repository; IST0101)

findings contains f if {
	some g in object.get(traffic, "gateways", [])
	count(g.selector) > 0
	count(g.pods) == 0
	traffic.gateway_pods_known == true
	f := finding("gateway/selector-matches-nothing", "error", "IST0101", g.resource, g.selector_path, sprintf(
		"%s selects gateway pods with %s, but no workload of the repository has those labels: no gateway serves its servers, so requests for its hosts are refused (connection refused or 404 at whichever gateway does receive them). Use the labels of the gateway deployment (often istio: ingressgateway).",
		[data.meshward.lib.display(g.resource), data.meshward.lib.labels_text(g.selector)],
	))
}

findings contains f if {
	some g in object.get(traffic, "gateways", [])
	count(g.selector) > 0
	count(g.pods) == 0
	traffic.gateway_pods_known == false
	f := finding("gateway/selector-matches-nothing", "info", "IST0101", g.resource, g.selector_path, sprintf(
		"%s selects gateway pods with %s; no workload meshward rendered is a gateway (labelled istio): a gateway installed from a chart meshward does not render, or outside the repository, cannot be checked, so meshward could not check that one has those labels.",
		[data.meshward.lib.display(g.resource), data.meshward.lib.labels_text(g.selector)],
	))
}

# ---------------------------------------------------------------------------
# gateway/port-not-on-service (warning; IST0162)

findings contains f if {
	some g in object.get(traffic, "gateways", [])
	is_array(g.service_ports)
	some s in g.servers
	not s.port in g.service_ports
	f := finding("gateway/port-not-on-service", "warning", "IST0162", g.resource, s.path, sprintf(
		"%s listens on port %d, but %s in front of its pods expose%s %s: clients cannot reach that port, so the server is unreachable (connection refused or timeout). Add the port to the gateway Service, or use one of its ports.",
		[data.meshward.lib.display(g.resource), s.port, data.meshward.lib.enumerate_ids(g.services, 2), plural_s(g.services), ports_text(g.service_ports)],
	))
}

plural_s(ids) := "" if count(ids) > 1 else := "s"

ports_text(ports) := "no TCP port" if count(ports) == 0 else := sprintf("%s only", [concat(", ", [sprintf("%d", [p]) | some p in sort(ports)])])

# ---------------------------------------------------------------------------
# gateway/conflicting (error; IST0145)

findings contains f if {
	some c in object.get(traffic, "gateway_conflicts", [])
	c.host == ""
	f := finding("gateway/conflicting", "error", "IST0145", c.resource, c.path, sprintf(
		"%s and %s both have a server on port %d for the same gateway pods, and their protocols cannot share it (this one is %s; a TCP server shares its port with no other, HTTP only with HTTP and HTTPS): istiod keeps the first and rejects the other, whose hosts are never served. Use different ports, or merge the servers into one Gateway.",
		[data.meshward.lib.display(c.resource), data.meshward.lib.enumerate_ids(c.others, 3), c.port, protocol_text(c)],
	))
}

protocol_text(c) := c.protocol if c.protocol != "" else := "without a protocol"

findings contains f if {
	some c in object.get(traffic, "gateway_conflicts", [])
	c.host != ""
	f := finding("gateway/conflicting", "error", "IST0145", c.resource, c.path, sprintf(
		"%s and %s both terminate TLS for host %s on port %d on the same gateway pods: istiod keeps the first server for the host and rejects the other, whose certificate and routes are never served. Merge the servers into one Gateway, or use different hosts or selectors.",
		[data.meshward.lib.display(c.resource), data.meshward.lib.enumerate_ids(c.others, 3), c.host, c.port],
	))
}

# ---------------------------------------------------------------------------
# gateway/parent-not-found (error; warning when it could not be checked)

api_parents contains p if {
	some p in object.get(traffic, "parents", [])
	p.kind != "VirtualService"
}

findings contains f if {
	some p in api_parents
	p.status == "not-found"
	f := finding("gateway/parent-not-found", "error", null, p.resource, p.path, sprintf(
		"%s attaches to %s %s, which does not exist: %s. The route is attached nowhere and serves no request. Name an existing %s (namespace defaults to the route's).",
		[data.meshward.lib.display(p.resource), p.parent_kind, p.written, p.reason, p.parent_kind],
	))
}

findings contains f if {
	some p in api_parents
	p.status == "unknown"
	not startswith(p.reason, "listener ")
	f := finding("gateway/parent-not-found", "warning", null, p.resource, p.path, sprintf(
		"%s attaches to %s %s, which meshward could not check: %s. If it does not exist at runtime, the route serves no request.",
		[data.meshward.lib.display(p.resource), p.parent_kind, p.written, p.reason],
	))
}

# ---------------------------------------------------------------------------
# gateway/route-not-allowed (error; warning when it could not be checked)

findings contains f if {
	some p in api_parents
	p.status == "not-allowed"
	f := finding("gateway/route-not-allowed", "error", null, p.resource, p.path, sprintf(
		"%s is not accepted by Gateway %s: %s. Its Accepted condition is False and it serves no request through that Gateway. Fix the parentRef (sectionName, port), the route's hostnames, or the listener's allowedRoutes.",
		[data.meshward.lib.display(p.resource), p.written, p.reason],
	))
}

findings contains f if {
	some p in api_parents
	p.status == "unknown"
	startswith(p.reason, "listener ")
	f := finding("gateway/route-not-allowed", "warning", null, p.resource, p.path, sprintf(
		"Whether Gateway %s accepts %s could not be checked: %s. List the namespace's labels under mesh.namespaces in .meshward.yaml, or declare the namespace.",
		[p.written, data.meshward.lib.display(p.resource), p.reason],
	))
}

# ---------------------------------------------------------------------------
# gateway/backend-not-permitted (error; warning when it could not be checked)

findings contains f if {
	some d in object.get(traffic, "destinations", [])
	d.reference_grant == "missing"
	f := finding("gateway/backend-not-permitted", "error", null, d.resource, d.path, sprintf(
		"%s sends to Service %s in namespace %s, and no ReferenceGrant there allows %ss from namespace %s: istiod sets ResolvedRefs False (RefNotPermitted) and that backend's share of requests gets HTTP 500. Add a ReferenceGrant in %s from %s %s to this Service.",
		[data.meshward.lib.display(d.resource), d.host, target_namespace(d), d.kind, d.namespace, target_namespace(d), d.kind, d.namespace],
	))
}

findings contains f if {
	some d in object.get(traffic, "destinations", [])
	d.reference_grant == "unknown"
	f := finding("gateway/backend-not-permitted", "warning", null, d.resource, d.path, sprintf(
		"%s sends to Service %s in namespace %s, which the repository does not declare: meshward could not check that a ReferenceGrant there allows it. Without one, that backend's share of requests gets HTTP 500.",
		[data.meshward.lib.display(d.resource), d.host, target_namespace(d)],
	))
}

# "reviews.bookinfo.svc.cluster.local" -> "bookinfo"
target_namespace(d) := split(d.fqdn, ".")[1]
