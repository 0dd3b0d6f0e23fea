//! Manifests: files → Kubernetes objects with their source lines.

pub mod install;
pub mod lines;

use crate::finding::{Finding, ResourceRef, Severity, Status};
use crate::pointer::At;
use crate::yaml;
pub use crate::yaml::{Limits, Node};
use foldhash::HashMap;
use std::sync::Arc;

/// One Kubernetes object and where it came from.
#[derive(Debug, Clone)]
pub struct Resource {
    pub id: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// None for cluster-scoped kinds; `default` for namespaced objects without one.
    pub namespace: Option<String>,
    /// Shared: base and head hold the same object for every file the change leaves alone.
    pub body: Arc<serde_json::Value>,
    pub file: String,
    pub line: u32,
    /// Where each of the object's fields is, to map field paths back to lines.
    pub lines: Arc<lines::LineIndex>,
    /// For rendered objects: how fields map back to the files that produced them.
    pub origin: Option<Arc<dyn Origin>>,
    /// The cluster it lands on, where the repository says (see `render::clusters`).
    pub cluster: Option<Arc<str>>,
}

/// How the fields of an object that was produced from other files (a rendered
/// overlay or chart) map back to those files.
pub trait Origin: std::fmt::Debug + Send + Sync {
    fn locate(&self, path: &[serde_json::Value]) -> Location;

    /// The template that names the object with a random function (`randAlphaNum`
    /// in a Helm test hook), so its name differs on every render.
    fn random_name_source(&self) -> Option<&str> {
        None
    }
}

/// Where a field was written.
pub struct Location {
    pub file: String,
    pub line: u32,
    /// Said in the finding when the line is only approximate.
    pub note: Option<String>,
}

impl Resource {
    pub fn reference(&self) -> ResourceRef {
        ResourceRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    pub fn line_of(&self, path: &[serde_json::Value]) -> u32 {
        self.lines.line_of(path)
    }

    /// The file and line that produced a field, and a note when only approximate.
    pub fn locate(&self, path: &[serde_json::Value]) -> (String, u32, Option<String>) {
        match &self.origin {
            Some(map) => {
                let l = map.locate(path);
                (l.file, l.line, l.note)
            }
            None => (self.file.clone(), self.line_of(path), None),
        }
    }

    pub fn labels(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.body.at("/metadata/labels").and_then(|v| v.as_object())
    }
}

/// A file of a revision, as read from disk, git or a GitHub tarball.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Path relative to the checked root, with `/` separators.
    pub path: String,
    pub bytes: Vec<u8>,
}

/// What loading the manifests of a revision gave.
#[derive(Debug, Default, Clone)]
pub struct Loaded {
    pub resources: Vec<Resource>,
    /// Findings about the input itself: parse errors, limits, invalid objects.
    pub findings: Vec<Finding>,
    pub files: usize,
    /// YAML documents that are not objects applied to the cluster: no apiVersion or
    /// kind (values files, CI config…), a tool's own config ([`is_tool_config`]), an
    /// IstioOperator (install input).
    pub skipped_documents: usize,
    /// YAML files of the tree not read as manifests (dot-files, CI configs): the
    /// caller, which knows `.meshward.yaml`, counts them.
    pub files_not_read: usize,
}

/// Files parsed once per path, content and namespace, for the revisions of one
/// check: base and head hold the same bytes for every file a change leaves alone, and
/// share what parsing them gave (the bodies behind an `Arc`).
#[derive(Default)]
pub struct Parsed {
    files: std::sync::Mutex<foldhash::HashMap<ParsedKey, Arc<std::sync::OnceLock<Loaded>>>>,
}

type ParsedKey = (String, Option<String>, [u8; 32]);

