//! The pipeline: (base, head) trees → findings with status, and coverage. The CLI and
//! the service both call [`analyze`].

use crate::config::{RepoConfig, CONFIG_FILE};
use crate::evidence::Evidence;
use crate::finding::{sort_findings, FailOn, Finding, Severity, Status};
use crate::manifest::{self, input_finding, Limits, Resource, SourceFile};
use crate::model::{self, coverage, Model};
use crate::policy::{self, Policies, PolicyLimits, PolicySource, RawFinding};
use crate::report::{
    CoverageReport, Report, RevisionSummary, RootOutcome, RootStatus, Summary, Suppressed, Verdict,
};
use crate::workspace::Tree;
use anyhow::Result;
use chrono::NaiveDate;
use std::collections::{HashMap, HashSet};

pub const REPO_POLICY_DIR: &str = ".meshward/policies/";

/// A revision to check.
pub struct Revision<'a> {
    /// What to call it in reports: a commit id, or "working tree".
    pub label: String,
    pub tree: &'a Tree,
}

pub struct Options {
    /// helm and kustomize, for render roots.
    pub tools: crate::render::Tools,
    /// URLs under which app objects name this repository (besides `render.repo_urls`).
    pub repo_urls: Vec<String>,
    /// Paths the change touches; only render roots reading one are rendered. None:
    /// render every root.
    pub changed_paths: Option<std::collections::BTreeSet<String>>,
    /// Policies given on the command line: trusted like the built-ins.
    pub extra_policies: Vec<PolicySource>,
    /// Evidence from a file (`--evidence`); wins over `prometheus`.
    pub evidence: Option<Evidence>,
    /// Where to gather evidence for the STRICT scopes a change introduces (with the
    /// repository's `evidence.prometheus`). None: only `evidence` is used.
    pub prometheus: Option<std::sync::Arc<crate::evidence::PrometheusSource>>,
    /// Overrides the config file's `fail_on`.
    pub fail_on: Option<FailOn>,
    /// The day exceptions are judged against.
    pub today: NaiveDate,
    pub limits: Limits,
    /// The server's (or CLI's) render limits: ceilings a repository's
    /// `render.timeout_seconds` / `render.max_output_bytes` may lower, never raise.
    pub render_limits: crate::render::RenderLimits,
    /// The same for evaluating policies (`policy.timeout_seconds`, `policy.max_memory_mib`).
    pub policy_limits: PolicyLimits,
}

impl Options {
    /// Built-in policies only, no evidence, tools found as usual, every root rendered.
    pub fn new(today: NaiveDate) -> Options {
        Options {
            tools: crate::render::Tools::discover(),
            repo_urls: Vec::new(),
            changed_paths: None,
            extra_policies: Vec::new(),
            evidence: None,
            prometheus: None,
            fail_on: None,
            today,
            limits: Limits::default(),
            render_limits: crate::render::RenderLimits::default(),
            policy_limits: PolicyLimits::default(),
        }
    }
}

/// Something that stops a check as a whole (exit code 2); everything else is a finding.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

struct Evaluated {
    resources: Vec<Resource>,
    findings: Vec<Finding>,
    model: Model,
    summary: RevisionSummary,
}

