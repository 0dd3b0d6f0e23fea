package meshward.rules.schema_test

import rego.v1

import data.meshward.rules.schema

api_versions := {
	"ServiceEntry": "networking.istio.io/v1", "WorkloadEntry": "networking.istio.io/v1",
	"WorkloadGroup": "networking.istio.io/v1", "Sidecar": "networking.istio.io/v1",
	"PeerAuthentication": "security.istio.io/v1", "AuthorizationPolicy": "security.istio.io/v1",
	"RequestAuthentication": "security.istio.io/v1", "Telemetry": "telemetry.istio.io/v1",
}

# An object of kind with this spec (and metadata merged in).
obj(kind, spec, metadata) := {
	"id": sprintf("%s/default/x", [kind]),
	"apiVersion": api_versions[kind],
	"kind": kind,
	"namespace": "default",
	"name": "x",
	"body": {
		"apiVersion": api_versions[kind],
		"kind": kind,
		"metadata": object.union({"name": "x", "namespace": "default"}, metadata),
		"spec": spec,
	},
	"file": "x.yaml",
	"line": 1,
}

mk_input(rs, entries) := {
	"resources": rs,
	"by_kind": {k: [r | some r in rs; r.kind == k] | some k, _ in api_versions},
	"model": {
		"namespaces": {}, "workloads": [], "workload_entries": entries, "selectors": [],
		"peer_authentications": [], "service_accounts": {}, "mtls_scopes": {},
	},
	"base": null,
	"evidence": null,
	"config": {"mesh": {"root_namespace": "istio-system", "trust_domain": "cluster.local"}},
}

run_meta(kind, spec, metadata) := fs if {
	fs := schema.findings with input as mk_input([obj(kind, spec, metadata)], [])
}

run(kind, spec) := run_meta(kind, spec, {})

# A finding of this policy at path.
at(fs, path) if {
	some f in fs
	f.path == path
	f.rule == "schema/invalid"
	f.severity == "error"
}

rejects(kind, spec, path) if at(run(kind, spec), path)

clean(kind, spec) if count(run(kind, spec)) == 0

# Typical valid specs to derive cases from.
se := {
	"hosts": ["api.example.com"],
	"addresses": ["240.0.0.10"],
	"ports": [{"number": 443, "name": "https", "protocol": "TLS"}],
	"location": "MESH_EXTERNAL",
	"resolution": "DNS",
}

se_with(patch) := object.union(se, patch)

static_se(endpoints) := se_with({"resolution": "STATIC", "endpoints": endpoints})

ap := {"action": "ALLOW", "rules": [{"from": [{"source": {"namespaces": ["shop"]}}]}]}

ap_rule(rule) := {"action": "ALLOW", "rules": [rule]}

ra_rule(rule) := {"jwtRules": [object.union({"issuer": "https://issuer.example.com"}, rule)]}

sidecar := {"egress": [{"hosts": ["./*", "istio-system/*"]}]}

ingress(listener) := {"ingress": [object.union({"port": {"number": 8443, "protocol": "HTTPS", "name": "https"}, "defaultEndpoint": "127.0.0.1:8080"}, listener)]}

pool(p) := {"inboundConnectionPool": p}

# ---------------------------------------------------------------------------
# The message

test_message_names_object_field_and_effect if {
	fs := run("ServiceEntry", se_with({"hosts": ["foo*.example.com"]}))
	count(fs) == 1
	some f in fs
	f.resource == "ServiceEntry/default/x"
	f.path == ["spec", "hosts", 0]
	contains(f.message, "ServiceEntry default/x")
	contains(f.message, "spec.hosts[0] \"foo*.example.com\"")
	contains(f.message, "validating webhook")
	contains(f.message, "Argo CD and Flux fail to sync it")
}

test_valid_specs_are_clean if {
	clean("ServiceEntry", se)
	clean("AuthorizationPolicy", ap)
	clean("Sidecar", sidecar)
	clean("RequestAuthentication", ra_rule({}))
}

test_other_groups_are_ignored if {
	r := object.union(obj("Sidecar", {}, {}), {"apiVersion": "example.com/v1"})
	count(schema.findings) == 0 with input as mk_input([r], [])
	count(run("Sidecar", {})) == 1
}

test_hostile_values_do_not_fail if {
	fs := run("ServiceEntry", {"hosts": 5, "ports": "x", "endpoints": [null, 3], "exportTo": {"a": 1}, "addresses": [7]})
	count(fs) == 0
	count(run("AuthorizationPolicy", {"rules": [null, "x", {"from": "y", "to": [3], "when": [null]}]})) >= 0
	count(run("Sidecar", {"egress": [3], "ingress": "x", "inboundConnectionPool": {"http": 3}})) >= 0
}

# ---------------------------------------------------------------------------
# All kinds: annotations

test_dry_run_on_other_kind if {
	at(run_meta("PeerAuthentication", {}, {"annotations": {"istio.io/dry-run": "true"}}), ["metadata", "annotations", "istio.io/dry-run"])
	count(run_meta("AuthorizationPolicy", ap, {"annotations": {"istio.io/dry-run": "true"}})) == 0
}

test_dry_run_with_custom_action if {
	custom := {"action": "CUSTOM", "provider": {"name": "ext-authz"}, "rules": [{}]}
	at(run_meta("AuthorizationPolicy", custom, {"annotations": {"istio.io/dry-run": "true"}}), ["metadata", "annotations", "istio.io/dry-run"])
	count(run_meta("AuthorizationPolicy", object.union(ap, {"action": "DENY"}), {"annotations": {"istio.io/dry-run": "true"}})) == 0
}

test_dry_run_not_boolean if {
	at(run_meta("AuthorizationPolicy", ap, {"annotations": {"istio.io/dry-run": "yes"}}), ["metadata", "annotations", "istio.io/dry-run"])
	count(run_meta("AuthorizationPolicy", ap, {"annotations": {"istio.io/dry-run": "False"}})) == 0
}

test_internal_annotation if {
	at(run_meta("Sidecar", sidecar, {"annotations": {"internal.istio.io/parents": "x"}}), ["metadata", "annotations", "internal.istio.io/parents"])
	count(run_meta("Sidecar", sidecar, {"annotations": {"example.com/parents": "x"}})) == 0
}

# ---------------------------------------------------------------------------
# Selectors and targetRefs

