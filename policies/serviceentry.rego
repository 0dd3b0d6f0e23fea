# ServiceEntry: the CRD's own rules (several are only enforced by CEL, some not at all),
# and the choices that silently change the security model.
package meshward.rules.serviceentry

import rego.v1

# One entry per ServiceEntry, with its spec decoded once, using builtins only (rules below
# compare precomputed fields: user function calls are the expensive part of evaluation).
entries := [e |
	some r in data.meshward.lib.resources("ServiceEntry")
	spec := r.body.spec
	is_object(spec)
	endpoints := object.get(spec, "endpoints", [])
	ports := object.get(spec, "ports", [])
	e := {
		"r": r,
		"spec": spec,
		"resolution": object.get(resolutions, object.get(spec, "resolution", null), "INVALID"),
		"location": object.get(locations, object.get(spec, "location", null), "INVALID"),
		"endpoints": object.get({"array": endpoints}, type_name(endpoints), []),
		"ports": object.get({"array": ports}, type_name(ports), []),
		"hosts": object.get(spec, "hosts", null),
		"no_selector": object.get(spec, "workloadSelector", null) in data.meshward.lib.empty_values,
		"no_addresses": object.get(spec, "addresses", null) in data.meshward.lib.empty_values,
	}
]

# resolution and location as Istio reads them (unset: NONE, MESH_EXTERNAL).
resolutions := {
	null: "NONE", "": "NONE", "NONE": "NONE", "STATIC": "STATIC", "DNS": "DNS",
	"DNS_ROUND_ROBIN": "DNS_ROUND_ROBIN", "DYNAMIC_DNS": "DYNAMIC_DNS",
}

locations := {null: "MESH_EXTERNAL", "": "MESH_EXTERNAL", "MESH_EXTERNAL": "MESH_EXTERNAL", "MESH_INTERNAL": "MESH_INTERNAL"}

# A ServiceEntry without a spec object.
findings contains f if {
	some r in data.meshward.lib.resources("ServiceEntry")
	not is_object(r.body.spec)
	f := {
		"rule": "serviceentry/hosts-invalid",
		"severity": "error",
		"resource": r.id,
		"path": ["spec", "hosts"],
		"message": sprintf(
			"ServiceEntry %s/%s has no spec.hosts: at least one host name is required (the name callers use), so the API server rejects it. Add the host names callers use.",
			[r.namespace, r.name],
		),
	}
}

se_name(e) := sprintf("ServiceEntry %s/%s", [e.r.namespace, e.r.name])

resolution_text(e) := sprintf("resolution %s", [e.resolution]) if {
	data.meshward.lib.has_value(e.spec, "resolution")
} else := "no resolution (NONE by default)"

hosts_text(e) := data.meshward.lib.enumerate(hosts, 3) if {
	is_array(e.hosts)
	hosts := [h | some h in e.hosts; is_string(h)]
	count(hosts) > 0
} else := "its hosts"

finding(rule, severity, e, path, message) := {
	"rule": rule,
	"severity": severity,
	"resource": e.r.id,
	"path": path,
	"message": message,
}

# ---------------------------------------------------------------------------
# serviceentry/none-with-endpoints (error)

# The resolution is the choice that conflicts with the endpoints: point at it when it
# is set (for a rendered root, that is often the patch or values line that set it).
resolution_path(e) := ["spec", "resolution"] if {
	data.meshward.lib.has_value(e.spec, "resolution")
} else := ["spec", "endpoints"]

findings contains f if {
	some e in entries
	count(e.endpoints) > 0
	e.resolution == "NONE"
	f := finding("serviceentry/none-with-endpoints", "error", e, resolution_path(e), sprintf(
		"%s has %s but lists %s: NONE forwards each call to its original destination address and the API server rejects endpoints with it. Set resolution: STATIC for IP endpoints or DNS for host names, or remove the endpoints.",
		[se_name(e), resolution_text(e), data.meshward.lib.counted(count(e.endpoints), "endpoint", "endpoints")],
	))
}

# ---------------------------------------------------------------------------
# serviceentry/round-robin-multiple-endpoints (error)

