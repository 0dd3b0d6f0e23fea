# Sidecar injection: namespaces and workloads that end up outside the mesh.
package meshward.rules.injection

import rego.v1

# Workload ids of head, per namespace.
workloads_in[ns] contains w.id if {
	some w in data.meshward.lib.model_workloads
	ns := w.namespace
}

# ---------------------------------------------------------------------------
# injection/namespace-not-injected (info, IST0102)
# A namespace known to have neither istio-injection nor istio.io/rev. Like istioctl, a
# namespace with istio-injection set to anything (disabled, or another value) is a
# decision, not an oversight, and is skipped. A namespace whose labels are unknown is
# not "not injected": injection/namespace-unknown says so instead.

not_injected contains ns if {
	some ns, n in data.meshward.lib.model_namespaces
	not data.meshward.lib.skip_namespace(ns)
	n.injection.enabled == false
	object.get(n, ["labels", "istio-injection"], "") == ""
	not "istio.io/rev" in object.keys(object.get(n, "labels", {}))
	not data.meshward.lib.ambient(n)
	declared_or_used(ns, n)
	# Every workload here labelled istio.io/dataplane-mode=ambient itself: ztunnel
	# captures them, so they are in the mesh without injection.
	not all_ambient(ns)
	not waypoints_only(ns)
}

# A namespace of waypoints alone: istiod deploys their pods, each an Envoy of its own.
waypoints_only(ns) if {
	count(object.get(workloads_in, ns, set())) == 0
	some w in data.meshward.lib.array_of(object.get(data.meshward.lib.model, "waypoints", []))
	w.namespace == ns
	w.waypoint_class == true
}

# Workloads ztunnel captures (a set comprehension: defined, if empty, without any).
ambient_ids := {w.id | some w in data.meshward.lib.model_workloads; w.ambient == true}

all_ambient(ns) if {
	ids := object.get(workloads_in, ns, set())
	count(ids & ambient_ids) > 0
	count(ids - ambient_ids) == 0
}

# An object of the repository declares it, or a workload lives in it.
declared_or_used(_, n) if is_string(n.labels_resource)

declared_or_used(ns, _) if count(object.get(workloads_in, ns, set())) > 0

findings contains f if {
	some ns in not_injected
	n := data.meshward.lib.model_namespaces[ns]
	# Pods ztunnel captures (labelled ambient themselves) are not "without a proxy".
	ids := object.get(workloads_in, ns, set()) - ambient_ids
	[resource, path] := labels_location(n, ids)
	f := {
		"rule": "injection/namespace-not-injected",
		"severity": "info",
		"istio_code": "IST0102",
		"resource": resource,
		"path": path,
		"subjects": sort(ids),
		"message": not_injected_message(ns, n, ids),
	}
}

# Where to point a finding about a namespace's labels: the object and field that set
# them, else (mesh.namespaces of .meshward.yaml) the first of its workloads.
labels_location(n, ids) := [n.labels_resource, n.labels_path] if {
	is_string(n.labels_resource)
} else := [id, data.meshward.lib.pod_labels_path(w.kind)] if {
	id := min(ids)
	some w in data.meshward.lib.model_workloads
	w.id == id
}

not_injected_message(ns, n, ids) := msg if {
	k := count(ids)
	k > 0
	msg := sprintf(
		"Namespace %s is not enabled for sidecar injection (no istio-injection=enabled or istio.io/rev label in %s), so %s (%s) %s without an Istio proxy: mesh policies do not apply to %s and %s calls to STRICT mTLS services get no response (curl 000). Label it istio-injection=enabled and roll out its workloads, or label it istio-injection=disabled if it is meant to stay outside the mesh.",
		[
			ns, data.meshward.lib.labels_where(n), data.meshward.lib.plural(k, "its workload", sprintf("its %d workloads", [k])), data.meshward.lib.enumerate_ids(ids, 5),
			data.meshward.lib.plural(k, "runs", "run"), data.meshward.lib.plural(k, "it", "them"), data.meshward.lib.plural(k, "its", "their"),
		],
	)
} else := sprintf(
	"Namespace %s is not enabled for sidecar injection (no istio-injection=enabled or istio.io/rev label in %s): pods deployed to it will run without an Istio proxy, outside the mesh. Label it istio-injection=enabled, or istio-injection=disabled if it is meant to stay outside the mesh.",
	[ns, data.meshward.lib.labels_where(n)],
)

