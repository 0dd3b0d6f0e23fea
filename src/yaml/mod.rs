//! Span-aware YAML, read as kubectl reads it: a tree that knows the line of every
//! node, with hard limits, because every manifest is hostile input.
//!
//! kubectl (and Argo CD, and Flux's apply) cut a file into documents at `---` lines,
//! parse each with go-yaml v2, a port of libyaml, and turn it into JSON with
//! sigs.k8s.io/yaml. meshward takes the same steps: the same cut, libyaml's parser
//! (libyaml-safer, a line-by-line safe port), and go-yaml's meaning of what it
//! parsed (`resolve`), so that what is checked is what the cluster is sent.

mod resolve;

use libyaml_safer::{EventData, MappingStyle, Mark, Parser, ScalarStyle, SequenceStyle};
use std::borrow::Cow;
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

/// One document's text as kubectl's reader cuts it out of a file.
struct Chunk<'a> {
    /// Lines of the file before the text.
    line: u32,
    text: &'a str,
    /// What follows `---` on the line that starts this chunk, when it is more than
    /// a comment: kubectl refuses the file there.
    bad_separator: Option<&'a str>,
}

/// The documents of a file, cut the way kubectl's YAML reader (k8s.io/apimachinery
/// `YAMLReader`, also used by Argo CD and Flux) cuts them: at every line that starts
/// with `---`, whatever the YAML around it. `...` does not cut: go-yaml reads only
/// the first document of each part, so what follows a `...` is never applied.
fn split_documents(text: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0u32;
    let mut bad: Option<&str> = None;
    let mut pos = 0usize;
    for (line_no, line) in (0u32..).zip(text.split_inclusive('\n')) {
        if let Some(rest) = line.strip_prefix("---") {
            add_chunk(&mut chunks, text, start, pos, start_line, bad);
            let rest = rest.trim();
            if rest.is_empty() || rest.starts_with('#') {
                start = pos + line.len();
                start_line = line_no + 1;
                bad = None;
            } else {
                start = pos;
                start_line = line_no;
                bad = Some(rest);
            }
        }
        pos += line.len();
    }
    add_chunk(&mut chunks, text, start, text.len(), start_line, bad);
    chunks
}

fn add_chunk<'a>(
    chunks: &mut Vec<Chunk<'a>>,
    text: &'a str,
    start: usize,
    end: usize,
    line: u32,
    bad_separator: Option<&'a str>,
) {
    let chunk = &text[start..end];
    // Blank parts are nothing to kubectl; a part with only comments is parsed (and
    // is empty).
    if bad_separator.is_some() || !chunk.trim().is_empty() {
        chunks.push(Chunk {
            line,
            text: chunk,
            bad_separator,
        });
    }
}

fn bad_separator(line: u32, rest: &str) -> DocError {
    let shown = match rest.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &rest[..i]),
        None => rest.to_string(),
    };
    DocError::invalid(
        line,
        format!(
            "`---` is followed by `{shown}` on its line; kubectl allows only a comment there and rejects the file from this line on. Move `{shown}` to the next line"
        ),
    )
}

/// Reading work (bytes parsed) one document may cost when it is read again.
const REREAD_BUDGET: usize = 64 * 1024 * 1024;

/// Parses one document's text, `offset` lines into its file.
fn parse_chunk(text: &str, offset: u32, limits: &Limits) -> Result<Option<Node>, DocError> {
    // kubectl's reader ends every line with a newline, the last one too; libyaml's
    // port also needs it there (it panics on a block scalar ending the input).
    let mut text = if text.ends_with('\n') {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("{text}\n"))
    };
    let mut work = text.len();
    loop {
        match compose(&text, offset, limits) {
            Ok(root) => return Ok(root),
            Err(Failure::Doc(e)) => return Err(e),
            // go-yaml reads `\'` in a double-quoted string as `'`; libyaml has no such
            // escape. The string is rewritten with the `\x27` both know, and read again.
            Err(Failure::EscapedQuote(at)) => {
                work += text.len();
                if work > REREAD_BUDGET {
                    let line = LineTable::new(&text, offset).line(at);
                    return Err(DocError::limit(
                        line,
                        "the document holds more double-quoted strings with `\\'` than meshward reads; it was not checked".into(),
                    ));
                }
                text = Cow::Owned(rewrite_escaped_quotes(&text, at));
            }
        }
    }
}

