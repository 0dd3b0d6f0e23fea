# AuthorizationPolicy (and the other kinds that attach by selector or targetRef).
package meshward.rules.authz

import rego.v1

# ---------------------------------------------------------------------------
# authz/selector-and-target-ref (error)

attach_fields := ["selector", "targetRef", "targetRefs"]

attach_set := {"selector", "targetRef", "targetRefs"}

attach_kinds := ["AuthorizationPolicy", "RequestAuthentication", "Telemetry", "WasmPlugin"]

findings contains f if {
	some kind in attach_kinds
	some r in data.meshward.lib.resources(kind)
	spec := r.body.spec
	is_object(spec)
	count(object.keys(spec) & attach_set) > 1
	used := [k | some k in attach_fields; not object.get(spec, k, null) in data.meshward.lib.empty_values]
	count(used) > 1
	f := {
		"rule": "authz/selector-and-target-ref",
		"severity": "error",
		"resource": r.id,
		"path": ["spec", used[1]],
		"message": sprintf(
			"%s %s/%s sets both %s: at most one of selector, targetRef and targetRefs is allowed, so Istio rejects it and the policy is not applied. Use selector for sidecar workloads, or targetRef(s) for gateways and waypoints.",
			[kind, r.namespace, r.name, concat(" and ", [sprintf("spec.%s", [k]) | some k in used])],
		),
	}
}

# ---------------------------------------------------------------------------
# The sources of every AuthorizationPolicy rule, with their paths.

sources := [s |
	some r in data.meshward.lib.resources("AuthorizationPolicy")
	rules := r.body.spec.rules
	is_array(rules)
	some i, rule in rules
	froms := rule.from
	is_array(froms)
	some j, from in froms
	source := from.source
	is_object(source)
	s := {
		"r": r,
		"action": object.get(actions, object.get(r.body.spec, "action", null), "ALLOW"),
		"source": source,
		"path": ["spec", "rules", i, "from", j, "source"],
	}
]

# action as Istio reads it (unset: ALLOW).
actions := {null: "ALLOW", "": "ALLOW", "ALLOW": "ALLOW", "DENY": "DENY", "AUDIT": "AUDIT", "CUSTOM": "CUSTOM"}

policy_name(s) := sprintf("AuthorizationPolicy %s/%s", [s.r.namespace, s.r.name])

# What a source that can match nobody means at runtime, by action.
no_match_effect(s) := "callers will get 403 RBAC: access denied" if s.action == "ALLOW"
else := "the DENY rule never matches the intended caller, so its requests are not blocked" if s.action == "DENY"
else := sprintf("the %s rule never matches the intended caller", [s.action])

# ---------------------------------------------------------------------------
# authz/service-accounts-with-principals (error)

exclusive := [
	["serviceAccounts", ["principals", "namespaces"]],
	["notServiceAccounts", ["notPrincipals", "notNamespaces"]],
]

findings contains f if {
	some s in sources
	some [sa_field, others] in exclusive
	not object.get(s.source, sa_field, null) in data.meshward.lib.empty_values
	clash := [o | some o in others; not object.get(s.source, o, null) in data.meshward.lib.empty_values]
	count(clash) > 0
	f := {
		"rule": "authz/service-accounts-with-principals",
		"severity": "error",
		"resource": s.r.id,
		"path": array.concat(s.path, [sa_field]),
		"message": sprintf(
			"%s sets source.%s together with %s: %s excludes %s, so Istio rejects the policy and it is not applied. Name callers either by %s (namespace/name) or by %s, not both.",
			[policy_name(s), sa_field, concat(" and ", [sprintf("source.%s", [o]) | some o in clash]), sa_field, concat(" and ", others), sa_field, concat(" and ", others)],
		),
	}
}

# ---------------------------------------------------------------------------
# authz/unknown-principal (warning)

service_accounts := object.get(data.meshward.lib.model, "service_accounts", {})

