# What Istio's validating webhook refuses in a Sidecar (ValidateSidecar): part of
# package meshward.rules.schema (schema.rego holds the objects, the helpers and why).
#
# Reads only objs.Sidecar, with the helpers of this file, schema.rego and lib.rego: a
# check whose revisions hold no Sidecar does not compile it. Keep it so.
# meshward: per-object
# meshward: only-for-kinds Sidecar
package meshward.rules.schema

import rego.v1

sidecars := [s |
	some o in objs.Sidecar
	s := {
		"o": o,
		"egress": arr(object.get(o.spec, "egress", null)),
		"ingress": arr(object.get(o.spec, "ingress", null)),
	}
]

issues contains [s.o.id, ["spec"], say(s.o, text, fix)] if {
	some s in sidecars
	count(s.egress) == 0
	count(s.ingress) == 0
	object.get(s.o.spec, "outboundTrafficPolicy", null) == null
	object.get(s.o.spec, "inboundConnectionPool", null) == null
	text := "spec has none of egress, ingress, outboundTrafficPolicy and inboundConnectionPool: an empty Sidecar"
	fix := "Add egress hosts (e.g. ./* and istio-system/*), or remove the Sidecar."
}

# egress listeners
egress := [[s, i, eg, at(eg, "port", null)] |
	some s in sidecars
	some i, eg in s.egress
	is_object(eg)
]

issues contains [s.o.id, ["spec", "egress", i, "hosts"], say(s.o, text, fix)] if {
	some [s, i, eg, _] in egress
	object.get(eg, "hosts", null) == []
	text := sprintf("spec.egress[%d].hosts is empty", [i])
	fix := "List the hosts this listener reaches as namespace/host, e.g. ./* or istio-system/*."
}

issues contains [s.o.id, ["spec", "egress", i, "hosts", j], say(s.o, text, fix)] if {
	some [s, i, eg, _] in egress
	some j, h in arr(object.get(eg, "hosts", null))
	is_string(h)
	not egress_host_ok(h)
	problem := egress_host_problem(h)
	text := sprintf("spec.egress[%d].hosts[%d] %s %s", [i, j, q(h), problem])
	fix := "Write hosts as <namespace>/<host>: namespace *, . or a name (~ to exclude), host * or a full DNS name with an optional leading *. (e.g. ./*, istio-system/*, */api.example.com)."
}

# ValidateNamespaceSlashWildcardHostname, the usual case first: the problem is only
# looked for in a host that fails it.
egress_host_ok(h) if {
	i := indexof(h, "/")
	i > 0
	egress_namespace_ok(substring(h, 0, i))
	egress_dns_name_ok(substring(h, i + 1, -1))
}

egress_namespace_ok(ns) := true if {
	ns in {"*", ".", "~", "~*", "~."}
} else := true if {
	is_label(trim_prefix(ns, "~"))
}

egress_dns_name_ok(host) := true if {
	host == "*"
} else := true if {
	contains(host, ".")
	is_wildcard_domain(host)
	partial_wildcard_ok(host)
}

partial_wildcard_ok(host) := true if not contains(host, "*") else := true if startswith(host, "*.")

egress_host_problem(h) := "is not of the form namespace/host" if not contains(h, "/")
else := "has an empty namespace or host" if {
	parts := split(h, "/")
	some part in [parts[0], substring(h, count(parts[0]) + 1, -1)]
	part == ""
} else := "has an invalid namespace" if {
	ns := trim_prefix(split(h, "/")[0], "~")
	ns != ""
	not ns in {"*", "."}
	not is_label(ns)
} else := "names a short host name (Istio needs a full DNS name, with a dot)" if {
	host := substring(h, count(split(h, "/")[0]) + 1, -1)
	host != "*"
	not contains(host, ".")
} else := "names a host that is not a valid DNS name" if {
	host := substring(h, count(split(h, "/")[0]) + 1, -1)
	not is_wildcard_domain(host)
} else := "names a partial wildcard (only a whole leading *. label is allowed)" if {
	host := substring(h, count(split(h, "/")[0]) + 1, -1)
	contains(host, "*")
	host != "*"
	not startswith(host, "*.")
}

issues contains [s.o.id, ["spec", "egress", i], say(s.o, text, fix)] if {
	some [s, i, _, port] in egress
	port == null
	i != count(s.egress) - 1
	text := sprintf("spec.egress[%d] has no port, but only the last egress listener may be the catch-all without a port", [i])
	fix := "Give this listener a port, or move it to the end (only one listener may lack a port)."
}

egress_ports := [[s, i, eg, port, object.get(port, "number", 0)] |
	some [s, i, eg, port] in egress
	is_object(port)
]

