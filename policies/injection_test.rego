package meshward.rules.injection_test

import rego.v1

import data.meshward.rules.injection

# ---------------------------------------------------------------------------
# builders

ns(name, enabled, extra) := object.union(
	{
		"name": name,
		"declared": true,
		"resource": sprintf("Namespace/%s", [name]),
		"labels": {},
		"injection": {"enabled": enabled, "via": null, "revision": null, "explicitly_disabled": false, "conflict": false},
		"mtls": {"mode": "PERMISSIVE", "source": null},
		"workloads": 0,
		"workloads_with_proxy": 0,
	},
	extra,
)

workload(kind, namespace, name, extra) := object.union(
	{
		"id": sprintf("%s/%s/%s", [kind, namespace, name]),
		"kind": kind,
		"namespace": namespace,
		"name": name,
		"labels": {"app": name},
		"annotations": {},
		"service_account": name,
		"replicas": 1,
		"proxy": false,
		"proxy_reason": "",
		"opted_out": false,
		"host_network": false,
		"native_sidecar": false,
		"pending_rollout": false,
		"template_hash": sprintf("hash-%s", [name]),
	},
	extra,
)

model(namespaces, workloads) := {
	"namespaces": namespaces,
	"workloads": workloads,
	"workload_entries": [],
	"selectors": [],
	"peer_authentications": [],
	"service_accounts": {},
	"mtls_scopes": {},
}

