# Ambient authorization: what ztunnel (L4 only) and waypoints (targetRefs only) make of
# the policies written for the workloads they serve.
#
# Sources (Istio): pilot/pkg/serviceregistry/ambient/authorization.go (what ztunnel gets
# of an AuthorizationPolicy, PeerAuthentication at ztunnel), ambient/policies.go
# (waypoint policy status, PILOT_AUTO_ALLOW_WAYPOINT_POLICY),
# pilot/pkg/model/policyattachment.go (a waypoint takes targetRefs policies only),
# ztunnel src/xds/types.rs (the only two xDS types ztunnel subscribes to), src/rbac.rs
# (match semantics at ztunnel).
package meshward.rules.ambient_authz

import rego.v1

# ---------------------------------------------------------------------------
# model parts and indexes

ztunnel_authz := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "ztunnel_authz", []))

target_refs := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "target_refs", []))

waypoints := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoints", []))

waypoint_services := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoint_services", []))

waypoint_bindings := data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoint_bindings", []))

# The kinds these rules read, by id. Sets: one id may stand for several copies (two
# roots deploy one object); the first copy is read.
indexed_kinds := [
	"AuthorizationPolicy", "RequestAuthentication", "Telemetry", "WasmPlugin", "EnvoyFilter",
	"PeerAuthentication", "Service", "ServiceEntry",
]

by_id[r.id] contains r if {
	some kind in indexed_kinds
	some r in data.meshward.lib.resources(kind)
}

body_of(id) := b if {
	bodies := [r.body | some r in by_id[id]; is_object(r.body)]
	count(bodies) > 0
	b := bodies[0]
} else := {}

spec_at(id) := s if {
	s := body_of(id).spec
	is_object(s)
} else := {}

waypoint_by_id[w.id] contains w if some w in waypoints

waypoint_of(id) := w if {
	ws := [w | some w in waypoint_by_id[id]]
	count(ws) > 0
	w := ws[0]
}

# Ambient workload id -> the waypoints (Gateway ids) its traffic goes through: its
# own (traffic addressed to its pods) and its Services' (traffic addressed to them).
workload_waypoints[w.id] contains g if {
	some w in data.meshward.lib.model_workloads
	w.ambient == true
	g := w.waypoint
	is_string(g)
}

workload_waypoints[w.id] contains g if {
	some w in data.meshward.lib.model_workloads
	w.ambient == true
	some g in data.meshward.lib.array_of(object.get(w, "service_waypoints", []))
}

# A policy attaches by targetRef(s): it goes to waypoints only, never to ztunnel or
# sidecars (policyattachment.go).
has_target_refs(spec) if not object.get(spec, "targetRefs", null) in data.meshward.lib.empty_values

has_target_refs(spec) if not object.get(spec, "targetRef", null) in data.meshward.lib.empty_values

# Ids as a set: one workload deployed twice is one workload.
id_set(ids) := {i | some i in ids}

ids_text(ids) := data.meshward.lib.enumerate_ids(id_set(ids), 3)

workloads_text(ids) := sprintf("%s %s", [data.meshward.lib.plural(count(id_set(ids)), "ambient workload", "ambient workloads"), ids_text(ids)])

sidecar_text(n) := " Its workload with a sidecar still enforces it as written." if {
	n == 1
} else := sprintf(" Its %d workloads with a sidecar still enforce it as written.", [n]) if {
	n > 1
} else := ""

# Istio's string match at ztunnel and in proxies (src/rbac.rs): `*` any non-empty
# value, `*x` suffix, `x*` prefix, anything else exact.
str_match(pattern, value) if {
	pattern == "*"
	value != ""
}

str_match(pattern, value) if {
	pattern != "*"
	startswith(pattern, "*")
	endswith(value, substring(pattern, 1, -1))
}

str_match(pattern, value) if {
	pattern != "*"
	endswith(pattern, "*")
	not startswith(pattern, "*")
	startswith(value, substring(pattern, 0, count(pattern) - 1))
}

str_match(pattern, value) if {
	is_string(pattern)
	not contains(pattern, "*")
	pattern == value
}

# How to put the policy where HTTP is seen: at the waypoint that serves the workloads
# (by targetRefs), or, when none does, a waypoint first.
services_serving(ids) := {s |
	idset := {i | some i in ids}
	some s in waypoint_services
	some sel in data.meshward.lib.array_of(s.selects)
	sel in idset
}

own_waypoints(ids) := {g |
	idset := {i | some i in ids}
	some w in data.meshward.lib.model_workloads
	w.id in idset
	g := w.waypoint
	is_string(g)
}

waypoint_fix(ids) := sprintf(
	"bind it to the waypoint with targetRefs (kind: Service, group: \"\", name: %s; %s serves %s)",
	[data.meshward.lib.enumerate({s.name | some s in svcs}, 3), data.meshward.lib.enumerate_ids({s.waypoint | some s in svcs}, 2), data.meshward.lib.plural(count(svcs), "it", "them")],
) if {
	svcs := services_serving(ids)
	count(svcs) > 0
} else := sprintf(
	"bind it to waypoint %s with targetRefs (kind: Gateway, group: gateway.networking.k8s.io, the policy in the waypoint's namespace)",
	[data.meshward.lib.enumerate_ids(gs, 2)],
) if {
	gs := own_waypoints(ids)
	count(gs) > 0
} else := "no waypoint serves them: add one (a Gateway with gatewayClassName: istio-waypoint and a listener named mesh on port 15008, protocol HBONE), label their Service istio.io/use-waypoint=<waypoint name>, and bind the policy to that Service with targetRefs"

