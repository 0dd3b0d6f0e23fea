# What Istio's validating webhook (validation.istio.io, istiod) refuses, for the kinds
# meshward claims: ServiceEntry, WorkloadEntry, WorkloadGroup, PeerAuthentication,
# AuthorizationPolicy, RequestAuthentication, Sidecar and Telemetry (as pkg/config/validation in istio/istio checks them).
#
# Only what the webhook refuses (warnings are accepted) and what no other rule says: the
# CRD's schema and CEL rules are checked in Rust (src/schema), and serviceentry/*,
# workloadentry/*, workloadgroup/*, authz/*, mtls/port-level-requires-selector and
# selector/wildcard-value restate several webhook checks with their runtime effect.
#
# Manifests are hostile input: a builtin given the wrong type fails the whole policy, so
# every value is type-checked before it is passed to one.
#
# Every check reads one object's body (and model facts drawn from that body alone: a
# WorkloadEntry's address_problem) and names it:
# base and head share what it finds on the objects they hold alike, and it runs on parts
# of a revision side by side (src/policy/mod.rs, PER_OBJECT_MARK). Keep it so.
# meshward: per-object
package meshward.rules.schema

import rego.v1

kinds := [
	"ServiceEntry", "WorkloadEntry", "WorkloadGroup", "PeerAuthentication",
	"AuthorizationPolicy", "RequestAuthentication", "Sidecar", "Telemetry",
]

# ---------------------------------------------------------------------------
# The objects, decoded once

# Resources of these kinds in an istio.io group (another group's Sidecar is not Istio's).
istio_resources[kind] := [r |
	some r in data.meshward.lib.resources(kind)
	is_object(r.body)
	api := object.get(r, "apiVersion", "")
	is_string(api)
	# The group, before the "/" (split is slow on thousands of objects).
	endswith(substring(api, 0, indexof(api, "/")), "istio.io")
] if {
	some kind in kinds
}

# Those with a spec object, as {id, kind, name, ns, body, spec} (the label of a message
# is built only for a finding).
objs[kind] := [o |
	some r in istio_resources[kind]
	spec := object.get(r.body, "spec", null)
	is_object(spec)
	o := {"id": r.id, "kind": kind, "name": r.name, "ns": r.namespace, "body": r.body, "spec": spec}
] if {
	some kind in kinds
}

# Findings: [resource id, path, message].
findings contains f if {
	some [id, path, message] in issues
	f := {"rule": "schema/invalid", "severity": "error", "resource": id, "path": path, "message": message}
}

# The message: what is wrong (naming the field and its value), what happens, the fix.
say(o, text, fix) := sprintf(
	"%s: %s. The API server refuses the object (Istio's validating webhook, when istiod validation is active), so Argo CD and Flux fail to sync it after merge and the cluster keeps the previous version. %s",
	[sprintf("%s %s/%s", [o.kind, o.ns, o.name]), text, fix],
)

# ["spec", "ports", 2, "name"] -> spec.ports[2].name
ft(path) := concat("", [s |
	some i, p in path
	s := seg(i, p)
])

seg(i, p) := sprintf("[%v]", [p]) if {
	is_number(p)
} else := p if {
	i == 0
	is_string(p)
} else := sprintf(".%s", [p]) if {
	is_string(p)
	p != ""
	trim(p, word_chars) == ""
	not contains(digits, substring(p, 0, 1))
} else := sprintf("[%s]", [json.marshal(p)])

q(v) := json.marshal(v)

arr(x) := x if is_array(x) else := []

obj(x) := x if is_object(x) else := {}

# x[k] when x is an object, else d.
at(x, k, d) := object.get(x, k, d) if is_object(x) else := d

# ---------------------------------------------------------------------------
# Value syntax, as Istio checks it (pkg/config/labels, pkg/config/validation/agent)

# Regular expressions are compiled at each call (regorus without its "cache" feature):
# character sets are checked with trim(s, set) == "" instead.
alnum := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

digits := "0123456789"

label_chars := concat("", [alnum, "-"])

word_chars := concat("", [alnum, "_"])

dns_chars := concat("", [alnum, "-."])

# A DNS-1123 label as Istio checks it (upper case allowed): at most 63 letters, digits
# and '-', starting and ending with a letter or digit.
is_label(s) if {
	is_string(s)
	s != ""
	count(s) <= 63
	trim(s, label_chars) == ""
	not startswith(s, "-")
	not endswith(s, "-")
}

# Dot-separated DNS-1123 labels, checked on the whole name with builtins (cheaper than
# a function call per label).
dns_name(name) if {
	name != ""
	trim(name, dns_chars) == ""
	not startswith(name, ".")
	not endswith(name, ".")
	not contains(name, "..")
	not startswith(name, "-")
	not endswith(name, "-")
	not contains(name, ".-")
	not contains(name, "-.")
	short_labels(name)
}

short_labels(name) := true if {
	count(name) <= 63
} else := true if {
	every l in split(name, ".") {
		count(l) <= 63
	}
}

# The last label of name is all digits; after a trailing dot (s ends with it) Istio sees
# an empty last label, which is not.
numeric_tld(s, name) if {
	not endswith(s, ".")
	t := trim_right(name, digits)
	t != name
	last_label_gone(t)
}

last_label_gone(t) := true if t == "" else := true if endswith(t, ".")

# ValidateFQDN: 1..255 chars, DNS-1123 labels, a trailing dot allowed, the last label
# not all digits.
is_fqdn(s) if {
	is_string(s)
	count(s) <= 255
	name := trim_suffix(s, ".")
	dns_name(name)
	not numeric_tld(s, name)
}

# ValidateWildcardDomain: the first label may be *, *<label> or *-<label>; the rest as
# ValidateDNS1123Labels (a trailing dot allowed, the last label not all digits; a single
# label is not checked for digits).
is_wildcard_domain(s) if {
	is_string(s)
	s != ""
	count(s) <= 255
	first := split(s, ".")[0]
	wildcard_label(first)
	wildcard_rest_ok(s, substring(s, count(first) + 1, -1))
}

# Multiple-definition functions evaluate every definition; else chains stop at the first.
wildcard_rest_ok(s, rest) := true if {
	not contains(s, ".")
} else := true if {
	rest == ""
} else := true if {
	name := trim_suffix(rest, ".")
	dns_name(name)
	not numeric_tld(rest, name)
}

wildcard_label(f) := true if {
	f == "*"
} else := true if {
	count(f) <= 63
	is_label(trim_prefix(f, "*"))
} else := true if {
	count(f) <= 63
	startswith(f, "*-")
	is_label(substring(f, 2, -1))
}

# netip.ParseAddr.
is_ip(s) if {
	is_string(s)
	not contains(s, "/")
	not contains(s, "%")
	net.cidr_is_valid(concat("", [s, "/0"]))
}

# An IPv6 address with a zone, fe80::1%eth0.
is_ip(s) if {
	is_string(s)
	not contains(s, "/")
	parts := split(s, "%")
	count(parts) == 2
	contains(parts[0], ":")
	parts[1] != ""
	net.cidr_is_valid(concat("", [parts[0], "/0"]))
}

# netip.ParsePrefix (no sign or leading zero in the prefix length).
is_cidr(s) if {
	is_string(s)
	parts := split(s, "/")
	count(parts) == 2
	bits := parts[1]
	bits != ""
	count(bits) <= 3
	trim(bits, digits) == ""
	not leading_zero(bits)
	net.cidr_is_valid(s)
}

is_ip_or_cidr(s) := true if is_ip(s) else := true if is_cidr(s)

is_port(n) if {
	is_number(n)
	n >= 1
	n <= 65535
	n == floor(n)
}

leading_zero(n) if {
	startswith(n, "0")
	n != "0"
}

# A decimal string as a number (to_number refuses leading zeros).
digits_value(s) := 0 if trim_left(s, "0") == "" else := to_number(trim_left(s, "0"))

known_protocols := {"tcp", "udp", "grpc", "grpc-web", "http", "http_proxy", "http2", "https", "tls", "mongo", "redis", "mysql"}

protocols_text := "TCP, UDP, GRPC, GRPC-Web, HTTP, HTTP_PROXY, HTTP2, HTTPS, TLS, Mongo, Redis or MySQL"

# A set protocol Istio does not know.
bad_protocol(p) if {
	is_string(p)
	p != ""
	not lower(p) in known_protocols
}

qualified_chars := concat("", [alnum, "-_."])

# A qualified name: letters, digits, '-', '_' and '.', starting and ending with a letter or digit.
qualified_name(n) if {
	n != ""
	trim(n, qualified_chars) == ""
	trim(substring(n, 0, 1), alnum) == ""
	trim(substring(n, count(n) - 1, 1), alnum) == ""
}

