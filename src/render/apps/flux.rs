//! Flux Kustomizations and HelmReleases as render roots.

use super::appset::RepoLookup;
use super::*;
use crate::manifest::Resource;
use crate::pointer::At;
use serde_json::Value as Json;

pub(super) fn flux_source(r: &Resource, pointer: &str) -> String {
    let ns = s(&r.body, &format!("{pointer}/namespace"))
        .or_else(|| r.namespace.clone())
        .unwrap_or_default();
    format!(
        "{ns}/{}",
        s(&r.body, &format!("{pointer}/name")).unwrap_or_default()
    )
}

/// `spec.kubeConfig`: Flux applies to another cluster, which meshward does not
/// model apart from this one.
fn remote_cluster(said: &mut Said, r: &Resource, line: u32) {
    if r.body.at("/spec/kubeConfig").is_some() {
        said.ignored(
            &r.file,
            line,
            "kubeConfig",
            "Flux applies what this object deploys to the remote cluster its kubeconfig Secret names, not to the cluster Flux runs in, and meshward checked it together with this repository's other objects as one cluster",
        );
    }
}

pub(super) fn flux_kustomization(r: &Resource, by: String, repo: &dyn RepoLookup) -> AppSource {
    let mut said = Said::default();
    let file = r.file.as_str();
    let at = |keys: &[&str]| r.line_of(&keys.iter().map(|s| k(s)).collect::<Vec<_>>());
    let rel = s(&r.body, "/spec/path").unwrap_or_else(|| ".".into());
    let path = said
        .repo_path(file, at(&["spec", "path"]), "", &rel, "path")
        .unwrap_or_default();
    let mut patches: Vec<InlinePatch> = array(r.body.at("/spec/patches"))
        .into_iter()
        .map(|spec| InlinePatch { spec, file: None })
        .collect();
    // v1beta2 forms, which Flux turns into patches the same way.
    for p in array(r.body.at("/spec/patchesStrategicMerge")) {
        let patch = yaml_serde::to_string(&p).unwrap_or_default();
        patches.push(InlinePatch {
            spec: serde_json::json!({ "patch": patch }),
            file: None,
        });
    }
    for p in array(r.body.at("/spec/patchesJson6902")) {
        let ops = p.get("patch").cloned().unwrap_or(Json::Null);
        let mut spec = serde_json::json!({ "patch": ops.to_string() });
        if let Some(t) = p.get("target") {
            spec["target"] = t.clone();
        }
        patches.push(InlinePatch { spec, file: None });
    }
    let components = components(
        &mut said,
        repo,
        file,
        at(&["spec", "components"]),
        &path,
        &strings(r.body.at("/spec/components")),
        false,
    );
    for field in ["substitute", "substituteFrom"] {
        if r.body.at(&format!("/spec/postBuild/{field}")).is_some() {
            said.ignored(
                file,
                at(&["spec", "postBuild", field]),
                &format!("postBuild.{field}"),
                "Flux replaces ${var} references in the built objects, and meshward checked them with the references left in",
            );
        }
    }
    remote_cluster(&mut said, r, at(&["spec", "kubeConfig"]));
    AppSource {
        cluster: None,
        path,
        namespace: s(&r.body, "/spec/targetNamespace"),
        release: None,
        values: Vec::new(),
        inline_values: None,
        kustomize: KustomizeOptions {
            namespace: s(&r.body, "/spec/targetNamespace"),
            name_prefix: s(&r.body, "/spec/namePrefix"),
            name_suffix: s(&r.body, "/spec/nameSuffix"),
            common_labels: string_map(r.body.at("/spec/commonMetadata/labels")),
            common_annotations: string_map(r.body.at("/spec/commonMetadata/annotations")),
            image_overrides: array(r.body.at("/spec/images")),
            patches,
            components,
            ..Default::default()
        },
        helm: HelmOptions::default(),
        directory: DirectoryOptions {
            recurse: true,
            ..Default::default()
        },
        defined_by: by,
        file: r.file.clone(),
        line: at(&["spec", "path"]),
        inputs: said.inputs,
        problems: said.problems,
        notes: said.notes,
    }
}

pub(super) fn flux_helm_release(r: &Resource, by: String, resources: &[&Resource]) -> AppSource {
    let mut said = Said::default();
    let file = r.file.as_str();
    let at = |keys: &[Json]| r.line_of(keys);
    let chart = s(&r.body, "/spec/chart/spec/chart").unwrap_or_default();
    let chart_line = at(&[k("spec"), k("chart")]);
    let path = said
        .repo_path(file, chart_line, "", &chart, "chart")
        .unwrap_or_default();
    // valuesFiles replaces the older single valuesFile.
    let mut listed = strings(r.body.at("/spec/chart/spec/valuesFiles"));
    let key = if listed.is_empty() {
        listed.extend(s(&r.body, "/spec/chart/spec/valuesFile"));
        "valuesFile"
    } else {
        "valuesFiles"
    };
    let values_line = at(&[k("spec"), k("chart"), k("spec"), k(key)]);
    let values: Vec<String> = listed
        .iter()
        .filter_map(|f| said.repo_path(file, values_line, "", f, "values file"))
        .collect();
    said.inputs.extend(values.iter().cloned());
    let (inline_values, unresolved, inputs) = super::values::flux_values(r, resources);
    said.inputs.extend(inputs);
    for u in unresolved {
        let line = at(&[k("spec"), k("valuesFrom"), Json::from(u.index)]);
        if u.optional {
            said.note(OPTIONAL_INPUT_MISSING, Severity::Info, file, line, format!("{}; it is marked optional, so Flux renders the chart without it too, as meshward did", u.message));
        } else {
            said.note(VALUES_UNRESOLVED, Severity::Warning, file, line, format!("{}: the chart was rendered without those values, so whatever they set was not checked. If the object is created outside this repository that is expected; otherwise add it (in the HelmRelease's namespace)", u.message));
        }
    }
    if r.body.at("/spec/postRenderers").is_some() {
        said.ignored(
            file,
            at(&[k("spec"), k("postRenderers")]),
            "postRenderers",
            "Flux patches the chart's output with them before applying it",
        );
    }
    remote_cluster(&mut said, r, at(&[k("spec"), k("kubeConfig")]));
    let target_namespace = s(&r.body, "/spec/targetNamespace");
    // Flux names the release `[targetNamespace-]name` unless releaseName says.
    let release = s(&r.body, "/spec/releaseName").unwrap_or_else(|| match &target_namespace {
        Some(ns) => format!("{ns}-{}", r.name),
        None => r.name.clone(),
    });
    AppSource {
        cluster: None,
        path,
        namespace: target_namespace.or_else(|| r.namespace.clone()),
        release: Some(release),
        values,
        inline_values,
        kustomize: KustomizeOptions::default(),
        helm: HelmOptions {
            ignore_missing_values: r
                .body
                .at("/spec/chart/spec/ignoreMissingValuesFiles")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            ..Default::default()
        },
        directory: DirectoryOptions::default(),
        defined_by: by,
        file: r.file.clone(),
        line: chart_line,
        inputs: said.inputs,
        problems: said.problems,
        notes: said.notes,
    }
}