impl Parsed {
    /// Parses each distinct file of `files` once, in parallel.
    pub fn parse_all(&self, files: &[&SourceFile], limits: &Limits) {
        use rayon::prelude::*;
        let keyed: Vec<(ParsedKey, &SourceFile)> = files
            .par_iter()
            .map(|f| (parsed_key(f, None), *f))
            .collect();
        let mut seen = foldhash::HashSet::default();
        let distinct: Vec<(ParsedKey, &SourceFile)> = keyed
            .into_iter()
            .filter(|(k, _)| seen.insert(k.clone()))
            .collect();
        distinct.into_par_iter().for_each(|(key, f)| {
            if let Some(cell) = self.cell(key) {
                cell.get_or_init(|| load_file(f, limits, None));
            }
        });
    }

    fn load(&self, file: &SourceFile, limits: &Limits, namespace: Option<&str>) -> Loaded {
        match self.cell(parsed_key(file, namespace)) {
            // A revision read alone may meet a file the other is parsing; parsing is
            // sequential (no pool work inside), so waiting for it cannot deadlock.
            Some(cell) => cell
                .get_or_init(|| load_file(file, limits, namespace))
                .clone(),
            None => load_file(file, limits, namespace),
        }
    }

    /// None when a worker panicked while holding the lock: parse without the cache.
    fn cell(&self, key: ParsedKey) -> Option<Arc<std::sync::OnceLock<Loaded>>> {
        let mut files = self.files.lock().ok()?;
        Some(files.entry(key).or_default().clone())
    }
}

fn parsed_key(file: &SourceFile, namespace: Option<&str>) -> ParsedKey {
    use sha2::Digest;
    (
        file.path.clone(),
        namespace.map(str::to_string),
        sha2::Sha256::digest(&file.bytes).into(),
    )
}

/// Kinds that live outside any namespace.
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "IngressClass",
    "RuntimeClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "GatewayClass",
    "ClusterIssuer",
    "PodSecurityPolicy",
    "FlowSchema",
    "PriorityLevelConfiguration",
];

pub fn is_cluster_scoped(kind: &str) -> bool {
    CLUSTER_SCOPED.contains(&kind)
}

pub fn input_finding(
    rule: &str,
    severity: Severity,
    file: &str,
    line: u32,
    message: String,
) -> Finding {
    Finding {
        subjects: Vec::new(),
        unchecked: false,
        occurrence: None,
        cluster: None,
        rule: rule.to_string(),
        severity,
        status: Status::Existing,
        resource: None,
        file: file.to_string(),
        line,
        path: Vec::new(),
        message,
        istio_code: None,
    }
}

/// Parses every file; a broken file or document becomes a finding and the rest is
/// still loaded.
pub fn load(files: &[SourceFile], limits: &Limits) -> Loaded {
    load_with_namespace(files, limits, None)
}

/// As [`load`], with the namespace that objects naming none are in (a render root's
/// or an app object's destination), instead of `default`.
pub fn load_with_namespace(
    files: &[SourceFile],
    limits: &Limits,
    namespace: Option<&str>,
) -> Loaded {
    let files: Vec<&SourceFile> = files.iter().collect();
    load_into(&files, limits, namespace, None, &|_| None)
}

/// As [`load_with_namespace`], with the cluster each file's objects land on: the
/// same object in two clusters is two objects, not a duplicate.
/// With `parsed`, a file already parsed alike is not parsed again.
pub fn load_into(
    files: &[&SourceFile],
    limits: &Limits,
    namespace: Option<&str>,
    parsed: Option<&Parsed>,
    cluster_of: &(dyn Fn(&str) -> Option<Arc<str>> + Sync),
) -> Loaded {
    use rayon::prelude::*;
    let per_file: Vec<Loaded> = files
        .par_iter()
        .map(|f| {
            let mut l = match parsed {
                Some(p) => p.load(f, limits, namespace),
                None => load_file(f, limits, namespace),
            };
            if let Some(cluster) = cluster_of(&f.path) {
                for r in &mut l.resources {
                    r.cluster = Some(cluster.clone());
                }
                for finding in &mut l.findings {
                    finding.cluster = Some(cluster.to_string());
                }
            }
            l
        })
        .collect();
    let mut out = Loaded::default();
    for mut l in per_file {
        out.resources.append(&mut l.resources);
        out.findings.append(&mut l.findings);
        out.files += l.files;
        out.skipped_documents += l.skipped_documents;
    }
    report_duplicates(&mut out);
    out
}