label_key_ok(k) := true if {
	not contains(k, "/")
	count(k) <= 63
	qualified_name(k)
} else := true if {
	# <DNS subdomain>/<name>; the subdomain's labels have no length limit here.
	parts := split(k, "/")
	count(parts) == 2
	prefix := parts[0]
	count(prefix) <= 253
	every l in split(prefix, ".") {
		l != ""
		trim(l, label_chars) == ""
		not startswith(l, "-")
		not endswith(l, "-")
	}
	count(parts[1]) <= 63
	qualified_name(parts[1])
}

# Letters and digits only: valid, and most labels are (a cheap test before the full one).
plain_label(k, v) if {
	k != ""
	count(k) <= 63
	trim(k, alnum) == ""
	is_string(v)
	trim(v, alnum) == ""
}

# labels.Instance.Validate: what is wrong with one label, if anything.
label_problem(k, v) := sprintf("the label key %s is not a valid label key (an optional DNS prefix and /, then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)", [q(k)]) if {
	not label_key_ok(k)
} else := sprintf("the value %s of label %s is not a valid label value (letters, digits, '-', '_' or '.', starting and ending with a letter or digit, or empty)", [q(v), k]) if {
	is_string(v)
	v != ""
	not qualified_name(v)
}

label_fix := "Fix the label to Kubernetes label syntax, e.g. app.kubernetes.io/name: reports."

# ValidateUnixAddress of what follows unix://, if anything is wrong with it.
unix_problem(p) := "nothing follows unix://" if p == ""
else := "the socket path after unix:// is not absolute (it must start with / or, for an abstract socket, @)" if {
	not startswith(p, "@")
	not startswith(p, "/")
} else := "the socket path after unix:// ends with /, a directory" if {
	not startswith(p, "@")
	endswith(p, "/")
}

unix_fix := "Write it as unix:///absolute/path/to.sock or unix://@abstract-name."

# A Go duration (time.ParseDuration) as Istio requires it: at least 1ms, whole milliseconds.
duration_re := `^[-+]?(?:0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+)$`

# The same, short and without long digit runs, so that parsing it cannot overflow.
parsable_duration_re := `^[-+]?(?:0|(?:(?:[0-9]{1,6}(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+)$`

duration_parsable(d) if {
	count(d) <= 15
	regex.match(parsable_duration_re, d)
}

duration_problem(d) := problem if {
	is_string(d)
	duration_parsable(d)
	ns := time.parse_duration_ns(d)
	problem := duration_ns_problem(ns)
} else := "is not a duration (such as 500ms, 10s or 1m)" if {
	is_string(d)
	not duration_parsable(d)
	not regex.match(duration_re, d)
}

duration_ns_problem(ns) := "is shorter than 1ms" if ns < 1000000
else := "is not a whole number of milliseconds" if ns % 1000000 != 0

duration_fix := "Use a duration of at least 1ms in whole milliseconds, e.g. 500ms or 10s."

# ---------------------------------------------------------------------------
# All kinds: annotations the webhook refuses (validateMetadata)

actions := {null: "ALLOW", "": "ALLOW", "ALLOW": "ALLOW", "DENY": "DENY", "AUDIT": "AUDIT", "CUSTOM": "CUSTOM"}

annotated := [m |
	some kind in kinds
	some r in istio_resources[kind]
	anns := object.get(r.body, ["metadata", "annotations"], null)
	is_object(anns)
	count(anns) > 0
	m := {
		"o": {"id": r.id, "kind": kind, "name": r.name, "ns": r.namespace},
		"kind": kind,
		"anns": anns,
		"action": object.get(actions, at(object.get(r.body, "spec", null), "action", null), "INVALID"),
	}
]

dry_run := "istio.io/dry-run"

issues contains [m.o.id, ["metadata", "annotations", dry_run], say(m.o, text, "Remove the annotation.")] if {
	some m in annotated
	m.kind != "AuthorizationPolicy"
	dry_run in object.keys(m.anns)
	text := sprintf("metadata.annotations[\"istio.io/dry-run\"] is set, but only an AuthorizationPolicy can be run dry, not a %s", [m.kind])
}

issues contains [m.o.id, ["metadata", "annotations", dry_run], say(m.o, text, fix)] if {
	some m in annotated
	m.kind == "AuthorizationPolicy"
	dry_run in object.keys(m.anns)
	not m.action in {"ALLOW", "DENY", "INVALID"}
	text := sprintf("metadata.annotations[\"istio.io/dry-run\"] is set on a policy with action %s: dry run is only supported for ALLOW and DENY", [m.action])
	fix := "Remove the annotation, or try the rule as an ALLOW or DENY policy."
}

bool_strings := {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}

issues contains [m.o.id, ["metadata", "annotations", dry_run], say(m.o, text, fix)] if {
	some m in annotated
	m.kind == "AuthorizationPolicy"
	m.action in {"ALLOW", "DENY"}
	v := object.get(m.anns, dry_run, null)
	dry_run in object.keys(m.anns)
	not v in bool_strings
	text := sprintf("metadata.annotations[\"istio.io/dry-run\"] is %s, which is not a boolean", [q(v)])
	fix := "Set it to \"true\" or \"false\"."
}

internal_annotations := ["internal.istio.io/webhook-always-reject", "internal.istio.io/parents", "internal.istio.io/parent-namespace"]

issues contains [m.o.id, ["metadata", "annotations", a], say(m.o, text, "Remove the annotation.")] if {
	some m in annotated
	some a in internal_annotations
	a in object.keys(m.anns)
	text := sprintf("metadata.annotations[%s] is set: it is internal to istiod and may not be set by users", [q(a)])
}

# ---------------------------------------------------------------------------
# selector, targetRef, targetRefs (AuthorizationPolicy, RequestAuthentication, Telemetry)

attach_kinds := ["AuthorizationPolicy", "RequestAuthentication", "Telemetry"]

# An empty selector or targetRef still counts as set (authz/selector-and-target-ref says
# the non-empty ones).
issues contains [o.id, ["spec", set[1]], say(o, text, fix)] if {
	some kind in attach_kinds
	some o in objs[kind]
	set := array.concat(
		[k | some k in ["selector", "targetRef"]; is_object(object.get(o.spec, k, null))],
		[k | k := "targetRefs"; refs := object.get(o.spec, k, null); is_array(refs); count(refs) > 0],
	)
	count(set) > 1
	used := [k | some k in ["selector", "targetRef", "targetRefs"]; not object.get(o.spec, k, null) in data.meshward.lib.empty_values]
	count(used) <= 1
	text := sprintf("both spec.%s and spec.%s are set (an empty one counts as set): at most one of selector, targetRef and targetRefs is allowed", [set[0], set[1]])
	fix := "Remove the one not meant (an empty selector: {} too)."
}

target_refs := array.concat(
	[[o, ["spec", "targetRef"], ref] |
		some kind in attach_kinds
		some o in objs[kind]
		ref := object.get(o.spec, "targetRef", null)
		is_object(ref)
	],
	[[o, ["spec", "targetRefs", i], ref] |
		some kind in attach_kinds
		some o in objs[kind]
		some i, ref in arr(object.get(o.spec, "targetRefs", null))
		is_object(ref)
	],
)

allowed_targets := {
	["core", "Service"], ["networking.istio.io", "ServiceEntry"],
	["gateway.networking.k8s.io", "Gateway"], ["gateway.networking.k8s.io", "GatewayClass"],
}

issues contains [o.id, array.concat(path, ["kind"]), say(o, text, fix)] if {
	some [o, path, ref] in target_refs
	kind := object.get(ref, "kind", "")
	is_string(kind)
	kind != ""
	group := object.get(ref, "group", "")
	is_string(group)
	not [object.get({"": "core"}, group, group), kind] in allowed_targets
	text := sprintf("%s names group %s kind %s: a policy can only target a Service (group \"\"), a ServiceEntry (networking.istio.io), or a Gateway or GatewayClass (gateway.networking.k8s.io)", [ft(path), q(group), q(kind)])
	fix := "Target the Service, ServiceEntry or Gateway instead, with its group."
}

issues contains [o.id, array.concat(path, ["namespace"]), say(o, text, fix)] if {
	some [o, path, ref] in target_refs
	ns := object.get(ref, "namespace", "")
	is_string(ns)
	ns != ""
	text := sprintf("%s.namespace is %s: cross-namespace references are not supported", [ft(path), q(ns)])
	fix := "Remove the namespace and put the policy in the namespace of what it targets."
}

# ---------------------------------------------------------------------------
# ServiceEntry (ValidateServiceEntry)

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

# ---------------------------------------------------------------------------
# WorkloadEntry (validateWorkloadEntry)

wes := [w |
	some o in objs.WorkloadEntry
	w := {
		"o": o,
		"address": object.get(o.spec, "address", ""),
		"ports": object.get(o.spec, "ports", null),
	}
]

# Addresses workloadentry/invalid-address reports already.
we_address_reported := {we.id |
	some we in data.meshward.lib.model_workload_entries
	is_string(object.get(we, "address_problem", null))
}

