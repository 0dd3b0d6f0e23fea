//! The Rego input of one revision: resources (listed and by kind), the mesh model,
//! base's model for change rules, evidence and mesh config. See docs/policy-input.md.

use crate::config::RepoConfig;
use crate::evidence::Evidence;
use crate::manifest::Resource;
use crate::model::Model;

/// The Rego input: resources (shared between `resources` and `by_kind`), models,
/// evidence and mesh config. See docs/policy-input.md.
/// A model as a policy value, through JSON text: a serde_json tree of the model would
/// double the memory the conversion needs.
pub(crate) fn policy_value(model: &Model) -> regorus::Value {
    serde_json::to_string(model)
        .ok()
        .and_then(|text| regorus::Value::from_json_str(&text).ok())
        .unwrap_or(regorus::Value::Null)
}

/// One resource as a policy value, built straight from its parsed body: going through
/// a `json!` object first would copy every body once more.
fn resource_value(r: &Resource) -> regorus::Value {
    use regorus::Value;
    use serde::Deserialize;
    let text = |s: &str| Value::from(s);
    let mut v = Value::new_object();
    if let Ok(map) = v.as_object_mut() {
        map.insert(text("id"), text(&r.id));
        map.insert(text("apiVersion"), text(&r.api_version));
        map.insert(text("kind"), text(&r.kind));
        map.insert(
            text("namespace"),
            r.namespace.as_deref().map(text).unwrap_or(Value::Null),
        );
        map.insert(text("name"), text(&r.name));
        map.insert(
            text("body"),
            Value::deserialize(&r.body).unwrap_or(Value::Null),
        );
        map.insert(text("file"), text(&r.file));
        map.insert(text("line"), Value::from(u64::from(r.line)));
    }
    v
}

pub(crate) fn build_input(
    resources: &[Resource],
    model: regorus::Value,
    base: Option<&regorus::Value>,
    evidence: Option<&Evidence>,
    config: &RepoConfig,
) -> regorus::Value {
    use regorus::Value;
    let mut all = Vec::with_capacity(resources.len());
    let mut by_kind: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for r in resources {
        let v = resource_value(r);
        by_kind.entry(r.kind.clone()).or_default().push(v.clone());
        all.push(v);
    }
    let to_value = |j: serde_json::Value| Value::from(j);
    let mut input = Value::new_object();
    if let Ok(map) = input.as_object_mut() {
        map.insert(Value::from("resources"), Value::from(all));
        let mut kinds = Value::new_object();
        if let Ok(k) = kinds.as_object_mut() {
            for (kind, list) in by_kind {
                k.insert(Value::from(kind), Value::from(list));
            }
        }
        map.insert(Value::from("by_kind"), kinds);
        map.insert(Value::from("model"), model);
        map.insert(Value::from("base"), base.cloned().unwrap_or(Value::Null));
        map.insert(
            Value::from("evidence"),
            evidence
                .map(|e| to_value(serde_json::to_value(e).unwrap_or_default()))
                .unwrap_or(Value::Null),
        );
        map.insert(
            Value::from("config"),
            to_value(serde_json::json!({ "mesh": config.mesh })),
        );
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{load, Limits, SourceFile};

    #[test]
    fn a_resource_value_is_its_json_as_policies_read_it() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n  labels: {app: web, tier: \"2\"}\nspec:\n  ports:\n    - {name: http, port: 80, targetPort: 8080}\n  weight: 0.5\n  external: null\n  flags: [true, false]\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
        let loaded = load(
            &[SourceFile {
                path: "shop/web.yaml".into(),
                bytes: text.as_bytes().to_vec(),
            }],
            &Limits::default(),
        );
        assert_eq!(loaded.resources.len(), 2);
        for r in &loaded.resources {
            let through_json = regorus::Value::from(serde_json::json!({
                "id": r.id, "apiVersion": r.api_version, "kind": r.kind,
                "namespace": r.namespace, "name": r.name, "body": r.body,
                "file": r.file, "line": r.line,
            }));
            assert_eq!(resource_value(r), through_json, "{}", r.id);
        }
    }
}