pub fn analyze(
    base: Option<Revision>,
    head: Revision,
    opts: &Options,
) -> Result<Report, CheckError> {
    // Config and repository policies come from base: a change cannot waive itself.
    let config_tree = base.as_ref().map(|b| b.tree).unwrap_or(head.tree);
    let mut config = match config_tree.get(CONFIG_FILE) {
        Some(f) => RepoConfig::parse(&String::from_utf8_lossy(&f.bytes))?,
        None => RepoConfig::default(),
    };
    let repo_policies: Vec<PolicySource> = config_tree
        .files
        .iter()
        .filter(|f| f.path.starts_with(REPO_POLICY_DIR) && f.path.ends_with(".rego"))
        .map(|f| PolicySource {
            path: f.path.clone(),
            text: String::from_utf8_lossy(&f.bytes).into_owned(),
        })
        .collect();
    let mut trusted = policy::builtin();
    trusted.extend(opts.extra_policies.iter().cloned());
    let policies = Policies::compile(&trusted, &repo_policies)?;

    let mut notes = Vec::new();
    if let Some(b) = &base {
        if policy_files_differ(b.tree, head.tree) {
            notes.push(format!(
                "This change edits {REPO_POLICY_DIR} or {CONFIG_FILE}; policies, rules and exceptions are read from the base revision, so the edits take effect after merge."
            ));
        }
    } else {
        notes.push(
            "No base revision: every finding is `existing`, and the rules about a change (mtls/strict-skips-permissive, mtls/strict-without-evidence, mtls/plaintext-traffic-present, injection/rollout-required, authz/identity-change) were not evaluated: they judge what a change turns on, and there is nothing to compare with."
                .to_string(),
        );
    }
    notes.extend(apply_install_mesh(
        &mut config,
        config_tree,
        base.as_ref().map(|_| head.tree),
        &opts.limits,
    ));
    if opts.evidence.is_none() && opts.prometheus.is_none() {
        notes.push(
            "No telemetry evidence was given: STRICT mTLS cannot be shown safe (--evidence)."
                .to_string(),
        );
    }

    let started = std::time::Instant::now();
    // Base's model is built on base's thread while head is parsed, unless context
    // roots may still be added to base (a root base left unrendered).
    let (mut head_parsed, base_parsed) = rayon::join(
        || parse_revision(&head, &config, opts),
        || {
            base.as_ref().map(|b| {
                let parsed = parse_revision(b, &config, opts);
                let complete = parsed.rendered.iter().all(|r| *r);
                let model = complete.then(|| {
                    model::build_with(
                        &parsed.loaded.resources,
                        &config.mesh,
                        None,
                        &parsed.namespace_labels,
                    )
                });
                (parsed, model)
            })
        },
    );
    let (mut base_parsed, mut base_model) = base_parsed.unzip();
    if let Some(changed) = &opts.changed_paths {
        let before = base_parsed.as_ref().map(Parsed::linked);
        render_context(
            (&head, &mut head_parsed),
            base.as_ref().zip(base_parsed.as_mut()),
            changed,
            &config,
            opts,
        );
        if base_parsed.as_ref().map(Parsed::linked) != before {
            base_model = None;
        }
    }
    let roots = root_outcomes(&head_parsed);
    if let Some(note) = render_note(&roots, opts.changed_paths.is_some()) {
        notes.push(note);
    }
    let fail_closed = touched_failures(&head_parsed);
    let head_labels = head_parsed.namespace_labels;
    let head_parsed = head_parsed.loaded;
    let base_loaded = base_parsed.map(|p| {
        let model = base_model.flatten().unwrap_or_else(|| {
            model::build_with(&p.loaded.resources, &config.mesh, None, &p.namespace_labels)
        });
        (p.loaded, model)
    });
    let base_model = base_loaded.as_ref().map(|(_, m)| m);
    // Base's model is in both policy inputs (head's `base`, base's `model` and `base`):
    // converted once and shared, as it is one of the largest parts of either.
    let (head_model, base_value) = rayon::join(
        || {
            model::build_with(
                &head_parsed.resources,
                &config.mesh,
                base_model,
                &head_labels,
            )
        },
        || base_model.map(policy_value),
    );
    let evidence = match &opts.evidence {
        Some(e) => Some(e.clone()),
        None => gather_evidence(opts, &config, &head_model, base_model, &mut notes),
    };
    let head_loaded = (head_parsed, head_model);
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "parsed and modelled"
    );

    let limits = policy_limits(&config, &opts.policy_limits);
    let evaluate =
        |loaded: (manifest::Loaded, Model), own: Option<&regorus::Value>, label: &str| {
            evaluate_revision(
                loaded,
                own,
                base_value.as_ref(),
                label,
                (&policies, &limits),
                &config,
                evidence.as_ref(),
            )
        };
    let (head_eval, base_eval) = rayon::join(
        || evaluate(head_loaded, None, &head.label),
        || {
            // Base is judged against itself: nothing in it is "introduced".
            base_loaded.map(|loaded| {
                evaluate(
                    loaded,
                    base_value.as_ref(),
                    &base.as_ref().map(|b| b.label.clone()).unwrap_or_default(),
                )
            })
        },
    );
    drop(base_value);

    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "evaluated"
    );
    let mut findings = match &base_eval {
        Some(b) => diff(&b.findings, &head_eval.findings),
        None => head_eval.findings.clone(),
    };
    for p in &policies.problems {
        findings.push(input_finding(
            "policy/error",
            Severity::Error,
            &p.file,
            1,
            p.message.clone(),
        ));
    }
    findings.extend(limits_above_ceiling(
        &config,
        &opts.render_limits,
        &opts.policy_limits,
    ));
    // What could not be checked cannot pass, whether or not base failed alike: a
    // policy that did not run, a root this change touches that did not render.
    let edited = |file: &str| match &base {
        Some(b) => b.tree.get(file).map(|f| &f.bytes) != head.tree.get(file).map(|f| &f.bytes),
        None => false,
    };
    for f in findings.iter_mut() {
        if f.status == Status::Resolved {
            continue;
        }
        let unchecked = if f.rule == "policy/error" {
            // The change that repairs a repository policy would be blocked by it.
            !(f.file.starts_with(REPO_POLICY_DIR) && edited(&f.file))
        } else {
            fail_closed.contains(&f.identity())
        };
        if unchecked {
            f.unchecked = true;
            if f.status == Status::Existing && base.is_some() {
                f.message.push_str(if f.rule == "policy/error" {
                    " This blocks the change although base failed alike: a rule that did not run cannot pass it."
                } else {
                    " This change touches the root, so it could not be checked, and it does not pass although base failed alike."
                });
            }
        }
    }
    let suppressed = apply_exceptions(&mut findings, &config, opts.today);
    sort_findings(&mut findings);

    tracing::debug!(elapsed_ms = started.elapsed().as_millis() as u64, "diffed");
    let fail_on = opts.fail_on.or(config.fail_on).unwrap_or(FailOn::Error);
    let gating = |f: &&Finding| match f.status {
        Status::Introduced => true,
        Status::Existing => base.is_none() || f.unchecked,
        Status::Resolved => false,
    };
    let blocking = findings
        .iter()
        .filter(gating)
        .filter(|f| fail_on.blocks(f.severity))
        .count();
    let live = |s: Severity| {
        findings
            .iter()
            .filter(|f| f.status != Status::Resolved && f.severity == s)
            .count()
    };
    let summary = Summary {
        verdict: if blocking > 0 {
            Verdict::Fail
        } else {
            Verdict::Pass
        },
        fail_on,
        blocking,
        introduced: findings
            .iter()
            .filter(|f| f.status == Status::Introduced)
            .count(),
        existing: findings
            .iter()
            .filter(|f| f.status == Status::Existing)
            .count(),
        resolved: findings
            .iter()
            .filter(|f| f.status == Status::Resolved)
            .count(),
        errors: live(Severity::Error),
        warnings: live(Severity::Warning),
        infos: live(Severity::Info),
        suppressed: suppressed.len(),
        policies: policies.count,
        head: head_eval.summary.clone(),
        base: base_eval.as_ref().map(|b| b.summary.clone()),
        nothing_to_check: nothing_to_check(&head_eval, base_eval.as_ref(), &roots, &findings),
        notes,
        roots,
    };
    let changes = base_eval
        .as_ref()
        .map(|b| crate::changes::of(&b.model, &head_eval.model, &config.mesh));
    let changed = match &base_eval {
        Some(b) => changed_resources(&b.resources, &head_eval.resources),
        None => Default::default(),
    };
    Ok(Report {
        repo_prefix: String::new(),
        findings,
        suppressed,
        evidence,
        coverage: CoverageReport {
            base: base_eval.as_ref().map(|b| coverage::of(&b.model)),
            head: coverage::of(&head_eval.model),
        },
        changes,
        summary,
        models: crate::report::Models {
            head: head_eval.model,
            base: base_eval.map(|b| b.model),
            head_resources: head_eval.resources.iter().map(|r| r.id.clone()).collect(),
            changed,
        },
    })
}

