package meshward.rules.mtls_test

import rego.v1

import data.meshward.rules.mtls

# ---------------------------------------------------------------------------
# builders

ns(name, injected, mode, nworkloads) := {
	"name": name,
	"declared": true,
	"resource": sprintf("Namespace/%s", [name]),
	"labels_known": true,
	"labels_from": "namespace",
	"labels_resource": sprintf("Namespace/%s", [name]),
	"labels_path": ["metadata", "labels"],
	"labels": {},
	"injection": {"enabled": injected, "via": null, "revision": null, "explicitly_disabled": false, "conflict": false},
	"mtls": {"mode": mode, "source": null},
	"workloads": nworkloads,
	"workloads_with_proxy": 0,
}

# A namespace-wide PeerAuthentication "default" in namespace n.
pa_ns(n, mode, extra) := object.union(
	{
		"resource": sprintf("PeerAuthentication/%s/default", [n]),
		"namespace": n,
		"scope": "namespace",
		"scope_key": sprintf("namespace:%s", [n]),
		"mode": mode,
		"port_modes": {},
		"strict": mode == "STRICT",
		"workloads": [sprintf("Deployment/%s/app", [n])],
		"unproxied": [],
		"proxy_unknown": [],
	},
	extra,
)

pa_mesh(mode) := {
	"resource": "PeerAuthentication/istio-system/default",
	"namespace": "istio-system",
	"scope": "mesh",
	"scope_key": "mesh",
	"mode": mode,
	"port_modes": {},
	"strict": mode == "STRICT",
	"workloads": [],
	"unproxied": [],
}

model(namespaces, pas, scopes) := {
	"namespaces": namespaces,
	"workloads": [],
	"workload_entries": [],
	"selectors": [],
	"peer_authentications": pas,
	"service_accounts": {},
	"mtls_scopes": scopes,
}

