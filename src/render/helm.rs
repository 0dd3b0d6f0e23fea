//! Helm roots: vendored dependencies only, `helm template` offline, and mapping of
//! rendered fields to the values line that set them, else the template.

use super::problem::Problem;
use super::roots::{join, Root};
use super::source_map::SourceMap;
use crate::yaml::{self, Limits, Node};
use serde_json::Value as Json;
use std::sync::Arc;

/// A chart's dependencies and the file that lists them: `dependencies` of
/// Chart.yaml, or of `requirements.yaml` for a chart of `apiVersion: v1` (helm
/// reads both there). None when Chart.yaml is not YAML.
fn dependencies(root: &Root, read: &dyn Fn(&str) -> Option<String>) -> Option<(String, Vec<Json>)> {
    let chart_file = join(&root.path, "Chart.yaml").unwrap_or_default();
    let chart = read(&chart_file).and_then(|t| yaml_serde::from_str::<Json>(&t).ok())?;
    let list = |doc: &Json| -> Vec<Json> {
        doc.get("dependencies")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let in_chart = list(&chart);
    let v1 = chart.get("apiVersion").and_then(Json::as_str) == Some("v1");
    if v1 && in_chart.is_empty() {
        let requirements = join(&root.path, "requirements.yaml").unwrap_or_default();
        if let Some(doc) = read(&requirements).and_then(|t| yaml_serde::from_str::<Json>(&t).ok()) {
            return Some((requirements, list(&doc)));
        }
    }
    Some((chart_file, in_chart))
}

/// Dependencies that are not in the chart's `charts/` folder would be downloaded:
/// refused. Like `helm template`, a dependency counts as vendored by name: a
/// `charts/<name>/` folder or a `charts/<name>-<version>.tgz` archive of any version,
/// since Chart.yaml may give a range (`19.x.x`, `^18.0.0`) that only Chart.lock and
/// the archive's name resolve.
pub fn check_dependencies(
    root: &Root,
    read: &dyn Fn(&str) -> Option<String>,
    list: &dyn Fn(&str) -> Vec<String>,
    is_dir: &dyn Fn(&str) -> bool,
) -> Vec<Problem> {
    let Some((chart_file, dependencies)) = dependencies(root, read) else {
        let chart_file = join(&root.path, "Chart.yaml").unwrap_or_default();
        return vec![Problem::failed(
            &chart_file,
            "Chart.yaml could not be read as YAML",
        )];
    };
    let mut problems = Vec::new();
    for dep in &dependencies {
        let name = dep.get("name").and_then(Json::as_str).unwrap_or_default();
        let version = dep
            .get("version")
            .and_then(Json::as_str)
            .unwrap_or_default();
        let repo = dep
            .get("repository")
            .and_then(Json::as_str)
            .unwrap_or_default();
        if let Some(local) = repo.strip_prefix("file://") {
            // helm reads an absolute path wherever it points; join() would take it
            // for a path in the repository.
            if local.starts_with('/') || join(&root.path, local).is_none() {
                problems.push(Problem::refused(
                    &chart_file,
                    &format!("dependency {name} points outside the repository ({repo})"),
                ));
            }
            continue;
        }
        let charts_dir = join(&root.path, "charts").unwrap_or_default();
        let vendored = is_dir(&join(&charts_dir, name).unwrap_or_default())
            || list(&charts_dir)
                .iter()
                .any(|file| is_archive_of(file, name));
        if !vendored {
            problems.push(Problem::refused(
                &chart_file,
                &format!(
                    "dependency {name} {version} from {repo} is not vendored in charts/; meshward renders without network access, so this chart was not rendered. Run `helm dependency build` and commit charts/"
                ),
            ));
        }
    }
    problems
}

/// Dependencies at a `file://` path in the repository that `charts/` does not hold:
/// (name, folder in the repository). `helm dependency build`, which Argo CD and Flux
/// run, copies them in without network; meshward does the same in a scratch copy.
pub fn local_dependencies(
    root: &Root,
    read: &dyn Fn(&str) -> Option<String>,
    is_dir: &dyn Fn(&str) -> bool,
) -> Vec<(String, String)> {
    let Some((_, dependencies)) = dependencies(root, read) else {
        return Vec::new();
    };
    let charts_dir = join(&root.path, "charts").unwrap_or_default();
    dependencies
        .iter()
        .filter_map(|dep| {
            let name = dep.get("name").and_then(Json::as_str)?;
            let local = dep
                .get("repository")
                .and_then(Json::as_str)?
                .strip_prefix("file://")?;
            let folder = join(&root.path, local.trim_end_matches('/'))?;
            let vendored = is_dir(&join(&charts_dir, name).unwrap_or_default());
            (!vendored && is_dir(&folder) && !name.contains(['/', '\\']) && name != "..")
                .then(|| (name.to_string(), folder))
        })
        .collect()
}

/// `redis-19.6.4.tgz` is an archive of `redis`; `redis-cluster-9.0.0.tgz` is not.
fn is_archive_of(file: &str, name: &str) -> bool {
    file.strip_suffix(".tgz")
        .and_then(|stem| stem.strip_prefix(name))
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|version| version.chars().next())
        .is_some_and(|c| c.is_ascii_digit() || c == 'v')
}