test_empty_selector_with_target_ref if {
	ref := {"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "gw"}
	rejects("AuthorizationPolicy", object.union(ap, {"selector": {}, "targetRef": ref}), ["spec", "targetRef"])
	clean("AuthorizationPolicy", object.union(ap, {"targetRef": ref}))
	# Both non-empty: authz/selector-and-target-ref's.
	clean("AuthorizationPolicy", object.union(ap, {"selector": {"matchLabels": {"app": "a"}}, "targetRef": ref}))
}

test_target_ref_kind if {
	rejects("RequestAuthentication", object.union(ra_rule({}), {"targetRefs": [{"kind": "Deployment", "group": "apps", "name": "web"}]}), ["spec", "targetRefs", 0, "kind"])
	rejects("Telemetry", {"targetRef": {"kind": "Service", "group": "networking.istio.io", "name": "web"}}, ["spec", "targetRef", "kind"])
	clean("Telemetry", {"targetRef": {"kind": "Service", "group": "", "name": "web"}})
	clean("Telemetry", {"targetRef": {"kind": "ServiceEntry", "group": "networking.istio.io", "name": "web"}})
}

test_target_ref_namespace if {
	rejects("AuthorizationPolicy", object.union(ap, {"targetRef": {"kind": "Service", "name": "web", "namespace": "shop"}}), ["spec", "targetRef", "namespace"])
	clean("AuthorizationPolicy", object.union(ap, {"targetRef": {"kind": "Service", "name": "web", "namespace": ""}}))
}

# ---------------------------------------------------------------------------
# ServiceEntry

test_se_host_invalid if {
	rejects("ServiceEntry", se_with({"hosts": ["api.example.com", "api_v2.example.com"]}), ["spec", "hosts", 1])
	rejects("ServiceEntry", se_with({"hosts": ["*.*.example.com"]}), ["spec", "hosts", 0])
	rejects("ServiceEntry", se_with({"hosts": ["api.example.123"]}), ["spec", "hosts", 0])
	clean("ServiceEntry", se_with({"resolution": "NONE", "hosts": ["*.example.com", "*foo.example.com", "api.example.com."]}))
}

test_se_address_invalid if {
	rejects("ServiceEntry", se_with({"addresses": ["240.0.0.300"]}), ["spec", "addresses", 0])
	rejects("ServiceEntry", se_with({"resolution": "STATIC", "addresses": ["10.0.0.0/08"], "endpoints": [{"address": "10.0.0.1"}]}), ["spec", "addresses", 0])
	clean("ServiceEntry", se_with({"resolution": "STATIC", "addresses": ["10.0.0.0/16", "2001:db8::1"], "endpoints": [{"address": "10.0.0.1"}]}))
}

test_se_target_port if {
	rejects("ServiceEntry", se_with({"ports": [{"number": 443, "name": "https", "protocol": "TLS", "targetPort": 70000}]}), ["spec", "ports", 0, "targetPort"])
	clean("ServiceEntry", se_with({"ports": [{"number": 443, "name": "https", "protocol": "TLS", "targetPort": 8443}]}))
}

test_se_duplicate_port_name if {
	ports := [{"number": 443, "name": "tls", "protocol": "TLS"}, {"number": 8443, "name": "tls", "protocol": "TLS"}]
	rejects("ServiceEntry", se_with({"ports": ports}), ["spec", "ports", 1, "name"])
	clean("ServiceEntry", se_with({"ports": [ports[0], {"number": 8443, "name": "tls-alt", "protocol": "TLS"}]}))
}

test_se_port_name_invalid if {
	rejects("ServiceEntry", se_with({"ports": [{"number": 443, "name": "https_api", "protocol": "TLS"}]}), ["spec", "ports", 0, "name"])
	clean("ServiceEntry", se_with({"ports": [{"number": 443, "name": "https-api", "protocol": "TLS"}]}))
}

test_se_protocol_unknown if {
	rejects("ServiceEntry", se_with({"ports": [{"number": 443, "name": "q", "protocol": "QUIC"}]}), ["spec", "ports", 0, "protocol"])
	clean("ServiceEntry", se_with({"ports": [{"number": 443, "name": "g", "protocol": "grpc-web"}]}))
}

test_se_empty_selector_with_endpoints if {
	rejects("ServiceEntry", object.union(static_se([{"address": "10.0.0.1"}]), {"workloadSelector": {}}), ["spec", "workloadSelector"])
	clean("ServiceEntry", static_se([{"address": "10.0.0.1"}]))
}

test_se_dns_wildcard_host_without_endpoints if {
	rejects("ServiceEntry", se_with({"hosts": ["*.example.com"]}), ["spec", "hosts", 0])
	clean("ServiceEntry", se_with({"hosts": ["*.example.com"], "endpoints": [{"address": "proxy.example.com"}]}))
}

test_se_dns_endpoint_network_only if {
	rejects("ServiceEntry", se_with({"endpoints": [{"network": "net2"}]}), ["spec", "endpoints", 0, "address"])
	clean("ServiceEntry", se_with({"endpoints": [{"address": "api.example.com", "network": "net2"}]}))
}

test_se_dns_endpoint_address if {
	rejects("ServiceEntry", se_with({"endpoints": [{"address": "db_1.example.com"}]}), ["spec", "endpoints", 0, "address"])
	clean("ServiceEntry", se_with({"endpoints": [{"address": "db-1.example.com"}, {"address": "10.0.0.2"}]}))
}

test_se_static_unix_path if {
	rejects("ServiceEntry", static_se([{"address": "unix://run/app.sock"}]), ["spec", "endpoints", 0, "address"])
	rejects("ServiceEntry", static_se([{"address": "unix:///run/"}]), ["spec", "endpoints", 0, "address"])
	clean("ServiceEntry", static_se([{"address": "unix:///run/app.sock"}]))
	clean("ServiceEntry", static_se([{"address": "unix://@app"}]))
}

test_se_static_host_name if {
	rejects("ServiceEntry", static_se([{"address": "db.example.com"}]), ["spec", "endpoints", 0, "address"])
	clean("ServiceEntry", static_se([{"address": "2001:db8::5"}]))
}

test_se_static_unix_with_ports if {
	rejects("ServiceEntry", static_se([{"address": "unix:///run/app.sock", "ports": {"https": 8443}}]), ["spec", "endpoints", 0, "ports"])
	clean("ServiceEntry", static_se([{"address": "10.0.0.1", "ports": {"https": 8443}}]))
}

test_se_static_unix_needs_one_port if {
	two := [{"number": 443, "name": "https", "protocol": "TLS"}, {"number": 80, "name": "http", "protocol": "HTTP"}]
	rejects("ServiceEntry", se_with({"resolution": "STATIC", "ports": two, "endpoints": [{"address": "unix:///run/app.sock"}]}), ["spec", "ports"])
	clean("ServiceEntry", se_with({"resolution": "STATIC", "ports": two, "endpoints": [{"address": "10.0.0.1"}]}))
}

test_se_endpoint_ports if {
	rejects("ServiceEntry", static_se([{"address": "10.0.0.1", "ports": {"http": 8080}}]), ["spec", "endpoints", 0, "ports", "http"])
	rejects("ServiceEntry", se_with({"endpoints": [{"address": "a.example.com", "ports": {"https": 0}}]}), ["spec", "endpoints", 0, "ports", "https"])
	rejects("ServiceEntry", static_se([{"address": "10.0.0.1", "ports": {"-x": 80}}]), ["spec", "endpoints", 0, "ports", "-x"])
	clean("ServiceEntry", se_with({"endpoints": [{"address": "a.example.com", "ports": {"https": 8443}}]}))
}

test_se_endpoint_labels if {
	rejects("ServiceEntry", static_se([{"address": "10.0.0.1", "labels": {"version": "v 1"}}]), ["spec", "endpoints", 0, "labels", "version"])
	rejects("ServiceEntry", static_se([{"address": "10.0.0.1", "labels": {"-bad": "v1"}}]), ["spec", "endpoints", 0, "labels", "-bad"])
	clean("ServiceEntry", static_se([{"address": "10.0.0.1", "labels": {"app.kubernetes.io/version": "v1.2_rc", "empty": ""}}]))
}

test_se_multiple_hosts_tcp_port if {
	tcp := {"hosts": ["a.example.com", "b.example.com"], "ports": [{"number": 5432, "name": "pg", "protocol": "TCP"}], "resolution": "DNS"}
	rejects("ServiceEntry", tcp, ["spec", "ports", 0, "protocol"])
	rejects("ServiceEntry", object.union(tcp, {"ports": [{"number": 5432, "name": "pg"}]}), ["spec", "ports", 0])
	clean("ServiceEntry", object.union(tcp, {"ports": [{"number": 443, "name": "https", "protocol": "HTTPS"}]}))
	clean("ServiceEntry", object.union(tcp, {"resolution": "NONE"}))
}

dynamic := {"hosts": ["*.example.com"], "ports": [{"number": 443, "name": "tls", "protocol": "TLS"}], "resolution": "DYNAMIC_DNS"}

test_se_dynamic_dns_host if {
	rejects("ServiceEntry", object.union(dynamic, {"hosts": ["api.example.com"]}), ["spec", "hosts", 0])
	clean("ServiceEntry", dynamic)
}

test_se_dynamic_dns_addresses_and_endpoints if {
	rejects("ServiceEntry", object.union(dynamic, {"addresses": ["240.0.0.1"]}), ["spec", "addresses"])
	rejects("ServiceEntry", object.union(dynamic, {"endpoints": [{"address": "a.example.com"}]}), ["spec", "endpoints"])
	clean("ServiceEntry", object.union(dynamic, {"addresses": []}))
}

test_se_dynamic_dns_protocol if {
	rejects("ServiceEntry", object.union(dynamic, {"ports": [{"number": 443, "name": "https", "protocol": "HTTPS"}]}), ["spec", "ports", 0, "protocol"])
	rejects("ServiceEntry", object.union(dynamic, {"ports": [{"number": 443, "name": "https"}]}), ["spec", "ports", 0])
	clean("ServiceEntry", object.union(dynamic, {"ports": [{"number": 80, "name": "http", "protocol": "http2"}]}))
}

test_se_dynamic_dns_waypoint if {
	internal := object.union(dynamic, {"location": "MESH_INTERNAL"})
	at(run_meta("ServiceEntry", internal, {"labels": {"istio.io/use-waypoint": "egress"}}), ["spec", "location"])
	count(run_meta("ServiceEntry", internal, {"labels": {"istio.io/use-waypoint": "None"}})) == 0
}

test_se_export_to_duplicate if {
	rejects("ServiceEntry", se_with({"exportTo": [".", "default"]}), ["spec", "exportTo", 1])
	rejects("ServiceEntry", se_with({"exportTo": ["shop", "shop"]}), ["spec", "exportTo", 1])
	clean("ServiceEntry", se_with({"exportTo": [".", "shop"]}))
}

test_se_export_to_invalid if {
	rejects("ServiceEntry", se_with({"exportTo": ["shop_ns"]}), ["spec", "exportTo", 0])
	clean("ServiceEntry", se_with({"exportTo": ["shop-ns"]}))
}

test_se_export_to_alone if {
	rejects("ServiceEntry", se_with({"exportTo": ["*", "shop"]}), ["spec", "exportTo"])
	rejects("ServiceEntry", se_with({"exportTo": ["~", "."]}), ["spec", "exportTo"])
	clean("ServiceEntry", se_with({"exportTo": ["~"]}))
}

# ---------------------------------------------------------------------------
# WorkloadEntry

test_we_unix_path if {
	rejects("WorkloadEntry", {"address": "unix:///var/run/"}, ["spec", "address"])
	clean("WorkloadEntry", {"address": "unix://@app"})
}

test_we_address_numeric_tld if {
	rejects("WorkloadEntry", {"address": "vm.10"}, ["spec", "address"])
	clean("WorkloadEntry", {"address": "vm.example"})
}

test_we_address_left_to_invalid_address_rule if {
	we := obj("WorkloadEntry", {"address": "vm.10"}, {})
	entry := {"id": we.id, "address": "vm.10", "address_problem": "\"vm.10\" is not a valid IP address, FQDN or unix socket"}
	count(schema.findings) == 0 with input as mk_input([we], [entry])
}

test_we_unix_with_ports if {
	rejects("WorkloadEntry", {"address": "unix:///run/app.sock", "ports": {"http": 8080}}, ["spec", "ports"])
	clean("WorkloadEntry", {"address": "10.0.0.1", "ports": {"http": 8080}})
}

test_we_ports if {
	rejects("WorkloadEntry", {"address": "10.0.0.1", "ports": {"http": 0}}, ["spec", "ports", "http"])
	rejects("WorkloadEntry", {"address": "10.0.0.1", "ports": {"http_alt": 8080}}, ["spec", "ports", "http_alt"])
	clean("WorkloadEntry", {"address": "10.0.0.1", "ports": {"http-alt": 65535}})
}

test_we_labels if {
	rejects("WorkloadEntry", {"address": "10.0.0.1", "labels": {"app": "web/1"}}, ["spec", "labels", "app"])
	clean("WorkloadEntry", {"address": "10.0.0.1", "labels": {"example.com/app": "web-1"}})
}

# ---------------------------------------------------------------------------
# WorkloadGroup

wg(patch) := object.union({"template": {"serviceAccount": "vm"}}, patch)

test_wg_metadata_labels if {
	rejects("WorkloadGroup", wg({"metadata": {"labels": {"app": "a b"}}}), ["spec", "metadata", "labels", "app"])
	clean("WorkloadGroup", wg({"metadata": {"labels": {"app": "a-b"}}}))
}

test_wg_probe_without_method if {
	rejects("WorkloadGroup", wg({"probe": {"periodSeconds": 5}}), ["spec", "probe"])
	clean("WorkloadGroup", wg({"probe": {"periodSeconds": 5, "httpGet": {"port": 8080}}}))
}

test_wg_probe_grpc if {
	rejects("WorkloadGroup", wg({"probe": {"grpc": {"port": 8080}}}), ["spec", "probe", "grpc"])
	clean("WorkloadGroup", wg({"probe": {"tcpSocket": {"port": 8080}}}))
}

test_wg_probe_negative if {
	rejects("WorkloadGroup", wg({"probe": {"failureThreshold": -1, "exec": {"command": ["true"]}}}), ["spec", "probe", "failureThreshold"])
	clean("WorkloadGroup", wg({"probe": {"failureThreshold": 0, "exec": {"command": ["true"]}}}))
}

test_wg_probe_header_name if {
	rejects("WorkloadGroup", wg({"probe": {"httpGet": {"port": 8080, "httpHeaders": [{"name": "x_probe", "value": "1"}]}}}), ["spec", "probe", "httpGet", "httpHeaders", 0, "name"])
	clean("WorkloadGroup", wg({"probe": {"httpGet": {"port": 8080, "httpHeaders": [{"name": "X-Probe", "value": "1"}]}}}))
}

# ---------------------------------------------------------------------------
# PeerAuthentication

test_pa_port_level_empty if {
	rejects("PeerAuthentication", {"portLevelMtls": {}}, ["spec", "portLevelMtls"])
	clean("PeerAuthentication", {"selector": {"matchLabels": {"app": "db"}}, "portLevelMtls": {"5432": {"mode": "DISABLE"}}})
}

test_pa_port_level_key if {
	sel := {"selector": {"matchLabels": {"app": "db"}}}
	rejects("PeerAuthentication", object.union(sel, {"portLevelMtls": {"0": {"mode": "DISABLE"}}}), ["spec", "portLevelMtls", "0"])
	rejects("PeerAuthentication", object.union(sel, {"portLevelMtls": {"http": {"mode": "DISABLE"}}}), ["spec", "portLevelMtls", "http"])
	rejects("PeerAuthentication", object.union(sel, {"portLevelMtls": {"65536": {"mode": "DISABLE"}}}), ["spec", "portLevelMtls", "65536"])
	clean("PeerAuthentication", object.union(sel, {"portLevelMtls": {"65535": {"mode": "DISABLE"}}}))
}

# ---------------------------------------------------------------------------
# AuthorizationPolicy

test_ap_deny_without_rules if {
	rejects("AuthorizationPolicy", {"action": "DENY"}, ["spec", "rules"])
	rejects("AuthorizationPolicy", {"action": "DENY", "rules": []}, ["spec", "rules"])
	clean("AuthorizationPolicy", {"action": "DENY", "rules": [{}]})
	clean("AuthorizationPolicy", {})
}

test_ap_custom_without_rules if {
	rejects("AuthorizationPolicy", {"action": "CUSTOM", "provider": {"name": "ext"}}, ["spec", "rules"])
	clean("AuthorizationPolicy", {"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{}]})
}

test_ap_custom_without_provider if {
	rejects("AuthorizationPolicy", {"action": "CUSTOM", "rules": [{}]}, ["spec", "provider"])
	rejects("AuthorizationPolicy", {"action": "CUSTOM", "provider": {"name": ""}, "rules": [{}]}, ["spec", "provider", "name"])
}

test_ap_provider_without_custom if {
	rejects("AuthorizationPolicy", object.union(ap, {"provider": {"name": "ext"}}), ["spec", "provider"])
	clean("AuthorizationPolicy", object.union(ap, {"provider": null}))
}

test_ap_from_without_source if {
	rejects("AuthorizationPolicy", ap_rule({"from": [{}]}), ["spec", "rules", 0, "from", 0])
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": null}]}), ["spec", "rules", 0, "from", 0])
}

test_ap_empty_source if {
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"principals": []}}]}), ["spec", "rules", 0, "from", 0, "source"])
	clean("AuthorizationPolicy", ap_rule({"from": [{"source": {"notIpBlocks": ["10.0.0.0/8"]}}]}))
}

