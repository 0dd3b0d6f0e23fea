//! Span-aware YAML, read as kubectl reads it: a tree that knows the line of every
//! node, with hard limits, because every manifest is hostile input.
//!
//! kubectl (and Argo CD, and Flux's apply) cut a file into documents at `---` lines,
//! parse each with go-yaml v2, a port of libyaml, and turn it into JSON with
//! sigs.k8s.io/yaml. meshward takes the same steps: the same cut, libyaml's parser
//! (libyaml-safer, a line-by-line safe port), and go-yaml's meaning of what it
//! parsed (`resolve`), so that what is checked is what the cluster is sent.

mod compose;
mod documents;
mod resolve;

use compose::parse_chunk;
use documents::{bad_separator, split_documents};

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

impl DocError {
    fn invalid(line: u32, message: impl Into<String>) -> DocError {
        DocError {
            line,
            message: message.into(),
            limit: false,
        }
    }

    fn limit(line: u32, message: String) -> DocError {
        DocError {
            line,
            message,
            limit: true,
        }
    }
}

/// One YAML document of a file: its tree, or why there is none.
#[derive(Debug)]
pub struct Document {
    /// Line of the document's first line in the file.
    pub start_line: u32,
    pub result: Result<Option<Node>, DocError>,
}

/// Splits a file into documents at `---` lines and parses each on its own, as
/// kubectl does, so that one broken document does not hide the others.
pub fn parse_documents(text: &str, limits: &Limits) -> Result<Vec<Document>, DocError> {
    let chunks = split_documents(text);
    if chunks.len() > limits.max_documents {
        return Err(DocError::limit(
            1,
            format!(
                "file holds {} YAML documents, more than the limit of {}; nothing in it was checked",
                chunks.len(),
                limits.max_documents
            ),
        ));
    }
    // An error at the end of the input (an unclosed quote) is at the line after the
    // last one; findings must point at a line the file has.
    let last_line = (text.lines().count() as u32).max(1);
    Ok(chunks
        .into_iter()
        .map(|chunk| {
            let result = match chunk.bad_separator {
                Some(rest) => Err(bad_separator(chunk.line + 1, rest)),
                None => parse_chunk(chunk.text, chunk.line, limits),
            };
            Document {
                start_line: chunk.line + 1,
                result: result.map_err(|e| DocError {
                    line: e.line.min(last_line),
                    ..e
                }),
            }
        })
        .collect())
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
    fn ipv6_addresses_in_a_flow_list_are_strings_and_many_are_a_limit() {
        let se = "spec:\n  addresses: [1.2.3.4, 2001:db8::, fd00::]\n  hosts: [a]\n";
        let docs = parse(se);
        let root = docs[0].result.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(
            root.to_json(),
            serde_json::json!({"spec": {"addresses": ["1.2.3.4", "2001:db8::", "fd00::"], "hosts": ["a"]}})
        );
        let path = |p: &str| -> Vec<serde_json::Value> { serde_json::from_str(p).unwrap() };
        assert_eq!(root.line_of(&path(r#"["spec","hosts"]"#)), 3);
        // Each such value is read once more: a document of them past the budget is a
        // limit at its line, not an endless read.
        let row = format!("a: [{}]\n", vec!["x:"; 100].join(", "));
        let big = format!("{}{}", "# padding\n".repeat(300_000), row);
        let err = error(&big);
        assert!(err.limit, "{err:?}");
        assert_eq!(err.line, 300_001);
        assert!(err.message.contains("ending in `:`"), "{}", err.message);
    }

    fn json(text: &str) -> serde_json::Value {
        let docs = parse(text);
        docs[0]
            .result
            .as_ref()
            .expect("parses")
            .as_ref()
            .expect("a document")
            .to_json()
    }

    fn error(text: &str) -> DocError {
        parse(text)
            .into_iter()
            .find_map(|d| d.result.err())
            .expect("an error")
    }

    #[test]
    fn merge_keys_as_go_yaml_merges() {
        let json = json("base: &b {x: 1, z: 2}\nthing:\n  <<: *b\n  z: 3\nbefore:\n  z: 4\n  <<: *b\nlist:\n  <<: [{x: 5}, *b]\n");
        assert_eq!(json["thing"], serde_json::json!({"z": 3, "x": 1}));
        // go-yaml v2 sets merged keys over the ones before the `<<`.
        assert_eq!(json["before"], serde_json::json!({"z": 2, "x": 1}));
        // In a list, the first mapping wins.
        assert_eq!(json["list"], serde_json::json!({"x": 5, "z": 2}));
        assert!(error("a:\n  <<: 3\n").message.contains("`<<`"));
    }

    #[test]
    fn yaml_1_1_scalars_as_kubectl_sends_them() {
        let json = json("a: yes\nb: off\ny: key\nc: 0777\nd: 1.0\ne: '0777'\n");
        assert_eq!(
            json,
            serde_json::json!({"a": true, "b": false, "true": "key", "c": 511, "d": 1, "e": "0777"})
        );
        let e = error("a: 1\nb: .inf\n");
        assert_eq!((e.line, e.limit), (2, false));
    }

    #[test]
    fn flow_and_quoted_scalars_kubectl_accepts() {
        // The closing bracket at the key's column, a quoted scalar continued at
        // column 0: both are fine for kubectl.
        let text = "args: [a,\n  b\n]\ndesc: 'one\ntwo'\nnext: 1\n";
        let docs = parse(text);
        let root = docs[0].result.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(root.get("args").map(|n| n.line), Some(1));
        assert_eq!(root.get("desc").and_then(Node::as_str), Some("one two"));
        assert_eq!(root.get("next").map(|n| n.line), Some(6));
    }

    #[test]
    fn escapes_as_go_yaml_reads_them() {
        let json = json("a: \"don\\'t\"\nb: \"x\\' \\\" \\' y\"\nc: 'C:\\'\n");
        assert_eq!(
            json,
            serde_json::json!({"a": "don't", "b": "x' \" ' y", "c": "C:\\"})
        );
        let e = error("a: 1\nb: \"http:\\/\\/x\"\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("\\/"), "{}", e.message);
    }

    #[test]
    fn question_mark_in_a_flow_scalar_is_rejected_where_it_is() {
        let e = error("a: 1\nb: [x,\n  http://h/?q]\n");
        assert_eq!(e.line, 3);
        assert!(json("a: http://h/?q\n")["a"] == "http://h/?q");
    }

    #[test]
    fn documents_are_cut_as_kubectl_cuts_them() {
        let docs = parse("a: 1\n...\nignored: 2\n--- # comment\nb: 3\n--- !tag\nc: 4\n---\nd: 5\n");
        let values: Vec<_> = docs
            .iter()
            .map(|d| d.result.as_ref().map(|n| n.as_ref().map(Node::to_json)))
            .collect();
        assert_eq!(values.len(), 4, "{values:?}");
        assert_eq!(values[0], Ok(Some(serde_json::json!({"a": 1}))));
        assert_eq!(values[1], Ok(Some(serde_json::json!({"b": 3}))));
        let bad = docs[2].result.as_ref().unwrap_err();
        assert_eq!((docs[2].start_line, bad.line), (6, 6));
        assert!(bad.message.contains("`!tag`"), "{}", bad.message);
        assert_eq!(docs[3].start_line, 9);
        assert_eq!(values[3], Ok(Some(serde_json::json!({"d": 5}))));
    }

    #[test]
    fn lines_are_counted_at_newlines() {
        // A CR alone and U+2028 break lines for libyaml, not for git.
        let e = error("a: \"x\ry\u{2028}z\"\nb: @\n");
        assert_eq!(e.line, 2, "{e:?}");
        let docs = parse("\u{feff}a: 1\nb:\n  c: 2\n");
        let root = docs[0].result.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(
            root.line_of(&[serde_json::json!("b"), serde_json::json!("c")]),
            3
        );
    }

    #[test]
    fn an_error_at_the_end_points_at_the_last_line() {
        let e = error("a: 1\nb: \"open\n");
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("quoted scalar at line 2"),
            "{}",
            e.message
        );
    }

    #[test]
    fn bad_keys_and_aliases() {
        assert!(error("~: x\n").message.contains("null"));
        assert!(error("? [a]\n: x\n").message.contains("list or mapping"));
        assert!(error("a: *nope\n").message.contains("no anchor"));
        assert!(error("a: &x [1, *x]\n").message.contains("contain itself"));
    }

    #[test]
    fn a_block_scalar_ending_the_file_reads_as_kubectl_reads_it() {
        // No newline at the end: kubectl's reader adds one.
        assert_eq!(
            json("a: |\n  text\nb: >-\n  x\n  y"),
            serde_json::json!({"a": "text\n", "b": "x y"})
        );
        assert_eq!(json("a: |\n  text"), serde_json::json!({"a": "text\n"}));
    }

    #[test]
    fn a_parser_panic_is_a_parse_error_and_the_rest_is_read() {
        let docs = parse("a: 1\n---\nk: [!t, 2]\n---\nb: 2\n");
        let e = docs[1].result.as_ref().unwrap_err();
        assert_eq!((e.line, e.limit), (3, false));
        assert!(docs[2].result.as_ref().is_ok_and(Option::is_some));
    }

    #[test]
    fn many_keys_keep_the_last_value() {
        let mut text = String::new();
        for round in 0..2 {
            for i in 0..100 {
                text.push_str(&format!("k{i}: {round}\n"));
            }
        }
        let json = json(&text);
        let map = json.as_object().expect("mapping");
        assert_eq!(map.len(), 100);
        assert_eq!(map["k42"], 1);
        let docs = parse(&text);
        let root = docs[0].result.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(root.get("k42").map(|n| n.line), Some(143));
    }
}
