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
		"labels_known": true,
		"labels_from": "namespace",
		"labels_resource": sprintf("Namespace/%s", [name]),
		"labels_path": ["metadata", "labels"],
		"unknown_reason": null,
		"labels": {},
		"injection": {"enabled": enabled, "via": null, "revision": null, "explicitly_disabled": false, "conflict": false},
		"mtls": {"mode": "PERMISSIVE", "source": null},
		"workloads": 0,
		"workloads_with_proxy": 0,
		"workloads_proxy_unknown": 0,
	},
	extra,
)

# A namespace whose labels mesh.namespaces of .meshward.yaml gives.
configured(name, enabled, extra) := ns(name, enabled, object.union(
	{"declared": false, "resource": null, "labels_from": "config", "labels_resource": null, "labels_path": []},
	extra,
))

# A namespace nothing in the repository declares: its labels, and so its injection, are unknown.
undeclared(name, extra) := ns(name, null, object.union(
	{
		"declared": false, "resource": null, "labels_known": false, "labels_from": null,
		"labels_resource": null, "labels_path": [],
		"unknown_reason": sprintf("namespace %s is not declared in this repository (no Namespace object, no Argo CD managedNamespaceMetadata, not in mesh.namespaces of .meshward.yaml)", [name]),
	},
	extra,
))

# A namespace an Argo CD Application labels through managedNamespaceMetadata.
argo_labelled(name, enabled, labels) := ns(name, enabled, {
	"declared": false, "resource": null, "labels_from": "argocd", "labels": labels,
	"labels_resource": sprintf("Application/argocd/%s", [name]),
	"labels_path": ["spec", "syncPolicy", "managedNamespaceMetadata", "labels"],
})

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
		"proxy_known": true,
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