test_ap_to_without_operation if {
	rejects("AuthorizationPolicy", ap_rule({"to": [{}]}), ["spec", "rules", 0, "to", 0])
	rejects("AuthorizationPolicy", ap_rule({"to": [{"operation": {}}]}), ["spec", "rules", 0, "to", 0, "operation"])
	clean("AuthorizationPolicy", ap_rule({"to": [{"operation": {"notMethods": ["DELETE"]}}]}))
}

test_ap_service_accounts_cross_polarity if {
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": ["shop/web"], "notNamespaces": ["dev"]}}]}), ["spec", "rules", 0, "from", 0, "source", "serviceAccounts"])
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"notServiceAccounts": ["shop/web"], "principals": ["cluster.local/ns/a/sa/b"]}}]}), ["spec", "rules", 0, "from", 0, "source", "notServiceAccounts"])
	clean("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": ["shop/web"], "notIpBlocks": ["10.0.0.0/8"]}}]}))
	# Same polarity: authz/service-accounts-with-principals'.
	clean("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": ["shop/web"], "namespaces": ["dev"], "notNamespaces": ["x"]}}]}))
}

test_ap_ip_blocks if {
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"remoteIpBlocks": ["10.0.0.0/40"]}}]}), ["spec", "rules", 0, "from", 0, "source", "remoteIpBlocks", 0])
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"ipBlocks": ["office"]}}]}), ["spec", "rules", 0, "from", 0, "source", "ipBlocks", 0])
	clean("AuthorizationPolicy", ap_rule({"from": [{"source": {"ipBlocks": ["10.0.0.1", "10.1.0.0/16", "2001:db8::/32"]}}]}))
}

