//! `x-kubernetes-validations`: CEL rules of a CRD, evaluated as the API server does
//! on create (a rule that is false or fails to evaluate refuses the object), with
//! the Kubernetes library functions CRDs use and bounds on size and cost.

use super::structural::{Node, Ty, Violation};
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program, Value};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

/// Longest rule meshward parses (the API server's own limit is on estimated cost;
/// a longer rule in a repository is unusual and parsing is recursive).
const MAX_RULE_CHARS: usize = 4096;
/// Deepest nesting of brackets in a rule.
const MAX_NESTING: usize = 32;
/// Estimated evaluation steps one rule may take on one value before it is left
/// unevaluated (said, not silently passed): the rule's length times the value's size
/// to the power of its nested comprehensions.
const MAX_COST: u64 = 20_000_000;
/// Time the rules of one object may take, whatever the estimate said.
const MAX_TIME_PER_OBJECT: std::time::Duration = std::time::Duration::from_millis(250);

/// The functions rules may call: CEL's standard library and macros, the strings
/// extension, and the Kubernetes URL library (added here).
const SUPPORTED: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "duration",
    "timestamp",
    "type",
    "dyn",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "max",
    "min",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "reverse",
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
];

/// One rule of a schema, with what it compiles to.
pub(crate) struct Rule {
    pub(crate) source: String,
    env: Arc<Env>,
    message: Option<String>,
    message_expression: Option<String>,
    field_path: Vec<Json>,
    comprehensions: u32,
    /// A repository's rules are compiled with their CRD (a rule that does not parse
    /// is a finding on it); meshward's own the first time an object reaches them
    /// (every one compiles: a test checks), as most objects reach few of them, and
    /// once for all CRDs that share them.
    compiled: std::sync::OnceLock<Arc<Compiled>>,
    shared: bool,
}

/// What a rule compiles to.
struct Compiled {
    program: Result<Program, String>,
    /// Why meshward cannot evaluate it, when it cannot.
    unsupported: Option<String>,
    /// Compares with the object's previous state (`oldSelf`): checked by the API
    /// server on update only, against what the cluster holds.
    transition: bool,
    message_expression: Option<Program>,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("source", &self.source)
            .finish()
    }
}

impl Rule {
    fn compiled(&self) -> &Compiled {
        self.compiled.get_or_init(|| {
            if !self.shared {
                return Arc::new(self.compile());
            }
            // Bounded: meshward's own rules only.
            type Kept = std::sync::Mutex<HashMap<(String, Option<String>), Arc<Compiled>>>;
            static KEPT: std::sync::LazyLock<Kept> = std::sync::LazyLock::new(Default::default);
            let key = (self.source.clone(), self.message_expression.clone());
            if let Some(found) = KEPT.lock().ok().and_then(|k| k.get(&key).cloned()) {
                return found;
            }
            let compiled = Arc::new(self.compile());
            if let Ok(mut kept) = KEPT.lock() {
                kept.insert(key, compiled.clone());
            }
            compiled
        })
    }

    fn compile(&self) -> Compiled {
        let program = parse(&self.env, &self.source);
        let (unsupported, transition) = match &program {
            Ok(p) => {
                let refs = p.references();
                let unknown: Vec<String> = refs
                    .functions()
                    .into_iter()
                    // Operators are named `_+_`, `@in`, `!_`.
                    .filter(|f| !(f.starts_with(['_', '@', '!']) || SUPPORTED.contains(f)))
                    .map(str::to_string)
                    .collect();
                let unsupported = (!unknown.is_empty()).then(|| {
                    format!(
                        "it calls {}, which meshward does not implement",
                        unknown.join(", ")
                    )
                });
                (unsupported, refs.has_variable("oldSelf"))
            }
            Err(_) => (None, false),
        };
        Compiled {
            program,
            unsupported,
            transition,
            message_expression: self
                .message_expression
                .as_deref()
                .and_then(|m| parse(&self.env, m).ok()),
        }
    }

    /// Compares with the object's previous state (`oldSelf`).
    pub(crate) fn transition(&self) -> bool {
        self.compiled().transition
    }

