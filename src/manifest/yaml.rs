//! Span-aware YAML: a tree that knows the line of every node, built from saphyr's
//! event parser with hard limits, because every manifest is hostile input.

use saphyr::Scalar;
use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use std::collections::HashMap;

/// Limits against hostile input. Each one, when hit, becomes a finding.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_file_bytes: usize,
    pub max_documents: usize,
    pub max_depth: usize,
    /// Nodes that alias expansion may add to one document ("billion laughs").
    pub max_alias_nodes: usize,
    /// Bytes of text (strings and keys) that alias expansion may add to one
    /// document: one long anchored string repeated is a bomb of few nodes.
    pub max_alias_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 4 * 1024 * 1024,
            max_documents: 20_000,
            max_depth: 64,
            max_alias_nodes: 10_000,
            max_alias_bytes: 4 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// 1-based line where the node starts.
    pub line: u32,
    pub value: Value,
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Follows a field path (strings for keys, numbers for indices) as far as it
    /// goes, and returns the line of the deepest node reached: an absent field is
    /// reported at its nearest present parent.
    pub fn line_of(&self, path: &[serde_json::Value]) -> u32 {
        let mut node = self;
        for step in path {
            let next = match (&node.value, step) {
                (Value::Map(entries), serde_json::Value::String(key)) => {
                    entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
                }
                (Value::Seq(items), serde_json::Value::Number(n)) => {
                    n.as_u64().and_then(|i| items.get(i as usize))
                }
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        node.line
    }

    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Seq(items) => {
                serde_json::Value::Array(items.iter().map(Node::to_json).collect())
            }
            Value::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// What copying the node costs, in one walk: (nodes, bytes of text in its
    /// strings and mapping keys).
    fn weight(&self) -> (usize, usize) {
        let sum = |acc: (usize, usize), w: (usize, usize)| (acc.0 + w.0, acc.1 + w.1);
        match &self.value {
            Value::Str(s) => (1, s.len()),
            Value::Seq(items) => items.iter().map(Node::weight).fold((1, 0), sum),
            Value::Map(entries) => entries
                .iter()
                .map(|(k, v)| sum((0, k.len()), v.weight()))
                .fold((1, 0), sum),
            _ => (1, 0),
        }
    }
}

/// Why a document could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct DocError {
    pub line: u32,
    pub message: String,
    /// A limit was hit (as opposed to invalid YAML).
    pub limit: bool,
}

/// One YAML document of a file: its tree, or why there is none.
#[derive(Debug)]
pub struct Document {
    /// Line of the document's first line in the file.
    pub start_line: u32,
    pub result: Result<Option<Node>, DocError>,
}

/// Splits a file into documents at `---`/`...` lines and parses each on its own, so
/// that one broken document does not hide the others.
pub fn parse_documents(text: &str, limits: &Limits) -> Result<Vec<Document>, DocError> {
    let chunks = split_documents(text);
    if chunks.len() > limits.max_documents {
        return Err(DocError {
            line: 1,
            message: format!(
                "file holds {} YAML documents, more than the limit of {}; nothing in it was checked",
                chunks.len(),
                limits.max_documents
            ),
            limit: true,
        });
    }
    Ok(chunks
        .into_iter()
        .map(|(offset, chunk)| Document {
            start_line: offset + 1,
            result: parse_one(chunk, offset, limits),
        })
        .collect())
}

