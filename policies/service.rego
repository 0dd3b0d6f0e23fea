# Kubernetes Services: the protocol Istio reads from each port's name or appProtocol
# (istioctl's IST0118 and, for ExternalName Services, IST0150).
package meshward.rules.service

import rego.v1

import data.meshward.lib

# The protocols Istio knows by name, lower case: a port's appProtocol, else its name,
# up to the first "-", compared ignoring case. http_proxy cannot be a port name (no "_"
# in those) but can be an appProtocol.
known_protocols := {
	"http", "http2", "https", "http_proxy", "grpc", "grpc-web",
	"tcp", "tls", "udp", "mongo", "redis", "mysql",
}

# Kubernetes' own appProtocol names Istio maps (h2c: HTTP2, ws: HTTP, wss: HTTPS).
kubernetes_app_protocols := {"kubernetes.io/h2c", "kubernetes.io/ws", "kubernetes.io/wss"}

# Ports Istio never sniffs: with no known protocol they are plain TCP (SMTP, DNS, MySQL,
# MongoDB: server-first protocols that sniffing would break).
server_first_ports := {25, 53, 3306, 27017}

# Labels of Services left out: Istio's own control plane (istioctl skips those too), and
# those a gateway or waypoint controller generates (not the repository's to rename).
skip_label_keys := {"istio", "gateway.istio.io/managed", "gateway.networking.k8s.io/gateway-name"}

# Every port of a core v1 Service (not knative's, also kind Service) that Istio may not
# know the protocol of, with what Istio reads it from: its appProtocol when set, else
# its name. Ports with a known protocol drop out first, and only builtins are used:
# user function calls are the expensive part of evaluation, and most ports are named.
ports := [p |
	some r in lib.resources("Service")
	r.apiVersion == "v1"
	spec := r.body.spec
	is_object(spec)
	all_ports := object.get(spec, "ports", [])
	some i, port in object.get({"array": all_ports}, type_name(all_ports), [])
	is_object(port)
	n := object.get(port, "name", "")
	a := object.get(port, "appProtocol", null)
	name := object.get({"string": n}, type_name(n), "")
	app := object.get({"string": a}, type_name(a), "")
	source := object.get({true: app, false: name}, app != "", name)
	# Istio's prefix: up to the first "-". A source starting with grpc-web (GRPC-Web to
	# Istio) starts with grpc-, known either way.
	known := count({app} & kubernetes_app_protocols) + count({lower(split(source, "-")[0])} & known_protocols)
	external := object.get(spec, "type", null) == "ExternalName"
	# Unknown, or the name tcp on an ExternalName Service (IST0150 either way).
	count({x | x := known; x == 0} | {x | x := name; external; x == "tcp"}) > 0
	l := object.get(r.body, ["metadata", "labels"], {})
	labels := object.get({"object": l}, type_name(l), {})
	count({k | some k, _ in labels} & skip_label_keys) == 0
	object.get(labels, "release", null) != "istio"
	s := {"r": r, "spec": spec, "external": external}
	p := {"s": s, "i": i, "port": port, "name": name, "app": app, "known": known}
]

# Istio knows no protocol for the port and will sniff it. A UDP port's protocol is UDP
# whatever its name; the server-first ports are plain TCP.
unknown(p) if {
	p.known == 0
	object.get(p.port, "protocol", null) != "UDP"
	not object.get(p.port, "port", null) in server_first_ports
}

svc_name(s) := sprintf("Service %s/%s", [s.r.namespace, s.r.name])

port_text(p) := sprintf("port %v (%s)", [object.get(p.port, "port", "?"), p.name]) if p.name != ""
else := sprintf("port %v (unnamed)", [object.get(p.port, "port", "?")])

# Where the protocol was (not) found: appProtocol, else the name, else the port itself.
protocol_path(p) := ["spec", "ports", p.i, "appProtocol"] if p.app != ""
else := ["spec", "ports", p.i, "name"] if p.name != ""
else := ["spec", "ports", p.i]

# Why Istio knows no protocol for the port.
reason(p) := sprintf("its appProtocol %s is not a protocol Istio knows", [p.app]) if p.app != ""
else := "its name does not start with a protocol Istio knows and it has no appProtocol" if p.name != ""
else := "it has no name and no appProtocol"

port_name_issue(severity, code, p, path, message) := {
	"rule": "service/port-name",
	"severity": severity,
	"istio_code": code,
	"resource": p.s.r.id,
	"path": path,
	"message": message,
}

# ---------------------------------------------------------------------------
# service/port-name (info, IST0118)