/// Why nothing was checked, when neither revision holds a Kubernetes object, a
/// render root or anything meshward has to say about its files.
fn nothing_to_check(
    head: &Evaluated,
    base: Option<&Evaluated>,
    roots: &[RootOutcome],
    findings: &[Finding],
) -> Option<String> {
    let empty = |e: &Evaluated| e.resources.is_empty();
    if !(empty(head) && base.is_none_or(empty) && roots.is_empty() && findings.is_empty()) {
        return None;
    }
    let h = &head.summary;
    Some(format!(
        "nothing to check: no Kubernetes objects and no render roots (kustomize, Helm, Argo CD or Flux apps) were found ({} YAML files read as manifests, {} documents in them that are not cluster objects, {} dot-files and CI configs not read). Point meshward at the folder that holds the manifests, or select them with paths.include in .meshward.yaml.",
        h.files, h.skipped_documents, h.files_not_read
    ))
}

/// Asks Prometheus about the STRICT scopes head introduces over base, when a source
/// is configured (server or CLI) and resolves for this repository.
fn gather_evidence(
    opts: &Options,
    config: &RepoConfig,
    head: &Model,
    base: Option<&Model>,
    notes: &mut Vec<String>,
) -> Option<Evidence> {
    let source = opts.prometheus.as_ref()?;
    // Evidence is about what a change turns STRICT; without a base nothing is judged.
    base?;
    let target = match source.resolve(config.evidence.prometheus.as_ref()) {
        Some(t) => t,
        None => {
            notes.push(
                "No Prometheus is configured (evidence.prometheus in .meshward.yaml, or the server's default): STRICT mTLS cannot be shown safe."
                    .to_string(),
            );
            return None;
        }
    };
    let scopes = crate::evidence::introduced_strict(head, base, &config.mesh);
    if scopes.is_empty() {
        return None;
    }
    let started = std::time::Instant::now();
    let evidence = source.gather_blocking(&target, &scopes);
    tracing::debug!(
        scopes = scopes.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "evidence gathered"
    );
    Some(evidence)
}

/// Head resources that are new or whose object differs from base's.
/// One id may stand for several objects (the Jobs of one `generateName`): a head
/// object is unchanged when base has one like it under its id.
fn changed_resources(base: &[Resource], head: &[Resource]) -> std::collections::BTreeSet<String> {
    let mut before: HashMap<&str, Vec<&serde_json::Value>> = HashMap::new();
    for r in base {
        before.entry(r.id.as_str()).or_default().push(&r.body);
    }
    head.iter()
        .filter(|r| {
            !before
                .get(r.id.as_str())
                .is_some_and(|bodies| bodies.contains(&&r.body))
        })
        .map(|r| r.id.clone())
        .collect()
}

fn policy_files_differ(base: &Tree, head: &Tree) -> bool {
    let pick = |t: &Tree| -> Vec<(String, Vec<u8>)> {
        t.files
            .iter()
            .filter(|f| f.path == CONFIG_FILE || f.path.starts_with(REPO_POLICY_DIR))
            .map(|f| (f.path.clone(), f.bytes.clone()))
            .collect()
    };
    pick(base) != pick(head)
}

/// Is this file a manifest of the checked tree (not config, not policy, not a
/// dot-file or CI config unless `paths.include` names it)?
fn is_manifest(f: &SourceFile, config: &RepoConfig) -> bool {
    is_yaml_input(&f.path) && config.manifest_selected(&f.path)
}

/// A YAML file that is not meshward's own config or policy.
fn is_yaml_input(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    (lower.ends_with(".yaml") || lower.ends_with(".yml"))
        && path != CONFIG_FILE
        && !path.starts_with(".meshward/")
}

/// YAML files `paths` selects that are not read as manifests: dot-files, files
/// under dot-folders and CI configs (see `config::read_by_default`).
fn not_read_as_manifests(tree: &Tree, config: &RepoConfig) -> usize {
    tree.files
        .iter()
        .map(|f| f.path.as_str())
        .chain(tree.oversized.iter().map(|(p, _)| p.as_str()))
        .chain(tree.symlinks.iter().map(String::as_str))
        .filter(|p| is_yaml_input(p) && config.path_selected(p) && !config.manifest_selected(p))
        .count()
}

