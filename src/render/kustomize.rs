//! kustomize roots: the reference graph (for inputs, remote refusal and escapes), the
//! build through a wrapper kustomization that asks for origin annotations, and the
//! mapping of rendered fields back to the resource or patch that set them.

use super::apps::strings;
use super::problem::Problem;
use super::roots::{is_remote, join, parent, InlinePatch, KustomizeOptions, KUSTOMIZATION_FILES};
use super::source_map::{Patch, SourceMap};
use crate::pointer::At;
use crate::yaml::{self, Limits, Node};
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// What a kustomization folder pulls in.
#[derive(Debug, Default, Clone)]
pub struct Graph {
    /// Kustomization folders reached (the root included).
    pub dirs: BTreeSet<String>,
    /// Files read.
    pub files: BTreeSet<String>,
    pub problems: Vec<Problem>,
}

pub fn kustomization_file(dir: &str, exists: &dyn Fn(&str) -> bool) -> Option<String> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|f| join(dir, f).unwrap_or_default())
        .find(|p| exists(p))
}

fn read_json(read: &dyn Fn(&str) -> Option<String>, path: &str) -> Option<Json> {
    yaml_serde::from_str::<Json>(&read(path)?).ok()
}

/// Walks the kustomization graph from `dir`. `exists` answers for files, `is_dir`
/// for folders of the checked tree.
pub fn graph(
    dir: &str,
    exists: &dyn Fn(&str) -> bool,
    is_dir: &dyn Fn(&str) -> bool,
    read: &dyn Fn(&str) -> Option<String>,
) -> Graph {
    let mut g = Graph::default();
    let mut stack = vec![dir.to_string()];
    while let Some(d) = stack.pop() {
        if !g.dirs.insert(d.clone()) {
            continue;
        }
        let Some(kfile) = kustomization_file(&d, exists) else {
            continue;
        };
        g.files.insert(kfile.clone());
        let Some(k) = read_json(read, &kfile) else {
            continue;
        };
        let mut refs: Vec<String> = Vec::new();
        for key in ["resources", "bases", "components", "crds"] {
            refs.extend(strings(k.get(key)));
        }
        // Entries are file paths or inline patches (which contain newlines).
        refs.extend(
            strings(k.get("patchesStrategicMerge"))
                .into_iter()
                .filter(|s| !s.contains('\n')),
        );
        for key in ["patches", "patchesJson6902", "replacements"] {
            for p in k.get(key).and_then(Json::as_array).into_iter().flatten() {
                if let Some(path) = p.get("path").and_then(Json::as_str) {
                    refs.push(path.to_string());
                }
            }
        }
        for key in ["configMapGenerator", "secretGenerator"] {
            for gen in k.get(key).and_then(Json::as_array).into_iter().flatten() {
                for f in strings(gen.get("files"))
                    .into_iter()
                    .chain(strings(gen.get("envs")))
                {
                    refs.push(f.split_once('=').map(|(_, p)| p.to_string()).unwrap_or(f));
                }
                if let Some(env) = gen.get("env").and_then(Json::as_str) {
                    refs.push(env.to_string());
                }
            }
        }
        for key in ["generators", "transformers", "validators"] {
            refs.extend(
                strings(k.get(key))
                    .into_iter()
                    .filter(|s| !s.contains('\n')),
            );
        }
        if k.get("helmCharts").is_some() || k.get("helmChartInflationGenerator").is_some() {
            g.problems.push(Problem::refused(
                &kfile,
                "uses helmCharts, which makes kustomize run helm and download charts; meshward renders without exec or network. Render the chart as its own root (a folder with Chart.yaml) instead",
            ));
        }
        for r in refs {
            // kustomize reads an absolute path wherever it points; join() would
            // take it for a path in the repository.
            if r.starts_with('/') {
                g.problems.push(Problem::refused(
                    &kfile,
                    &format!("references the absolute path {r:?}; meshward reads only files of the repository, by relative path"),
                ));
                continue;
            }
            if is_remote(&r) {
                g.problems.push(Problem::refused(
                    &kfile,
                    &format!("references the remote {r:?}; meshward renders without network access, so this root was not rendered. Vendor it into the repository"),
                ));
                continue;
            }
            match join(&d, &r) {
                None => g.problems.push(Problem::refused(
                    &kfile,
                    &format!("references {r:?}, which is outside the repository; meshward does not read outside the checkout"),
                )),
                Some(target) if is_dir(&target) => stack.push(target),
                Some(target) => {
                    g.files.insert(target);
                }
            }
        }
    }
    g
}

