# Kubernetes Services: the protocol Istio reads from each port's name or appProtocol
# (istioctl's IST0118 and, for ExternalName Services, IST0150).
package meshward.rules.service

import rego.v1

# Service ports whose protocol Istio does not know, and ExternalName Service ports it
# treats as plain TCP: classified in the model (input.model.traffic.unknown_protocols,
# src/model/traffic/ports.rs), which reads every port of every Service once; here
# they become findings.
traffic := object.get(data.meshward.lib.model, "traffic", {})

ports := object.get(traffic, "unknown_protocols", [])

svc_name(p) := sprintf("Service %s/%s", [p.namespace, p.service])

port_text(p) := sprintf("port %v (%s)", [p.port, p.name]) if p.name != ""
else := sprintf("port %v (unnamed)", [p.port])

# Where the protocol was (not) found: appProtocol, else the name, else the port itself.
protocol_path(p) := ["spec", "ports", p.index, "appProtocol"] if p.app != ""
else := ["spec", "ports", p.index, "name"] if p.name != ""
else := ["spec", "ports", p.index]

# Why Istio knows no protocol for the port.
reason(p) := sprintf("its appProtocol %s is not a protocol Istio knows", [p.app]) if p.app != ""
else := "its name does not start with a protocol Istio knows and it has no appProtocol" if p.name != ""
else := "it has no name and no appProtocol"

port_name_issue(severity, code, p, path, message) := {
	"rule": "service/port-name",
	"severity": severity,
	"istio_code": code,
	"resource": p.resource,
	"path": path,
	"message": message,
}

# ---------------------------------------------------------------------------
# service/port-name (info, IST0118)

findings contains f if {
	some p in ports
	p.external == false
	p.sniffed == true
	f := port_name_issue("info", "IST0118", p, protocol_path(p), sprintf(
		"%s %s: %s, so Istio detects the protocol by sniffing each new connection. That adds latency, and breaks server-first protocols (the client waits for the server to speak, the proxy waits for the client's first bytes: connections hang until a timeout); HTTP rules (VirtualService http routes, retries, L7 AuthorizationPolicy) may not apply to it. Name the port <protocol>[-suffix] (e.g. http-web, grpc-api, tcp-db) or set appProtocol.",
		[svc_name(p), port_text(p), reason(p)],
	))
}

# ---------------------------------------------------------------------------
# service/port-name (warning, IST0150): ExternalName Services

# An ExternalName Service has no cluster IP: Istio can tell its plain TCP traffic from
# other traffic on the same port only by the port number.
external_host(p) := p.external_name if is_string(p.external_name)
else := "its external name"

findings contains f if {
	some p in ports
	p.external == true
	p.name == "tcp"
	f := port_name_issue("warning", "IST0150", p, ["spec", "ports", p.index, "name"], external_message(p, sprintf(
		"Its %s is named tcp, so Istio treats it as plain TCP.",
		[port_text(p)],
	)))
}

findings contains f if {
	some p in ports
	p.external == true
	p.name != "tcp"
	p.sniffed == true
	f := port_name_issue("warning", "IST0150", p, protocol_path(p), external_message(p, sprintf(
		"Its %s: %s, so Istio treats what it does not detect as HTTP as plain TCP.",
		[port_text(p), reason(p)],
	)))
}

external_message(p, what) := sprintf(
	"%s is of type ExternalName (%s). %s As an ExternalName Service has no cluster IP, plain TCP to it is told apart from other traffic only by port number: connections meant for other destinations on port %v may be sent to %s, and its own may go elsewhere. Name the port after the protocol it speaks (e.g. http-api, https, tls-db) or set appProtocol, so Istio routes it by Host header or SNI; for plain TCP, reach the host through a ServiceEntry with spec.addresses instead.",
	[svc_name(p), external_host(p), what, p.port, external_host(p)],
)

# ---------------------------------------------------------------------------
# service/conflicting-ports (warning; IST0116, IST0137)
# Computed in the model (input.model.traffic.port_conflicts): the Services selecting one
# sidecar workload, compared port by port.

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
			[data.meshward.lib.display(c.workload), concat("; ", c.sides), conflict_text(c), conflict_runtime(c)],
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
		"path": data.meshward.lib.pod_labels_path(kind),
		"message": sprintf(
			"%s is in the mesh and serves %s, but no Service of the repository selects it: callers cannot reach it by a Service name, and no VirtualService, DestinationRule or waypoint can address it. Add a Service whose selector matches its pod labels, or ignore this for a workload nothing calls.",
			[data.meshward.lib.display(u.workload), ports_of(u.ports)],
		),
	}
}

ports_of(ports) := sprintf("port %d", [ports[0]]) if count(ports) == 1

else := sprintf("ports %s", [concat(", ", [sprintf("%d", [p]) | some p in ports])])