# ---------------------------------------------------------------------------
# ambient/l7-policy-at-ztunnel
#
# An AuthorizationPolicy without targetRefs is enforced for ambient workloads by
# ztunnel, which sees no HTTP (authorization.go convertAuthorizationPolicy): ALLOW rules
# with an HTTP field are dropped whole, DENY rules lose their HTTP fields, CUSTOM and
# AUDIT are not sent. A waypoint never applies selector policies, even where one serves
# the workloads. Severity follows what happens at runtime: a policy that refuses every
# connection or lets through what it was written to deny is an error; one that refuses
# more than written a warning; a dry run that records nothing is information.

# The rule outcome that makes each policy outcome.
affected := {"stricter": "dropped", "denies-all": "dropped", "ignored": "never-fires", "partly-ignored": "never-fires", "wider": "widened"}

l7_severity := {"stricter": "warning", "denies-all": "error", "ignored": "error", "partly-ignored": "error", "wider": "warning"}

# "to[0].operation.paths" of rule i -> ["spec", "rules", i, "to", 0, "operation", "paths"];
# "when[1].key request.headers[x]" -> ["spec", "rules", i, "when", 1, "key"].
field_path(i, field) := p if {
	head := split(field, " ")[0]
	parts := split(head, ".")
	list := split(parts[0], "[")
	count(list) == 2
	index := trim_suffix(list[1], "]")
	regex.match(`^[0-9]+$`, index)
	p := array.concat(["spec", "rules", i, list[0], to_number(index)], array.slice(parts, 1, count(parts)))
} else := ["spec", "rules", i]

field_text(i, field) := sprintf("rules[%d].%s", [i, replace(field, ".key ", ".key: ")])

rules_with(z, outcome) := [r | some r in data.meshward.lib.array_of(z.rules); r.outcome == outcome]

fields_of(rules) := [field_text(r.index, f) | some r in rules; some f in data.meshward.lib.array_of(r.l7_fields)]

rule_names(rules) := concat(", ", [sprintf("rules[%d]", [r.index]) | some r in rules])

first_field_path(rules) := field_path(r.index, r.l7_fields[0]) if {
	r := rules[0]
	count(data.meshward.lib.array_of(r.l7_fields)) > 0
} else := ["spec", "rules", rules[0].index]

l7_intro(z) := sprintf(
	"%s (%s) has no targetRefs, so ztunnel, which sees no HTTP, enforces it for %s",
	[data.meshward.lib.display(z.resource), z.action, workloads_text(z.ambient_workloads)],
)

l4_fix := "or rewrite the rules with L4 fields only (principals, namespaces, serviceAccounts, ipBlocks, ports), which ztunnel enforces"

# A waypoint sees only traffic sent through it: for a DENY or CUSTOM policy moved there,
# say who bypasses it (endpoint_builder.go findServiceWaypoint, 5.9 of the notes).
bypass_text := " (a waypoint sees only traffic sent through it: sidecar clients, and ingress gateways without istio.io/ingress-use-waypoint, go straight to the pods)"

l7_fix(z) := sprintf(" Fix: %s%s, %s.", [waypoint_fix(z.ambient_workloads), bypass_text, l4_fix]) if {
	z.action == "DENY"
} else := sprintf(" Fix: %s, %s.", [waypoint_fix(z.ambient_workloads), l4_fix])

# Other ALLOW policies that still admit some connections to the same workloads.
other_allows(z) := {o.resource |
	ids := {i | some i in z.ambient_workloads}
	some o in ztunnel_authz
	o.resource != z.resource
	o.action == "ALLOW"
	o.outcome in {"as-written", "stricter"}
	some i in o.ambient_workloads
	i in ids
}

refused_text(z) := sprintf(
	"Connections to them are refused (connection reset, curl exit 56) unless %s admits them",
	[data.meshward.lib.enumerate_ids(others, 3)],
) if {
	others := other_allows(z)
	count(others) > 0
} else := sprintf("Every connection to %s is refused (connection reset, curl exit 56)", [ids_text(z.ambient_workloads)])

l7_effect(z) := sprintf(
	"%s: every rule uses HTTP fields (%s), so ztunnel drops them all and keeps an ALLOW policy with no rules, which matches nothing. %s, whoever the caller.",
	[l7_intro(z), data.meshward.lib.enumerate(fields_of(rules_with(z, "dropped")), 4), refused_text(z)],
) if {
	z.outcome == "denies-all"
} else := sprintf(
	"%s: %s use HTTP fields (%s), so ztunnel drops %s whole, L4 parts included, and enforces only %s. Callers that only the dropped rules allowed are refused (connection reset, curl exit 56).",
	[l7_intro(z), rule_names(dropped), data.meshward.lib.enumerate(fields_of(dropped), 4), data.meshward.lib.plural(count(dropped), "that rule", "those rules"), rule_names(rules_with(z, "kept"))],
) if {
	z.outcome == "stricter"
	dropped := rules_with(z, "dropped")
} else := sprintf(
	"%s: once ztunnel removes the HTTP fields (%s) no rule can match a connection, so the policy denies nothing. It passes although you meant to deny: the requests it was written to stop reach the pods.",
	[l7_intro(z), data.meshward.lib.enumerate(fields_of(rules_with(z, "never-fires")), 4)],
) if {
	z.outcome == "ignored"
} else := sprintf(
	"%s: %s can no longer match a connection once ztunnel removes their HTTP fields (%s), so the requests they were written to stop pass although you meant to deny them and reach the pods.%s",
	[l7_intro(z), rule_names(never), data.meshward.lib.enumerate(fields_of(never), 4), widened_text(rules_with(z, "widened"), z)],
) if {
	z.outcome == "partly-ignored"
	never := rules_with(z, "never-fires")
} else := sprintf(
	"%s: ztunnel removes the HTTP fields (%s) and keeps the L4 part of the same rules, so%s",
	[l7_intro(z), data.meshward.lib.enumerate(fields_of(widened), 4), widened_text(widened, z)],
) if {
	z.outcome == "wider"
	widened := rules_with(z, "widened")
}

