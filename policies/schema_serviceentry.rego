# What Istio's validating webhook refuses in a ServiceEntry (ValidateServiceEntry): part
# of package meshward.rules.schema (schema.rego holds the objects, the helpers and why).
#
# Reads only objs.ServiceEntry, with the helpers of this file, schema.rego and lib.rego:
# a check whose revisions hold no ServiceEntry does not compile it. Keep it so.
# meshward: per-object
# meshward: only-for-kinds ServiceEntry
package meshward.rules.schema

import rego.v1

resolutions := {
	null: "NONE", "": "NONE", "NONE": "NONE", "STATIC": "STATIC", "DNS": "DNS",
	"DNS_ROUND_ROBIN": "DNS_ROUND_ROBIN", "DYNAMIC_DNS": "DYNAMIC_DNS",
}

ses := [e |
	some o in objs.ServiceEntry
	s := o.spec
	ports := arr(object.get(s, "ports", null))
	e := {
		"o": o,
		"res": object.get(resolutions, object.get(s, "resolution", null), "INVALID"),
		"hosts": arr(object.get(s, "hosts", null)),
		"addresses": arr(object.get(s, "addresses", null)),
		"ports": ports,
		"endpoints": arr(object.get(s, "endpoints", null)),
		# Port names as the webhook collects them (a port without a name counts as "").
		"port_names": {n | some p in ports; is_object(p); n := object.get(p, "name", "")},
	}
]

issues contains [e.o.id, ["spec", "hosts", i], say(e.o, text, fix)] if {
	some e in ses
	some i, h in e.hosts
	is_string(h)
	h != "*"
	not is_wildcard_domain(h)
	text := sprintf("spec.hosts[%d] %s is not a valid host name (DNS labels of letters, digits and '-', at most 255 characters, the last label not all digits; only the first label may be * or start with *)", [i, q(h)])
	fix := "Use a DNS name such as api.example.com, or a wildcard domain such as *.example.com."
}

issues contains [e.o.id, ["spec", "addresses", i], say(e.o, text, fix)] if {
	some e in ses
	some i, a in e.addresses
	is_string(a)
	not is_ip_or_cidr(a)
	text := sprintf("spec.addresses[%d] %s is not an IP address or CIDR range", [i, q(a)])
	fix := "Use an IP address (240.240.0.10) or a CIDR range (10.1.0.0/16); host names belong in spec.hosts."
}

issues contains [e.o.id, ["spec", "ports", i, "targetPort"], say(e.o, text, fix)] if {
	some e in ses
	some i, p in e.ports
	is_object(p)
	t := object.get(p, "targetPort", 0)
	is_number(t)
	t != 0
	not is_port(t)
	text := sprintf("spec.ports[%d].targetPort is %v, outside 1..65535", [i, t])
	fix := "Set a port number in 1..65535, or remove targetPort."
}

issues contains [e.o.id, ["spec", "ports", j, "name"], say(e.o, text, fix)] if {
	some e in ses
	# The pairwise search only where some name repeats (up to 256 ports).
	names := [m | some p in e.ports; is_object(p); m := object.get(p, "name", ""); is_string(m); m != ""]
	count(names) != count({m | some m in names})
	some j, p in e.ports
	is_object(p)
	n := object.get(p, "name", "")
	is_string(n)
	n != ""
	some i, p0 in e.ports
	i < j
	is_object(p0)
	object.get(p0, "name", "") == n
	text := sprintf("spec.ports[%d].name %s is also the name of spec.ports[%d]: port names must be unique", [j, q(n), i])
	fix := "Give each port its own name."
}

issues contains [e.o.id, ["spec", "ports", i, "name"], say(e.o, text, fix)] if {
	some e in ses
	some i, p in e.ports
	is_object(p)
	n := object.get(p, "name", "")
	is_string(n)
	n != ""
	not is_label(n)
	text := sprintf("spec.ports[%d].name %s is not a DNS-1123 label (at most 63 letters, digits and '-', starting and ending with a letter or digit)", [i, q(n)])
	fix := "Name the port like http, tcp-db or grpc-api."
}