    /// Why meshward cannot evaluate it (it does not parse, or calls what meshward
    /// does not implement), when it cannot.
    #[cfg(test)]
    pub(crate) fn unsupported(&self) -> Option<String> {
        self.compiled().program().err()
    }
}

impl Compiled {
    /// The program to evaluate, or why meshward cannot (it does not parse, or calls
    /// what meshward does not implement).
    fn program(&self) -> Result<&Program, String> {
        match (&self.program, &self.unsupported) {
            (Ok(program), None) => Ok(program),
            (Err(e), _) => Err(format!("it {e}")),
            (Ok(_), Some(why)) => Err(why.clone()),
        }
    }
}

/// Compiles rules against one environment.
pub(crate) struct Compiler {
    env: Arc<Env>,
    /// Rules are compiled when first evaluated (meshward's own CRDs).
    lazy: bool,
}

impl Default for Compiler {
    fn default() -> Self {
        let mut env = Env::stdlib();
        // The strings extension is part of the Kubernetes CEL environment.
        let _ = env.add_extension(cel::extensions::strings);
        Compiler {
            env: Arc::new(env),
            lazy: false,
        }
    }
}

impl Compiler {
    /// The same environment, compiling each rule the first time it is evaluated.
    pub(crate) fn lazy(&self) -> Compiler {
        Compiler {
            env: self.env.clone(),
            lazy: true,
        }
    }
}

fn nesting(source: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for c in source.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Parses guarded: the parser is a third party's and the text is the repository's.
fn parse(env: &Env, source: &str) -> Result<Program, String> {
    if source.chars().count() > MAX_RULE_CHARS {
        return Err(format!(
            "is longer than {MAX_RULE_CHARS} characters; meshward does not parse it"
        ));
    }
    if nesting(source) > MAX_NESTING {
        return Err(format!(
            "nests brackets deeper than {MAX_NESTING}; meshward does not parse it"
        ));
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env.compile(source))) {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(format!("does not compile: {e}")),
        Err(_) => Err("made the CEL parser fail".to_string()),
    }
}

/// `.a.b['c']` as path steps; None for what a fieldPath may not hold.
fn field_path(text: &str) -> Option<Vec<Json>> {
    let mut steps = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(Json::from(&r[..end]));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            steps.push(Json::from(&r[..end]));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            steps.push(Json::from(r[..end].parse::<u64>().ok()?));
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

impl Compiler {
    /// A rule entry of `x-kubernetes-validations`. Err: the API server refuses the
    /// CRD (no rule, a rule that does not parse).
    pub(crate) fn rule(&self, entry: &Json) -> Result<Rule, String> {
        let Some(source) = entry.get("rule").and_then(Json::as_str) else {
            return Err("a validation rule needs `rule`".to_string());
        };
        let field_path = match entry.get("fieldPath").and_then(Json::as_str) {
            Some(p) => {
                field_path(p).ok_or_else(|| format!("fieldPath {p:?} is not a path to a field"))?
            }
            None => Vec::new(),
        };
        let rule = Rule {
            comprehensions: count_comprehensions(source),
            source: source.to_string(),
            env: self.env.clone(),
            message: entry
                .get("message")
                .and_then(Json::as_str)
                .filter(|m| !m.trim().is_empty())
                .map(str::to_string),
            message_expression: entry
                .get("messageExpression")
                .and_then(Json::as_str)
                .map(str::to_string),
            field_path,
            compiled: std::sync::OnceLock::new(),
            shared: self.lazy,
        };
        if !self.lazy {
            if let Err(e) = &rule.compiled().program {
                return Err(format!("rule `{source}` {e}"));
            }
        }
        Ok(rule)
    }

    pub(crate) fn evaluator(&self) -> Evaluator<'static> {
        let mut root = Context::with_env(self.env.clone());
        url_library(&mut root);
        ip_library(&mut root);
        Evaluator {
            root,
            deadline: std::time::Instant::now() + MAX_TIME_PER_OBJECT,
        }
    }
}