# ns -> service account names a WorkloadEntry or WorkloadGroup runs as
# (model.service_accounts, "ns/sa" -> workloads, covers Kubernetes workloads).
vm_sas_in[we.namespace] contains we.service_account if {
	some we in data.meshward.lib.model_workload_entries
	is_string(we.service_account)
}

vm_sas_in[r.namespace] contains sa if {
	some r in data.meshward.lib.resources("WorkloadGroup")
	sa := r.body.spec.template.serviceAccount
	is_string(sa)
}

# ns -> service account names waypoints run as: istiod deploys a waypoint's pods as a
# service account named after its Gateway, which the repository does not hold
# (ambient/waypoint-hides-caller asks for that principal to be allowed).
waypoint_sas_in[w.namespace] contains w.name if {
	some w in data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoints", []))
	w.waypoint_class == true
}

# Every service account name in use in ns (for messages only): the model lists them
# by namespace (splitting every key of service_accounts here cost a tenth of a
# second at 30k workloads, for a message).
sas_in(ns) := {sa | some sa in object.get(data.meshward.lib.model_namespaces, [ns, "service_accounts"], [])} | object.get(vm_sas_in, ns, set())

# Principals named by the sources, without wildcards: [source index, principal index, principal, parts].
principals := [[si, k, p, split(p, "/")] |
	some si, s in sources
	ps := s.source.principals
	is_array(ps)
	some k, p in ps
	is_string(p)
	not contains(p, "*")
]

# Indexes into principals of those of the form "<trust-domain>/ns/<namespace>/sa/<service-account>".
well_formed := {i |
	some i, [_, _, _, parts] in principals
	count(parts) == 5
	parts[1] == "ns"
	parts[3] == "sa"
	parts[0] != ""
	parts[2] != ""
	parts[4] != ""
	not contains(parts[0], ":")
}

findings contains f if {
	some i in well_formed
	[si, k, p, parts] := principals[i]
	ns := parts[2]
	sa := parts[4]
	not service_accounts[concat("/", [ns, sa])]
	not sa in vm_sas_in[ns]
	not sa in waypoint_sas_in[ns]
	s := sources[si]
	f := {
		"rule": "authz/unknown-principal",
		"severity": "warning",
		"resource": s.r.id,
		"path": array.concat(s.path, ["principals", k]),
		"message": sprintf(
			"%s names principal %s, but no workload in this repository runs as service account %s/%s: %s. Check it against the caller's serviceAccountName%s.",
			[policy_name(s), p, ns, sa, no_match_effect(s), known_text(ns)],
		),
	}
}

known_text(ns) := sprintf(" (service accounts in use in %s: %s)", [ns, data.meshward.lib.enumerate(sas, 5)]) if {
	sas := sas_in(ns)
	count(sas) > 0
} else := ""

findings contains f if {
	some i, [si, k, p, _] in principals
	not i in well_formed
	s := sources[si]
	f := {
		"rule": "authz/unknown-principal",
		"severity": "warning",
		"resource": s.r.id,
		"path": array.concat(s.path, ["principals", k]),
		"message": sprintf(
			"%s names principal %s, which is not of the form <trust-domain>/ns/<namespace>/sa/<service-account>%s: it matches no caller, so %s. Write it as %s/ns/<namespace>/sa/<service-account>.",
			[policy_name(s), json.marshal(p), spiffe_hint(p), no_match_effect(s), data.meshward.lib.trust_domain],
		),
	}
}

spiffe_hint(p) := " (drop the spiffe:// prefix: Istio adds it)" if startswith(p, "spiffe://") else := ""

# ---------------------------------------------------------------------------
# authz/unknown-namespace (warning, IST0101)

# Namespaces every cluster has, declared in the repository or not.
always_there(ns) if ns in data.meshward.lib.system_namespaces

always_there(ns) if ns == data.meshward.lib.root_namespace

always_there(ns) if ns == "default"