issues contains [e.o.id, ["spec", "ports", i, "protocol"], say(e.o, text, fix)] if {
	some e in ses
	some i, p in e.ports
	is_object(p)
	pr := object.get(p, "protocol", "")
	bad_protocol(pr)
	text := sprintf("spec.ports[%d].protocol %s is not a protocol Istio knows", [i, q(pr)])
	fix := sprintf("Use one of %s (any case), or leave it unset.", [protocols_text])
}

# workloadSelector: {} is a selector too (serviceentry/selector-and-endpoints says the others).
issues contains [e.o.id, ["spec", "workloadSelector"], say(e.o, text, fix)] if {
	some e in ses
	object.get(e.o.spec, "workloadSelector", null) == {}
	count(e.endpoints) > 0
	text := "spec.workloadSelector is set (empty) together with spec.endpoints: only one of them is allowed"
	fix := "Remove the empty workloadSelector."
}

# DNS without endpoints resolves the hosts themselves: they must be FQDNs, not wildcards.
# The webhook says the first that is not; the others are reported above.
issues contains [e.o.id, ["spec", "hosts", i], say(e.o, text, fix)] if {
	some e in ses
	e.res in {"DNS", "DNS_ROUND_ROBIN"}
	count(e.endpoints) == 0
	bad := [i | some i, h in e.hosts; not is_fqdn(h)]
	count(bad) > 0
	i := bad[0]
	h := e.hosts[i]
	h != "*"
	is_wildcard_domain(h)
	text := sprintf("spec.hosts[%d] %s is not a fully qualified host name, and with resolution %s and no endpoints the hosts themselves are resolved", [i, q(h), e.res])
	fix := "Name the exact host, add endpoints to resolve instead, or use resolution DYNAMIC_DNS (wildcards) or NONE."
}

# Endpoints the webhook looks into (NONE with endpoints: serviceentry/none-with-endpoints).
se_endpoints := [[e, i, ep] |
	some e in ses
	e.res in {"STATIC", "DNS", "DNS_ROUND_ROBIN"}
	some i, ep in e.endpoints
	is_object(ep)
]

issues contains [e.o.id, ["spec", "endpoints", i, "address"], say(e.o, text, fix)] if {
	some [e, i, ep] in se_endpoints
	e.res != "STATIC"
	object.get(ep, "address", null) in {null, ""}
	not object.get(ep, "network", null) in data.meshward.lib.empty_values
	text := sprintf("spec.endpoints[%d] has a network but no address, and with resolution %s every endpoint needs an IP address or host name", [i, e.res])
	fix := "Set the endpoint's address."
}

issues contains [e.o.id, ["spec", "endpoints", i, "address"], say(e.o, text, fix)] if {
	some [e, i, ep] in se_endpoints
	e.res != "STATIC"
	a := object.get(ep, "address", "")
	is_string(a)
	a != ""
	not is_ip(a)
	not is_fqdn(a)
	text := sprintf("spec.endpoints[%d].address %s is neither an IP address nor a fully qualified host name (resolution %s)", [i, q(a), e.res])
	fix := "Use an IP address or a host name such as db.example.com (unix sockets need resolution STATIC)."
}

issues contains [e.o.id, ["spec", "endpoints", i, "address"], say(e.o, text, unix_fix)] if {
	some [e, i, ep] in se_endpoints
	e.res == "STATIC"
	a := object.get(ep, "address", "")
	is_string(a)
	startswith(a, "unix://")
	problem := unix_problem(substring(a, 7, -1))
	text := sprintf("spec.endpoints[%d].address %s is not a valid unix socket address: %s", [i, q(a), problem])
}

issues contains [e.o.id, ["spec", "endpoints", i, "address"], say(e.o, text, fix)] if {
	some [e, i, ep] in se_endpoints
	e.res == "STATIC"
	a := object.get(ep, "address", "")
	is_string(a)
	a != ""
	not startswith(a, "unix://")
	not is_ip(a)
	text := sprintf("spec.endpoints[%d].address %s is not an IP address, and with resolution STATIC endpoints are IP addresses or unix:// sockets (host names are not resolved)", [i, q(a)])
	fix := "Use the endpoint's IP address, or resolution: DNS to resolve host names."
}