fn load_file(file: &SourceFile, limits: &Limits, namespace: Option<&str>) -> Loaded {
    let mut out = Loaded {
        files: 1,
        ..Default::default()
    };
    if file.bytes.len() > limits.max_file_bytes {
        out.findings.push(input_finding(
            "manifest/limit-exceeded",
            Severity::Error,
            &file.path,
            1,
            format!(
                "file is {} bytes, over the limit of {}; nothing in it was checked, so its mesh config is unverified",
                file.bytes.len(),
                limits.max_file_bytes
            ),
        ));
        return out;
    }
    let text = match std::str::from_utf8(&file.bytes) {
        Ok(t) => t,
        Err(e) => {
            out.findings.push(input_finding(
                "manifest/parse-error",
                Severity::Error,
                &file.path,
                line_of_byte(&file.bytes, e.valid_up_to()),
                "file is not valid UTF-8; nothing in it was checked".to_string(),
            ));
            return out;
        }
    };
    let docs = match yaml::parse_documents(text, limits) {
        Ok(d) => d,
        Err(e) => {
            out.findings.push(doc_error_finding(&file.path, &e));
            return out;
        }
    };
    // Documents that fail alike (a message that names no line) stay apart: the
    // second and later carry their rank, so that neither is merged into the first
    // nor, from base to head, taken for it.
    let mut failed: HashMap<(String, String), usize> = HashMap::default();
    for doc in docs {
        match doc.result {
            Err(e) => {
                let mut f = doc_error_finding(&file.path, &e);
                let rank = failed
                    .entry((f.rule.clone(), f.message.clone()))
                    .or_default();
                *rank += 1;
                if *rank > 1 {
                    f.occurrence = Some(format!("document {rank} alike"));
                }
                out.findings.push(f);
            }
            Ok(None) => {}
            Ok(Some(node)) => {
                collect_objects(node, &file.path, namespace.unwrap_or("default"), &mut out)
            }
        }
    }
    out
}

fn doc_error_finding(path: &str, e: &yaml::DocError) -> Finding {
    let (rule, message) = if e.limit {
        ("manifest/limit-exceeded", e.message.clone())
    } else {
        (
            "manifest/parse-error",
            format!(
                "{}; this document was not checked (the others in the file were)",
                e.message
            ),
        )
    };
    input_finding(rule, Severity::Error, path, e.line, message)
}

