//! Where each field of an object is, kept compactly: an object's YAML tree is about
//! as large as the object itself, and only its lines are needed once it is parsed.

use crate::yaml::{Node, Value};
use serde_json::Value as Json;
use std::hash::{DefaultHasher, Hash, Hasher};

/// The line of every field path of one object: (hash of the path, line), sorted.
#[derive(Debug, Clone, PartialEq)]
pub struct LineIndex {
    root: u32,
    entries: Box<[(u64, u32)]>,
}

/// A path step as hashed: a map key or a list index, never confused with each other.
enum Step<'a> {
    Key(&'a str),
    Index(u64),
}

fn extend(parent: u64, step: Step) -> u64 {
    let mut h = DefaultHasher::new();
    parent.hash(&mut h);
    match step {
        Step::Key(k) => {
            0u8.hash(&mut h);
            k.hash(&mut h);
        }
        Step::Index(i) => {
            1u8.hash(&mut h);
            i.hash(&mut h);
        }
    }
    h.finish()
}

impl LineIndex {
    pub fn of(node: &Node) -> LineIndex {
        let mut entries = Vec::new();
        collect(node, 0, &mut entries);
        // Stable: were a path ever present twice, its first occurrence wins, as in a walk.
        entries.sort_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        LineIndex {
            root: node.line,
            entries: entries.into_boxed_slice(),
        }
    }

    fn get(&self, hash: u64) -> Option<u32> {
        self.entries
            .binary_search_by_key(&hash, |e| e.0)
            .ok()
            .map(|i| self.entries[i].1)
    }

    /// The line of the field at `path` or, when the object lacks it, of the deepest
    /// part of the path it has.
    pub fn line_of(&self, path: &[Json]) -> u32 {
        let mut hash = 0;
        let mut line = self.root;
        for step in path {
            hash = match step {
                Json::String(k) => extend(hash, Step::Key(k)),
                Json::Number(n) => match n.as_u64() {
                    Some(i) => extend(hash, Step::Index(i)),
                    None => break,
                },
                _ => break,
            };
            match self.get(hash) {
                Some(l) => line = l,
                None => break,
            }
        }
        line
    }
}

fn collect(node: &Node, hash: u64, out: &mut Vec<(u64, u32)>) {
    match &node.value {
        Value::Map(entries) => {
            for (k, v) in entries {
                let h = extend(hash, Step::Key(k));
                out.push((h, v.line));
                collect(v, h, out);
            }
        }
        Value::Seq(items) => {
            for (i, v) in items.iter().enumerate() {
                let h = extend(hash, Step::Index(i as u64));
                out.push((h, v.line));
                collect(v, h, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;
    use serde_json::json;

    fn doc(text: &str) -> Node {
        let docs = parse_documents(text, &Default::default()).expect("parses");
        docs.into_iter()
            .next()
            .and_then(|d| d.result.ok().flatten())
            .expect("a document")
    }

    #[test]
    fn lines_match_the_tree_walk() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  labels:\n    app: a\nspec:\n  ports:\n    - port: 80\n      name: http\n    - port: 81\n  selector: {app: a}\nkey: 1\nkey: 2\n";
        let node = doc(text);
        let index = LineIndex::of(&node);
        let paths = [
            json!([]),
            json!(["metadata", "labels", "app"]),
            json!(["spec", "ports", 1, "port"]),
            json!(["spec", "ports", 0, "name"]),
            json!(["spec", "ports", 5, "name"]),
            json!(["spec", "selector", "app"]),
            json!(["spec", "ports", "0"]),
            json!(["spec", "missing", "deeper"]),
            json!(["key"]),
        ];
        for p in paths {
            let p = p.as_array().expect("array").clone();
            assert_eq!(index.line_of(&p), node.line_of(&p), "{p:?}");
        }
        assert_eq!(
            index.line_of(&[json!("spec"), json!("ports"), json!(1)]),
            11
        );
        // A repeated key keeps its last value (and line), as the object does.
        assert_eq!(index.line_of(&[json!("key")]), 14);
    }
}
