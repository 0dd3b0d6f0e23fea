# WorkloadEntry: servers outside Kubernetes registered as mesh members.
package meshward.rules.workloadentry

import rego.v1

# ---------------------------------------------------------------------------
# workloadentry/unselected (warning)

findings contains f if {
	some we in data.meshward.lib.model_workload_entries
	object.get(we, "selected_by", []) in data.meshward.lib.empty_values
	not selected_by_service(we)
	f := {
		"rule": "workloadentry/unselected",
		"severity": "warning",
		"resource": we.id,
		"path": ["metadata", "labels"],
		"message": sprintf(
			"%s (labels %s) is selected by no ServiceEntry or Kubernetes Service: it is registered but has no host name to be called by, so no traffic reaches it%s. Add a ServiceEntry whose spec.workloadSelector.labels match its metadata.labels, or fix the labels.",
			[data.meshward.lib.display(we.id), data.meshward.lib.labels_text(we.labels), nearby_text(we)],
		),
	}
}

# Kubernetes Services select WorkloadEntries too (istiod adds them as endpoints):
# selectors of the Services of each namespace.
service_selectors[r.namespace] contains sel if {
	some r in data.meshward.lib.resources("Service")
	sel := object.get(r.body, ["spec", "selector"], null)
	is_object(sel)
	count(sel) > 0
}

selected_by_service(we) if {
	some sel in service_selectors[we.namespace]
	every k, v in sel {
		data.meshward.lib.get(we.labels, k, null) == v
	}
}

# ServiceEntry selectors per namespace, named to help spot a near-miss.
se_selectors_in[s.namespace] contains sprintf("%s selects %s", [data.meshward.lib.display(s.resource), data.meshward.lib.labels_text(s.labels)]) if {
	some s in data.meshward.lib.model_selectors
	s.kind == "ServiceEntry"
	s.scope == "workload"
}

nearby_text(we) := sprintf(" (in namespace %s, %s)", [we.namespace, data.meshward.lib.enumerate(nearby, 3)]) if {
	nearby := se_selectors_in[we.namespace]
	count(nearby) > 0
} else := ""

# ---------------------------------------------------------------------------
# workloadentry/address-required (error)

findings contains f if {
	some r in data.meshward.lib.resources("WorkloadEntry")
	object.get(r.body, ["spec", "address"], null) in data.meshward.lib.empty_values
	object.get(r.body, ["spec", "network"], null) in data.meshward.lib.empty_values
	f := {
		"rule": "workloadentry/address-required",
		"severity": "error",
		"resource": r.id,
		"path": ["spec", "address"],
		"message": sprintf(
			"WorkloadEntry %s/%s has neither spec.address nor spec.network: the API server rejects it (address or network is required), so this server never joins the mesh. Set spec.address to the server's IP address or host name.",
			[r.namespace, r.name],
		),
	}
}

# ---------------------------------------------------------------------------
# workloadentry/invalid-address (error)

findings contains f if {
	some we in data.meshward.lib.model_workload_entries
	problem := we.address_problem
	problem != null
	f := {
		"rule": "workloadentry/invalid-address",
		"severity": "error",
		"resource": we.id,
		"path": ["spec", "address"],
		"message": sprintf(
			"%s has address %s, which %s: it is not a valid IP address, FQDN or unix socket, so Istio's validating webhook refuses the WorkloadEntry (the CRD alone accepts any string; with the webhook inactive it is accepted and traffic meant for this server cannot reach it). Use a bare IP address, a host name, or a unix:// socket path.",
			[data.meshward.lib.display(we.id), json.marshal(we.address), problem],
		),
	}
}
