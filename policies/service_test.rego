package meshward.rules.service_test

import rego.v1

import data.meshward.rules.service

# One port of the model's traffic.unknown_protocols (classified in
# src/model/traffic/ports.rs, whose tests cover which ports are listed).
entry(index, port, name, app, sniffed) := {
	"resource": "Service/shop/cart",
	"namespace": "shop",
	"service": "cart",
	"index": index,
	"port": port,
	"name": name,
	"app": app,
	"external": false,
	"external_name": null,
	"sniffed": sniffed,
}

external(e, host) := object.union(e, {
	"resource": "Service/shop/payments",
	"service": "payments",
	"external": true,
	"external_name": host,
})

findings_of(entries) := {f |
	some f in service.findings with input as {"model": {"traffic": {"unknown_protocols": entries}}}
	f.rule == "service/port-name"
}

the_finding(entries) := f if {
	fs := findings_of(entries)
	count(fs) == 1
	some f in fs
}

# ---------------------------------------------------------------------------
# unknown protocols (IST0118)

test_unknown_name_says_sniffing if {
	f := the_finding([entry(0, 8080, "web", "", true)])
	f.severity == "info"
	f.istio_code == "IST0118"
	f.resource == "Service/shop/cart"
	f.path == ["spec", "ports", 0, "name"]
	contains(f.message, "Service shop/cart port 8080 (web): its name does not start with a protocol Istio knows")
	contains(f.message, "sniffing")
	contains(f.message, "server-first")
	contains(f.message, "http-web, grpc-api, tcp-db")
}

test_each_listed_port_is_one_finding if {
	fs := findings_of([entry(1, 9090, "metrics", "", true), entry(3, 9091, "debug", "", true)])
	{f.path | some f in fs} == {["spec", "ports", 1, "name"], ["spec", "ports", 3, "name"]}
}

test_unnamed_port_points_at_the_port if {
	f := the_finding([entry(0, 8080, "", "", true)])
	f.path == ["spec", "ports", 0]
	contains(f.message, "port 8080 (unnamed)")
	contains(f.message, "no name and no appProtocol")
}

test_unknown_app_protocol_points_at_it if {
	f := the_finding([entry(0, 8080, "http", "web", true)])
	f.path == ["spec", "ports", 0, "appProtocol"]
	contains(f.message, "its appProtocol web is not a protocol Istio knows")
}

# A port Istio does not sniff (UDP, server-first numbers) says nothing unless external.
test_not_sniffed_internal_port_is_clean if {
	count(findings_of([entry(0, 3306, "db", "", false)])) == 0
}

test_port_written_oddly_is_shown_as_written if {
	f := the_finding([entry(0, "x", "", "", true)])
	contains(f.message, "port x (unnamed)")
}

# ---------------------------------------------------------------------------
# ExternalName Services (IST0150)

test_external_name_unknown_fires_as_warning if {
	f := the_finding([external(entry(0, 8000, "web", "", true), "payments.example.com")])
	f.severity == "warning"
	f.istio_code == "IST0150"
	f.rule == "service/port-name"
	f.resource == "Service/shop/payments"
	f.path == ["spec", "ports", 0, "name"]
	contains(f.message, "Service shop/payments is of type ExternalName (payments.example.com)")
	contains(f.message, "port 8000 (web)")
	contains(f.message, "on port 8000 may be sent to payments.example.com")
	contains(f.message, "ServiceEntry with spec.addresses")
}

test_external_name_port_named_tcp_fires if {
	f := the_finding([external(entry(0, 5432, "tcp", "", false), "payments.example.com")])
	f.istio_code == "IST0150"
	f.severity == "warning"
	f.path == ["spec", "ports", 0, "name"]
	contains(f.message, "port 5432 (tcp) is named tcp")
}

test_external_name_without_host_says_so if {
	f := the_finding([external(entry(0, 8000, "", "", true), null)])
	f.path == ["spec", "ports", 0]
	contains(f.message, "is of type ExternalName (its external name)")
}

test_no_model_no_findings if {
	count({f | some f in service.findings with input as {}}) == 0
}

# ---------------------------------------------------------------------------
# service/conflicting-ports, service/workload-without-service

traffic_findings(t) := fs if {
	fs := service.findings with input as {"model": {"traffic": t}}
}

test_conflicting_ports_codes if {
	c := {
		"workload": "Deployment/shop/cart", "conflict": "protocol", "port": "8080",
		"sides": ["Service/shop/a port 8080/TCP -> 8080", "Service/shop/b port 8080/UDP -> 8080"],
		"services": ["Service/shop/a", "Service/shop/b"], "resource": "Service/shop/b", "path": ["spec", "ports", 0],
	}
	fs := traffic_findings({"port_conflicts": [c]})
	some f in fs
	f.rule == "service/conflicting-ports"
	f.istio_code == "IST0116"
	gs := traffic_findings({"port_conflicts": [object.union(c, {"conflict": "target-port"})]})
	some g in gs
	g.istio_code == "IST0137"
	contains(g.message, "target port 8080")
}

test_workload_without_service_points_at_pod_labels if {
	fs := traffic_findings({"unserved": [{"workload": "StatefulSet/shop/db", "ports": [5432, 9187]}]})
	some f in fs
	f.rule == "service/workload-without-service"
	f.severity == "info"
	f.path == ["spec", "template", "metadata", "labels"]
	contains(f.message, "ports 5432, 9187")
}
