# What Istio's validating webhook refuses in a PeerAuthentication
# (ValidatePeerAuthentication; mtls/port-level-requires-selector says the rest): part of
# package meshward.rules.schema (schema.rego holds the objects, the helpers and why).
#
# Reads only objs.PeerAuthentication, with the helpers of this file, schema.rego and
# lib.rego: a check whose revisions hold no PeerAuthentication does not compile it. Keep
# it so.
# meshward: per-object
# meshward: only-for-kinds PeerAuthentication
package meshward.rules.schema

import rego.v1

issues contains [o.id, ["spec", "portLevelMtls"], say(o, text, fix)] if {
	some o in objs.PeerAuthentication
	object.get(o.spec, "portLevelMtls", null) == {}
	text := "spec.portLevelMtls is present but empty"
	fix := "Remove portLevelMtls, or add port numbers with their mode."
}

issues contains [o.id, ["spec", "portLevelMtls", k], say(o, text, fix)] if {
	some o in objs.PeerAuthentication
	some k, _ in obj(object.get(o.spec, "portLevelMtls", null))
	not port_key_ok(k)
	text := sprintf("spec.portLevelMtls has the key %s, which is not a port number in 1..65535", [q(k)])
	fix := "Key portLevelMtls by the workload's port numbers, e.g. 8080."
}

port_key_ok(k) if {
	k != ""
	count(k) <= 5
	trim(k, digits) == ""
	not startswith(k, "0")
	to_number(k) <= 65535
}