findings contains f if {
	some p in ports
	p.s.external == false
	unknown(p)
	f := port_name_issue("info", "IST0118", p, protocol_path(p), sprintf(
		"%s %s: %s, so Istio detects the protocol by sniffing each new connection. That adds latency, and breaks server-first protocols (the client waits for the server to speak, the proxy waits for the client's first bytes: connections hang until a timeout); HTTP rules (VirtualService http routes, retries, L7 AuthorizationPolicy) may not apply to it. Name the port <protocol>[-suffix] (e.g. http-web, grpc-api, tcp-db) or set appProtocol.",
		[svc_name(p.s), port_text(p), reason(p)],
	))
}

# ---------------------------------------------------------------------------
# service/port-name (warning, IST0150): ExternalName Services

# An ExternalName Service has no cluster IP: Istio can tell its plain TCP traffic from
# other traffic on the same port only by the port number.
external_host(s) := h if {
	h := s.spec.externalName
	is_string(h)
	h != ""
} else := "its external name"

findings contains f if {
	some p in ports
	p.s.external == true
	p.name == "tcp"
	f := port_name_issue("warning", "IST0150", p, ["spec", "ports", p.i, "name"], external_message(p, sprintf(
		"Its %s is named tcp, so Istio treats it as plain TCP.",
		[port_text(p)],
	)))
}

findings contains f if {
	some p in ports
	p.s.external == true
	p.name != "tcp"
	unknown(p)
	f := port_name_issue("warning", "IST0150", p, protocol_path(p), external_message(p, sprintf(
		"Its %s: %s, so Istio treats what it does not detect as HTTP as plain TCP.",
		[port_text(p), reason(p)],
	)))
}

external_message(p, what) := sprintf(
	"%s is of type ExternalName (%s). %s As an ExternalName Service has no cluster IP, plain TCP to it is told apart from other traffic only by port number: connections meant for other destinations on port %v may be sent to %s, and its own may go elsewhere. Name the port after the protocol it speaks (e.g. http-api, https, tls-db) or set appProtocol, so Istio routes it by Host header or SNI; for plain TCP, reach the host through a ServiceEntry with spec.addresses instead.",
	[svc_name(p.s), external_host(p.s), what, object.get(p.port, "port", "?"), external_host(p.s)],
)

# ---------------------------------------------------------------------------
# service/conflicting-ports (warning; IST0116, IST0137)
# Computed in the model (input.model.traffic.port_conflicts): the Services selecting one
# sidecar workload, compared port by port.

traffic := object.get(lib.model, "traffic", {})

conflict_text(c) := sprintf("use port %s with different protocols", [c.port]) if c.conflict == "protocol"

else := sprintf("map different port numbers to its target port %s", [c.port])

conflict_code(c) := "IST0116" if c.conflict == "protocol" else := "IST0137"

conflict_runtime(c) := "istiod builds one inbound listener per port of the workload, so one protocol wins and traffic sent with the other is dropped or misread" if {
	c.conflict == "protocol"
} else := "istiod builds one inbound listener for the target port and takes the protocol and name of only one of the Service ports: traffic through the other may be handled with the wrong protocol (HTTP routing, retries and L7 policy silently off)"

findings contains f if {
	some c in object.get(traffic, "port_conflicts", [])
	f := {
		"rule": "service/conflicting-ports",
		"severity": "warning",
		"istio_code": conflict_code(c),
		"resource": c.resource,
		"path": c.path,
		"message": sprintf(
			"The Services selecting %s (%s) %s: %s. Give each target port one Service port and one protocol.",
			[lib.display(c.workload), concat("; ", c.sides), conflict_text(c), conflict_runtime(c)],
		),
	}
}

# ---------------------------------------------------------------------------
# service/workload-without-service (info)

findings contains f if {
	some u in object.get(traffic, "unserved", [])
	kind := split(u.workload, "/")[0]
	f := {
		"rule": "service/workload-without-service",
		"severity": "info",
		"resource": u.workload,
		"path": lib.pod_labels_path(kind),
		"message": sprintf(
			"%s is in the mesh and serves %s, but no Service of the repository selects it: callers cannot reach it by a Service name, and no VirtualService, DestinationRule or waypoint can address it. Add a Service whose selector matches its pod labels, or ignore this for a workload nothing calls.",
			[lib.display(u.workload), ports_of(u.ports)],
		),
	}
}

ports_of(ports) := sprintf("port %d", [ports[0]]) if count(ports) == 1

else := sprintf("ports %s", [concat(", ", [sprintf("%d", [p]) | some p in ports])])
