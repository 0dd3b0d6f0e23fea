# What Istio's validating webhook refuses in a Telemetry (ValidateTelemetry): part of
# package meshward.rules.schema (schema.rego holds the objects, the helpers and why).
#
# Reads only objs.Telemetry, with the helpers of this file, schema.rego and lib.rego: a
# check whose revisions hold no Telemetry does not compile it. Keep it so.
# meshward: per-object
# meshward: only-for-kinds Telemetry
package meshward.rules.schema

import rego.v1

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