/// One read of a document. The parser is a port with a few `panic!`s left in it
/// (a tag followed by `,` in a flow collection): one must not stop the check, and
/// the document it was reading was not checked.
fn compose(text: &str, offset: u32, limits: &Limits) -> Result<Option<Node>, Failure> {
    let run = || Composer::new(text, offset, limits).run();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|_| {
        Err(Failure::Doc(DocError::invalid(
            offset + 1,
            "meshward's YAML reader failed on this document, which it could not check; a tag followed by `,` inside `[...]` or `{...}` is the known cause",
        )))
    })
}

/// Replaces every `\'` of the double-quoted string whose escape starts at byte `at`.
fn rewrite_escaped_quotes(text: &str, at: usize) -> String {
    let (head, tail) = text.split_at(at);
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(head);
    let mut chars = tail.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                out.push_str(&tail[i..]);
                return out;
            }
            '\\' => match chars.next() {
                Some((_, '\'')) => out.push_str("\\x27"),
                Some((_, next)) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Why composing stopped.
enum Failure {
    Doc(DocError),
    /// A `\'` escape at this byte, which go-yaml accepts and libyaml does not.
    EscapedQuote(usize),
}

impl From<DocError> for Failure {
    fn from(e: DocError) -> Failure {
        Failure::Doc(e)
    }
}

/// Byte offsets to lines of the file. Lines are counted at `\n` only, as git and
/// GitHub count them (libyaml also breaks lines at `\r`, U+2028 and friends).
struct LineTable {
    offset: u32,
    /// libyaml's marks do not count a byte order mark.
    bom: usize,
    breaks: Vec<usize>,
}

impl LineTable {
    fn new(text: &str, offset: u32) -> LineTable {
        LineTable {
            offset,
            bom: if text.starts_with('\u{feff}') { 3 } else { 0 },
            breaks: text
                .bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        }
    }

    /// Byte offset in the text of a libyaml mark.
    fn byte(&self, mark: &Mark) -> usize {
        usize::try_from(mark.index)
            .unwrap_or(usize::MAX)
            .saturating_add(self.bom)
    }

    fn line(&self, byte: usize) -> u32 {
        self.offset + 1 + self.breaks.partition_point(|b| *b < byte) as u32
    }

    fn line_of(&self, mark: &Mark) -> u32 {
        self.line(self.byte(mark))
    }
}

/// Where the next finished node goes.
enum Key {
    Field(String, u32),
    /// `<<`: the value's mappings are merged in.
    Merge(u32),
}

enum Collection {
    Seq(Vec<Node>),
    Map {
        entries: Vec<(String, Node)>,
        /// Position of each key in `entries`, once there are many.
        index: HashMap<String, usize>,
        key: Option<Key>,
    },
}

struct Frame {
    line: u32,
    anchor: Option<String>,
    flow: bool,
    collection: Collection,
}

/// Builds one document's tree from libyaml's events, with go-yaml v2's meaning.
struct Composer<'a> {
    text: &'a str,
    lines: LineTable,
    limits: &'a Limits,
    stack: Vec<Frame>,
    anchors: HashMap<String, Node>,
    alias_nodes: usize,
    alias_bytes: usize,
    root: Option<Node>,
}