sidecar_port_name_problem(port) := sprintf("name %s is not a DNS-1123 label", [q(n)]) if {
	n := object.get(port, "name", "")
	is_string(n)
	n != ""
	not is_label(n)
}

issues contains [s.o.id, array.concat(base, ["port", "name"]), say(s.o, text, fix)] if {
	some [s, base, port] in sidecar_ports
	problem := sidecar_port_name_problem(port)
	text := sprintf("%s.port.%s", [ft(base), problem])
	fix := "Name the port like http or tcp-db, or leave the name out."
}

issues contains [s.o.id, array.concat(base, ["port", "protocol"]), say(s.o, text, fix)] if {
	some [s, base, port] in sidecar_ports
	pr := object.get(port, "protocol", "")
	bad_protocol(pr)
	text := sprintf("%s.port.protocol %s is not a protocol Istio knows", [ft(base), q(pr)])
	fix := sprintf("Use one of %s (any case), or leave it unset.", [protocols_text])
}

issues contains [s.o.id, array.concat(base, ["port", "targetPort"]), say(s.o, text, fix)] if {
	some [s, base, port] in sidecar_ports
	t := object.get(port, "targetPort", 0)
	is_number(t)
	t > 0
	text := sprintf("%s.port.targetPort is set (%v): targetPort has no meaning in a Sidecar", [ft(base), t])
	fix := "Remove targetPort."
}

# Ports of egress and ingress listeners: [sidecar, path of the listener, port].
sidecar_ports := array.concat(
	[[s, ["spec", "egress", i], port] | some [s, i, _, port, _] in egress_ports],
	[[s, ["spec", "ingress", i], port] | some [s, i, _, port] in ingress_ports],
)

# Egress port 0: a unix domain socket listener.
issues contains [s.o.id, ["spec", "egress", i, "bind"], say(s.o, text, fix)] if {
	some [s, i, eg, _, n] in egress_ports
	n == 0
	bind := object.get(eg, "bind", "")
	is_string(bind)
	problem := uds_bind_problem(bind)
	text := sprintf("spec.egress[%d] has port number 0, a unix domain socket listener, but %s", [i, problem])
	fix := "Bind it to unix:///absolute/path.sock or unix://@name, or give the port a number in 1..65535."
}

uds_bind_problem(bind) := "no bind" if bind == ""
else := sprintf("its bind %s is not a unix:// address", [q(bind)]) if not startswith(bind, "unix://")
else := sprintf("its bind %s is not valid: %s", [q(bind), unix_problem(substring(bind, 7, -1))])

issues contains [s.o.id, ["spec", "egress", i, "captureMode"], say(s.o, text, fix)] if {
	some [s, i, eg, _, n] in egress_ports
	n == 0
	object.get(eg, "captureMode", "DEFAULT") == "IPTABLES"
	text := sprintf("spec.egress[%d] is a unix domain socket listener (port 0) with captureMode IPTABLES", [i])
	fix := "Use captureMode DEFAULT or NONE for a unix socket listener."
}

issues contains [s.o.id, ["spec", "egress", i, "port", "number"], say(s.o, text, fix)] if {
	some [s, i, _, _, n] in egress_ports
	is_number(n)
	n != 0
	not is_port(n)
	text := sprintf("spec.egress[%d].port.number is %v, outside 1..65535", [i, n])
	fix := "Use a port number in 1..65535 (0 only for a unix socket listener)."
}

issues contains [s.o.id, ["spec", "egress", i, "bind"], say(s.o, text, fix)] if {
	some [s, i, eg, _, n] in egress_ports
	n != 0
	bind := object.get(eg, "bind", "")
	is_string(bind)
	bind != ""
	not is_ip(bind)
	text := sprintf("spec.egress[%d].bind %s is not an IP address", [i, q(bind)])
	fix := "Bind to an IP address such as 127.0.0.1, or leave bind unset."
}

# Per Sidecar, its listeners with a port: egress [index, number, bind], ingress [index, number].
listener_ports := [[s, eps, ips] |
	some s in sidecars
	eps := [[i, object.get(port, "number", 0), at(eg, "bind", "")] |
		some i, eg in s.egress
		port := at(eg, "port", null)
		is_object(port)
	]
	ips := [[i, object.get(port, "number", 0)] |
		some i, ing in s.ingress
		port := at(ing, "port", null)
		is_object(port)
	]
]

