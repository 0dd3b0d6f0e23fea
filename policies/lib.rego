# Shared helpers of the built-in meshward policies.
# The shape of `input` is documented in docs/policy-input.md.
#
# Policies name these as data.meshward.lib.x rather than importing the package: regorus
# evaluates every rule of an imported package the first time its alias is used, at each
# evaluation, needed or not (a check of the 1k-resource bench tree: 657 M instructions
# with the import, 649 M without; BENCHMARKS.md, stop 38).
package meshward.lib

import rego.v1

# ---------------------------------------------------------------------------
# input access

root_namespace := ns if {
	ns := object.get(input, ["config", "mesh", "root_namespace"], null)
	is_string(ns)
	ns != ""
} else := "istio-system"

trust_domain := td if {
	td := object.get(input, ["config", "mesh", "trust_domain"], null)
	is_string(td)
	td != ""
} else := "cluster.local"

# Kubernetes' own namespaces: always there, never injected.
system_namespaces := {"kube-system", "kube-public", "kube-node-lease"}

skip_namespace(ns) if ns in system_namespaces

skip_namespace(ns) if ns == root_namespace

# The resources of one kind ([] when the tree has none).
resources(kind) := object.get(input, ["by_kind", kind], [])

model := object.get(input, "model", {})

base := object.get(input, "base", null)

has_base if is_object(base)

# Parts of the base model ({} / [] when there is no base revision).
base_namespaces := object.get(base, "namespaces", {}) if has_base else := {}

base_workloads := object.get(base, "workloads", []) if has_base else := []

base_mtls_scopes := object.get(base, "mtls_scopes", {}) if has_base else := {}

base_workload_groups := object.get(base, "workload_groups", []) if has_base else := []

base_identities := object.get(base, "identities", {}) if has_base else := {}

model_namespaces := object.get(model, "namespaces", {})

model_workloads := object.get(model, "workloads", [])

model_selectors := object.get(model, "selectors", [])

model_workload_entries := object.get(model, "workload_entries", [])

model_peer_authentications := object.get(model, "peer_authentications", [])

model_workload_groups := object.get(model, "workload_groups", [])

model_identities := object.get(model, "identities", {})

# ---------------------------------------------------------------------------
# values

# x is set to something: a non-empty string, array or object, a number or a boolean.
non_empty(x) if {
	is_string(x)
	x != ""
}

non_empty(x) if {
	is_array(x)
	count(x) > 0
}

non_empty(x) if {
	is_object(x)
	count(x) > 0
}

non_empty(x) if is_number(x)

non_empty(x) if is_boolean(x)

# Values that count as "not set". In hot paths write
#   not object.get(obj, key, null) in data.meshward.lib.empty_values  (obj must be an object)
# rather than calling has_value: user function calls are the expensive part of evaluation.
empty_values := {null, "", [], {}}

# object.get that never fails: d when x is not an object (manifests are hostile input).
get(x, path, d) := object.get(x, path, d) if is_object(x) else := d

# The spec of a resource ({} when absent or not an object).
spec_of(r) := s if {
	s := r.body.spec
	is_object(s)
} else := {}

# obj[key] is set to something non-empty.
has_value(obj, key) if non_empty(get(obj, key, null))

# x as an array ([] when absent or not an array).
array_of(x) := x if is_array(x) else := []

num(x) := x if is_number(x) else := 0

# ---------------------------------------------------------------------------
# text

# "Deployment/shop/cart" -> "Deployment shop/cart"; "Namespace/shop" -> "Namespace shop"
display(id) := s if {
	parts := split(id, "/")
	count(parts) == 3
	s := sprintf("%s %s/%s", parts)
} else := s if {
	parts := split(id, "/")
	count(parts) == 2
	s := sprintf("%s %s", parts)
} else := id

