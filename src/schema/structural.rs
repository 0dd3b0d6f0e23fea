//! A CRD's OpenAPI v3 schema as the API server applies it, not as JSON Schema reads it:
//! `nullable`, `x-kubernetes-int-or-string`, unknown fields dropped unless
//! `x-kubernetes-preserve-unknown-fields`, null fields without `nullable` pruned
//! before validation, `x-kubernetes-list-type` keys unique, and the CEL rules
//! (`x-kubernetes-validations`) of every node walked in the same pass.

use super::cel::{self, Rule};
use serde_json::Value as Json;

/// Nesting a schema may have; deeper is refused as the CRD's own problem.
const MAX_DEPTH: usize = 64;
/// Nodes in one version's schema.
const MAX_NODES: usize = 50_000;
/// A `pattern` compiled larger than this is refused (the regex crate runs in linear
/// time; this bounds its memory).
const MAX_PATTERN_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Ty {
    fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "object" => Ty::Object,
            "array" => Ty::Array,
            "string" => Ty::String,
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "boolean" => Ty::Boolean,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Boolean => "boolean",
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Node {
    pub(crate) ty: Option<Ty>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded: bool,
    /// Sorted by name.
    pub(crate) properties: Vec<(String, Node)>,
    pub(crate) additional: Option<Box<Node>>,
    pub(crate) items: Option<Box<Node>>,
    required: Vec<String>,
    enumeration: Option<Vec<Json>>,
    pattern: Option<(String, regex::Regex)>,
    format: Option<String>,
    minimum: Option<(f64, bool)>,
    maximum: Option<(f64, bool)>,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    unique_items: bool,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    one_of: Vec<Node>,
    any_of: Vec<Node>,
    all_of: Vec<Node>,
    not: Option<Box<Node>>,
    pub(crate) default: Option<Json>,
    /// Some node at or below this one has a `default`.
    defaults_below: bool,
    pub(crate) rules: Vec<Rule>,
}

/// One thing the API server refuses: where, and what.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Violation {
    pub(crate) path: Vec<Json>,
    pub(crate) message: String,
    /// A CEL rule meshward could not evaluate: not a refusal, a gap.
    pub(crate) unchecked: bool,
    /// From a CEL rule (`x-kubernetes-validations`) rather than the schema's types.
    pub(crate) by_rule: bool,
}

/// Where in the CRD's schema a problem is: the schema path, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaError {
    pub(crate) at: String,
    pub(crate) message: String,
}

struct Compiler<'e> {
    nodes: usize,
    errors: &'e mut Vec<SchemaError>,
    cel: &'e cel::Compiler,
}

/// Compiles one version's `openAPIV3Schema`. What in it the API server would refuse
/// (an unknown type, a pattern that does not compile, a CEL rule that does not parse)
/// is returned beside the parts that did compile.
pub(crate) fn compile(schema: &Json, cel: &cel::Compiler) -> (Node, Vec<SchemaError>) {
    let mut errors = Vec::new();
    let mut c = Compiler {
        nodes: 0,
        errors: &mut errors,
        cel,
    };
    let node = c.node(schema, "openAPIV3Schema", 0);
    (node, errors)
}