/// Comprehension macros in a rule: each can multiply the work by the size of what
/// it walks.
fn count_comprehensions(source: &str) -> u32 {
    [".all(", ".exists(", ".exists_one(", ".map(", ".filter("]
        .iter()
        .map(|m| source.matches(m).count() as u32)
        .sum()
}

/// Evaluates rules; one per thread (contexts are not shared between threads).
pub(crate) struct Evaluator<'c> {
    root: Context<'c, 'static>,
    /// When the current object's rules must have finished.
    deadline: std::time::Instant,
}

fn size_of(v: &Json) -> u64 {
    match v {
        Json::Array(a) => 1 + a.iter().map(size_of).sum::<u64>(),
        Json::Object(m) => 1 + m.values().map(size_of).sum::<u64>(),
        _ => 1,
    }
}

impl Evaluator<'_> {
    /// Starts the time bound of the next object's rules.
    pub(crate) fn start_object(&mut self) {
        self.deadline = std::time::Instant::now() + MAX_TIME_PER_OBJECT;
    }

    /// Evaluates `rules` (of schema node `s`) on `v`, the value at `path`: what each
    /// rule refuses, or why it was not evaluated.
    pub(crate) fn run(
        &mut self,
        rules: &[Rule],
        s: &Node,
        v: &Json,
        path: &[Json],
    ) -> Vec<Violation> {
        let mut found = Vec::new();
        let mut value: Option<Value> = None;
        let size = size_of(v);
        for rule in rules {
            let mut say = |unchecked: bool, message: String| {
                let mut p = path.to_vec();
                p.extend(rule.field_path.iter().cloned());
                found.push(Violation {
                    path: p,
                    message,
                    unchecked,
                    by_rule: true,
                });
            };
            let not_evaluated =
                |why: String| format!("rule `{}` was not evaluated: {why}", rule.source);
            // Compiling one of meshward's own rules, first reached here, is not this
            // object's time.
            let compiled = if rule.compiled.get().is_some() {
                rule.compiled()
            } else {
                let started = std::time::Instant::now();
                let compiled = rule.compiled();
                self.deadline += started.elapsed();
                compiled
            };
            // Rules on oldSelf are not evaluated on create; the CRD finding says so once.
            if compiled.transition {
                continue;
            }
            let program = match compiled.program() {
                Ok(program) => program,
                Err(why) => {
                    say(true, not_evaluated(why));
                    continue;
                }
            };
            let cost =
                (rule.source.len() as u64).saturating_mul(size.saturating_pow(rule.comprehensions));
            if cost > MAX_COST {
                say(true, not_evaluated(format!(
                    "on this value it could take about {cost} steps, above meshward's bound of {MAX_COST}"
                )));
                continue;
            }
            if std::time::Instant::now() > self.deadline {
                say(
                    true,
                    not_evaluated(format!(
                        "this object's rules took longer than meshward's bound of {} ms",
                        MAX_TIME_PER_OBJECT.as_millis()
                    )),
                );
                continue;
            }
            let value = value.get_or_insert_with(|| to_cel(s, v)).clone();
            let mut ctx = self.root.new_inner_scope();
            ctx.add_variable_from_value("self", value);
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(&ctx)));
            match result {
                Ok(Ok(Value::Bool(true))) => {}
                Ok(Ok(Value::Bool(false))) => {
                    let message = compiled
                        .message_expression
                        .as_ref()
                        .and_then(|m| match m.execute(&ctx) {
                            Ok(Value::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
                            _ => None,
                        })
                        .or_else(|| rule.message.clone())
                        .unwrap_or_else(|| format!("failed rule: {}", rule.source));
                    say(false, format!("{message} (rule `{}`)", rule.source));
                }
                Ok(Ok(other)) => say(true, not_evaluated(format!("it returned {other:?}, not true or false"))),
                Ok(Err(e)) if gap(&e) => say(true, not_evaluated(e.to_string())),
                Ok(Err(e)) => say(
                    false,
                    format!(
                        "rule `{}` fails to evaluate ({e}); the API server refuses an object whose rule errors",
                        rule.source
                    ),
                ),
                Err(_) => say(true, not_evaluated("the CEL interpreter failed on it".to_string())),
            }
        }
        found
    }
}