/// The root namespace and trust domain the repository's IstioOperator files install,
/// where `.meshward.yaml` sets none (see `manifest::install`). Read from the
/// revision the config file is read from: the mesh runs with what is installed
/// until it is reinstalled, and a change cannot move its own checks. A change that
/// edits them is told so.
fn apply_install_mesh(
    config: &mut RepoConfig,
    config_tree: &Tree,
    head: Option<&Tree>,
    limits: &Limits,
) -> Vec<String> {
    use manifest::install;
    let resolve = |tree: &Tree| {
        let files: Vec<&SourceFile> = tree
            .files
            .iter()
            .filter(|f| is_manifest(f, config))
            .collect();
        install::resolve(
            &config.mesh,
            &config.mesh_keys,
            &install::mesh_settings(&files, limits),
        )
    };
    let (mesh, mut notes) = resolve(config_tree);
    if let Some(head) = head {
        let (after, _) = resolve(head);
        let mut moved = Vec::new();
        if after.root_namespace != mesh.root_namespace {
            moved.push(format!(
                "root namespace {} → {}",
                mesh.root_namespace, after.root_namespace
            ));
        }
        if after.trust_domain != mesh.trust_domain {
            moved.push(format!(
                "trust domain {} → {}",
                mesh.trust_domain, after.trust_domain
            ));
        }
        if !moved.is_empty() {
            notes.push(format!(
                "This change edits IstioOperator install files: {}. Both revisions are checked with the base revision's values, which the mesh keeps until istioctl installs the new ones.",
                moved.join(", ")
            ));
        }
    }
    config.mesh = mesh;
    notes
}

fn render_note(roots: &[RootOutcome], selective: bool) -> Option<String> {
    let count = |status: RootStatus| roots.iter().filter(|r| r.outcome == status).count();
    let excluded = count(RootStatus::Excluded);
    let planned = roots.len() - excluded;
    if roots.is_empty() {
        return None;
    }
    let rendered = count(RootStatus::Rendered);
    let unchecked = count(RootStatus::Failed) + count(RootStatus::Refused);
    let not_needed = count(RootStatus::NotNeeded);
    let mut note =
        format!("Rendered {rendered} of {planned} render roots (kustomize, Helm, app objects)");
    if selective && not_needed > 0 {
        let selected = |why: &str| {
            roots
                .iter()
                .filter(|r| r.why.as_deref() == Some(why))
                .count()
        };
        let (touched, linked) = (selected(TOUCHED), selected(LINKED));
        let linked = if linked > 0 {
            format!(", {linked} more because they share a namespace with it or name one of its namespaces")
        } else {
            String::new()
        };
        note.push_str(&format!(
            ": {touched} read a file this change touches{linked}. The other {not_needed} neither read a changed file nor share or name a namespace with what it changes, so their objects were not checked in this run."
        ));
    } else {
        note.push('.');
    }
    if unchecked > 0 {
        note.push_str(&format!(
            " {unchecked} did not render (failed or refused): nothing they deploy was checked."
        ));
    }
    if excluded > 0 {
        note.push_str(&format!(
            " {excluded} excluded by render.exclude in .meshward.yaml."
        ));
    }
    Some(note)
}

const TOUCHED: &str = "reads a file this change touches";
const LINKED: &str = "deploys into or names a namespace this change deploys into or names";
const EVERY: &str = "every root is rendered";

/// Every root of a revision with its outcome, in plan order, excluded ones last.
fn root_outcomes(p: &Parsed) -> Vec<RootOutcome> {
    p.roots
        .iter()
        .zip(&p.outcomes)
        .map(|(r, o)| RootOutcome {
            root: r.root.label(),
            file: r.root.entry.clone(),
            line: r.root.entry_line,
            outcome: o.status,
            reason: o.problem.clone().or(o.why.map(str::to_string)),
            why: o.why.map(str::to_string),
        })
        .chain(p.excluded.iter().map(|r| RootOutcome {
            root: r.label(),
            file: r.entry.clone(),
            line: r.entry_line,
            outcome: RootStatus::Excluded,
            reason: Some("render.exclude in .meshward.yaml".to_string()),
            why: None,
        }))
        .collect()
}

/// What became of one root of a revision.
#[derive(Debug, Clone)]
struct Outcome {
    status: RootStatus,
    /// Why it was rendered ([`TOUCHED`], [`LINKED`], [`EVERY`]), failed or not;
    /// None while no render needed it.
    why: Option<&'static str>,
    /// Why it did not render: the render failure's message.
    problem: Option<String>,
}

impl Default for Outcome {
    fn default() -> Self {
        Outcome {
            status: RootStatus::NotNeeded,
            why: None,
            problem: None,
        }
    }
}

/// The outcome a render failure of this rule means, if it is one.
fn failure_status(rule: &str) -> Option<RootStatus> {
    match rule {
        "render/refused" => Some(RootStatus::Refused),
        "render/failed" | "render/tool-missing" | "render/limit-exceeded" => {
            Some(RootStatus::Failed)
        }
        _ => None,
    }
}

/// What became of a rendered root: the first render failure among its findings.
fn outcome_of(r: &crate::render::Rendered, why: &'static str) -> Outcome {
    let failure = r
        .findings
        .iter()
        .find_map(|f| failure_status(&f.rule).map(|s| (s, f.message.clone())));
    match failure {
        Some((status, message)) => Outcome {
            status,
            why: Some(why),
            problem: Some(message),
        },
        None => Outcome {
            status: RootStatus::Rendered,
            why: Some(why),
            problem: None,
        },
    }
}

/// The failure findings of roots the change touches that did not render: they
/// block, whatever base did. (A root rendered only because it joins with the
/// change does not: the change did not touch it.)
fn touched_failures(p: &Parsed) -> HashSet<(String, String, String)> {
    let entries: HashSet<&str> = p
        .roots
        .iter()
        .zip(&p.outcomes)
        .filter(|(_, o)| o.status.unchecked() && o.why != Some(LINKED))
        .map(|(r, _)| r.root.entry.as_str())
        .collect();
    p.loaded
        .findings
        .iter()
        .filter(|f| failure_status(&f.rule).is_some() && entries.contains(f.file.as_str()))
        .map(Finding::identity)
        .collect()
}

