# What Istio's validating webhook refuses in a WorkloadEntry (validateWorkloadEntry):
# part of package meshward.rules.schema (schema.rego holds the objects, the helpers and
# why).
#
# Reads only objs.WorkloadEntry (and the model's facts on WorkloadEntries, which only
# keep a finding back), with the helpers of this file, schema.rego and lib.rego: a
# check whose revisions hold no WorkloadEntry does not compile it. Keep it so.
# meshward: per-object
# meshward: only-for-kinds WorkloadEntry
package meshward.rules.schema

import rego.v1

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
