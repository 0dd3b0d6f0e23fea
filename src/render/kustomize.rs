//! kustomize roots: the reference graph (for inputs, remote refusal and escapes), the
//! build through a wrapper kustomization that asks for origin annotations, and the
//! mapping of rendered fields back to the resource or patch that set them.

use super::roots::{
    is_remote, join, parent, strings, InlinePatch, KustomizeOptions, KUSTOMIZATION_FILES,
};
use super::{Problem, SourceMap};
use crate::manifest::yaml::{self, Limits, Node};
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
        .filter(|t| {
            t.pointer("/configuredBy/kind").and_then(Json::as_str) == Some("PatchTransformer")
        })
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
    let mut patches = Vec::new();
    for kfile in patched_in.iter().filter_map(|k| to_repo(k)) {
        let Some(k) = read(&kfile).and_then(|t| yaml_serde::from_str::<Json>(&t).ok()) else {
            continue;
        };
        let dir = parent(&kfile).to_string();
        let mut files: Vec<(String, Option<Json>)> = Vec::new();
        for p in k
            .get("patches")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(path) = p.get("path").and_then(Json::as_str) {
                files.push((path.to_string(), p.get("target").cloned()));
            }
        }
        for p in k
            .get("patchesStrategicMerge")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(path) = p.as_str().filter(|s| !s.contains('\n')) {
                files.push((path.to_string(), None));
            }
        }
        for p in k
            .get("patchesJson6902")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(path) = p.get("path").and_then(Json::as_str) {
                files.push((path.to_string(), p.get("target").cloned()));
            }
        }
        for (rel, target) in files {
            let Some(file) = join(&dir, &rel) else {
                continue;
            };
            let target_matches = target.as_ref().is_none_or(|t| {
                t.get("kind")
                    .and_then(Json::as_str)
                    .is_none_or(|k| k == kind)
                    && t.get("name").and_then(Json::as_str).is_none_or(|n| {
                        Some(n) == original_name.as_deref() || rendered_name.contains(n)
                    })
            });
            if !target_matches {
                continue;
            }
            for doc in parse(&file) {
                match &doc.value {
                    // A JSON 6902 patch: a list of operations.
                    yaml::Value::Seq(ops) => {
                        let ops: Vec<(String, u32)> = ops
                            .iter()
                            .filter_map(|op| Some((op.get("path")?.as_str()?.to_string(), op.line)))
                            .collect();
                        patches.push(super::Patch::Json {
                            file: file.clone(),
                            ops,
                        });
                    }
                    _ if target.is_some() || same_object(&doc, original_name.as_deref()) => {
                        patches.push(super::Patch::Merge {
                            file: file.clone(),
                            doc: Arc::new(doc),
                        });
                    }
                    _ => {}
                }
            }
        }
    }
    // Patches the app object itself carries (Flux spec.patches, Argo
    // kustomize.patches) are applied last, by the wrapper; a field they set points
    // at the app object, or at the patch file the app object names.
    for p in inline_patches {
        let targets_it = p.spec.get("target").is_none_or(|t| {
            t.get("kind")
                .and_then(Json::as_str)
                .is_none_or(|k| k == kind)
                && t.get("name").and_then(Json::as_str).is_none_or(|n| {
                    Some(n) == original_name.as_deref() || rendered_name.contains(n)
                })
        });
        let Some(text) = p.spec.get("patch").and_then(Json::as_str) else {
            continue;
        };
        if !targets_it {
            continue;
        }
        let file = p.file.as_deref().unwrap_or(entry.0);
        let docs = yaml::parse_documents(text, &Limits::default()).unwrap_or_default();
        for doc in docs.into_iter().filter_map(|d| d.result.ok().flatten()) {
            // Lines inside an inline patch are not lines of the app's file.
            let doc = match &p.file {
                Some(_) => doc,
                None => flatten_lines(doc, entry.1),
            };
            match &doc.value {
                // A JSON 6902 patch (a list of operations) sets the paths it names.
                yaml::Value::Seq(ops) => {
                    let ops = ops
                        .iter()
                        .filter_map(|op| Some((op.get("path")?.as_str()?.to_string(), op.line)))
                        .collect();
                    patches.push(super::Patch::Json {
                        file: file.to_string(),
                        ops,
                    });
                }
                _ => patches.push(super::Patch::Merge {
                    file: file.to_string(),
                    doc: Arc::new(doc),
                }),
            }
        }
    }
    SourceMap::Kustomize {
        origin: origin_doc,
        patches,
        entry: (entry.0.to_string(), entry.1),
    }
}

fn flatten_lines(mut node: Node, line: u32) -> Node {
    node.line = line;
    node.value = match node.value {
        yaml::Value::Seq(items) => {
            yaml::Value::Seq(items.into_iter().map(|n| flatten_lines(n, line)).collect())
        }
        yaml::Value::Map(entries) => yaml::Value::Map(
            entries
                .into_iter()
                .map(|(k, n)| (k, flatten_lines(n, line)))
                .collect(),
        ),
        other => other,
    };
    node
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