# Sorted, comma-separated, at most n items then "and K more".
enumerate(items, n) := s if {
	sorted := sort(items)
	count(sorted) <= n
	s := concat(", ", sorted)
} else := s if {
	sorted := sort(items)
	s := sprintf("%s and %d more", [concat(", ", array.slice(sorted, 0, n)), count(sorted) - n])
}

# The same for resource ids, shown with display().
enumerate_ids(ids, n) := enumerate([display(id) | some id in sort(ids)], n)

# {"app": "cart", "v": "1"} -> "app=cart,v=1"
labels_text(labels) := s if {
	is_object(labels)
	count(labels) > 0
	s := concat(",", sort([sprintf("%s=%v", [k, v]) | some k, v in labels]))
} else := "(no labels)"

plural(n, one, many) := one if n == 1 else := many

# "1 workload", "3 workloads"
counted(n, one, many) := sprintf("%d %s", [n, plural(n, one, many)])

# ---------------------------------------------------------------------------
# workloads

# Path of the pod template's metadata in a workload of this kind.
pod_metadata_path(kind) := ["metadata"] if kind == "Pod"
else := ["spec", "jobTemplate", "spec", "template", "metadata"] if kind == "CronJob"
else := ["spec", "template", "metadata"]

pod_labels_path(kind) := array.concat(pod_metadata_path(kind), ["labels"])

# Path of the pod spec in a workload of this kind.
pod_spec_path(kind) := ["spec"] if kind == "Pod"
else := ["spec", "jobTemplate", "spec", "template", "spec"] if kind == "CronJob"
else := ["spec", "template", "spec"]

pod_annotations_path(kind) := array.concat(pod_metadata_path(kind), ["annotations"])

# ---------------------------------------------------------------------------
# namespaces

# Ambient namespaces get mTLS from ztunnel, not from a sidecar.
ambient(n) if object.get(n, ["labels", "istio.io/dataplane-mode"], "") == "ambient"

# A workload with an identity and mTLS: its sidecar, or ztunnel (ambient).
in_mesh(w) if w.proxy == true

in_mesh(w) if w.ambient == true

# Whether a namespace is injected is known: the repository declares its labels (a
# Namespace object, Argo CD managedNamespaceMetadata, or mesh.namespaces in
# .meshward.yaml). Otherwise injection.enabled is null: unknown, which is neither
# injected nor not injected, and no rule may claim either.
injection_known(n) if is_boolean(n.injection.enabled)

# How the place that declares a namespace's labels is named in messages.
labels_where(n) := "its Namespace object" if {
	n.labels_from == "namespace"
} else := sprintf("the managedNamespaceMetadata of %s", [display(n.labels_resource)]) if {
	n.labels_from == "argocd"
	is_string(n.labels_resource)
} else := "mesh.namespaces of .meshward.yaml" if {
	n.labels_from == "config"
} else := "this repository"

# Why a namespace's injection is unknown (its model's reason, or the usual one).
unknown_reason(ns, n) := r if {
	r := n.unknown_reason
	is_string(r)
} else := sprintf("namespace %s is not declared in this repository", [ns])

# "shop is …" -> "Shop is …", for a sentence that starts with a variable part.
capitalized(s) := concat("", [upper(substring(s, 0, 1)), substring(s, 1, -1)])

# ---------------------------------------------------------------------------
# mTLS

# Where a PeerAuthentication (model entry) turns STRICT on.
strict_path(pa) := ["spec", "mtls", "mode"] if {
	pa.mode == "STRICT"
} else := ["spec", "portLevelMtls", port] if {
	port := min({p | some p, m in object.get(pa, "port_modes", {}); m == "STRICT"})
} else := ["spec", "mtls"]

# The mode a PeerAuthentication's scope effectively had in the base revision:
# its own mode there, else (UNSET or absent) what it inherited, Istio's default PERMISSIVE last.
base_scope_mode(pa) := m if {
	m := base_mtls_scopes[pa.scope_key]
	is_string(m)
	m != "UNSET"
} else := "PERMISSIVE" if {
	pa.scope == "mesh"
} else := m if {
	m := base_namespaces[pa.namespace].mtls.mode
	is_string(m)
	m != "UNSET"
} else := m if {
	m := base_mtls_scopes.mesh
	is_string(m)
	m != "UNSET"
} else := "PERMISSIVE"

