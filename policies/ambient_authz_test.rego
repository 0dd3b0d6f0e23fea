package meshward.rules.ambient_authz_test

import rego.v1

import data.meshward.rules.ambient_authz

# ---------------------------------------------------------------------------
# builders

res(kind, ns, name, spec) := {
	"id": sprintf("%s/%s/%s", [kind, ns, name]),
	"apiVersion": "security.istio.io/v1",
	"kind": kind,
	"namespace": ns,
	"name": name,
	"body": {"kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec},
	"file": "policy.yaml",
	"line": 1,
}

svc(ns, name, labels) := {
	"id": sprintf("Service/%s/%s", [ns, name]),
	"apiVersion": "v1", "kind": "Service", "namespace": ns, "name": name,
	"body": {"kind": "Service", "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {"selector": {"app": name}}},
	"file": "svc.yaml", "line": 1,
}

workload(ns, name, extra) := object.union(
	{
		"id": sprintf("Deployment/%s/%s", [ns, name]), "kind": "Deployment", "namespace": ns, "name": name,
		"labels": {"app": name}, "service_account": name, "proxy": false, "proxy_known": true,
		"dataplane": "ambient", "ambient": true, "waypoint": null, "service_waypoints": [],
	},
	extra,
)

ns(name, extra) := object.union({"name": name, "declared": true, "labels_known": true, "labels": {}, "ambient": true, "workloads": 1}, extra)

waypoint(ns, name) := {
	"id": sprintf("Gateway/%s/%s", [ns, name]), "namespace": ns, "name": name, "class": "istio-waypoint",
	"waypoint_class": true, "traffic": "service", "allowed_from": "Same", "allowed_selector": null,
	"principal": sprintf("cluster.local/ns/%s/sa/%s", [ns, name]),
}

# A model with overrides; resources by kind.
mk_input(model, by_kind) := {
	"resources": [],
	"by_kind": by_kind,
	"model": object.union(
		{
			"namespaces": {"shop": ns("shop", {}), "payments": ns("payments", {})},
			"workloads": [workload("shop", "cart", {})],
			"workload_entries": [], "selectors": [], "peer_authentications": [],
			"service_accounts": {}, "mtls_scopes": {}, "identities": {},
			"waypoints": [], "waypoint_bindings": [], "waypoint_services": [],
			"ztunnel_authz": [], "target_refs": [],
		},
		model,
	),
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

run(model, by_kind, rule) := {f | some f in ambient_authz.findings with input as mk_input(model, by_kind); f.rule == rule}

the_one(fs) := f if {
	count(fs) == 1
	some f in fs
}

# ---------------------------------------------------------------------------
# ambient/l7-policy-at-ztunnel

l7 := "ambient/l7-policy-at-ztunnel"

z(name, action, outcome, rules, extra) := object.union(
	{
		"resource": sprintf("AuthorizationPolicy/shop/%s", [name]), "action": action,
		"ambient_workloads": ["Deployment/shop/cart"], "sidecar_workloads": 0,
		"outcome": outcome, "rules": rules, "dry_run": false,
	},
	extra,
)

ap(name, spec) := res("AuthorizationPolicy", "shop", name, spec)

test_denies_all_is_an_error_at_the_l7_field if {
	spec := {"action": "ALLOW", "rules": [{"from": [{"source": {"namespaces": ["web"]}}], "to": [{"operation": {"methods": ["GET"]}}]}]}
	entry := z("read-only", "ALLOW", "denies-all", [{"index": 0, "l7_fields": ["to[0].operation.methods"], "outcome": "dropped"}], {})
	f := the_one(run({"ztunnel_authz": [entry]}, {"AuthorizationPolicy": [ap("read-only", spec)]}, l7))
	f.severity == "error"
	f.path == ["spec", "rules", 0, "to", 0, "operation", "methods"]
	f.subjects == ["Deployment/shop/cart"]
	contains(f.message, "rules[0].to[0].operation.methods")
	contains(f.message, "Every connection to Deployment shop/cart is refused (connection reset, curl exit 56)")
	contains(f.message, "no waypoint serves them: add one")
	contains(f.message, "L4 fields only")
}

test_denies_all_names_the_allow_policies_left if {
	entries := [
		z("read-only", "ALLOW", "denies-all", [{"index": 0, "l7_fields": ["to[0].operation.paths"], "outcome": "dropped"}], {}),
		z("ops", "ALLOW", "as-written", [{"index": 0, "l7_fields": [], "outcome": "kept"}], {}),
	]
	f := the_one(run({"ztunnel_authz": entries}, {}, l7))
	contains(f.message, "unless AuthorizationPolicy shop/ops admits them")
}

test_stricter_is_a_warning_naming_the_dropped_rules if {
	entry := z("mixed", "ALLOW", "stricter", [
		{"index": 0, "l7_fields": [], "outcome": "kept"},
		{"index": 1, "l7_fields": ["from[0].source.requestPrincipals"], "outcome": "dropped"},
	], {})
	f := the_one(run({"ztunnel_authz": [entry]}, {}, l7))
	f.severity == "warning"
	f.path == ["spec", "rules", 1, "from", 0, "source", "requestPrincipals"]
	contains(f.message, "rules[1] use HTTP fields")
	contains(f.message, "enforces only rules[0]")
}

test_ignored_deny_passes_although_meant_to_deny if {
	entry := z("block", "DENY", "ignored", [{"index": 0, "l7_fields": ["when[0].key request.headers[user-agent]"], "outcome": "never-fires"}], {})
	f := the_one(run({"ztunnel_authz": [entry]}, {}, l7))
	f.severity == "error"
	f.path == ["spec", "rules", 0, "when", 0, "key"]
	contains(f.message, "rules[0].when[0].key: request.headers[user-agent]")
	contains(f.message, "passes although you meant to deny")
	contains(f.message, "sidecar clients")
}

test_partly_ignored_deny_is_an_error_naming_the_rules if {
	spec := {"action": "DENY", "rules": [
		{"to": [{"operation": {"ports": ["8080"]}}]},
		{"to": [{"operation": {"paths": ["/admin"]}}]},
		{"to": [{"operation": {"ports": ["9090"], "methods": ["DELETE"]}}]},
	]}
	entry := z("guard", "DENY", "partly-ignored", [
		{"index": 0, "l7_fields": [], "outcome": "kept"},
		{"index": 1, "l7_fields": ["to[0].operation.paths"], "outcome": "never-fires"},
		{"index": 2, "l7_fields": ["to[0].operation.methods"], "outcome": "widened"},
	], {})
	f := the_one(run({"ztunnel_authz": [entry]}, {"AuthorizationPolicy": [ap("guard", spec)]}, l7))
	f.severity == "error"
	f.path == ["spec", "rules", 1, "to", 0, "operation", "paths"]
	contains(f.message, "rules[1] can no longer match")
	contains(f.message, "rules[2] denies every connection that matches what is left (to.operation.ports 9090)")
}

test_wider_deny_is_a_warning_saying_what_is_left if {
	spec := {"action": "DENY", "rules": [{"to": [{"operation": {"ports": ["8080"], "methods": ["POST"]}}]}]}
	entry := z("no-posts", "DENY", "wider", [{"index": 0, "l7_fields": ["to[0].operation.methods"], "outcome": "widened"}], {})
	f := the_one(run({"ztunnel_authz": [entry]}, {"AuthorizationPolicy": [ap("no-posts", spec)]}, l7))
	f.severity == "warning"
	contains(f.message, "every connection that matches what is left (to.operation.ports 8080)")
}

test_custom_is_an_error_audit_a_warning_dry_run_info if {
	custom := z("ext", "CUSTOM", "not-sent", [], {})
	audit := z("audit", "AUDIT", "not-sent", [], {})
	dry := z("trial", "DENY", "not-sent", [], {"dry_run": true})
	by_kind := {"AuthorizationPolicy": [ap("ext", {"action": "CUSTOM", "provider": {"name": "opa"}, "rules": [{}]})]}
	fs := run({"ztunnel_authz": [custom, audit, dry]}, by_kind, l7)
	{[f.resource, f.severity] | some f in fs} == {
		["AuthorizationPolicy/shop/ext", "error"],
		["AuthorizationPolicy/shop/audit", "warning"],
		["AuthorizationPolicy/shop/trial", "info"],
	}
	some c in fs
	c.resource == "AuthorizationPolicy/shop/ext"
	c.path == ["spec", "action"]
	contains(c.message, "(CUSTOM (provider opa))")
	contains(c.message, "pass unchecked")
	some d in fs
	d.resource == "AuthorizationPolicy/shop/trial"
	d.path == ["metadata", "annotations", "istio.io/dry-run"]
	contains(d.message, "AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY")
}

test_as_written_is_quiet if {
	entry := z("l4", "ALLOW", "as-written", [{"index": 0, "l7_fields": [], "outcome": "kept"}], {})
	count(run({"ztunnel_authz": [entry]}, {}, l7)) == 0
}

test_sidecars_in_scope_still_enforce_it if {
	entry := z("read-only", "ALLOW", "denies-all", [{"index": 0, "l7_fields": ["to[0].operation.paths"], "outcome": "dropped"}], {"sidecar_workloads": 2})
	f := the_one(run({"ztunnel_authz": [entry]}, {}, l7))
	contains(f.message, "Its 2 workloads with a sidecar still enforce it as written.")
}

test_fix_names_the_service_a_waypoint_serves if {
	entry := z("read-only", "ALLOW", "denies-all", [{"index": 0, "l7_fields": ["to[0].operation.paths"], "outcome": "dropped"}], {})
	served := [{"resource": "Service/shop/cart", "kind": "Service", "namespace": "shop", "name": "cart", "waypoint": "Gateway/shop/waypoint", "ingress_use_waypoint": false, "selects": ["Deployment/shop/cart"]}]
	f := the_one(run({"ztunnel_authz": [entry], "waypoint_services": served, "waypoints": [waypoint("shop", "waypoint")]}, {}, l7))
	contains(f.message, "targetRefs (kind: Service, group: \"\", name: cart; Gateway shop/waypoint serves it)")
}

# ---------------------------------------------------------------------------
# ambient/policy-needs-waypoint

pnw := "ambient/policy-needs-waypoint"

sel(kind, name, scope, ambient) := {
	"resource": sprintf("%s/shop/%s", [kind, name]), "kind": kind, "namespace": "shop",
	"path": ["spec", "selector", "matchLabels"], "scope": scope, "labels": {"app": "cart"},
	"counts": "injected_workloads", "matches": [], "match_count": 0, "unknown_matches": [],
	"spec_only_matches": [], "workload_entry_matches": 0, "ambient_matches": ambient, "invalid": [],
}

test_request_authentication_is_an_error if {
	ra := res("RequestAuthentication", "shop", "jwt", {"selector": {"matchLabels": {"app": "cart"}}, "jwtRules": [{"issuer": "https://auth.example.com"}]})
	jwt_ap := z("need-jwt", "ALLOW", "denies-all", [{"index": 0, "l7_fields": ["from[0].source.requestPrincipals"], "outcome": "dropped"}], {})
	f := the_one(run(
		{"selectors": [sel("RequestAuthentication", "jwt", "workload", ["Deployment/shop/cart"])], "ztunnel_authz": [jwt_ap]},
		{"RequestAuthentication": [ra]},
		pnw,
	))
	f.severity == "error"
	f.path == ["spec", "selector", "matchLabels"]
	contains(f.message, "JWTs sent to them are not validated")
	contains(f.message, "(issuer https://auth.example.com)")
	contains(f.message, "AuthorizationPolicy shop/need-jwt, which checks request principals")
}

test_namespace_wide_request_authentication_fires if {
	s := object.union(sel("RequestAuthentication", "jwt", "namespace", ["Deployment/shop/cart"]), {"path": [], "labels": null})
	f := the_one(run({"selectors": [s]}, {}, pnw))
	f.path == ["spec"]
	contains(f.message, "applies to every workload of namespace shop, also to ambient workload Deployment shop/cart")
}

test_selector_telemetry_warns_namespace_wide_is_quiet if {
	fs := run(
		{"selectors": [
			sel("Telemetry", "logs", "workload", ["Deployment/shop/cart"]),
			object.union(sel("Telemetry", "ns-logs", "namespace", ["Deployment/shop/cart"]), {"path": [], "labels": null}),
		]},
		{},
		pnw,
	)
	f := the_one(fs)
	f.resource == "Telemetry/shop/logs"
	f.severity == "warning"
}

test_envoy_filter_and_selector_wasm_plugin_warn if {
	fs := run(
		{"selectors": [
			object.union(sel("EnvoyFilter", "lua", "workload", ["Deployment/shop/cart"]), {"path": ["spec", "workloadSelector", "labels"]}),
			sel("WasmPlugin", "filter", "workload", ["Deployment/shop/cart"]),
		]},
		{"WasmPlugin": [res("WasmPlugin", "shop", "filter", {"selector": {"matchLabels": {"app": "cart"}}, "url": "oci://registry.example.com/filter:1"})]},
		pnw,
	)
	{[f.resource, f.severity] | some f in fs} == {["EnvoyFilter/shop/lua", "warning"], ["WasmPlugin/shop/filter", "warning"]}
	some w in fs
	w.resource == "WasmPlugin/shop/filter"
	contains(w.message, "(oci://registry.example.com/filter:1) never runs")
}

test_selector_less_wasm_plugin_reaches_the_namespace if {
	plugin := res("WasmPlugin", "shop", "all", {"url": "oci://registry.example.com/filter:1"})
	f := the_one(run({}, {"WasmPlugin": [plugin]}, pnw))
	f.subjects == ["Deployment/shop/cart"]
	contains(f.message, "applies to every workload of namespace shop")
}

test_target_refs_and_sidecars_are_not_this_rule if {
	ra := res("RequestAuthentication", "shop", "jwt", {"targetRefs": [{"kind": "Service", "name": "cart"}], "selector": {"matchLabels": {"app": "cart"}}})
	fs := run(
		{"selectors": [
			sel("RequestAuthentication", "jwt", "workload", ["Deployment/shop/cart"]),
			object.union(sel("Sidecar", "egress", "workload", ["Deployment/shop/cart"]), {"path": ["spec", "workloadSelector", "labels"]}),
		]},
		{"RequestAuthentication": [ra]},
		pnw,
	)
	count(fs) == 0
}

test_no_ambient_match_is_quiet if {
	count(run({"selectors": [sel("RequestAuthentication", "jwt", "workload", [])]}, {}, pnw)) == 0
}

# ---------------------------------------------------------------------------
# ambient/target-ref-unbound

tru := "ambient/target-ref-unbound"

tref(kind, name, target_kind, target_name, state) := {
	"resource": sprintf("%s/payments/%s", [kind, name]), "kind": kind, "path": ["spec", "targetRefs", "0"],
	"target_kind": target_kind, "target_name": target_name, "state": state, "waypoint": null,
}

test_unbound_allow_policy_is_an_error if {
	t := tref("AuthorizationPolicy", "ledger-writes", "Service", "ledger", "not-bound")
	by_kind := {
		"AuthorizationPolicy": [res("AuthorizationPolicy", "payments", "ledger-writes", {"targetRefs": [{"kind": "Service", "name": "ledger"}]})],
		"Service": [svc("payments", "ledger", {})],
	}
	f := the_one(run({"target_refs": [t], "waypoints": [waypoint("payments", "waypoint")]}, by_kind, tru))
	f.severity == "error"
	f.path == ["spec", "targetRefs", 0]
	contains(f.message, "neither it nor namespace payments carries istio.io/use-waypoint")
	contains(f.message, "applies nowhere")
	contains(f.message, "label Service ledger istio.io/use-waypoint=waypoint")
}

test_unbound_telemetry_is_a_warning if {
	t := tref("Telemetry", "logs", "Service", "ledger", "not-bound")
	f := the_one(run({"target_refs": [t]}, {"Service": [svc("payments", "ledger", {})]}, tru))
	f.severity == "warning"
	contains(f.message, "add a waypoint")
}

test_opted_out_service_says_so if {
	t := tref("RequestAuthentication", "jwt", "Service", "ledger", "not-bound")
	f := the_one(run({"target_refs": [t]}, {"Service": [svc("payments", "ledger", {"istio.io/use-waypoint": "none"})]}, tru))
	f.severity == "error"
	contains(f.message, "opts out with istio.io/use-waypoint: none")
	contains(f.message, "JWTs are not validated")
}

test_missing_service_among_others_is_an_error if {
	t := tref("AuthorizationPolicy", "deny", "Service", "ledgr", "not-found")
	f := the_one(run({"target_refs": [t]}, {"Service": [svc("payments", "ledger", {})]}, tru))
	f.severity == "error"
	contains(f.message, "there is no Service ledgr in namespace payments (Services there: ledger)")
}

test_what_the_repository_cannot_tell_is_a_warning if {
	refs := [
		tref("AuthorizationPolicy", "a", "Service", "ledger", "not-found"),
		tref("AuthorizationPolicy", "b", "Gateway", "waypoint", "not-found"),
		object.union(tref("AuthorizationPolicy", "c", "Service", "ledger", "not-bound"), {"resource": "AuthorizationPolicy/vault/c"}),
	]
	fs := run({"target_refs": refs, "namespaces": {"vault": ns("vault", {"labels_known": false})}}, {}, tru)
	count(fs) == 3
	every f in fs {
		f.severity == "warning"
		contains(f.message, "unless")
	}
}

# A label istiod does not bind is reported on the label by policies/ambient.rego,
# naming the policies it strands: not again here.
test_a_failed_binding_is_left_to_the_binding_rules if {
	t := tref("AuthorizationPolicy", "a", "Service", "ledger", "not-bound")
	b := {
		"resource": "Service/payments/ledger", "kind": "Service", "namespace": "payments", "path": [], "binds": "service",
		"waypoint": "shared", "waypoint_namespace": "mesh-gw", "gateway": null, "waypoint_namespace_known": false,
		"problem": "not-found", "detail": "there is no Gateway shared in namespace mesh-gw",
	}
	count(run({"target_refs": [t], "waypoint_bindings": [b]}, {"Service": [svc("payments", "ledger", {"istio.io/use-waypoint": "shared"})]}, tru)) == 0
}

# selector and targetRefs together: rejected, and authz/selector-and-target-ref says so.
test_a_rejected_policy_is_left_to_the_authz_rule if {
	t := tref("AuthorizationPolicy", "both", "Service", "ledgr", "not-found")
	policy := res("AuthorizationPolicy", "payments", "both", {"selector": {"matchLabels": {"app": "ledger"}}, "targetRefs": [{"kind": "Service", "name": "ledgr"}]})
	count(run({"target_refs": [t]}, {"AuthorizationPolicy": [policy], "Service": [svc("payments", "ledger", {})]}, tru)) == 0
}

# One workload deployed twice (two roots) is named once.
test_a_workload_deployed_twice_is_named_once if {
	entry := z("read-only", "ALLOW", "denies-all", [{"index": 0, "l7_fields": ["to[0].operation.paths"], "outcome": "dropped"}], {"ambient_workloads": ["Deployment/shop/cart", "Deployment/shop/cart"]})
	f := the_one(run({"ztunnel_authz": [entry]}, {}, l7))
	f.subjects == ["Deployment/shop/cart"]
	contains(f.message, "for ambient workload Deployment shop/cart:")
}

test_bound_and_ordinary_gateways_are_quiet if {
	refs := [
		tref("AuthorizationPolicy", "a", "Service", "ledger", "bound"),
		tref("AuthorizationPolicy", "b", "Gateway", "ingress", "not-waypoint"),
	]
	count(run({"target_refs": refs}, {}, tru)) == 0
}

# ---------------------------------------------------------------------------
# ambient/waypoint-hides-caller

whc := "ambient/waypoint-hides-caller"

ledger := workload("payments", "ledger", {"service_waypoints": ["Gateway/payments/waypoint"]})

ledger_svc := {"resource": "Service/payments/ledger", "kind": "Service", "namespace": "payments", "name": "ledger", "waypoint": "Gateway/payments/waypoint", "ingress_use_waypoint": false, "selects": ["Deployment/payments/ledger"]}

callers(name, rules) := res("AuthorizationPolicy", "payments", name, {"selector": {"matchLabels": {"app": "ledger"}}, "action": "ALLOW", "rules": rules})

at_ztunnel(name, n) := {
	"resource": sprintf("AuthorizationPolicy/payments/%s", [name]), "action": "ALLOW",
	"ambient_workloads": ["Deployment/payments/ledger"], "sidecar_workloads": 0, "outcome": "as-written",
	"rules": [{"index": i, "l7_fields": [], "outcome": "kept"} | some i in numbers.range(0, n - 1)], "dry_run": false,
}

waypoint_model(zs) := {
	"workloads": [ledger], "waypoints": [waypoint("payments", "waypoint")],
	"waypoint_services": [ledger_svc], "ztunnel_authz": zs,
}

hides(rules) := run(waypoint_model([at_ztunnel("callers", count(rules))]), {"AuthorizationPolicy": [callers("callers", rules)]}, whc)

test_principal_only_policy_hides_the_caller if {
	f := the_one(hides([{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart"]}}], "to": [{"operation": {"ports": ["8080"]}}]}]))
	f.severity == "warning"
	f.path == ["spec", "rules", 0, "from"]
	f.subjects == ["Deployment/payments/ledger"]
	contains(f.message, "traffic to Service ledger goes through waypoint Gateway payments/waypoint")
	contains(f.message, "503")
	contains(f.message, "add principal cluster.local/ns/payments/sa/waypoint")
}

test_waypoint_admitted_by_principal_namespace_or_service_account_is_quiet if {
	count(hides([{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart", "cluster.local/ns/payments/sa/waypoint"]}}]}])) == 0
	count(hides([{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart"]}}, {"source": {"namespaces": ["payments"]}}]}])) == 0
	count(hides([{"from": [{"source": {"serviceAccounts": ["waypoint"]}}]}])) == 0
	count(hides([{"from": [{"source": {"principals": ["cluster.local/ns/payments/*"]}}]}])) == 0
	count(hides([{"from": [{"source": {"principals": ["*/sa/waypoint"]}}]}])) == 0
}

test_a_rule_without_from_admits_the_waypoint if {
	count(hides([
		{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart"]}}]},
		{"to": [{"operation": {"ports": ["8080"]}}]},
	])) == 0
}

test_excluded_waypoint_namespace_still_hides if {
	count(hides([{"from": [{"source": {"namespaces": ["shop", "payments"], "notPrincipals": ["cluster.local/ns/payments/*"]}}]}])) == 1
	count(hides([{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart"]}}], "when": [{"key": "source.namespace", "values": ["payments"]}]}])) == 1
}

test_another_allow_policy_admitting_the_waypoint_is_enough if {
	rules := [{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart"]}}]}]
	other := [{"from": [{"source": {"principals": ["cluster.local/ns/payments/sa/waypoint"]}}]}]
	model := waypoint_model([at_ztunnel("callers", 1), at_ztunnel("waypoint", 1)])
	count(run(model, {"AuthorizationPolicy": [callers("callers", rules), callers("waypoint", other)]}, whc)) == 0
}

test_no_waypoint_is_quiet if {
	rules := [{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart"]}}]}]
	model := object.union(waypoint_model([at_ztunnel("callers", 1)]), {"workloads": [workload("payments", "ledger", {})]})
	count(run(model, {"AuthorizationPolicy": [callers("callers", rules)]}, whc)) == 0
}

test_a_policy_that_already_denies_all_is_not_this_rule if {
	rules := [{"from": [{"source": {"principals": ["cluster.local/ns/shop/sa/cart"]}}], "to": [{"operation": {"paths": ["/v1"]}}]}]
	entry := object.union(at_ztunnel("callers", 1), {"outcome": "denies-all", "rules": [{"index": 0, "l7_fields": ["to[0].operation.paths"], "outcome": "dropped"}]})
	count(run(waypoint_model([entry]), {"AuthorizationPolicy": [callers("callers", rules)]}, whc)) == 0
}

# ---------------------------------------------------------------------------
# ambient/peer-authn-disable-ignored

pad := "ambient/peer-authn-disable-ignored"

pa(name, scope, mode, ports, workloads, ambient) := {
	"resource": sprintf("PeerAuthentication/shop/%s", [name]), "namespace": "shop", "scope": scope,
	"scope_key": "namespace:shop", "mode": mode, "port_modes": ports, "strict": false,
	"workloads": workloads, "unproxied": [], "proxy_unknown": [], "ambient": ambient,
}

test_disable_on_ambient_workloads_is_a_warning if {
	p := pa("default", "namespace", "DISABLE", {}, ["Deployment/shop/cart"], ["Deployment/shop/cart"])
	f := the_one(run({"peer_authentications": [p]}, {}, pad))
	f.severity == "warning"
	f.path == ["spec", "mtls", "mode"]
	contains(f.message, "DISABLE means PERMISSIVE")
}

test_disable_also_on_sidecars_is_info_and_says_both if {
	web := workload("shop", "web", {"proxy": true, "ambient": false, "dataplane": "sidecar"})
	p := pa("default", "namespace", "DISABLE", {}, ["Deployment/shop/cart", "Deployment/shop/web"], ["Deployment/shop/cart"])
	f := the_one(run({"peer_authentications": [p], "workloads": [workload("shop", "cart", {}), web]}, {}, pad))
	f.severity == "info"
	contains(f.message, "For Deployment shop/web with a sidecar it does turn mTLS off")
}

test_port_level_disable_points_at_the_port if {
	p := pa("cart", "workload", "STRICT", {"8080": "DISABLE"}, ["Deployment/shop/cart"], ["Deployment/shop/cart"])
	f := the_one(run({"peer_authentications": [p]}, {}, pad))
	f.path == ["spec", "portLevelMtls", "8080", "mode"]
	contains(f.message, "mode DISABLE on port 8080")
}

test_overridden_permissive_and_root_selector_are_quiet if {
	ns_disable := pa("default", "namespace", "DISABLE", {}, ["Deployment/shop/cart"], ["Deployment/shop/cart"])
	own := pa("cart", "workload", "STRICT", {}, ["Deployment/shop/cart"], ["Deployment/shop/cart"])
	permissive := pa("open", "namespace", "PERMISSIVE", {}, ["Deployment/shop/cart"], ["Deployment/shop/cart"])
	root := object.union(pa("root", "workload", "DISABLE", {}, ["Deployment/shop/cart"], ["Deployment/shop/cart"]), {"namespace": "istio-system"})
	count(run({"peer_authentications": [ns_disable, own, permissive, root]}, {}, pad)) == 0
}

# ---------------------------------------------------------------------------
# Hostile shapes never make evaluation fail.

test_hostile_shapes_do_not_error if {
	model := {
		"ztunnel_authz": [
			z("a", "ALLOW", "denies-all", [{"index": 0, "l7_fields": ["weird"], "outcome": "dropped"}], {}),
			z("b", "DENY", "wider", [{"index": 3, "l7_fields": ["to[x].operation.paths"], "outcome": "widened"}], {}),
		],
		"target_refs": [tref("Telemetry", "t", "Pod", "x", "not-found")],
		"selectors": [sel("WasmPlugin", "w", "workload", ["Deployment/shop/cart"])],
	}
	by_kind := {
		"AuthorizationPolicy": [ap("a", "nope"), ap("b", {"rules": "x"})],
		"WasmPlugin": [object.union(res("WasmPlugin", "shop", "w", {}), {"body": {"spec": null}})],
	}
	fs := ambient_authz.findings with input as mk_input(model, by_kind)
	count(fs) == 4
}