issues contains [s.o.id, ["spec", "egress", j, "port", "number"], say(s.o, text, fix)] if {
	some [s, eps, _] in listener_ports
	some [j, n, _] in eps
	n != 0
	some [i, m, _] in eps
	i < j
	m == n
	text := sprintf("spec.egress[%d] listens on port %v like spec.egress[%d]: ports must be unique", [j, n, i])
	fix := "Merge the two listeners, or use another port."
}

issues contains [s.o.id, ["spec", "egress", j, "bind"], say(s.o, text, fix)] if {
	some [s, eps, _] in listener_ports
	some [j, n, bind] in eps
	n == 0
	some [i, m, bind2] in eps
	i < j
	m == 0
	bind2 == bind
	text := sprintf("spec.egress[%d] binds the unix socket %s like spec.egress[%d]: unix socket listeners must be unique", [j, q(bind), i])
	fix := "Use another socket path."
}

# ingress listeners
ingress := [[s, i, ing, at(ing, "port", null)] |
	some s in sidecars
	some i, ing in s.ingress
	is_object(ing)
]

ingress_ports := [[s, i, ing, port] |
	some [s, i, ing, port] in ingress
	is_object(port)
]

issues contains [s.o.id, ["spec", "ingress", i, "port"], say(s.o, text, fix)] if {
	some [s, i, _, port] in ingress
	port == null
	text := sprintf("spec.ingress[%d] has no port", [i])
	fix := "Set the port (number, protocol, name) the listener accepts traffic on."
}

issues contains [s.o.id, ["spec", "ingress", i, "port", "number"], say(s.o, text, fix)] if {
	some [s, i, _, port] in ingress_ports
	n := object.get(port, "number", 0)
	is_number(n)
	not is_port(n)
	text := sprintf("spec.ingress[%d].port.number is %v, outside 1..65535", [i, n])
	fix := "Use the port number the workload listens on (1..65535)."
}

issues contains [s.o.id, ["spec", "ingress", j, "port", "number"], say(s.o, text, fix)] if {
	some [s, _, ips] in listener_ports
	some [j, n] in ips
	some [i, m] in ips
	i < j
	m == n
	text := sprintf("spec.ingress[%d] listens on port %v like spec.ingress[%d]: ports must be unique", [j, n, i])
	fix := "Merge the two listeners, or use another port."
}

issues contains [s.o.id, ["spec", "ingress", i, "bind"], say(s.o, text, fix)] if {
	some [s, i, ing, _] in ingress_ports
	bind := object.get(ing, "bind", "")
	is_string(bind)
	bind != ""
	not is_ip(bind)
	text := sprintf("spec.ingress[%d].bind %s is not an IP address", [i, q(bind)])
	fix := "Bind to an IP address such as 0.0.0.0, or leave bind unset."
}

issues contains [s.o.id, ["spec", "ingress", i, "defaultEndpoint"], say(s.o, text, fix)] if {
	some [s, i, ing, _] in ingress_ports
	d := object.get(ing, "defaultEndpoint", "")
	is_string(d)
	d != ""
	problem := default_endpoint_problem(d)
	text := sprintf("spec.ingress[%d].defaultEndpoint %s %s", [i, q(d), problem])
	fix := "Use 127.0.0.1:<port>, 0.0.0.0:<port>, [::1]:<port>, [::]:<port>, :<port>, or unix:///path.sock."
}

default_endpoint_re := `^(?:127\.0\.0\.1|0\.0\.0\.0|\[(?:127\.0\.0\.1|0\.0\.0\.0|::1|::)?\])?:[-+]?[0-9]+$`

default_endpoint_problem(d) := problem if {
	startswith(d, "unix://")
	problem := unix_problem(substring(d, 7, -1))
} else := "is not a loopback or wildcard host and port, or a unix:// socket" if {
	not startswith(d, "unix://")
	not regex.match(default_endpoint_re, d)
} else := "has a port outside 1..65535" if {
	not startswith(d, "unix://")
	port := regex.find_n(`[0-9]+$`, d, 1)[0]
	not default_endpoint_port_ok(d, port)
}

default_endpoint_port_ok(d, port) if {
	not contains(d, ":-")
	count(trim_left(port, "0")) <= 5
	digits_value(port) >= 1
	digits_value(port) <= 65535
}

sidecar_tls := [[s, i, ing, tls, at(ing, "port", null)] |
	some [s, i, ing, _] in ingress
	tls := object.get(ing, "tls", null)
	is_object(tls)
]

tls_unsupported := ["credentialName", "credentialNames", "tlsCertificates", "subjectAltNames"]

issues contains [s.o.id, ["spec", "ingress", i, "tls", f], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	some f in tls_unsupported
	not object.get(tls, f, null) in data.meshward.lib.empty_values
	text := sprintf("spec.ingress[%d].tls.%s is set, which a Sidecar does not support", [i, f])
	fix := "Give the certificate as files: serverCertificate and privateKey (caCertificates for MUTUAL), mounted into the proxy."
}