widened_text(widened, z) := sprintf(
	" %s %s every connection that matches what is left (%s), not only the requests the HTTP fields picked out: those callers get a connection reset (curl exit 56).",
	[rule_names(widened), data.meshward.lib.plural(count(widened), "denies", "deny"), l4_text(z.resource, widened[0].index)],
) if {
	count(widened) > 0
} else := ""

l4_source := {"principals", "notPrincipals", "namespaces", "notNamespaces", "serviceAccounts", "notServiceAccounts", "ipBlocks", "notIpBlocks"}

l4_when := {"source.ip", "source.namespace", "source.principal", "destination.ip", "destination.port"}

values_text(v) := concat(", ", [sprintf("%v", [x]) | some x in v]) if is_array(v) else := sprintf("%v", [v])

# What ztunnel keeps of a DENY rule, e.g. "to.operation.ports 8080".
l4_text(id, i) := t if {
	rule := data.meshward.lib.array_of(spec_at(id).rules)[i]
	parts := array.concat(
		array.concat(
			[sprintf("from.source.%s %s", [k, values_text(v)]) |
				some fr in data.meshward.lib.array_of(data.meshward.lib.get(rule, "from", []))
				some k, v in data.meshward.lib.get(fr, "source", {})
				k in l4_source
				data.meshward.lib.non_empty(v)
			],
			[sprintf("to.operation.%s %s", [k, values_text(v)]) |
				some op in data.meshward.lib.array_of(data.meshward.lib.get(rule, "to", []))
				some k, v in data.meshward.lib.get(op, "operation", {})
				k in {"ports", "notPorts"}
				data.meshward.lib.non_empty(v)
			],
		),
		[sprintf("when %s %s", [c.key, values_text(object.get(c, "values", object.get(c, "notValues", [])))]) |
			some c in data.meshward.lib.array_of(data.meshward.lib.get(rule, "when", []))
			c.key in l4_when
		],
	)
	count(parts) > 0
	t := concat("; ", parts)
} else := "any connection"

findings contains f if {
	some z in ztunnel_authz
	outcome := affected[z.outcome]
	rules := rules_with(z, outcome)
	count(rules) > 0
	f := {
		"rule": "ambient/l7-policy-at-ztunnel",
		"severity": l7_severity[z.outcome],
		"resource": z.resource,
		"path": first_field_path(rules),
		"subjects": sort(id_set(z.ambient_workloads)),
		"message": concat("", [l7_effect(z), sidecar_text(data.meshward.lib.num(z.sidecar_workloads)), l7_fix(z)]),
	}
}

# Not sent to ztunnel at all: CUSTOM, AUDIT, and dry-run policies.
not_sent_severity(z) := "info" if z.dry_run == true
else := "error" if z.action == "CUSTOM"
else := "warning"

not_sent_path(z) := ["metadata", "annotations", "istio.io/dry-run"] if z.dry_run == true else := ["spec", "action"]

provider_text(id) := sprintf(" (provider %s)", [p]) if {
	p := spec_at(id).provider.name
	is_string(p)
} else := ""

not_sent_message(z) := sprintf(
	"%s carries istio.io/dry-run: \"true\", and istiod does not send dry-run policies to ztunnel unless it runs with AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY=true (then ztunnel must be 1.29 or later, or it enforces the policy instead of logging it): for %s nothing records what it would have allowed or denied.%s To try it out there, set that istiod variable, or %s.",
	[data.meshward.lib.display(z.resource), workloads_text(z.ambient_workloads), sidecar_text(data.meshward.lib.num(z.sidecar_workloads)), waypoint_fix(z.ambient_workloads)],
) if {
	z.dry_run == true
} else := sprintf(
	"%s (CUSTOM%s) has no targetRefs, so it is meant for %s at ztunnel, and ztunnel takes no CUSTOM policy (istiod does not send it): the external authorizer is never asked, and requests to them pass unchecked.%s Fix: %s%s; the waypoint calls the external authorizer.",
	[data.meshward.lib.display(z.resource), provider_text(z.resource), workloads_text(z.ambient_workloads), sidecar_text(data.meshward.lib.num(z.sidecar_workloads)), waypoint_fix(z.ambient_workloads), bypass_text],
) if {
	z.action == "CUSTOM"
} else := sprintf(
	"%s (%s) has no targetRefs, so it is meant for %s at ztunnel, and ztunnel takes no AUDIT policy (istiod does not send it): nothing sent to them is audited.%s Fix: %s.",
	[data.meshward.lib.display(z.resource), z.action, workloads_text(z.ambient_workloads), sidecar_text(data.meshward.lib.num(z.sidecar_workloads)), waypoint_fix(z.ambient_workloads)],
)