mk_input(head, base) := {
	"resources": [],
	"by_kind": {},
	"model": head,
	"base": base,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

ns_resource(name, labels) := {
	"id": sprintf("Namespace/%s", [name]),
	"apiVersion": "v1",
	"kind": "Namespace",
	"namespace": null,
	"name": name,
	"body": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
	"file": "ns.yaml",
	"line": 1,
}

rules_of(fs, rule) := {f | some f in fs; f.rule == rule}

# ---------------------------------------------------------------------------
# injection/namespace-not-injected

test_not_injected_declared_namespace_fires if {
	inp := mk_input(
		model(
			{"shop": ns("shop", false, {"workloads": 1})},
			[workload("Deployment", "shop", "cart", {})],
		),
		null,
	)
	fs := rules_of(injection.findings, "injection/namespace-not-injected") with input as inp
	count(fs) == 1
	some f in fs
	f.resource == "Namespace/shop"
	f.path == ["metadata", "labels"]
	f.severity == "info"
	f.istio_code == "IST0102"
	contains(f.message, "Deployment shop/cart")
}

test_not_injected_undeclared_points_at_first_workload if {
	inp := mk_input(
		model(
			{"shop": ns("shop", false, {"declared": false, "resource": null, "workloads": 2})},
			[workload("Deployment", "shop", "web", {}), workload("CronJob", "shop", "batch", {})],
		),
		null,
	)
	fs := rules_of(injection.findings, "injection/namespace-not-injected") with input as inp
	count(fs) == 1
	some f in fs
	f.resource == "CronJob/shop/batch"
	f.path == ["spec", "jobTemplate", "spec", "template", "metadata", "labels"]
	contains(f.message, "2 workloads")
}

test_not_injected_pod_path if {
	inp := mk_input(
		model(
			{"shop": ns("shop", false, {"declared": false, "resource": null})},
			[workload("Pod", "shop", "debug", {})],
		),
		null,
	)
	some f in injection.findings with input as inp
	f.rule == "injection/namespace-not-injected"
	f.path == ["metadata", "labels"]
}

test_not_injected_quiet_for_injected_disabled_and_system if {
	inp := mk_input(
		model(
			{
				"shop": ns("shop", true, {}),
				"legacy": ns("legacy", false, {"injection": {"enabled": false, "explicitly_disabled": true}}),
				"kube-system": ns("kube-system", false, {}),
				"istio-system": ns("istio-system", false, {}),
			},
			[workload("Deployment", "kube-system", "dns", {}), workload("Deployment", "istio-system", "istiod", {})],
		),
		null,
	)
	count(rules_of(injection.findings, "injection/namespace-not-injected")) == 0 with input as inp
}

test_not_injected_respects_configured_root_namespace if {
	inp := object.union(
		mk_input(model({"mesh-root": ns("mesh-root", false, {})}, []), null),
		{"config": {"mesh": {"root_namespace": "mesh-root"}}},
	)
	count(rules_of(injection.findings, "injection/namespace-not-injected")) == 0 with input as inp
}

# ---------------------------------------------------------------------------
# injection/conflicting-labels

test_conflicting_labels_fires if {
	inp := object.union(
		mk_input(model({}, []), null),
		{"by_kind": {"Namespace": [ns_resource("shop", {"istio-injection": "enabled", "istio.io/rev": "1-27"})]}},
	)
	fs := rules_of(injection.findings, "injection/conflicting-labels") with input as inp
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.istio_code == "IST0123"
	f.resource == "Namespace/shop"
	contains(f.message, "istio.io/rev=1-27")
}

test_conflicting_labels_quiet_with_one_label if {
	inp := object.union(
		mk_input(model({}, []), null),
		{"by_kind": {"Namespace": [ns_resource("shop", {"istio.io/rev": "1-27"}), ns_resource("web", {"istio-injection": "enabled"})]}},
	)
	count(rules_of(injection.findings, "injection/conflicting-labels")) == 0 with input as inp
}

# ---------------------------------------------------------------------------
# injection/workload-opted-out

test_opted_out_label_fires if {
	inp := mk_input(
		model(
			{"shop": ns("shop", true, {})},
			[workload("Deployment", "shop", "legacy", {"opted_out": true, "labels": {"app": "legacy", "sidecar.istio.io/inject": "false"}})],
		),
		null,
	)
	fs := rules_of(injection.findings, "injection/workload-opted-out") with input as inp
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.resource == "Deployment/shop/legacy"
	f.path == ["spec", "template", "metadata", "labels", "sidecar.istio.io/inject"]
}

test_opted_out_annotation_path if {
	inp := mk_input(
		model(
			{"shop": ns("shop", true, {})},
			[workload("Pod", "shop", "legacy", {"opted_out": true, "annotations": {"sidecar.istio.io/inject": "false"}})],
		),
		null,
	)
	some f in injection.findings with input as inp
	f.rule == "injection/workload-opted-out"
	f.path == ["metadata", "annotations", "sidecar.istio.io/inject"]
}

test_opted_out_quiet_outside_injected_namespace if {
	inp := mk_input(
		model(
			{"shop": ns("shop", false, {}), "web": ns("web", true, {})},
			[
				workload("Deployment", "shop", "legacy", {"opted_out": true}),
				workload("Deployment", "web", "front", {"proxy": true}),
			],
		),
		null,
	)
	count(rules_of(injection.findings, "injection/workload-opted-out")) == 0 with input as inp
}

# ---------------------------------------------------------------------------
# injection/rollout-required

test_rollout_required_fires if {
	base := model({"shop": ns("shop", false, {})}, [workload("Deployment", "shop", "cart", {}), workload("Deployment", "shop", "web", {})])
	head := model(
		{"shop": ns("shop", true, {})},
		[
			workload("Deployment", "shop", "cart", {"proxy": true}),
			workload("Deployment", "shop", "web", {"proxy": true, "template_hash": "changed"}),
			workload("Deployment", "shop", "new", {"proxy": true}),
		],
	)
	fs := rules_of(injection.findings, "injection/rollout-required") with input as mk_input(head, base)
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.resource == "Namespace/shop"
	f.path == ["metadata", "labels"]
	contains(f.message, "Deployment shop/cart")
	not contains(f.message, "shop/web")
	not contains(f.message, "shop/new")
	contains(f.message, "kubectl.kubernetes.io/restartedAt")
}

# The model's own representation: pending_rollout true, proxy false.
test_rollout_required_fires_on_pending_rollout if {
	base := model({"shop": ns("shop", false, {})}, [workload("Deployment", "shop", "cart", {})])
	head := model({"shop": ns("shop", true, {})}, [workload("Deployment", "shop", "cart", {"pending_rollout": true})])
	fs := rules_of(injection.findings, "injection/rollout-required") with input as mk_input(head, base)
	count(fs) == 1
	some f in fs
	contains(f.message, "its workload (Deployment shop/cart)")
}

test_rollout_required_quiet_without_base if {
	head := model({"shop": ns("shop", true, {})}, [workload("Deployment", "shop", "cart", {"proxy": true})])
	count(rules_of(injection.findings, "injection/rollout-required")) == 0 with input as mk_input(head, null)
}

test_rollout_required_quiet_when_already_injected_or_rolled if {
	base := model(
		{"shop": ns("shop", true, {}), "web": ns("web", false, {})},
		[workload("Deployment", "shop", "cart", {"proxy": true}), workload("Deployment", "web", "front", {})],
	)
	head := model(
		{"shop": ns("shop", true, {}), "web": ns("web", true, {})},
		[
			workload("Deployment", "shop", "cart", {"proxy": true}),
			workload("Deployment", "web", "front", {"proxy": true, "template_hash": "restarted"}),
		],
	)
	count(rules_of(injection.findings, "injection/rollout-required")) == 0 with input as mk_input(head, base)
}

test_rollout_required_skips_opted_out if {
	base := model({"shop": ns("shop", false, {})}, [workload("Deployment", "shop", "legacy", {"opted_out": true})])
	head := model({"shop": ns("shop", true, {})}, [workload("Deployment", "shop", "legacy", {"opted_out": true})])
	count(rules_of(injection.findings, "injection/rollout-required")) == 0 with input as mk_input(head, base)
}

test_conflicting_labels_hostile_labels_do_not_error if {
	bad := object.union(ns_resource("shop", {}), {"body": {"metadata": {"name": "shop", "labels": "x"}}})
	inp := object.union(mk_input(model({}, []), null), {"by_kind": {"Namespace": [bad]}})
	count(rules_of(injection.findings, "injection/conflicting-labels")) == 0 with input as inp
}