fn line_of_byte(bytes: &[u8], pos: usize) -> u32 {
    1 + bytes[..pos.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count() as u32
}

fn collect_objects(node: Node, file: &str, default_namespace: &str, out: &mut Loaded) {
    let api_version = node
        .get("apiVersion")
        .and_then(Node::as_str)
        .map(str::to_string);
    let kind = node.get("kind").and_then(Node::as_str).map(str::to_string);
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        out.skipped_documents += 1;
        return;
    };
    if is_tool_config(&api_version, &kind) {
        out.skipped_documents += 1;
        return;
    }
    if install::is_istio_operator(&api_version, &kind) {
        // Input of `istioctl install -f`, not an object the cluster holds: it needs
        // no name, and what meshward takes from it (its meshConfig) is read by
        // `install::mesh_settings`. Only a value istioctl would refuse is reported.
        out.skipped_documents += 1;
        out.findings
            .extend(install::problems(&node).into_iter().map(|(line, message)| {
                input_finding(
                    "manifest/invalid-object",
                    Severity::Error,
                    file,
                    line,
                    message,
                )
            }));
        return;
    }
    if kind == "List" || (kind.ends_with("List") && node.get("items").is_some()) {
        if let Some(Node {
            value: yaml::Value::Seq(items),
            ..
        }) = node.get("items")
        {
            for item in items.clone() {
                collect_objects(item, file, default_namespace, out);
            }
        }
        return;
    }
    let Some(name) = name_of(&node) else {
        out.findings.push(input_finding(
            "manifest/invalid-object",
            Severity::Error,
            file,
            node.get("metadata").map(|m| m.line).unwrap_or(node.line),
            format!("{kind} has neither metadata.name nor metadata.generateName: the API server will reject it, and nothing in it was checked"),
        ));
        return;
    };
    let namespace = if is_cluster_scoped(&kind) {
        None
    } else {
        Some(
            node.get("metadata")
                .and_then(|m| m.get("namespace"))
                .and_then(Node::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(default_namespace)
                .to_string(),
        )
    };
    let body = node.to_json();
    let r = ResourceRef {
        api_version: api_version.clone(),
        kind: kind.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
    };
    out.resources.push(Resource {
        id: r.id(),
        api_version,
        kind,
        name,
        namespace,
        body: Arc::new(body),
        file: file.to_string(),
        line: node.line,
        lines: Arc::new(lines::LineIndex::of(&node)),
        origin: None,
        cluster: None,
    });
}

/// Marks a name the API server completes: `generateName: db-migrate-` is the object
/// `db-migrate-*`. Real names cannot hold `*`, so the two never collide, and the
/// identity stays the same from one revision to the next, for diffing.
pub const GENERATED_NAME_MARK: char = '*';

/// `metadata.name`, else `metadata.generateName` marked as generated (Argo CD and
/// Helm hooks, Jobs created with `kubectl create`); None when the object has neither.
fn name_of(node: &Node) -> Option<String> {
    let field = |key: &str| {
        node.get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Node::as_str)
            .filter(|n| !n.is_empty())
    };
    match (field("name"), field("generateName")) {
        (Some(name), _) => Some(name.to_string()),
        (None, Some(prefix)) => Some(format!("{prefix}{GENERATED_NAME_MARK}")),
        (None, None) => None,
    }
}

/// Is this object named by the API server (only `generateName` in the manifest)?
pub fn has_generated_name(r: &Resource) -> bool {
    r.name.ends_with(GENERATED_NAME_MARK)
        && r.body
            .at("/metadata/name")
            .and_then(|n| n.as_str())
            .is_none_or(str::is_empty)
}

/// Tools' own config files that look like objects (they have apiVersion and kind)
/// but are read by the tool and never applied to a cluster: (API group, kind, or
/// `*` for every kind of the group). Plus every `*.config.k8s.io` group, the
/// component configs (kubelet, kube-proxy, scheduler, apiserver encryption and
/// admission). Group `""` is the core group (`apiVersion: v1`), where `Config` is a
/// kubeconfig.
const TOOL_CONFIGS: &[(&str, &str)] = &[
    ("", "Config"),
    ("kustomize.config.k8s.io", "*"),
    ("config.kubernetes.io", "*"),
    ("builtin", "*"),
    ("kpt.dev", "*"),
    ("fn.kpt.dev", "*"),
    ("skaffold", "Config"),
    ("kind.x-k8s.io", "*"),
    ("k3d.io", "*"),
    ("ctlptl.dev", "*"),
    ("kubeadm.k8s.io", "*"),
    ("eksctl.io", "*"),
    ("audit.k8s.io", "*"),
    ("schema.plugin.fluxcd.io", "*"),
    ("kapp.k14s.io", "Config"),
    ("cli.kyverno.io", "*"),
    ("chainsaw.kyverno.io", "*"),
    ("kuttl.dev", "*"),
];