issues contains [w.o.id, ["spec", "address"], say(w.o, text, unix_fix)] if {
	some w in wes
	not w.o.id in we_address_reported
	a := w.address
	is_string(a)
	startswith(a, "unix://")
	problem := unix_problem(substring(a, 7, -1))
	text := sprintf("spec.address %s is not a valid unix socket address: %s", [q(a), problem])
}

issues contains [w.o.id, ["spec", "address"], say(w.o, text, fix)] if {
	some w in wes
	not w.o.id in we_address_reported
	a := w.address
	is_string(a)
	a != ""
	not startswith(a, "unix://")
	not is_ip(a)
	not is_fqdn(a)
	text := sprintf("spec.address %s is neither an IP address nor a fully qualified host name (DNS labels of letters, digits and '-', the last one not all digits)", [q(a)])
	fix := "Use the server's IP address, a host name such as vm1.example.com, or a unix:// socket path."
}

issues contains [w.o.id, ["spec", "ports"], say(w.o, text, fix)] if {
	some w in wes
	is_string(w.address)
	startswith(w.address, "unix://")
	not w.ports in data.meshward.lib.empty_values
	text := sprintf("spec.address is the unix socket %s and spec.ports is set: a unix socket has no ports", [w.address])
	fix := "Remove spec.ports."
}

issues contains [w.o.id, ["spec", "ports", k], say(w.o, text, fix)] if {
	some w in wes
	is_object(w.ports)
	some k, v in w.ports
	problem := we_port_problem(k, v)
	text := sprintf("spec.ports[%s] %s", [q(k), problem])
	fix := "Key each port by the service port's name, with the server's port number (1..65535) as value."
}

we_port_problem(k, v) := "is not a valid port name (a DNS-1123 label)" if {
	not is_label(k)
} else := sprintf("is %v, outside 1..65535", [v]) if {
	not is_port(v)
}

issues contains [w.o.id, ["spec", "labels", k], say(w.o, text, label_fix)] if {
	some w in wes
	labels := object.get(w.o.spec, "labels", null)
	is_object(labels)
	some k, v in labels
	not plain_label(k, v)
	problem := label_problem(k, v)
	text := sprintf("spec.labels: %s", [problem])
}

# ---------------------------------------------------------------------------
# WorkloadGroup (ValidateWorkloadGroup, validateReadinessProbe)

issues contains [o.id, ["spec", "metadata", "labels", k], say(o, text, label_fix)] if {
	some o in objs.WorkloadGroup
	labels := object.get(o.spec, ["metadata", "labels"], null)
	is_object(labels)
	some k, v in labels
	not plain_label(k, v)
	problem := label_problem(k, v)
	text := sprintf("spec.metadata.labels: %s", [problem])
}

wg_probes := [[o, p] |
	some o in objs.WorkloadGroup
	p := object.get(o.spec, "probe", null)
	is_object(p)
]

# No method at all (workloadgroup/probe-multiple-methods says several), or grpc, which the
# webhook does not know.
issues contains [o.id, ["spec", "probe"], say(o, text, fix)] if {
	some [o, p] in wg_probes
	count([m | some m in ["httpGet", "tcpSocket", "exec", "grpc"]; object.get(p, m, null) != null]) == 0
	text := "spec.probe is set without a method: it needs one of httpGet, tcpSocket or exec"
	fix := "Add httpGet (path and port), tcpSocket (port) or exec (command), or remove the probe."
}

issues contains [o.id, ["spec", "probe", "grpc"], say(o, text, fix)] if {
	some [o, p] in wg_probes
	[m | some m in ["httpGet", "tcpSocket", "exec", "grpc"]; object.get(p, m, null) != null] == ["grpc"]
	text := "spec.probe uses grpc, which the CRD allows but Istio's webhook does not: it knows only httpGet, tcpSocket and exec"
	fix := "Probe with httpGet, tcpSocket or exec instead."
}

issues contains [o.id, ["spec", "probe", field], say(o, text, fix)] if {
	some [o, p] in wg_probes
	some field in ["initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"]
	n := object.get(p, field, 0)
	is_number(n)
	n < 0
	text := sprintf("spec.probe.%s is %v, negative", [field, n])
	fix := "Use 0 or more."
}

probe_header_name(n) if {
	n != ""
	trim(n, label_chars) == ""
}

issues contains [o.id, ["spec", "probe", "httpGet", "httpHeaders", i, "name"], say(o, text, fix)] if {
	some [o, p] in wg_probes
	some i, h in arr(at(object.get(p, "httpGet", null), "httpHeaders", null))
	is_object(h)
	n := object.get(h, "name", "")
	is_string(n)
	not probe_header_name(n)
	text := sprintf("spec.probe.httpGet.httpHeaders[%d].name %s is not a valid probe header name (letters, digits and '-' only, no '_')", [i, q(n)])
	fix := "Name the header with letters, digits and '-', e.g. X-Probe."
}

# ---------------------------------------------------------------------------
# PeerAuthentication (ValidatePeerAuthentication; mtls/port-level-requires-selector says the rest)

issues contains [o.id, ["spec", "portLevelMtls"], say(o, text, fix)] if {
	some o in objs.PeerAuthentication
	object.get(o.spec, "portLevelMtls", null) == {}
	text := "spec.portLevelMtls is present but empty"
	fix := "Remove portLevelMtls, or add port numbers with their mode."
}

issues contains [o.id, ["spec", "portLevelMtls", k], say(o, text, fix)] if {
	some o in objs.PeerAuthentication
	some k, _ in obj(object.get(o.spec, "portLevelMtls", null))
	not port_key_ok(k)
	text := sprintf("spec.portLevelMtls has the key %s, which is not a port number in 1..65535", [q(k)])
	fix := "Key portLevelMtls by the workload's port numbers, e.g. 8080."
}

port_key_ok(k) if {
	k != ""
	count(k) <= 5
	trim(k, digits) == ""
	not startswith(k, "0")
	to_number(k) <= 65535
}

# ---------------------------------------------------------------------------
# AuthorizationPolicy (ValidateAuthorizationPolicy)

aps := [a |
	some o in objs.AuthorizationPolicy
	rules := object.get(o.spec, "rules", null)
	a := {
		"o": o,
		"action": object.get(actions, object.get(o.spec, "action", null), "INVALID"),
		"rules": arr(rules),
		"provider": object.get(o.spec, "provider", null),
	}
]

issues contains [a.o.id, ["spec", "rules"], say(a.o, text, fix)] if {
	some a in aps
	a.action in {"DENY", "CUSTOM"}
	count(a.rules) == 0
	text := sprintf("spec.action is %s but spec.rules is missing or empty: the policy would never apply", [a.action])
	fix := "Add rules; a single empty rule {} applies it to every request."
}

issues contains [a.o.id, path, say(a.o, text, fix)] if {
	some a in aps
	a.action == "CUSTOM"
	count(a.rules) > 0
	name := at(a.provider, "name", "")
	name in {null, ""}
	path := array.concat(["spec", "provider"], [x | x := "name"; is_object(a.provider)])
	text := "spec.action is CUSTOM but spec.provider.name is not set: CUSTOM delegates the decision to an extension provider"
	fix := "Set spec.provider.name to an extensionProviders name of the mesh config."
}

issues contains [a.o.id, ["spec", "provider"], say(a.o, text, fix)] if {
	some a in aps
	a.provider != null
	not a.action in {"CUSTOM", "INVALID"}
	text := sprintf("spec.provider is set with action %s: a provider is only used with action CUSTOM", [a.action])
	fix := "Remove spec.provider, or set action: CUSTOM."
}

ap_rules := [[a, i, rule] |
	some a in aps
	some i, rule in a.rules
	is_object(rule)
]

ap_froms := [[a, ["spec", "rules", i, "from", j], from] |
	some [a, i, rule] in ap_rules
	some j, from in arr(object.get(rule, "from", null))
]

ap_tos := [[a, ["spec", "rules", i, "to", j], t] |
	some [a, i, rule] in ap_rules
	some j, t in arr(object.get(rule, "to", null))
]

ap_whens := [[a, ["spec", "rules", i, "when", j], w] |
	some [a, i, rule] in ap_rules
	some j, w in arr(object.get(rule, "when", null))
	is_object(w)
]

ap_sources := [[a, array.concat(p, ["source"]), src] |
	some [a, p, from] in ap_froms
	src := at(from, "source", null)
	is_object(src)
]

ap_operations := [[a, array.concat(p, ["operation"]), op] |
	some [a, p, t] in ap_tos
	op := at(t, "operation", null)
	is_object(op)
]

source_fields := [
	"principals", "notPrincipals", "requestPrincipals", "notRequestPrincipals",
	"namespaces", "notNamespaces", "ipBlocks", "notIpBlocks", "remoteIpBlocks", "notRemoteIpBlocks",
	"serviceAccounts", "notServiceAccounts", "trustDomains", "notTrustDomains",
]

