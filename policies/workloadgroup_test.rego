package meshward.rules.workloadgroup_test

import rego.v1

import data.meshward.rules.workloadgroup

wg(spec) := {
	"id": "WorkloadGroup/vm/reports",
	"apiVersion": "networking.istio.io/v1",
	"kind": "WorkloadGroup",
	"namespace": "vm",
	"name": "reports",
	"body": {"apiVersion": "networking.istio.io/v1", "kind": "WorkloadGroup", "metadata": {"name": "reports", "namespace": "vm"}, "spec": spec},
	"file": "wg.yaml",
	"line": 1,
}

mk_input(groups) := {
	"resources": groups,
	"by_kind": {"WorkloadGroup": groups},
	"model": {"namespaces": {}, "workloads": [], "workload_entries": [], "selectors": [], "peer_authentications": [], "service_accounts": {}, "mtls_scopes": {}},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

template := {"labels": {"app": "reports"}, "serviceAccount": "reports"}

with_probe(probe) := {"template": template, "probe": probe}

rules_of(spec, rule) := {f | some f in workloadgroup.findings with input as mk_input([wg(spec)]); f.rule == rule}

test_good_group_is_clean if {
	count(workloadgroup.findings) == 0 with input as mk_input([wg(with_probe({"httpGet": {"port": 8080, "path": "/ready", "scheme": "HTTPS"}}))])
}

# ---------------------------------------------------------------------------
# workloadgroup/template-required

test_template_required_fires if {
	fs := rules_of({"metadata": {"labels": {"app": "reports"}}}, "workloadgroup/template-required")
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "template"]
}

test_template_required_fires_without_spec if {
	fs := {f | some f in workloadgroup.findings with input as mk_input([object.union(wg({}), {"body": {"spec": null}})]); f.rule == "workloadgroup/template-required"}
	count(fs) == 1
}

test_template_present_quiet if {
	count(rules_of({"template": template}, "workloadgroup/template-required")) == 0
}

# ---------------------------------------------------------------------------
# workloadgroup/probe-multiple-methods

test_probe_multiple_methods_fires if {
	fs := rules_of(with_probe({"httpGet": {"port": 8080}, "tcpSocket": {"port": 8080}}), "workloadgroup/probe-multiple-methods")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "probe"]
	contains(f.message, "httpGet and tcpSocket")
}

test_probe_single_method_quiet if {
	count(rules_of(with_probe({"tcpSocket": {"port": 8080}}), "workloadgroup/probe-multiple-methods")) == 0
}

# ---------------------------------------------------------------------------
# workloadgroup/probe-incomplete

test_probe_http_without_port_fires if {
	fs := rules_of(with_probe({"httpGet": {"path": "/ready"}}), "workloadgroup/probe-incomplete")
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "probe", "httpGet", "port"]
	contains(f.message, "httpGet has no port")
}

test_probe_tcp_port_out_of_range_fires if {
	some f in rules_of(with_probe({"tcpSocket": {"port": 70000}}), "workloadgroup/probe-incomplete")
	f.path == ["spec", "probe", "tcpSocket", "port"]
	contains(f.message, "70000")
}

test_probe_exec_without_command_fires if {
	some f in rules_of(with_probe({"exec": {"command": []}}), "workloadgroup/probe-incomplete")
	f.path == ["spec", "probe", "exec", "command"]
}

test_probe_bad_scheme_fires if {
	some f in rules_of(with_probe({"httpGet": {"port": 8080, "scheme": "ftp"}}), "workloadgroup/probe-incomplete")
	f.path == ["spec", "probe", "httpGet", "scheme"]
}

test_probe_complete_quiet if {
	count(rules_of(with_probe({"exec": {"command": ["/bin/true"]}}), "workloadgroup/probe-incomplete")) == 0
	count(rules_of(with_probe({"tcpSocket": {"port": 5432}}), "workloadgroup/probe-incomplete")) == 0
	count(rules_of(with_probe({"httpGet": {"port": 8080, "scheme": "HTTP"}}), "workloadgroup/probe-incomplete")) == 0
	# An empty scheme is Istio's default (HTTP).
	count(rules_of(with_probe({"httpGet": {"port": 8080, "scheme": ""}}), "workloadgroup/probe-incomplete")) == 0
}

test_hostile_shapes_do_not_error if {
	groups := [
		wg({"template": "x", "probe": "y"}),
		object.union(wg({}), {"id": "WorkloadGroup/vm/b", "body": {"spec": {"template": {}, "probe": {"httpGet": "x", "tcpSocket": {"port": "http"}, "exec": {"command": "ls"}}}}}),
	]
	fs := workloadgroup.findings with input as mk_input(groups)
	{f.rule | some f in fs} == {"workloadgroup/template-required", "workloadgroup/probe-multiple-methods", "workloadgroup/probe-incomplete"}
}

# ---------------------------------------------------------------------------
# workloadgroup/unreachable

group(selected_by, services) := {
	"id": "WorkloadGroup/vm/reports", "namespace": "vm", "name": "reports", "has_template": true,
	"metadata_labels": {"app": "reports"}, "template_labels": {},
	"selected_by": selected_by, "selected_by_services": services,
}

unreachable_input(g, selectors) := object.union(mk_input([wg({"template": template})]), {"model": {"workload_groups": [g], "selectors": selectors}})

unreachable(inp) := {f | some f in workloadgroup.findings with input as inp; f.rule == "workloadgroup/unreachable"}

test_unreachable_fires_without_a_selecting_service_entry if {
	near := {"resource": "ServiceEntry/vm/reports", "kind": "ServiceEntry", "namespace": "vm", "scope": "workload", "labels": {"app": "report"}}
	fs := unreachable(unreachable_input(group([], []), [near]))
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.path == ["spec", "metadata", "labels"]
	contains(f.message, "(app=reports)")
	contains(f.message, "ServiceEntry vm/reports selects app=report")
}

test_unreachable_quiet_with_a_service_entry if {
	count(unreachable(unreachable_input(group(["ServiceEntry/vm/reports"], []), []))) == 0
}

test_unreachable_quiet_with_a_kubernetes_service if {
	count(unreachable(unreachable_input(group([], ["Service/vm/reports"]), []))) == 0
}

test_unreachable_quiet_without_template if {
	g := object.union(group([], []), {"has_template": false})
	count(unreachable(unreachable_input(g, []))) == 0
}