test_ap_empty_string_item if {
	rejects("AuthorizationPolicy", ap_rule({"to": [{"operation": {"methods": ["GET", ""]}}]}), ["spec", "rules", 0, "to", 0, "operation", "methods", 1])
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"principals": [""]}}]}), ["spec", "rules", 0, "from", 0, "source", "principals", 0])
	clean("AuthorizationPolicy", ap_rule({"to": [{"operation": {"methods": ["GET", "*"]}}]}))
}

test_ap_service_account_format if {
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": ["a/b/c"]}}]}), ["spec", "rules", 0, "from", 0, "source", "serviceAccounts", 0])
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": ["shop/*"]}}]}), ["spec", "rules", 0, "from", 0, "source", "serviceAccounts", 0])
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"notServiceAccounts": ["/web"]}}]}), ["spec", "rules", 0, "from", 0, "source", "notServiceAccounts", 0])
	clean("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": ["shop/web", "web"]}}]}))
}

test_ap_service_accounts_over_16 if {
	sas := [sprintf("shop/sa%d", [i]) | some i in numbers.range(1, 17)]
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": sas}}]}), ["spec", "rules", 0, "from", 0, "source", "serviceAccounts"])
	clean("AuthorizationPolicy", ap_rule({"from": [{"source": {"serviceAccounts": array.slice(sas, 0, 16)}}]}))
}

test_ap_trust_domains if {
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"trustDomains": ["a*b.local"]}}]}), ["spec", "rules", 0, "from", 0, "source", "trustDomains", 0])
	rejects("AuthorizationPolicy", ap_rule({"from": [{"source": {"notTrustDomains": ["td/x"]}}]}), ["spec", "rules", 0, "from", 0, "source", "notTrustDomains", 0])
	clean("AuthorizationPolicy", ap_rule({"from": [{"source": {"trustDomains": ["*.local", "cluster.*", "*"]}}]}))
}

test_ap_ports if {
	rejects("AuthorizationPolicy", ap_rule({"to": [{"operation": {"ports": ["70000"]}}]}), ["spec", "rules", 0, "to", 0, "operation", "ports", 0])
	rejects("AuthorizationPolicy", ap_rule({"to": [{"operation": {"notPorts": ["http"]}}]}), ["spec", "rules", 0, "to", 0, "operation", "notPorts", 0])
	clean("AuthorizationPolicy", ap_rule({"to": [{"operation": {"ports": ["8080", "0", "65535"]}}]}))
}

test_ap_path_templates if {
	rejects("AuthorizationPolicy", ap_rule({"to": [{"operation": {"paths": ["/a/{**}/b/{*}"]}}]}), ["spec", "rules", 0, "to", 0, "operation", "paths", 0])
	rejects("AuthorizationPolicy", ap_rule({"to": [{"operation": {"notPaths": ["/a/{id}"]}}]}), ["spec", "rules", 0, "to", 0, "operation", "notPaths", 0])
	rejects("AuthorizationPolicy", ap_rule({"to": [{"operation": {"paths": ["/a b/{*}"]}}]}), ["spec", "rules", 0, "to", 0, "operation", "paths", 0])
	clean("AuthorizationPolicy", ap_rule({"to": [{"operation": {"paths": ["/a/{*}/b/{**}", "/x y/*"]}}]}))
}

test_ap_when_key_empty if {
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "", "values": ["a"]}]}), ["spec", "rules", 0, "when", 0, "key"])
	clean("AuthorizationPolicy", ap_rule({"when": [{"key": "request.headers[x-env]", "values": ["a"]}]}))
}

test_ap_when_without_values if {
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "source.ip", "values": []}]}), ["spec", "rules", 0, "when", 0])
	clean("AuthorizationPolicy", ap_rule({"when": [{"key": "source.ip", "notValues": ["10.0.0.1"]}]}))
}

test_ap_when_key_unknown if {
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "source.ips", "values": ["a"]}]}), ["spec", "rules", 0, "when", 0, "key"])
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "request.headers[]", "values": ["a"]}]}), ["spec", "rules", 0, "when", 0, "key"])
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "destination.labels[app]", "values": ["a"]}]}), ["spec", "rules", 0, "when", 0, "key"])
	clean("AuthorizationPolicy", ap_rule({"when": [{"key": "request.auth.claims[groups]", "values": ["a"]}, {"key": "connection.sni", "values": ["a"]}]}))
}

test_ap_when_values if {
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "remote.ip", "values": ["10.0.0.256"]}]}), ["spec", "rules", 0, "when", 0, "values", 0])
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "destination.port", "notValues": ["80", "x"]}]}), ["spec", "rules", 0, "when", 0, "notValues", 1])
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "source.trustDomain", "values": ["a*b"]}]}), ["spec", "rules", 0, "when", 0, "values", 0])
	rejects("AuthorizationPolicy", ap_rule({"when": [{"key": "request.auth.principal", "values": [""]}]}), ["spec", "rules", 0, "when", 0, "values", 0])
	clean("AuthorizationPolicy", ap_rule({"when": [{"key": "destination.ip", "values": ["10.0.0.0/8"]}, {"key": "source.serviceAccount", "values": ["shop/web"]}]}))
}

custom(rule) := {"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [rule]}

test_ap_custom_identity_matching if {
	rejects("AuthorizationPolicy", custom({"from": [{"source": {"principals": ["cluster.local/ns/a/sa/b"]}}]}), ["spec", "rules", 0, "from", 0, "source", "principals"])
	rejects("AuthorizationPolicy", custom({"when": [{"key": "request.auth.claims[iss]", "values": ["x"]}]}), ["spec", "rules", 0, "when", 0, "key"])
	clean("AuthorizationPolicy", custom({"from": [{"source": {"ipBlocks": ["10.0.0.0/8"]}}], "when": [{"key": "request.headers[x]", "values": ["1"]}]}))
}

# ---------------------------------------------------------------------------
# RequestAuthentication

test_ra_issuer_or_jwks_uri if {
	rejects("RequestAuthentication", {"jwtRules": [{"audiences": ["a"]}]}, ["spec", "jwtRules", 0, "issuer"])
	clean("RequestAuthentication", {"jwtRules": [{"jwks_uri": "https://issuer.example.com/jwks"}]})
}

test_ra_jwks_uri_scheme if {
	rejects("RequestAuthentication", ra_rule({"jwksUri": "ftp://issuer.example.com/jwks"}), ["spec", "jwtRules", 0, "jwksUri"])
	rejects("RequestAuthentication", ra_rule({"jwks_uri": "issuer.example.com/jwks"}), ["spec", "jwtRules", 0, "jwks_uri"])
	clean("RequestAuthentication", ra_rule({"jwksUri": "HTTPS://issuer.example.com/jwks"}))
}

test_ra_jwks if {
	rejects("RequestAuthentication", ra_rule({"jwks": "{\"keys\": ["}), ["spec", "jwtRules", 0, "jwks"])
	rejects("RequestAuthentication", ra_rule({"jwks": "{\"keys\": [{\"n\": \"x\"}]}"}), ["spec", "jwtRules", 0, "jwks"])
	rejects("RequestAuthentication", ra_rule({"jwks": "[]"}), ["spec", "jwtRules", 0, "jwks"])
	clean("RequestAuthentication", ra_rule({"jwks": "{\"keys\": [{\"kty\": \"RSA\", \"n\": \"x\", \"e\": \"AQAB\"}]}"}))
}

test_ra_empty_strings if {
	rejects("RequestAuthentication", ra_rule({"audiences": ["a", ""]}), ["spec", "jwtRules", 0, "audiences", 1])
	rejects("RequestAuthentication", ra_rule({"fromCookies": [""]}), ["spec", "jwtRules", 0, "fromCookies", 0])
	clean("RequestAuthentication", ra_rule({"audiences": ["a"], "fromParams": ["token"], "fromCookies": ["session"]}))
}

test_ra_from_headers if {
	rejects("RequestAuthentication", ra_rule({"fromHeaders": [{"prefix": "Bearer "}]}), ["spec", "jwtRules", 0, "fromHeaders", 0, "name"])
	clean("RequestAuthentication", ra_rule({"fromHeaders": [{"name": "Authorization", "prefix": "Bearer "}]}))
}

test_ra_output_claim_to_headers if {
	rejects("RequestAuthentication", ra_rule({"outputClaimToHeaders": [{"header": "x-sub", "claim": ""}]}), ["spec", "jwtRules", 0, "outputClaimToHeaders", 0])
	rejects("RequestAuthentication", ra_rule({"outputClaimToHeaders": [{"header": "x sub", "claim": "sub"}]}), ["spec", "jwtRules", 0, "outputClaimToHeaders", 0])
	clean("RequestAuthentication", ra_rule({"outputClaimToHeaders": [{"header": "x_jwt-sub", "claim": "sub"}]}))
}

test_ra_timeout if {
	rejects("RequestAuthentication", ra_rule({"timeout": "500us"}), ["spec", "jwtRules", 0, "timeout"])
	rejects("RequestAuthentication", ra_rule({"timeout": "1.5ms"}), ["spec", "jwtRules", 0, "timeout"])
	rejects("RequestAuthentication", ra_rule({"timeout": "5 s"}), ["spec", "jwtRules", 0, "timeout"])
	clean("RequestAuthentication", ra_rule({"timeout": "1.5s"}))
}

# ---------------------------------------------------------------------------
# Sidecar

test_sidecar_empty if {
	rejects("Sidecar", {"workloadSelector": {"labels": {"app": "web"}}, "egress": []}, ["spec"])
	clean("Sidecar", {"outboundTrafficPolicy": {}})
}

test_sidecar_egress_hosts_empty if {
	rejects("Sidecar", {"egress": [{"hosts": []}]}, ["spec", "egress", 0, "hosts"])
	clean("Sidecar", sidecar)
}

test_sidecar_egress_host_format if {
	rejects("Sidecar", {"egress": [{"hosts": ["api.example.com"]}]}, ["spec", "egress", 0, "hosts", 0])
	rejects("Sidecar", {"egress": [{"hosts": ["./api"]}]}, ["spec", "egress", 0, "hosts", 0])
	rejects("Sidecar", {"egress": [{"hosts": ["shop_ns/*"]}]}, ["spec", "egress", 0, "hosts", 0])
	rejects("Sidecar", {"egress": [{"hosts": ["*/api*.example.com"]}]}, ["spec", "egress", 0, "hosts", 0])
	rejects("Sidecar", {"egress": [{"hosts": ["./"]}]}, ["spec", "egress", 0, "hosts", 0])
	clean("Sidecar", {"egress": [{"hosts": ["./*.example.com", "~shop/*", "*/api.example.com", "~/*"]}]})
}