# ---------------------------------------------------------------------------
# injection/namespace-unknown (info; warning under STRICT)
# Workloads whose proxy depends on the labels of a namespace the repository does not
# declare: meshward cannot tell whether they get a sidecar, so it says that, once per
# namespace, instead of reporting them as injected or as without a proxy.

proxy_unknown_in[w.namespace] contains w.id if {
	some w in data.meshward.lib.model_workloads
	w.proxy_known == false
}

# STRICT PeerAuthentications covering a workload whose proxy is unknown.
strict_over[id] contains pa.resource if {
	some pa in data.meshward.lib.model_peer_authentications
	pa.strict == true
	some id in object.get(pa, "proxy_unknown", [])
}

findings contains f if {
	some ns, ids in proxy_unknown_in
	not data.meshward.lib.skip_namespace(ns)
	n := data.meshward.lib.model_namespaces[ns]
	not data.meshward.lib.injection_known(n)
	pas := {p | some id in ids; some p in object.get(strict_over, id, set())}
	f := {
		"rule": "injection/namespace-unknown",
		"severity": unknown_severity(pas),
		"resource": min(ids),
		"path": ["metadata", "namespace"],
		"subjects": sort(ids),
		"message": sprintf(
			"%s, so whether it is injected is unknown: meshward cannot tell whether %s (%s) %s with an Istio proxy, and reports %s neither as injected nor as without a proxy.%s Declare the namespace with its labels (a Namespace object, or Argo CD managedNamespaceMetadata with CreateNamespace=true), or list it under mesh.namespaces in .meshward.yaml if it is managed elsewhere.",
			[
				data.meshward.lib.capitalized(data.meshward.lib.unknown_reason(ns, n)),
				data.meshward.lib.plural(count(ids), "its workload", sprintf("its %d workloads", [count(ids)])), data.meshward.lib.enumerate_ids(ids, 5),
				data.meshward.lib.plural(count(ids), "runs", "run"), data.meshward.lib.plural(count(ids), "it", "them"),
				strict_text(pas, count(ids)),
			],
		),
	}
}

unknown_severity(pas) := "warning" if count(pas) > 0 else := "info"

strict_text(pas, k) := sprintf(
	" %s %s STRICT mTLS for %s: if %s no proxy, STRICT is not enforced on %s and %s calls to STRICT peers get no response (curl 000).",
	[data.meshward.lib.enumerate_ids(pas, 3), data.meshward.lib.plural(count(pas), "requires", "require"), data.meshward.lib.plural(k, "it", "them"), data.meshward.lib.plural(k, "it has", "they have"), data.meshward.lib.plural(k, "it", "them"), data.meshward.lib.plural(k, "its", "their")],
) if count(pas) > 0 else := ""

# ---------------------------------------------------------------------------
# injection/conflicting-labels (error, IST0123)
# As istioctl's analyzer (NamespaceMultipleInjectionLabels): skip istio-system;
# collect istio-injection=<v> if present, and istio.io/rev=<v> and
# istio.io/dataplane-mode=<v> if present while istio-injection is absent or
# "enabled"; more than one collected is a conflict. A namespace with injection
# switched off (istio-injection=disabled) may carry the others.

injection_labels(labels) := array.concat(
	[sprintf("istio-injection=%v", [v]) | some k, v in labels; k == "istio-injection"],
	[sprintf("%s=%v", [k, labels[k]]) |
		some k in ["istio.io/rev", "istio.io/dataplane-mode"]
		k in object.keys(labels)
		others_count(labels)
	],
)

others_count(labels) if not "istio-injection" in object.keys(labels)

others_count(labels) if labels["istio-injection"] == "enabled"

findings contains f if {
	some ns, n in data.meshward.lib.model_namespaces
	ns != "istio-system"
	is_string(n.labels_resource)
	labels := object.get(n, "labels", {})
	is_object(labels)
	collected := injection_labels(labels)
	count(collected) > 1
	f := {
		"rule": "injection/conflicting-labels",
		"severity": "error",
		"istio_code": "IST0123",
		"resource": n.labels_resource,
		"path": n.labels_path,
		"message": sprintf(
			"Namespace %s has more than one kind of injection label (%s): %s. Keep only one: istio-injection=enabled or istio.io/rev=<revision> for sidecars, or istio.io/dataplane-mode=ambient (alone, or beside istio-injection=disabled) for ambient.",
			[ns, concat(", ", collected), concat("; ", conflict_effects(labels))],
		),
	}
}