/// The API group of an apiVersion: `apps/v1` → `apps`, `v1` → `` (core). kustomize's
/// builtin plugin configs say just `builtin`.
pub fn api_group(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((group, _)) => group,
        None if api_version == "builtin" => "builtin",
        None => "",
    }
}

/// Is this document a tool's config (see [`TOOL_CONFIGS`]), not a cluster object?
pub fn is_tool_config(api_version: &str, kind: &str) -> bool {
    let group = api_group(api_version);
    group.ends_with(".config.k8s.io")
        || TOOL_CONFIGS
            .iter()
            .any(|(g, k)| *g == group && (*k == "*" || *k == kind))
}

/// The same object twice: a GitOps controller applies one and reports the other as
/// a conflict, so which one is live is unclear.
fn report_duplicates(out: &mut Loaded) {
    // The API server keys objects by group too: crossplane's ProviderConfig/default of
    // two providers are two objects.
    let mut copies: foldhash::HashMap<(Option<&str>, &str, &str), Vec<&Resource>> =
        foldhash::HashMap::default();
    // Each object with only a generateName is created anew under a name of its own:
    // two of them with one prefix are two objects, not a conflict.
    for r in out.resources.iter().filter(|r| !has_generated_name(r)) {
        copies
            .entry((
                r.cluster.as_deref(),
                api_group(&r.api_version),
                r.id.as_str(),
            ))
            .or_default()
            .push(r);
    }
    let mut dups = Vec::new();
    for group in copies.values().filter(|g| g.len() > 1) {
        // Every copy after the first is a finding of its own, on its own line, so a
        // third copy a change adds is introduced whatever the first two do.
        for (i, r) in group.iter().enumerate().skip(1) {
            let others: Vec<String> = group
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, o)| format!("{}:{}", o.file, o.line))
                .collect();
            let mut f = input_finding(
                "manifest/duplicate-resource",
                Severity::Warning,
                &r.file,
                r.line,
                format!(
                    "{} is also defined at {}; the controller applies only one of them, and which one is live is not obvious",
                    r.id,
                    others.join(", ")
                ),
            );
            f.resource = Some(r.reference());
            f.occurrence = Some(r.file.clone());
            f.cluster = r.cluster.as_deref().map(str::to_string);
            dups.push(f);
        }
    }
    out.findings.extend(dups);
}