findings contains f if {
	some z in ztunnel_authz
	z.outcome == "not-sent"
	f := {
		"rule": "ambient/l7-policy-at-ztunnel",
		"severity": not_sent_severity(z),
		"resource": z.resource,
		"path": not_sent_path(z),
		"subjects": sort(id_set(z.ambient_workloads)),
		"message": not_sent_message(z),
	}
}

# ---------------------------------------------------------------------------
# ambient/policy-needs-waypoint
#
# ztunnel subscribes to addresses and L4 authorization only (ztunnel src/xds/types.rs):
# RequestAuthentication, Telemetry, WasmPlugin and EnvoyFilter never reach it, and a
# waypoint takes them only by targetRefs (policyattachment.go), except namespace-wide
# Telemetry, which applies at the namespace's waypoints (pilot/pkg/model/telemetry.go):
# only a Telemetry with a selector is lost there. Sidecar resources are another rule's.
#
# Severity: error for RequestAuthentication. Its whole purpose is to reject requests
# carrying an invalid token (expired, forged, wrong issuer) before the application sees
# them; at ztunnel every token reaches the pods unchecked, so an application that
# relies on the mesh for validation accepts forged tokens. That is a missing security
# control, like a DENY that passes. Telemetry, WasmPlugin and EnvoyFilter: warning (what
# they add, metrics, logs, a plugin's or patch's behaviour, is missing; whether that is
# a security control the repository does not say).

needs_waypoint_kinds := {"RequestAuthentication", "Telemetry", "WasmPlugin", "EnvoyFilter"}

selector_ids contains s.resource if some s in data.meshward.lib.model_selectors

# Telemetry without a selector applies at waypoints; only a selector's is lost.
lost_scope(s) if s.kind != "Telemetry"

lost_scope(s) if s.scope == "workload"

unreached contains u if {
	some s in data.meshward.lib.model_selectors
	s.kind in needs_waypoint_kinds
	ids := data.meshward.lib.array_of(object.get(s, "ambient_matches", []))
	count(ids) > 0
	lost_scope(s)
	not has_target_refs(spec_at(s.resource))
	u := {
		"resource": s.resource, "kind": s.kind, "namespace": s.namespace, "scope": s.scope,
		"ambient": ids, "sidecars": count([m | some m in data.meshward.lib.array_of(s.matches); startswith(m, "WorkloadEntry/") == false]),
		"path": selector_path(s),
	}
}

selector_path(s) := s.path if count(data.meshward.lib.array_of(s.path)) > 0 else := ["spec"]

# A WasmPlugin without a selector applies to every workload of its namespace (every
# namespace from the root namespace); the model lists selector-less ones of the
# namespace-wide kinds only.
unreached contains u if {
	some r in data.meshward.lib.resources("WasmPlugin")
	is_string(r.namespace)
	not selector_ids[r.id]
	not has_target_refs(data.meshward.lib.spec_of(r))
	ids := [w.id | some w in data.meshward.lib.model_workloads; w.ambient == true; in_scope(r.namespace, w.namespace)]
	count(ids) > 0
	u := {
		"resource": r.id, "kind": "WasmPlugin", "namespace": r.namespace, "scope": scope_of(r.namespace),
		"ambient": ids, "sidecars": count([w | some w in data.meshward.lib.model_workloads; w.proxy == true; in_scope(r.namespace, w.namespace)]),
		"path": ["spec"],
	}
}

in_scope(policy_ns, _) if policy_ns == data.meshward.lib.root_namespace

in_scope(policy_ns, ns) if policy_ns == ns

scope_of(ns) := "mesh" if ns == data.meshward.lib.root_namespace else := "namespace"

reach_text(u) := sprintf("selects %s", [workloads_text(u.ambient)]) if u.scope == "workload"
else := sprintf("applies mesh-wide, also to %s", [workloads_text(u.ambient)]) if u.scope == "mesh"
else := sprintf("applies to every workload of namespace %s, also to %s", [u.namespace, workloads_text(u.ambient)])

needs_waypoint_severity := {"RequestAuthentication": "error", "Telemetry": "warning", "WasmPlugin": "warning", "EnvoyFilter": "warning"}

issuers_text(id) := sprintf(" (issuer %s)", [data.meshward.lib.enumerate(iss, 2)]) if {
	iss := {i | some rule in data.meshward.lib.array_of(spec_at(id).jwtRules); i := rule.issuer; is_string(i)}
	count(iss) > 0
} else := ""

claims_text(id) := " The claims it copies to headers (outputClaimToHeaders) are not set either." if {
	some rule in data.meshward.lib.array_of(spec_at(id).jwtRules)
	count(data.meshward.lib.array_of(object.get(rule, "outputClaimToHeaders", []))) > 0
} else := ""

# AuthorizationPolicies at ztunnel that check JWTs for the same workloads.
jwt_policies(ids) := {z.resource |
	idset := {i | some i in ids}
	some z in ztunnel_authz
	some i in z.ambient_workloads
	i in idset
	some r in data.meshward.lib.array_of(z.rules)
	some fld in data.meshward.lib.array_of(r.l7_fields)
	jwt_field(fld)
}

jwt_field(fld) if contains(fld, "equestPrincipals")

jwt_field(fld) if contains(fld, "request.auth.")

jwt_text(ids) := sprintf(
	" %s, which checks request principals for them, does not help: ztunnel cannot see a JWT, so it drops ALLOW rules naming request principals (those callers are refused) and DENY rules on them never fire (requests without a valid token pass); see ambient/l7-policy-at-ztunnel.",
	[data.meshward.lib.enumerate_ids(ps, 3)],
) if {
	ps := jwt_policies(ids)
	count(ps) > 0
} else := ""