test_sidecar_catch_all_not_last if {
	ported := {"port": {"number": 9080, "protocol": "HTTP", "name": "http"}, "hosts": ["./*"]}
	rejects("Sidecar", {"egress": [{"hosts": ["./*"]}, ported]}, ["spec", "egress", 0])
	clean("Sidecar", {"egress": [ported, {"hosts": ["./*"]}]})
}

test_sidecar_egress_unix_listener if {
	rejects("Sidecar", {"egress": [{"port": {"number": 0, "name": "uds"}, "hosts": ["./*"]}]}, ["spec", "egress", 0, "bind"])
	rejects("Sidecar", {"egress": [{"port": {"name": "uds"}, "bind": "unix://rel.sock", "hosts": ["./*"]}]}, ["spec", "egress", 0, "bind"])
	rejects("Sidecar", {"egress": [{"port": {"number": 0}, "bind": "unix:///a.sock", "captureMode": "IPTABLES", "hosts": ["./*"]}]}, ["spec", "egress", 0, "captureMode"])
	clean("Sidecar", {"egress": [{"port": {"number": 0}, "bind": "unix:///a.sock", "captureMode": "NONE", "hosts": ["./*"]}]})
}

test_sidecar_egress_port_and_bind if {
	rejects("Sidecar", {"egress": [{"port": {"number": 70000}, "hosts": ["./*"]}]}, ["spec", "egress", 0, "port", "number"])
	rejects("Sidecar", {"egress": [{"port": {"number": 80}, "bind": "localhost", "hosts": ["./*"]}]}, ["spec", "egress", 0, "bind"])
	clean("Sidecar", {"egress": [{"port": {"number": 80}, "bind": "127.0.0.2", "hosts": ["./*"]}]})
}

