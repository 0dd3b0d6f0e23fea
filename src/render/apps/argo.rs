//! Argo CD Applications (and the Applications an ApplicationSet generates) as
//! render roots.

use super::appset::RepoLookup;
use super::*;
use crate::manifest::Resource;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// Argo CD's escaping of a `--set` value: commas separate assignments for helm, so
/// an unescaped one is escaped, except in a `{a,b}` list.
fn clean_set_value(v: &str) -> String {
    if v.starts_with('{') && v.ends_with('}') {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len());
    let mut prev = None;
    for c in v.chars() {
        if c == ',' && prev != Some('\\') {
            out.push('\\');
        }
        out.push(c);
        prev = Some(c);
    }
    out
}

pub(super) struct Argo<'a> {
    pub(super) same_repo: &'a dyn Fn(&str) -> bool,
    pub(super) repo: &'a dyn RepoLookup,
}

impl Argo<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn app(
        &self,
        r: &Resource,
        spec: &Json,
        spec_at: &[Json],
        dest_ns: Option<String>,
        by: &str,
        out: &mut Vec<AppSource>,
        external: &mut Vec<ExternalSource>,
    ) {
        let sources = argo_sources(spec);
        // Sources that others' value files name as `$<ref>/...`: None for this
        // repository, else the other repository's URL.
        let refs: BTreeMap<String, Option<String>> = sources
            .iter()
            .filter_map(|(_, src)| {
                let name = src.get("ref").and_then(Json::as_str)?;
                let url = src
                    .get("repoURL")
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                Some((
                    name.to_string(),
                    (!(self.same_repo)(url)).then(|| url.to_string()),
                ))
            })
            .collect();
        for (source_at, source) in &sources {
            let line_at = |rest: &[Json]| {
                let mut p = spec_at.to_vec();
                p.extend(source_at.iter().cloned());
                p.extend(rest.iter().cloned());
                r.line_of(&p)
            };
            let url = source
                .get("repoURL")
                .and_then(Json::as_str)
                .unwrap_or_default();
            // A source that is only there to be referenced deploys nothing itself.
            if source.get("ref").is_some()
                && source.get("path").is_none()
                && source.get("chart").is_none()
            {
                continue;
            }
            if !(self.same_repo)(url) || source.get("chart").is_some() {
                external.push(ExternalSource {
                    resource: r.id.clone(),
                    cluster: r.cluster.clone(),
                    file: r.file.clone(),
                    line: line_at(&[]),
                    what: format!("its source {url} is not this repository, so its objects are not checked here (add the URL to render.repo_urls in .meshward.yaml if it is this repository; otherwise check that repository with meshward too)"),
                });
                continue;
            }
            let Some(path) = source.get("path").and_then(Json::as_str) else {
                continue;
            };
            let mut said = Said::default();
            let file = r.file.as_str();
            let dir = said
                .repo_path(file, line_at(&[k("path")]), "", path, "path")
                .unwrap_or_default();
            let helm = source.get("helm").cloned().unwrap_or(Json::Null);
            let values = self.value_files(&mut said, file, &line_at, &dir, &helm, &refs);
            let helm_options = self.helm_options(&mut said, file, &line_at, &dir, &helm);
            let kustomize = source.get("kustomize").cloned().unwrap_or(Json::Null);
            let kustomize = self.kustomize(&mut said, file, &line_at, &dir, &kustomize);
            let directory = source.get("directory").cloned().unwrap_or(Json::Null);
            if directory.get("jsonnet").is_some_and(has_content) {
                said.ignored(
                    file,
                    line_at(&[k("directory"), k("jsonnet")]),
                    "directory.jsonnet",
                    "Argo CD evaluates the folder's .jsonnet files with it, and meshward does not run jsonnet",
                );
            }
            if source.get("plugin").is_some() {
                said.ignored(
                    file,
                    line_at(&[k("plugin")]),
                    "plugin",
                    "Argo CD renders this source with a config management plugin, and meshward rendered the folder as plain kustomize, Helm or YAML instead (it runs no plugins)",
                );
            }
            out.push(AppSource {
                cluster: None,
                path: dir,
                namespace: dest_ns.clone(),
                release: helm
                    .get("releaseName")
                    .and_then(Json::as_str)
                    .map(str::to_string)
                    .or_else(|| Some(r.name.clone())),
                values,
                // valuesObject wins over values, as in Argo CD.
                inline_values: helm
                    .get("valuesObject")
                    .filter(|v| !v.is_null())
                    .cloned()
                    .or_else(|| {
                        helm.get("values")
                            .and_then(Json::as_str)
                            .and_then(inline_yaml)
                    }),
                kustomize,
                helm: helm_options,
                directory: DirectoryOptions {
                    recurse: directory
                        .get("recurse")
                        .and_then(Json::as_bool)
                        .unwrap_or(false),
                    include: s(&directory, "/include").filter(|s| !s.is_empty()),
                    exclude: s(&directory, "/exclude").filter(|s| !s.is_empty()),
                },
                defined_by: by.to_string(),
                file: r.file.clone(),
                line: line_at(&[]),
                inputs: said.inputs,
                problems: said.problems,
                notes: said.notes,
            });
        }
    }

    /// `helm.valueFiles`: relative to the source folder, or `$<ref>/...` relative to
    /// the root of the source with that ref.
    fn value_files(
        &self,
        said: &mut Said,
        file: &str,
        line_at: &dyn Fn(&[Json]) -> u32,
        dir: &str,
        helm: &Json,
        refs: &BTreeMap<String, Option<String>>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for (i, f) in strings(helm.get("valueFiles")).iter().enumerate() {
            let line = line_at(&[k("helm"), k("valueFiles"), Json::from(i)]);
            let resolved = match f.strip_prefix('$') {
                Some(rest) => {
                    let (name, rel) = rest.split_once('/').unwrap_or((rest, ""));
                    match refs.get(name) {
                        Some(None) => said.repo_path(file, line, "", rel, "values file"),
                        Some(Some(url)) => {
                            said.note("render/external-source", Severity::Info, file, line, format!("values file {f} comes from the source with ref {name} ({url}), another repository: the chart was rendered without it, so what it sets was not checked. Check that repository's values with meshward too, or add its URL to render.repo_urls if it is this repository"));
                            None
                        }
                        None => {
                            said.fail(file, line, format!("values file {f} names ${name}, but no source of the application has ref: {name}, so Argo CD cannot render it. Add the source with that ref, or fix the name"));
                            None
                        }
                    }
                }
                None if f.contains("://") => {
                    said.note("render/external-source", Severity::Info, file, line, format!("values file {f} is fetched over the network by Argo CD; meshward renders offline, so the chart was rendered without it and what it sets was not checked. Keep the values in the repository to have them checked"));
                    None
                }
                None => said.repo_path(file, line, dir, f, "values file"),
            };
            if let Some(path) = resolved {
                said.inputs.insert(path.clone());
                out.push(path);
            }
        }
        out
    }

    fn helm_options(
        &self,
        said: &mut Said,
        file: &str,
        line_at: &dyn Fn(&[Json]) -> u32,
        dir: &str,
        helm: &Json,
    ) -> HelmOptions {
        let mut parameters = Vec::new();
        for p in array(helm.get("parameters")) {
            let Some(name) = p.get("name").and_then(Json::as_str) else {
                continue;
            };
            let value = clean_set_value(&p.get("value").map(text).unwrap_or_default());
            let name = name.to_string();
            parameters.push(
                if p.get("forceString").and_then(Json::as_bool) == Some(true) {
                    HelmParameter::SetString { name, value }
                } else {
                    HelmParameter::Set { name, value }
                },
            );
        }
        for (i, p) in array(helm.get("fileParameters")).iter().enumerate() {
            let (Some(name), Some(rel)) = (
                p.get("name").and_then(Json::as_str),
                p.get("path").and_then(Json::as_str),
            ) else {
                continue;
            };
            let line = line_at(&[k("helm"), k("fileParameters"), Json::from(i)]);
            if let Some(path) = said.repo_path(file, line, dir, rel, "file parameter") {
                said.inputs.insert(path.clone());
                parameters.push(HelmParameter::SetFile {
                    name: name.to_string(),
                    path,
                });
            }
        }
        HelmOptions {
            parameters,
            ignore_missing_values: helm
                .get("ignoreMissingValueFiles")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            skip_schema_validation: helm
                .get("skipSchemaValidation")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            release_namespace: s(helm, "/namespace").filter(|n| !n.is_empty()),
            kube_version: s(helm, "/kubeVersion").filter(|n| !n.is_empty()),
            api_versions: strings(helm.get("apiVersions")),
        }
    }

    fn kustomize(
        &self,
        said: &mut Said,
        file: &str,
        line_at: &dyn Fn(&[Json]) -> u32,
        dir: &str,
        k8z: &Json,
    ) -> KustomizeOptions {
        let line = |key: &str| line_at(&[k("kustomize"), k(key)]);
        let mut patches = Vec::new();
        for (i, p) in array(k8z.get("patches")).into_iter().enumerate() {
            let mut spec = p.clone();
            let mut from = None;
            if let Some(rel) = p.get("path").and_then(Json::as_str) {
                let at = line_at(&[k("kustomize"), k("patches"), Json::from(i)]);
                let Some(path) = said.repo_path(file, at, dir, rel, "patch") else {
                    continue;
                };
                let Some(text) = self.repo.read(&path) else {
                    said.fail(file, at, format!("patch file {rel:?} ({path}) is not a YAML or JSON file of this repository: Argo CD cannot build this application. Fix the path"));
                    continue;
                };
                if let Some(o) = spec.as_object_mut() {
                    o.remove("path");
                }
                spec["patch"] = Json::from(text);
                said.inputs.insert(path.clone());
                from = Some(path);
            }
            patches.push(InlinePatch { spec, file: from });
        }
        let components = components(
            said,
            self.repo,
            file,
            line("components"),
            dir,
            &strings(k8z.get("components")),
            k8z.get("ignoreMissingComponents").and_then(Json::as_bool) == Some(true),
        );
        let mut replicas = Vec::new();
        for r in array(k8z.get("replicas")) {
            let name = r.get("name").and_then(Json::as_str).unwrap_or_default();
            let count = r.get("count").map(text).unwrap_or_default();
            match count.parse::<i64>() {
                Ok(n) => replicas.push(serde_json::json!({ "name": name, "count": n })),
                Err(_) => said.fail(file, line("replicas"), format!("replicas of {name:?} is {count:?}, not a number: Argo CD cannot build this application")),
            }
        }
        for (key, effect) in [
            (
                "kubeVersion",
                "Argo CD passes it to the Helm charts kustomize inflates (helmCharts)",
            ),
            (
                "apiVersions",
                "Argo CD passes it to the Helm charts kustomize inflates (helmCharts)",
            ),
        ] {
            if k8z.get(key).is_some_and(|v| !v.is_null()) {
                said.ignored(file, line(key), &format!("kustomize.{key}"), effect);
            }
        }
        if k8z.get("commonAnnotationsEnvsubst").and_then(Json::as_bool) == Some(true) {
            said.ignored(file, line("commonAnnotationsEnvsubst"), "kustomize.commonAnnotationsEnvsubst", "Argo CD replaces ${ARGOCD_APP_...} variables in the common annotations, and meshward applied them with the variables left in");
        }
        let without_selector =
            k8z.get("labelWithoutSelector").and_then(Json::as_bool) == Some(true);
        KustomizeOptions {
            namespace: s(k8z, "/namespace").filter(|n| !n.is_empty()),
            name_prefix: s(k8z, "/namePrefix").filter(|n| !n.is_empty()),
            name_suffix: s(k8z, "/nameSuffix").filter(|n| !n.is_empty()),
            common_labels: string_map(k8z.get("commonLabels")),
            labels_include_selectors: !without_selector,
            labels_include_templates: without_selector
                && k8z.get("labelIncludeTemplates").and_then(Json::as_bool) == Some(true),
            common_annotations: string_map(k8z.get("commonAnnotations")),
            images: strings(k8z.get("images")),
            image_overrides: Vec::new(),
            patches,
            components,
            replicas,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_escape_commas_as_argo_does() {
        assert_eq!(clean_set_value("a,b"), r"a\,b");
        assert_eq!(clean_set_value(r"a\,b"), r"a\,b");
        assert_eq!(clean_set_value("{a,b}"), "{a,b}");
    }
}