/// (line offset, text) of each document. A line starting with `---` or `...` at
/// column 0 always ends a document: block scalars are indented, so this split
/// agrees with the YAML grammar for every file Kubernetes tooling accepts.
fn split_documents(text: &str) -> Vec<(u32, &str)> {
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0u32;
    let mut pos = 0usize;
    for (line_no, line) in (0u32..).zip(text.split_inclusive('\n')) {
        let is_marker = is_marker(line, "---") || is_marker(line, "...");
        if is_marker {
            if !text[start..pos].trim().is_empty() {
                chunks.push((start_line, &text[start..pos]));
            }
            // The `---` line itself may carry content (`--- !tag` or `--- {a: 1}`).
            if line.starts_with("---") && !line[3..].trim().is_empty() {
                start = pos;
                start_line = line_no;
            } else {
                start = pos + line.len();
                start_line = line_no + 1;
            }
        }
        pos += line.len();
    }
    if !text[start..].trim().is_empty() {
        chunks.push((start_line, &text[start..]));
    }
    chunks
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.starts_with(marker)
        && line[marker.len()..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t' || c == '\n' || c == '\r')
}

enum Frame {
    Seq {
        line: u32,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        line: u32,
        anchor: usize,
        entries: Vec<(String, Node)>,
        key: Option<(String, u32)>,
    },
}

fn parse_one(text: &str, offset: u32, limits: &Limits) -> Result<Option<Node>, DocError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut alias_budget = limits.max_alias_nodes;
    let mut alias_bytes_budget = limits.max_alias_bytes;
    let mut root: Option<Node> = None;
    let line_at = |span: &Span| span.start.line() as u32 + offset;

    loop {
        let (event, span) = match parser.next_event() {
            None => break,
            Some(Ok(ev)) => ev,
            Some(Err(e)) => {
                let line = e.marker().line() as u32 + offset;
                // The parser stops runaway nesting itself, before our depth check sees it.
                if e.info().contains("recursion limit") {
                    return Err(DocError {
                        line,
                        message: format!(
                            "YAML nests deeper than {} levels; the document was not checked",
                            limits.max_depth
                        ),
                        limit: true,
                    });
                }
                return Err(DocError {
                    line,
                    message: format!("invalid YAML: {}", e.info()),
                    limit: false,
                });
            }
        };
        let line = line_at(&span);
        let completed = match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing => None,
            Event::DocumentStart(_) | Event::DocumentEnd => None,
            Event::SequenceStart(anchor, _) => {
                push_frame(
                    &mut stack,
                    Frame::Seq {
                        line,
                        anchor,
                        items: Vec::new(),
                    },
                    line,
                    limits,
                )?;
                None
            }
            Event::MappingStart(anchor, _) => {
                push_frame(
                    &mut stack,
                    Frame::Map {
                        line,
                        anchor,
                        entries: Vec::new(),
                        key: None,
                    },
                    line,
                    limits,
                )?;
                None
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let frame = stack.pop().ok_or_else(|| DocError {
                    line,
                    message: "invalid YAML: unbalanced collection".into(),
                    limit: false,
                })?;
                let (node, anchor) = match frame {
                    Frame::Seq {
                        line,
                        anchor,
                        items,
                    } => (
                        Node {
                            line,
                            value: Value::Seq(items),
                        },
                        anchor,
                    ),
                    Frame::Map {
                        line,
                        anchor,
                        entries,
                        ..
                    } => (
                        Node {
                            line,
                            value: Value::Map(entries),
                        },
                        anchor,
                    ),
                };
                if anchor != 0 {
                    anchors.insert(anchor, node.clone());
                }
                Some(node)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value =
                    match Scalar::parse_from_cow_and_metadata(text.clone(), style, tag.as_ref()) {
                        Some(Scalar::Null) => Value::Null,
                        Some(Scalar::Boolean(b)) => Value::Bool(b),
                        Some(Scalar::Integer(i)) => Value::Int(i),
                        Some(Scalar::FloatingPoint(f)) => Value::Float(f.into_inner()),
                        Some(Scalar::String(s)) => Value::Str(s.into_owned()),
                        None => Value::Str(text.into_owned()),
                    };
                // A plain empty value (`key:`) is null; a quoted empty string is "".
                let value = match (&value, style) {
                    (Value::Str(s), ScalarStyle::Plain) if s.is_empty() => Value::Null,
                    _ => value,
                };
                let node = Node { line, value };
                if anchor != 0 {
                    anchors.insert(anchor, node.clone());
                }
                Some(node)
            }
            Event::Alias(id) => {
                let anchored = anchors.get(&id).ok_or_else(|| DocError {
                    line,
                    message: "invalid YAML: alias to an unknown anchor".into(),
                    limit: false,
                })?;
                // Measured before the copy is made: the copy is what a bomb costs.
                let (size, bytes) = anchored.weight();
                let over = |what: String| DocError {
                    line,
                    message: format!(
                        "YAML aliases expand to more than {what}; the document was not checked"
                    ),
                    limit: true,
                };
                if size > alias_budget {
                    return Err(over(format!("{} nodes", limits.max_alias_nodes)));
                }
                if bytes > alias_bytes_budget {
                    return Err(over(format!(
                        "{} MiB of text",
                        limits.max_alias_bytes / (1024 * 1024)
                    )));
                }
                alias_budget -= size;
                alias_bytes_budget -= bytes;
                Some(anchored.clone())
            }
        };
        if let Some(node) = completed {
            match stack.last_mut() {
                None => {
                    if root.is_some() {
                        return Err(DocError {
                            line,
                            message: "invalid YAML: more than one root node".into(),
                            limit: false,
                        });
                    }
                    root = Some(node);
                }
                Some(Frame::Seq { items, .. }) => items.push(node),
                Some(Frame::Map { entries, key, .. }) => match key.take() {
                    None => {
                        let k = match node.value {
                            Value::Str(s) => s,
                            Value::Int(i) => i.to_string(),
                            Value::Bool(b) => b.to_string(),
                            Value::Float(f) => f.to_string(),
                            Value::Null => "null".to_string(),
                            Value::Seq(_) | Value::Map(_) => {
                                return Err(DocError {
                                    line: node.line,
                                    message: "a mapping key is itself a list or mapping; Kubernetes objects never have one".into(),
                                    limit: false,
                                })
                            }
                        };
                        *key = Some((k, node.line));
                    }
                    // A field's line is its key's line: a nested mapping or list
                    // would otherwise start at its first child.
                    Some((k, key_line)) => insert_entry(
                        entries,
                        k,
                        Node {
                            line: key_line,
                            ..node
                        },
                    ),
                },
            }
        }
    }
    Ok(root)
}