/// The wrapper kustomization: the root as its only resource, origin annotations on,
/// and the app object's options. `relative` maps a folder of the repository to a
/// path relative to the wrapper.
pub fn wrapper(
    relative_root: &str,
    opts: &KustomizeOptions,
    relative: &dyn Fn(&str) -> String,
) -> String {
    let mut k = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [relative_root],
        "buildMetadata": ["originAnnotations", "transformerAnnotations"],
    });
    if !opts.components.is_empty() {
        let components: Vec<String> = opts.components.iter().map(|c| relative(c)).collect();
        k["components"] = Json::from(components);
    }
    if !opts.common_annotations.is_empty() {
        k["commonAnnotations"] = serde_json::json!(opts.common_annotations);
    }
    if !opts.replicas.is_empty() {
        k["replicas"] = Json::from(opts.replicas.clone());
    }
    if let Some(ns) = &opts.namespace {
        k["namespace"] = Json::from(ns.clone());
    }
    if let Some(p) = &opts.name_prefix {
        k["namePrefix"] = Json::from(p.clone());
    }
    if let Some(sfx) = &opts.name_suffix {
        k["nameSuffix"] = Json::from(sfx.clone());
    }
    if !opts.common_labels.is_empty() {
        let mut labels = serde_json::json!({
            "pairs": opts.common_labels,
            "includeSelectors": opts.labels_include_selectors,
        });
        if opts.labels_include_templates {
            labels["includeTemplates"] = Json::Bool(true);
        }
        k["labels"] = Json::from(vec![labels]);
    }
    if !opts.images.is_empty() {
        let images: Vec<Json> = opts
            .images
            .iter()
            .map(|i| {
                // Argo's form: name=newName:tag or name:tag.
                let (name, rest) = i.split_once('=').unwrap_or(("", i));
                let (new_name, tag) = rest.rsplit_once(':').unwrap_or((rest, ""));
                let name = if name.is_empty() { new_name } else { name };
                let mut img = serde_json::json!({"name": name});
                if new_name != name {
                    img["newName"] = Json::from(new_name);
                }
                if !tag.is_empty() {
                    img["newTag"] = Json::from(tag);
                }
                img
            })
            .collect();
        k["images"] = Json::from(images);
    }
    if !opts.image_overrides.is_empty() {
        let mut images = k
            .get("images")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        images.extend(opts.image_overrides.iter().cloned());
        k["images"] = Json::from(images);
    }
    if !opts.patches.is_empty() {
        let patches: Vec<Json> = opts.patches.iter().map(|p| p.spec.clone()).collect();
        k["patches"] = Json::from(patches);
    }
    serde_json::to_string_pretty(&k).unwrap_or_default()
}

const ORIGIN: &str = "config.kubernetes.io/origin";
const TRANSFORMATIONS: &str = "alpha.config.kubernetes.io/transformations";

/// Takes the build metadata off a rendered object (policies must not see it) and
/// returns (origin path, kustomization files whose patches touched it), both relative
/// to the wrapper folder.
pub fn take_metadata(body: &mut Json) -> (Option<String>, Vec<String>) {
    let Some(annotations) = body
        .pointer_mut("/metadata/annotations")
        .and_then(Json::as_object_mut)
    else {
        return (None, Vec::new());
    };
    let origin = annotations
        .remove(ORIGIN)
        .and_then(|v| {
            v.as_str()
                .and_then(|s| yaml_serde::from_str::<Json>(s).ok())
        })
        .and_then(|v| v.get("path").and_then(Json::as_str).map(str::to_string));
    let patched_in = annotations
        .remove(TRANSFORMATIONS)
        .and_then(|v| {
            v.as_str()
                .and_then(|s| yaml_serde::from_str::<Json>(s).ok())
        })
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|t| t.at("/configuredBy/kind").and_then(Json::as_str) == Some("PatchTransformer"))
        .filter_map(|t| {
            t.get("configuredIn")
                .and_then(Json::as_str)
                .map(str::to_string)
        })
        .collect();
    let empty = annotations.is_empty();
    if empty {
        if let Some(meta) = body.get_mut("metadata").and_then(Json::as_object_mut) {
            meta.remove("annotations");
        }
    }
    (origin, patched_in)
}

