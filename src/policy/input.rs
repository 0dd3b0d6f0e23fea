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

/// [`policy_value`] of head's model, what base's model holds alike (most of it, in
/// a pull request) taken from `base`'s value (that of base's model) instead of built
/// again: the workloads, identities, service accounts, selectors and namespaces are
/// nearly all of what a model's value costs (at 100k objects, 250 ms for head's).
pub(crate) fn policy_value_against(
    model: &Model,
    (base, base_value): (&Model, &regorus::Value),
) -> regorus::Value {
    use regorus::Value;
    let mut strings = Strings::default();
    let Value::Object(base_fields) = base_value else {
        return policy_value(model);
    };
    let field = |name: &str| base_fields.get(&Value::from(name));
    let mut given = Vec::new();
    if let Some(Value::Array(values)) = field("workloads") {
        let list = shared_list(
            &model.workloads,
            &base.workloads,
            values,
            |w| &w.id,
            &mut strings,
        );
        given.extend(list.map(|v| ("workloads", v)));
    }
    if let Some(Value::Array(values)) = field("selectors") {
        let list = shared_list(
            &model.selectors,
            &base.selectors,
            values,
            |s| &s.resource,
            &mut strings,
        );
        given.extend(list.map(|v| ("selectors", v)));
    }
    if let Some(Value::Object(values)) = field("identities") {
        let map = shared_map(&model.identities, &base.identities, values, &mut strings);
        given.push(("identities", map));
    }
    if let Some(Value::Object(values)) = field("service_accounts") {
        let map = shared_map(
            &model.service_accounts,
            &base.service_accounts,
            values,
            &mut strings,
        );
        given.push(("service_accounts", map));
    }
    if let Some(Value::Object(values)) = field("namespaces") {
        let map = shared_map(&model.namespaces, &base.namespaces, values, &mut strings);
        given.push(("namespaces", map));
    }
    super::value::to_value_given(model, &mut strings, given).unwrap_or(Value::Null)
}

/// `head` as a policy value, each item base holds alike (the same id, equal) taken
/// from `base_values`, base's value. None where those are not base's.
fn shared_list<T: PartialEq + serde::Serialize>(
    head: &[T],
    base: &[T],
    base_values: &regorus::value::Array,
    id: impl Fn(&T) -> &str,
    strings: &mut Strings,
) -> Option<regorus::Value> {
    if base_values.len() != base.len() {
        return None;
    }
    let mut at: foldhash::HashMap<&str, Vec<usize>> = foldhash::HashMap::default();
    for (i, item) in base.iter().enumerate() {
        at.entry(id(item)).or_default().push(i);
    }
    let values: Vec<regorus::Value> = head
        .iter()
        .map(|item| {
            let alike = at
                .get(id(item))
                .and_then(|copies| copies.iter().find(|&&i| base[i] == *item));
            match alike.and_then(|&i| base_values.get(i)) {
                Some(v) => v.clone(),
                None => to_value_sharing(item, strings).unwrap_or(regorus::Value::Null),
            }
        })
        .collect();
    Some(regorus::Value::from(values))
}

/// `head` as a policy value, each entry base holds alike taken from `base_values`,
/// base's value. All three are walked once in key order (a value's keys sort as
/// their text does); looking each key up cost as much as building the entry.
fn shared_map<T: PartialEq + serde::Serialize>(
    head: &std::collections::BTreeMap<String, T>,
    base: &std::collections::BTreeMap<String, T>,
    base_values: &regorus::value::Object,
    strings: &mut Strings,
) -> regorus::Value {
    let mut before = base.iter().zip(base_values.iter_sorted()).peekable();
    let values: std::collections::BTreeMap<regorus::Value, regorus::Value> = head
        .iter()
        .map(|(name, item)| {
            while before.next_if(|((b, _), _)| *b < name).is_some() {}
            let alike = before
                .next_if(|((b, _), (key, _))| {
                    *b == name && key.as_string().is_ok_and(|k| **k == **name)
                })
                .filter(|((_, b), _)| *b == item);
            match alike {
                Some((_, (key, value))) => (key.clone(), value.clone()),
                None => (
                    strings.value(name),
                    to_value_sharing(item, strings).unwrap_or(regorus::Value::Null),
                ),
            }
        })
        .collect();
    regorus::Value::from(values)
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

    /// Head's model value, built against base's, is the value it has on its own:
    /// the workloads base holds alike are taken from base's, the others built.
    #[test]
    fn a_model_value_built_against_base_is_its_own_value() {
        let files = crate::manifest::fixture_files("ambient/mixed", "");
        let loaded = load(&files, &Limits::default());
        let base = crate::model::build(&loaded.resources, &Default::default(), None);
        let mut resources = loaded.resources.clone();
        let at = resources
            .iter()
            .position(|r| r.kind == "Deployment")
            .expect("a Deployment");
        let mut body = (*resources[at].body).clone();
        body["spec"]["template"]["spec"]["serviceAccountName"] = "changed".into();
        resources[at].body = Arc::new(body);
        resources.truncate(resources.len() - 1);
        let head = crate::model::build(&resources, &Default::default(), Some(&base));
        assert!(head.workloads.len() > 2, "{}", head.workloads.len());
        assert_ne!(policy_value(&head), policy_value(&base));
        let base_value = policy_value(&base);
        assert_eq!(
            policy_value_against(&head, (&base, &base_value)),
            policy_value(&head)
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