# A STRICT PeerAuthentication of head whose scope was not already STRICT in base.
# Without a base revision nothing is introduced: a STRICT scope may have been STRICT
# for years, and only a change can be judged as turning it on.
introduced_strict contains pa if {
	some pa in model_peer_authentications
	pa.strict == true
	has_base
	base_scope_mode(pa) != "STRICT"
}

# Namespaces whose clients a PeerAuthentication's STRICT mode affects.
scope_namespaces(pa) := nss if {
	pa.scope == "mesh"
	nss := {ns |
		some ns, n in model_namespaces
		num(object.get(n, "workloads", 0)) > 0
		not skip_namespace(ns)
	}
} else := {pa.namespace}

# How a PeerAuthentication's scope is named in messages.
scope_text(pa) := "the whole mesh" if pa.scope == "mesh"
else := sprintf("namespace %s", [pa.namespace]) if pa.scope == "namespace"
else := sprintf("the selected workloads in namespace %s", [pa.namespace])

# ---------------------------------------------------------------------------
# evidence

evidence := object.get(input, "evidence", null)

evidence_window := w if {
	w := evidence.window
	is_string(w)
	w != ""
} else := "the evidence window"

evidence_of(ns) := e if {
	e := evidence.namespaces[ns]
	is_object(e)
}

# The evidence about a workload-level scope's own workloads (gathered from Prometheus
# for the scope key); undefined when there is none: then its namespace's evidence,
# which covers all its workloads, is used.
scope_evidence(pa) := e if {
	pa.scope == "workload"
	e := evidence.scopes[pa.scope_key]
	is_object(e)
}

# A mesh-wide scope is judged on the mesh-wide entry (`scopes.mesh`): a policy in the
# root namespace reaches every namespace, also those this repository does not hold.
scope_evidence(pa) := e if {
	pa.scope == "mesh"
	e := evidence.scopes.mesh
	is_object(e)
}

# How a scope's evidence subject is named in messages.
scope_subject_text(pa, e) := "the whole mesh" if {
	pa.scope == "mesh"
} else := sprintf("workloads %s in namespace %s", [enumerate(ws, 5), pa.namespace]) if {
	ws := array_of(object.get(e, "workloads", []))
	count(ws) > 0
} else := sprintf("the workloads it selects in namespace %s", [pa.namespace])

# Why an evidence entry is not usable; undefined when it is.
entry_problem(e) := sprintf("no usable data: %v", [e.error]) if {
	object.get(e, "error", null) != null
} else := sprintf("no traffic at all in %s, and no data is not evidence", [evidence_window]) if {
	evidence_total(e) == 0
}

evidence_total(e) := num(object.get(e, "requests_total", 0)) + num(object.get(e, "tcp_connections_total", 0))

# Plaintext bytes count too: a plaintext connection opened before the window and still
# open adds bytes, not connections.
evidence_plaintext(e) := (num(object.get(e, "requests_plaintext", 0)) + num(object.get(e, "tcp_connections_plaintext", 0))) + num(object.get(e, "tcp_bytes_plaintext", 0))

# Why a namespace has no usable zero-plaintext evidence; undefined when it has some.
evidence_problem(ns) := "no evidence was given" if {
	evidence == null
} else := "no data in the evidence" if {
	not evidence_of(ns)
} else := sprintf("%s; %s is ambient, whose traffic only ztunnel reports: Prometheus must scrape the ztunnel pods (namespace istio-system, label app=ztunnel)", [p, ns]) if {
	p := entry_problem(evidence_of(ns))
	evidence_total(evidence_of(ns)) == 0
	ambient(model_namespaces[ns])
} else := entry_problem(evidence_of(ns))