kind_effect(u) := sprintf(
	"ztunnel never receives RequestAuthentication, and a waypoint applies only one bound with targetRefs: JWTs sent to them are not validated. A request with an expired, forged or wrongly issued token%s reaches the pods unchecked, where a sidecar would answer 401 Jwt verification fails.%s%s",
	[issuers_text(u.resource), claims_text(u.resource), jwt_text(u.ambient)],
) if {
	u.kind == "RequestAuthentication"
} else := "ztunnel never receives Telemetry, and a waypoint applies only namespace-wide Telemetry or one bound with targetRefs: its metrics, access logging and tracing settings apply to nothing there (ztunnel keeps its default TCP metrics)." if {
	u.kind == "Telemetry"
} else := sprintf(
	"ztunnel is no Envoy and never loads Wasm plugins, and a waypoint loads only WasmPlugins bound with targetRefs: the plugin%s never runs for requests to them.",
	[plugin_url(u.resource)],
) if {
	u.kind == "WasmPlugin"
} else := "ztunnel is no Envoy and never receives EnvoyFilters: its patches change nothing for them."

plugin_url(id) := sprintf(" (%s)", [url]) if {
	url := spec_at(id).url
	is_string(url)
} else := ""

kind_fix(u) := sprintf(" Fix: a waypoint takes an EnvoyFilter only bound to it with targetRefs instead of workloadSelector (alpha): %s.", [envoyfilter_fix(u.ambient)]) if {
	u.kind == "EnvoyFilter"
} else := sprintf(" Fix: %s.", [waypoint_fix(u.ambient)])

serving_waypoints(ids) := {s.waypoint | some s in services_serving(ids)} | own_waypoints(ids)

envoyfilter_fix(ids) := sprintf("bind it to %s, which serves them", [data.meshward.lib.enumerate_ids(gs, 2)]) if {
	gs := serving_waypoints(ids)
	count(gs) > 0
} else := "no waypoint serves them: add one (a Gateway with gatewayClassName: istio-waypoint and a listener named mesh on port 15008, protocol HBONE), label their Service istio.io/use-waypoint=<waypoint name>, and bind the EnvoyFilter to that Gateway"

findings contains f if {
	some u in unreached
	f := {
		"rule": "ambient/policy-needs-waypoint",
		"severity": needs_waypoint_severity[u.kind],
		"resource": u.resource,
		"path": u.path,
		"subjects": sort(id_set(u.ambient)),
		"message": sprintf(
			"%s %s: %s%s%s",
			[data.meshward.lib.display(u.resource), reach_text(u), kind_effect(u), sidecar_text(u.sidecars), kind_fix(u)],
		),
	}
}

# ---------------------------------------------------------------------------
# ambient/target-ref-unbound
#
# A policy with targetRefs applies only at a waypoint, never at a sidecar or ztunnel
# (policyattachment.go); a target that does not exist (TargetNotFound) or that no
# waypoint serves (AncestorNotBound, ambient/policies.go WaypointPolicyStatusCollection)
# leaves the policy applying nowhere. Error where that drops a security control
# (ALLOW, DENY, CUSTOM, RequestAuthentication), warning otherwise; a warning too where
# the repository cannot tell (the target or its waypoint may be deployed from
# elsewhere, the namespace's labels are unknown).

action_of(id) := a if {
	a := spec_at(id).action
	a in {"ALLOW", "DENY", "AUDIT", "CUSTOM"}
} else := "ALLOW"

security_control(t) if t.kind == "RequestAuthentication"

security_control(t) if {
	t.kind == "AuthorizationPolicy"
	action_of(t.resource) != "AUDIT"
}

# Numbers for indexes: the model writes the path as strings.
ref_path(t) := [step |
	some s in data.meshward.lib.array_of(t.path)
	step := to_number_if_index(s)
]

to_number_if_index(s) := to_number(s) if {
	is_string(s)
	regex.match(`^[0-9]+$`, s)
} else := s

namespace_of(id) := ns if {
	parts := split(id, "/")
	count(parts) == 3
	ns := parts[1]
} else := ""

targets_in(kind, ns) := {r.name | some r in data.meshward.lib.resources(kind); r.namespace == ns}