/// The template each rendered document came from: the `# Source:` comment before it.
pub fn source_of_line(output: &str, line: u32) -> Option<String> {
    output
        .lines()
        .take(line as usize)
        .filter_map(|l| l.strip_prefix("# Source: "))
        .last()
        .map(str::to_string)
}

pub fn source_map(
    root: &Root,
    chart_name: &str,
    source: Option<String>,
    read: &dyn Fn(&str) -> Option<String>,
    entry: (&str, u32),
    values: &[(String, Arc<Node>)],
) -> SourceMap {
    // "# Source: <chart>/templates/x.yaml" → <root>/templates/x.yaml
    let template = source.and_then(|s| {
        let rel = s
            .strip_prefix(&format!("{chart_name}/"))
            .unwrap_or(&s)
            .to_string();
        let file = join(&root.path, &rel)?;
        let text = read(&file)?;
        Some((file, Arc::new(text)))
    });
    SourceMap::Helm {
        template,
        values: values.to_vec(),
        entry: (entry.0.to_string(), entry.1),
    }
}

/// The values a root's objects may take a field from, in helm's order (the last
/// that sets it wins), each with its lines: read once per root, shared by every
/// object's source map.
pub fn values_nodes(
    root: &Root,
    read: &dyn Fn(&str) -> Option<String>,
    entry: (&str, u32),
) -> Vec<(String, Arc<Node>)> {
    let mut values = Vec::new();
    let defaults = join(&root.path, "values.yaml").unwrap_or_default();
    for file in std::iter::once(&defaults).chain(root.values.iter()) {
        let Some(text) = read(file) else { continue };
        if let Ok(docs) = yaml::parse_documents(&text, &Limits::default()) {
            if let Some(Ok(Some(node))) = docs.into_iter().next().map(|d| d.result) {
                values.push((file.clone(), Arc::new(node)));
            }
        }
    }
    // Inline values (Argo helm.values/valuesObject, Flux spec.values) come last:
    // they win over every values file, and their lines are the app object's.
    if root.inline_values.is_some() {
        if let Some(node) = read(entry.0).and_then(|app| inline_values_node(&app, root, entry.1)) {
            values.push((entry.0.to_string(), Arc::new(node)));
        }
    }
    values
}

/// The inline values of the app object whose `entry_line` is in `app_text`, with
/// the lines they have there.
fn inline_values_node(app_text: &str, root: &Root, entry_line: u32) -> Option<Node> {
    let docs = yaml::parse_documents(app_text, &Limits::default()).ok()?;
    let app = docs
        .into_iter()
        .rev()
        .filter(|d| d.start_line <= entry_line)
        .find_map(|d| d.result.ok().flatten())?;
    let mut found = Vec::new();
    inline_values_candidates(&app, app_text, &mut found);
    let wanted = root.inline_values.as_ref();
    let exact = found.iter().position(|n| Some(&n.to_json()) == wanted);
    let i = exact.unwrap_or(0);
    (i < found.len()).then(|| found.swap_remove(i))
}

fn inline_values_candidates(node: &Node, app_text: &str, out: &mut Vec<Node>) {
    match &node.value {
        yaml::Value::Map(entries) => {
            for (k, n) in entries {
                match (&n.value, k.as_str()) {
                    (yaml::Value::Map(_), "values" | "valuesObject") => out.push(n.clone()),
                    (yaml::Value::Str(text), "values") => {
                        if let Some(doc) = super::kustomize::embedded(app_text, text)
                            .and_then(|docs| docs.into_iter().next())
                        {
                            out.push(doc);
                        }
                    }
                    _ => inline_values_candidates(n, app_text, out),
                }
            }
        }
        yaml::Value::Seq(items) => {
            for n in items {
                inline_values_candidates(n, app_text, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_match_by_chart_name_whatever_the_version() {
        assert!(is_archive_of("redis-19.6.4.tgz", "redis"));
        assert!(is_archive_of("redis-v1.0.0.tgz", "redis"));
        assert!(!is_archive_of("redis-cluster-9.0.0.tgz", "redis"));
        assert!(!is_archive_of("redis.tgz", "redis"));
        assert!(!is_archive_of("redis-19.6.4.tar", "redis"));
    }

    #[test]
    fn sources() {
        let out = "---\n# Source: geo/templates/se.yaml\napiVersion: v1\n---\n# Source: geo/templates/b.yaml\nkind: X\n";
        assert_eq!(
            source_of_line(out, 3).as_deref(),
            Some("geo/templates/se.yaml")
        );
        assert_eq!(
            source_of_line(out, 6).as_deref(),
            Some("geo/templates/b.yaml")
        );
    }
}
