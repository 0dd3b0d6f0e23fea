//! Values an app object takes from other objects of the repository: Flux
//! `HelmRelease.spec.valuesFrom` (ConfigMaps and Secrets), merged in Flux's order.

use crate::manifest::Resource;
use crate::pointer::At;
use base64::Engine;
use serde_json::{Map, Value as Json};
use std::collections::BTreeSet;

/// A `valuesFrom` entry meshward could not resolve in the repository.
pub struct Unresolved {
    /// Its index in `spec.valuesFrom`.
    pub index: usize,
    pub optional: bool,
    /// What is missing, for the PR reader: "values from ConfigMap egress/x key values.yaml are not in this repository".
    pub message: String,
}

/// A values document from an object is bounded like a file of the tree.
const MAX_VALUES_BYTES: usize = 4 * 1024 * 1024;
/// `targetPath` list indexes, bounded as helm bounds `--set` indexes (lower).
const MAX_INDEX: usize = 10_000;

/// The values a HelmRelease passes to helm on top of its values files: each
/// `valuesFrom` entry in order, then `spec.values` (Flux's order); the entries it
/// could not resolve; and the files the resolved ones were read from.
pub fn flux_values(
    hr: &Resource,
    resources: &[&Resource],
) -> (Option<Json>, Vec<Unresolved>, BTreeSet<String>) {
    let ns = hr.namespace.as_deref().unwrap_or("default");
    let mut merged = Json::Object(Map::new());
    let mut any = false;
    let mut unresolved = Vec::new();
    let mut inputs = BTreeSet::new();
    let entries = hr
        .body
        .at("/spec/valuesFrom")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    for (index, entry) in entries.iter().enumerate() {
        let get = |key: &str| entry.get(key).and_then(Json::as_str).unwrap_or_default();
        let (kind, name) = (get("kind"), get("name"));
        let key = Some(get("valuesKey"))
            .filter(|k| !k.is_empty())
            .unwrap_or("values.yaml");
        let optional = entry.get("optional").and_then(Json::as_bool) == Some(true);
        let object = resources.iter().find(|o| {
            o.kind == kind
                && o.api_version == "v1"
                && o.name == name
                && o.namespace.as_deref().unwrap_or("default") == ns
        });
        let resolved = match object {
            None if kind != "ConfigMap" && kind != "Secret" => Err(format!(
                "valuesFrom names a {kind:?}, which is neither a ConfigMap nor a Secret"
            )),
            None => Err(format!(
                "values from {kind} {ns}/{name} (key {key}) are not in this repository"
            )),
            Some(o) => value_of(o, key)
                .ok_or_else(|| format!("{kind} {ns}/{name} in {} has no readable key {key} (missing, not valid base64, or SOPS-encrypted)", o.file))
                .and_then(|text| {
                    inputs.insert(o.file.clone());
                    apply(&mut merged, entry.get("targetPath").and_then(Json::as_str), &text)
                        .map_err(|why| format!("values from {kind} {ns}/{name} key {key} {why}"))
                }),
        };
        match resolved {
            Ok(()) => any = true,
            Err(message) => unresolved.push(Unresolved {
                index,
                optional,
                message,
            }),
        }
    }
    if let Some(values) = hr.body.at("/spec/values").filter(|v| !v.is_null()) {
        merge(&mut merged, values.clone());
        any = true;
    }
    (any.then_some(merged), unresolved, inputs)
}

/// The text under `key` of a ConfigMap (`data`, `binaryData`) or a Secret
/// (`stringData`, `data` in base64).
fn value_of(o: &Resource, key: &str) -> Option<String> {
    let field = |f: &str| {
        o.body
            .get(f)
            .and_then(|d| d.get(key))
            .and_then(Json::as_str)
    };
    let decode = |b64: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let text = match o.kind.as_str() {
        "Secret" => field("stringData")
            .map(str::to_string)
            .or_else(|| field("data").and_then(decode)),
        _ => field("data")
            .map(str::to_string)
            .or_else(|| field("binaryData").and_then(decode)),
    }?;
    (text.len() <= MAX_VALUES_BYTES).then_some(text)
}