impl Parsed {
    /// Roots rendered because the change's objects join with theirs.
    fn linked(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.why == Some(LINKED))
            .count()
    }
}

/// A revision's manifests, with the roots rendered so far.
struct Parsed {
    loaded: manifest::Loaded,
    roots: Vec<crate::render::PlannedRoot>,
    rendered: Vec<bool>,
    /// What became of each root: not needed until it is rendered.
    outcomes: Vec<Outcome>,
    /// Roots `render.exclude` leaves out.
    excluded: Vec<crate::render::roots::Root>,
    /// The revision on disk, once a render needed it (or why it is not there).
    dir: Option<Result<crate::workspace::Materialized, String>>,
    /// Labels app objects set on the namespaces they create.
    namespace_labels: Vec<crate::render::AppNamespaceLabels>,
}

fn parse_revision(rev: &Revision, config: &RepoConfig, opts: &Options) -> Parsed {
    let discovery = crate::render::discover(rev.tree);
    // Inputs of render roots are checked through their rendered output only.
    let files: Vec<SourceFile> = rev
        .tree
        .files
        .iter()
        .filter(|f| is_manifest(f, config) && !discovery.is_input(&f.path))
        .cloned()
        .collect();
    let mut loaded = manifest::load(&files, &opts.limits);
    // Count every manifest read, render inputs included.
    loaded.files = rev
        .tree
        .files
        .iter()
        .filter(|f| is_manifest(f, config))
        .count();
    loaded.files_not_read = not_read_as_manifests(rev.tree, config);
    let mut repo_urls: std::collections::BTreeSet<String> = opts
        .repo_urls
        .iter()
        .chain(&config.render.repo_urls)
        .map(|u| crate::render::roots::normalize_repo_url(u))
        .collect();
    repo_urls.retain(|u| !u.is_empty());
    let plan = crate::render::plan(
        rev.tree,
        &discovery,
        &loaded.resources,
        &config.render,
        &repo_urls,
    );
    // Inputs only the app objects reveal (a patch file an Application or an
    // ApplicationSet's template names, a component) are checked through the render,
    // not also as objects of their own.
    let app_files: std::collections::BTreeSet<&str> = plan
        .roots
        .iter()
        .filter_map(|p| p.app_file.as_deref())
        .collect();
    let inputs: std::collections::BTreeSet<&str> = plan
        .roots
        .iter()
        .flat_map(|p| p.files.iter().map(String::as_str))
        .filter(|f| !app_files.contains(f))
        .collect();
    loaded
        .resources
        .retain(|r| !inputs.contains(r.file.as_str()));
    loaded
        .findings
        .retain(|f| !(f.rule.starts_with("manifest/") && inputs.contains(f.file.as_str())));
    loaded.findings.extend(plan.findings.iter().cloned());
    // Plain folders an app object applies: their objects default to its namespace.
    for d in &plan.directories {
        let under: Vec<SourceFile> = files
            .iter()
            .filter(|f| d.holds(&f.path) && !inputs.contains(f.path.as_str()))
            .cloned()
            .collect();
        if under.is_empty() || d.namespace == "default" {
            continue;
        }
        loaded.resources.retain(|r| !d.holds(&r.file));
        loaded.findings.retain(|f| !d.holds(&f.file));
        let mut again = manifest::load_with_namespace(&under, &opts.limits, Some(&d.namespace));
        loaded.resources.append(&mut again.resources);
        loaded.findings.append(&mut again.findings);
    }
    let rendered: Vec<bool> = plan
        .roots
        .iter()
        .map(|r| match &opts.changed_paths {
            None => true,
            Some(changed) => changed.iter().any(|p| r.reads(p)),
        })
        .collect();
    let mut parsed = Parsed {
        loaded,
        outcomes: vec![Outcome::default(); plan.roots.len()],
        excluded: plan.excluded,
        roots: plan.roots,
        rendered,
        dir: None,
        namespace_labels: plan.namespace_labels,
    };
    let selected: Vec<usize> = (0..parsed.roots.len())
        .filter(|&i| parsed.rendered[i])
        .collect();
    if !selected.is_empty() {
        let roots: Vec<&crate::render::PlannedRoot> =
            selected.iter().map(|&i| &parsed.roots[i]).collect();
        let why = match opts.changed_paths {
            Some(_) => TOUCHED,
            None => EVERY,
        };
        let outputs = render_roots(rev, config, opts, &mut parsed.dir, &roots);
        for (i, mut r) in selected.into_iter().zip(outputs) {
            parsed.outcomes[i] = outcome_of(&r, why);
            parsed.loaded.resources.append(&mut r.resources);
            parsed.loaded.findings.append(&mut r.findings);
        }
    }
    let loaded = &mut parsed.loaded;
    for (path, size) in &rev.tree.oversized {
        if config.path_selected(path) && config.manifest_selected(path) {
            loaded.findings.push(input_finding(
                "manifest/limit-exceeded",
                Severity::Error,
                path,
                1,
                format!("file is {size} bytes, over the size limit; nothing in it was checked, so its mesh config is unverified"),
            ));
        }
    }
    for path in &rev.tree.symlinks {
        if config.path_selected(path) && config.manifest_selected(path) {
            loaded.findings.push(input_finding(
                "manifest/symlink-not-followed",
                Severity::Warning,
                path,
                1,
                "this YAML file is a symbolic link; meshward does not follow links (one could point outside the repository), so what it points at was not checked".to_string(),
            ));
        }
    }
    parsed
}

