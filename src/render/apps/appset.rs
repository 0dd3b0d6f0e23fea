//! Argo CD ApplicationSet generators over this repository: list, git directories,
//! git files, and the matrix and merge generators that combine them. Each yields
//! parameter sets for the template; a generator meshward cannot expand (clusters,
//! pull requests, another repository, ...) is named so the caller reports it.

use crate::pointer::At;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

/// What generators may read of the repository being checked.
pub trait RepoLookup {
    /// Folders matching a glob (`*` stays within a segment, `**` crosses them).
    fn dirs(&self, pattern: &str) -> Vec<String>;
    /// Files matching a glob, with their text.
    fn files(&self, pattern: &str) -> Vec<(String, String)>;
    /// The text of one file of the checked tree (YAML and JSON files only).
    fn read(&self, path: &str) -> Option<String>;
    /// Whether a folder of the checked tree holds YAML or JSON files.
    fn is_dir(&self, path: &str) -> bool;
}

/// One set of template parameters, with the files it was read from (a change to
/// them changes what the ApplicationSet generates).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParamSet {
    pub params: BTreeMap<String, String>,
    pub inputs: BTreeSet<String>,
}

/// Bounds on what one ApplicationSet may expand to: a hostile or mistaken matrix
/// must not take the check down.
const MAX_PARAM_SETS: usize = 1_000;
/// Argo CD itself allows matrix and merge generators two levels deep.
const MAX_NESTING: usize = 3;

/// Parameter sets of an ApplicationSet's generators, and the generators meshward did
/// not expand (each to be reported, never skipped silently).
pub fn params(
    body: &Json,
    same_repo: &dyn Fn(&str) -> bool,
    repo: &dyn RepoLookup,
) -> (Vec<ParamSet>, Vec<String>) {
    let mut out = Vec::new();
    let mut unexpanded = Vec::new();
    for generator in body
        .at("/spec/generators")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        match expand(generator, same_repo, repo, 0) {
            Ok(sets) => out.extend(sets),
            Err(why) => unexpanded.push(why),
        }
    }
    if out.len() > MAX_PARAM_SETS {
        unexpanded.push(format!(
            "generators that produce {} parameter sets (meshward expands at most {MAX_PARAM_SETS})",
            out.len()
        ));
        out.truncate(MAX_PARAM_SETS);
    }
    (out, unexpanded)
}

/// One generator's parameter sets, or why it cannot be expanded.
fn expand(
    generator: &Json,
    same_repo: &dyn Fn(&str) -> bool,
    repo: &dyn RepoLookup,
    depth: usize,
) -> Result<Vec<ParamSet>, String> {
    let Some(gen) = generator.as_object() else {
        return Err("a generator that is not an object".into());
    };
    let mut out = Vec::new();
    for (kind, spec) in gen {
        match kind.as_str() {
            // Not generators: fields every generator may carry.
            "selector" | "template" | "values" => {}
            "list" => {
                if spec.get("elementsYaml").is_some() {
                    return Err(
                        "a list generator with elementsYaml (not expanded by meshward)".into(),
                    );
                }
                for e in spec
                    .get("elements")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    let mut set = ParamSet::default();
                    flatten("", e, &mut set.params);
                    out.push(set);
                }
            }
            "git" => out.extend(git(spec, same_repo, repo)?),
            "matrix" | "merge" if depth + 1 >= MAX_NESTING => {
                return Err(format!(
                    "a {kind} generator nested deeper than Argo CD allows"
                ));
            }
            "matrix" => out.extend(matrix(spec, same_repo, repo, depth)?),
            "merge" => out.extend(merge(spec, same_repo, repo, depth)?),
            other => return Err(format!("a {other} generator (not expanded by meshward)")),
        }
        if out.len() > MAX_PARAM_SETS {
            return Err(format!(
                "a {kind} generator that produces more than {MAX_PARAM_SETS} parameter sets"
            ));
        }
    }
    Ok(out)
}