operation_fields := ["ports", "notPorts", "methods", "notMethods", "paths", "notPaths", "hosts", "notHosts"]

issues contains [a.o.id, p, say(a.o, text, fix)] if {
	some [a, p, from] in ap_froms
	not is_object(at(from, "source", null))
	text := sprintf("%s has no source", [ft(p)])
	fix := "Add source with the callers to match (principals, namespaces, ipBlocks, ...), or remove this from entry."
}

issues contains [a.o.id, p, say(a.o, text, fix)] if {
	some [a, p, src] in ap_sources
	every f in source_fields {
		object.get(src, f, null) in data.meshward.lib.empty_values
	}
	text := sprintf("%s is empty: it names no caller", [ft(p)])
	fix := "Name the callers to match, or remove the from entry to match any caller."
}

issues contains [a.o.id, p, say(a.o, text, fix)] if {
	some [a, p, t] in ap_tos
	not is_object(at(t, "operation", null))
	text := sprintf("%s has no operation", [ft(p)])
	fix := "Add operation with what to match (ports, methods, paths, hosts), or remove this to entry."
}

issues contains [a.o.id, p, say(a.o, text, fix)] if {
	some [a, p, op] in ap_operations
	every f in operation_fields {
		object.get(op, f, null) in data.meshward.lib.empty_values
	}
	text := sprintf("%s is empty: it names no operation", [ft(p)])
	fix := "Name what to match, or remove the to entry to match any operation."
}

# serviceAccounts exclude principals and namespaces, negated or not
# (authz/service-accounts-with-principals says the pairs of equal polarity).
issues contains [a.o.id, array.concat(p, [sa_field]), say(a.o, text, fix)] if {
	some [a, p, src] in ap_sources
	some [sa_field, others] in [["serviceAccounts", ["notPrincipals", "notNamespaces"]], ["notServiceAccounts", ["principals", "namespaces"]]]
	not object.get(src, sa_field, null) in data.meshward.lib.empty_values
	clash := [x | some x in others; not object.get(src, x, null) in data.meshward.lib.empty_values]
	count(clash) > 0
	not same_polarity_clash(src)
	text := sprintf("%s.%s is set together with %s: service accounts cannot be combined with principals or namespaces", [ft(p), sa_field, concat(" and ", clash)])
	fix := "Name callers either by serviceAccounts (namespace/name) or by principals and namespaces, not both."
}

same_polarity_clash(src) if {
	not object.get(src, "serviceAccounts", null) in data.meshward.lib.empty_values
	some x in ["principals", "namespaces"]
	not object.get(src, x, null) in data.meshward.lib.empty_values
}

same_polarity_clash(src) if {
	not object.get(src, "notServiceAccounts", null) in data.meshward.lib.empty_values
	some x in ["notPrincipals", "notNamespaces"]
	not object.get(src, x, null) in data.meshward.lib.empty_values
}

# Items of the string lists of sources and operations.
# (Iterating the keys an object has is cheaper than looking up every field.)
ap_items := array.concat(
	[[a, array.concat(p, [f, k]), f, item] |
		some [a, p, src] in ap_sources
		some f, list in src
		is_array(list)
		f in source_field_set
		some k, item in list
		is_string(item)
	],
	[[a, array.concat(p, [f, k]), f, item] |
		some [a, p, op] in ap_operations
		some f, list in op
		is_array(list)
		f in operation_field_set
		some k, item in list
		is_string(item)
	],
)

source_field_set := {f | some f in source_fields}

operation_field_set := {f | some f in operation_fields}

ip_fields := {"ipBlocks", "notIpBlocks", "remoteIpBlocks", "notRemoteIpBlocks"}

sa_fields := {"serviceAccounts", "notServiceAccounts"}

td_fields := {"trustDomains", "notTrustDomains"}

issues contains [a.o.id, p, say(a.o, text, "Remove the empty entry.")] if {
	some [a, p, _, item] in ap_items
	item == ""
	text := sprintf("%s is empty", [ft(p)])
}

# The other checks, by field (only on non-empty items).
issues contains [a.o.id, p, say(a.o, text, item_fix(f))] if {
	some [a, p, f, item] in ap_items
	item != ""
	f in checked_fields
	problem := item_problem(f, item)
	text := sprintf("%s %s %s", [ft(p), q(item), problem])
}

checked_fields := {
	"ipBlocks", "notIpBlocks", "remoteIpBlocks", "notRemoteIpBlocks", "serviceAccounts", "notServiceAccounts",
	"trustDomains", "notTrustDomains", "ports", "notPorts", "paths", "notPaths",
}

item_problem(f, item) := "is not an IP address or CIDR range" if {
	f in ip_fields
	not is_ip_or_cidr(item)
} else := problem if {
	f in sa_fields
	problem := sa_problem(item)
} else := problem if {
	f in td_fields
	problem := td_problem(item)
} else := "is not a port number in 0..65535" if {
	f in {"ports", "notPorts"}
	not port_string_ok(item)
} else := problem if {
	f in {"paths", "notPaths"}
	brace(item)
	problem := path_template_problem(item)
}

item_fix(f) := "Use an IP address or a CIDR range such as 10.0.0.0/16." if f in ip_fields
else := "Write it as <service-account> or <namespace>/<service-account>, without wildcards." if f in sa_fields
else := "Use a trust domain such as cluster.local, with * only as its first or last character." if f in td_fields
else := "Use a port number as a string, e.g. \"8080\"." if f in {"ports", "notPorts"}
else := "Use {*} for one path segment and {**} (last only) for the rest; otherwise only URL path characters." if f in {"paths", "notPaths"}
else := "Remove the empty entry."

# CheckServiceAccount
sa_problem(s) := "contains *, and service accounts are matched exactly" if contains(s, "*")
else := "has more than one /" if strings.count(s, "/") > 1
else := "is longer than 320 characters" if count(s) > 320
else := "has an empty namespace or name around its /" if {
	contains(s, "/")
	some part in split(s, "/")
	part == ""
}

# CheckTrustDomainValues
td_problem(s) := "has more than one *" if strings.count(s, "*") > 1
else := "has a * in the middle (only first or last is allowed)" if {
	contains(s, "*")
	s != "*"
	not startswith(s, "*")
	not endswith(s, "*")
} else := "contains /" if contains(s, "/")

port_string_ok(s) if {
	s != ""
	trim(s, digits) == ""
	count(trim_left(s, "0")) <= 5
	digits_value(s) <= 65535
}

# CheckValidPathTemplate: {*} and {**} as whole segments, {**} last; with a template,
# the other segments only of URL path characters.
path_template_problem(path) := "has {**} before another template: {**} must be the last" if {
	segs := split(trim(path, "/"), "/")
	some i, s in segs
	s == "{**}"
	some j, t in segs
	j > i
	t in {"{*}", "{**}"}
} else := "has { or } outside a {*} or {**} segment" if {
	some s in split(trim(path, "/"), "/")
	not s in {"{*}", "{**}"}
	brace(s)
} else := "has a template and a segment with characters outside the URL path set" if {
	has_template(path)
	some s in split(trim(path, "/"), "/")
	not s in {"{*}", "{**}"}
	not path_literal(s)
}

brace(s) := true if contains(s, "{") else := true if contains(s, "}")

has_template(path) := true if contains(path, "{*}") else := true if contains(path, "{**}")

# RFC 3986 pchar, as Envoy's path templates take it.
path_literal(s) if {
	s != ""
	trim(s, concat("", [alnum, "-._~%!$&'()+,;:@="])) == ""
}

issues contains [a.o.id, p, say(a.o, text, fix)] if {
	some [a, p0, src] in ap_sources
	some f in sa_fields
	list := arr(object.get(src, f, null))
	count(list) > 16
	p := array.concat(p0, [f])
	text := sprintf("%s lists %d service accounts, more than 16", [ft(p), count(list)])
	fix := "Split the rule, or name the callers by namespace."
}

# when conditions (security.ValidateAttribute)
issues contains [a.o.id, array.concat(p, ["key"]), say(a.o, text, fix)] if {
	some [a, p, w] in ap_whens
	object.get(w, "key", null) == ""
	text := sprintf("%s.key is empty", [ft(p)])
	fix := "Set the attribute to match, e.g. request.headers[x-token] or source.ip."
}

issues contains [a.o.id, p, say(a.o, text, fix)] if {
	some [a, p, w] in ap_whens
	key := object.get(w, "key", "")
	is_string(key)
	key != ""
	object.get(w, "values", null) in data.meshward.lib.empty_values
	object.get(w, "notValues", null) in data.meshward.lib.empty_values
	text := sprintf("%s (key %s) has neither values nor notValues", [ft(p), key])
	fix := "Add the values to match."
}

