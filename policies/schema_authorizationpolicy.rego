# What Istio's validating webhook refuses in a AuthorizationPolicy
# (ValidateAuthorizationPolicy): part of package meshward.rules.schema (schema.rego
# holds the objects, the helpers and why).
#
# Reads only objs.AuthorizationPolicy, with the helpers of this file, schema.rego and
# lib.rego: a check whose revisions hold no AuthorizationPolicy does not compile it.
# Keep it so.
# meshward: per-object
# meshward: only-for-kinds AuthorizationPolicy
package meshward.rules.schema

import rego.v1

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