issues contains [s.o.id, ["spec", "ingress", i, "tls", "httpsRedirect"], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	object.get(tls, "httpsRedirect", false) == true
	text := sprintf("spec.ingress[%d].tls.httpsRedirect is set, which a Sidecar does not support", [i])
	fix := "Remove httpsRedirect."
}

issues contains [s.o.id, ["spec", "ingress", i, "tls", "mode"], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	mode := object.get(tls, "mode", "")
	mode in {"ISTIO_MUTUAL", "AUTO_PASSTHROUGH"}
	text := sprintf("spec.ingress[%d].tls.mode is %s, which a Sidecar ingress listener does not support", [i, mode])
	fix := "Use SIMPLE, MUTUAL or OPTIONAL_MUTUAL with certificate files (mesh mTLS needs no tls block at all)."
}

issues contains [s.o.id, ["spec", "ingress", i, "tls"], say(s.o, text, fix)] if {
	some [s, i, _, _, port] in sidecar_tls
	pr := at(port, "protocol", "")
	is_string(pr)
	not lower(pr) in {"https", "tls"}
	text := sprintf("spec.ingress[%d] has tls settings but its port's protocol is %s, not HTTPS or TLS", [i, q(pr)])
	fix := "Set the port's protocol to HTTPS or TLS, or remove tls."
}

# validateTLSOptions: SIMPLE and MUTUAL need certificate files (credentialName is said above).
issues contains [s.o.id, ["spec", "ingress", i, "tls", f], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	mode := object.get(tls, "mode", "")
	mode in {"SIMPLE", "MUTUAL", "OPTIONAL_MUTUAL"}
	every g in ["credentialName", "credentialNames", "tlsCertificates"] {
		object.get(tls, g, null) in data.meshward.lib.empty_values
	}
	some f in tls_required(mode)
	object.get(tls, f, null) in {null, ""}
	text := sprintf("spec.ingress[%d].tls has mode %s but no %s", [i, mode, f])
	fix := "Set serverCertificate and privateKey (and caCertificates for MUTUAL) to the files mounted into the proxy."
}

tls_required("SIMPLE") := ["serverCertificate", "privateKey"]

tls_required(mode) := ["serverCertificate", "privateKey", "caCertificates"] if mode in {"MUTUAL", "OPTIONAL_MUTUAL"}

issues contains [s.o.id, ["spec", "ingress", i, "tls", "caCrl"], say(s.o, text, fix)] if {
	some [s, i, _, tls, _] in sidecar_tls
	object.get(tls, "mode", "") == "SIMPLE"
	every g in ["credentialName", "credentialNames"] {
		object.get(tls, g, null) in data.meshward.lib.empty_values
	}
	not object.get(tls, "caCrl", null) in {null, ""}
	text := sprintf("spec.ingress[%d].tls.caCrl is set with mode SIMPLE, which checks no client certificates", [i])
	fix := "Remove caCrl, or use mode MUTUAL."
}

# Connection pools: inboundConnectionPool and ingress[].connectionPool.
pools := array.concat(
	[[s, ["spec", "inboundConnectionPool"], pool] |
		some s in sidecars
		pool := object.get(s.o.spec, "inboundConnectionPool", null)
		is_object(pool)
	],
	[[s, ["spec", "ingress", i, "connectionPool"], pool] |
		some [s, i, ing, _] in ingress
		pool := object.get(ing, "connectionPool", null)
		is_object(pool)
	],
)

issues contains [s.o.id, p, say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	object.get(pool, "http", null) == null
	object.get(pool, "tcp", null) == null
	text := sprintf("%s has neither http nor tcp settings", [ft(p)])
	fix := "Add http or tcp settings, or remove it."
}

pool_counts := [["http", "http1MaxPendingRequests"], ["http", "http2MaxRequests"], ["http", "maxRequestsPerConnection"], ["http", "maxRetries"], ["http", "maxConcurrentStreams"], ["tcp", "maxConnections"]]

issues contains [s.o.id, path, say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	some f in pool_counts
	n := object.get(pool, f, 0)
	is_number(n)
	n < 0
	path := array.concat(p, f)
	text := sprintf("%s is %v, negative", [ft(path), n])
	fix := "Use 0 or more."
}

pool_durations := [
	["http", "idleTimeout"], ["http", "http2KeepAlive", "interval"], ["http", "http2KeepAlive", "timeout"],
	["tcp", "connectTimeout"], ["tcp", "maxConnectionDuration"], ["tcp", "tcpKeepalive", "time"], ["tcp", "tcpKeepalive", "interval"],
]