findings contains f if {
	some e in entries
	count(e.endpoints) > 1
	e.resolution == "DNS_ROUND_ROBIN"
	f := finding("serviceentry/round-robin-multiple-endpoints", "error", e, resolution_path(e), sprintf(
		"%s has resolution DNS_ROUND_ROBIN with %d endpoints: DNS_ROUND_ROBIN resolves a single name and allows at most one endpoint, so the API server rejects it. Use resolution: DNS for several endpoints, or keep one.",
		[se_name(e), count(e.endpoints)],
	))
}

# ---------------------------------------------------------------------------
# serviceentry/static-without-backends (error)

findings contains f if {
	some e in entries
	e.resolution == "STATIC"
	count(e.endpoints) == 0
	e.no_selector
	f := finding("serviceentry/static-without-backends", "error", e, ["spec", "resolution"], sprintf(
		"%s has resolution STATIC but neither endpoints nor a workloadSelector: the API server accepts it, but it routes nowhere and callers of %s get no endpoints (503 no healthy upstream). Add endpoints, or a workloadSelector choosing the WorkloadEntries behind it.",
		[se_name(e), hosts_text(e)],
	))
}

# ---------------------------------------------------------------------------
# serviceentry/selector-and-endpoints (error)

findings contains f if {
	some e in entries
	count(e.endpoints) > 0
	e.no_selector == false
	f := finding("serviceentry/selector-and-endpoints", "error", e, ["spec", "workloadSelector"], sprintf(
		"%s sets both spec.workloadSelector and spec.endpoints: they are mutually exclusive and the API server rejects it. Keep the workloadSelector (WorkloadEntries as members) or the endpoints, not both.",
		[se_name(e)],
	))
}

# ---------------------------------------------------------------------------
# serviceentry/cidr-requires-none-or-static (error)

findings contains f if {
	some e in entries
	e.no_addresses == false
	not e.resolution in {"NONE", "STATIC"}
	some i, a in data.meshward.lib.array_of(e.spec.addresses)
	is_string(a)
	contains(a, "/")
	f := finding("serviceentry/cidr-requires-none-or-static", "error", e, ["spec", "addresses", i], sprintf(
		"%s has the CIDR address %s with resolution %s: CIDR addresses are only allowed with resolution NONE or STATIC, so the API server rejects it. Use single IP addresses, or resolution NONE or STATIC.",
		[se_name(e), a, e.resolution],
	))
}

# ---------------------------------------------------------------------------
# serviceentry/hosts-invalid (error)

findings contains f if {
	some e in entries
	not non_empty_array(e.hosts)
	f := finding("serviceentry/hosts-invalid", "error", e, ["spec", "hosts"], sprintf(
		"%s has no spec.hosts: at least one host name is required (the name callers use), so the API server rejects it. Add the host names callers use.",
		[se_name(e)],
	))
}

findings contains f if {
	some e in entries
	is_array(e.hosts)
	count(e.hosts) > 256
	f := finding("serviceentry/hosts-invalid", "error", e, ["spec", "hosts"], sprintf(
		"%s lists %d hosts: at most 256 are allowed, so the API server rejects it. Split it into several ServiceEntries.",
		[se_name(e), count(e.hosts)],
	))
}

findings contains f if {
	some e in entries
	is_array(e.hosts)
	some i, h in e.hosts
	h == "*"
	f := finding("serviceentry/hosts-invalid", "error", e, ["spec", "hosts", i], sprintf(
		"%s lists the host \"*\": a bare * is not allowed as a host, so the API server rejects it. Name the concrete hosts, or a wildcard domain such as *.example.com.",
		[se_name(e)],
	))
}

non_empty_array(x) if {
	is_array(x)
	count(x) > 0
}

# ---------------------------------------------------------------------------
# serviceentry/duplicate-port (error)

findings contains f if {
	some e in entries
	# The pairwise search only where some number repeats (up to 256 ports).
	numbers := [m | some p in e.ports; m := p.number; is_number(m)]
	count(numbers) != count({m | some m in numbers})
	some i, p in e.ports
	n := p.number
	is_number(n)
	some j, q in e.ports
	i < j
	q.number == n
	f := finding("serviceentry/duplicate-port", "error", e, ["spec", "ports", j, "number"], sprintf(
		"%s lists port %v more than once: port numbers must be unique, so the API server rejects it. Remove or renumber the duplicate.",
		[se_name(e), n],
	))
}