/// Builds the source map of one rendered object.
#[allow(clippy::too_many_arguments)]
pub fn source_map(
    kind: &str,
    rendered_name: &str,
    origin: Option<String>,
    patched_in: &[String],
    to_repo: &dyn Fn(&str) -> Option<String>,
    read: &dyn Fn(&str) -> Option<String>,
    entry: (&str, u32),
    inline_patches: &[InlinePatch],
) -> SourceMap {
    let parse = |file: &str| -> Vec<Node> {
        read(file)
            .and_then(|t| yaml::parse_documents(&t, &Limits::default()).ok())
            .map(|docs| {
                docs.into_iter()
                    .filter_map(|d| d.result.ok().flatten())
                    .collect()
            })
            .unwrap_or_default()
    };
    let same_object = |n: &Node, original: Option<&str>| {
        n.get("kind").and_then(Node::as_str) == Some(kind)
            && n.get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Node::as_str)
                .is_some_and(|name| original.map_or(rendered_name.contains(name), |o| o == name))
    };
    let origin_doc = origin.as_deref().and_then(to_repo).and_then(|file| {
        let doc = parse(&file).into_iter().find(|n| same_object(n, None))?;
        Some((file, Arc::new(doc)))
    });
    let original_name = origin_doc
        .as_ref()
        .and_then(|(_, n)| n.get("metadata")?.get("name")?.as_str().map(str::to_string));
    let targets_it = |target: Option<&Json>| {
        target.is_none_or(|t| {
            t.get("kind")
                .and_then(Json::as_str)
                .is_none_or(|k| k == kind)
                && t.get("name").and_then(Json::as_str).is_none_or(|n| {
                    Some(n) == original_name.as_deref() || rendered_name.contains(n)
                })
        })
    };
    let mut patches = Vec::new();
    // One patch's documents: a JSON 6902 patch (a list of operations) sets the paths
    // it names; a strategic-merge patch the fields it holds, if it is this object's.
    let mut add = |file: &str, docs: Vec<Node>, targeted: bool| {
        for doc in docs {
            match &doc.value {
                yaml::Value::Seq(ops) => {
                    let ops: Vec<(String, u32)> = ops
                        .iter()
                        .filter_map(|op| Some((op.get("path")?.as_str()?.to_string(), op.line)))
                        .collect();
                    patches.push(Patch::Json {
                        file: file.to_string(),
                        ops,
                    });
                }
                _ if targeted || same_object(&doc, original_name.as_deref()) => {
                    patches.push(Patch::Merge {
                        file: file.to_string(),
                        doc: Arc::new(doc),
                    });
                }
                _ => {}
            }
        }
    };
    for kfile in patched_in.iter().filter_map(|k| to_repo(k)) {
        let Some(text) = read(&kfile) else {
            continue;
        };
        let Ok(k) = yaml_serde::from_str::<Json>(&text) else {
            continue;
        };
        let dir = parent(&kfile).to_string();
        // (patch file, or the patch itself written into the kustomization; target)
        let mut found: Vec<(Result<String, String>, Option<Json>)> = Vec::new();
        for key in ["patches", "patchesJson6902"] {
            for p in k.get(key).and_then(Json::as_array).into_iter().flatten() {
                let target = p.get("target").cloned();
                if let Some(path) = p.get("path").and_then(Json::as_str) {
                    found.push((Ok(path.to_string()), target));
                } else if let Some(inline) = p.get("patch").and_then(Json::as_str) {
                    found.push((Err(inline.to_string()), target));
                }
            }
        }
        for p in k
            .get("patchesStrategicMerge")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
        {
            if p.contains('\n') {
                found.push((Err(p.to_string()), None));
            } else {
                found.push((Ok(p.to_string()), None));
            }
        }
        for (patch, target) in found {
            if !targets_it(target.as_ref()) {
                continue;
            }
            match patch {
                Ok(rel) => {
                    if let Some(file) = join(&dir, &rel) {
                        add(&file, parse(&file), target.is_some());
                    }
                }
                Err(inline) => {
                    let docs = embedded(&text, &inline)
                        .unwrap_or_else(|| at_line(&inline, line_of_text(&text, &inline)));
                    add(&kfile, docs, target.is_some());
                }
            }
        }
    }
    // Patches the app object itself carries (Flux spec.patches, Argo
    // kustomize.patches) are applied last, by the wrapper; a field they set points
    // at its line in the app object, or in the patch file the app object names.
    let app_text = if inline_patches.is_empty() {
        None
    } else {
        read(entry.0)
    };
    for p in inline_patches {
        let Some(text) = p.spec.get("patch").and_then(Json::as_str) else {
            continue;
        };
        if !targets_it(p.spec.get("target")) {
            continue;
        }
        let (file, docs) = match &p.file {
            Some(file) => (file.as_str(), documents(text)),
            None => (
                entry.0,
                app_text
                    .as_deref()
                    .and_then(|app| embedded(app, text))
                    .unwrap_or_else(|| at_line(text, entry.1)),
            ),
        };
        add(file, docs, p.spec.get("target").is_some());
    }
    SourceMap::Kustomize {
        origin: origin_doc,
        patches,
        entry: (entry.0.to_string(), entry.1),
    }
}

