# mTLS rollout: STRICT only after injection, PERMISSIVE, and proof of zero plaintext.
package meshward.rules.mtls

import rego.v1

# ---------------------------------------------------------------------------
# mtls/strict-skips-permissive (error; needs a base revision)
# STRICT whose scope, in the base revision, was DISABLE or had no sidecars.

findings contains f if {
	data.meshward.lib.has_base
	some pa in data.meshward.lib.model_peer_authentications
	pa.strict == true
	mode := data.meshward.lib.base_scope_mode(pa)
	mode != "STRICT"
	reasons := skip_reasons(pa, mode)
	count(reasons) > 0
	f := {
		"rule": "mtls/strict-skips-permissive",
		"severity": "error",
		"resource": pa.resource,
		"path": data.meshward.lib.strict_path(pa),
		"message": sprintf(
			"%s turns on STRICT mTLS for %s, but in the base revision %s: this skips the PERMISSIVE stage, so every client without a sidecar will get no response (curl 000). First merge injection and PERMISSIVE, confirm zero plaintext traffic (meshward check --evidence), then switch to STRICT in a later change.",
			[data.meshward.lib.display(pa.resource), data.meshward.lib.scope_text(pa), concat(" and ", sort(reasons))],
		),
	}
}

skip_reasons(pa, mode) := {r |
	some r in array.concat(disabled_reason(mode), not_injected_reason(pa))
}

disabled_reason(mode) := ["its mTLS mode was DISABLE"] if mode == "DISABLE" else := []

not_injected_reason(pa) := [sprintf("namespace %s did not exist yet (so had no sidecars)", [pa.namespace])] if {
	pa.scope != "mesh"
	not data.meshward.lib.base_namespaces[pa.namespace]
} else := [sprintf("namespace %s was not injected", [pa.namespace])] if {
	pa.scope != "mesh"
	data.meshward.lib.base_namespaces[pa.namespace].injection.enabled == false
	not data.meshward.lib.ambient(data.meshward.lib.base_namespaces[pa.namespace])
} else := [sprintf("%s %s not injected", [plural_namespaces(nss), data.meshward.lib.plural(count(nss), "was", "were")])] if {
	pa.scope == "mesh"
	nss := base_uninjected_namespaces
	count(nss) > 0
} else := []

plural_namespaces(nss) := sprintf("%s %s", [data.meshward.lib.plural(count(nss), "namespace", "namespaces"), data.meshward.lib.enumerate(nss, 5)])

# Known not injected: a namespace whose labels base did not declare is not claimed.
base_uninjected_namespaces := {ns |
	some ns, n in data.meshward.lib.base_namespaces
	data.meshward.lib.num(object.get(n, "workloads", 0)) > 0
	not data.meshward.lib.skip_namespace(ns)
	n.injection.enabled == false
	not data.meshward.lib.ambient(n)
}

# ---------------------------------------------------------------------------
# mtls/strict-unenforced-workloads (error)
# Only workloads known to be without a proxy: one whose namespace the repository does
# not declare may well have one (injection/namespace-unknown says so).

proxy_unknown_ids := {w.id | some w in data.meshward.lib.model_workloads; w.proxy_known == false}

findings contains f if {
	some pa in data.meshward.lib.model_peer_authentications
	pa.strict == true
	unproxied := [id | some id in object.get(pa, "unproxied", []); not id in proxy_unknown_ids]
	count(unproxied) > 0
	total := count(object.get(pa, "workloads", []))
	f := {
		"rule": "mtls/strict-unenforced-workloads",
		"severity": "error",
		"resource": pa.resource,
		"path": data.meshward.lib.strict_path(pa),
		"subjects": sort(unproxied),
		"message": sprintf(
			"%s requires STRICT mTLS for %s, but %d of its %s %s no Istio proxy (%s): STRICT is not enforced on %s (plaintext is still accepted), and %s calls to STRICT peers will get no response (curl 000). Give %s a sidecar (enable injection, drop sidecar.istio.io/inject: \"false\", roll out) or keep PERMISSIVE until then.",
			[
				data.meshward.lib.display(pa.resource), data.meshward.lib.scope_text(pa), count(unproxied),
				data.meshward.lib.counted(max([total, count(unproxied)]), "workload", "workloads"),
				data.meshward.lib.plural(count(unproxied), "has", "have"), data.meshward.lib.enumerate_ids(unproxied, 5),
				data.meshward.lib.plural(count(unproxied), "it", "them"), data.meshward.lib.plural(count(unproxied), "its", "their"),
				data.meshward.lib.plural(count(unproxied), "it", "them"),
			],
		),
	}
}

# ---------------------------------------------------------------------------
# mtls/strict-without-evidence (error; needs a base revision)
# An introduced STRICT scope needs, for every namespace it covers, evidence that
# traffic flowed and none of it was plaintext.

findings contains f if {
	some pa in data.meshward.lib.introduced_strict
	why := without_evidence_text(pa)
	f := {
		"rule": "mtls/strict-without-evidence",
		"severity": "error",
		"resource": pa.resource,
		"path": data.meshward.lib.strict_path(pa),
		"message": sprintf(
			"%s turns on STRICT mTLS for %s without evidence of zero plaintext traffic (%s): without that proof, clients without a sidecar will get no response (curl 000). Keep PERMISSIVE, gather zero-plaintext evidence (from Prometheus: evidence.prometheus in .meshward.yaml or meshward check --prometheus; from a file: meshward check --evidence), then switch to STRICT.",
			[data.meshward.lib.display(pa.resource), data.meshward.lib.scope_text(pa), why],
		),
	}
}

