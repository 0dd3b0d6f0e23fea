//! What the repository says about each namespace's labels. A namespace's labels are
//! known from its Namespace object, from the labels Argo CD sets on a namespace it
//! creates for an Application (`managedNamespaceMetadata`), or from `mesh.namespaces`
//! in `.meshward.yaml`, in that order. A namespace none of them declares has unknown
//! labels: whether it is injected is unknown, and the model says so instead of
//! guessing "not injected".

use super::labels::Labels;
use super::{Injection, Namespace, NamespaceMtls};
use crate::config::MeshConfig;
use crate::render::AppNamespaceLabels;
use std::collections::BTreeMap;

/// Injection of a namespace whose labels are known.
pub(super) fn injection_of(labels: &Labels) -> Injection {
    let inj = labels.get("istio-injection").map(String::as_str);
    let rev = labels.get("istio.io/rev").cloned();
    let mut out = Injection {
        enabled: Some(false),
        conflict: multiple_injection_labels(labels).len() > 1,
        explicitly_disabled: inj == Some("disabled"),
        ..Default::default()
    };
    if inj == Some("enabled") {
        out.enabled = Some(true);
        out.via = Some("istio-injection".into());
    } else if inj.is_none() {
        if let Some(rev) = rev {
            out.enabled = Some(true);
            out.via = Some("istio.io/rev".into());
            out.revision = Some(rev);
        }
    }
    out
}

/// The labels istioctl's IST0123 (NamespaceMultipleInjectionLabels) collects: more
/// than one is a conflict. `istio.io/rev` and `istio.io/dataplane-mode` count only
/// when `istio-injection` is absent or `enabled`: a namespace with injection switched
/// off (`disabled`, or any other value) may carry them without conflict.
/// (istio/istio pkg/config/analysis/analyzers/injection/injection.go)
pub(super) fn multiple_injection_labels(labels: &Labels) -> Vec<String> {
    let inj = labels.get("istio-injection");
    let mut out: Vec<String> = inj
        .map(|v| format!("istio-injection={v}"))
        .into_iter()
        .collect();
    for key in ["istio.io/rev", "istio.io/dataplane-mode"] {
        if let Some(v) = labels.get(key) {
            if inj.is_none_or(|i| i == "enabled") {
                out.push(format!("{key}={v}"));
            }
        }
    }
    out
}

pub(crate) const FROM_NAMESPACE: &str = "namespace";
pub(crate) const FROM_ARGOCD: &str = "argocd";
pub(crate) const FROM_CONFIG: &str = "config";

pub(crate) fn unknown_reason(name: &str) -> String {
    format!("namespace {name} is not declared in this repository (no Namespace object, no Argo CD managedNamespaceMetadata, not in mesh.namespaces of .meshward.yaml)")
}

fn namespace(name: &str, labels: Option<Labels>) -> Namespace {
    let injection = match &labels {
        Some(l) => injection_of(l),
        None => Injection::default(),
    };
    Namespace {
        name: name.to_string(),
        declared: false,
        resource: None,
        labels_known: labels.is_some(),
        labels_from: None,
        labels_resource: None,
        labels_path: Vec::new(),
        unknown_reason: labels.is_none().then(|| unknown_reason(name)),
        labels: labels.unwrap_or_default(),
        injection,
        ambient: None,
        mtls: NamespaceMtls {
            mode: "PERMISSIVE".into(),
            source: None,
        },
        workloads: 0,
        workloads_with_proxy: 0,
        workloads_ambient: 0,
        workloads_waypoint: 0,
        workloads_proxy_unknown: 0,
        service_accounts: Vec::new(),
    }
}

/// A namespace declared by a Namespace object of the tree.
pub(crate) fn declared(name: &str, id: &str, labels: Labels) -> Namespace {
    let mut ns = namespace(name, Some(labels));
    ns.declared = true;
    ns.resource = Some(id.to_string());
    ns.labels_from = Some(FROM_NAMESPACE.into());
    ns.labels_resource = Some(id.to_string());
    ns.labels_path = vec!["metadata".into(), "labels".into()];
    ns
}

/// Namespaces whose labels only app objects set. A Namespace object wins (Argo CD
/// applies the manifest over managedNamespaceMetadata). Two apps that set different
/// labels on one namespace leave it unknown: which wins depends on sync order.
pub(crate) fn from_apps(
    apps: &[AppNamespaceLabels],
    namespaces: &BTreeMap<String, Namespace>,
) -> Vec<Namespace> {
    let mut by_ns: BTreeMap<&str, Vec<&AppNamespaceLabels>> = BTreeMap::new();
    for a in apps {
        if !namespaces.contains_key(&a.namespace) {
            by_ns.entry(a.namespace.as_str()).or_default().push(a);
        }
    }
    by_ns
        .into_iter()
        .map(|(name, sets)| {
            let first = sets[0];
            match sets.iter().find(|s| s.labels != first.labels) {
                None => {
                    let mut ns = namespace(name, Some(first.labels.clone()));
                    ns.labels_from = Some(FROM_ARGOCD.into());
                    ns.labels_resource = Some(first.resource.clone());
                    ns.labels_path = first.path.clone();
                    ns
                }
                Some(other) => {
                    let mut ns = namespace(name, None);
                    ns.unknown_reason = Some(format!(
                        "{} and {} set different labels on namespace {name} (managedNamespaceMetadata), and which wins depends on the order Argo CD syncs them",
                        first.by, other.by
                    ));
                    ns
                }
            }
        })
        .collect()
}