issues contains [e.o.id, ["spec", "endpoints", i, "ports"], say(e.o, text, fix)] if {
	some [e, i, ep] in se_endpoints
	e.res == "STATIC"
	a := object.get(ep, "address", "")
	is_string(a)
	startswith(a, "unix://")
	not object.get(ep, "ports", null) in data.meshward.lib.empty_values
	text := sprintf("spec.endpoints[%d] is the unix socket %s and also sets ports: a unix socket has no ports", [i, a])
	fix := "Remove the endpoint's ports."
}

issues contains [e.o.id, ["spec", "ports"], say(e.o, text, fix)] if {
	some [e, i, ep] in se_endpoints
	e.res == "STATIC"
	a := object.get(ep, "address", "")
	is_string(a)
	startswith(a, "unix://")
	count(e.port_names) != 1
	text := sprintf("spec.endpoints[%d] is the unix socket %s, but the ServiceEntry has %s: a unix socket endpoint needs exactly one service port", [i, a, data.meshward.lib.counted(count(e.port_names), "port", "ports")])
	fix := "Declare exactly one port in spec.ports, or use separate ServiceEntries."
}

# endpoints[].ports: keys name a service port, values are port numbers.
issues contains [e.o.id, ["spec", "endpoints", i, "ports", k], say(e.o, text, fix)] if {
	some [e, i, ep] in se_endpoints
	ports := object.get(ep, "ports", null)
	is_object(ports)
	some k, v in ports
	problem := endpoint_port_problem(k, v, e.port_names)
	text := sprintf("spec.endpoints[%d].ports[%s] %s", [i, q(k), problem])
	fix := "Key each endpoint port by the name of a port in spec.ports, with the endpoint's port number (1..65535) as value."
}

endpoint_port_problem(k, v, names) := "is not a valid port name (a DNS-1123 label)" if {
	not is_label(k)
} else := sprintf("names no port of spec.ports (%s)", [concat(", ", sort([n | some n in names; is_string(n); n != ""]))]) if {
	not k in names
} else := sprintf("is %v, outside 1..65535", [v]) if {
	not is_port(v)
}

issues contains [e.o.id, ["spec", "endpoints", i, "labels", k], say(e.o, text, label_fix)] if {
	some [e, i, ep] in se_endpoints
	labels := object.get(ep, "labels", null)
	is_object(labels)
	some k, v in labels
	not plain_label(k, v)
	problem := label_problem(k, v)
	text := sprintf("spec.endpoints[%d].labels: %s", [i, problem])
}

# Several hosts on one address can only be told apart by HTTP Host or TLS SNI.
http_or_tls := {"http", "http2", "http_proxy", "grpc", "grpc-web", "https", "tls"}

issues contains [e.o.id, path, say(e.o, text, fix)] if {
	some e in ses
	e.res in {"STATIC", "DNS", "DNS_ROUND_ROBIN"}
	count(e.hosts) > 1
	bad := [i |
		some i, p in e.ports
		is_object(p)
		pr := object.get(p, "protocol", "")
		is_string(pr)
		not lower(pr) in http_or_tls
	]
	count(bad) > 0
	i := bad[0]
	pr := object.get(e.ports[i], "protocol", "")
	# An unknown protocol is reported as such.
	not bad_protocol(pr)
	path := protocol_path(i, pr)
	text := sprintf("spec.hosts lists %d hosts with resolution %s, and spec.ports[%d] has %s: several hosts can only be told apart on HTTP or TLS ports (Host header, SNI)", [count(e.hosts), e.res, i, protocol_text(pr)])
	fix := "Set the port's protocol to HTTP, HTTP2, GRPC, HTTPS or TLS if it speaks one; otherwise give each host its own ServiceEntry."
}

protocol_path(i, "") := ["spec", "ports", i]

protocol_path(i, pr) := ["spec", "ports", i, "protocol"] if pr != ""

protocol_text("") := "no protocol (TCP)"

protocol_text(pr) := sprintf("protocol %s", [pr]) if pr != ""