/// Errors that say meshward's interpreter lacks something, not that the object is
/// wrong: the API server type-checks rules when the CRD is created, so a rule it
/// admitted does not call what does not exist.
fn gap(e: &ExecutionError) -> bool {
    matches!(
        e,
        ExecutionError::NoSuchOverload(_)
            | ExecutionError::UndeclaredReference(_)
            | ExecutionError::NotSupportedAsMethod { .. }
            | ExecutionError::InternalError(_)
    )
}

/// The value a rule sees as `self`: fields the schema does not know are dropped
/// (the API server prunes them), defaults filled in, numbers typed by the schema.
pub(crate) fn to_cel(s: &Node, v: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if s.ty == Some(Ty::Number) {
                Value::Float(n.as_f64().unwrap_or(0.0))
            } else if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    Value::Int(f as i64)
                } else {
                    Value::Float(f)
                }
            }
        }
        Json::String(t) => Value::String(Arc::new(t.clone())),
        Json::Array(items) => {
            let empty = Node::default();
            let item = s.items.as_deref().unwrap_or(&empty);
            Value::List(Arc::new(items.iter().map(|i| to_cel(item, i)).collect()))
        }
        Json::Object(map) => {
            let empty = Node::default();
            let mut out: HashMap<Key, Value> = HashMap::with_capacity(map.len());
            for (k, value) in map {
                let child = match s.properties.binary_search_by(|p| p.0.as_str().cmp(k)) {
                    Ok(i) => Some(&s.properties[i].1),
                    Err(_) => match &s.additional {
                        Some(a) => Some(a.as_ref()),
                        None if s.properties.is_empty() || s.ty.is_none() => Some(&empty),
                        None => None,
                    },
                };
                if let Some(child) = child {
                    if value.is_null() && s.ty.is_some() {
                        continue;
                    }
                    out.insert(Key::from(k.clone()), to_cel(child, value));
                }
            }
            for (k, child) in &s.properties {
                if !map.contains_key(k) {
                    if let Some(d) = &child.default {
                        out.insert(Key::from(k.clone()), to_cel(child, d));
                    }
                }
            }
            Value::Map(Map { map: Arc::new(out) })
        }
    }
}

/// The Kubernetes URL library: `url()` returns the URL (as its text, which the
/// accessors parse), `isURL()`, and the accessors CRDs use.
fn url_library(ctx: &mut Context) {
    fn parsed(s: &str) -> Result<url::Url, ExecutionError> {
        url::Url::parse(s)
            .map_err(|e| ExecutionError::function_error("url", format!("{s:?} is not a URL: {e}")))
    }
    let _ = ctx.add_function(
        "url",
        |s: Arc<String>| -> Result<Arc<String>, ExecutionError> { parsed(&s).map(|_| s) },
    );
    let _ = ctx.add_function("isURL", |s: Arc<String>| url::Url::parse(&s).is_ok());
    let _ = ctx.add_function(
        "getScheme",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> Result<Arc<String>, ExecutionError> {
            parsed(&s).map(|u| Arc::new(u.scheme().to_string()))
        },
    );
    let _ = ctx.add_function(
        "getHost",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> Result<Arc<String>, ExecutionError> {
            parsed(&s).map(|u| {
                let host = u.host_str().unwrap_or("");
                Arc::new(match u.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host.to_string(),
                })
            })
        },
    );
    let _ = ctx.add_function(
        "getHostname",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> Result<Arc<String>, ExecutionError> {
            parsed(&s).map(|u| Arc::new(u.host_str().unwrap_or("").trim_matches(['[', ']']).to_string()))
        },
    );
    let _ = ctx.add_function(
        "getPort",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> Result<Arc<String>, ExecutionError> {
            parsed(&s).map(|u| Arc::new(u.port().map(|p| p.to_string()).unwrap_or_default()))
        },
    );
    let _ = ctx.add_function(
        "getEscapedPath",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> Result<Arc<String>, ExecutionError> {
            parsed(&s).map(|u| Arc::new(u.path().to_string()))
        },
    );
}

