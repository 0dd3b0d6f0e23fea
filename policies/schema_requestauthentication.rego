# What Istio's validating webhook refuses in a RequestAuthentication (validateJwtRule):
# part of package meshward.rules.schema (schema.rego holds the objects, the helpers and
# why).
#
# Reads only objs.RequestAuthentication, with the helpers of this file, schema.rego and
# lib.rego: a check whose revisions hold no RequestAuthentication does not compile it.
# Keep it so.
# meshward: per-object
# meshward: only-for-kinds RequestAuthentication
package meshward.rules.schema

import rego.v1

jwt_rules := [[o, ["spec", "jwtRules", i], rule] |
	some o in objs.RequestAuthentication
	some i, rule in arr(object.get(o.spec, "jwtRules", null))
	is_object(rule)
]

# jwksUri and its proto name jwks_uri (jwksUri wins when both are set).
jwks_uri_field(rule) := "jwksUri" if object.get(rule, "jwksUri", null) != null else := "jwks_uri"

issues contains [o.id, array.concat(p, ["issuer"]), say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	object.get(rule, "issuer", null) in {null, ""}
	object.get(rule, jwks_uri_field(rule), null) in {null, ""}
	text := sprintf("%s has neither issuer nor jwksUri", [ft(p)])
	fix := "Set the issuer (iss claim) of the tokens, and where its keys are."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	field := jwks_uri_field(rule)
	uri := object.get(rule, field, "")
	is_string(uri)
	uri != ""
	not jwks_uri_ok(uri)
	path := array.concat(p, [field])
	text := sprintf("%s %s is not an http:// or https:// URL", [ft(path), q(uri)])
	fix := "Use the https:// URL of the issuer's JWKS."
}

jwks_uri_ok(uri) if {
	http_scheme(lower(uri))
	not regex.match(`[\x00-\x1f\x7f]`, uri)
}

http_scheme(uri) := true if startswith(uri, "http:") else := true if startswith(uri, "https:")

issues contains [o.id, array.concat(p, ["jwks"]), say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	jwks := object.get(rule, "jwks", "")
	is_string(jwks)
	jwks != ""
	problem := jwks_problem(jwks)
	text := sprintf("%s.jwks does not parse as a JSON Web Key Set: %s", [ft(p), problem])
	fix := "Paste the issuer's JWKS document ({\"keys\": [...]}), or use jwksUri."
}

kty_values := {"RSA", "EC", "oct", "OKP"}

jwks_problem(s) := "it is not JSON" if not json.is_valid(s)
else := "it is not a JSON object" if not is_object(json.unmarshal(s))
else := "its keys field is not a list" if {
	v := json.unmarshal(s)
	ks := object.get(v, "keys", null)
	ks != null
	not is_array(ks)
} else := "a key has no kty of RSA, EC, oct or OKP" if {
	ks := object.get(json.unmarshal(s), "keys", null)
	is_array(ks)
	some k in ks
	not at(k, "kty", null) in kty_values
} else := "it has no keys list and is no single key with a kty of RSA, EC, oct or OKP" if {
	v := json.unmarshal(s)
	not "keys" in object.keys(v)
	not object.get(v, "kty", null) in kty_values
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	some f in ["audiences", "fromParams", "fromCookies"]
	some k, v in arr(object.get(rule, f, null))
	v == ""
	path := array.concat(p, [f, k])
	text := sprintf("%s is an empty string", [ft(path)])
	fix := "Remove the empty entry."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	some k, h in arr(object.get(rule, "fromHeaders", null))
	at(h, "name", null) in {null, ""}
	path := array.concat(p, ["fromHeaders", k, "name"])
	text := sprintf("%s is missing or empty", [ft(path)])
	fix := "Name the header the token is read from, e.g. Authorization."
}

issues contains [o.id, path, say(o, text, fix)] if {
	some [o, p, rule] in jwt_rules
	some k, c in arr(object.get(rule, "outputClaimToHeaders", null))
	problem := claim_header_problem(c)
	path := array.concat(p, ["outputClaimToHeaders", k])
	text := sprintf("%s %s", [ft(path), problem])
	fix := "Set both claim and header; header names use letters, digits, '-' and '_'."
}

claim_header_problem(c) := "has an empty claim or header" if {
	some f in ["claim", "header"]
	at(c, f, null) in {null, ""}
} else := sprintf("header %s is not a valid header name (letters, digits, '-' and '_')", [q(h)]) if {
	h := at(c, "header", "")
	is_string(h)
	not strict_header_name(h)
}

strict_header_name(h) if {
	h != ""
	trim(h, concat("", [word_chars, "-"])) == ""
}

issues contains [o.id, array.concat(p, ["timeout"]), say(o, text, duration_fix)] if {
	some [o, p, rule] in jwt_rules
	d := object.get(rule, "timeout", null)
	problem := duration_problem(d)
	text := sprintf("%s.timeout %s %s", [ft(p), q(d), problem])
}