findings contains f if {
	some s in sources
	nss := s.source.namespaces
	is_array(nss)
	some k, ns in nss
	is_string(ns)
	not contains(ns, "*")
	not data.meshward.lib.model_namespaces[ns]
	not always_there(ns)
	f := {
		"rule": "authz/unknown-namespace",
		"severity": "warning",
		"istio_code": "IST0101",
		"resource": s.r.id,
		"path": array.concat(s.path, ["namespaces", k]),
		"message": sprintf(
			"%s names namespace %s in source.namespaces, but no such namespace exists in this repository: the rule matches no caller from it, so %s. Check the spelling against the caller's namespace.",
			[policy_name(s), ns, no_match_effect(s)],
		),
	}
}

# ---------------------------------------------------------------------------
# authz/identity-change (warning)

# A workload (in the mesh in base: a sidecar or ambient) or WorkloadGroup whose service account this change
# changes, so that it presents a new identity.
# Sets, not objects: one id may stand for several copies (two roots deploy one
# workload). A copy keeps its identity when any base copy ran as its account.
base_workloads_by_id[b.id] contains b if some b in data.meshward.lib.base_workloads

base_groups_by_id[g.id] contains g if some g in data.meshward.lib.base_workload_groups

# Workloads base holds whose [id, service account] pair base lacks: the model says
# which (comparing every workload's pair here cost a tenth of a second per revision
# at 30k workloads). The indexes by id are built only when there is one.
changed_workload_ids := {id | some id in object.get(data.meshward.lib.model, "service_account_changed", [])}

head_workloads_by_id[w.id] contains w if {
	count(changed_workload_ids) > 0
	some w in data.meshward.lib.model_workloads
}

sa_changes contains c if {
	some id in changed_workload_ids
	some w in head_workloads_by_id[id]
	copies := base_workloads_by_id[w.id]
	not w.service_account in {b.service_account | some b in copies}
	some b in copies
	data.meshward.lib.in_mesh(b)
	c := {
		"id": w.id, "namespace": w.namespace, "old": b.service_account, "new": w.service_account,
		"path": array.concat(data.meshward.lib.pod_spec_path(w.kind), ["serviceAccountName"]),
	}
}

sa_changes contains c if {
	some g in data.meshward.lib.model_workload_groups
	copies := base_groups_by_id[g.id]
	not g.service_account in {b.service_account | some b in copies}
	some b in copies
	c := {
		"id": g.id, "namespace": g.namespace, "old": b.service_account, "new": g.service_account,
		"path": ["spec", "template", "serviceAccount"],
	}
}

head_policies := {r.id | some r in data.meshward.lib.resources("AuthorizationPolicy")}

allowed_by(identities, ns, sa) := {p | some p in object.get(identities, [concat("/", [ns, sa]), "allowed_by"], [])}

findings contains f if {
	some c in sa_changes
	# ALLOW policies that admitted the old identity and are still there.
	admitted := allowed_by(data.meshward.lib.base_identities, c.namespace, c.old) & head_policies
	count(admitted) > 0
	count(admitted & allowed_by(data.meshward.lib.model_identities, c.namespace, c.new)) == 0
	callees := {m | some s in data.meshward.lib.model_selectors; s.resource in admitted; some m in s.matches}
	new_principal := sprintf("%s/ns/%s/sa/%s", [data.meshward.lib.trust_domain, c.namespace, c.new])
	f := {
		"rule": "authz/identity-change",
		"severity": "warning",
		"resource": c.id,
		"path": c.path,
		"message": sprintf(
			"%s now runs as service account %s (was %s), so it presents the identity %s, which no ALLOW policy that admitted it names (%s): calls from %s to %s will now get 403 RBAC: access denied (the mTLS connection still succeeds; authorization rejects them). Add principal %s to %s in this change, or keep service account %s.",
			[data.meshward.lib.display(c.id), c.new, c.old, new_principal, data.meshward.lib.enumerate_ids(admitted, 3), data.meshward.lib.display(c.id), callees_text(callees), new_principal, plural_policies(admitted), c.old],
		),
	}
}

callees_text(callees) := data.meshward.lib.enumerate_ids(callees, 3) if count(callees) > 0 else := "the workloads those policies protect"

plural_policies(ps) := "that policy" if count(ps) == 1 else := "those policies"