# ---------------------------------------------------------------------------
# serviceentry/port-invalid (error)

findings contains f if {
	some e in entries
	some i, p in e.ports
	not valid_port(p.number)
	f := finding("serviceentry/port-invalid", "error", e, ["spec", "ports", i, "number"], sprintf(
		"%s spec.ports[%d] has %s: every port needs a number in 1..65535, so the API server rejects it. Set the port's number.",
		[se_name(e), i, number_text(data.meshward.lib.get(p, "number", null))],
	))
}

findings contains f if {
	some e in entries
	some i, p in e.ports
	is_object(p)
	object.get(p, "name", null) in data.meshward.lib.empty_values
	f := finding("serviceentry/port-invalid", "error", e, ["spec", "ports", i, "name"], sprintf(
		"%s spec.ports[%d] has no name: every port needs a name (e.g. http, tcp-db), so the API server rejects it. Name the port.",
		[se_name(e), i],
	))
}

valid_port(n) if {
	is_number(n)
	n >= 1
	n <= 65535
	n == floor(n)
}

number_text(n) := "no number" if n == null else := sprintf("the number %s", [json.marshal(n)])

# ---------------------------------------------------------------------------
# serviceentry/endpoint-address-required (error)

findings contains f if {
	some e in entries
	some i, ep in e.endpoints
	is_object(ep)
	object.get(ep, "address", null) in data.meshward.lib.empty_values
	object.get(ep, "network", null) in data.meshward.lib.empty_values
	f := finding("serviceentry/endpoint-address-required", "error", e, ["spec", "endpoints", i], sprintf(
		"%s spec.endpoints[%d] has neither address nor network: the API server rejects it. Set the endpoint's address (an IP address or host name).",
		[se_name(e), i],
	))
}

# ---------------------------------------------------------------------------
# serviceentry/location-mismatch (warning)

# ServiceEntries whose selector chooses WorkloadEntries: how many.
member_counts[s.resource] contains s.workload_entry_matches if {
	some s in data.meshward.lib.model_selectors
	s.kind == "ServiceEntry"
	data.meshward.lib.num(object.get(s, "workload_entry_matches", 0)) > 0
}

findings contains f if {
	some e in entries
	e.location == "MESH_EXTERNAL"
	e.no_selector == false
	n := max(member_counts[e.r.id])
	f := finding("serviceentry/location-mismatch", "warning", e, ["spec", "location"], sprintf(
		"%s selects %s (mesh members) but its location is %s: they are treated as outside services, so traffic to them gets no mTLS and no AuthorizationPolicy applies. Set location: MESH_INTERNAL.",
		[se_name(e), data.meshward.lib.counted(n, "WorkloadEntry", "WorkloadEntries"), location_text(e.spec)],
	))
}

location_text(spec) := "MESH_EXTERNAL" if data.meshward.lib.has_value(spec, "location") else := "MESH_EXTERNAL (the default when unset)"

# ---------------------------------------------------------------------------
# serviceentry/addresses-required (warning, IST0134)

# Protocol values that mean plain TCP (unset means TCP for a ServiceEntry port).
tcp_protocols := {null, "", "TCP", "tcp", "Tcp"}

findings contains f if {
	some e in entries
	e.no_addresses
	tcp := [i |
		some i, p in e.ports
		is_object(p)
		object.get(p, "protocol", null) in tcp_protocols
	]
	count(tcp) > 0
	f := object.union(
		finding("serviceentry/addresses-required", "warning", e, ["spec", "ports", min(tcp)], sprintf(
			"%s has no spec.addresses and %s with protocol TCP or none (%s): unless DNS auto-allocation is on, traffic to it cannot be told apart by address and will be routed by port only, mixing it with every other TCP service on that port. Add spec.addresses (a VIP), or set an HTTP-family protocol if it speaks one.",
			[se_name(e), data.meshward.lib.plural(count(tcp), "a port", "ports"), data.meshward.lib.enumerate([port_text(e.ports[i]) | some i in tcp], 5)],
		)),
		{"istio_code": "IST0134"},
	)
}

port_text(p) := sprintf("%v %v", [data.meshward.lib.get(p, "name", "unnamed"), data.meshward.lib.get(p, "number", "?")])