fn git(
    spec: &Json,
    same_repo: &dyn Fn(&str) -> bool,
    repo: &dyn RepoLookup,
) -> Result<Vec<ParamSet>, String> {
    let url = spec
        .get("repoURL")
        .and_then(Json::as_str)
        .unwrap_or_default();
    if !same_repo(url) {
        return Err(format!("a git generator over {url}, another repository"));
    }
    let mut out = Vec::new();
    let entries = |key: &str| -> (Vec<String>, Vec<String>) {
        let mut include = Vec::new();
        let mut exclude = Vec::new();
        for e in spec.get(key).and_then(Json::as_array).into_iter().flatten() {
            if let Some(p) = e.get("path").and_then(Json::as_str) {
                if e.get("exclude").and_then(Json::as_bool) == Some(true) {
                    exclude.push(p.to_string());
                } else {
                    include.push(p.to_string());
                }
            }
        }
        (include, exclude)
    };
    let (include, exclude) = entries("directories");
    let excluded: BTreeSet<String> = exclude.iter().flat_map(|p| repo.dirs(p)).collect();
    let included: BTreeSet<String> = include.iter().flat_map(|p| repo.dirs(p)).collect();
    for dir in included.difference(&excluded) {
        out.push(ParamSet {
            params: path_params(dir, None),
            inputs: BTreeSet::new(),
        });
    }
    let (include, exclude) = entries("files");
    let excluded: BTreeSet<String> = exclude
        .iter()
        .flat_map(|p| repo.files(p))
        .map(|(path, _)| path)
        .collect();
    // By path, as Argo CD orders them; a file two patterns match counts once.
    let found: BTreeMap<String, String> = include.iter().flat_map(|p| repo.files(p)).collect();
    for (path, text) in found {
        if excluded.contains(&path) {
            continue;
        }
        let doc = yaml_serde::from_str::<Json>(&text).map_err(|e| {
            format!("a git files generator whose file {path} is not valid JSON or YAML ({e})")
        })?;
        // A file holds one parameter set, or a list of them.
        let items = match doc {
            Json::Array(items) => items,
            Json::Null => Vec::new(),
            other => vec![other],
        };
        for item in items {
            let mut set = ParamSet {
                params: path_params(parent(&path), Some(&path)),
                inputs: [path.clone()].into(),
            };
            flatten("", &item, &mut set.params);
            out.push(set);
        }
    }
    Ok(out)
}

/// Every combination of the two child generators' sets; the second child's spec may
/// use the first one's parameters (e.g. a files generator under each directory).
fn matrix(
    spec: &Json,
    same_repo: &dyn Fn(&str) -> bool,
    repo: &dyn RepoLookup,
    depth: usize,
) -> Result<Vec<ParamSet>, String> {
    let children = spec
        .get("generators")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let [first, second] = children else {
        return Err(format!(
            "a matrix generator with {} child generators (Argo CD requires exactly 2)",
            children.len()
        ));
    };
    let mut out = Vec::new();
    for a in expand(first, same_repo, repo, depth + 1)? {
        let second = substitute(second, &a.params);
        for b in expand(&second, same_repo, repo, depth + 1)? {
            let mut set = a.clone();
            set.params.extend(b.params);
            set.inputs.extend(b.inputs);
            out.push(set);
            if out.len() > MAX_PARAM_SETS {
                return Err(format!(
                    "a matrix generator that produces more than {MAX_PARAM_SETS} parameter sets"
                ));
            }
        }
    }
    Ok(out)
}

/// The first child's sets, each overridden by the sets of later children that agree
/// with it on every merge key.
fn merge(
    spec: &Json,
    same_repo: &dyn Fn(&str) -> bool,
    repo: &dyn RepoLookup,
    depth: usize,
) -> Result<Vec<ParamSet>, String> {
    let keys: Vec<&str> = spec
        .get("mergeKeys")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    if keys.is_empty() {
        return Err("a merge generator without mergeKeys".into());
    }
    let mut children = spec
        .get("generators")
        .and_then(Json::as_array)
        .into_iter()
        .flatten();
    let Some(first) = children.next() else {
        return Err("a merge generator without child generators".into());
    };
    let key_of = |s: &ParamSet| -> Option<Vec<String>> {
        keys.iter().map(|k| s.params.get(*k).cloned()).collect()
    };
    let mut out = expand(first, same_repo, repo, depth + 1)?;
    for child in children {
        for b in expand(child, same_repo, repo, depth + 1)? {
            let Some(key) = key_of(&b) else { continue };
            for a in out.iter_mut().filter(|a| key_of(a).as_ref() == Some(&key)) {
                a.params.extend(b.params.clone());
                a.inputs.extend(b.inputs.iter().cloned());
            }
        }
    }
    Ok(out)
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

/// The `path` parameters of the git generators: for a directory, its path; for a
/// file, the folder that holds it plus the file name.
fn path_params(dir: &str, file: Option<&str>) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    let basename = dir.rsplit('/').next().unwrap_or(dir).to_string();
    for (i, seg) in dir.split('/').enumerate() {
        params.insert(format!("path[{i}]"), seg.to_string());
    }
    params.insert("path".into(), dir.to_string());
    params.insert("path.path".into(), dir.to_string());
    params.insert("path.basenameNormalized".into(), normalize(&basename));
    params.insert("path.basename".into(), basename);
    if let Some(file) = file {
        let name = file.rsplit('/').next().unwrap_or(file).to_string();
        params.insert("path.filenameNormalized".into(), normalize(&name));
        params.insert("path.filename".into(), name);
    }
    params
}