impl Compiler<'_> {
    fn error(&mut self, at: &str, message: impl Into<String>) {
        if self.errors.len() < 100 {
            self.errors.push(SchemaError {
                at: at.to_string(),
                message: message.into(),
            });
        }
    }

    fn node(&mut self, s: &Json, at: &str, depth: usize) -> Node {
        let mut n = Node::default();
        self.nodes += 1;
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            if self.nodes == MAX_NODES + 1 || depth == MAX_DEPTH + 1 {
                self.error(at, format!("the schema is nested deeper than {MAX_DEPTH} levels or has more than {MAX_NODES} nodes; meshward checks no further"));
            }
            n.preserve_unknown = true;
            return n;
        }
        let Some(obj) = s.as_object() else {
            self.error(at, "a schema must be an object");
            n.preserve_unknown = true;
            return n;
        };
        if obj.contains_key("$ref") {
            self.error(
                at,
                "`$ref` is not allowed in a structural schema (the API server refuses the CRD)",
            );
        }
        let flag = |k: &str| obj.get(k).and_then(Json::as_bool).unwrap_or(false);
        n.nullable = flag("nullable");
        n.int_or_string = flag("x-kubernetes-int-or-string");
        n.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields");
        n.embedded = flag("x-kubernetes-embedded-resource");
        n.unique_items = flag("uniqueItems");
        if let Some(t) = obj.get("type") {
            match t.as_str().and_then(Ty::parse) {
                Some(t) => n.ty = Some(t),
                None => self.error(&format!("{at}.type"), format!("unknown type {t}")),
            }
        }
        let num = |k: &str| obj.get(k).and_then(Json::as_f64);
        let count = |k: &str| obj.get(k).and_then(Json::as_u64);
        n.minimum = num("minimum").map(|v| (v, flag("exclusiveMinimum")));
        n.maximum = num("maximum").map(|v| (v, flag("exclusiveMaximum")));
        n.multiple_of = num("multipleOf").filter(|m| *m > 0.0);
        n.min_length = count("minLength");
        n.max_length = count("maxLength");
        n.min_items = count("minItems");
        n.max_items = count("maxItems");
        n.min_properties = count("minProperties");
        n.max_properties = count("maxProperties");
        n.format = obj.get("format").and_then(Json::as_str).map(str::to_string);
        n.default = obj.get("default").cloned();
        n.enumeration = obj.get("enum").and_then(Json::as_array).cloned();
        let strings = |k: &str| -> Vec<String> {
            obj.get(k)
                .and_then(Json::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Json::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        n.required = strings("required");
        n.list_type = obj
            .get("x-kubernetes-list-type")
            .and_then(Json::as_str)
            .map(str::to_string);
        n.list_map_keys = strings("x-kubernetes-list-map-keys");
        if let Some(p) = obj.get("pattern").and_then(Json::as_str) {
            match regex::RegexBuilder::new(p)
                .size_limit(MAX_PATTERN_BYTES)
                .build()
            {
                Ok(re) => n.pattern = Some((p.to_string(), re)),
                Err(e) => self.error(
                    &format!("{at}.pattern"),
                    format!("pattern {p:?} does not compile: {e}"),
                ),
            }
        }
        if let Some(props) = obj.get("properties").and_then(Json::as_object) {
            for (k, v) in props {
                let child = self.node(v, &format!("{at}.properties.{k}"), depth + 1);
                n.properties.push((k.clone(), child));
            }
            n.properties.sort_by(|a, b| a.0.cmp(&b.0));
        }
        match obj.get("additionalProperties") {
            Some(Json::Object(_)) => {
                let v = &obj["additionalProperties"];
                n.additional = Some(Box::new(self.node(
                    v,
                    &format!("{at}.additionalProperties"),
                    depth + 1,
                )));
            }
            Some(Json::Bool(true)) => n.preserve_unknown = true,
            _ => {}
        }
        if let Some(items) = obj.get("items") {
            n.items = Some(Box::new(self.node(
                items,
                &format!("{at}.items"),
                depth + 1,
            )));
        }
        for (key, into) in [
            ("oneOf", &mut n.one_of),
            ("anyOf", &mut n.any_of),
            ("allOf", &mut n.all_of),
        ] {
            if let Some(list) = obj.get(key).and_then(Json::as_array) {
                for (i, s) in list.iter().enumerate() {
                    into.push(self.node(s, &format!("{at}.{key}[{i}]"), depth + 1));
                }
            }
        }
        if let Some(not) = obj.get("not") {
            n.not = Some(Box::new(self.node(not, &format!("{at}.not"), depth + 1)));
        }
        n.defaults_below = n.default.is_some()
            || n.properties.iter().any(|p| p.1.defaults_below)
            || n.additional.as_ref().is_some_and(|a| a.defaults_below)
            || n.items.as_ref().is_some_and(|i| i.defaults_below);
        if let Some(rules) = obj.get("x-kubernetes-validations").and_then(Json::as_array) {
            for (i, r) in rules.iter().enumerate() {
                let where_ = format!("{at}.x-kubernetes-validations[{i}]");
                match self.cel.rule(r) {
                    Ok(rule) => n.rules.push(rule),
                    Err(message) => self.error(&where_, message),
                }
            }
        }
        n
    }
}

/// The field a violation is about, as `spec.ports[0].number`.
pub(crate) fn field_name(path: &[Json]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            Json::String(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            other => s.push_str(&format!("[{other}]")),
        }
    }
    s
}