/// A namespace a resource lives in that nothing of the tree declares: its labels are
/// those `mesh.namespaces` gives, else unknown.
pub(crate) fn used(name: &str, mesh: &MeshConfig) -> Namespace {
    match mesh.namespaces.get(name) {
        Some(decl) => {
            let mut ns = namespace(name, Some(decl.labels.clone()));
            ns.labels_from = Some(FROM_CONFIG.into());
            ns
        }
        None => namespace(name, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NamespaceDecl;

    fn app(ns: &str, by: &str, labels: &[(&str, &str)]) -> AppNamespaceLabels {
        AppNamespaceLabels {
            namespace: ns.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            resource: format!("Application/argocd/{by}"),
            path: vec!["spec".into()],
            by: format!("Application argocd/{by}"),
        }
    }

    #[test]
    fn unknown_unless_something_declares_the_labels() {
        let ns = used("shop", &MeshConfig::default());
        assert!(!ns.labels_known);
        assert_eq!(ns.injection.enabled, None);
        assert!(ns.unknown_reason.unwrap().contains("not declared"));

        let mut mesh = MeshConfig::default();
        mesh.namespaces.insert(
            "shop".into(),
            NamespaceDecl {
                labels: [("istio-injection".to_string(), "enabled".to_string())].into(),
            },
        );
        let ns = used("shop", &mesh);
        assert!(ns.labels_known);
        assert_eq!(ns.labels_from.as_deref(), Some(FROM_CONFIG));
        assert_eq!(ns.injection.enabled, Some(true));

        mesh.namespaces
            .insert("legacy".into(), NamespaceDecl::default());
        assert_eq!(used("legacy", &mesh).injection.enabled, Some(false));
    }

    /// The model's `conflict` is istioctl's IST0123 test, namespace by namespace of its
    /// analyzer testdata (injection.yaml).
    #[test]
    fn conflict_is_istioctls_multiple_injection_labels() {
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let (inj, rev, mode) = ("istio-injection", "istio.io/rev", "istio.io/dataplane-mode");
        for (name, pairs, conflict) in [
            ("default", vec![(inj, "enabled")], false),
            ("ambient", vec![(mode, "ambient")], false),
            ("foo", vec![(inj, "disabled")], false),
            ("bar", vec![], false),
            ("canary-test", vec![(rev, "canary")], false),
            ("busted", vec![(inj, "enabled"), (rev, "canary")], true),
            (
                "multi-ns-2",
                vec![(inj, "enabled"), (mode, "ambient")],
                true,
            ),
            ("multi-ns-3", vec![(rev, "test"), (mode, "ambient")], true),
            (
                "not-conflict-ns-1",
                vec![(inj, "disabled"), (mode, "ambient")],
                false,
            ),
            (
                "not-conflict-ns-2",
                vec![(inj, "disabled"), (rev, "test")],
                false,
            ),
        ] {
            let got = super::injection_of(&labels(&pairs));
            assert_eq!(got.conflict, conflict, "{name}");
        }
    }

    #[test]
    fn apps_that_disagree_leave_the_labels_unknown() {
        let agree = [
            app("shop", "a", &[("istio-injection", "enabled")]),
            app("shop", "b", &[("istio-injection", "enabled")]),
        ];
        let got = from_apps(&agree, &BTreeMap::new());
        assert_eq!(got[0].injection.enabled, Some(true));
        assert_eq!(
            got[0].labels_resource.as_deref(),
            Some("Application/argocd/a")
        );

        let disagree = [
            app("shop", "a", &[("istio-injection", "enabled")]),
            app("shop", "b", &[("istio-injection", "disabled")]),
        ];
        let got = from_apps(&disagree, &BTreeMap::new());
        assert_eq!(got[0].injection.enabled, None);
        let why = got[0].unknown_reason.clone().unwrap();
        assert!(
            why.contains("Application argocd/a and Application argocd/b"),
            "{why}"
        );

        // A Namespace object of the tree wins over what apps set.
        let mut declared_ns = BTreeMap::new();
        declared_ns.insert(
            "shop".to_string(),
            declared("shop", "Namespace/shop", Labels::new()),
        );
        assert!(from_apps(&agree, &declared_ns).is_empty());
    }
}