/// Renders `roots` from the revision's folder on disk, extracting it first if no
/// render of this revision has yet.
fn render_roots(
    rev: &Revision,
    config: &RepoConfig,
    opts: &Options,
    dir: &mut Option<Result<crate::workspace::Materialized, String>>,
    roots: &[&crate::render::PlannedRoot],
) -> Vec<crate::render::Rendered> {
    use rayon::prelude::*;
    if roots.is_empty() {
        // Nothing to render: the revision is not extracted (a whole tree to disk).
        return Vec::new();
    }
    let dir = dir.get_or_insert_with(|| match rev.tree.source.as_ref() {
        Some(source) => crate::workspace::materialize(source).map_err(|e| format!("{e:#}")),
        None => Err("the revision is not available on disk".to_string()),
    });
    let repo_dir = match dir {
        Ok(dir) => dir.path().to_path_buf(),
        Err(why) => {
            return roots
                .iter()
                .map(|r| crate::render::Rendered {
                    resources: Vec::new(),
                    findings: vec![input_finding(
                        "render/failed",
                        Severity::Error,
                        &r.root.entry,
                        r.root.entry_line,
                        format!("{} was not rendered: {why}", r.root.label()),
                    )],
                })
                .collect();
        }
    };
    let limits = render_limits(config, &opts.render_limits);
    let read = |p: &str| std::fs::read_to_string(repo_dir.join(p)).ok();
    roots
        .par_iter()
        .map(|r| crate::render::render_root(r, &repo_dir, &opts.tools, &limits, &read))
        .collect()
}

/// The repository's render limits under the ceilings: lowered where it asks,
/// never raised.
fn render_limits(
    config: &RepoConfig,
    ceiling: &crate::render::RenderLimits,
) -> crate::render::RenderLimits {
    let mut limits = ceiling.clone();
    if let Some(t) = config.render.timeout_seconds {
        limits.timeout = limits.timeout.min(std::time::Duration::from_secs(t));
    }
    if let Some(m) = config.render.max_output_bytes {
        limits.max_output_bytes = limits.max_output_bytes.min(m);
    }
    limits
}

/// The repository's policy limits under the ceilings: lowered where it asks, never
/// raised.
fn policy_limits(config: &RepoConfig, ceiling: &PolicyLimits) -> PolicyLimits {
    let mut limits = ceiling.clone();
    if let Some(t) = config.policy.timeout_seconds {
        limits.timeout = limits.timeout.min(std::time::Duration::from_secs(t));
    }
    if let Some(m) = config.policy.max_memory_mib {
        limits.max_memory_bytes = limits.max_memory_bytes.min(m.saturating_mul(1024 * 1024));
    }
    limits
}

/// Limits the repository sets above the server's ceilings (`render.*`, `policy.*`):
/// said, on their line.
fn limits_above_ceiling(
    config: &RepoConfig,
    render: &crate::render::RenderLimits,
    policy: &PolicyLimits,
) -> Vec<Finding> {
    const MIB: u64 = 1024 * 1024;
    let over = [
        (
            "render/limit-above-ceiling",
            "render.timeout_seconds",
            config.render.timeout_seconds,
            render.timeout.as_secs(),
            "s",
        ),
        (
            "render/limit-above-ceiling",
            "render.max_output_bytes",
            config.render.max_output_bytes.map(|m| m as u64),
            render.max_output_bytes as u64,
            "bytes",
        ),
        (
            "policy/limit-above-ceiling",
            "policy.timeout_seconds",
            config.policy.timeout_seconds,
            policy.timeout.as_secs(),
            "s",
        ),
        (
            "policy/limit-above-ceiling",
            "policy.max_memory_mib",
            config.policy.max_memory_mib,
            policy.max_memory_bytes / MIB,
            "MiB",
        ),
    ];
    over.into_iter()
        .filter_map(|(rule, key, value, ceiling, unit)| {
            let value = value.filter(|v| *v > ceiling)?;
            Some(input_finding(
                rule,
                Severity::Warning,
                CONFIG_FILE,
                config.limit_lines.get(key).copied().unwrap_or(1),
                format!("{key} is {value}, above this server's ceiling of {ceiling} {unit}; {ceiling} {unit} is used. A repository's config may lower meshward's limits, never raise them: lower the value (or remove it), or ask the server's operator to raise the ceiling."),
            ))
        })
        .collect()
}