test_not_injected_configured_points_at_first_workload if {
	inp := mk_input(
		model(
			{"shop": configured("shop", false, {"workloads": 2})},
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
	contains(f.message, "in mesh.namespaces of .meshward.yaml")
}

test_not_injected_pod_path if {
	inp := mk_input(
		model(
			{"shop": configured("shop", false, {})},
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
				"legacy": ns("legacy", false, {"labels": {"istio-injection": "disabled"}, "injection": {"enabled": false, "explicitly_disabled": true}}),
				# Any other value is a decision too (istioctl skips every value but "enabled").
				"batch": ns("batch", false, {"labels": {"istio-injection": "off"}}),
				"kube-system": ns("kube-system", false, {}),
				"istio-system": ns("istio-system", false, {}),
			},
			[
				workload("Deployment", "kube-system", "dns", {}), workload("Deployment", "istio-system", "istiod", {}),
				workload("Deployment", "batch", "nightly", {}),
			],
		),
		null,
	)
	count(rules_of(injection.findings, "injection/namespace-not-injected")) == 0 with input as inp
}

# Unknown is not "not injected": an undeclared namespace is injection/namespace-unknown.
# Pods labelled istio.io/dataplane-mode=ambient themselves are captured by ztunnel: a
# namespace of only those is in the mesh, and they are never listed as without a proxy.
test_not_injected_leaves_out_ambient_workloads if {
	amb := workload("Deployment", "shop", "cart", {"ambient": true, "labels": {"app": "cart", "istio.io/dataplane-mode": "ambient"}})
	only := mk_input(model({"shop": ns("shop", false, {"workloads": 1})}, [amb]), null)
	count(rules_of(injection.findings, "injection/namespace-not-injected")) == 0 with input as only
	mixed := mk_input(model({"shop": ns("shop", false, {"workloads": 2})}, [amb, workload("Deployment", "shop", "batch", {})]), null)
	fs := rules_of(injection.findings, "injection/namespace-not-injected") with input as mixed
	count(fs) == 1
	some f in fs
	contains(f.message, "its workload (Deployment shop/batch)")
	not contains(f.message, "cart")
}

# istiod deploys a waypoint's pods with an Envoy of their own.
test_not_injected_quiet_for_a_namespace_of_waypoints if {
	m := object.union(model({"mesh-gateways": ns("mesh-gateways", false, {})}, []), {"waypoints": [{
		"id": "Gateway/mesh-gateways/shared", "namespace": "mesh-gateways", "name": "shared",
		"class": "istio-waypoint", "waypoint_class": true, "traffic": "service",
	}]})
	count(rules_of(injection.findings, "injection/namespace-not-injected")) == 0 with input as mk_input(m, null)
}

test_not_injected_quiet_for_undeclared_namespace if {
	inp := mk_input(
		model(
			{"payments": undeclared("payments", {"workloads": 1})},
			[workload("Deployment", "payments", "api", {"proxy_known": false})],
		),
		null,
	)
	count(rules_of(injection.findings, "injection/namespace-not-injected")) == 0 with input as inp
}

test_not_injected_points_at_argo_managed_labels if {
	inp := mk_input(
		model(
			{"payments": argo_labelled("payments", false, {"team": "payments"})},
			[workload("Deployment", "payments", "api", {})],
		),
		null,
	)
	fs := rules_of(injection.findings, "injection/namespace-not-injected") with input as inp
	count(fs) == 1
	some f in fs
	f.resource == "Application/argocd/payments"
	f.path == ["spec", "syncPolicy", "managedNamespaceMetadata", "labels"]
	contains(f.message, "in the managedNamespaceMetadata of Application argocd/payments")
}

# ---------------------------------------------------------------------------
# injection/namespace-unknown

test_namespace_unknown_says_so_once_per_namespace if {
	inp := mk_input(
		model(
			{"payments": undeclared("payments", {"workloads": 2})},
			[
				workload("Deployment", "payments", "api", {"proxy_known": false}),
				workload("Deployment", "payments", "worker", {"proxy_known": false}),
			],
		),
		null,
	)
	fs := rules_of(injection.findings, "injection/namespace-unknown") with input as inp
	count(fs) == 1
	some f in fs
	f.severity == "info"
	f.resource == "Deployment/payments/api"
	f.path == ["metadata", "namespace"]
	f.subjects == ["Deployment/payments/api", "Deployment/payments/worker"]
	startswith(f.message, "Namespace payments is not declared in this repository")
	contains(f.message, "so whether it is injected is unknown")
	contains(f.message, "mesh.namespaces")
	not contains(f.message, "STRICT")
}

test_namespace_unknown_is_a_warning_under_strict if {
	pa := {
		"resource": "PeerAuthentication/payments/default", "namespace": "payments", "scope": "namespace",
		"scope_key": "namespace:payments", "mode": "STRICT", "port_modes": {}, "strict": true,
		"workloads": ["Deployment/payments/api"], "unproxied": [], "proxy_unknown": ["Deployment/payments/api"],
	}
	m := object.union(
		model({"payments": undeclared("payments", {"workloads": 1})}, [workload("Deployment", "payments", "api", {"proxy_known": false})]),
		{"peer_authentications": [pa]},
	)
	fs := rules_of(injection.findings, "injection/namespace-unknown") with input as mk_input(m, null)
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	contains(f.message, "PeerAuthentication payments/default requires STRICT mTLS for it")
}

test_namespace_unknown_quiet_when_known_or_decided_by_the_pod if {
	inp := mk_input(
		model(
			{
				"shop": ns("shop", false, {}),
				"payments": configured("payments", true, {}),
				# Unknown labels, but each workload's proxy does not depend on them.
				"edge": undeclared("edge", {}),
				"kube-system": undeclared("kube-system", {}),
			},
			[
				workload("Deployment", "shop", "cart", {}),
				workload("Deployment", "payments", "api", {"proxy": true}),
				workload("Deployment", "edge", "gw", {"proxy": true, "proxy_via": "template"}),
				workload("DaemonSet", "edge", "agent", {"host_network": true}),
				workload("Deployment", "kube-system", "dns", {"proxy_known": false}),
			],
		),
		null,
	)
	count(rules_of(injection.findings, "injection/namespace-unknown")) == 0 with input as inp
}

# The reason the model gives (two apps disagreeing) is the one said.
test_namespace_unknown_uses_the_models_reason if {
	reason := "Application argocd/a and Application argocd/b set different labels on namespace payments (managedNamespaceMetadata), and which wins depends on the order Argo CD syncs them"
	inp := mk_input(
		model(
			{"payments": undeclared("payments", {"unknown_reason": reason})},
			[workload("Deployment", "payments", "api", {"proxy_known": false})],
		),
		null,
	)
	some f in injection.findings with input as inp
	f.rule == "injection/namespace-unknown"
	startswith(f.message, "Application argocd/a and Application argocd/b set different labels")
}

test_not_injected_respects_configured_root_namespace if {
	inp := object.union(
		mk_input(model({"mesh-root": ns("mesh-root", false, {})}, []), null),
		{"config": {"mesh": {"root_namespace": "mesh-root"}}},
	)
	count(rules_of(injection.findings, "injection/namespace-not-injected")) == 0 with input as inp
}

# ---------------------------------------------------------------------------
# injection/conflicting-labels (IST0123)
# One test per Namespace of istioctl's analyzer testdata
# (pkg/config/analysis/analyzers/testdata/injection.yaml), which expects IST0123 for
# busted, multi-ns-1, multi-ns-2 and multi-ns-3 only.

ist0123(name, labels) := fs if {
	inp := mk_input(model({name: ns(name, null, {"labels": labels})}, []), null)
	fs := rules_of(injection.findings, "injection/conflicting-labels") with input as inp
}

test_ist0123_default_injection_enabled_alone if count(ist0123("default", {"istio-injection": "enabled"})) == 0

test_ist0123_ambient_alone if count(ist0123("ambient", {"istio.io/dataplane-mode": "ambient"})) == 0

test_ist0123_foo_injection_disabled_alone if count(ist0123("foo", {"istio-injection": "disabled"})) == 0

test_ist0123_bar_no_labels if count(ist0123("bar", {})) == 0

test_ist0123_canary_revision_alone if count(ist0123("canary-test", {"istio.io/rev": "canary"})) == 0

test_ist0123_pidgeon_revision_alone if count(ist0123("pidgeon-test", {"istio.io/rev": "pidgeon"})) == 0

test_ist0123_busted_enabled_and_revision if {
	fs := ist0123("busted", {"istio-injection": "enabled", "istio.io/rev": "canary"})
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.istio_code == "IST0123"
	f.resource == "Namespace/busted"
	f.path == ["metadata", "labels"]
	contains(f.message, "istio-injection=enabled, istio.io/rev=canary")
	contains(f.message, "default revision's proxy")
}

test_ist0123_multi_ns_1_enabled_and_revision if {
	count(ist0123("multi-ns-1", {"istio-injection": "enabled", "istio.io/rev": "test"})) == 1
}

test_ist0123_multi_ns_2_enabled_and_ambient if {
	fs := ist0123("multi-ns-2", {"istio-injection": "enabled", "istio.io/dataplane-mode": "ambient"})
	count(fs) == 1
	some f in fs
	contains(f.message, "istio-injection=enabled, istio.io/dataplane-mode=ambient")
	contains(f.message, "its pods get a sidecar")
	not contains(f.message, "default revision")
}

test_ist0123_multi_ns_3_revision_and_ambient if {
	fs := ist0123("multi-ns-3", {"istio.io/rev": "test", "istio.io/dataplane-mode": "ambient"})
	count(fs) == 1
	some f in fs
	contains(f.message, "istio.io/rev=test, istio.io/dataplane-mode=ambient")
}

test_ist0123_not_conflict_ns_1_disabled_and_ambient if {
	count(ist0123("not-conflict-ns-1", {"istio-injection": "disabled", "istio.io/dataplane-mode": "ambient"})) == 0
}

test_ist0123_not_conflict_ns_2_disabled_and_revision if {
	count(ist0123("not-conflict-ns-2", {"istio-injection": "disabled", "istio.io/rev": "test"})) == 0
}

# The analyzer's other branches: istio-system is skipped by name; a value of
# istio-injection other than "enabled" switches injection off like "disabled"; any
# dataplane-mode value counts beside istio-injection=enabled.
test_ist0123_istio_system_is_skipped if {
	count(ist0123("istio-system", {"istio-injection": "enabled", "istio.io/rev": "canary"})) == 0
}

test_ist0123_other_injection_value_is_no_conflict if {
	count(ist0123("batch", {"istio-injection": "off", "istio.io/rev": "test"})) == 0
}

test_ist0123_enabled_and_dataplane_mode_none if {
	count(ist0123("edge", {"istio-injection": "enabled", "istio.io/dataplane-mode": "none"})) == 1
}

test_ist0123_all_three if {
	fs := ist0123("all", {"istio-injection": "enabled", "istio.io/rev": "test", "istio.io/dataplane-mode": "ambient"})
	count(fs) == 1
	some f in fs
	contains(f.message, "default revision's proxy")
	contains(f.message, "its pods get a sidecar")
}

# The whole testdata file at once: exactly the namespaces istioctl reports.
test_ist0123_testdata_as_istioctl_reports_it if {
	cases := {
		"default": {"istio-injection": "enabled"},
		"ambient": {"istio.io/dataplane-mode": "ambient"},
		"foo": {"istio-injection": "disabled"},
		"bar": {},
		"canary-test": {"istio.io/rev": "canary"},
		"pidgeon-test": {"istio.io/rev": "pidgeon"},
		"busted": {"istio-injection": "enabled", "istio.io/rev": "canary"},
		"multi-ns-1": {"istio-injection": "enabled", "istio.io/rev": "test"},
		"multi-ns-2": {"istio-injection": "enabled", "istio.io/dataplane-mode": "ambient"},
		"multi-ns-3": {"istio.io/rev": "test", "istio.io/dataplane-mode": "ambient"},
		"not-conflict-ns-1": {"istio-injection": "disabled", "istio.io/dataplane-mode": "ambient"},
		"not-conflict-ns-2": {"istio-injection": "disabled", "istio.io/rev": "test"},
	}
	m := model({name: ns(name, null, {"labels": labels}) | some name, labels in cases}, [])
	fs := rules_of(injection.findings, "injection/conflicting-labels") with input as mk_input(m, null)
	{f.resource | some f in fs} == {"Namespace/busted", "Namespace/multi-ns-1", "Namespace/multi-ns-2", "Namespace/multi-ns-3"}
}

# Labels an Argo CD Application sets conflict alike, at that field; labels only
# mesh.namespaces gives describe the cluster, with no object here to fix.
test_ist0123_argo_managed_labels_and_not_config if {
	labels := {"istio-injection": "enabled", "istio.io/rev": "canary"}
	m := model({"shop": argo_labelled("shop", true, labels), "web": configured("web", true, {"labels": labels})}, [])
	fs := rules_of(injection.findings, "injection/conflicting-labels") with input as mk_input(m, null)
	count(fs) == 1
	some f in fs
	f.resource == "Application/argocd/shop"
	f.path == ["spec", "syncPolicy", "managedNamespaceMetadata", "labels"]
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

# Opting out of the sidecar to be captured by ztunnel keeps the workload in the mesh.
test_opted_out_quiet_when_ambient_captures_it if {
	inp := mk_input(
		model(
			{"shop": ns("shop", true, {})},
			[workload("Deployment", "shop", "cart", {
				"opted_out": true, "ambient": true,
				"labels": {"app": "cart", "sidecar.istio.io/inject": "false", "istio.io/dataplane-mode": "ambient"},
			})],
		),
		null,
	)
	count(rules_of(injection.findings, "injection/workload-opted-out")) == 0 with input as inp
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

# A namespace base did not declare may have been injected all along.
test_rollout_required_quiet_when_base_did_not_declare_the_namespace if {
	base := model({"shop": undeclared("shop", {})}, [workload("Deployment", "shop", "cart", {"proxy_known": false})])
	head := model({"shop": ns("shop", true, {})}, [workload("Deployment", "shop", "cart", {"proxy": true})])
	count(rules_of(injection.findings, "injection/rollout-required")) == 0 with input as mk_input(head, base)
}

test_rollout_required_points_at_argo_managed_labels if {
	base := model({"shop": argo_labelled("shop", false, {})}, [workload("Deployment", "shop", "cart", {})])
	head := model(
		{"shop": argo_labelled("shop", true, {"istio-injection": "enabled"})},
		[workload("Deployment", "shop", "cart", {"pending_rollout": true})],
	)
	fs := rules_of(injection.findings, "injection/rollout-required") with input as mk_input(head, base)
	count(fs) == 1
	some f in fs
	f.resource == "Application/argocd/shop"
	f.path == ["spec", "syncPolicy", "managedNamespaceMetadata", "labels"]
}

test_rollout_required_skips_opted_out if {
	base := model({"shop": ns("shop", false, {})}, [workload("Deployment", "shop", "legacy", {"opted_out": true})])
	head := model({"shop": ns("shop", true, {})}, [workload("Deployment", "shop", "legacy", {"opted_out": true})])
	count(rules_of(injection.findings, "injection/rollout-required")) == 0 with input as mk_input(head, base)
}

test_conflicting_labels_hostile_labels_do_not_error if {
	m := model({"shop": ns("shop", true, {"labels": "x"})}, [])
	count(rules_of(injection.findings, "injection/conflicting-labels")) == 0 with input as mk_input(m, null)
}