issues contains [a.o.id, array.concat(p, ["key"]), say(a.o, text, fix)] if {
	some [a, p, w] in ap_whens
	key := object.get(w, "key", "")
	is_string(key)
	key != ""
	problem := when_key_problem(key)
	problem != ""
	text := sprintf("%s.key %s %s", [ft(p), q(key), problem])
	fix := "Use a supported attribute: request.headers[<name>], source.ip, remote.ip, source.namespace, source.serviceAccount, source.principal, source.trustDomain, request.auth.principal, request.auth.audiences, request.auth.presenter, request.auth.claims[<name>], destination.ip, destination.port, connection.sni."
}

issues contains [a.o.id, array.concat(p, [f, k]), say(a.o, text, fix)] if {
	some [a, p, w] in ap_whens
	key := object.get(w, "key", "")
	is_string(key)
	key != ""
	some f in ["values", "notValues"]
	some k, v in arr(object.get(w, f, null))
	is_string(v)
	problem := when_value_problem(key, v)
	text := sprintf("%s.%s[%d] %s (key %s) %s", [ft(p), f, k, q(v), key, problem])
	fix := "Fix or remove the value."
}

map_key_ok(key) if {
	endswith(key, "]")
	open := indexof(key, "[")
	open > 0
	open < count(key) - 2
}

when_key_problem(key) := "is not of the form request.headers[<name>]" if {
	startswith(key, "request.headers")
	not map_key_ok(key)
} else := "" if {
	startswith(key, "request.headers")
} else := "" if {
	key in {
		"source.ip", "remote.ip", "source.namespace", "source.serviceAccount", "source.principal",
		"source.trustDomain", "request.auth.principal", "request.auth.audiences", "request.auth.presenter",
	}
} else := "is not of the form request.auth.claims[<name>]" if {
	startswith(key, "request.auth.claims")
	not map_key_ok(key)
} else := "" if {
	startswith(key, "request.auth.claims")
} else := "" if {
	key in {"destination.ip", "destination.port", "connection.sni"}
} else := "is not of the form experimental.envoy.filters.<...>[<name>]" if {
	startswith(key, "experimental.envoy.filters.")
	not map_key_ok(key)
} else := "" if {
	startswith(key, "experimental.envoy.filters.")
} else := "is no longer supported: the policy's own namespace (metadata.namespace) replaces it" if {
	key == "destination.namespace"
} else := "is no longer supported: the workload selector replaces it" if {
	startswith(key, "destination.labels")
} else := "is no longer supported (v1alpha1 only)" if {
	key in {"destination.name", "destination.user"}
} else := "is not an attribute Istio knows"

when_value_problem(key, v) := "is empty" if {
	v == ""
} else := "is not an IP address or CIDR range" if {
	key in {"source.ip", "remote.ip", "destination.ip"}
	not is_ip_or_cidr(v)
} else := problem if {
	key == "source.serviceAccount"
	problem := sa_problem(v)
} else := problem if {
	key == "source.trustDomain"
	problem := wildcard_value_problem(v)
} else := "is not a port number in 0..65535" if {
	key == "destination.port"
	not port_string_ok(v)
}

# CheckWildcardValues
wildcard_value_problem(s) := "has more than one *" if strings.count(s, "*") > 1
else := "has a * in the middle (only first or last is allowed)" if {
	contains(s, "*")
	s != "*"
	not startswith(s, "*")
	not endswith(s, "*")
}

# CUSTOM: the external authorizer sees no peer identity or JWT.
custom_source_fields := [
	"principals", "notPrincipals", "requestPrincipals", "notRequestPrincipals",
	"namespaces", "notNamespaces", "serviceAccounts", "notServiceAccounts", "trustDomains", "notTrustDomains",
]

issues contains [a.o.id, array.concat(p, [f]), say(a.o, text, fix)] if {
	some [a, p, src] in ap_sources
	a.action == "CUSTOM"
	some f in custom_source_fields
	not object.get(src, f, null) in data.meshward.lib.empty_values
	text := sprintf("%s.%s is set with action CUSTOM, which does not support matching on it", [ft(p), f])
	fix := "Match CUSTOM rules on ipBlocks, remoteIpBlocks or the operation only, or use an ALLOW/DENY policy for identities."
}

issues contains [a.o.id, array.concat(p, ["key"]), say(a.o, text, fix)] if {
	some [a, p, w] in ap_whens
	a.action == "CUSTOM"
	key := object.get(w, "key", "")
	is_string(key)
	custom_when_key(key)
	text := sprintf("%s.key %s is used with action CUSTOM, which does not support it", [ft(p), key])
	fix := "Remove the condition, or use an ALLOW/DENY policy for identities and JWT claims."
}

custom_when_key(key) if key in {"source.namespace", "source.serviceAccount", "source.trustDomain", "source.principal"}

custom_when_key(key) if startswith(key, "request.auth.")

# ---------------------------------------------------------------------------
# RequestAuthentication (validateJwtRule)

jwt_rules := [[o, ["spec", "jwtRules", i], rule] |
	some o in objs.RequestAuthentication
	some i, rule in arr(object.get(o.spec, "jwtRules", null))
	is_object(rule)
]

# jwksUri and its proto name jwks_uri (jwksUri wins when both are set).
jwks_uri_field(rule) := "jwksUri" if object.get(rule, "jwksUri", null) != null else := "jwks_uri"

issues contains [o.id, array.concat(p, ["issuer"]), say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	object.get(rule, "issuer", null) in {null, ""}
	object.get(rule, jwks_uri_field(rule), null) in {null, ""}
	text := sprintf("%s has neither issuer nor jwksUri", [ft(p)])
	fix := "Set the issuer (iss claim) of the tokens, and where its keys are."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	field := jwks_uri_field(rule)
	uri := object.get(rule, field, "")
	is_string(uri)
	uri != ""
	not jwks_uri_ok(uri)
	path := array.concat(p, [field])
	text := sprintf("%s %s is not an http:// or https:// URL", [ft(path), q(uri)])
	fix := "Use the https:// URL of the issuer's JWKS."
}

jwks_uri_ok(uri) if {
	http_scheme(lower(uri))
	not regex.match(`[\x00-\x1f\x7f]`, uri)
}

http_scheme(uri) := true if startswith(uri, "http:") else := true if startswith(uri, "https:")

issues contains [o.id, array.concat(p, ["jwks"]), say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	jwks := object.get(rule, "jwks", "")
	is_string(jwks)
	jwks != ""
	problem := jwks_problem(jwks)
	text := sprintf("%s.jwks does not parse as a JSON Web Key Set: %s", [ft(p), problem])
	fix := "Paste the issuer's JWKS document ({\"keys\": [...]}), or use jwksUri."
}

kty_values := {"RSA", "EC", "oct", "OKP"}

jwks_problem(s) := "it is not JSON" if not json.is_valid(s)
else := "it is not a JSON object" if not is_object(json.unmarshal(s))
else := "its keys field is not a list" if {
	v := json.unmarshal(s)
	ks := object.get(v, "keys", null)
	ks != null
	not is_array(ks)
} else := "a key has no kty of RSA, EC, oct or OKP" if {
	ks := object.get(json.unmarshal(s), "keys", null)
	is_array(ks)
	some k in ks
	not at(k, "kty", null) in kty_values
} else := "it has no keys list and is no single key with a kty of RSA, EC, oct or OKP" if {
	v := json.unmarshal(s)
	not "keys" in object.keys(v)
	not object.get(v, "kty", null) in kty_values
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	some f in ["audiences", "fromParams", "fromCookies"]
	some k, v in arr(object.get(rule, f, null))
	v == ""
	path := array.concat(p, [f, k])
	text := sprintf("%s is an empty string", [ft(path)])
	fix := "Remove the empty entry."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	some k, h in arr(object.get(rule, "fromHeaders", null))
	at(h, "name", null) in {null, ""}
	path := array.concat(p, ["fromHeaders", k, "name"])
	text := sprintf("%s is missing or empty", [ft(path)])
	fix := "Name the header the token is read from, e.g. Authorization."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	some k, c in arr(object.get(rule, "outputClaimToHeaders", null))
	problem := claim_header_problem(c)
	path := array.concat(p, ["outputClaimToHeaders", k])
	text := sprintf("%s %s", [ft(path), problem])
	fix := "Set both claim and header; header names use letters, digits, '-' and '_'."
}

claim_header_problem(c) := "has an empty claim or header" if {
	some f in ["claim", "header"]
	at(c, f, null) in {null, ""}
} else := sprintf("header %s is not a valid header name (letters, digits, '-' and '_')", [q(h)]) if {
	h := at(c, "header", "")
	is_string(h)
	not strict_header_name(h)
}

strict_header_name(h) if {
	h != ""
	trim(h, concat("", [word_chars, "-"])) == ""
}

issues contains [o.id, array.concat(p, ["timeout"]), say(o, text, duration_fix)] if {
	some [o, p, rule] in jwt_rules
	d := object.get(rule, "timeout", null)
	problem := duration_problem(d)
	text := sprintf("%s.timeout %s %s", [ft(p), q(d), problem])
}