l(port, bind) := {"port": {"number": port}, "bind": bind, "hosts": ["./*"]}

test_sidecar_egress_duplicates if {
	rejects("Sidecar", {"egress": [l(80, "127.0.0.2"), l(80, "127.0.0.3")]}, ["spec", "egress", 1, "port", "number"])
	rejects("Sidecar", {"egress": [l(0, "unix:///a.sock"), l(0, "unix:///a.sock")]}, ["spec", "egress", 1, "bind"])
	clean("Sidecar", {"egress": [l(80, "127.0.0.2"), l(81, "127.0.0.2"), l(0, "unix:///a.sock"), l(0, "unix:///b.sock")]})
}

test_sidecar_port_fields if {
	rejects("Sidecar", {"egress": [{"port": {"number": 80, "name": "web_1"}, "hosts": ["./*"]}]}, ["spec", "egress", 0, "port", "name"])
	rejects("Sidecar", ingress({"port": {"number": 8443, "protocol": "HTTP3"}}), ["spec", "ingress", 0, "port", "protocol"])
	rejects("Sidecar", ingress({"port": {"number": 8443, "protocol": "HTTPS", "targetPort": 9443}}), ["spec", "ingress", 0, "port", "targetPort"])
	clean("Sidecar", ingress({"port": {"number": 8443, "protocol": "https", "name": "web-1"}}))
}

test_sidecar_ingress_port if {
	rejects("Sidecar", {"ingress": [{"defaultEndpoint": "127.0.0.1:8080"}]}, ["spec", "ingress", 0, "port"])
	rejects("Sidecar", {"ingress": [{"port": {"protocol": "HTTPS"}}]}, ["spec", "ingress", 0, "port", "number"])
	rejects("Sidecar", {"ingress": [{"port": {"number": 80}}, {"port": {"number": 80}}]}, ["spec", "ingress", 1, "port", "number"])
	clean("Sidecar", {"ingress": [{"port": {"number": 80}}, {"port": {"number": 81}}]})
}