/// Validates an object (the whole document) against a version's schema. Past
/// `max_violations` the rest is left out.
pub(crate) fn validate(
    root: &Node,
    object: &Json,
    eval: &mut cel::Evaluator,
    max_violations: usize,
) -> Vec<Violation> {
    eval.start_object();
    let mut v = Validator {
        out: Vec::new(),
        eval,
        max: max_violations,
    };
    let mut path = Vec::new();
    // The API server fills in defaults before it validates: a oneOf branch or a rule
    // may hinge on a defaulted field.
    if root.defaults_below {
        let mut defaulted = object.clone();
        fill_defaults(root, &mut defaulted);
        v.walk(root, &defaulted, &mut path, true, true);
    } else {
        v.walk(root, object, &mut path, true, true);
    }
    v.out
}

/// Sets the schema's `default` of every absent field, at every level.
fn fill_defaults(s: &Node, v: &mut Json) {
    if !s.defaults_below {
        return;
    }
    match v {
        Json::Object(map) => {
            for (k, child) in &s.properties {
                match map.get_mut(k) {
                    Some(value) if !value.is_null() => fill_defaults(child, value),
                    _ => {
                        if let Some(d) = &child.default {
                            let mut d = d.clone();
                            fill_defaults(child, &mut d);
                            map.insert(k.clone(), d);
                        }
                    }
                }
            }
            if let Some(a) = &s.additional {
                for (k, value) in map.iter_mut() {
                    if s.properties
                        .binary_search_by(|p| p.0.as_str().cmp(k))
                        .is_err()
                    {
                        fill_defaults(a, value);
                    }
                }
            }
        }
        Json::Array(items) => {
            if let Some(item) = &s.items {
                for i in items {
                    fill_defaults(item, i);
                }
            }
        }
        _ => {}
    }
}

struct Validator<'a, 'e> {
    out: Vec<Violation>,
    eval: &'a mut cel::Evaluator<'e>,
    max: usize,
}

/// JSON numbers as the API server compares them.
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(77).collect();
        format!("{cut}...")
    } else {
        s
    }
}

