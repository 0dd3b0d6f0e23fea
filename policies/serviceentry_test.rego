package meshward.rules.serviceentry_test

import rego.v1

import data.meshward.rules.serviceentry

se(name, spec) := {
	"id": sprintf("ServiceEntry/vm/%s", [name]),
	"apiVersion": "networking.istio.io/v1",
	"kind": "ServiceEntry",
	"namespace": "vm",
	"name": name,
	"body": {"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry", "metadata": {"name": name, "namespace": "vm"}, "spec": spec},
	"file": "se.yaml",
	"line": 1,
}

mk_input(ses, selectors) := {
	"resources": ses,
	"by_kind": {"ServiceEntry": ses},
	"model": {
		"namespaces": {},
		"workloads": [],
		"workload_entries": [],
		"selectors": selectors,
		"peer_authentications": [],
		"service_accounts": {},
		"mtls_scopes": {},
	},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

# A valid, typical ServiceEntry spec to derive cases from.
good := {
	"hosts": ["api.example.com"],
	"addresses": ["240.0.0.10"],
	"ports": [{"number": 443, "name": "https", "protocol": "TLS"}],
	"location": "MESH_EXTERNAL",
	"resolution": "DNS",
}

with_spec(patch) := object.union(good, patch)

without(keys) := object.remove(good, keys)

rules_of(ses, rule) := {f | some f in serviceentry.findings with input as mk_input(ses, []); f.rule == rule}

# No finding at all for the good spec.
test_good_spec_is_clean if {
	count(serviceentry.findings) == 0 with input as mk_input([se("api", good)], [])
}

# ---------------------------------------------------------------------------
# serviceentry/none-with-endpoints

test_none_with_endpoints_fires_when_unset if {
	fs := rules_of([se("api", object.union(without(["resolution"]), {"endpoints": [{"address": "10.0.0.1"}]}))], "serviceentry/none-with-endpoints")
	count(fs) == 1
	some f in fs
	f.severity == "error"
	f.path == ["spec", "endpoints"]
	contains(f.message, "NONE by default")
}

test_none_with_endpoints_quiet_for_static if {
	count(rules_of([se("api", with_spec({"resolution": "STATIC", "endpoints": [{"address": "10.0.0.1"}]}))], "serviceentry/none-with-endpoints")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/round-robin-multiple-endpoints

test_round_robin_multiple_fires if {
	fs := rules_of([se("api", with_spec({"resolution": "DNS_ROUND_ROBIN", "endpoints": [{"address": "a.example.com"}, {"address": "b.example.com"}]}))], "serviceentry/round-robin-multiple-endpoints")
	count(fs) == 1
	some f in fs
	contains(f.message, "2 endpoints")
}

test_round_robin_single_quiet if {
	count(rules_of([se("api", with_spec({"resolution": "DNS_ROUND_ROBIN", "endpoints": [{"address": "a.example.com"}]}))], "serviceentry/round-robin-multiple-endpoints")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/static-without-backends

test_static_without_backends_fires if {
	fs := rules_of([se("api", with_spec({"resolution": "STATIC"}))], "serviceentry/static-without-backends")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "resolution"]
	contains(f.message, "api.example.com")
	contains(f.message, "503 no healthy upstream")
}

test_static_with_selector_quiet if {
	count(rules_of([se("api", with_spec({"resolution": "STATIC", "workloadSelector": {"labels": {"app": "api"}}}))], "serviceentry/static-without-backends")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/selector-and-endpoints

test_selector_and_endpoints_fires if {
	fs := rules_of([se("api", with_spec({"resolution": "STATIC", "workloadSelector": {"labels": {"app": "api"}}, "endpoints": [{"address": "10.0.0.1"}]}))], "serviceentry/selector-and-endpoints")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "workloadSelector"]
}

test_selector_alone_quiet if {
	count(rules_of([se("api", with_spec({"resolution": "STATIC", "workloadSelector": {"labels": {"app": "api"}}}))], "serviceentry/selector-and-endpoints")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/cidr-requires-none-or-static

test_cidr_with_dns_fires if {
	fs := rules_of([se("api", with_spec({"addresses": ["240.0.0.10", "10.10.0.0/16"]}))], "serviceentry/cidr-requires-none-or-static")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "addresses", 1]
	contains(f.message, "10.10.0.0/16")
}

test_cidr_with_static_quiet if {
	count(rules_of([se("api", with_spec({"addresses": ["10.10.0.0/16"], "resolution": "STATIC", "endpoints": [{"address": "10.10.0.1"}]}))], "serviceentry/cidr-requires-none-or-static")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/hosts-invalid

test_hosts_missing_fires if {
	fs := rules_of([se("api", without(["hosts"]))], "serviceentry/hosts-invalid")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "hosts"]
}

test_hosts_star_fires if {
	fs := rules_of([se("api", with_spec({"hosts": ["api.example.com", "*"]}))], "serviceentry/hosts-invalid")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "hosts", 1]
}

test_hosts_too_many_fires if {
	hosts := [sprintf("h%d.example.com", [i]) | some i in numbers.range(1, 257)]
	fs := rules_of([se("api", with_spec({"hosts": hosts}))], "serviceentry/hosts-invalid")
	count(fs) == 1
	some f in fs
	contains(f.message, "257 hosts")
}

test_hosts_wildcard_domain_quiet if {
	count(rules_of([se("api", with_spec({"hosts": ["*.example.com"]}))], "serviceentry/hosts-invalid")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/duplicate-port

test_duplicate_port_fires_once if {
	ports := [
		{"number": 443, "name": "https", "protocol": "TLS"},
		{"number": 443, "name": "https-2", "protocol": "TLS"},
	]
	fs := rules_of([se("api", with_spec({"ports": ports}))], "serviceentry/duplicate-port")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "ports", 1, "number"]
}

test_distinct_ports_quiet if {
	ports := [{"number": 443, "name": "https", "protocol": "TLS"}, {"number": 80, "name": "http", "protocol": "HTTP"}]
	count(rules_of([se("api", with_spec({"ports": ports}))], "serviceentry/duplicate-port")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/port-invalid

test_port_invalid_fires if {
	ports := [
		{"number": 0, "name": "zero", "protocol": "TLS"},
		{"number": 70000, "name": "big", "protocol": "TLS"},
		{"name": "missing", "protocol": "TLS"},
		{"number": 443, "protocol": "TLS"},
	]
	fs := rules_of([se("api", with_spec({"ports": ports}))], "serviceentry/port-invalid")
	{f.path | some f in fs} == {
		["spec", "ports", 0, "number"],
		["spec", "ports", 1, "number"],
		["spec", "ports", 2, "number"],
		["spec", "ports", 3, "name"],
	}
}

test_port_valid_quiet if {
	count(rules_of([se("api", good)], "serviceentry/port-invalid")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/endpoint-address-required

test_endpoint_without_address_fires if {
	fs := rules_of([se("api", with_spec({"resolution": "STATIC", "endpoints": [{"address": "10.0.0.1"}, {"ports": {"https": 8443}}]}))], "serviceentry/endpoint-address-required")
	count(fs) == 1
	some f in fs
	f.path == ["spec", "endpoints", 1]
}

test_endpoint_with_network_quiet if {
	count(rules_of([se("api", with_spec({"resolution": "STATIC", "endpoints": [{"network": "vpc-1"}]}))], "serviceentry/endpoint-address-required")) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/location-mismatch

member_selector(n) := {
	"resource": "ServiceEntry/vm/reports", "kind": "ServiceEntry", "namespace": "vm",
	"path": ["spec", "workloadSelector", "labels"], "scope": "workload", "labels": {"app": "reports"},
	"counts": "workloads_and_entries", "matches": [], "match_count": n,
	"spec_only_matches": [], "workload_entry_matches": n, "invalid": [],
}

members_spec(patch) := object.union(
	object.remove(good, ["location"]),
	object.union({"resolution": "STATIC", "workloadSelector": {"labels": {"app": "reports"}}}, patch),
)

test_location_mismatch_fires if {
	fs := {f |
		some f in serviceentry.findings with input as mk_input([se("reports", members_spec({}))], [member_selector(2)])
		f.rule == "serviceentry/location-mismatch"
	}
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.path == ["spec", "location"]
	contains(f.message, "2 WorkloadEntries")
	contains(f.message, "default when unset")
}

test_location_internal_quiet if {
	count({f |
		some f in serviceentry.findings with input as mk_input([se("reports", members_spec({"location": "MESH_INTERNAL"}))], [member_selector(2)])
		f.rule == "serviceentry/location-mismatch"
	}) == 0
}

test_location_external_without_members_quiet if {
	count({f |
		some f in serviceentry.findings with input as mk_input([se("reports", members_spec({}))], [member_selector(0)])
		f.rule == "serviceentry/location-mismatch"
	}) == 0
}

# ---------------------------------------------------------------------------
# serviceentry/addresses-required

test_addresses_required_fires if {
	ports := [{"number": 443, "name": "https", "protocol": "TLS"}, {"number": 5432, "name": "tcp-db", "protocol": "TCP"}, {"number": 6379, "name": "redis"}]
	fs := rules_of([se("db", object.union(without(["addresses"]), {"ports": ports}))], "serviceentry/addresses-required")
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.istio_code == "IST0134"
	f.path == ["spec", "ports", 1]
	contains(f.message, "redis 6379, tcp-db 5432")
	contains(f.message, "routed by port only")
}

test_addresses_required_quiet_for_http_or_with_addresses if {
	http := object.union(without(["addresses"]), {"ports": [{"number": 80, "name": "http", "protocol": "HTTP"}]})
	tcp := with_spec({"ports": [{"number": 5432, "name": "tcp-db", "protocol": "TCP"}]})
	count(rules_of([se("web", http), se("db", tcp)], "serviceentry/addresses-required")) == 0
}

# Hostile shapes never make evaluation fail.
test_hostile_shapes_do_not_error if {
	ses := [
		se("a", {"hosts": "not-a-list", "ports": "nope", "endpoints": {"x": 1}, "resolution": 3, "addresses": [5]}),
		se("b", {"ports": [7, {"number": "80", "name": 1}]}),
		object.union(se("c", {}), {"body": {"spec": null}}),
	]
	fs := serviceentry.findings with input as mk_input(ses, [])
	count(fs) > 0
}