fn push_frame(
    stack: &mut Vec<Frame>,
    frame: Frame,
    line: u32,
    limits: &Limits,
) -> Result<(), DocError> {
    if stack.len() >= limits.max_depth {
        return Err(DocError {
            line,
            message: format!(
                "YAML nests deeper than {} levels; the document was not checked",
                limits.max_depth
            ),
            limit: true,
        });
    }
    stack.push(frame);
    Ok(())
}

/// Inserts a mapping entry; `<<` merge keys (which Kubernetes' YAML reader honours)
/// add the merged mapping's entries that are not set explicitly. A repeated key
/// keeps the last value, as Kubernetes does.
fn insert_entry(entries: &mut Vec<(String, Node)>, key: String, node: Node) {
    if key == "<<" {
        let sources: Vec<Node> = match node.value {
            Value::Map(_) => vec![node],
            Value::Seq(items) => items,
            _ => Vec::new(),
        };
        for source in sources {
            if let Value::Map(merged) = source.value {
                for (k, v) in merged {
                    if !entries.iter().any(|(e, _)| *e == k) {
                        entries.push((k, v));
                    }
                }
            }
        }
        return;
    }
    if let Some(existing) = entries.iter_mut().find(|(k, _)| *k == key) {
        existing.1 = node;
    } else {
        entries.push((key, node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Document> {
        parse_documents(text, &Limits::default()).expect("documents")
    }

    #[test]
    fn lines_of_nested_fields() {
        let docs = parse("a: 1\nspec:\n  resolution: NONE\n  endpoints:\n  - address: x\n");
        let root = docs[0].result.as_ref().unwrap().as_ref().unwrap();
        let path = |p: &str| -> Vec<serde_json::Value> { serde_json::from_str(p).unwrap() };
        assert_eq!(root.line_of(&path(r#"["spec","resolution"]"#)), 3);
        assert_eq!(
            root.line_of(&path(r#"["spec","endpoints",0,"address"]"#)),
            5
        );
        // Absent fields point at the nearest parent.
        assert_eq!(root.line_of(&path(r#"["spec","missing","deeper"]"#)), 2);
    }

    #[test]
    fn broken_document_does_not_hide_the_next() {
        let docs = parse("a: [1, 2\n---\nb: 2\n");
        assert!(docs[0].result.is_err());
        let second = docs[1].result.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(second.get("b").unwrap().line, 3);
    }

    #[test]
    fn core_schema_scalars() {
        let docs = parse("a: \"false\"\nb: false\nc: 3\nd:\ne: ''\n");
        let json = docs[0].result.as_ref().unwrap().as_ref().unwrap().to_json();
        assert_eq!(
            json,
            serde_json::json!({"a": "false", "b": false, "c": 3, "d": null, "e": ""})
        );
    }

    #[test]
    fn billion_laughs_is_stopped() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8 {
            let prev = if i == 0 {
                "a".to_string()
            } else {
                format!("a{}", i - 1)
            };
            text.push_str(&format!(
                "a{i}: &a{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
        }
        let docs = parse(&text);
        let err = docs[0].result.as_ref().unwrap_err();
        assert!(err.limit, "{err:?}");
        assert!(err.message.contains("aliases"));
    }

    #[test]
    fn deep_nesting_is_stopped() {
        let text = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let docs = parse(&text);
        let err = docs[0].result.as_ref().unwrap_err();
        assert!(err.limit && err.message.contains("nests deeper"));
    }

    #[test]
    fn merge_keys() {
        let docs = parse("base: &b {x: 1, y: 2}\nthing:\n  <<: *b\n  y: 3\n");
        let json = docs[0].result.as_ref().unwrap().as_ref().unwrap().to_json();
        assert_eq!(json["thing"], serde_json::json!({"y": 3, "x": 1}));
    }
}