/// The Kubernetes IP and CIDR library, as far as CRD rules use it: `isIP()`,
/// `isCIDR()`, and `ip()`/`cidr()` (which return their text, or fail on a bad one).
/// As the API server parses them: no zones, no IPv4-mapped IPv6 addresses.
fn ip_library(ctx: &mut Context) {
    fn ip_ok(s: &str) -> bool {
        match s.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_none(),
            Ok(_) => true,
            Err(_) => false,
        }
    }
    fn cidr_ok(s: &str) -> bool {
        // No leading zeros in the prefix length, as Go's netip parses it.
        s.split_once('/').is_some_and(|(ip, bits)| {
            let max = if ip.contains(':') { 128 } else { 32 };
            ip_ok(ip)
                && (bits == "0" || !bits.starts_with('0'))
                && bits.parse::<u8>().is_ok_and(|b| b <= max)
        })
    }
    let _ = ctx.add_function("isIP", |s: Arc<String>| ip_ok(&s));
    let _ = ctx.add_function("isCIDR", |s: Arc<String>| cidr_ok(&s));
    // `ip()` and `cidr()` return their argument where it parses, and fail otherwise.
    let parsed = |name: &'static str, ok: fn(&str) -> bool, what: &'static str| {
        move |s: Arc<String>| -> Result<Arc<String>, ExecutionError> {
            if ok(&s) {
                Ok(s)
            } else {
                Err(ExecutionError::function_error(
                    name,
                    format!("{s:?} is not {what}"),
                ))
            }
        }
    };
    let _ = ctx.add_function("ip", parsed("ip", ip_ok, "an IP address"));
    let _ = ctx.add_function("cidr", parsed("cidr", cidr_ok, "a CIDR range"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(rule: &str, schema: Json, value: Json) -> Vec<Violation> {
        let c = Compiler::default();
        let (node, errors) = super::super::structural::compile(&schema, &c);
        assert!(errors.is_empty(), "{errors:?}");
        let mut e = c.evaluator();
        let r = c
            .rule(&serde_json::json!({"rule": rule, "message": "broken"}))
            .unwrap();
        e.run(&[r], &node, &value, &[])
    }

    #[test]
    fn rules_as_the_api_server_evaluates_them() {
        let s = serde_json::json!({"type": "object", "properties": {
            "ports": {"type": "array", "items": {"type": "integer"}},
            "address": {"type": "string"}}});
        assert!(eval(
            "self.ports.all(p, p > 0 && p <= 65535)",
            s.clone(),
            serde_json::json!({"ports": [80]})
        )
        .is_empty());
        assert_eq!(
            eval(
                "self.ports.all(p, p <= 65535)",
                s.clone(),
                serde_json::json!({"ports": [70000]})
            )
            .len(),
            1
        );
        // Absent field: an evaluation error, which refuses the object.
        let v = eval(
            "self.address.startsWith('unix://')",
            s.clone(),
            serde_json::json!({}),
        );
        assert_eq!(v.len(), 1);
        assert!(!v[0].unchecked, "{v:?}");
        assert!(
            eval(
                "!has(self.address) || self.address.substring(7, 8) != '/'",
                s.clone(),
                serde_json::json!({"address": "unix:///x"})
            )
            .len()
                == 1
        );
        // An index past the end is an error, as on `unix://` alone.
        assert_eq!(
            eval(
                "self.address.substring(7, 8) != ''",
                s.clone(),
                serde_json::json!({"address": "unix://"})
            )
            .len(),
            1
        );
        assert!(eval(
            "isURL(self.address) && url(self.address).getScheme() == 'https'",
            s.clone(),
            serde_json::json!({"address": "https://x.example/jwks"})
        )
        .is_empty());
        let v = eval(
            "self.address.isSorted()",
            s,
            serde_json::json!({"address": "a"}),
        );
        assert!(v[0].unchecked, "{v:?}");
    }
}