fn type_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn is_integer(v: &Json) -> bool {
    match v {
        Json::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

impl Validator<'_, '_> {
    fn full(&self) -> bool {
        self.out.len() >= self.max
    }

    fn push(&mut self, path: &[Json], message: String) {
        if !self.full() {
            self.out.push(Violation {
                path: path.to_vec(),
                message,
                unchecked: false,
                by_rule: false,
            });
        }
    }

    /// `fields`: report fields the schema does not know (off inside oneOf/anyOf/
    /// allOf/not, which only constrain values). `rules`: evaluate CEL rules.
    fn walk(&mut self, s: &Node, v: &Json, path: &mut Vec<Json>, fields: bool, rules: bool) {
        if self.full() {
            return;
        }
        if v.is_null() {
            if !s.nullable {
                self.push(
                    path,
                    format!(
                        "must be of type {}, not null",
                        s.ty.map(Ty::name).unwrap_or("a value")
                    ),
                );
            }
            return;
        }
        if !self.type_ok(s, v, path) {
            return;
        }
        if let Some(values) = &s.enumeration {
            if !values.iter().any(|e| same(e, v)) {
                let allowed: Vec<String> = values.iter().map(short).collect();
                self.push(
                    path,
                    format!(
                        "{} is not one of the allowed values: {}",
                        short(v),
                        allowed.join(", ")
                    ),
                );
            }
        }
        match v {
            Json::String(text) => self.string(s, text, path),
            Json::Number(_) => self.number(s, v, path),
            Json::Array(items) => self.array(s, items, path, fields, rules),
            Json::Object(map) => self.object(s, map, path, fields, rules),
            _ => {}
        }
        self.combinators(s, v, path);
        if rules && !s.rules.is_empty() {
            let room = self.max.saturating_sub(self.out.len());
            let found = self.eval.run(&s.rules, s, v, path);
            self.out.extend(found.into_iter().take(room));
        }
    }

    fn type_ok(&mut self, s: &Node, v: &Json, path: &[Json]) -> bool {
        if s.int_or_string {
            if !(is_integer(v) || v.is_string()) {
                self.push(
                    path,
                    format!("must be an integer or a string, not {}", type_of(v)),
                );
                return false;
            }
            return true;
        }
        let Some(ty) = s.ty else { return true };
        let ok = match ty {
            Ty::Object => v.is_object(),
            Ty::Array => v.is_array(),
            Ty::String => v.is_string(),
            Ty::Integer => is_integer(v),
            Ty::Number => v.is_number(),
            Ty::Boolean => v.is_boolean(),
        };
        if !ok {
            self.push(
                path,
                format!(
                    "must be of type {}, not {} {}",
                    ty.name(),
                    type_of(v),
                    short(v)
                ),
            );
        }
        ok
    }

    /// minLength/maxLength, minItems/maxItems, minProperties/maxProperties.
    fn bounds(
        &mut self,
        path: &[Json],
        n: u64,
        (min, max): (Option<u64>, Option<u64>),
        unit: &str,
    ) {
        if let Some(min) = min {
            if n < min {
                self.push(
                    path,
                    if n == 0 {
                        format!("may not be empty (at least {min} {unit})")
                    } else {
                        format!("must have at least {min} {unit} (has {n})")
                    },
                );
            }
        }
        if let Some(max) = max {
            if n > max {
                self.push(path, format!("may have at most {max} {unit} (has {n})"));
            }
        }
    }

    fn string(&mut self, s: &Node, text: &str, path: &[Json]) {
        let len = text.chars().count() as u64;
        self.bounds(path, len, (s.min_length, s.max_length), "characters");
        if let Some((p, re)) = &s.pattern {
            if !re.is_match(text) {
                self.push(
                    path,
                    format!(
                        "{} does not match the pattern {p}",
                        short(&Json::from(text))
                    ),
                );
            }
        }
        if let Some(f) = &s.format {
            if let Some(problem) = super::formats::check(f, text) {
                self.push(
                    path,
                    format!("{} is not a valid {f}: {problem}", short(&Json::from(text))),
                );
            }
        }
    }

    fn number(&mut self, s: &Node, v: &Json, path: &[Json]) {
        let Some(x) = v.as_f64() else { return };
        if let Some((min, exclusive)) = s.minimum {
            if x < min || (exclusive && x == min) {
                let op = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.push(path, format!("{v} must be {op} {min}"));
            }
        }
        if let Some((max, exclusive)) = s.maximum {
            if x > max || (exclusive && x == max) {
                let op = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.push(path, format!("{v} must be {op} {max}"));
            }
        }
        if let Some(m) = s.multiple_of {
            if (x / m).fract() != 0.0 {
                self.push(path, format!("{v} must be a multiple of {m}"));
            }
        }
        if s.format.as_deref() == Some("int32") && !(i32::MIN as f64..=i32::MAX as f64).contains(&x)
        {
            self.push(
                path,
                format!("{v} does not fit in a 32-bit integer (format int32)"),
            );
        }
    }

    fn array(&mut self, s: &Node, items: &[Json], path: &mut Vec<Json>, fields: bool, rules: bool) {
        let n = items.len() as u64;
        self.bounds(path, n, (s.min_items, s.max_items), "items");
        let set = s.unique_items || s.list_type.as_deref() == Some("set");
        if set {
            for (i, item) in items.iter().enumerate() {
                if items[..i].iter().any(|earlier| same(earlier, item)) {
                    path.push(Json::from(i));
                    self.push(
                        path,
                        format!("duplicate value {}: the list is a set", short(item)),
                    );
                    path.pop();
                }
            }
        }
        if s.list_type.as_deref() == Some("map") && !s.list_map_keys.is_empty() {
            let key = |item: &Json| -> Vec<Json> {
                s.list_map_keys
                    .iter()
                    .map(|k| item.get(k).cloned().unwrap_or(Json::Null))
                    .collect()
            };
            for (i, item) in items.iter().enumerate() {
                let k = key(item);
                if items[..i].iter().any(|earlier| key(earlier) == k) {
                    path.push(Json::from(i));
                    self.push(
                        path,
                        format!(
                            "duplicate entry for {}: entries of this list are keyed by {}",
                            short(&Json::from(k)),
                            s.list_map_keys.join(", ")
                        ),
                    );
                    path.pop();
                }
            }
        }
        if let Some(item_schema) = &s.items {
            for (i, item) in items.iter().enumerate() {
                path.push(Json::from(i));
                self.walk(item_schema, item, path, fields, rules);
                path.pop();
                if self.full() {
                    return;
                }
            }
        }
    }

    fn object(
        &mut self,
        s: &Node,
        map: &serde_json::Map<String, Json>,
        path: &mut Vec<Json>,
        fields: bool,
        rules: bool,
    ) {
        // Null fields the schema does not allow null in are pruned before validation.
        let present = |k: &str| -> bool {
            match map.get(k) {
                None => false,
                Some(Json::Null) => s
                    .properties
                    .binary_search_by(|p| p.0.as_str().cmp(k))
                    .is_ok_and(|i| s.properties[i].1.nullable),
                Some(_) => true,
            }
        };
        let count = map.keys().filter(|k| present(k)).count() as u64;
        self.bounds(path, count, (s.min_properties, s.max_properties), "entries");
        for r in &s.required {
            if !present(r) {
                let has_default = s
                    .properties
                    .binary_search_by(|p| p.0.as_str().cmp(r))
                    .is_ok_and(|i| s.properties[i].1.default.is_some());
                if !has_default {
                    path.push(Json::from(r.as_str()));
                    self.push(path, "is required and missing".to_string());
                    path.pop();
                }
            }
        }
        let root = path.is_empty();
        for (k, value) in map {
            if value.is_null() && !present(k) {
                continue;
            }
            // ObjectMeta is the API server's own, whatever the CRD says of it.
            if (root || s.embedded) && k == "metadata" {
                continue;
            }
            path.push(Json::from(k.as_str()));
            match s.properties.binary_search_by(|p| p.0.as_str().cmp(k)) {
                Ok(i) => self.walk(&s.properties[i].1, value, path, fields, rules),
                Err(_) => match &s.additional {
                    Some(a) => self.walk(a, value, path, fields, rules),
                    None => {
                        let implicit = (root || s.embedded)
                            && matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
                        if fields && !s.preserve_unknown && !implicit && s.ty == Some(Ty::Object) {
                            self.push(
                                path,
                                "unknown field: the schema has no such field".to_string(),
                            );
                        }
                    }
                },
            }
            path.pop();
            if self.full() {
                return;
            }
        }
    }

    /// oneOf, anyOf, allOf and not: constraints on the value, without fields of
    /// their own (structural schemas declare fields only outside them).
    fn combinators(&mut self, s: &Node, v: &Json, path: &mut Vec<Json>) {
        if s.one_of.is_empty() && s.any_of.is_empty() && s.all_of.is_empty() && s.not.is_none() {
            return;
        }
        let passes = |me: &mut Self, branch: &Node, path: &mut Vec<Json>| -> bool {
            let mut probe = Validator {
                out: Vec::new(),
                eval: &mut *me.eval,
                max: 1,
            };
            probe.walk(branch, v, path, false, false);
            probe.out.is_empty()
        };
        if !s.one_of.is_empty() {
            let matching = s.one_of.iter().filter(|b| passes(self, b, path)).count();
            if matching != 1 {
                let what = describe_branches(&s.one_of);
                self.push(
                    path,
                    if matching == 0 {
                        format!("must match exactly one of: {what}; it matches none")
                    } else {
                        format!("must match exactly one of: {what}; it matches {matching}")
                    },
                );
            }
        }
        if !s.any_of.is_empty() && !s.any_of.iter().any(|b| passes(self, b, path)) {
            let what = describe_branches(&s.any_of);
            self.push(path, format!("must match at least one of: {what}"));
        }
        for b in &s.all_of {
            if !passes(self, b, path) {
                self.walk(b, v, path, false, false);
            }
        }
        if let Some(not) = &s.not {
            if passes(self, not, path) {
                self.push(
                    path,
                    format!(
                        "must not match: {}",
                        describe_branches(std::slice::from_ref(not))
                    ),
                );
            }
        }
    }
}

/// Branches of a oneOf as a reader would say them: Istio's are "has field x" lists.
fn describe_branches(branches: &[Node]) -> String {
    let parts: Vec<String> = branches
        .iter()
        .map(|b| {
            if !b.required.is_empty() {
                format!("has {}", b.required.join(" and "))
            } else if let Some(not) = &b.not {
                if !not.any_of.is_empty() {
                    let inner: Vec<String> = not
                        .any_of
                        .iter()
                        .filter(|x| !x.required.is_empty())
                        .map(|x| x.required.join(" and "))
                        .collect();
                    format!("has none of {}", inner.join(", "))
                } else {
                    "a value the schema excludes".to_string()
                }
            } else {
                "a constraint of the schema".to_string()
            }
        })
        .collect();
    parts.join("; ")
}
