//! One document parsed with libyaml's events and composed into a [`Node`] tree,
//! with go-yaml's meaning of each scalar and the limits checked as it goes.

use super::resolve;
use super::{DocError, Limits, Node, Value};
use foldhash::HashMap;
use libyaml_safer::{EventData, MappingStyle, Mark, Parser, ScalarStyle, SequenceStyle};
use std::borrow::Cow;

/// Reading work (bytes parsed) one document may cost when it is read again.
const REREAD_BUDGET: usize = 64 * 1024 * 1024;

/// Parses one document's text, `offset` lines into its file.
pub(super) fn parse_chunk(
    text: &str,
    offset: u32,
    limits: &Limits,
) -> Result<Option<Node>, DocError> {
    // kubectl's reader ends every line with a newline, the last one too; libyaml's
    // port also needs it there (it panics on a block scalar ending the input).
    let mut text = if text.ends_with('\n') {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("{text}\n"))
    };
    let mut work = text.len();
    loop {
        let (at, what, rewritten) = match compose(&text, offset, limits) {
            Ok(root) => return Ok(root),
            Err(Failure::Doc(e)) => return Err(e),
            // go-yaml reads `\'` in a double-quoted string as `'`; libyaml has no such
            // escape. The string is rewritten with the `\x27` both know.
            Err(Failure::EscapedQuote(at)) => (
                at,
                "double-quoted strings with `\\'`",
                rewrite_escaped_quotes(&text, at),
            ),
            // go-yaml ends an unquoted value in `[...]` or `{...}` at `,` `]` `}` `[`
            // `{` `?` even right after a `:` (`addresses: [2001:db8::]`); libyaml
            // rejects the `:`. The value is rewritten as the quoted string go-yaml
            // reads it as.
            Err(Failure::FlowColon { from, to }) => (
                from,
                "unquoted values ending in `:` inside `[...]` or `{...}`",
                quote_plain(&text, from, to),
            ),
        };
        // Then read again, as often as the budget allows.
        work += text.len();
        if work > REREAD_BUDGET {
            let line = LineTable::new(&text, offset).line(at);
            return Err(DocError::limit(
                line,
                format!("the document holds more {what} than meshward reads; it was not checked"),
            ));
        }
        text = Cow::Owned(rewritten);
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

/// `text` with its bytes `from..to`, an unquoted value, written as a double-quoted
/// string of the same characters.
fn quote_plain(text: &str, from: usize, to: usize) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..from]);
    out.push('"');
    for c in text[from..to].chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out.push_str(&text[to..]);
    out
}

/// What go-yaml makes of a `?` after the first character of an unquoted value in a
/// flow collection.
const QUESTION_IN_FLOW: &str = "a `?` inside an unquoted value in a `[...]` or `{...}` collection: kubectl reads it as the start of a key and rejects the document. Quote the value";

/// Where a `?` after its first character makes go-yaml reject an unquoted value of a
/// flow collection (see `QUESTION_IN_FLOW`).
fn question_in_flow(value: &str) -> Option<usize> {
    value
        .char_indices()
        .skip(1)
        .find(|(_, c)| *c == '?')
        .map(|(i, _)| i)
}

/// Why composing stopped.
enum Failure {
    Doc(DocError),
    /// A `\'` escape at this byte, which go-yaml accepts and libyaml does not.
    EscapedQuote(usize),
    /// An unquoted value in a flow collection at these bytes, ending in a `:` that
    /// a flow indicator follows: go-yaml reads it as a string, libyaml rejects it.
    FlowColon {
        from: usize,
        to: usize,
    },
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
            anchors: HashMap::default(),
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
                        index: HashMap::default(),
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
        if let Some(quoted) = self.flow_colon(e, byte) {
            return quoted;
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

    /// libyaml's "found unexpected ':'" in an unquoted value of a flow collection,
    /// where go-yaml reads the value up to that `:` as a string: the value's bytes;
    /// or the error go-yaml gives for a `?` in it. A value over several lines folds
    /// alike quoted or not, so the lines of what follows stay where they were.
    fn flow_colon(&self, e: &libyaml_safer::Error, colon: usize) -> Option<Failure> {
        if e.problem() != "found unexpected ':'"
            || e.context() != Some("while scanning a plain scalar")
        {
            return None;
        }
        let from = self.lines.byte(&e.context_mark()?);
        let value = self.text.get(from..=colon)?;
        if !value.ends_with(':') {
            return None;
        }
        if let Some(i) = question_in_flow(value) {
            return Some(Failure::Doc(DocError::invalid(
                self.lines.line(from + i),
                format!("invalid YAML: {QUESTION_IN_FLOW}"),
            )));
        }
        Some(Failure::FlowColon {
            from,
            to: colon + 1,
        })
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
            ScalarStyle::Plain if self.in_flow() => {
                question_in_flow(body).map(|i| (i, QUESTION_IN_FLOW))
            }
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
