# Selectors: policies and services that apply nowhere, or only where tooling cannot see.
package meshward.rules.selector

import rego.v1

# ---------------------------------------------------------------------------
# selector/matches-nothing (ServiceEntry: error, other kinds: warning; IST0127)

severity(kind) := "error" if kind == "ServiceEntry" else := "warning"

# Namespaces with at least one workload or WorkloadEntry.
populated contains ns if {
	some ns, n in data.meshward.lib.model_namespaces
	data.meshward.lib.num(object.get(n, "workloads", 0)) > 0
}

populated contains we.namespace if {
	some we in data.meshward.lib.model_workload_entries
}

# Hosts of every ServiceEntry, by id.
se_hosts[r.id] contains h if {
	some r in data.meshward.lib.resources("ServiceEntry")
	some h in data.meshward.lib.array_of(data.meshward.lib.spec_of(r).hosts)
	is_string(h)
}

findings contains f if {
	some s in data.meshward.lib.model_selectors
	s.match_count == 0
	s.scope == "workload"
	# Workloads it matches whose proxy is unknown (their namespace is not declared)
	# may well be selected: that is not "selects nothing".
	count(object.get(s, "unknown_matches", [])) == 0
	# A ServiceEntry selecting a WorkloadGroup's labels gets its VMs as they register.
	count(object.get(s, "workload_groups", [])) == 0
	# Selecting only ambient workloads is explained by the ambient rules, not as
	# "selects nothing".
	not explained_by_ambient(s)
	f := {
		"rule": "selector/matches-nothing",
		"severity": severity(s.kind),
		"istio_code": "IST0127",
		"resource": s.resource,
		"path": s.path,
		"message": workload_scope_message(s),
	}
}

findings contains f if {
	some s in data.meshward.lib.model_selectors
	s.match_count == 0
	s.scope == "namespace"
	not s.namespace in populated
	f := {
		"rule": "selector/matches-nothing",
		"severity": severity(s.kind),
		"istio_code": "IST0127",
		"resource": s.resource,
		"path": s.path,
		"message": sprintf(
			"%s is namespace-wide%s, but namespace %s has no workloads: this policy applies nowhere. Move it to the namespace of the workloads it is meant for, or remove it.",
			[data.meshward.lib.display(s.resource), empty_selector_text(s), s.namespace],
		),
	}
}

# A namespace-wide selector with a path is an empty one (`matchLabels: {}`).
empty_selector_text(s) := " (its selector is empty, which Istio reads as no selector)" if count(s.path) > 0 else := ""

# Kinds an ambient rule reports when they select ambient workloads only
# (ambient/sidecar-ignored, ambient/policy-needs-waypoint). AuthorizationPolicy and
# PeerAuthentication reach ambient workloads of their own namespace through ztunnel;
# the ambient ones a root-namespace selector picks elsewhere are said here.
ambient_explained_kinds := {"Sidecar", "RequestAuthentication", "Telemetry", "WasmPlugin", "EnvoyFilter"}

explained_by_ambient(s) if {
	s.kind in ambient_explained_kinds
	count(data.meshward.lib.array_of(object.get(s, "ambient_matches", []))) > 0
}

what_is_counted(s) := "workload or WorkloadEntry" if s.counts == "workloads_and_entries" else := "workload with an Istio proxy"

where_text(s) := "any namespace" if s.namespace == data.meshward.lib.root_namespace else := sprintf("namespace %s", [s.namespace])

workload_scope_message(s) := sprintf(
	"%s selects no workload: its workloadSelector (%s) matches no WorkloadEntry or pod in namespace %s, so callers of %s get no endpoints (503 no healthy upstream). Fix spec.workloadSelector.labels to match the labels of the intended WorkloadEntries or pods.",
	[data.meshward.lib.display(s.resource), data.meshward.lib.labels_text(s.labels), s.namespace, hosts_text(s.resource)],
) if {
	s.kind == "ServiceEntry"
} else := sprintf(
	"%s selects no workload: its selector (%s) matches no %s in %s, so this policy applies nowhere%s. Fix the selector to match the pod labels of the intended workload.%s",
	[data.meshward.lib.display(s.resource), data.meshward.lib.labels_text(s.labels), what_is_counted(s), where_text(s), unproxied_hint(s), gateway_text(s)],
) if {
	count(data.meshward.lib.array_of(object.get(s, "ambient_matches", []))) == 0
} else := sprintf(
	"%s selects no workload it applies to: its selector (%s) matches only %s, which ztunnel captures (ambient), and ztunnel applies a %s with a selector only to pods of the policy's own namespace (%s), so it applies nowhere. Put it in the namespace of those workloads.",
	[data.meshward.lib.display(s.resource), data.meshward.lib.labels_text(s.labels), data.meshward.lib.enumerate_ids(s.ambient_matches, 3), s.kind, s.namespace],
)