/// Merges one resolved entry: a values document at the root, or one flat value at
/// `targetPath`.
fn apply(merged: &mut Json, target: Option<&str>, text: &str) -> Result<(), String> {
    match target.filter(|t| !t.is_empty()) {
        None => {
            let doc: Json =
                yaml_serde::from_str(text).map_err(|e| format!("is not valid YAML ({e})"))?;
            match doc {
                Json::Object(_) => {
                    merge(merged, doc);
                    Ok(())
                }
                Json::Null => Ok(()),
                _ => Err("is not a map of values".to_string()),
            }
        }
        Some(path) => set_path(merged, path, typed(text)),
    }
}

/// Flux merges maps key by key; anything else replaces what was there.
fn merge(into: &mut Json, from: Json) {
    match (into, from) {
        (Json::Object(a), Json::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (into, from) => *into = from,
    }
}

/// A `targetPath` value as Flux parses it (helm's `--set` typing): quoted → the
/// string inside, `true`/`false`/`null`, integers, else a string.
fn typed(text: &str) -> Json {
    let quoted = |q: char| text.len() >= 2 && text.starts_with(q) && text.ends_with(q);
    if quoted('"') || quoted('\'') {
        return Json::from(&text[1..text.len() - 1]);
    }
    match text {
        "true" => Json::Bool(true),
        "false" => Json::Bool(false),
        "null" => Json::Null,
        t if t == "0" || (!t.starts_with('0') && !t.starts_with("-0")) => t
            .parse::<i64>()
            .map(Json::from)
            .unwrap_or_else(|_| Json::from(t)),
        t => Json::from(t),
    }
}

/// Sets `a.b[0].c` (dots escaped as `\.`) in `values`.
fn set_path(values: &mut Json, path: &str, value: Json) -> Result<(), String> {
    let mut steps: Vec<(String, Vec<usize>)> = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    let bad = || format!("cannot be set at targetPath {path:?}");
    let mut segments = Vec::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                current.push('.');
                chars.next();
            }
            '.' => segments.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    segments.push(current);
    for seg in segments {
        let (name, rest) = seg.split_once('[').unwrap_or((&seg, ""));
        let mut indexes = Vec::new();
        if !rest.is_empty() {
            for part in format!("[{rest}").split('[').skip(1) {
                let i = part
                    .strip_suffix(']')
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|i| *i <= MAX_INDEX)
                    .ok_or_else(bad)?;
                indexes.push(i);
            }
        }
        if name.is_empty() {
            return Err(bad());
        }
        steps.push((name.to_string(), indexes));
    }
    let mut node = values;
    for (name, indexes) in steps {
        if !node.is_object() {
            *node = Json::Object(Map::new());
        }
        let Json::Object(map) = node else {
            return Err(bad());
        };
        node = map.entry(name).or_insert(Json::Null);
        for i in indexes {
            if !node.is_array() {
                *node = Json::Array(Vec::new());
            }
            let Json::Array(list) = node else {
                return Err(bad());
            };
            if list.len() <= i {
                list.resize(i + 1, Json::Null);
            }
            node = &mut list[i];
        }
    }
    *node = value;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn target_paths_set_typed_values() {
        let mut v = json!({"a": {"keep": 1}});
        set_path(&mut v, "a.b", typed("3")).expect("set");
        set_path(&mut v, "list[1].x", typed("true")).expect("set");
        set_path(&mut v, r"dotted\.key", typed("'007'")).expect("set");
        assert_eq!(
            v,
            json!({"a": {"keep": 1, "b": 3}, "list": [null, {"x": true}], "dotted.key": "007"})
        );
        assert!(set_path(&mut v, "a[x]", Json::Null).is_err());
        assert_eq!(typed("0123"), json!("0123"));
    }

    #[test]
    fn maps_merge_key_by_key() {
        let mut v = json!({"a": {"b": 1, "c": [1]}, "d": 1});
        merge(&mut v, json!({"a": {"c": [2], "e": 3}, "d": {"x": 1}}));
        assert_eq!(v, json!({"a": {"b": 1, "c": [2], "e": 3}, "d": {"x": 1}}));
    }
}