/// The documents of a YAML text written inside another YAML file (an inline patch,
/// inline values), with the lines they have in that file. None when the text is
/// not found there as a string.
pub fn embedded(file_text: &str, text: &str) -> Option<Vec<Node>> {
    let docs = yaml::parse_documents(file_text, &Limits::default()).ok()?;
    let line = docs
        .iter()
        .filter_map(|d| d.result.as_ref().ok().and_then(Option::as_ref))
        .find_map(|n| string_line(n, text))?;
    // A block scalar (`patch: |`) starts on the line after its indicator.
    let indicator = file_text
        .lines()
        .nth(line.saturating_sub(1) as usize)
        .map(|l| {
            let t = l.trim_end();
            let last = t.rsplit([':', ' ']).next().unwrap_or("");
            last.starts_with('|') || last.starts_with('>')
        })
        .unwrap_or(false);
    let offset = if indicator {
        line
    } else {
        line.saturating_sub(1)
    };
    let parsed = yaml::parse_documents(text, &Limits::default()).ok()?;
    Some(
        parsed
            .into_iter()
            .filter_map(|d| d.result.ok().flatten())
            .map(|n| shift(n, offset))
            .collect(),
    )
}

/// Line of the string node holding exactly `text`.
fn string_line(node: &Node, text: &str) -> Option<u32> {
    match &node.value {
        yaml::Value::Str(s) if s == text => Some(node.line),
        yaml::Value::Seq(items) => items.iter().find_map(|n| string_line(n, text)),
        yaml::Value::Map(entries) => entries.iter().find_map(|(_, n)| string_line(n, text)),
        _ => None,
    }
}

/// First line of `file_text` that holds the first line of `text` (1 when none).
fn line_of_text(file_text: &str, text: &str) -> u32 {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    file_text
        .lines()
        .position(|l| !first.is_empty() && l.contains(first))
        .map_or(1, |i| i as u32 + 1)
}

/// The documents of a YAML text, with its own lines.
fn documents(text: &str) -> Vec<Node> {
    yaml::parse_documents(text, &Limits::default())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| d.result.ok().flatten())
        .collect()
}

/// An inline text's documents with every line at `line`, when where it sits in its
/// file cannot be found.
fn at_line(text: &str, line: u32) -> Vec<Node> {
    documents(text)
        .into_iter()
        .map(|n| flatten_lines(n, line))
        .collect()
}

fn shift(mut node: Node, by: u32) -> Node {
    node.line += by;
    node.value = map_children(node.value, &|n| shift(n, by));
    node
}

fn flatten_lines(mut node: Node, line: u32) -> Node {
    node.line = line;
    node.value = map_children(node.value, &|n| flatten_lines(n, line));
    node
}

fn map_children(value: yaml::Value, f: &dyn Fn(Node) -> Node) -> yaml::Value {
    match value {
        yaml::Value::Seq(items) => yaml::Value::Seq(items.into_iter().map(f).collect()),
        yaml::Value::Map(entries) => {
            yaml::Value::Map(entries.into_iter().map(|(k, n)| (k, f(n))).collect())
        }
        other => other,
    }
}

/// Relative path from the wrapper folder to the root folder.
pub fn relative(from: &Path, to: &Path) -> Option<String> {
    pathdiff::diff_paths(to, from).map(|p| p.to_string_lossy().replace('\\', "/"))
}

/// Maps a path relative to the wrapper folder back to the checked tree.
pub fn wrapper_to_repo(wrap_dir: &Path, repo_dir: &Path, rel: &str) -> Option<String> {
    let mut full = wrap_dir.to_path_buf();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                full.pop();
            }
            s => full.push(s),
        }
    }
    full.strip_prefix(repo_dir)
        .ok()
        .map(|p| p.to_string_lossy().replace('\\', "/"))
}