issues contains [s.o.id, path, say(s.o, text, duration_fix)] if {
	some [s, p, pool] in pools
	some f in pool_durations
	d := object.get(pool, f, null)
	problem := duration_problem(d)
	path := array.concat(p, f)
	text := sprintf("%s %s %s", [ft(path), q(d), problem])
}

# tcp.idleTimeout below 1ms (0s included) turns the timeout off.
issues contains [s.o.id, path, say(s.o, text, duration_fix)] if {
	some [s, p, pool] in pools
	d := object.get(pool, ["tcp", "idleTimeout"], null)
	problem := duration_problem(d)
	not idle_off(d)
	path := array.concat(p, ["tcp", "idleTimeout"])
	text := sprintf("%s %s %s", [ft(path), q(d), problem])
}

idle_off(d) if {
	duration_parsable(d)
	abs(time.parse_duration_ns(d)) < 1000000
}

issues contains [s.o.id, array.concat(p, ["http", "http2KeepAlive", f]), say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	ka := object.get(pool, ["http", "http2KeepAlive"], null)
	is_object(ka)
	some f in ["interval", "timeout"]
	object.get(ka, f, null) == null
	text := sprintf("%s.http.http2KeepAlive has no %s: it needs both interval and timeout", [ft(p), f])
	fix := "Set both interval and timeout, e.g. 30s and 10s."
}

issues contains [s.o.id, array.concat(p, ["http", "useClientProtocol"]), say(s.o, text, fix)] if {
	some [s, p, pool] in pools
	object.get(pool, ["http", "h2UpgradePolicy"], null) == "UPGRADE"
	object.get(pool, ["http", "useClientProtocol"], null) == true
	text := sprintf("%s.http sets useClientProtocol with h2UpgradePolicy UPGRADE, which contradict each other", [ft(p)])
	fix := "Remove one of them."
}

# outboundTrafficPolicy.egressProxy
egress_proxies := [[s, otp, ep] |
	some s in sidecars
	otp := object.get(s.o.spec, "outboundTrafficPolicy", null)
	is_object(otp)
	ep := object.get(otp, "egressProxy", null)
	is_object(ep)
]

issues contains [s.o.id, ["spec", "outboundTrafficPolicy", "mode"], say(s.o, text, fix)] if {
	some [s, otp, _] in egress_proxies
	mode := object.get(otp, "mode", null)
	mode in {null, "", "REGISTRY_ONLY"}
	text := sprintf("spec.outboundTrafficPolicy sets egressProxy with mode %s: an egress proxy is only used with mode ALLOW_ANY", [object.get({null: "REGISTRY_ONLY (the default)", "": "REGISTRY_ONLY (the default)"}, mode, mode)])
	fix := "Set mode: ALLOW_ANY, or remove egressProxy."
}

proxy_ok(otp) if object.get(otp, "mode", null) == "ALLOW_ANY"

proxy_path := ["spec", "outboundTrafficPolicy", "egressProxy"]

issues contains [s.o.id, array.concat(proxy_path, ["host"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	h := object.get(ep, "host", null)
	is_string(h)
	not is_fqdn(h)
	text := sprintf("spec.outboundTrafficPolicy.egressProxy.host %s is not a fully qualified host name", [q(h)])
	fix := "Name the proxy's service by its full name, e.g. egress-proxy.proxy.svc.cluster.local."
}

issues contains [s.o.id, array.concat(proxy_path, ["port"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	object.get(ep, "port", null) == null
	text := "spec.outboundTrafficPolicy.egressProxy has no port"
	fix := "Set egressProxy.port.number to the proxy's port."
}

issues contains [s.o.id, array.concat(proxy_path, ["port", "number"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	port := object.get(ep, "port", null)
	is_object(port)
	n := object.get(port, "number", 0)
	is_number(n)
	not is_port(n)
	text := sprintf("spec.outboundTrafficPolicy.egressProxy.port.number is %v, outside 1..65535", [n])
	fix := "Set the proxy's port number."
}

issues contains [s.o.id, array.concat(proxy_path, ["subset"]), say(s.o, text, fix)] if {
	some [s, otp, ep] in egress_proxies
	proxy_ok(otp)
	sub := object.get(ep, "subset", "")
	is_string(sub)
	sub != ""
	not is_label(sub)
	text := sprintf("spec.outboundTrafficPolicy.egressProxy.subset %s is not a DNS-1123 label", [q(sub)])
	fix := "Name a subset of the proxy's DestinationRule, or remove subset."
}