# ---------------------------------------------------------------------------
# Sidecar (ValidateSidecar)

sidecars := [s |
	some o in objs.Sidecar
	s := {
		"o": o,
		"egress": arr(object.get(o.spec, "egress", null)),
		"ingress": arr(object.get(o.spec, "ingress", null)),
	}
]

issues contains [s.o.id, ["spec"], say(s.o, text, fix)] if {
	some s in sidecars
	count(s.egress) == 0
	count(s.ingress) == 0
	object.get(s.o.spec, "outboundTrafficPolicy", null) == null
	object.get(s.o.spec, "inboundConnectionPool", null) == null
	text := "spec has none of egress, ingress, outboundTrafficPolicy and inboundConnectionPool: an empty Sidecar"
	fix := "Add egress hosts (e.g. ./* and istio-system/*), or remove the Sidecar."
}

# egress listeners
egress := [[s, i, eg, at(eg, "port", null)] |
	some s in sidecars
	some i, eg in s.egress
	is_object(eg)
]

issues contains [s.o.id, ["spec", "egress", i, "hosts"], say(s.o, text, fix)] if {
	some [s, i, eg, _] in egress
	object.get(eg, "hosts", null) == []
	text := sprintf("spec.egress[%d].hosts is empty", [i])
	fix := "List the hosts this listener reaches as namespace/host, e.g. ./* or istio-system/*."
}

issues contains [s.o.id, ["spec", "egress", i, "hosts", j], say(s.o, text, fix)] if {
	some [s, i, eg, _] in egress
	some j, h in arr(object.get(eg, "hosts", null))
	is_string(h)
	not egress_host_ok(h)
	problem := egress_host_problem(h)
	text := sprintf("spec.egress[%d].hosts[%d] %s %s", [i, j, q(h), problem])
	fix := "Write hosts as <namespace>/<host>: namespace *, . or a name (~ to exclude), host * or a full DNS name with an optional leading *. (e.g. ./*, istio-system/*, */api.example.com)."
}

# ValidateNamespaceSlashWildcardHostname, the usual case first: the problem is only
# looked for in a host that fails it.
egress_host_ok(h) if {
	i := indexof(h, "/")
	i > 0
	egress_namespace_ok(substring(h, 0, i))
	egress_dns_name_ok(substring(h, i + 1, -1))
}

egress_namespace_ok(ns) := true if {
	ns in {"*", ".", "~", "~*", "~."}
} else := true if {
	is_label(trim_prefix(ns, "~"))
}

egress_dns_name_ok(host) := true if {
	host == "*"
} else := true if {
	contains(host, ".")
	is_wildcard_domain(host)
	partial_wildcard_ok(host)
}

partial_wildcard_ok(host) := true if not contains(host, "*") else := true if startswith(host, "*.")

egress_host_problem(h) := "is not of the form namespace/host" if not contains(h, "/")
else := "has an empty namespace or host" if {
	parts := split(h, "/")
	some part in [parts[0], substring(h, count(parts[0]) + 1, -1)]
	part == ""
} else := "has an invalid namespace" if {
	ns := trim_prefix(split(h, "/")[0], "~")
	ns != ""
	not ns in {"*", "."}
	not is_label(ns)
} else := "names a short host name (Istio needs a full DNS name, with a dot)" if {
	host := substring(h, count(split(h, "/")[0]) + 1, -1)
	host != "*"
	not contains(host, ".")
} else := "names a host that is not a valid DNS name" if {
	host := substring(h, count(split(h, "/")[0]) + 1, -1)
	not is_wildcard_domain(host)
} else := "names a partial wildcard (only a whole leading *. label is allowed)" if {
	host := substring(h, count(split(h, "/")[0]) + 1, -1)
	contains(host, "*")
	host != "*"
	not startswith(host, "*.")
}

issues contains [s.o.id, ["spec", "egress", i], say(s.o, text, fix)] if {
	some [s, i, _, port] in egress
	port == null
	i != count(s.egress) - 1
	text := sprintf("spec.egress[%d] has no port, but only the last egress listener may be the catch-all without a port", [i])
	fix := "Give this listener a port, or move it to the end (only one listener may lack a port)."
}

egress_ports := [[s, i, eg, port, object.get(port, "number", 0)] |
	some [s, i, eg, port] in egress
	is_object(port)
]

sidecar_port_name_problem(port) := sprintf("name %s is not a DNS-1123 label", [q(n)]) if {
	n := object.get(port, "name", "")
	is_string(n)
	n != ""
	not is_label(n)
}

issues contains [s.o.id, array.concat(base, ["port", "name"]), say(s.o, text, fix)] if {
	some [s, base, port] in sidecar_ports
	problem := sidecar_port_name_problem(port)
	text := sprintf("%s.port.%s", [ft(base), problem])
	fix := "Name the port like http or tcp-db, or leave the name out."
}

issues contains [s.o.id, array.concat(base, ["port", "protocol"]), say(s.o, text, fix)] if {
	some [s, base, port] in sidecar_ports
	pr := object.get(port, "protocol", "")
	bad_protocol(pr)
	text := sprintf("%s.port.protocol %s is not a protocol Istio knows", [ft(base), q(pr)])
	fix := sprintf("Use one of %s (any case), or leave it unset.", [protocols_text])
}

issues contains [s.o.id, array.concat(base, ["port", "targetPort"]), say(s.o, text, fix)] if {
	some [s, base, port] in sidecar_ports
	t := object.get(port, "targetPort", 0)
	is_number(t)
	t > 0
	text := sprintf("%s.port.targetPort is set (%v): targetPort has no meaning in a Sidecar", [ft(base), t])
	fix := "Remove targetPort."
}

# Ports of egress and ingress listeners: [sidecar, path of the listener, port].
sidecar_ports := array.concat(
	[[s, ["spec", "egress", i], port] | some [s, i, _, port, _] in egress_ports],
	[[s, ["spec", "ingress", i], port] | some [s, i, _, port] in ingress_ports],
)

# Egress port 0: a unix domain socket listener.
issues contains [s.o.id, ["spec", "egress", i, "bind"], say(s.o, text, fix)] if {
	some [s, i, eg, _, n] in egress_ports
	n == 0
	bind := object.get(eg, "bind", "")
	is_string(bind)
	problem := uds_bind_problem(bind)
	text := sprintf("spec.egress[%d] has port number 0, a unix domain socket listener, but %s", [i, problem])
	fix := "Bind it to unix:///absolute/path.sock or unix://@name, or give the port a number in 1..65535."
}

uds_bind_problem(bind) := "no bind" if bind == ""
else := sprintf("its bind %s is not a unix:// address", [q(bind)]) if not startswith(bind, "unix://")
else := sprintf("its bind %s is not valid: %s", [q(bind), unix_problem(substring(bind, 7, -1))])

issues contains [s.o.id, ["spec", "egress", i, "captureMode"], say(s.o, text, fix)] if {
	some [s, i, eg, _, n] in egress_ports
	n == 0
	object.get(eg, "captureMode", "DEFAULT") == "IPTABLES"
	text := sprintf("spec.egress[%d] is a unix domain socket listener (port 0) with captureMode IPTABLES", [i])
	fix := "Use captureMode DEFAULT or NONE for a unix socket listener."
}

issues contains [s.o.id, ["spec", "egress", i, "port", "number"], say(s.o, text, fix)] if {
	some [s, i, _, _, n] in egress_ports
	is_number(n)
	n != 0
	not is_port(n)
	text := sprintf("spec.egress[%d].port.number is %v, outside 1..65535", [i, n])
	fix := "Use a port number in 1..65535 (0 only for a unix socket listener)."
}

issues contains [s.o.id, ["spec", "egress", i, "bind"], say(s.o, text, fix)] if {
	some [s, i, eg, _, n] in egress_ports
	n != 0
	bind := object.get(eg, "bind", "")
	is_string(bind)
	bind != ""
	not is_ip(bind)
	text := sprintf("spec.egress[%d].bind %s is not an IP address", [i, q(bind)])
	fix := "Bind to an IP address such as 127.0.0.1, or leave bind unset."
}

# Per Sidecar, its listeners with a port: egress [index, number, bind], ingress [index, number].
listener_ports := [[s, eps, ips] |
	some s in sidecars
	eps := [[i, object.get(port, "number", 0), at(eg, "bind", "")] |
		some i, eg in s.egress
		port := at(eg, "port", null)
		is_object(port)
	]
	ips := [[i, object.get(port, "number", 0)] |
		some i, ing in s.ingress
		port := at(ing, "port", null)
		is_object(port)
	]
]

issues contains [s.o.id, ["spec", "egress", j, "port", "number"], say(s.o, text, fix)] if {
	some [s, eps, _] in listener_ports
	some [j, n, _] in eps
	n != 0
	some [i, m, _] in eps
	i < j
	m == n
	text := sprintf("spec.egress[%d] listens on port %v like spec.egress[%d]: ports must be unique", [j, n, i])
	fix := "Merge the two listeners, or use another port."
}

