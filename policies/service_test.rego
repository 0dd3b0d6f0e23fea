package meshward.rules.service_test

import rego.v1

import data.meshward.rules.service

svc_with(name, labels, spec, api) := {
	"id": sprintf("Service/shop/%s", [name]),
	"apiVersion": api,
	"kind": "Service",
	"namespace": "shop",
	"name": name,
	"body": {"apiVersion": api, "kind": "Service", "metadata": {"name": name, "namespace": "shop", "labels": labels}, "spec": spec},
	"file": "svc.yaml",
	"line": 1,
}

svc(name, labels, spec) := svc_with(name, labels, spec, "v1")

mk_input(svcs) := {
	"resources": svcs,
	"by_kind": {"Service": svcs},
	"model": {
		"namespaces": {},
		"workloads": [],
		"workload_entries": [],
		"selectors": [],
		"peer_authentications": [],
		"service_accounts": {},
		"mtls_scopes": {},
	},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

# A ClusterIP Service with these ports.
cluster_ip(ports) := {"selector": {"app": "cart"}, "ports": ports}

# An ExternalName Service with these ports.
external(ports) := {"type": "ExternalName", "externalName": "payments.example.com", "ports": ports}

port(number, name) := {"port": number, "targetPort": number, "protocol": "TCP", "name": name}

findings_of(svcs) := {f | some f in service.findings with input as mk_input(svcs); f.rule == "service/port-name"}

ports_findings(ports) := findings_of([svc("cart", {"app": "cart"}, cluster_ip(ports))])

# ---------------------------------------------------------------------------
# known protocols

test_named_protocol_with_suffix_is_clean if {
	count(ports_findings([port(8080, "http-foo")])) == 0
}

test_every_known_prefix_is_clean if {
	names := ["http", "http2-a", "https-b", "tcp-db", "tls", "udp-x", "grpc", "grpc-web", "mongo-1", "redis", "mysql-main", "HTTP-Upper"]
	count(ports_findings([port(8000 + i, n) | some i, n in names])) == 0
}

test_grpc_web_with_suffix_is_clean if {
	count(ports_findings([port(8080, "grpc-web-x")])) == 0
}

test_app_protocol_overrides_a_bad_name if {
	count(ports_findings([object.union(port(8080, "web"), {"appProtocol": "http"})])) == 0
}

test_kubernetes_app_protocols_are_known if {
	count(ports_findings([
		object.union(port(8080, "web"), {"appProtocol": "kubernetes.io/h2c"}),
		object.union(port(8081, "ws"), {"appProtocol": "kubernetes.io/ws"}),
		object.union(port(8443, "wss"), {"appProtocol": "kubernetes.io/wss"}),
	])) == 0
}

# ---------------------------------------------------------------------------
# unknown protocols (IST0118)

test_unknown_name_fires if {
	fs := ports_findings([port(8080, "web")])
	count(fs) == 1
	some f in fs
	f.severity == "info"
	f.istio_code == "IST0118"
	f.resource == "Service/shop/cart"
	f.path == ["spec", "ports", 0, "name"]
	contains(f.message, "Service shop/cart port 8080 (web)")
	contains(f.message, "sniffing")
	contains(f.message, "server-first")
	contains(f.message, "http-web, grpc-api, tcp-db")
}

test_only_the_unknown_port_fires if {
	fs := ports_findings([port(80, "http"), port(9090, "metrics"), port(8443, "https")])
	count(fs) == 1
	some f in fs
	f.path == ["spec", "ports", 1, "name"]
	contains(f.message, "port 9090 (metrics)")
}

test_unnamed_single_port_fires_on_the_port if {
	fs := ports_findings([{"port": 8080, "targetPort": 8080}])
	count(fs) == 1
	some f in fs
	f.path == ["spec", "ports", 0]
	contains(f.message, "port 8080 (unnamed)")
	contains(f.message, "no name and no appProtocol")
}

test_unknown_app_protocol_fires_on_it_over_a_good_name if {
	fs := ports_findings([object.union(port(8080, "http"), {"appProtocol": "web"})])
	count(fs) == 1
	some f in fs
	f.path == ["spec", "ports", 0, "appProtocol"]
	contains(f.message, "appProtocol web")
}

# Istio's protocol list has no triple (Dubbo): a triple- name is sniffed.
test_triple_is_not_a_protocol_istio_knows if {
	count(ports_findings([port(50051, "triple-api")])) == 1
}

test_udp_port_is_skipped if {
	count(ports_findings([{"port": 5353, "protocol": "UDP", "name": "mdns"}])) == 0
}

test_server_first_ports_are_skipped if {
	count(ports_findings([port(25, "smtp"), port(53, "dns"), port(3306, "db"), port(27017, "")])) == 0
}

test_server_first_port_numbers_only if {
	count(ports_findings([port(3307, "db")])) == 1
}

# ---------------------------------------------------------------------------
# Services left out

test_istio_labelled_service_is_skipped if {
	count(findings_of([svc("istiod", {"istio": "pilot"}, cluster_ip([port(15010, "grpc-xds"), port(15012, "xds-tls")]))])) == 0
	count(findings_of([svc("ingress", {"istio": ""}, cluster_ip([port(80, "web")]))])) == 0
}

test_release_istio_service_is_skipped if {
	count(findings_of([svc("istiod", {"release": "istio"}, cluster_ip([port(80, "web")]))])) == 0
	count(findings_of([svc("cart", {"release": "shop"}, cluster_ip([port(80, "web")]))])) == 1
}

test_gateway_managed_services_are_skipped if {
	count(findings_of([svc("waypoint", {"gateway.istio.io/managed": "istio.io-mesh-controller"}, cluster_ip([port(15008, "mesh")]))])) == 0
	count(findings_of([svc("gw-istio", {"gateway.networking.k8s.io/gateway-name": "gw"}, cluster_ip([port(80, "web")]))])) == 0
}

test_other_kinds_named_service_are_skipped if {
	count(findings_of([svc_with("hello", {}, {"template": {"spec": {"containers": [{"ports": [{"containerPort": 8080, "name": "web"}]}]}}}, "serving.knative.dev/v1")])) == 0
}

# ---------------------------------------------------------------------------
# ExternalName Services (IST0150)

test_external_name_unknown_fires_as_warning if {
	fs := findings_of([svc("payments", {}, external([port(8000, "web")]))])
	count(fs) == 1
	some f in fs
	f.severity == "warning"
	f.istio_code == "IST0150"
	f.rule == "service/port-name"
	f.path == ["spec", "ports", 0, "name"]
	contains(f.message, "Service shop/payments is of type ExternalName (payments.example.com)")
	contains(f.message, "port 8000 (web)")
	contains(f.message, "ServiceEntry with spec.addresses")
}

test_external_name_port_named_tcp_fires if {
	fs := findings_of([svc("payments", {}, external([port(5432, "tcp")]))])
	count(fs) == 1
	some f in fs
	f.istio_code == "IST0150"
	f.severity == "warning"
	f.path == ["spec", "ports", 0, "name"]
	contains(f.message, "port 5432 (tcp) is named tcp")
}

# The name exactly: tcp- with a suffix is fine, and so is a server-first port unless named tcp.
test_external_name_tcp_suffix_and_known_names_are_clean if {
	count(findings_of([svc("payments", {}, external([port(5432, "tcp-db"), port(443, "https"), port(80, "http"), port(3306, "db")]))])) == 0
}

test_external_name_tcp_on_a_server_first_port_fires if {
	count(findings_of([svc("db", {}, external([port(3306, "tcp")]))])) == 1
}

test_external_name_unnamed_fires_on_the_port if {
	fs := findings_of([svc("payments", {}, external([{"port": 8000}]))])
	count(fs) == 1
	some f in fs
	f.path == ["spec", "ports", 0]
}

# ---------------------------------------------------------------------------
# hostile input

test_malformed_ports_do_not_crash if {
	count(findings_of([
		svc("a", {}, {"ports": "80"}),
		svc("b", "not-labels", {"ports": [null, 8080, {"port": "x", "name": 7}]}),
		svc("c", {}, "not-a-spec"),
	])) == 1
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