# Why a target reaches no waypoint: {"text": the fact, "unless": what would make the
# finding wrong when the repository cannot tell ("" when it can)}.
target_problem(t) := {
	"text": sprintf("there is no %s %s in namespace %s (%ss there: %s)", [t.target_kind, t.target_name, ns, t.target_kind, data.meshward.lib.enumerate(others, 5)]),
	"unless": "",
} if {
	t.state == "not-found"
	t.target_kind in {"Service", "ServiceEntry"}
	ns := namespace_of(t.resource)
	others := targets_in(t.target_kind, ns)
	count(others) > 0
} else := {
	"text": sprintf("this repository holds no %s in namespace %s", [t.target_kind, namespace_of(t.resource)]),
	"unless": sprintf("unless %s %s is deployed from elsewhere", [t.target_kind, t.target_name]),
} if {
	t.state == "not-found"
	t.target_kind in {"Service", "ServiceEntry"}
} else := {
	"text": sprintf("this repository holds no Gateway %s in namespace %s", [t.target_name, namespace_of(t.resource)]),
	"unless": "unless that waypoint is created outside this repository (istioctl waypoint apply)",
} if {
	t.state == "not-found"
	t.target_kind == "Gateway"
} else := {
	"text": sprintf("kind %s cannot be targeted (Istio accepts Service, ServiceEntry, Gateway and GatewayClass), so the API server rejects the policy", [t.target_kind]),
	"unless": "",
} if {
	t.state == "not-found"
	not t.target_kind in known_target_kinds
} else := {
	"text": sprintf("no waypoint serves %s %s: %s opts out with istio.io/use-waypoint: none", [t.target_kind, t.target_name, t.target_name]),
	"unless": "",
} if {
	t.state == "not-bound"
	labels := data.meshward.lib.get(data.meshward.lib.get(body_of(target_id(t)), "metadata", {}), "labels", {})
	data.meshward.lib.get(labels, "istio.io/use-waypoint", null) == "none"
} else := {
	"text": sprintf("no waypoint serves %s %s: neither it nor namespace %s carries istio.io/use-waypoint, as far as this repository says", [t.target_kind, t.target_name, ns]),
	"unless": sprintf("unless the labels of namespace %s, which this repository does not declare, name a waypoint", [ns]),
} if {
	t.state == "not-bound"
	ns := namespace_of(t.resource)
	data.meshward.lib.model_namespaces[ns].labels_known == false
} else := {
	"text": sprintf("no waypoint serves %s %s: neither it nor namespace %s carries istio.io/use-waypoint", [t.target_kind, t.target_name, namespace_of(t.resource)]),
	"unless": "",
} if {
	t.state == "not-bound"
}

# A use-waypoint label istiod does not bind (a missing Gateway, the wrong traffic
# type, a namespace the waypoint does not admit), on the target or its namespace: the
# binding rules of policies/ambient.rego report it on the label, naming the policies it
# strands, so it is not said again here.
failed_binding(t) if {
	some b in waypoint_bindings
	b.resource == target_id(t)
	is_string(b.problem)
}

failed_binding(t) if {
	some b in waypoint_bindings
	b.kind == "Namespace"
	b.namespace == namespace_of(t.resource)
	is_string(b.problem)
}

stranded_by_binding(t) if {
	t.state == "not-bound"
	failed_binding(t)
}

# selector together with targetRef(s): the API server rejects the policy
# (authz/selector-and-target-ref says so).
rejected(t) if {
	spec := spec_at(t.resource)
	has_target_refs(spec)
	not object.get(spec, "selector", null) in data.meshward.lib.empty_values
}

target_id(t) := sprintf("%s/%s/%s", [t.target_kind, namespace_of(t.resource), t.target_name])

known_target_kinds := {"Service", "ServiceEntry", "Gateway", "GatewayClass"}

unbound_effect(t) := "the callers it should restrict are not restricted: any caller reaches the service" if {
	t.kind == "AuthorizationPolicy"
	action_of(t.resource) == "ALLOW"
} else := "requests it should deny pass" if {
	t.kind == "AuthorizationPolicy"
	action_of(t.resource) == "DENY"
} else := "the external authorizer is never asked: requests pass unchecked" if {
	t.kind == "AuthorizationPolicy"
	action_of(t.resource) == "CUSTOM"
} else := "nothing is audited" if {
	t.kind == "AuthorizationPolicy"
} else := "JWTs are not validated: a request with a forged or expired token reaches the pods" if {
	t.kind == "RequestAuthentication"
} else := "its settings apply nowhere" if {
	t.kind == "Telemetry"
} else := "the plugin never runs"

waypoints_in(ns) := {w.name | some w in waypoints; w.namespace == ns; w.waypoint_class == true}

unbound_fix(t) := sprintf(
	"label %s %s istio.io/use-waypoint=%s (a waypoint of namespace %s), or target a %s a waypoint serves",
	[t.target_kind, t.target_name, data.meshward.lib.enumerate(wps, 2), ns, t.target_kind],
) if {
	t.state == "not-bound"
	ns := namespace_of(t.resource)
	wps := waypoints_in(ns)
	count(wps) > 0
} else := sprintf(
	"add a waypoint (a Gateway with gatewayClassName: istio-waypoint and a listener named mesh on port 15008, protocol HBONE) and label %s %s istio.io/use-waypoint=<waypoint name>",
	[t.target_kind, t.target_name],
) if {
	t.state == "not-bound"
} else := sprintf(
	"target the right name (waypoints in namespace %s: %s)",
	[namespace_of(t.resource), data.meshward.lib.enumerate(wps, 3)],
) if {
	t.target_kind == "Gateway"
	wps := waypoints_in(namespace_of(t.resource))
	count(wps) > 0
} else := "target the right name, and label the Service istio.io/use-waypoint=<waypoint name> so a waypoint serves it"

target_severity(t, p) := "error" if {
	p.unless == ""
	security_control(t)
} else := "warning"

unless_text(p) := "" if p.unless == "" else := sprintf("%s, ", [p.unless])

findings contains f if {
	some t in target_refs
	t.state in {"not-found", "not-bound"}
	not stranded_by_binding(t)
	not rejected(t)
	p := target_problem(t)
	f := {
		"rule": "ambient/target-ref-unbound",
		"severity": target_severity(t, p),
		"resource": t.resource,
		"path": ref_path(t),
		"message": sprintf(
			"%s targets %s %s, but %s. A policy with targetRefs applies only at a waypoint, never at sidecars or ztunnel, so %sthis one applies nowhere: %s. Fix: %s.",
			[data.meshward.lib.display(t.resource), t.target_kind, t.target_name, p.text, unless_text(p), unbound_effect(t), unbound_fix(t)],
		),
	}
}

