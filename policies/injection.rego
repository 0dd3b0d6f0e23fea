# Sidecar injection: namespaces and workloads that end up outside the mesh.
package meshward.rules.injection

import rego.v1

import data.meshward.lib

# Workload ids of head, per namespace.
workloads_in[ns] contains w.id if {
	some w in lib.model_workloads
	ns := w.namespace
}

# ---------------------------------------------------------------------------
# injection/namespace-not-injected (info, IST0102)
# A namespace with neither istio-injection nor istio.io/rev. Like istioctl, a namespace
# marked istio-injection=disabled is a decision, not an oversight, and is skipped.

not_injected contains ns if {
	some ns, n in lib.model_namespaces
	not lib.skip_namespace(ns)
	not n.injection.enabled == true
	not n.injection.explicitly_disabled == true
	not lib.ambient(n)
	declared_or_used(ns, n)
}

declared_or_used(_, n) if n.declared == true

declared_or_used(ns, _) if count(object.get(workloads_in, ns, set())) > 0

findings contains f if {
	some ns in not_injected
	n := lib.model_namespaces[ns]
	ids := object.get(workloads_in, ns, set())
	[resource, path] := not_injected_location(n, ids)
	f := {
		"rule": "injection/namespace-not-injected",
		"severity": "info",
		"istio_code": "IST0102",
		"resource": resource,
		"path": path,
		"subjects": sort(ids),
		"message": not_injected_message(ns, ids),
	}
}

not_injected_location(n, ids) := [n.resource, ["metadata", "labels"]] if {
	is_string(n.resource)
} else := [id, lib.pod_labels_path(w.kind)] if {
	id := min(ids)
	some w in lib.model_workloads
	w.id == id
}

not_injected_message(ns, ids) := msg if {
	n := count(ids)
	n > 0
	msg := sprintf(
		"Namespace %s is not enabled for sidecar injection (no istio-injection=enabled or istio.io/rev label), so %s (%s) %s without an Istio proxy: mesh policies do not apply to %s and %s calls to STRICT mTLS services get no response (curl 000). Label it istio-injection=enabled and roll out its workloads, or label it istio-injection=disabled if it is meant to stay outside the mesh.",
		[
			ns, lib.plural(n, "its workload", sprintf("its %d workloads", [n])), lib.enumerate_ids(ids, 5),
			lib.plural(n, "runs", "run"), lib.plural(n, "it", "them"), lib.plural(n, "its", "their"),
		],
	)
} else := sprintf(
	"Namespace %s is not enabled for sidecar injection (no istio-injection=enabled or istio.io/rev label): pods deployed to it will run without an Istio proxy, outside the mesh. Label it istio-injection=enabled, or istio-injection=disabled if it is meant to stay outside the mesh.",
	[ns],
)

# ---------------------------------------------------------------------------
# injection/conflicting-labels (error, IST0123)

findings contains f if {
	some r in lib.resources("Namespace")
	labels := object.get(r.body, ["metadata", "labels"], {})
	is_object(labels)
	legacy := labels["istio-injection"]
	rev := labels["istio.io/rev"]
	f := {
		"rule": "injection/conflicting-labels",
		"severity": "error",
		"istio_code": "IST0123",
		"resource": r.id,
		"path": ["metadata", "labels"],
		"message": sprintf(
			"Namespace %s has both istio-injection=%v and istio.io/rev=%v: revision webhooks ignore a namespace that has istio-injection, so the revision label has no effect and its pods get the default revision's proxy (or none). Keep only one of the two labels.",
			[r.name, legacy, rev],
		),
	}
}

# ---------------------------------------------------------------------------
# injection/workload-opted-out (warning)

findings contains f if {
	some w in lib.model_workloads
	w.opted_out == true
	lib.model_namespaces[w.namespace].injection.enabled == true
	f := {
		"rule": "injection/workload-opted-out",
		"severity": "warning",
		"resource": w.id,
		"path": opt_out_path(w),
		"message": sprintf(
			"%s opts out of sidecar injection (sidecar.istio.io/inject: \"false\") in injected namespace %s: its pods run without an Istio proxy, so mTLS and AuthorizationPolicies are not enforced on them and their calls to STRICT mTLS services get no response (curl 000). Remove the opt-out and roll it out, or record an exception if it must stay outside the mesh.",
			[lib.display(w.id), w.namespace],
		),
	}
}

opt_out_path(w) := array.concat(lib.pod_labels_path(w.kind), ["sidecar.istio.io/inject"]) if {
	lower(sprintf("%v", [object.get(w, ["labels", "sidecar.istio.io/inject"], "")])) == "false"
} else := array.concat(lib.pod_annotations_path(w.kind), ["sidecar.istio.io/inject"])

# ---------------------------------------------------------------------------
# injection/rollout-required (warning; needs a base revision)
# Injection only affects pods created after it is turned on: workloads whose pod template
# does not change in the same change keep running without a proxy. The model marks them
# pending_rollout (and proxy false); the comparison of template hashes below covers a
# model that does not.

not_rolled_out[w.namespace] contains w.id if {
	lib.has_base
	some w in lib.model_workloads
	w.pending_rollout == true
}

newly_injected contains ns if {
	lib.has_base
	some ns, n in lib.model_namespaces
	n.injection.enabled == true
	not lib.base_namespaces[ns].injection.enabled == true
}

# [id, template hash] of every base workload.
base_templates := {[w.id, w.template_hash] | some w in lib.base_workloads}

base_proxied := {w.id | some w in lib.base_workloads; w.proxy == true}

not_rolled_out[ns] contains w.id if {
	some w in lib.model_workloads
	ns := w.namespace
	ns in newly_injected
	w.proxy == true
	[w.id, w.template_hash] in base_templates
	not w.id in base_proxied
}

findings contains f if {
	some ns, ids in not_rolled_out
	resource := lib.model_namespaces[ns].resource
	is_string(resource)
	f := {
		"rule": "injection/rollout-required",
		"severity": "warning",
		"resource": resource,
		"path": ["metadata", "labels"],
		"message": sprintf(
			"This change turns on sidecar injection for namespace %s, but the pod template of %s (%s) does not change: %s running pods stay outside the mesh, without a proxy, until they are recreated. Change %s pod template in this change (e.g. set the annotation kubectl.kubernetes.io/restartedAt) so %s out with a sidecar.",
			[
				ns, lib.plural(count(ids), "its workload", sprintf("its %d workloads", [count(ids)])), lib.enumerate_ids(ids, 5),
				lib.plural(count(ids), "its", "their"), lib.plural(count(ids), "the", "each"), lib.plural(count(ids), "it rolls", "they roll"),
			],
		),
	}
}