conflict_effects(labels) := [e | some e in [rev_effect(labels), mode_effect(labels)]; e != ""]

rev_effect(labels) := sprintf(
	"revision webhooks skip a namespace that has istio-injection, so istio.io/rev=%v has no effect and its pods get the default revision's proxy",
	[labels["istio.io/rev"]],
) if {
	labels["istio-injection"] == "enabled"
	"istio.io/rev" in object.keys(labels)
} else := ""

mode_effect(labels) := "the sidecar injector ignores istio.io/dataplane-mode, so its pods get a sidecar, and ambient never captures a pod that has one" if {
	"istio.io/dataplane-mode" in object.keys(labels)
} else := ""

# ---------------------------------------------------------------------------
# injection/workload-opted-out (warning)

findings contains f if {
	some w in data.meshward.lib.model_workloads
	w.opted_out == true
	# Opting out to be captured by ztunnel (istio.io/dataplane-mode=ambient on the pod)
	# is how a workload moves to ambient: it stays in the mesh.
	not w.ambient == true
	data.meshward.lib.model_namespaces[w.namespace].injection.enabled == true
	f := {
		"rule": "injection/workload-opted-out",
		"severity": "warning",
		"resource": w.id,
		"path": opt_out_path(w),
		"message": sprintf(
			"%s opts out of sidecar injection (sidecar.istio.io/inject: \"false\") in injected namespace %s: its pods run without an Istio proxy, so mTLS and AuthorizationPolicies are not enforced on them and their calls to STRICT mTLS services get no response (curl 000). Remove the opt-out and roll it out, or record an exception if it must stay outside the mesh.",
			[data.meshward.lib.display(w.id), w.namespace],
		),
	}
}

opt_out_path(w) := array.concat(data.meshward.lib.pod_labels_path(w.kind), ["sidecar.istio.io/inject"]) if {
	lower(sprintf("%v", [object.get(w, ["labels", "sidecar.istio.io/inject"], "")])) == "false"
} else := array.concat(data.meshward.lib.pod_annotations_path(w.kind), ["sidecar.istio.io/inject"])

# ---------------------------------------------------------------------------
# injection/rollout-required (warning; needs a base revision)
# Injection only affects pods created after it is turned on: workloads whose pod template
# does not change in the same change keep running without a proxy. The model marks them
# pending_rollout (and proxy false); the comparison of template hashes below covers a
# model that does not.

not_rolled_out[w.namespace] contains w.id if {
	data.meshward.lib.has_base
	some w in data.meshward.lib.model_workloads
	w.pending_rollout == true
}

# Known not injected in base, injected in head. A namespace whose labels base did not
# declare may have been injected all along: declaring it is not turning injection on.
newly_injected contains ns if {
	data.meshward.lib.has_base
	some ns, n in data.meshward.lib.model_namespaces
	n.injection.enabled == true
	data.meshward.lib.base_namespaces[ns].injection.enabled == false
}

# [id, template hash] of every base workload.
base_templates := {[w.id, w.template_hash] | some w in data.meshward.lib.base_workloads}

base_proxied := {w.id | some w in data.meshward.lib.base_workloads; w.proxy == true}

not_rolled_out[ns] contains w.id if {
	some w in data.meshward.lib.model_workloads
	ns := w.namespace
	ns in newly_injected
	w.proxy == true
	[w.id, w.template_hash] in base_templates
	not w.id in base_proxied
}

findings contains f if {
	some ns, ids in not_rolled_out
	[resource, path] := labels_location(data.meshward.lib.model_namespaces[ns], ids)
	f := {
		"rule": "injection/rollout-required",
		"severity": "warning",
		"resource": resource,
		"path": path,
		"message": sprintf(
			"This change turns on sidecar injection for namespace %s, but the pod template of %s (%s) does not change: %s running pods stay outside the mesh, without a proxy, until they are recreated. Change %s pod template in this change (e.g. set the annotation kubectl.kubernetes.io/restartedAt) so %s out with a sidecar.",
			[
				ns, data.meshward.lib.plural(count(ids), "its workload", sprintf("its %d workloads", [count(ids)])), data.meshward.lib.enumerate_ids(ids, 5),
				data.meshward.lib.plural(count(ids), "its", "their"), data.meshward.lib.plural(count(ids), "the", "each"), data.meshward.lib.plural(count(ids), "it rolls", "they roll"),
			],
		),
	}
}
