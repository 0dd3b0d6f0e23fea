package meshward.lib_test

import rego.v1

import data.meshward.lib

test_root_namespace_default_and_configured if {
	lib.root_namespace == "istio-system" with input as {}
	lib.root_namespace == "mesh-root" with input as {"config": {"mesh": {"root_namespace": "mesh-root"}}}
	lib.root_namespace == "istio-system" with input as {"config": {"mesh": {"root_namespace": null}}}
}

test_skip_namespace if {
	lib.skip_namespace("kube-system")
	lib.skip_namespace("istio-system")
	not lib.skip_namespace("shop")
}

test_resources_missing_kind if {
	lib.resources("ServiceEntry") == [] with input as {"by_kind": {}}
	lib.resources("ServiceEntry") == [] with input as {}
}

test_non_empty if {
	lib.non_empty("x")
	lib.non_empty([1])
	lib.non_empty({"a": 1})
	lib.non_empty(0)
	lib.non_empty(false)
	not lib.non_empty("")
	not lib.non_empty([])
	not lib.non_empty({})
	not lib.non_empty(null)
}

test_get_never_fails if {
	lib.get(null, "a", 1) == 1
	lib.get("str", ["a", "b"], 2) == 2
	lib.get({"a": {"b": 3}}, ["a", "b"], 0) == 3
}

test_spec_of if {
	lib.spec_of({"body": {"spec": {"a": 1}}}) == {"a": 1}
	lib.spec_of({"body": {"spec": null}}) == {}
	lib.spec_of({"body": {}}) == {}
}

test_display if {
	lib.display("Deployment/shop/cart") == "Deployment shop/cart"
	lib.display("Namespace/shop") == "Namespace shop"
	lib.display("odd") == "odd"
}

test_enumerate if {
	lib.enumerate(["b", "a"], 5) == "a, b"
	lib.enumerate({"c", "a", "b"}, 2) == "a, b and 1 more"
	lib.enumerate_ids(["Deployment/shop/cart"], 3) == "Deployment shop/cart"
}

test_labels_text if {
	lib.labels_text({"v": "1", "app": "cart"}) == "app=cart,v=1"
	lib.labels_text(null) == "(no labels)"
}

test_pod_paths if {
	lib.pod_labels_path("Pod") == ["metadata", "labels"]
	lib.pod_labels_path("Deployment") == ["spec", "template", "metadata", "labels"]
	lib.pod_annotations_path("CronJob") == ["spec", "jobTemplate", "spec", "template", "metadata", "annotations"]
}

test_strict_path if {
	lib.strict_path({"mode": "STRICT", "port_modes": {}}) == ["spec", "mtls", "mode"]
	lib.strict_path({"mode": "PERMISSIVE", "port_modes": {"9090": "STRICT", "8080": "STRICT"}}) == ["spec", "portLevelMtls", "8080"]
}

pa := {"resource": "PeerAuthentication/shop/cart", "namespace": "shop", "scope": "workload", "scope_key": "workload:shop:app=cart", "strict": true, "mode": "STRICT"}

test_base_scope_mode_inherits if {
	# own mode in base
	lib.base_scope_mode(pa) == "DISABLE" with input as {"base": {"mtls_scopes": {"workload:shop:app=cart": "DISABLE"}, "namespaces": {}}}

	# UNSET or absent: the namespace's effective mode
	lib.base_scope_mode(pa) == "STRICT" with input as {"base": {"mtls_scopes": {"workload:shop:app=cart": "UNSET"}, "namespaces": {"shop": {"mtls": {"mode": "STRICT"}}}}}

	# namespace absent: the mesh mode, else Istio's default
	lib.base_scope_mode(pa) == "DISABLE" with input as {"base": {"mtls_scopes": {"mesh": "DISABLE"}, "namespaces": {}}}
	lib.base_scope_mode(pa) == "PERMISSIVE" with input as {"base": {"mtls_scopes": {}, "namespaces": {}}}
}

test_introduced_strict if {
	count(lib.introduced_strict) == 1 with input as {"model": {"peer_authentications": [pa]}, "base": {"mtls_scopes": {}, "namespaces": {}}}
	count(lib.introduced_strict) == 0 with input as {"model": {"peer_authentications": [pa]}, "base": {"mtls_scopes": {"workload:shop:app=cart": "STRICT"}, "namespaces": {}}}
	# Without a base there is nothing to compare with: nothing is introduced.
	count(lib.introduced_strict) == 0 with input as {"model": {"peer_authentications": [pa]}, "base": null}
}

test_injection_known_and_labels_where if {
	lib.injection_known({"injection": {"enabled": true}})
	lib.injection_known({"injection": {"enabled": false}})
	not lib.injection_known({"injection": {"enabled": null}})
	not lib.injection_known({"injection": {}})
	lib.labels_where({"labels_from": "namespace"}) == "its Namespace object"
	lib.labels_where({"labels_from": "argocd", "labels_resource": "Application/argocd/shop"}) == "the managedNamespaceMetadata of Application argocd/shop"
	lib.labels_where({"labels_from": "config"}) == "mesh.namespaces of .meshward.yaml"
	lib.capitalized("namespace shop is new") == "Namespace shop is new"
}

test_scope_namespaces if {
	mesh := {"scope": "mesh", "namespace": "istio-system"}
	namespaces := {"shop": {"workloads": 2}, "empty": {"workloads": 0}, "istio-system": {"workloads": 1}, "kube-system": {"workloads": 3}}
	lib.scope_namespaces(mesh) == {"shop"} with input as {"model": {"namespaces": namespaces}}
	lib.scope_namespaces(pa) == {"shop"}
}

test_evidence_problem if {
	ev := {"window": "7d", "namespaces": {
		"ok": {"requests_total": 5, "tcp_connections_total": 0, "error": null},
		"quiet": {"requests_total": 0, "tcp_connections_total": 0, "error": null},
		"broken": {"requests_total": 0, "error": "timeout"},
	}}
	lib.evidence_problem("ok") == "no evidence was given" with input as {"evidence": null}
	not lib.evidence_problem("ok") with input as {"evidence": ev}
	contains(lib.evidence_problem("quiet"), "no traffic at all in 7d") with input as {"evidence": ev}
	lib.evidence_problem("broken") == "no usable data: timeout" with input as {"evidence": ev}
	lib.evidence_problem("missing") == "no data in the evidence" with input as {"evidence": ev}
}