/// For a change: renders the untouched roots its objects join with (see
/// `render::context`), in head and base alike. A root that is the same in both
/// reads no changed file, so it renders the same: head's output serves base too.
fn render_context(
    (head_rev, head): (&Revision, &mut Parsed),
    base: Option<(&Revision, &mut Parsed)>,
    changed: &std::collections::BTreeSet<String>,
    config: &RepoConfig,
    opts: &Options,
) {
    use crate::render::context::{self, Reach};
    let mut reach = Reach::default();
    let parsed = std::iter::once(&*head).chain(base.as_ref().map(|(_, b)| &**b));
    for p in parsed {
        for r in &p.loaded.resources {
            if r.origin.is_some() || changed.contains(&r.file) {
                reach.add(r);
            }
        }
    }
    let linked = |rev: &Revision, p: &Parsed| -> Vec<usize> {
        (0..p.roots.len())
            .filter(|&i| !p.rendered[i])
            .filter(|&i| {
                let root = &p.roots[i];
                // The app object's own file describes the root (its namespace is
                // in the root already); its objects come from the other files.
                let files: Vec<&SourceFile> = rev
                    .tree
                    .files
                    .iter()
                    .filter(|f| root.reads(&f.path) && root.app_file.as_ref() != Some(&f.path))
                    .collect();
                context::linked(root, &files, &reach, &config.mesh.root_namespace)
            })
            .collect()
    };
    let add = |p: &mut Parsed, i: usize, r: crate::render::Rendered| {
        p.rendered[i] = true;
        p.outcomes[i] = outcome_of(&r, LINKED);
        p.loaded.resources.extend(r.resources);
        p.loaded.findings.extend(r.findings);
    };
    let head_linked = linked(head_rev, head);
    let head_roots: Vec<&crate::render::PlannedRoot> =
        head_linked.iter().map(|&i| &head.roots[i]).collect();
    let outputs = render_roots(head_rev, config, opts, &mut head.dir, &head_roots);
    let rendered: Vec<(crate::render::PlannedRoot, crate::render::Rendered)> = head_linked
        .iter()
        .map(|&i| head.roots[i].clone())
        .zip(outputs)
        .collect();
    if let Some((base_rev, base)) = base {
        let mut missing = Vec::new();
        for i in linked(base_rev, base) {
            match rendered.iter().find(|(root, _)| *root == base.roots[i]) {
                Some((_, out)) => add(base, i, out.clone()),
                None => missing.push(i),
            }
        }
        let roots: Vec<&crate::render::PlannedRoot> =
            missing.iter().map(|&i| &base.roots[i]).collect();
        let outputs = render_roots(base_rev, config, opts, &mut base.dir, &roots);
        for (i, out) in missing.into_iter().zip(outputs) {
            add(base, i, out);
        }
    }
    for (i, (_, out)) in head_linked.into_iter().zip(rendered) {
        add(head, i, out);
    }
}

/// Evaluates the policies over one revision. `own` is the revision's model as a
/// policy value when the caller has it already; `base` is base's model as one.
#[allow(clippy::too_many_arguments)]
fn evaluate_revision(
    (loaded, model): (manifest::Loaded, Model),
    own: Option<&regorus::Value>,
    base: Option<&regorus::Value>,
    label: &str,
    (policies, limits): (&Policies, &PolicyLimits),
    config: &RepoConfig,
    evidence: Option<&Evidence>,
) -> Evaluated {
    let started = std::time::Instant::now();
    let own = own.cloned().unwrap_or_else(|| policy_value(&model));
    let input = build_input(&loaded.resources, own, base, evidence, config);
    tracing::debug!(
        revision = label,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "policy input built"
    );
    let (raw, problems) = policies.evaluate(input, limits);
    tracing::debug!(
        revision = label,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "policies evaluated"
    );
    let by_id: HashMap<&str, &Resource> = loaded
        .resources
        .iter()
        .map(|r| (r.id.as_str(), r))
        .collect();
    let mut findings = loaded.findings;
    for p in problems {
        findings.push(input_finding(
            "policy/error",
            Severity::Error,
            &p.file,
            1,
            p.message,
        ));
    }
    for raw in raw {
        match to_finding(raw, &by_id, config) {
            Ok(Some(f)) => findings.push(f),
            Ok(None) => {}
            Err(message) => findings.push(input_finding(
                "policy/error",
                Severity::Error,
                "(policy)",
                1,
                message,
            )),
        }
    }
    // Policies may return the same finding through two rule bodies.
    findings.sort_by(|a, b| {
        a.identity()
            .cmp(&b.identity())
            .then(a.message.cmp(&b.message))
    });
    findings.dedup_by(|a, b| a.identity() == b.identity() && a.message == b.message);
    Evaluated {
        summary: RevisionSummary {
            revision: label.to_string(),
            files: loaded.files,
            resources: loaded.resources.len(),
            skipped_documents: loaded.skipped_documents,
            files_not_read: loaded.files_not_read,
        },
        resources: loaded.resources,
        findings,
        model,
    }
}

fn to_finding(
    raw: RawFinding,
    by_id: &HashMap<&str, &Resource>,
    config: &RepoConfig,
) -> Result<Option<Finding>, String> {
    let Some(mut severity) = Severity::parse(&raw.severity) else {
        return Err(format!(
            "rule {} returned severity {:?}; it must be error, warning or info",
            raw.rule, raw.severity
        ));
    };
    if let Some(setting) = config.rules.get(&raw.rule) {
        match setting.severity() {
            None => return Ok(None),
            Some(s) => severity = s,
        }
    }
    let resource = match raw.resource.as_deref() {
        Some(id) => Some(by_id.get(id).copied().ok_or_else(|| {
            format!(
                "rule {} named resource {id:?}, which is not in the checked tree: {}",
                raw.rule, raw.message
            )
        })?),
        None => None,
    };
    let (file, line, note) = match resource {
        Some(r) => r.locate(&raw.path),
        None => (String::new(), 0, None),
    };
    let message = match note {
        Some(note) => format!("{} ({note})", raw.message),
        None => raw.message,
    };
    Ok(Some(Finding {
        rule: raw.rule,
        severity,
        status: Status::Existing,
        resource: resource.map(Resource::reference),
        file,
        line,
        path: raw.path,
        message,
        istio_code: raw.istio_code,
        subjects: {
            let mut s = raw.subjects;
            s.sort();
            s.dedup();
            s
        },
        unchecked: false,
    }))
}