# DYNAMIC_DNS (dynamic forward proxy): wildcard hosts, HTTP-family ports, no addresses or endpoints.
issues contains [e.o.id, ["spec", "hosts", i], say(e.o, text, fix)] if {
	some e in ses
	e.res == "DYNAMIC_DNS"
	some i, h in e.hosts
	is_wildcard_domain(h)
	not startswith(h, "*")
	text := sprintf("spec.hosts[%d] %s is not a wildcard, and resolution DYNAMIC_DNS needs wildcard hosts", [i, q(h)])
	fix := "Use a wildcard host such as *.example.com, or resolution DNS for a single host."
}

issues contains [e.o.id, ["spec", field], say(e.o, text, fix)] if {
	some e in ses
	e.res == "DYNAMIC_DNS"
	some field in ["addresses", "endpoints"]
	count(arr(object.get(e.o.spec, field, null))) > 0
	text := sprintf("spec.%s is set with resolution DYNAMIC_DNS, which takes the destination from the request's host", [field])
	fix := sprintf("Remove spec.%s.", [field])
}

issues contains [e.o.id, protocol_path(i, pr), say(e.o, text, fix)] if {
	some e in ses
	e.res == "DYNAMIC_DNS"
	some i, p in e.ports
	is_object(p)
	pr := object.get(p, "protocol", "")
	is_string(pr)
	not bad_protocol(pr)
	not lower(pr) in {"http", "tls", "grpc", "http2"}
	text := sprintf("spec.ports[%d] has %s, and resolution DYNAMIC_DNS supports only HTTP, TLS, GRPC and HTTP2", [i, protocol_text(pr)])
	fix := "Set the port's protocol to HTTP, TLS, GRPC or HTTP2."
}

issues contains [e.o.id, ["spec", "location"], say(e.o, text, fix)] if {
	some e in ses
	e.res == "DYNAMIC_DNS"
	object.get(e.o.spec, "location", null) == "MESH_INTERNAL"
	w := object.get(e.o.body, ["metadata", "labels", "istio.io/use-waypoint"], "")
	is_string(w)
	w != ""
	lower(w) != "none"
	text := sprintf("spec.location is MESH_INTERNAL with resolution DYNAMIC_DNS while the label istio.io/use-waypoint=%s sends it through a waypoint, which does not support that", [w])
	fix := "Use location MESH_EXTERNAL, or remove the istio.io/use-waypoint label."
}

# exportTo (validateExportTo): ".", "*", "~" or namespace names, no duplicates, * and ~ alone.
issues contains [e.o.id, ["spec", "exportTo", j], say(e.o, text, fix)] if {
	some e in ses
	ex := arr(object.get(e.o.spec, "exportTo", null))
	some j, x in ex
	is_string(x)
	key := object.get({".": e.o.ns}, x, x)
	some i, y in ex
	i < j
	object.get({".": e.o.ns}, y, y) == key
	export_entry_ok(key)
	text := sprintf("spec.exportTo[%d] %s repeats spec.exportTo[%d] %s", [j, q(x), i, q(y)])
	fix := "Remove the duplicate."
}

issues contains [e.o.id, ["spec", "exportTo", j], say(e.o, text, fix)] if {
	some e in ses
	some j, x in arr(object.get(e.o.spec, "exportTo", null))
	is_string(x)
	x != "."
	not export_entry_ok(x)
	text := sprintf("spec.exportTo[%d] %s is not \".\", \"*\", \"~\" or a namespace name", [j, q(x)])
	fix := "Use . (this namespace), * (all), ~ (none) or namespace names."
}

export_entry_ok(x) := true if x in {"*", "~"} else := true if is_label(x)

issues contains [e.o.id, ["spec", "exportTo"], say(e.o, text, fix)] if {
	some e in ses
	ex := arr(object.get(e.o.spec, "exportTo", null))
	count(ex) > 1
	some x in ["*", "~"]
	x in ex
	text := sprintf("spec.exportTo has %s together with other entries (%s): %s stands alone", [q(x), concat(", ", [sprintf("%v", [y]) | some y in ex]), q(x)])
	fix := sprintf("Keep only %s, or list the namespaces without it.", [q(x)])
}