issues contains [s.o.id, ["spec", "egress", j, "bind"], say(s.o, text, fix)] if {
	some [s, eps, _] in listener_ports
	some [j, n, bind] in eps
	n == 0
	some [i, m, bind2] in eps
	i < j
	m == 0
	bind2 == bind
	text := sprintf("spec.egress[%d] binds the unix socket %s like spec.egress[%d]: unix socket listeners must be unique", [j, q(bind), i])
	fix := "Use another socket path."
}

# ingress listeners
ingress := [[s, i, ing, at(ing, "port", null)] |
	some s in sidecars
	some i, ing in s.ingress
	is_object(ing)
]

ingress_ports := [[s, i, ing, port] |
	some [s, i, ing, port] in ingress
	is_object(port)
]

issues contains [s.o.id, ["spec", "ingress", i, "port"], say(s.o, text, fix)] if {
	some [s, i, _, port] in ingress
	port == null
	text := sprintf("spec.ingress[%d] has no port", [i])
	fix := "Set the port (number, protocol, name) the listener accepts traffic on."
}

issues contains [s.o.id, ["spec", "ingress", i, "port", "number"], say(s.o, text, fix)] if {
	some [s, i, _, port] in ingress_ports
	n := object.get(port, "number", 0)
	is_number(n)
	not is_port(n)
	text := sprintf("spec.ingress[%d].port.number is %v, outside 1..65535", [i, n])
	fix := "Use the port number the workload listens on (1..65535)."
}

issues contains [s.o.id, ["spec", "ingress", j, "port", "number"], say(s.o, text, fix)] if {
	some [s, _, ips] in listener_ports
	some [j, n] in ips
	some [i, m] in ips
	i < j
	m == n
	text := sprintf("spec.ingress[%d] listens on port %v like spec.ingress[%d]: ports must be unique", [j, n, i])
	fix := "Merge the two listeners, or use another port."
}

issues contains [s.o.id, ["spec", "ingress", i, "bind"], say(s.o, text, fix)] if {
	some [s, i, ing, _] in ingress_ports
	bind := object.get(ing, "bind", "")
	is_string(bind)
	bind != ""
	not is_ip(bind)
	text := sprintf("spec.ingress[%d].bind %s is not an IP address", [i, q(bind)])
	fix := "Bind to an IP address such as 0.0.0.0, or leave bind unset."
}

issues contains [s.o.id, ["spec", "ingress", i, "defaultEndpoint"], say(s.o, text, fix)] if {
	some [s, i, ing, _] in ingress_ports
	d := object.get(ing, "defaultEndpoint", "")
	is_string(d)
	d != ""
	problem := default_endpoint_problem(d)
	text := sprintf("spec.ingress[%d].defaultEndpoint %s %s", [i, q(d), problem])
	fix := "Use 127.0.0.1:<port>, 0.0.0.0:<port>, [::1]:<port>, [::]:<port>, :<port>, or unix:///path.sock."
}

default_endpoint_re := `^(?:127\.0\.0\.1|0\.0\.0\.0|\[(?:127\.0\.0\.1|0\.0\.0\.0|::1|::)?\])?:[-+]?[0-9]+$`

default_endpoint_problem(d) := problem if {
	startswith(d, "unix://")
	problem := unix_problem(substring(d, 7, -1))
} else := "is not a loopback or wildcard host and port, or a unix:// socket" if {
	not startswith(d, "unix://")
	not regex.match(default_endpoint_re, d)
} else := "has a port outside 1..65535" if {
	not startswith(d, "unix://")
	port := regex.find_n(`[0-9]+$`, d, 1)[0]
	not default_endpoint_port_ok(d, port)
}

default_endpoint_port_ok(d, port) if {
	not contains(d, ":-")
	count(trim_left(port, "0")) <= 5
	digits_value(port) >= 1
	digits_value(port) <= 65535
}

sidecar_tls := [[s, i, ing, tls, at(ing, "port", null)] |
	some [s, i, ing, _] in ingress
	tls := object.get(ing, "tls", null)
	is_object(tls)
]

tls_unsupported := ["credentialName", "credentialNames", "tlsCertificates", "subjectAltNames"]

issues contains [s.o.id, ["spec", "ingress", i, "tls", f], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	some f in tls_unsupported
	not object.get(tls, f, null) in data.meshward.lib.empty_values
	text := sprintf("spec.ingress[%d].tls.%s is set, which a Sidecar does not support", [i, f])
	fix := "Give the certificate as files: serverCertificate and privateKey (caCertificates for MUTUAL), mounted into the proxy."
}

issues contains [s.o.id, ["spec", "ingress", i, "tls", "httpsRedirect"], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	object.get(tls, "httpsRedirect", false) == true
	text := sprintf("spec.ingress[%d].tls.httpsRedirect is set, which a Sidecar does not support", [i])
	fix := "Remove httpsRedirect."
}

issues contains [s.o.id, ["spec", "ingress", i, "tls", "mode"], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	mode := object.get(tls, "mode", "")
	mode in {"ISTIO_MUTUAL", "AUTO_PASSTHROUGH"}
	text := sprintf("spec.ingress[%d].tls.mode is %s, which a Sidecar ingress listener does not support", [i, mode])
	fix := "Use SIMPLE, MUTUAL or OPTIONAL_MUTUAL with certificate files (mesh mTLS needs no tls block at all)."
}

issues contains [s.o.id, ["spec", "ingress", i, "tls"], say(s.o, text, fix)] if {
	some [s, i, _, _, port] in sidecar_tls
	pr := at(port, "protocol", "")
	is_string(pr)
	not lower(pr) in {"https", "tls"}
	text := sprintf("spec.ingress[%d] has tls settings but its port's protocol is %s, not HTTPS or TLS", [i, q(pr)])
	fix := "Set the port's protocol to HTTPS or TLS, or remove tls."
}

# validateTLSOptions: SIMPLE and MUTUAL need certificate files (credentialName is said above).
issues contains [s.o.id, ["spec", "ingress", i, "tls", f], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	mode := object.get(tls, "mode", "")
	mode in {"SIMPLE", "MUTUAL", "OPTIONAL_MUTUAL"}
	every g in ["credentialName", "credentialNames", "tlsCertificates"] {
		object.get(tls, g, null) in data.meshward.lib.empty_values
	}
	some f in tls_required(mode)
	object.get(tls, f, null) in {null, ""}
	text := sprintf("spec.ingress[%d].tls has mode %s but no %s", [i, mode, f])
	fix := "Set serverCertificate and privateKey (and caCertificates for MUTUAL) to the files mounted into the proxy."
}

tls_required("SIMPLE") := ["serverCertificate", "privateKey"]

tls_required(mode) := ["serverCertificate", "privateKey", "caCertificates"] if mode in {"MUTUAL", "OPTIONAL_MUTUAL"}

issues contains [s.o.id, ["spec", "ingress", i, "tls", "caCrl"], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	object.get(tls, "mode", "") == "SIMPLE"
	every g in ["credentialName", "credentialNames"] {
		object.get(tls, g, null) in data.meshward.lib.empty_values
	}
	not object.get(tls, "caCrl", null) in {null, ""}
	text := sprintf("spec.ingress[%d].tls.caCrl is set with mode SIMPLE, which checks no client certificates", [i])
	fix := "Remove caCrl, or use mode MUTUAL."
}

# Connection pools: inboundConnectionPool and ingress[].connectionPool.
pools := array.concat(
	[[s, ["spec", "inboundConnectionPool"], pool] |
		some s in sidecars
		pool := object.get(s.o.spec, "inboundConnectionPool", null)
		is_object(pool)
	],
	[[s, ["spec", "ingress", i, "connectionPool"], pool] |
		some [s, i, ing, _] in ingress
		pool := object.get(ing, "connectionPool", null)
		is_object(pool)
	],
)

issues contains [s.o.id, p, say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	object.get(pool, "http", null) == null
	object.get(pool, "tcp", null) == null
	text := sprintf("%s has neither http nor tcp settings", [ft(p)])
	fix := "Add http or tcp settings, or remove it."
}

pool_counts := [["http", "http1MaxPendingRequests"], ["http", "http2MaxRequests"], ["http", "maxRequestsPerConnection"], ["http", "maxRetries"], ["http", "maxConcurrentStreams"], ["tcp", "maxConnections"]]

issues contains [s.o.id, path, say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	some f in pool_counts
	n := object.get(pool, f, 0)
	is_number(n)
	n < 0
	path := array.concat(p, f)
	text := sprintf("%s is %v, negative", [ft(path), n])
	fix := "Use 0 or more."
}

pool_durations := [
	["http", "idleTimeout"], ["http", "http2KeepAlive", "interval"], ["http", "http2KeepAlive", "timeout"],
	["tcp", "connectTimeout"], ["tcp", "maxConnectionDuration"], ["tcp", "tcpKeepalive", "time"], ["tcp", "tcpKeepalive", "interval"],
]