/// Marks each head finding introduced or existing, and adds base-only ones as resolved.
/// A finding base had too is introduced still when it names a subject base's did
/// not: a second workload left without a proxy is a new breakage.
fn diff(base: &[Finding], head: &[Finding]) -> Vec<Finding> {
    let mut remaining: HashMap<(String, String, String), usize> = HashMap::new();
    let mut base_subjects: HashMap<(String, String, String), HashSet<&str>> = HashMap::new();
    for f in base {
        let id = f.identity();
        base_subjects
            .entry(id.clone())
            .or_default()
            .extend(f.subjects.iter().map(String::as_str));
        *remaining.entry(id).or_default() += 1;
    }
    let mut out = Vec::with_capacity(head.len());
    for f in head {
        let mut f = f.clone();
        let id = f.identity();
        let new_subject = f.subjects.iter().any(|s| {
            !base_subjects
                .get(&id)
                .is_some_and(|known| known.contains(s.as_str()))
        });
        f.status = match remaining.get_mut(&id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                if new_subject {
                    Status::Introduced
                } else {
                    Status::Existing
                }
            }
            _ => Status::Introduced,
        };
        out.push(f);
    }
    let mut head_left: HashMap<(String, String, String), usize> = HashMap::new();
    for f in head {
        *head_left.entry(f.identity()).or_default() += 1;
    }
    for f in base {
        match head_left.get_mut(&f.identity()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                let mut f = f.clone();
                f.status = Status::Resolved;
                out.push(f);
            }
        }
    }
    out
}

fn glob_matches(pattern: &str, value: &str) -> bool {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher().is_match(value))
        .unwrap_or(false)
}

/// Removes findings an exception covers; reports expired and unused exceptions.
fn apply_exceptions(
    findings: &mut Vec<Finding>,
    config: &RepoConfig,
    today: NaiveDate,
) -> Vec<Suppressed> {
    let mut suppressed = Vec::new();
    let mut used = vec![false; config.exceptions.len()];
    let mut kept = Vec::with_capacity(findings.len());
    for f in findings.drain(..) {
        let subject = f
            .resource
            .as_ref()
            .map(|r| r.id())
            .unwrap_or_else(|| f.file.clone());
        let matches = |e: &&crate::config::Exception| {
            glob_matches(&e.rule, &f.rule) && glob_matches(&e.resource, &subject)
        };
        // A renewed exception may sit after the expired one it replaces: a live
        // match wins wherever it is in the list.
        let hit = config
            .exceptions
            .iter()
            .enumerate()
            .find(|(_, e)| matches(e) && e.expires >= today)
            .or_else(|| {
                config
                    .exceptions
                    .iter()
                    .enumerate()
                    .find(|(_, e)| matches(e))
            });
        match hit {
            Some((i, e)) => {
                used[i] = true;
                if e.expires >= today {
                    suppressed.push(Suppressed {
                        finding: f,
                        reason: e.reason.clone(),
                        expires: e.expires,
                    });
                } else {
                    kept.push(f);
                }
            }
            None => kept.push(f),
        }
    }
    for (i, e) in config.exceptions.iter().enumerate() {
        let line = config.exception_lines.get(i).copied().unwrap_or(1);
        if e.expires < today {
            kept.push(input_finding(
                "exception/expired",
                Severity::Warning,
                CONFIG_FILE,
                line,
                format!(
                    "the exception for {} on {} expired on {} and no longer applies (reason given: {}); fix the finding or renew the exception with a new date",
                    e.rule, e.resource, e.expires, e.reason
                ),
            ));
        } else if !used[i] {
            kept.push(input_finding(
                "exception/unused",
                Severity::Info,
                CONFIG_FILE,
                line,
                format!(
                    "the exception for {} on {} matches no finding; remove it, or fix its rule id or resource (Kind/namespace/name)",
                    e.rule, e.resource
                ),
            ));
        }
    }
    *findings = kept;
    suppressed
}

/// The Rego input: resources (shared between `resources` and `by_kind`), models,
/// evidence and mesh config. See docs/policy-input.md.
/// A model as a policy value, through JSON text: a serde_json tree of the model would
/// double the memory the conversion needs.
fn policy_value(model: &Model) -> regorus::Value {
    serde_json::to_string(model)
        .ok()
        .and_then(|text| regorus::Value::from_json_str(&text).ok())
        .unwrap_or(regorus::Value::Null)
}

fn build_input(
    resources: &[Resource],
    model: regorus::Value,
    base: Option<&regorus::Value>,
    evidence: Option<&Evidence>,
    config: &RepoConfig,
) -> regorus::Value {
    use regorus::Value;
    let mut all = Vec::with_capacity(resources.len());
    let mut by_kind: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for r in resources {
        let v = Value::from(serde_json::json!({
            "id": r.id,
            "apiVersion": r.api_version,
            "kind": r.kind,
            "namespace": r.namespace,
            "name": r.name,
            "body": r.body,
            "file": r.file,
            "line": r.line,
        }));
        by_kind.entry(r.kind.clone()).or_default().push(v.clone());
        all.push(v);
    }
    let to_value = |j: serde_json::Value| Value::from(j);
    let mut input = Value::new_object();
    if let Ok(map) = input.as_object_mut() {
        map.insert(Value::from("resources"), Value::from(all));
        let mut kinds = Value::new_object();
        if let Ok(k) = kinds.as_object_mut() {
            for (kind, list) in by_kind {
                k.insert(Value::from(kind), Value::from(list));
            }
        }
        map.insert(Value::from("by_kind"), kinds);
        map.insert(Value::from("model"), model);
        map.insert(Value::from("base"), base.cloned().unwrap_or(Value::Null));
        map.insert(
            Value::from("evidence"),
            evidence
                .map(|e| to_value(serde_json::to_value(e).unwrap_or_default()))
                .unwrap_or(Value::Null),
        );
        map.insert(
            Value::from("config"),
            to_value(serde_json::json!({ "mesh": config.mesh })),
        );
    }
    input
}
