//! Where a rendered object's fields came from: the kustomize patches and Helm
//! templates behind it, so findings land on the line a person edits.

use super::template_values;
use crate::manifest::{self, Location};
use crate::yaml::Node;
use serde_json::Value as Json;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum Patch {
    Merge {
        file: String,
        doc: Arc<Node>,
    },
    Json {
        file: String,
        ops: Vec<(String, u32)>,
    },
}

/// How fields of a rendered object map back to the files that produced them.
#[derive(Debug, Clone)]
pub enum SourceMap {
    Kustomize {
        origin: Option<(String, Arc<Node>)>,
        patches: Vec<Patch>,
        entry: (String, u32),
    },
    Helm {
        template: Option<(String, Arc<String>)>,
        values: Vec<(String, Arc<Node>)>,
        entry: (String, u32),
    },
}

fn has_path(node: &Node, path: &[Json]) -> bool {
    let mut n = node;
    for step in path {
        let next = match (step, &n.value) {
            (Json::String(k), _) => n.get(k),
            (Json::Number(i), crate::yaml::Value::Seq(items)) => {
                i.as_u64().and_then(|i| items.get(i as usize))
            }
            _ => None,
        };
        match next {
            Some(x) => n = x,
            None => return false,
        }
    }
    true
}

fn pointer(path: &[Json]) -> String {
    path.iter()
        .map(|p| match p {
            Json::String(s) => format!("/{}", s.replace('~', "~0").replace('/', "~1")),
            other => format!("/{other}"),
        })
        .collect()
}

/// Sprig's functions whose result differs on every render.
const RANDOM_FUNCTIONS: [&str; 7] = [
    "randAlphaNum",
    "randAlpha",
    "randNumeric",
    "randAscii",
    "randInt",
    "randBytes",
    "uuidv4",
];

/// A template line that sets a name from a random function.
fn names_randomly(template: &str) -> bool {
    template.lines().any(|l| {
        let l = l.trim_start().trim_start_matches("- ");
        (l.starts_with("name:") || l.starts_with("generateName:"))
            && RANDOM_FUNCTIONS.iter().any(|f| l.contains(f))
    })
}

impl manifest::Origin for SourceMap {
    fn random_name_source(&self) -> Option<&str> {
        match self {
            SourceMap::Helm {
                template: Some((file, text)),
                ..
            } if names_randomly(text) => Some(file),
            _ => None,
        }
    }

    fn locate(&self, path: &[Json]) -> Location {
        match self {
            SourceMap::Kustomize { origin, patches, entry } => {
                let wanted = pointer(path);
                for p in patches.iter().rev() {
                    match p {
                        Patch::Merge { file, doc } if !path.is_empty() && has_path(doc, path) => {
                            return Location {
                                file: file.clone(),
                                line: doc.line_of(path),
                                note: None,
                            }
                        }
                        Patch::Json { file, ops } => {
                            if let Some((_, line)) = ops.iter().rev().find(|(op, _)| !path.is_empty() && (wanted == *op || wanted.starts_with(&format!("{op}/")))) {
                                return Location {
                                    file: file.clone(),
                                    line: *line,
                                    note: None,
                                };
                            }
                        }
                        _ => {}
                    }
                }
                match origin {
                    Some((file, doc)) => Location {
                        file: file.clone(),
                        line: doc.line_of(path),
                        note: None,
                    },
                    None => Location {
                        file: entry.0.clone(),
                        line: entry.1,
                        note: Some("meshward could not trace this rendered object to its source file; the location is the root's kustomization".into()),
                    },
                }
            }
            SourceMap::Helm { template, values, entry } => match template_values::locate(template.as_ref(), values, path) {
                Some((file, line)) => Location { file, line, note: None },
                None => match template {
                    Some((file, _)) => Location {
                        file: file.clone(),
                        line: 1,
                        note: Some("meshward could not find the line in the template that sets this field".into()),
                    },
                    None => Location {
                        file: entry.0.clone(),
                        line: entry.1,
                        note: Some("meshward could not trace this rendered object to its template; the location is the chart's Chart.yaml".into()),
                    },
                },
            },
        }
    }
}
