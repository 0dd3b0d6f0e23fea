//! Which scopes a change turns STRICT, and so which traffic must be shown to be free
//! of plaintext. Mirrors `introduced_strict` and `scope_namespaces` of
//! policies/lib.rego (the policies judge; this only decides what to ask Prometheus).

use crate::config::MeshConfig;
use crate::model::{Model, PeerAuthn, SYSTEM_NAMESPACES};

/// A PeerAuthentication of head that turns STRICT on for a scope that was not STRICT
/// in base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrictScope {
    /// The PeerAuthentication's id.
    pub resource: String,
    /// `mesh`, `namespace` or `workload`.
    pub scope: String,
    /// `mesh`, `namespace:<ns>` or `workload:<ns>:<labels>` (as in the model).
    pub scope_key: String,
    pub namespace: String,
    /// What the evidence is about: namespaces (mesh and namespace scopes) or the
    /// selected workloads of one namespace (workload scopes).
    pub subject: Subject,
    /// Ports with a port-level STRICT mode (Istio's standard metrics carry no port,
    /// so these are judged on all of the workloads' traffic).
    pub strict_ports: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// All server-side traffic in the mesh, but for namespaces whose own
    /// namespace-wide PeerAuthentication in head keeps them off STRICT. A mesh-wide
    /// policy reaches namespaces this repository does not hold, so the evidence
    /// cannot be the repository's namespaces only.
    Mesh {
        exclude: Vec<String>,
    },
    Namespaces(Vec<String>),
    /// Names of the selected workloads (Istio's `destination_workload` is the name
    /// of the Deployment, StatefulSet, DaemonSet, Job, CronJob or bare Pod).
    Workloads {
        namespace: String,
        names: Vec<String>,
    },
}

/// The STRICT scopes `head` introduces over `base` (every STRICT one without a base).
pub fn introduced_strict(
    head: &Model,
    base: Option<&Model>,
    mesh: &MeshConfig,
) -> Vec<StrictScope> {
    let mut out: Vec<StrictScope> = head
        .peer_authentications
        .iter()
        .filter(|pa| pa.strict)
        .filter(|pa| base.is_none_or(|b| base_scope_mode(pa, b) != "STRICT"))
        .map(|pa| StrictScope {
            resource: pa.resource.clone(),
            scope: pa.scope.clone(),
            scope_key: pa.scope_key.clone(),
            namespace: pa.namespace.clone(),
            subject: subject(pa, head, mesh),
            strict_ports: pa
                .port_modes
                .iter()
                .filter(|(_, m)| *m == "STRICT")
                .map(|(p, _)| p.clone())
                .collect(),
        })
        .collect();
    out.sort_by(|a, b| a.resource.cmp(&b.resource));
    out
}

fn subject(pa: &PeerAuthn, head: &Model, mesh: &MeshConfig) -> Subject {
    match pa.scope.as_str() {
        "mesh" => {
            let mut exclude: Vec<String> = head
                .peer_authentications
                .iter()
                .filter(|p| p.scope == "namespace" && p.namespace != mesh.root_namespace)
                .filter(|p| !p.strict && matches!(p.mode.as_str(), "PERMISSIVE" | "DISABLE"))
                .map(|p| p.namespace.clone())
                .collect();
            exclude.extend(SYSTEM_NAMESPACES.iter().map(|s| s.to_string()));
            exclude.sort();
            exclude.dedup();
            Subject::Mesh { exclude }
        }
        "workload" => {
            let mut names: Vec<String> = head
                .workloads
                .iter()
                .filter(|w| pa.workloads.contains(&w.id))
                .map(|w| w.name.clone())
                .collect();
            names.sort();
            names.dedup();
            Subject::Workloads {
                namespace: pa.namespace.clone(),
                names,
            }
        }
        _ => Subject::Namespaces(vec![pa.namespace.clone()]),
    }
}

/// The mode the PeerAuthentication's scope had in base: its own, else what it
/// inherited, Istio's default PERMISSIVE last (lib.rego `base_scope_mode`).
fn base_scope_mode(pa: &PeerAuthn, base: &Model) -> String {
    let set = |m: Option<&String>| m.filter(|m| *m != "UNSET").cloned();
    if let Some(m) = set(base.mtls_scopes.get(&pa.scope_key)) {
        return m;
    }
    if pa.scope == "mesh" {
        return "PERMISSIVE".into();
    }
    if let Some(m) = set(base.namespaces.get(&pa.namespace).map(|n| &n.mtls.mode)) {
        return m;
    }
    set(base.mtls_scopes.get("mesh")).unwrap_or_else(|| "PERMISSIVE".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{load, Limits, SourceFile};

    fn model(yaml: &str, base: Option<&Model>) -> Model {
        let files = [SourceFile {
            path: "m.yaml".into(),
            bytes: yaml.as_bytes().to_vec(),
        }];
        let loaded = load(&files, &Limits::default());
        crate::model::build(&loaded.resources, &MeshConfig::default(), base)
    }

    const WORKLOADS: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: web, labels: {istio-injection: enabled}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: cart, namespace: shop}\nspec: {template: {metadata: {labels: {app: cart}}, spec: {containers: [{name: c, image: i}]}}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: front, namespace: web}\nspec: {template: {metadata: {labels: {app: front}}, spec: {containers: [{name: c, image: i}]}}}\n";

    fn pa(ns: &str, name: &str, spec: &str) -> String {
        format!("---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n")
    }

    #[test]
    fn mesh_namespace_workload_and_port_scopes() {
        let base = model(WORKLOADS, None);
        let head = model(
            &format!(
                "{WORKLOADS}{}{}{}{}",
                pa("istio-system", "mesh", "{mtls: {mode: STRICT}}"),
                pa("legacy", "default", "{mtls: {mode: PERMISSIVE}}"),
                pa("shop", "cart", "{selector: {matchLabels: {app: cart}}, portLevelMtls: {\"8080\": {mode: STRICT}}}"),
                pa("web", "default", "{mtls: {mode: STRICT}}"),
            ),
            Some(&base),
        );
        let scopes = introduced_strict(&head, Some(&base), &MeshConfig::default());
        let by: Vec<(&str, &Subject)> = scopes
            .iter()
            .map(|s| (s.scope_key.as_str(), &s.subject))
            .collect();
        assert_eq!(
            by,
            vec![
                (
                    "mesh",
                    &Subject::Mesh {
                        exclude: vec![
                            "kube-node-lease".into(),
                            "kube-public".into(),
                            "kube-system".into(),
                            "legacy".into()
                        ]
                    }
                ),
                (
                    "workload:shop:app=cart",
                    &Subject::Workloads {
                        namespace: "shop".into(),
                        names: vec!["cart".into()]
                    }
                ),
                ("namespace:web", &Subject::Namespaces(vec!["web".into()])),
            ]
        );
        assert_eq!(scopes[1].strict_ports, vec!["8080"]);
        // Already STRICT in base: nothing introduced.
        let again = model(
            &format!(
                "{WORKLOADS}{}",
                pa("web", "default", "{mtls: {mode: STRICT}}")
            ),
            Some(&head),
        );
        assert!(introduced_strict(&again, Some(&head), &MeshConfig::default()).is_empty());
    }
}