# ---------------------------------------------------------------------------
# ambient/waypoint-hides-caller
#
# Traffic through a waypoint reaches the destination's ztunnel with the waypoint's
# identity, not the caller's (docs ambient/usage/l4-policy). An ALLOW policy at ztunnel
# that admits callers by identity and not the waypoint refuses that connection: the
# waypoint answers its client 503. PILOT_AUTO_ALLOW_WAYPOINT_POLICY (default false)
# would add the waypoint's allow (ambient/policies.go). Only the rules ztunnel keeps
# count, and any ALLOW policy of the workload that admits the waypoint lets it through.

identity_fields := {"principals", "namespaces", "serviceAccounts"}

kept_rules(z) := [[r.index, rule] |
	rules := data.meshward.lib.array_of(spec_at(z.resource).rules)
	some r in data.meshward.lib.array_of(z.rules)
	r.outcome == "kept"
	rule := rules[r.index]
	is_object(rule)
]

names_identity(rule) if {
	some fr in data.meshward.lib.array_of(data.meshward.lib.get(rule, "from", []))
	some k in identity_fields
	data.meshward.lib.non_empty(data.meshward.lib.get(data.meshward.lib.get(fr, "source", {}), k, null))
}

any_match(patterns, value) if {
	some p in data.meshward.lib.array_of(patterns)
	str_match(p, value)
}

# serviceAccounts: "ns/name", a bare name is the policy's namespace.
sa_match(patterns, policy_ns, wp) if {
	some p in data.meshward.lib.array_of(patterns)
	is_string(p)
	qualified(p, policy_ns) == concat("/", [wp.namespace, wp.name])
}

qualified(sa, ns) := sa if contains(sa, "/") else := concat("/", [ns, sa])

# Each field a source sets must match (the not* fields must not); a source with no
# field ztunnel reads matches nothing (src/rbac.rs).
field_ok(src, "principals", _, wp) if any_match(src.principals, wp.principal)

field_ok(src, "notPrincipals", _, wp) if not any_match(src.notPrincipals, wp.principal)

field_ok(src, "namespaces", _, wp) if any_match(src.namespaces, wp.namespace)

field_ok(src, "notNamespaces", _, wp) if not any_match(src.notNamespaces, wp.namespace)

field_ok(src, "serviceAccounts", ns, wp) if sa_match(src.serviceAccounts, ns, wp)

field_ok(src, "notServiceAccounts", ns, wp) if not sa_match(src.notServiceAccounts, ns, wp)

# The waypoint's pod IP is not in the repository: an IP source may admit it.
field_ok(_, "ipBlocks", _, _) := true

field_ok(_, "notIpBlocks", _, _) := true

source_admits(src, ns, wp) if {
	is_object(src)
	set := [k | some k, v in src; k in l4_source; data.meshward.lib.non_empty(v)]
	count(set) > 0
	every k in set {
		field_ok(src, k, ns, wp)
	}
}

# `when` on the caller's identity must hold for the waypoint too; other keys are not
# about who calls.
when_admits(rule, wp) if {
	every c in data.meshward.lib.array_of(data.meshward.lib.get(rule, "when", [])) {
		condition_admits(c, wp)
	}
}

condition_value(c, wp) := wp.principal if c.key == "source.principal"

condition_value(c, wp) := wp.namespace if c.key == "source.namespace"

condition_admits(c, wp) if not c.key in {"source.principal", "source.namespace"}

condition_admits(c, wp) if {
	v := condition_value(c, wp)
	vals := object.get(c, "values", null)
	any_match(vals, v)
	not any_match(object.get(c, "notValues", []), v)
}

condition_admits(c, wp) if {
	v := condition_value(c, wp)
	object.get(c, "values", null) in data.meshward.lib.empty_values
	not any_match(object.get(c, "notValues", []), v)
}

rule_admits(rule, ns, wp) if {
	count(data.meshward.lib.array_of(data.meshward.lib.get(rule, "from", []))) == 0
	when_admits(rule, wp)
}

rule_admits(rule, ns, wp) if {
	some fr in data.meshward.lib.array_of(data.meshward.lib.get(rule, "from", []))
	source_admits(data.meshward.lib.get(fr, "source", {}), ns, wp)
	when_admits(rule, wp)
}

policy_admits(z, wp) if {
	some [_, rule] in kept_rules(z)
	rule_admits(rule, namespace_of(z.resource), wp)
}

# ALLOW policies at ztunnel that can still admit something.
live_allow(z) if {
	z.action == "ALLOW"
	z.outcome in {"as-written", "stricter"}
}

# Workload id -> the ALLOW policies at ztunnel covering it.
allows_of[id] contains z if {
	some z in ztunnel_authz
	live_allow(z)
	some id in z.ambient_workloads
}

# [policy, waypoint id, workload]: the workload's ALLOW policies at ztunnel, this one
# naming callers by identity, all refuse the waypoint's connections.
hidden contains [z.resource, g, id] if {
	some z in ztunnel_authz
	live_allow(z)
	some [_, rule] in kept_rules(z)
	names_identity(rule)
	some id in z.ambient_workloads
	some g in workload_waypoints[id]
	wp := waypoint_of(g)
	not admitted(id, wp)
}

admitted(id, wp) if {
	some o in allows_of[id]
	policy_admits(o, wp)
}

identity_rule_path(id) := ["spec", "rules", i, "from"] if {
	zs := [z | some z in ztunnel_authz; z.resource == id]
	count(zs) > 0
	is := [i | some [i, rule] in kept_rules(zs[0]); names_identity(rule)]
	count(is) > 0
	i := is[0]
} else := ["spec", "rules"]