# Gateway traffic and mesh traffic follow separate rules: say which one the policy was meant for.
gateway_text(s) := sprintf(" It targets gateway pods (istio=%s), i.e. traffic entering through that gateway, not traffic between sidecars; if the gateway is deployed outside this repository, record an exception.", [g]) if {
	g := data.meshward.lib.get(s.labels, "istio", null)
	is_string(g)
	endswith(g, "gateway")
} else := ""

hosts_text(id) := data.meshward.lib.enumerate(se_hosts[id], 3) if count(se_hosts[id]) > 0 else := "its hosts"

# Workloads without a proxy (not counted as matches), by namespace: index into model.workloads.
unproxied_in[w.namespace] contains i if {
	some i, w in data.meshward.lib.model_workloads
	not w.proxy == true
	not w.proxy_known == false
	# ztunnel's workloads are in the mesh without a sidecar.
	not w.ambient == true
}

# Workloads the labels do match but that have no proxy (so they are not counted).
unproxied_hint(s) := sprintf(" (it matches %s, which %s no Istio proxy)", [data.meshward.lib.enumerate_ids(near, 3), data.meshward.lib.plural(count(near), "has", "have")]) if {
	s.counts != "workloads_and_entries"
	labels := s.labels
	is_object(labels)
	count(labels) > 0
	near := [w.id |
		some i in candidates(s)
		w := data.meshward.lib.model_workloads[i]
		every k, v in labels {
			data.meshward.lib.get(w.labels, k, null) == v
		}
	]
	count(near) > 0
} else := ""

# A selector in the root namespace reaches every namespace.
candidates(s) := {i | some ids in unproxied_in; some i in ids} if s.namespace == data.meshward.lib.root_namespace
else := object.get(unproxied_in, s.namespace, set())

# ---------------------------------------------------------------------------
# selector/matches-spec-labels-only (warning)

findings contains f if {
	some s in data.meshward.lib.model_selectors
	only := s.spec_only_matches
	not only in data.meshward.lib.empty_values
	is_array(only)
	f := {
		"rule": "selector/matches-spec-labels-only",
		"severity": "warning",
		"resource": s.resource,
		"path": s.path,
		"message": sprintf(
			"%s selects %s only through spec.labels (%s): the control plane honors that, but kubectl get -l and Kubernetes tooling see metadata.labels only and will not find %s. Copy the labels to the metadata.labels of %s.",
			[
				data.meshward.lib.display(s.resource), data.meshward.lib.enumerate_ids(only, 3), data.meshward.lib.labels_text(s.labels),
				data.meshward.lib.plural(count(only), "it", "them"), data.meshward.lib.plural(count(only), "that WorkloadEntry", "those WorkloadEntries"),
			],
		),
	}
}

# ---------------------------------------------------------------------------
# selector/wildcard-value (error)

findings contains f if {
	some s in data.meshward.lib.model_selectors
	invalid := s.invalid
	not invalid in data.meshward.lib.empty_values
	is_array(invalid)
	some bad in invalid
	f := {
		"rule": "selector/wildcard-value",
		"severity": "error",
		"resource": s.resource,
		"path": invalid_path(s, bad),
		"message": sprintf(
			"%s has an invalid selector label %s=%s (%v): Istio rejects * in selector keys and values and empty keys, so this %s is not applied. Name the exact label value (a selector cannot match by pattern).",
			[data.meshward.lib.display(s.resource), object.get(bad, "key", ""), object.get(bad, "value", ""), object.get(bad, "problem", "invalid"), s.kind],
		),
	}
}

invalid_path(s, bad) := array.concat(s.path, [bad.key]) if {
	is_string(bad.key)
	bad.key != ""
	is_array(s.path)
} else := s.path
