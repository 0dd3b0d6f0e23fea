# WorkloadGroup: the "pod template" of VMs joining the mesh.
package meshward.rules.workloadgroup

import rego.v1

probe_methods := ["httpGet", "tcpSocket", "exec", "grpc"]

group_name(r) := sprintf("WorkloadGroup %s/%s", [r.namespace, r.name])

# ---------------------------------------------------------------------------
# workloadgroup/template-required (error)

findings contains f if {
	some r in data.meshward.lib.resources("WorkloadGroup")
	not is_object(object.get(r.body, ["spec", "template"], null))
	f := {
		"rule": "workloadgroup/template-required",
		"severity": "error",
		"resource": r.id,
		"path": ["spec", "template"],
		"message": sprintf(
			"%s has no spec.template: the API server rejects it, so no VM can be configured from it (its labels, service account and ports come from the template). Add spec.template with the labels and serviceAccount its VMs run as.",
			[group_name(r)],
		),
	}
}

# ---------------------------------------------------------------------------
# workloadgroup/probe-multiple-methods (error)

# The probe of a WorkloadGroup, when it has one.
probes := [[r, p] |
	some r in data.meshward.lib.resources("WorkloadGroup")
	p := object.get(r.body, ["spec", "probe"], null)
	is_object(p)
]

findings contains f if {
	some [r, probe] in probes
	used := [m | some m in probe_methods; object.get(probe, m, null) != null]
	count(used) > 1
	f := {
		"rule": "workloadgroup/probe-multiple-methods",
		"severity": "error",
		"resource": r.id,
		"path": ["spec", "probe"],
		"message": sprintf(
			"%s has a probe that sets %s: a probe may use only one of httpGet, tcpSocket, exec and grpc, so Istio rejects the group and its VMs get no health check. Keep one method.",
			[group_name(r), concat(" and ", used)],
		),
	}
}

# ---------------------------------------------------------------------------
# workloadgroup/probe-incomplete (error)

valid_port(n) if {
	is_number(n)
	n >= 1
	n <= 65535
	n == floor(n)
}

incomplete[r.id] contains [path, problem] if {
	some [r, probe] in probes
	some m in ["httpGet", "tcpSocket"]
	action := object.get(probe, m, null)
	action != null
	port := data.meshward.lib.get(action, "port", null)
	not valid_port(port)
	path := ["spec", "probe", m, "port"]
	problem := port_problem(m, port)
}

incomplete[r.id] contains [path, problem] if {
	some [r, probe] in probes
	action := object.get(probe, "exec", null)
	action != null
	not data.meshward.lib.non_empty(data.meshward.lib.array_of(data.meshward.lib.get(action, "command", null)))
	path := ["spec", "probe", "exec", "command"]
	problem := "exec has no command"
}

incomplete[r.id] contains [path, problem] if {
	some [r, probe] in probes
	scheme := data.meshward.lib.get(object.get(probe, "httpGet", null), "scheme", null)
	scheme != null
	not scheme in {"", "HTTP", "HTTPS"}
	path := ["spec", "probe", "httpGet", "scheme"]
	problem := sprintf("httpGet.scheme is %s (only HTTP or HTTPS)", [json.marshal(scheme)])
}

port_problem(m, null) := sprintf("%s has no port", [m])

port_problem(m, port) := sprintf("%s.port %s is not in 1..65535", [m, json.marshal(port)]) if port != null

findings contains f if {
	some [r, _] in probes
	some [path, problem] in incomplete[r.id]
	f := {
		"rule": "workloadgroup/probe-incomplete",
		"severity": "error",
		"resource": r.id,
		"path": path,
		"message": sprintf(
			"%s has an incomplete probe (%s), so Istio rejects the group and its VMs get no health check. httpGet and tcpSocket need a port in 1..65535, exec needs a command.",
			[group_name(r), problem],
		),
	}
}

# ---------------------------------------------------------------------------
# workloadgroup/unreachable (warning)

findings contains f if {
	some g in data.meshward.lib.model_workload_groups
	g.has_template == true
	count(g.selected_by) == 0
	count(g.selected_by_services) == 0
	f := {
		"rule": "workloadgroup/unreachable",
		"severity": "warning",
		"resource": g.id,
		"path": ["spec", "metadata", "labels"],
		"message": sprintf(
			"%s: no ServiceEntry or Kubernetes Service in namespace %s selects the labels its VMs register with (%s): VMs started from this group join the mesh but have no host name to be called by, so no traffic reaches them%s. Add a ServiceEntry (location: MESH_INTERNAL, resolution: STATIC) whose spec.workloadSelector.labels match the group's spec.metadata.labels, or fix the labels.",
			[group_name(g), g.namespace, data.meshward.lib.labels_text(object.union(g.metadata_labels, g.template_labels)), nearby_text(g.namespace)],
		),
	}
}

# ServiceEntry selectors of a namespace, named to help spot a near-miss.
se_selectors_in[s.namespace] contains sprintf("%s selects %s", [data.meshward.lib.display(s.resource), data.meshward.lib.labels_text(s.labels)]) if {
	some s in data.meshward.lib.model_selectors
	s.kind == "ServiceEntry"
	s.scope == "workload"
}

nearby_text(ns) := sprintf(" (in namespace %s, %s)", [ns, data.meshward.lib.enumerate(se_selectors_in[ns], 3)]) if {
	count(se_selectors_in[ns]) > 0
} else := ""