issues contains [s.o.id, path, say(s.o, text, duration_fix)] if {
	some [s, p, pool] in pools
	some f in pool_durations
	d := object.get(pool, f, null)
	problem := duration_problem(d)
	path := array.concat(p, f)
	text := sprintf("%s %s %s", [ft(path), q(d), problem])
}

# tcp.idleTimeout below 1ms (0s included) turns the timeout off.
issues contains [s.o.id, path, say(s.o, text, duration_fix)] if {
	some [s, p, pool] in pools
	d := object.get(pool, ["tcp", "idleTimeout"], null)
	problem := duration_problem(d)
	not idle_off(d)
	path := array.concat(p, ["tcp", "idleTimeout"])
	text := sprintf("%s %s %s", [ft(path), q(d), problem])
}

idle_off(d) if {
	duration_parsable(d)
	abs(time.parse_duration_ns(d)) < 1000000
}

issues contains [s.o.id, array.concat(p, ["http", "http2KeepAlive", f]), say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	ka := object.get(pool, ["http", "http2KeepAlive"], null)
	is_object(ka)
	some f in ["interval", "timeout"]
	object.get(ka, f, null) == null
	text := sprintf("%s.http.http2KeepAlive has no %s: it needs both interval and timeout", [ft(p), f])
	fix := "Set both interval and timeout, e.g. 30s and 10s."
}

issues contains [s.o.id, array.concat(p, ["http", "useClientProtocol"]), say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	object.get(pool, ["http", "h2UpgradePolicy"], null) == "UPGRADE"
	object.get(pool, ["http", "useClientProtocol"], null) == true
	text := sprintf("%s.http sets useClientProtocol with h2UpgradePolicy UPGRADE, which contradict each other", [ft(p)])
	fix := "Remove one of them."
}

# outboundTrafficPolicy.egressProxy
egress_proxies := [[s, otp, ep] |
	some s in sidecars
	otp := object.get(s.o.spec, "outboundTrafficPolicy", null)
	is_object(otp)
	ep := object.get(otp, "egressProxy", null)
	is_object(ep)
]

issues contains [s.o.id, ["spec", "outboundTrafficPolicy", "mode"], say(s.o, text, fix)] if {
	some [s, otp, _] in egress_proxies
	mode := object.get(otp, "mode", null)
	mode in {null, "", "REGISTRY_ONLY"}
	text := sprintf("spec.outboundTrafficPolicy sets egressProxy with mode %s: an egress proxy is only used with mode ALLOW_ANY", [object.get({null: "REGISTRY_ONLY (the default)", "": "REGISTRY_ONLY (the default)"}, mode, mode)])
	fix := "Set mode: ALLOW_ANY, or remove egressProxy."
}

proxy_ok(otp) if object.get(otp, "mode", null) == "ALLOW_ANY"

proxy_path := ["spec", "outboundTrafficPolicy", "egressProxy"]

issues contains [s.o.id, array.concat(proxy_path, ["host"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	h := object.get(ep, "host", null)
	is_string(h)
	not is_fqdn(h)
	text := sprintf("spec.outboundTrafficPolicy.egressProxy.host %s is not a fully qualified host name", [q(h)])
	fix := "Name the proxy's service by its full name, e.g. egress-proxy.proxy.svc.cluster.local."
}

issues contains [s.o.id, array.concat(proxy_path, ["port"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	object.get(ep, "port", null) == null
	text := "spec.outboundTrafficPolicy.egressProxy has no port"
	fix := "Set egressProxy.port.number to the proxy's port."
}

issues contains [s.o.id, array.concat(proxy_path, ["port", "number"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	port := object.get(ep, "port", null)
	is_object(port)
	n := object.get(port, "number", 0)
	is_number(n)
	not is_port(n)
	text := sprintf("spec.outboundTrafficPolicy.egressProxy.port.number is %v, outside 1..65535", [n])
	fix := "Set the proxy's port number."
}

issues contains [s.o.id, array.concat(proxy_path, ["subset"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	sub := object.get(ep, "subset", "")
	is_string(sub)
	sub != ""
	not is_label(sub)
	text := sprintf("spec.outboundTrafficPolicy.egressProxy.subset %s is not a DNS-1123 label", [q(sub)])
	fix := "Name a subset of the proxy's DestinationRule, or remove subset."
}

# ---------------------------------------------------------------------------
# Telemetry (ValidateTelemetry)

telemetry_lists := ["metrics", "accessLogging", "tracing"]

telemetry_entries := [[o, f, i, entry] |
	some o in objs.Telemetry
	some f in telemetry_lists
	some i, entry in arr(object.get(o.spec, f, null))
	is_object(entry)
]

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, f, i, entry] in telemetry_entries
	some j, p in arr(object.get(entry, "providers", null))
	at(p, "name", null) in {null, ""}
	path := ["spec", f, i, "providers", j, "name"]
	text := sprintf("%s is missing or empty", [ft(path)])
	fix := "Name an extensionProviders entry of the mesh config (e.g. prometheus, envoy)."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, f, i, entry] in telemetry_entries
	f == "metrics"
	some j, ov in arr(object.get(entry, "overrides", null))
	is_object(ov)
	some tag, override in obj(object.get(ov, "tagOverrides", null))
	problem := tag_override_problem(override)
	path := ["spec", "metrics", i, "overrides", j, "tagOverrides", tag, "value"]
	text := sprintf("%s %s", [ft(array.slice(path, 0, 7)), problem])
	fix := "Give UPSERT (the default operation) a value, or use operation: REMOVE without one."
}

tag_override_problem(override) := "has operation UPSERT (the default) but no value" if {
	at(override, "operation", "UPSERT") in {"UPSERT", null, ""}
	at(override, "value", null) in {null, ""}
} else := "has operation REMOVE and a value" if {
	at(override, "operation", "UPSERT") == "REMOVE"
	not at(override, "value", null) in {null, ""}
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, f, i, entry] in telemetry_entries
	f == "metrics"
	some j, ov in arr(object.get(entry, "overrides", null))
	is_object(ov)
	m := object.get(ov, "match", null)
	is_object(m)
	object.get(m, "customMetric", null) == ""
	path := ["spec", "metrics", i, "overrides", j, "match", "customMetric"]
	text := sprintf("%s is empty", [ft(path)])
	fix := "Name the custom metric, or match a standard one with metric."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, f, i, entry] in telemetry_entries
	f == "tracing"
	v := object.get(entry, "randomSamplingPercentage", null)
	is_number(v)
	not v >= 0
	path := ["spec", "tracing", i, "randomSamplingPercentage"]
	text := sprintf("%s is %v, outside 0..100", [ft(path), v])
	fix := "Use a percentage from 0 to 100, e.g. 1.0."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, f, i, entry] in telemetry_entries
	f == "tracing"
	v := object.get(entry, "randomSamplingPercentage", null)
	is_number(v)
	v > 100
	path := ["spec", "tracing", i, "randomSamplingPercentage"]
	text := sprintf("%s is %v, outside 0..100", [ft(path), v])
	fix := "Use a percentage from 0 to 100, e.g. 1.0."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, f, i, entry] in telemetry_entries
	f == "tracing"
	some name, tag in obj(object.get(entry, "customTags", null))
	[problem, at_field] := custom_tag_problem(name, tag)
	path := array.concat(["spec", "tracing", i, "customTags", name], at_field)
	text := sprintf("%s %s", [ft(path), problem])
	fix := "Name the tag, and give literal a value, or header or environment a name."
}

# [problem, path below the tag]
custom_tag_problem(name, tag) := ["is a tag without a name", []] if {
	name == ""
} else := ["is missing or empty", [t, f]] if {
	some [t, f] in [["literal", "value"], ["header", "name"], ["environment", "name"]]
	x := at(tag, t, null)
	is_object(x)
	object.get(x, f, null) in {null, ""}
}

# accessLogging[].filter.expression must parse as CEL: an empty one or unbalanced
# brackets cannot (string literals aside).
issues contains [o.id, path, say(o, text, fix)] if {
	some [o, f, i, entry] in telemetry_entries
	f == "accessLogging"
	filter := object.get(entry, "filter", null)
	is_object(filter)
	expr := object.get(filter, "expression", "")
	is_string(expr)
	problem := cel_problem(expr)
	path := ["spec", "accessLogging", i, "filter", "expression"]
	text := sprintf("%s %s does not parse as a CEL expression: %s", [ft(path), q(expr), problem])
	fix := "Write a CEL expression such as response.code >= 400, or remove the filter."
}

cel_problem(expr) := "it is empty" if trim_space(expr) == ""
else := sprintf("its %s and %s do not balance", [a, b]) if {
	stripped := regex.replace(expr, `"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`, `""`)
	some [a, b] in [["(", ")"], ["[", "]"], ["{", "}"]]
	strings.count(stripped, a) != strings.count(stripped, b)
}