/// Argo CD's normalization: a valid Kubernetes name part.
fn normalize(s: &str) -> String {
    s.replace(['_', '.'], "-").to_lowercase()
}

/// Nested keys joined with `.`, list items by index, as Argo CD flattens parameters.
pub fn flatten(prefix: &str, v: &Json, out: &mut BTreeMap<String, String>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Json::Object(m) => {
            for (k, v) in m {
                flatten(&key(k), v, out);
            }
        }
        Json::Array(items) if !prefix.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                flatten(&key(&i.to_string()), v, out);
            }
        }
        Json::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// `{{param}}` and `{{ .param }}` substitution, as ApplicationSet templates use.
pub fn substitute(template: &Json, params: &BTreeMap<String, String>) -> Json {
    match template {
        Json::String(s) => {
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(start) = rest.find("{{") {
                out.push_str(&rest[..start]);
                let Some(end) = rest[start..].find("}}") else {
                    out.push_str(&rest[start..]);
                    rest = "";
                    break;
                };
                let key = rest[start + 2..start + end].trim().trim_start_matches('.');
                match params.get(key) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&rest[start..start + end + 2]),
                }
                rest = &rest[start + end + 2..];
            }
            out.push_str(rest);
            Json::String(out)
        }
        Json::Array(a) => Json::Array(a.iter().map(|v| substitute(v, params)).collect()),
        Json::Object(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), substitute(v, params)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A repository of folders and files, for generators to read.
    struct Fake(Vec<(&'static str, &'static str)>);

    fn glob(pattern: &str) -> globset::GlobMatcher {
        globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map(|g| g.compile_matcher())
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
    }

    impl RepoLookup for Fake {
        fn dirs(&self, pattern: &str) -> Vec<String> {
            let m = glob(pattern);
            let dirs: BTreeSet<String> =
                self.0.iter().map(|(p, _)| parent(p).to_string()).collect();
            dirs.into_iter().filter(|d| m.is_match(d)).collect()
        }
        fn files(&self, pattern: &str) -> Vec<(String, String)> {
            let m = glob(pattern);
            self.0
                .iter()
                .filter(|(p, _)| m.is_match(p))
                .map(|(p, t)| (p.to_string(), t.to_string()))
                .collect()
        }
        fn read(&self, path: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, t)| t.to_string())
        }
        fn is_dir(&self, path: &str) -> bool {
            self.0.iter().any(|(p, _)| parent(p) == path)
        }
    }

    fn repo() -> Fake {
        Fake(vec![
            (
                "clusters/prod/config.json",
                r#"{"cluster": {"name": "prod", "zones": ["a", "b"]}, "replicas": 3}"#,
            ),
            (
                "clusters/dev_1/config.json",
                r#"{"cluster": {"name": "dev"}}"#,
            ),
            (
                "clusters/staging/config.yaml",
                "- cluster: {name: stg-a}\n- cluster: {name: stg-b}\n",
            ),
            ("apps/web/kustomization.yaml", ""),
            ("apps/api/kustomization.yaml", ""),
        ])
    }

    fn appset(generators: Json) -> Json {
        json!({"spec": {"generators": generators}})
    }

    fn same(url: &str) -> bool {
        url.contains("acme/gitops")
    }

    fn values(sets: &[ParamSet], key: &str) -> Vec<String> {
        sets.iter()
            .map(|s| s.params.get(key).cloned().unwrap_or_default())
            .collect()
    }

    #[test]
    fn git_files_generator_reads_each_file_as_parameters() {
        let (sets, unexpanded) = params(
            &appset(
                json!([{"git": {"repoURL": "https://github.com/acme/gitops", "files": [{"path": "clusters/**/config.json"}]}}]),
            ),
            &same,
            &repo(),
        );
        assert!(unexpanded.is_empty(), "{unexpanded:?}");
        assert_eq!(values(&sets, "cluster.name"), ["dev", "prod"]);
        let prod = &sets[1];
        assert_eq!(prod.params["path"], "clusters/prod");
        assert_eq!(prod.params["path.basename"], "prod");
        assert_eq!(prod.params["path[1]"], "prod");
        assert_eq!(prod.params["path.filename"], "config.json");
        assert_eq!(prod.params["path.filenameNormalized"], "config-json");
        assert_eq!(prod.params["cluster.zones.1"], "b");
        assert_eq!(prod.params["replicas"], "3");
        assert_eq!(sets[0].params["path.basenameNormalized"], "dev-1");
        // A change to the file changes what is generated.
        assert_eq!(
            prod.inputs,
            ["clusters/prod/config.json".to_string()].into()
        );
    }

    #[test]
    fn a_file_with_a_list_yields_a_set_per_item_and_exclusions_apply() {
        let (sets, _) = params(
            &appset(
                json!([{"git": {"repoURL": "git@github.com:acme/gitops.git", "files": [
                    {"path": "clusters/*/config.*"},
                    {"path": "clusters/prod/*", "exclude": true}
                ]}}]),
            ),
            &same,
            &repo(),
        );
        assert_eq!(values(&sets, "cluster.name"), ["dev", "stg-a", "stg-b"]);
    }

    #[test]
    fn a_broken_parameter_file_is_named() {
        let broken = Fake(vec![("envs/x/config.json", "{not: [valid")]);
        let (sets, unexpanded) = params(
            &appset(
                json!([{"git": {"repoURL": "https://github.com/acme/gitops", "files": [{"path": "envs/*/config.json"}]}}]),
            ),
            &same,
            &broken,
        );
        assert!(sets.is_empty());
        assert_eq!(unexpanded.len(), 1);
        assert!(
            unexpanded[0].contains("envs/x/config.json"),
            "{unexpanded:?}"
        );
    }

    #[test]
    fn matrix_combines_and_the_second_child_sees_the_first_ones_parameters() {
        let (sets, unexpanded) = params(
            &appset(json!([{"matrix": {"generators": [
                {"git": {"repoURL": "https://github.com/acme/gitops", "directories": [{"path": "apps/*"}]}},
                {"list": {"elements": [{"env": "prod", "dir": "{{path.basename}}-x"}, {"env": "dev", "dir": "y"}]}}
            ]}}])),
            &same,
            &repo(),
        );
        assert!(unexpanded.is_empty(), "{unexpanded:?}");
        assert_eq!(values(&sets, "path.basename"), ["api", "api", "web", "web"]);
        assert_eq!(values(&sets, "env"), ["prod", "dev", "prod", "dev"]);
        assert_eq!(values(&sets, "dir"), ["api-x", "y", "web-x", "y"]);
    }

    #[test]
    fn merge_overrides_matching_sets_by_key() {
        let (sets, unexpanded) = params(
            &appset(json!([{"merge": {"mergeKeys": ["app"], "generators": [
                {"list": {"elements": [{"app": "web", "ns": "web"}, {"app": "api", "ns": "api"}]}},
                {"list": {"elements": [{"app": "api", "ns": "api-v2"}, {"app": "other", "ns": "x"}]}}
            ]}}])),
            &same,
            &repo(),
        );
        assert!(unexpanded.is_empty(), "{unexpanded:?}");
        assert_eq!(values(&sets, "ns"), ["web", "api-v2"]);
    }

    #[test]
    fn generators_meshward_cannot_expand_are_named() {
        let (sets, unexpanded) = params(
            &appset(json!([
                {"clusters": {}},
                {"matrix": {"generators": [{"clusters": {}}, {"list": {"elements": [{"a": "b"}]}}]}},
                {"git": {"repoURL": "https://github.com/other/repo", "directories": [{"path": "*"}]}},
                {"list": {"elements": [{"a": "b"}]}}
            ])),
            &same,
            &repo(),
        );
        assert_eq!(sets.len(), 1);
        assert_eq!(unexpanded.len(), 3, "{unexpanded:?}");
        assert!(unexpanded[0].contains("clusters generator"));
        assert!(unexpanded[1].contains("clusters generator"));
        assert!(unexpanded[2].contains("another repository"));
    }

    #[test]
    fn expansion_is_bounded() {
        let many: Vec<Json> = (0..40).map(|i| json!({"i": i})).collect();
        let (sets, unexpanded) = params(
            &appset(json!([{"matrix": {"generators": [
                {"list": {"elements": many}},
                {"list": {"elements": many}}
            ]}}])),
            &same,
            &repo(),
        );
        assert!(sets.is_empty());
        assert!(unexpanded[0].contains("more than 1000"), "{unexpanded:?}");
    }

    #[test]
    fn templates_substitute() {
        let params: BTreeMap<String, String> =
            [("path.basename".to_string(), "geo".to_string())].into();
        let t = json!({"name": "app-{{path.basename}}", "n": "{{ .path.basename }}"});
        assert_eq!(
            substitute(&t, &params),
            json!({"name": "app-geo", "n": "geo"})
        );
    }
}