# A workload scope with evidence of its own is judged on it; any other scope on the
# evidence of each namespace it covers.
without_evidence_text(pa) := sprintf("%s: %s", [data.meshward.lib.scope_subject_text(pa, e), p]) if {
	e := data.meshward.lib.scope_evidence(pa)
	p := data.meshward.lib.entry_problem(e)
} else := mesh_without_evidence_text(pa) if {
	pa.scope == "mesh"
	not data.meshward.lib.scope_evidence(pa)
} else := problems_text(problems) if {
	not data.meshward.lib.scope_evidence(pa)
	problems := {ns: p |
		some ns in data.meshward.lib.scope_namespaces(pa)
		p := data.meshward.lib.evidence_problem(ns)
	}
	count(problems) > 0
}

# Namespace entries cannot prove a mesh-wide scope: traffic into namespaces the
# repository does not hold would go unseen.
mesh_without_evidence_text(_) := "no evidence was given for the whole mesh" if {
	data.meshward.lib.evidence == null
} else := "the evidence has no mesh-wide entry (scopes.mesh), and namespace entries cannot show the traffic into namespaces this repository does not hold, which a mesh-wide policy reaches too"

problems_text(problems) := sprintf("no evidence was given for %s", [plural_namespaces(object.keys(problems))]) if {
	data.meshward.lib.evidence == null
} else := sprintf("namespace %s: %s", [ns, p]) if {
	count(problems) == 1
	some ns, p in problems
} else := sprintf("%d namespaces: %s", [count(problems), data.meshward.lib.enumerate([sprintf("%s (%s)", [ns, p]) | some ns, p in problems], 5)])

# ---------------------------------------------------------------------------
# mtls/plaintext-traffic-present (error; needs a base revision)

findings contains f if {
	some pa in data.meshward.lib.introduced_strict
	seen := plaintext_seen(pa)
	count(seen) > 0
	f := {
		"rule": "mtls/plaintext-traffic-present",
		"severity": "error",
		"resource": pa.resource,
		"path": data.meshward.lib.strict_path(pa),
		"message": sprintf(
			"%s turns on STRICT mTLS for %s, but the evidence shows plaintext traffic over %s (%s): under STRICT those clients will get no response (curl 000). Keep PERMISSIVE, give those clients a sidecar, and switch to STRICT once plaintext traffic is zero.",
			[data.meshward.lib.display(pa.resource), data.meshward.lib.scope_text(pa), data.meshward.lib.evidence_window, data.meshward.lib.enumerate(seen, 5)],
		),
	}
}

plaintext_seen(pa) := [sprintf("%s: %s", [data.meshward.lib.scope_subject_text(pa, e), plaintext_text(e)])] if {
	e := data.meshward.lib.scope_evidence(pa)
	object.get(e, "error", null) == null
	data.meshward.lib.evidence_plaintext(e) > 0
} else := [] if {
	data.meshward.lib.scope_evidence(pa)
} else := [sprintf("%s: %s", [ns, plaintext_text(e)]) |
	some ns in data.meshward.lib.scope_namespaces(pa)
	e := data.meshward.lib.evidence_of(ns)
	object.get(e, "error", null) == null
	data.meshward.lib.evidence_plaintext(e) > 0
]

plaintext_text(e) := sprintf("%v of %v requests and %v of %v TCP connections without mTLS%s", [
	data.meshward.lib.num(object.get(e, "requests_plaintext", 0)),
	data.meshward.lib.num(object.get(e, "requests_total", 0)),
	data.meshward.lib.num(object.get(e, "tcp_connections_plaintext", 0)),
	data.meshward.lib.num(object.get(e, "tcp_connections_total", 0)),
	plaintext_bytes_text(e),
])

# Bytes show only when there are some: on a connection opened before the window.
plaintext_bytes_text(e) := sprintf(", %v bytes received in plaintext", [data.meshward.lib.num(e.tcp_bytes_plaintext)]) if {
	data.meshward.lib.num(object.get(e, "tcp_bytes_plaintext", 0)) > 0
} else := ""

# ---------------------------------------------------------------------------
# mtls/port-level-requires-selector (error)

findings contains f if {
	some r in data.meshward.lib.resources("PeerAuthentication")
	not object.get(r.body, ["spec", "portLevelMtls"], null) in data.meshward.lib.empty_values
	object.get(r.body, ["spec", "selector", "matchLabels"], null) in data.meshward.lib.empty_values
	f := {
		"rule": "mtls/port-level-requires-selector",
		"severity": "error",
		"resource": r.id,
		"path": ["spec", "portLevelMtls"],
		"message": sprintf(
			"PeerAuthentication %s/%s sets portLevelMtls without a non-empty spec.selector.matchLabels: Istio rejects it (port-level mTLS needs a workload selector), so none of its port or namespace settings take effect. Add spec.selector.matchLabels naming the workloads whose ports it configures.",
			[r.namespace, r.name],
		),
	}
}