test_sidecar_ingress_bind if {
	rejects("Sidecar", ingress({"bind": "unix:///a.sock"}), ["spec", "ingress", 0, "bind"])
	clean("Sidecar", ingress({"bind": "0.0.0.0"}))
}

test_sidecar_default_endpoint if {
	rejects("Sidecar", ingress({"defaultEndpoint": "localhost:8080"}), ["spec", "ingress", 0, "defaultEndpoint"])
	rejects("Sidecar", ingress({"defaultEndpoint": "127.0.0.1"}), ["spec", "ingress", 0, "defaultEndpoint"])
	rejects("Sidecar", ingress({"defaultEndpoint": ":0"}), ["spec", "ingress", 0, "defaultEndpoint"])
	rejects("Sidecar", ingress({"defaultEndpoint": "unix://app.sock"}), ["spec", "ingress", 0, "defaultEndpoint"])
	clean("Sidecar", ingress({"defaultEndpoint": "[::1]:8080"}))
	clean("Sidecar", ingress({"defaultEndpoint": ":8080"}))
	clean("Sidecar", ingress({"defaultEndpoint": "unix:///var/run/app.sock"}))
}

simple_tls := {"mode": "SIMPLE", "serverCertificate": "/etc/certs/cert.pem", "privateKey": "/etc/certs/key.pem"}

test_sidecar_tls_unsupported_fields if {
	rejects("Sidecar", ingress({"tls": object.union(simple_tls, {"credentialName": "web-cert"})}), ["spec", "ingress", 0, "tls", "credentialName"])
	rejects("Sidecar", ingress({"tls": object.union(simple_tls, {"subjectAltNames": ["a"]})}), ["spec", "ingress", 0, "tls", "subjectAltNames"])
	rejects("Sidecar", ingress({"tls": object.union(simple_tls, {"httpsRedirect": true})}), ["spec", "ingress", 0, "tls", "httpsRedirect"])
	clean("Sidecar", ingress({"tls": simple_tls}))
}

test_sidecar_tls_mode if {
	rejects("Sidecar", ingress({"tls": {"mode": "ISTIO_MUTUAL"}}), ["spec", "ingress", 0, "tls", "mode"])
	clean("Sidecar", ingress({"tls": {"mode": "PASSTHROUGH"}}))
}

test_sidecar_tls_on_plain_port if {
	rejects("Sidecar", ingress({"port": {"number": 8080, "protocol": "HTTP"}, "tls": simple_tls}), ["spec", "ingress", 0, "tls"])
	clean("Sidecar", ingress({"port": {"number": 8080, "protocol": "TLS"}, "tls": simple_tls}))
}

test_sidecar_tls_certificates if {
	rejects("Sidecar", ingress({"tls": {"mode": "SIMPLE", "privateKey": "/k.pem"}}), ["spec", "ingress", 0, "tls", "serverCertificate"])
	rejects("Sidecar", ingress({"tls": object.union(simple_tls, {"mode": "MUTUAL"})}), ["spec", "ingress", 0, "tls", "caCertificates"])
	rejects("Sidecar", ingress({"tls": object.union(simple_tls, {"caCrl": "/crl.pem"})}), ["spec", "ingress", 0, "tls", "caCrl"])
	clean("Sidecar", ingress({"tls": object.union(simple_tls, {"mode": "MUTUAL", "caCertificates": "/ca.pem", "caCrl": "/crl.pem"})}))
}

test_sidecar_pool_empty if {
	rejects("Sidecar", pool({}), ["spec", "inboundConnectionPool"])
	rejects("Sidecar", ingress({"connectionPool": {}}), ["spec", "ingress", 0, "connectionPool"])
	clean("Sidecar", pool({"tcp": {}}))
}

test_sidecar_pool_negative if {
	rejects("Sidecar", pool({"http": {"maxRetries": -1}}), ["spec", "inboundConnectionPool", "http", "maxRetries"])
	clean("Sidecar", pool({"http": {"maxRetries": 0}}))
}

test_sidecar_pool_durations if {
	rejects("Sidecar", pool({"tcp": {"connectTimeout": "100us"}}), ["spec", "inboundConnectionPool", "tcp", "connectTimeout"])
	rejects("Sidecar", pool({"http": {"idleTimeout": "1500us"}}), ["spec", "inboundConnectionPool", "http", "idleTimeout"])
	rejects("Sidecar", pool({"tcp": {"idleTimeout": "1.0005s"}}), ["spec", "inboundConnectionPool", "tcp", "idleTimeout"])
	clean("Sidecar", pool({"tcp": {"connectTimeout": "1ms", "idleTimeout": "0s", "tcpKeepalive": {"time": "7200s"}}}))
}

test_sidecar_pool_keepalive if {
	rejects("Sidecar", pool({"http": {"http2KeepAlive": {"interval": "30s"}}}), ["spec", "inboundConnectionPool", "http", "http2KeepAlive", "timeout"])
	clean("Sidecar", pool({"http": {"http2KeepAlive": {"interval": "30s", "timeout": "10s"}}}))
}

test_sidecar_pool_upgrade_with_client_protocol if {
	rejects("Sidecar", pool({"http": {"h2UpgradePolicy": "UPGRADE", "useClientProtocol": true}}), ["spec", "inboundConnectionPool", "http", "useClientProtocol"])
	clean("Sidecar", pool({"http": {"h2UpgradePolicy": "DO_NOT_UPGRADE", "useClientProtocol": true}}))
}

# object.union merges nested objects: egressProxy is given whole.
proxy(mode, egress_proxy) := {"outboundTrafficPolicy": {"mode": mode, "egressProxy": egress_proxy}}

good_proxy := {"host": "proxy.example.com", "port": {"number": 3128}}

test_sidecar_egress_proxy if {
	rejects("Sidecar", proxy("REGISTRY_ONLY", good_proxy), ["spec", "outboundTrafficPolicy", "mode"])
	rejects("Sidecar", {"outboundTrafficPolicy": {"egressProxy": good_proxy}}, ["spec", "outboundTrafficPolicy", "mode"])
	rejects("Sidecar", proxy("ALLOW_ANY", {"host": "*.example.com", "port": {"number": 3128}}), ["spec", "outboundTrafficPolicy", "egressProxy", "host"])
	rejects("Sidecar", proxy("ALLOW_ANY", {"host": "proxy.example.com"}), ["spec", "outboundTrafficPolicy", "egressProxy", "port"])
	rejects("Sidecar", proxy("ALLOW_ANY", {"host": "proxy.example.com", "port": {}}), ["spec", "outboundTrafficPolicy", "egressProxy", "port", "number"])
	rejects("Sidecar", proxy("ALLOW_ANY", {"host": "proxy.example.com", "subset": "v_1", "port": {"number": 3128}}), ["spec", "outboundTrafficPolicy", "egressProxy", "subset"])
	clean("Sidecar", proxy("ALLOW_ANY", {"host": "proxy", "subset": "v1", "port": {"number": 3128}}))
}

