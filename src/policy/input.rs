//! The Rego input of one revision: resources (listed and by kind), the mesh model,
//! base's model for change rules, evidence and mesh config. See docs/policy-input.md.

use super::value::{to_value_sharing, Strings};
use crate::config::RepoConfig;
use crate::evidence::Evidence;
use crate::manifest::Resource;
use crate::model::Model;
use std::sync::Arc;

/// The Rego input: resources (shared between `resources` and `by_kind`), models,
/// evidence and mesh config. See docs/policy-input.md.
/// A model as a policy value, built directly (neither a serde_json tree nor JSON
/// text of it), its repeated strings shared.
pub(crate) fn policy_value(model: &Model) -> regorus::Value {
    super::value::to_value(model).unwrap_or(regorus::Value::Null)
}

/// The policy values of resource bodies, built once for each body base and head share
/// (every object of a file the change leaves alone).
#[derive(Default)]
pub(crate) struct BodyValues {
    /// By the body's address; the `Arc` is held so that the address is not reused.
    values: std::collections::HashMap<usize, (Arc<serde_json::Value>, regorus::Value)>,
}

impl BodyValues {
    pub(crate) fn of<'a>(resources: impl Iterator<Item = &'a Resource>) -> BodyValues {
        use rayon::prelude::*;
        let mut unique: std::collections::HashMap<usize, &Arc<serde_json::Value>> =
            Default::default();
        for r in resources {
            unique
                .entry(Arc::as_ptr(&r.body) as usize)
                .or_insert(&r.body);
        }
        let unique: Vec<(usize, &Arc<serde_json::Value>)> = unique.into_iter().collect();
        let values = unique
            .into_par_iter()
            .map_init(Strings::default, |strings, (at, body)| {
                (at, (body.clone(), body_value(body, strings)))
            })
            .collect();
        BodyValues { values }
    }

    fn get(&self, body: &Arc<serde_json::Value>) -> regorus::Value {
        match self.values.get(&(Arc::as_ptr(body) as usize)) {
            Some((_, v)) => v.clone(),
            None => body_value(body, &mut Strings::default()),
        }
    }

    /// The bodies it holds, for the caller to free.
    pub(crate) fn into_bodies(self) -> impl Iterator<Item = Arc<serde_json::Value>> {
        self.values.into_values().map(|(body, _)| body)
    }

    /// The policy values of `resources`' bodies, in their order.
    pub(crate) fn of_each(&self, resources: &[Resource]) -> Vec<regorus::Value> {
        resources.iter().map(|r| self.get(&r.body)).collect()
    }
}

/// A body as a policy value, its strings shared with the bodies before it.
fn body_value(body: &serde_json::Value, strings: &mut Strings) -> regorus::Value {
    to_value_sharing(body, strings).unwrap_or(regorus::Value::Null)
}

/// One resource as a policy value, built straight from its parsed body: going through
/// a `json!` object first would copy every body once more.
fn resource_value(r: &Resource, body: regorus::Value, strings: &mut Strings) -> regorus::Value {
    use regorus::Value;
    let mut fields = std::collections::BTreeMap::new();
    let mut text = |k: &str, v: &str| (strings.value(k), strings.value(v));
    for (k, v) in [
        text("id", &r.id),
        text("apiVersion", &r.api_version),
        text("kind", &r.kind),
        text("name", &r.name),
        text("file", &r.file),
    ] {
        fields.insert(k, v);
    }
    fields.insert(
        strings.value("namespace"),
        r.namespace
            .as_deref()
            .map(|n| strings.value(n))
            .unwrap_or(Value::Null),
    );
    fields.insert(strings.value("body"), body);
    fields.insert(strings.value("line"), Value::from(u64::from(r.line)));
    Value::from(fields)
}

/// A revision's policy input in parts, so that inputs holding only some of its
/// resources (and all of the rest: models, evidence, config) cost no copy.
pub(crate) struct InputParts {
    /// Each resource's kind and policy value, in the revision's order.
    resources: Vec<(String, regorus::Value)>,
    /// `model`, `base`, `evidence` and `config`.
    common: Vec<(regorus::Value, regorus::Value)>,
}

impl InputParts {
    /// `bodies` are the policy values of `resources`' bodies, in their order.
    /// `model` gives the revision's model as a policy value: it is built beside the
    /// resources' values.
    pub(crate) fn new(
        resources: &[Resource],
        bodies: Vec<regorus::Value>,
        model: impl FnOnce() -> regorus::Value + Send,
        base: Option<&regorus::Value>,
        evidence: Option<&Evidence>,
        config: &RepoConfig,
    ) -> InputParts {
        use regorus::Value;
        let (model, resources) = rayon::join(model, || {
            let mut strings = Strings::default();
            resources
                .iter()
                .zip(bodies)
                .map(|(r, body)| (r.kind.clone(), resource_value(r, body, &mut strings)))
                .collect()
        });
        let to_value = |j: serde_json::Value| Value::from(j);
        let common = vec![
            (Value::from("model"), model),
            (Value::from("base"), base.cloned().unwrap_or(Value::Null)),
            (
                Value::from("evidence"),
                evidence
                    .map(|e| to_value(serde_json::to_value(e).unwrap_or_default()))
                    .unwrap_or(Value::Null),
            ),
            (
                Value::from("config"),
                to_value(serde_json::json!({ "mesh": config.mesh })),
            ),
        ];
        InputParts { resources, common }
    }

    pub(crate) fn len(&self) -> usize {
        self.resources.len()
    }

    /// The input with the resources at `which` (indices in the revision's order),
    /// listed and by kind.
    pub(crate) fn input(&self, which: impl IntoIterator<Item = usize>) -> regorus::Value {
        use regorus::Value;
        let mut all = Vec::new();
        let mut by_kind: std::collections::BTreeMap<&str, Vec<Value>> = Default::default();
        for (kind, v) in which.into_iter().filter_map(|i| self.resources.get(i)) {
            by_kind.entry(kind).or_default().push(v.clone());
            all.push(v.clone());
        }
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
            for (k, v) in &self.common {
                map.insert(k.clone(), v.clone());
            }
        }
        input
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{load, Limits, SourceFile};

    #[test]
    fn a_model_value_is_the_model_as_json_text_reads_back() {
        let files = crate::manifest::fixture_files("ambient/mixed", "");
        let loaded = load(&files, &Limits::default());
        assert!(loaded.resources.len() > 10, "{}", loaded.resources.len());
        let model = crate::model::build(&loaded.resources, &Default::default(), None);
        let text = serde_json::to_string(&model).expect("json");
        assert_eq!(
            policy_value(&model),
            regorus::Value::from_json_str(&text).expect("value")
        );
    }

    #[test]
    fn a_resource_value_is_its_json_as_policies_read_it() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n  labels: {app: web, tier: \"2\"}\nspec:\n  ports:\n    - {name: http, port: 80, targetPort: 8080}\n  weight: 0.5\n  offset: -3\n  big: 18446744073709551615\n  external: null\n  flags: [true, false]\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
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
            assert_eq!(
                resource_value(
                    r,
                    BodyValues::default().get(&r.body),
                    &mut Strings::default()
                ),
                through_json,
                "{}",
                r.id
            );
            let shared = BodyValues::of(loaded.resources.iter());
            let mut strings = Strings::default();
            assert_eq!(
                resource_value(r, shared.get(&r.body), &mut strings),
                through_json,
                "{}",
                r.id
            );
        }
    }
}
