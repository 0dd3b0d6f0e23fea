# What Istio's validating webhook refuses in a WorkloadGroup (ValidateWorkloadGroup,
# validateReadinessProbe): part of package meshward.rules.schema (schema.rego holds the
# objects, the helpers and why).
#
# Reads only objs.WorkloadGroup, with the helpers of this file, schema.rego and
# lib.rego: a check whose revisions hold no WorkloadGroup does not compile it. Keep it
# so.
# meshward: per-object
# meshward: only-for-kinds WorkloadGroup
package meshward.rules.schema

import rego.v1

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
