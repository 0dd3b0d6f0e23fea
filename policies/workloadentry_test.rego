package meshward.rules.workloadentry_test

import rego.v1

import data.meshward.rules.workloadentry

we(name, extra) := object.union(
	{
		"id": sprintf("WorkloadEntry/vm/%s", [name]),
		"namespace": "vm",
		"name": name,
		"labels": {"app": "reports"},
		"metadata_labels": {"app": "reports"},
		"spec_labels": {},
		"address": "10.0.0.5",
		"network": null,
		"address_problem": null,
		"service_account": "reports",
		"selected_by": ["ServiceEntry/vm/reports"],
	},
	extra,
)

we_resource(name, spec) := {
	"id": sprintf("WorkloadEntry/vm/%s", [name]),
	"apiVersion": "networking.istio.io/v1",
	"kind": "WorkloadEntry",
	"namespace": "vm",
	"name": name,
	"body": {"apiVersion": "networking.istio.io/v1", "kind": "WorkloadEntry", "metadata": {"name": name, "namespace": "vm"}, "spec": spec},
	"file": "we.yaml",
	"line": 1,
}

mk_input(entries, selectors, resources) := {
	"resources": resources,
	"by_kind": {"WorkloadEntry": resources},
	"model": {
		"namespaces": {},
		"workloads": [],
		"workload_entries": entries,
		"selectors": selectors,
		"peer_authentications": [],
		"service_accounts": {},
		"mtls_scopes": {},
	},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

rules_of(fs, rule) := {f | some f in fs; f.rule == rule}

# ---------------------------------------------------------------------------
# workloadentry/unselected

test_unselected_fires if {
	s := {
		"resource": "ServiceEntry/vm/reports", "kind": "ServiceEntry", "namespace": "vm",
		"path": ["spec", "workloadSelector", "labels"], "scope": "workload", "labels": {"app": "reportz"},
		"counts": "workloads_and_entries", "matches": [], "match_count": 0,
		"spec_only_matches": [], "workload_entry_matches": 0, "invalid": [],
	}
	fs := rules_of(workloadentry.findings, "workloadentry/unselected") with input as mk_input([we("vm-1", {"selected_by": []})], [s], [])
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.resource == "WorkloadEntry/vm/vm-1"
	f.path == ["metadata", "labels"]
	contains(f.message, "app=reports")
	contains(f.message, "ServiceEntry vm/reports selects app=reportz")
}

test_unselected_quiet if {
	count(rules_of(workloadentry.findings, "workloadentry/unselected")) == 0 with input as mk_input([we("vm-1", {})], [], [])
}

# ---------------------------------------------------------------------------
# workloadentry/address-required

test_address_required_fires if {
	fs := rules_of(workloadentry.findings, "workloadentry/address-required") with input as mk_input([], [], [we_resource("vm-1", {"labels": {"app": "reports"}})])
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "address"]
}

test_address_required_fires_on_empty_address if {
	some f in workloadentry.findings with input as mk_input([], [], [we_resource("vm-1", {"address": ""})])
	f.rule == "workloadentry/address-required"
}

test_address_required_quiet if {
	resources := [we_resource("vm-1", {"address": "10.0.0.5"}), we_resource("vm-2", {"network": "vpc-1"})]
	count(rules_of(workloadentry.findings, "workloadentry/address-required")) == 0 with input as mk_input([], [], resources)
}

# ---------------------------------------------------------------------------
# workloadentry/invalid-address

test_invalid_address_fires if {
	fs := rules_of(workloadentry.findings, "workloadentry/invalid-address") with input as mk_input([we("vm-1", {"address": "10.0.0.5 ", "address_problem": "contains whitespace"})], [], [])
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "address"]
	contains(f.message, "\"10.0.0.5 \", which contains whitespace")
}

test_invalid_address_quiet if {
	count(rules_of(workloadentry.findings, "workloadentry/invalid-address")) == 0 with input as mk_input([we("vm-1", {})], [], [])
}

test_hostile_shapes_do_not_error if {
	resources := [
		object.union(we_resource("vm-1", {}), {"body": {"spec": null}}),
		object.union(we_resource("vm-2", {}), {"body": {"spec": "str"}}),
		we_resource("vm-3", {"address": 5}),
	]
	fs := workloadentry.findings with input as mk_input([], [], resources)
	{f.resource | some f in fs; f.rule == "workloadentry/address-required"} == {"WorkloadEntry/vm/vm-1", "WorkloadEntry/vm/vm-2"}
}

test_unselected_quiet_when_a_kubernetes_service_selects_it if {
	svc := {
		"id": "Service/vm/reports", "apiVersion": "v1", "kind": "Service", "namespace": "vm", "name": "reports",
		"body": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "reports", "namespace": "vm"}, "spec": {"selector": {"app": "reports"}, "ports": [{"port": 8080}]}},
		"file": "svc.yaml", "line": 1,
	}
	inp := object.union(mk_input([we("vm-1", {"selected_by": []})], [], []), {"by_kind": {"Service": [svc]}})
	count(rules_of(workloadentry.findings, "workloadentry/unselected")) == 0 with input as inp
}