impl<'a> Composer<'a> {
    fn new(text: &'a str, offset: u32, limits: &'a Limits) -> Composer<'a> {
        Composer {
            text,
            lines: LineTable::new(text, offset),
            limits,
            stack: Vec::new(),
            anchors: HashMap::new(),
            alias_nodes: limits.max_alias_nodes,
            alias_bytes: limits.max_alias_bytes,
            root: None,
        }
    }

    fn run(mut self) -> Result<Option<Node>, Failure> {
        let mut parser = Parser::new();
        parser.set_input(self.text.as_bytes());
        loop {
            let event = parser.parse().map_err(|e| self.syntax_failure(&e))?;
            let line = self.lines.line_of(&event.start_mark);
            let node = match event.data {
                EventData::StreamStart { .. } => continue,
                EventData::DocumentStart {
                    version_directive, ..
                } => {
                    if version_directive.is_some_and(|v| v.major != 1 || v.minor != 1) {
                        return Err(DocError::invalid(line, "invalid YAML: a `%YAML` directive for a version other than 1.1, which kubectl rejects").into());
                    }
                    continue;
                }
                // go-yaml reads the first document only: what follows a `...` is
                // never applied, so it is not read here either.
                EventData::StreamEnd | EventData::DocumentEnd { .. } => {
                    return Ok(self.root.filter(|n| n.value != Value::Null));
                }
                EventData::SequenceStart { anchor, style, .. } => {
                    let flow = style == SequenceStyle::Flow;
                    self.open(line, anchor, flow, Collection::Seq(Vec::new()))?;
                    continue;
                }
                EventData::MappingStart { anchor, style, .. } => {
                    let map = Collection::Map {
                        entries: Vec::new(),
                        index: HashMap::new(),
                        key: None,
                    };
                    self.open(line, anchor, style == MappingStyle::Flow, map)?;
                    continue;
                }
                EventData::SequenceEnd | EventData::MappingEnd => self.close()?,
                EventData::Scalar {
                    anchor,
                    tag,
                    value,
                    plain_implicit,
                    style,
                    ..
                } => {
                    self.check_go_yaml_scanner(style, &event.start_mark, &event.end_mark)?;
                    let merge = value == "<<"
                        && ((tag.is_none() && plain_implicit)
                            || tag.as_deref() == Some("tag:yaml.org,2002:merge"));
                    let scalar = resolve::resolve(value, tag.as_deref(), plain_implicit)
                        .map_err(|m| invalid_value(line, &m))?;
                    if self.wants_key() {
                        self.scalar_key(line, anchor, merge, scalar)?;
                        continue;
                    }
                    let value = resolve::to_value(scalar).map_err(|m| invalid_value(line, &m))?;
                    let node = Node { line, value };
                    if let Some(a) = anchor {
                        self.anchors.insert(a, node.clone());
                    }
                    node
                }
                EventData::Alias { anchor } => {
                    let node = self.alias(&anchor, line)?;
                    if self.wants_key() {
                        let key = resolve::key_of_value(&node.value)
                            .ok_or_else(|| bad_key(line, &node.value))?;
                        self.set_key(Key::Field(key, line));
                        continue;
                    }
                    node
                }
            };
            self.place(node)?;
        }
    }

    fn syntax_failure(&self, e: &libyaml_safer::Error) -> Failure {
        let Some(mark) = e.problem_mark() else {
            // A reader error (a control character) has no mark: find the character.
            let byte = self.text.find(|c| !is_printable(c)).unwrap_or(0);
            return Failure::Doc(DocError::invalid(
                self.lines.line(byte),
                format!("invalid YAML: {}", e.problem()),
            ));
        };
        let byte = self.lines.byte(&mark);
        if e.problem() == "found unknown escape character"
            && self.text.get(byte..).is_some_and(|t| t.starts_with("\\'"))
        {
            return Failure::EscapedQuote(byte);
        }
        let context = match (e.context(), e.context_mark()) {
            (Some(c), Some(m)) => format!(" ({c} at line {})", self.lines.line_of(&m)),
            _ => String::new(),
        };
        Failure::Doc(DocError::invalid(
            self.lines.line(byte),
            format!("invalid YAML: {}{context}", e.problem()),
        ))
    }

    /// Where go-yaml v2's scanner (from an older libyaml) reads a scalar differently
    /// from libyaml's, and so rejects what libyaml takes.
    fn check_go_yaml_scanner(
        &self,
        style: ScalarStyle,
        start: &Mark,
        end: &Mark,
    ) -> Result<(), DocError> {
        let (from, to) = (self.lines.byte(start), self.lines.byte(end));
        let Some(raw) = self.text.get(from..to) else {
            return Ok(());
        };
        let (skipped, body) = without_properties(raw);
        let found = match style {
            ScalarStyle::Plain if self.in_flow() => body
                .char_indices()
                .skip(1)
                .find(|(_, c)| *c == '?')
                .map(|(i, _)| (i, "a `?` inside an unquoted value in a `[...]` or `{...}` collection: kubectl reads it as the start of a key and rejects the document. Quote the value")),
            ScalarStyle::DoubleQuoted => escaped_slash(body).map(|i| (i, "`\\/` in a double-quoted string: kubectl's YAML reader knows no such escape and rejects the document. Write `/`")),
            _ => None,
        };
        match found {
            Some((i, message)) => Err(DocError::invalid(
                self.lines.line(from + skipped + i),
                format!("invalid YAML: {message}"),
            )),
            None => Ok(()),
        }
    }

    fn in_flow(&self) -> bool {
        self.stack.last().is_some_and(|f| f.flow)
    }

    fn wants_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame {
                collection: Collection::Map { key: None, .. },
                ..
            })
        )
    }

    fn set_key(&mut self, k: Key) {
        if let Some(Frame {
            collection: Collection::Map { key, .. },
            ..
        }) = self.stack.last_mut()
        {
            *key = Some(k);
        }
    }

    fn scalar_key(
        &mut self,
        line: u32,
        anchor: Option<String>,
        merge: bool,
        scalar: resolve::Scalar,
    ) -> Result<(), DocError> {
        if let Some(a) = anchor {
            if let Ok(value) = resolve::to_value(scalar.clone()) {
                self.anchors.insert(a, Node { line, value });
            }
        }
        let key = if merge {
            Key::Merge(line)
        } else {
            Key::Field(
                resolve::key_string(scalar).ok_or_else(|| bad_key(line, &Value::Null))?,
                line,
            )
        };
        self.set_key(key);
        Ok(())
    }

    fn open(
        &mut self,
        line: u32,
        anchor: Option<String>,
        flow: bool,
        collection: Collection,
    ) -> Result<(), DocError> {
        if self.stack.len() >= self.limits.max_depth {
            return Err(DocError::limit(
                line,
                format!(
                    "YAML nests deeper than {} levels; the document was not checked",
                    self.limits.max_depth
                ),
            ));
        }
        self.stack.push(Frame {
            line,
            anchor,
            flow,
            collection,
        });
        Ok(())
    }

    fn close(&mut self) -> Result<Node, DocError> {
        let frame = self
            .stack
            .pop()
            .ok_or_else(|| DocError::invalid(1, "invalid YAML: unbalanced collection"))?;
        let value = match frame.collection {
            Collection::Seq(items) => Value::Seq(items),
            Collection::Map { entries, .. } => Value::Map(entries),
        };
        let node = Node {
            line: frame.line,
            value,
        };
        if let Some(a) = frame.anchor {
            self.anchors.insert(a, node.clone());
        }
        Ok(node)
    }

    /// A copy of an anchored node, within the alias budgets.
    fn alias(&mut self, name: &str, line: u32) -> Result<Node, DocError> {
        let Some(anchored) = self.anchors.get(name) else {
            let message = if self.stack.iter().any(|f| f.anchor.as_deref() == Some(name)) {
                format!("invalid YAML: alias `*{name}` is inside the node anchored `&{name}`, which would contain itself; kubectl rejects it")
            } else {
                format!("invalid YAML: alias `*{name}` names no anchor defined before it; kubectl rejects it")
            };
            return Err(DocError::invalid(line, message));
        };
        // Measured before the copy is made: the copy is what a bomb costs.
        let (size, bytes) = anchored.weight();
        let over = |what: String| {
            DocError::limit(
                line,
                format!("YAML aliases expand to more than {what}; the document was not checked"),
            )
        };
        if size > self.alias_nodes {
            return Err(over(format!("{} nodes", self.limits.max_alias_nodes)));
        }
        if bytes > self.alias_bytes {
            return Err(over(format!(
                "{} MiB of text",
                self.limits.max_alias_bytes / (1024 * 1024)
            )));
        }
        self.alias_nodes -= size;
        self.alias_bytes -= bytes;
        Ok(Node {
            line,
            ..anchored.clone()
        })
    }

    /// Puts a finished node where it belongs: the root, a list, or a mapping (as a
    /// key, a value, or a merge).
    fn place(&mut self, node: Node) -> Result<(), DocError> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        match &mut frame.collection {
            Collection::Seq(items) => items.push(node),
            Collection::Map {
                entries,
                index,
                key,
            } => match key.take() {
                None => return Err(bad_key(node.line, &node.value)),
                // A field's line is its key's line: a nested mapping or list
                // would otherwise start at its first child.
                Some(Key::Field(k, key_line)) => insert_entry(
                    entries,
                    index,
                    k,
                    Node {
                        line: key_line,
                        ..node
                    },
                ),
                Some(Key::Merge(line)) => merge(entries, index, node, line)?,
            },
        }
        Ok(())
    }
}