/// The YAML files of `tests/fixtures/<dir>`, each named `<prefix><file name>`.
#[cfg(test)]
pub(crate) fn fixture_files(dir: &str, prefix: &str) -> Vec<SourceFile> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixture folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|x| x == "yaml") {
            files.push(SourceFile {
                path: format!(
                    "{prefix}{}",
                    path.file_name().expect("name").to_string_lossy()
                ),
                bytes: std::fs::read(&path).expect("read"),
            });
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn base_and_head_share_the_objects_of_a_file_neither_changed() {
        let svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n";
        let base = [file("a.yaml", svc), file("b.yaml", svc)];
        let head = [
            file("a.yaml", svc),
            file("b.yaml", &svc.replace("web", "api")),
        ];
        let parsed = Parsed::default();
        let limits = Limits::default();
        let all: Vec<&SourceFile> = base.iter().chain(&head).collect();
        parsed.parse_all(&all, &limits);
        let read = |files: &[SourceFile], ns: Option<&str>| {
            let refs: Vec<&SourceFile> = files.iter().collect();
            load_into(&refs, &limits, ns, Some(&parsed), &|_| None)
        };
        let (b, h) = (read(&base, None), read(&head, None));
        let body = |l: &Loaded, file: &str| {
            let r = l.resources.iter().find(|r| r.file == file).expect(file);
            (r.name.clone(), r.body.clone())
        };
        // The unchanged file: one object, held by both revisions.
        assert!(Arc::ptr_eq(&body(&b, "a.yaml").1, &body(&h, "a.yaml").1));
        // The changed one: each revision its own, as written.
        assert_eq!(body(&b, "b.yaml").0, "web");
        assert_eq!(body(&h, "b.yaml").0, "api");
        // Read into an app's namespace, the same bytes are other objects.
        let under_app = read(&head, Some("shop"));
        assert_eq!(
            under_app.resources[0].namespace.as_deref(),
            Some("shop"),
            "{:?}",
            under_app.resources[0].id
        );
        assert!(!Arc::ptr_eq(
            &body(&under_app, "a.yaml").1,
            &body(&h, "a.yaml").1
        ));
        // And reading with the cache gives what reading without it gives.
        let plain = load(&head, &limits);
        let ids = |l: &Loaded| l.resources.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&plain), ids(&h));
    }

    #[test]
    fn namespaces_default_and_cluster_scope() {
        let l = load(
            &[file(
                "a.yaml",
                "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
            )],
            &Limits::default(),
        );
        assert_eq!(l.resources[0].id, "Service/default/s");
        assert_eq!(l.resources[1].id, "Namespace/shop");
        assert_eq!(l.resources[1].namespace, None);
        assert_eq!(l.resources[1].line, 5);
    }

    #[test]
    fn list_is_flattened_and_non_objects_counted() {
        let l = load(
            &[file(
                "a.yaml",
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c, namespace: x}\n---\nfoo: bar\n",
            )],
            &Limits::default(),
        );
        assert_eq!(l.resources.len(), 1);
        assert_eq!(l.resources[0].id, "ConfigMap/x/c");
        assert_eq!(l.resources[0].line, 4);
        assert_eq!(l.skipped_documents, 1);
    }

    #[test]
    fn parse_error_keeps_other_documents() {
        let l = load(
            &[file(
                "a.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
            )],
            &Limits::default(),
        );
        assert_eq!(l.resources.len(), 1);
        assert_eq!(l.findings.len(), 1);
        assert_eq!(l.findings[0].rule, "manifest/parse-error");
        assert_eq!(l.findings[0].file, "a.yaml");
    }

    #[test]
    fn tool_configs_are_skipped_and_cluster_objects_of_like_groups_are_not() {
        for (api_version, kind) in [
            ("v1", "Config"),
            ("skaffold/v4beta11", "Config"),
            ("kind.x-k8s.io/v1alpha4", "Cluster"),
            ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"),
            ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
            ("builtin", "PatchTransformer"),
            ("schema.plugin.fluxcd.io/v1beta1", "Config"),
        ] {
            assert!(is_tool_config(api_version, kind), "{api_version} {kind}");
        }
        for (api_version, kind) in [
            ("v1", "ConfigMap"),
            ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
            ("cluster.x-k8s.io/v1beta1", "Cluster"),
            ("skaffold.example.com/v1", "Config"),
        ] {
            assert!(!is_tool_config(api_version, kind), "{api_version} {kind}");
        }
    }

    #[test]
    fn generate_name_is_a_marked_name_and_no_duplicate() {
        let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: migrate-, namespace: shop}\n";
        let l = load(
            &[file("a.yaml", &format!("{job}---\n{job}---\napiVersion: batch/v1\nkind: Job\nmetadata: {{namespace: shop}}\n"))],
            &Limits::default(),
        );
        assert_eq!(l.resources.len(), 2);
        assert_eq!(l.resources[0].id, "Job/shop/migrate-*");
        assert!(has_generated_name(&l.resources[0]));
        let rules: Vec<&str> = l.findings.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(
            rules,
            ["manifest/invalid-object"],
            "only the Job without either"
        );
        assert_eq!(l.findings[0].line, 11);
    }

    #[test]
    fn oversized_file_is_a_finding() {
        let limits = Limits {
            max_file_bytes: 10,
            ..Limits::default()
        };
        let l = load(
            &[file("big.yaml", "apiVersion: v1\nkind: ConfigMap\n")],
            &limits,
        );
        assert_eq!(l.findings[0].rule, "manifest/limit-exceeded");
    }
}