# ---------------------------------------------------------------------------
# Telemetry

test_telemetry_provider_name if {
	rejects("Telemetry", {"accessLogging": [{"providers": [{"name": ""}]}]}, ["spec", "accessLogging", 0, "providers", 0, "name"])
	rejects("Telemetry", {"tracing": [{"providers": [{}]}]}, ["spec", "tracing", 0, "providers", 0, "name"])
	clean("Telemetry", {"metrics": [{"providers": [{"name": "prometheus"}]}]})
}

m(to) := {"metrics": [{"overrides": [{"tagOverrides": {"request_host": to}}]}]}

test_telemetry_tag_overrides if {
	path := ["spec", "metrics", 0, "overrides", 0, "tagOverrides", "request_host", "value"]
	rejects("Telemetry", m({}), path)
	rejects("Telemetry", m({"operation": "REMOVE", "value": "x"}), path)
	clean("Telemetry", m({"operation": "REMOVE"}))
	clean("Telemetry", m({"value": "request.host"}))
}

test_telemetry_custom_metric if {
	rejects("Telemetry", {"metrics": [{"overrides": [{"match": {"customMetric": ""}, "disabled": true}]}]}, ["spec", "metrics", 0, "overrides", 0, "match", "customMetric"])
	clean("Telemetry", {"metrics": [{"overrides": [{"match": {"customMetric": "my_metric"}, "disabled": true}]}]})
}

test_telemetry_sampling if {
	rejects("Telemetry", {"tracing": [{"randomSamplingPercentage": 150}]}, ["spec", "tracing", 0, "randomSamplingPercentage"])
	rejects("Telemetry", {"tracing": [{"randomSamplingPercentage": -0.5}]}, ["spec", "tracing", 0, "randomSamplingPercentage"])
	clean("Telemetry", {"tracing": [{"randomSamplingPercentage": 100}]})
}

test_telemetry_custom_tags if {
	rejects("Telemetry", {"tracing": [{"customTags": {"team": {"literal": {"value": ""}}}}]}, ["spec", "tracing", 0, "customTags", "team", "literal", "value"])
	rejects("Telemetry", {"tracing": [{"customTags": {"": {"literal": {"value": "a"}}}}]}, ["spec", "tracing", 0, "customTags", ""])
	rejects("Telemetry", {"tracing": [{"customTags": {"env": {"environment": {}}}}]}, ["spec", "tracing", 0, "customTags", "env", "environment", "name"])
	clean("Telemetry", {"tracing": [{"customTags": {"team": {"literal": {"value": "a"}}, "ua": {"header": {"name": "user-agent"}}}}]})
}

test_telemetry_filter_expression if {
	path := ["spec", "accessLogging", 0, "filter", "expression"]
	rejects("Telemetry", {"accessLogging": [{"filter": {"expression": " "}}]}, path)
	rejects("Telemetry", {"accessLogging": [{"filter": {"expression": "(response.code >= 400"}}]}, path)
	rejects("Telemetry", {"accessLogging": [{"filter": {}}]}, path)
	clean("Telemetry", {"accessLogging": [{"filter": {"expression": "request.headers['x-a'] == ')' && (response.code >= 400)"}}]})
}

# ---------------------------------------------------------------------------
# Value syntax helpers (Istio's Go checks, edge cases)

test_fqdn_syntax if {
	schema.is_fqdn("api.example.com")
	schema.is_fqdn("api.example.com.")
	schema.is_fqdn("example.123.")
	schema.is_fqdn("API-1.Example")
	not schema.is_fqdn("123")
	not schema.is_fqdn("a.123")
	not schema.is_fqdn("a..b")
	not schema.is_fqdn("-a.b")
	not schema.is_fqdn("*.example.com")
	not schema.is_fqdn(concat("", [concat("", [x | some _ in numbers.range(1, 64); x := "a"]), ".com"]))
	not schema.is_fqdn("")
}

test_wildcard_domain_syntax if {
	schema.is_wildcard_domain("*")
	schema.is_wildcard_domain("*.example.com")
	schema.is_wildcard_domain("*foo.example.com")
	schema.is_wildcard_domain("*-foo.example.com")
	schema.is_wildcard_domain("123")
	schema.is_wildcard_domain("foo.")
	not schema.is_wildcard_domain("foo*.example.com")
	not schema.is_wildcard_domain("*.*.example.com")
	not schema.is_wildcard_domain("foo.123")
	not schema.is_wildcard_domain("foo..com")
	not schema.is_wildcard_domain("**.com")
}

test_ip_and_cidr_syntax if {
	schema.is_ip_or_cidr("10.0.0.1")
	schema.is_ip_or_cidr("10.0.0.0/8")
	schema.is_ip_or_cidr("2001:db8::/32")
	schema.is_ip_or_cidr("fe80::1%eth0")
	not schema.is_ip_or_cidr("10.0.0.1%eth0")
	not schema.is_ip_or_cidr("10.0.0.0/08")
	not schema.is_ip_or_cidr("10.0.0.0/+8")
	not schema.is_ip_or_cidr("10.0.0.0/33")
	not schema.is_ip_or_cidr("10.0.0.1/8/8")
	not schema.is_ip_or_cidr("010.0.0.1")
}

test_label_syntax if {
	schema.label_key_ok("app")
	schema.label_key_ok("app.kubernetes.io/name")
	schema.label_key_ok("a_b.c")
	not schema.label_key_ok("_app")
	not schema.label_key_ok("a/b/c")
	not schema.label_key_ok("-x.io/app")
	not schema.label_key_ok("")
	not schema.label_problem("app", "")
	schema.label_problem("app", "v.")
}

test_duration_syntax if {
	not schema.duration_problem("1ms")
	not schema.duration_problem("1h2m3.5s")
	schema.duration_problem("999us") == "is shorter than 1ms"
	schema.duration_problem("-1s") == "is shorter than 1ms"
	schema.duration_problem("1.0001s") == "is not a whole number of milliseconds"
	schema.duration_problem("10") == "is not a duration (such as 500ms, 10s or 1m)"
	# Too long to parse safely: not judged.
	not schema.duration_problem("99999999999999h")
}