/// libyaml's printable characters; anything else stops its reader.
fn is_printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10ffff}')
}

/// A node's text without its anchor and tag: (bytes skipped, the rest).
fn without_properties(raw: &str) -> (usize, &str) {
    let mut rest = raw;
    while rest.starts_with(['&', '!']) {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    (raw.len() - rest.len(), rest)
}

/// Byte of the first `\/` escape in a double-quoted scalar's text.
fn escaped_slash(quoted: &str) -> Option<usize> {
    let b = quoted.as_bytes();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'\\' if b.get(i + 1) == Some(&b'/') => return Some(i),
            b'\\' => i += 2,
            b'"' => return None,
            _ => i += 1,
        }
    }
    None
}

fn invalid_value(line: u32, problem: &str) -> DocError {
    DocError::invalid(
        line,
        format!(
            "invalid value: {problem}; kubectl cannot turn it into JSON and rejects the document"
        ),
    )
}

fn bad_key(line: u32, key: &Value) -> DocError {
    let what = match key {
        Value::Seq(_) | Value::Map(_) => "a list or mapping",
        _ => "null (`~` or empty)",
    };
    DocError::invalid(
        line,
        format!("invalid YAML: a mapping key is {what}; Kubernetes objects have only text keys, and kubectl rejects the document"),
    )
}

