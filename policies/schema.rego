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
#
# This file holds the objects, the helpers and the checks on every kind; the checks on
# one kind are in schema_<kind>.rego, each marked `only-for-kinds`: a check whose
# revisions hold none of that kind does not compile it (most of what a small check
# costs is compiling the policies). Such a file reads only its kind's objects (and model
# facts drawn from them) and calls only its own helpers and those of this file and
# lib.rego.
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