# How traffic reaches the waypoint: through which Services, or addressed to the pods.
via_text(g, ids) := sprintf("traffic to Service %s goes through waypoint %s", [data.meshward.lib.enumerate({s.name | some s in svcs}, 3), data.meshward.lib.display(g)]) if {
	idset := {i | some i in ids}
	svcs := {s |
		some s in waypoint_services
		s.waypoint == g
		some sel in data.meshward.lib.array_of(s.selects)
		sel in idset
	}
	count(svcs) > 0
} else := sprintf("traffic addressed to their pods goes through waypoint %s", [data.meshward.lib.display(g)])

hidden_keys := {[p, g] | some [p, g, _] in hidden}

findings contains f if {
	some [policy, g] in hidden_keys
	ids := [id | some [p, h, id] in hidden; p == policy; h == g]
	wp := waypoint_of(g)
	f := {
		"rule": "ambient/waypoint-hides-caller",
		"severity": "warning",
		"resource": policy,
		"path": identity_rule_path(policy),
		"subjects": sort(id_set(ids)),
		"message": sprintf(
			"%s (ALLOW, no targetRefs, enforced by ztunnel) admits callers by identity, but for %s %s, and the destination's ztunnel sees the waypoint's identity %s, not the caller's. No ALLOW rule of theirs admits it, so ztunnel refuses the waypoint's connection and callers sent through it get 503 from the waypoint, even those this policy allows (sidecar clients, which skip service waypoints, still pass). Fix: add principal %s to this policy, or move the caller rule to the waypoint with targetRefs (the waypoint sees the real caller); istiod's PILOT_AUTO_ALLOW_WAYPOINT_POLICY=true also admits waypoints.",
			[data.meshward.lib.display(policy), workloads_text(ids), via_text(g, ids), wp.principal, wp.principal],
		),
	}
}

# ---------------------------------------------------------------------------
# ambient/peer-authn-disable-ignored
#
# ztunnel keeps HBONE mTLS between captured pods whatever PeerAuthentication says;
# DISABLE is read as "not STRICT", exactly PERMISSIVE: plaintext from outside the mesh
# is accepted, and a parent STRICT stops applying (authorization.go
# convertedSelectorPeerAuthentications, convertPeerAuthentication). A root-namespace
# policy with a selector is ignored for ambient altogether.
#
# Severity: warning when every workload it governs is ambient (nothing it was written to
# do happens); info when it also covers sidecar workloads, where it does turn mTLS off
# as written, and only its ambient part reads as PERMISSIVE. Nothing breaks either way.

disable_path(pa) := ["spec", "mtls", "mode"] if pa.mode == "DISABLE"
else := ["spec", "portLevelMtls", port, "mode"] if {
	port := min({p | some p, m in object.get(pa, "port_modes", {}); m == "DISABLE"})
}

# Ambient workloads a more specific policy with a mode of its own takes away.
overridden contains id if {
	some pa in data.meshward.lib.model_peer_authentications
	pa.scope == "workload"
	pa.namespace != data.meshward.lib.root_namespace
	pa.mode != "UNSET"
	some id in data.meshward.lib.array_of(pa.ambient)
}

governed(pa) := [id | some id in data.meshward.lib.array_of(pa.ambient); not id in overridden] if pa.scope != "workload"
else := data.meshward.lib.array_of(pa.ambient)

sidecar_ids := {w.id | some w in data.meshward.lib.model_workloads; w.proxy == true}

disable_text(pa) := "mTLS mode DISABLE" if pa.mode == "DISABLE"
else := sprintf("mode DISABLE on port %s", [disable_path(pa)[2]])

findings contains f if {
	some pa in data.meshward.lib.model_peer_authentications
	path := disable_path(pa)
	not root_selector(pa)
	ids := governed(pa)
	count(ids) > 0
	sidecars := [id | some id in data.meshward.lib.array_of(pa.workloads); id in sidecar_ids]
	f := {
		"rule": "ambient/peer-authn-disable-ignored",
		"severity": disable_severity(sidecars),
		"resource": pa.resource,
		"path": path,
		"subjects": sort(id_set(ids)),
		"message": sprintf(
			"%s sets %s for %s, but ztunnel keeps mTLS (HBONE) between captured pods whatever PeerAuthentication says: for them DISABLE means PERMISSIVE, plaintext from clients outside the mesh is accepted and a STRICT set above it no longer applies, while their mesh traffic stays encrypted.%s Fix: set PERMISSIVE for the ambient workloads to say what happens%s.",
			[data.meshward.lib.display(pa.resource), disable_text(pa), workloads_text(ids), sidecar_disable_text(sidecars), sidecar_fix(sidecars)],
		),
	}
}

disable_severity(sidecars) := "info" if count(sidecars) > 0 else := "warning"

root_selector(pa) if {
	pa.scope == "workload"
	pa.namespace == data.meshward.lib.root_namespace
}

sidecar_disable_text(sidecars) := sprintf(" For %s with a sidecar it does turn mTLS off: their proxies accept plaintext only, so mesh traffic to them is unencrypted.", [data.meshward.lib.enumerate_ids(sidecars, 3)]) if {
	count(sidecars) > 0
} else := ""

sidecar_fix(sidecars) := ", and keep DISABLE in a policy that selects only the sidecar workloads" if count(sidecars) > 0 else := ", or remove the policy if plaintext between captured pods was the intent (ambient cannot turn it off)"