/// Keys a mapping holds before its keys are looked up by hash.
const LINEAR_KEYS: usize = 16;

/// Inserts a mapping entry. A repeated key keeps the last value (and its line), as
/// kubectl does.
fn insert_entry(
    entries: &mut Vec<(String, Node)>,
    index: &mut HashMap<String, usize>,
    key: String,
    node: Node,
) {
    if entries.len() == LINEAR_KEYS && index.is_empty() {
        index.extend(entries.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)));
    }
    let existing = if index.is_empty() {
        entries.iter().position(|(k, _)| *k == key)
    } else {
        index.get(&key).copied()
    };
    match existing {
        Some(i) => entries[i].1 = node,
        None => {
            if !index.is_empty() {
                index.insert(key.clone(), entries.len());
            }
            entries.push((key, node));
        }
    }
}

/// `<<` as go-yaml v2 merges: a mapping's entries are set in order, over what is
/// already there (keys after the `<<` still win); a list of mappings is merged last
/// to first, so the first one wins.
fn merge(
    entries: &mut Vec<(String, Node)>,
    index: &mut HashMap<String, usize>,
    node: Node,
    line: u32,
) -> Result<(), DocError> {
    let sources = match node.value {
        Value::Map(_) => vec![node],
        Value::Seq(items) if items.iter().all(|i| matches!(i.value, Value::Map(_))) => {
            items.into_iter().rev().collect()
        }
        _ => {
            return Err(DocError::invalid(
                line,
                "invalid YAML: `<<` merges a mapping or a list of mappings, and here is given something else; kubectl rejects the document",
            ))
        }
    };
    for source in sources {
        if let Value::Map(merged) = source.value {
            for (k, v) in merged {
                insert_entry(entries, index, k, v);
            }
        }
    }
    Ok(())
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