mk_input(head, base, evidence) := {
	"resources": [],
	"by_kind": {},
	"model": head,
	"base": base,
	"evidence": evidence,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

good_evidence(namespaces) := {
	"taken_at": "2026-11-30T12:00:00Z",
	"window": "7d",
	"source": "prometheus https://prometheus.example",
	"namespaces": {n: {
		"requests_total": 1200, "requests_plaintext": 0,
		"tcp_connections_total": 40, "tcp_connections_plaintext": 0,
		"query": "q", "error": null,
	} |
		some n in namespaces
	},
}

rules_of(fs, rule) := {f | some f in fs; f.rule == rule}

# A namespace nothing in the repository declares: whether it is injected is unknown.
undeclared(name, mode, nworkloads) := object.union(ns(name, null, mode, nworkloads), {
	"declared": false, "resource": null, "labels_known": false, "labels_from": null,
	"labels_resource": null, "labels_path": [],
})

# The base revision the evidence rules compare with: shop and web injected, PERMISSIVE.
before := model(
	{"shop": ns("shop", true, "PERMISSIVE", 2), "web": ns("web", true, "PERMISSIVE", 1)},
	[],
	{},
)

strict_head := model(
	{"shop": ns("shop", true, "STRICT", 2)},
	[pa_ns("shop", "STRICT", {})],
	{"namespace:shop": "STRICT"},
)

# ---------------------------------------------------------------------------
# mtls/strict-skips-permissive

test_skips_permissive_from_uninjected_namespace if {
	base := model({"shop": ns("shop", false, "PERMISSIVE", 2)}, [], {})
	fs := rules_of(mtls.findings, "mtls/strict-skips-permissive") with input as mk_input(strict_head, base, good_evidence(["shop"]))
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.resource == "PeerAuthentication/shop/default"
	f.path == ["spec", "mtls", "mode"]
	contains(f.message, "namespace shop was not injected")
	contains(f.message, "curl 000")
}

# ztunnel gives an ambient namespace mTLS without a sidecar: it is not "not injected".
test_skips_permissive_quiet_from_permissive_ambient_namespace if {
	ambient := object.union(ns("shop", false, "PERMISSIVE", 2), {"labels": {"istio.io/dataplane-mode": "ambient"}})
	base := model({"shop": ambient}, [], {})
	count(rules_of(mtls.findings, "mtls/strict-skips-permissive")) == 0 with input as mk_input(strict_head, base, good_evidence(["shop"]))
}

test_skips_permissive_from_disable if {
	base := model(
		{"shop": ns("shop", true, "DISABLE", 2)},
		[pa_ns("shop", "DISABLE", {})],
		{"namespace:shop": "DISABLE"},
	)
	some f in mtls.findings with input as mk_input(strict_head, base, good_evidence(["shop"]))
	f.rule == "mtls/strict-skips-permissive"
	contains(f.message, "DISABLE")
}

test_skips_permissive_namespace_absent_from_base if {
	base := model({}, [], {})
	some f in mtls.findings with input as mk_input(strict_head, base, good_evidence(["shop"]))
	f.rule == "mtls/strict-skips-permissive"
	contains(f.message, "namespace shop did not exist yet")
}

test_skips_permissive_unset_scope_inherits_namespace_disable if {
	base := model(
		{"shop": ns("shop", true, "DISABLE", 2)},
		[pa_ns("shop", "UNSET", {})],
		{"namespace:shop": "UNSET", "mesh": "DISABLE"},
	)
	some f in mtls.findings with input as mk_input(strict_head, base, good_evidence(["shop"]))
	f.rule == "mtls/strict-skips-permissive"
}

test_skips_permissive_quiet_after_permissive_stage if {
	base := model(
		{"shop": ns("shop", true, "PERMISSIVE", 2)},
		[pa_ns("shop", "PERMISSIVE", {})],
		{"namespace:shop": "PERMISSIVE"},
	)
	count(rules_of(mtls.findings, "mtls/strict-skips-permissive")) == 0 with input as mk_input(strict_head, base, good_evidence(["shop"]))
}

test_skips_permissive_quiet_when_already_strict if {
	base := model({"shop": ns("shop", false, "STRICT", 2)}, [pa_ns("shop", "STRICT", {})], {"namespace:shop": "STRICT"})
	count(rules_of(mtls.findings, "mtls/strict-skips-permissive")) == 0 with input as mk_input(strict_head, base, null)
}

test_skips_permissive_quiet_without_base if {
	count(rules_of(mtls.findings, "mtls/strict-skips-permissive")) == 0 with input as mk_input(strict_head, null, null)
}

test_skips_permissive_mesh_scope if {
	head := model(
		{"shop": ns("shop", true, "STRICT", 2), "web": ns("web", true, "STRICT", 1)},
		[pa_mesh("STRICT")],
		{"mesh": "STRICT"},
	)
	base := model(
		{"shop": ns("shop", true, "PERMISSIVE", 2), "web": ns("web", false, "PERMISSIVE", 1), "kube-system": ns("kube-system", false, "PERMISSIVE", 3)},
		[],
		{},
	)
	fs := rules_of(mtls.findings, "mtls/strict-skips-permissive") with input as mk_input(head, base, good_evidence(["shop", "web"]))
	count(fs) == 1
	some f in fs
	contains(f.message, "namespace web was not injected")
	not contains(f.message, "kube-system")
}

test_skips_permissive_mesh_scope_quiet_when_all_injected if {
	head := model({"shop": ns("shop", true, "STRICT", 2)}, [pa_mesh("STRICT")], {"mesh": "STRICT"})
	base := model({"shop": ns("shop", true, "PERMISSIVE", 2)}, [], {})
	count(rules_of(mtls.findings, "mtls/strict-skips-permissive")) == 0 with input as mk_input(head, base, good_evidence(["shop"]))
}

# Whether a namespace base did not declare was injected is unknown: not claimed.
test_skips_permissive_quiet_when_base_did_not_declare_the_namespace if {
	base := model({"shop": undeclared("shop", "PERMISSIVE", 2)}, [], {})
	count(rules_of(mtls.findings, "mtls/strict-skips-permissive")) == 0 with input as mk_input(strict_head, base, good_evidence(["shop"]))
}

test_skips_permissive_mesh_scope_names_only_namespaces_known_uninjected if {
	head := model(
		{"shop": ns("shop", true, "STRICT", 2), "web": ns("web", true, "STRICT", 1), "pay": ns("pay", true, "STRICT", 1)},
		[pa_mesh("STRICT")],
		{"mesh": "STRICT"},
	)
	base := model(
		{"shop": ns("shop", true, "PERMISSIVE", 2), "web": ns("web", false, "PERMISSIVE", 1), "pay": undeclared("pay", "PERMISSIVE", 1)},
		[],
		{},
	)
	fs := rules_of(mtls.findings, "mtls/strict-skips-permissive") with input as mk_input(head, base, null)
	count(fs) == 1
	some f in fs
	contains(f.message, "namespace web was not injected")
	not contains(f.message, "pay")
}

# ---------------------------------------------------------------------------
# mtls/strict-unenforced-workloads

test_unenforced_workloads_fires if {
	head := model(
		{"shop": ns("shop", true, "STRICT", 2)},
		[pa_ns("shop", "STRICT", {"workloads": ["Deployment/shop/app", "Deployment/shop/legacy"], "unproxied": ["Deployment/shop/legacy"]})],
		{"namespace:shop": "STRICT"},
	)
	fs := rules_of(mtls.findings, "mtls/strict-unenforced-workloads") with input as mk_input(head, null, null)
	count(fs) == 1
	some f in fs
	f.severity == "error"
	contains(f.message, "1 of its 2 workloads")
	contains(f.message, "Deployment shop/legacy")
	contains(f.message, "curl 000")
}

test_unenforced_workloads_port_level_path if {
	head := model(
		{"shop": ns("shop", true, "PERMISSIVE", 1)},
		[pa_ns("shop", "UNSET", {"strict": true, "port_modes": {"8080": "STRICT", "9090": "DISABLE"}, "unproxied": ["Deployment/shop/app"]})],
		{},
	)
	some f in mtls.findings with input as mk_input(head, null, null)
	f.rule == "mtls/strict-unenforced-workloads"
	f.path == ["spec", "portLevelMtls", "8080"]
}

# A workload whose namespace is not declared may have a proxy: not "unenforced".
test_unenforced_workloads_quiet_when_the_proxy_is_unknown if {
	head := object.union(
		model(
			{"pay": undeclared("pay", "STRICT", 1)},
			[pa_ns("pay", "STRICT", {"unproxied": [], "proxy_unknown": ["Deployment/pay/app"]})],
			{"namespace:pay": "STRICT"},
		),
		{"workloads": [{"id": "Deployment/pay/app", "namespace": "pay", "proxy": false, "proxy_known": false}]},
	)
	count(rules_of(mtls.findings, "mtls/strict-unenforced-workloads")) == 0 with input as mk_input(head, null, null)
	# Even a model that listed it as without a proxy does not make it a fact.
	claimed := object.union(head, {"peer_authentications": [pa_ns("pay", "STRICT", {"unproxied": ["Deployment/pay/app"]})]})
	count(rules_of(mtls.findings, "mtls/strict-unenforced-workloads")) == 0 with input as mk_input(claimed, null, null)
}

test_unenforced_workloads_quiet if {
	head := model(
		{"shop": ns("shop", false, "PERMISSIVE", 2)},
		[pa_ns("shop", "STRICT", {}), pa_ns("web", "PERMISSIVE", {"unproxied": ["Deployment/web/app"]})],
		{},
	)
	count(rules_of(mtls.findings, "mtls/strict-unenforced-workloads")) == 0 with input as mk_input(head, null, null)
}

# ---------------------------------------------------------------------------
# mtls/strict-without-evidence

test_without_evidence_no_file if {
	fs := rules_of(mtls.findings, "mtls/strict-without-evidence") with input as mk_input(strict_head, before, null)
	count(fs) == 1
	some f in fs
	f.severity == "error"
	contains(f.message, "no evidence was given for namespace shop")
	contains(f.message, "meshward check --prometheus")
	contains(f.message, "meshward check --evidence")
}

test_without_evidence_zero_traffic if {
	ev := object.union(good_evidence(["shop"]), {"namespaces": {"shop": {"requests_total": 0, "tcp_connections_total": 0}}})
	some f in mtls.findings with input as mk_input(strict_head, before, ev)
	f.rule == "mtls/strict-without-evidence"
	contains(f.message, "no traffic at all in 7d")
}

# Without a base there is no change to judge: a STRICT scope may have been STRICT for years.
test_without_evidence_quiet_without_base if {
	count(rules_of(mtls.findings, "mtls/strict-without-evidence")) == 0 with input as mk_input(strict_head, null, null)
	mesh := model({}, [pa_mesh("STRICT")], {"mesh": "STRICT"})
	count(rules_of(mtls.findings, "mtls/strict-without-evidence")) == 0 with input as mk_input(mesh, null, null)
}

# A mesh-wide STRICT reaches namespaces the repository does not hold: namespace
# entries cannot prove it, however complete they are for the repository.
test_without_evidence_mesh_scope_needs_mesh_wide_numbers if {
	head := model(
		{"shop": ns("shop", true, "STRICT", 2), "web": ns("web", true, "STRICT", 1)},
		[pa_mesh("STRICT")],
		{"mesh": "STRICT"},
	)
	fs := rules_of(mtls.findings, "mtls/strict-without-evidence") with input as mk_input(head, before, good_evidence(["shop", "web"]))
	count(fs) == 1
	some f in fs
	contains(f.message, "the whole mesh")
	contains(f.message, "scopes.mesh")
}

# The repository that holds only istio-system config is the common case: no
# workloads of its own, and yet a mesh-wide STRICT cuts off every plaintext client.
test_without_evidence_mesh_scope_without_workloads_in_the_repo if {
	head := model({}, [pa_mesh("STRICT")], {"mesh": "STRICT"})
	fs := rules_of(mtls.findings, "mtls/strict-without-evidence") with input as mk_input(head, before, null)
	count(fs) == 1
	some f in fs
	contains(f.message, "no evidence was given for the whole mesh")
}

mesh_evidence(entry) := {
	"window": "7d",
	"namespaces": {},
	"scopes": {"mesh": object.union(
		{"requests_total": 1200, "requests_plaintext": 0, "tcp_connections_total": 40, "tcp_connections_plaintext": 0},
		entry,
	)},
}

test_mesh_scope_with_mesh_wide_evidence_passes if {
	head := model({}, [pa_mesh("STRICT")], {"mesh": "STRICT"})
	fs := {f | some f in mtls.findings with input as mk_input(head, before, mesh_evidence({})); startswith(f.rule, "mtls/")}
	count(fs) == 0
}

test_mesh_scope_mesh_wide_plaintext if {
	head := model({}, [pa_mesh("STRICT")], {"mesh": "STRICT"})
	fs := rules_of(mtls.findings, "mtls/plaintext-traffic-present") with input as mk_input(head, before, mesh_evidence({"tcp_connections_plaintext": 3}))
	count(fs) == 1
	some f in fs
	contains(f.message, "the whole mesh: 0 of 1200 requests and 3 of 40 TCP connections without mTLS")
}

test_mesh_scope_mesh_wide_error_is_named if {
	head := model({}, [pa_mesh("STRICT")], {"mesh": "STRICT"})
	fs := rules_of(mtls.findings, "mtls/strict-without-evidence") with input as mk_input(head, before, mesh_evidence({"error": "Prometheus http://p could not be reached"}))
	count(fs) == 1
	some f in fs
	contains(f.message, "the whole mesh: no usable data: Prometheus http://p could not be reached")
}

test_without_evidence_quiet_with_evidence if {
	count(rules_of(mtls.findings, "mtls/strict-without-evidence")) == 0 with input as mk_input(strict_head, before, good_evidence(["shop"]))
}

test_without_evidence_quiet_when_not_introduced if {
	base := model({"shop": ns("shop", true, "STRICT", 2)}, [pa_ns("shop", "STRICT", {})], {"namespace:shop": "STRICT"})
	count(rules_of(mtls.findings, "mtls/strict-without-evidence")) == 0 with input as mk_input(strict_head, base, null)
}

test_without_evidence_workload_scope_inherits_strict_namespace if {
	head := model(
		{"shop": ns("shop", true, "STRICT", 2)},
		[pa_ns("shop", "STRICT", {"resource": "PeerAuthentication/shop/cart", "scope": "workload", "scope_key": "workload:shop:app=cart"})],
		{"workload:shop:app=cart": "STRICT"},
	)
	base := model({"shop": ns("shop", true, "STRICT", 2)}, [], {"namespace:shop": "STRICT"})
	count(rules_of(mtls.findings, "mtls/strict-without-evidence")) == 0 with input as mk_input(head, base, null)
}

# Workload scopes: evidence gathered for the scope's own workloads decides.
workload_head := model(
	{"shop": ns("shop", true, "PERMISSIVE", 2)},
	[pa_ns("shop", "STRICT", {"resource": "PeerAuthentication/shop/cart", "scope": "workload", "scope_key": "workload:shop:app=cart"})],
	{"workload:shop:app=cart": "STRICT"},
)

scope_evidence(entry) := {
	"window": "7d",
	"namespaces": {},
	"scopes": {"workload:shop:app=cart": object.union({
		"requests_total": 300, "requests_plaintext": 0,
		"tcp_connections_total": 0, "tcp_connections_plaintext": 0,
		"workloads": ["cart"], "error": null,
	}, entry)},
}

test_workload_scope_evidence_passes if {
	fs := {f | some f in mtls.findings with input as mk_input(workload_head, before, scope_evidence({})); startswith(f.rule, "mtls/")}
	count({f | some f in fs; f.rule in {"mtls/strict-without-evidence", "mtls/plaintext-traffic-present"}}) == 0
}

test_workload_scope_evidence_error_is_named if {
	fs := rules_of(mtls.findings, "mtls/strict-without-evidence") with input as mk_input(workload_head, before, scope_evidence({"error": "Prometheus http://p could not be reached: connection refused"}))
	count(fs) == 1
	some f in fs
	contains(f.message, "workloads cart in namespace shop: no usable data: Prometheus http://p could not be reached")
}

test_workload_scope_evidence_plaintext if {
	fs := rules_of(mtls.findings, "mtls/plaintext-traffic-present") with input as mk_input(workload_head, before, scope_evidence({"requests_plaintext": 7}))
	count(fs) == 1
	some f in fs
	contains(f.message, "workloads cart in namespace shop: 7 of 300 requests")
}

test_workload_scope_falls_back_to_namespace_evidence if {
	count(rules_of(mtls.findings, "mtls/strict-without-evidence")) == 0 with input as mk_input(workload_head, before, good_evidence(["shop"]))
	fs := rules_of(mtls.findings, "mtls/strict-without-evidence") with input as mk_input(workload_head, before, good_evidence(["web"]))
	count(fs) == 1
}

# ---------------------------------------------------------------------------
# mtls/plaintext-traffic-present

test_plaintext_present_fires if {
	ev := object.union(good_evidence(["shop"]), {"namespaces": {"shop": {"requests_plaintext": 12, "tcp_connections_plaintext": 3}}})
	fs := rules_of(mtls.findings, "mtls/plaintext-traffic-present") with input as mk_input(strict_head, before, ev)
	count(fs) == 1
	some f in fs
	f.severity == "error"
	contains(f.message, "12 of 1200 requests and 3 of 40 TCP connections")
	contains(f.message, "over 7d")
	contains(f.message, "curl 000")
}

test_plaintext_present_quiet_without_base if {
	ev := object.union(good_evidence(["shop"]), {"namespaces": {"shop": {"requests_plaintext": 12}}})
	count(rules_of(mtls.findings, "mtls/plaintext-traffic-present")) == 0 with input as mk_input(strict_head, null, ev)
}

test_plaintext_present_quiet_with_zero_plaintext if {
	count(rules_of(mtls.findings, "mtls/plaintext-traffic-present")) == 0 with input as mk_input(strict_head, before, good_evidence(["shop"]))
}

test_plaintext_present_quiet_when_not_introduced if {
	ev := object.union(good_evidence(["shop"]), {"namespaces": {"shop": {"requests_plaintext": 12}}})
	base := model({"shop": ns("shop", true, "STRICT", 2)}, [pa_ns("shop", "STRICT", {})], {"namespace:shop": "STRICT"})
	count(rules_of(mtls.findings, "mtls/plaintext-traffic-present")) == 0 with input as mk_input(strict_head, base, ev)
}

# ---------------------------------------------------------------------------
# mtls/port-level-requires-selector

pa_resource(spec) := {
	"id": "PeerAuthentication/shop/ports",
	"apiVersion": "security.istio.io/v1",
	"kind": "PeerAuthentication",
	"namespace": "shop",
	"name": "ports",
	"body": {"apiVersion": "security.istio.io/v1", "kind": "PeerAuthentication", "metadata": {"name": "ports", "namespace": "shop"}, "spec": spec},
	"file": "pa.yaml",
	"line": 1,
}

test_port_level_without_selector_fires if {
	inp := object.union(
		mk_input(model({}, [], {}), null, null),
		{"by_kind": {"PeerAuthentication": [pa_resource({"portLevelMtls": {"8080": {"mode": "DISABLE"}}, "selector": {"matchLabels": {}}})]}},
	)
	fs := rules_of(mtls.findings, "mtls/port-level-requires-selector") with input as inp
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "portLevelMtls"]
}

test_port_level_with_selector_quiet if {
	inp := object.union(
		mk_input(model({}, [], {}), null, null),
		{"by_kind": {"PeerAuthentication": [
			pa_resource({"portLevelMtls": {"8080": {"mode": "DISABLE"}}, "selector": {"matchLabels": {"app": "cart"}}}),
			pa_resource({"mtls": {"mode": "STRICT"}}),
		]}},
	)
	count(rules_of(mtls.findings, "mtls/port-level-requires-selector")) == 0 with input as inp
}

test_port_level_hostile_spec_does_not_error if {
	bad := object.union(pa_resource({}), {"body": {"spec": "x"}})
	inp := object.union(mk_input(model({}, [], {}), null, null), {"by_kind": {"PeerAuthentication": [bad]}})
	count(rules_of(mtls.findings, "mtls/port-level-requires-selector")) == 0 with input as inp
}
