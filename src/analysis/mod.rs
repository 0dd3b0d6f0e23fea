//! The pipeline: (base, head) trees → findings with status, and coverage. The CLI and
//! the service both call [`analyze`].

use crate::config::{RepoConfig, CONFIG_FILE};
use crate::evidence::Evidence;
use crate::finding::{sort_findings, FailOn, Finding, Severity, Status};
use crate::manifest::{self, input_finding, Limits, Resource, SourceFile};
use crate::model::{self, coverage, Model};
use crate::policy::{self, Policies, PolicyLimits, PolicySource};
use crate::report::{
    ClusterCoverage, CoverageReport, Report, RevisionSummary, RootOutcome, Summary, Verdict,
};
use crate::workspace::Tree;
use anyhow::Result;
use chrono::NaiveDate;
use foldhash::HashMap;

mod clusters;
mod diff;
mod evaluate;
mod exceptions;
mod judge;
mod limits;
mod roots;

use crate::render::{is_manifest, RenderedRevision};
use exceptions::apply_exceptions;
use judge::{Judge, Judged, Side};
use limits::{limits_above_ceiling, policy_limits};
use roots::{render_note, root_outcomes, touched_failures};

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
    pub repo_urls: crate::render::RepoUrls,
    /// The branches the checked revisions stand for, where known.
    pub branches: Vec<String>,
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
    /// Compile every built-in policy file, also those for kinds the check does not hold.
    pub every_policy_file: bool,
}

impl Options {
    /// Built-in policies only, no evidence, tools found as usual, every root rendered.
    pub fn new(today: NaiveDate) -> Options {
        Options {
            tools: crate::render::Tools::discover(),
            repo_urls: crate::render::RepoUrls::default(),
            branches: Vec::new(),
            changed_paths: None,
            extra_policies: Vec::new(),
            evidence: None,
            prometheus: None,
            fail_on: None,
            today,
            limits: Limits::default(),
            render_limits: crate::render::RenderLimits::default(),
            policy_limits: PolicyLimits::default(),
            every_policy_file: false,
        }
    }
}

/// What `meshward check` and the service's worker ask of the pipeline, beyond the
/// revisions.
pub struct CheckSettings {
    /// URLs under which app objects name this repository.
    pub repo_urls: crate::render::RepoUrls,
    /// The branches the checked revisions stand for (the pull request's base, the
    /// branch checked out), where known: a Flux GitRepository of this repository
    /// following another branch is not this checkout.
    pub branches: Vec<String>,
    /// Policies given on the command line: trusted like the built-ins.
    pub extra_policies: Vec<PolicySource>,
    pub evidence: Option<Evidence>,
    pub prometheus: Option<std::sync::Arc<crate::evidence::PrometheusSource>>,
    pub fail_on: Option<FailOn>,
    pub today: NaiveDate,
    /// With a base, render every root, not only those the change touches.
    pub render_all: bool,
    /// Compile every built-in policy file, also those for kinds the check does not
    /// hold: for a service, whose one compiled engine then serves every repository.
    pub every_policy_file: bool,
}

/// What the pipeline gave: the report, and the paths the change touches (None
/// without a base, or when every root was rendered).
pub struct Checked {
    pub report: Report,
    pub changed_paths: Option<std::collections::BTreeSet<String>>,
}

/// The pipeline's one entry, for `meshward check` and the service's worker alike:
/// the paths the change touches, the options with this machine's tools and the
/// server's limits, then [`analyze`].
pub fn check(
    base: Option<Revision>,
    head: Revision,
    settings: CheckSettings,
) -> Result<Checked, CheckError> {
    let changed_paths = match (&base, settings.render_all) {
        (Some(b), false) => crate::workspace::changed_paths(b.tree, head.tree),
        _ => None,
    };
    let opts = Options {
        repo_urls: settings.repo_urls,
        branches: settings.branches,
        changed_paths: changed_paths.clone(),
        extra_policies: settings.extra_policies,
        evidence: settings.evidence,
        prometheus: settings.prometheus,
        fail_on: settings.fail_on,
        every_policy_file: settings.every_policy_file,
        ..Options::new(settings.today)
    };
    let report = analyze(base, head, &opts)?;
    Ok(Checked {
        report,
        changed_paths,
    })
}

/// Something that stops a check as a whole (exit code 2); everything else is a finding.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
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
    // Base and head parse each file they hold alike once.
    let parsed = crate::manifest::Parsed::default();
    let rendered = crate::render::RenderedRoots::default();
    let render_settings = crate::render::Settings {
        tools: &opts.tools,
        limits: limits::render_limits(&config, &opts.render_limits),
        manifest_limits: &opts.limits,
        repo_urls: &opts.repo_urls,
        branches: &opts.branches,
        changed_paths: opts.changed_paths.as_ref(),
        parsed: Some(&parsed),
        rendered: base.is_some().then_some(&rendered),
        backwards: false,
    };
    if let Some(b) = &base {
        crate::render::parse_shared(&[head.tree, b.tree], &config, &render_settings);
    }
    // Each revision's model is built on its own thread once it is parsed, unless
    // context roots may still be added to it (a root left unrendered). Head's is
    // built without base's, and kept where base changes nothing in it.
    let parse_and_model = |tree, settings: &crate::render::Settings| {
        let parsed = crate::render::revision(tree, &config, settings);
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
    };
    let (head_parsed, base_parsed) = rayon::join(
        || parse_and_model(head.tree, &render_settings),
        || {
            base.as_ref().map(|b| {
                let settings = crate::render::Settings {
                    backwards: true,
                    ..render_settings.clone()
                };
                parse_and_model(b.tree, &settings)
            })
        },
    );
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "rendered and parsed"
    );
    let (mut head_parsed, mut head_model) = head_parsed;
    let (mut base_parsed, mut base_model) = base_parsed.unzip();
    if let Some(changed) = &opts.changed_paths {
        let head_before = head_parsed.linked();
        let before = base_parsed.as_ref().map(RenderedRevision::linked);
        crate::render::context(
            (head.tree, &mut head_parsed),
            base.as_ref().map(|b| b.tree).zip(base_parsed.as_mut()),
            changed,
            &config,
            &render_settings,
        );
        if base_parsed.as_ref().map(RenderedRevision::linked) != before {
            base_model = None;
        }
        if head_parsed.linked() != head_before {
            head_model = None;
        }
    }
    free_aside((parsed, rendered));
    // Several clusters are several meshes, judged one by one; one is told as before.
    let meshes = clusters::meshes(&head_parsed, base_parsed.as_ref());
    if meshes.is_empty() {
        clusters::forget(&mut head_parsed);
        if let Some(b) = base_parsed.as_mut() {
            clusters::forget(b);
        }
    }
    // Compiled once the kinds the revisions hold are known: a built-in file for
    // kinds neither holds is left out.
    let held: std::collections::HashSet<&str> = head_parsed
        .loaded
        .resources
        .iter()
        .chain(base_parsed.iter().flat_map(|b| &b.loaded.resources))
        .map(|r| r.kind.as_str())
        .collect();
    let mut trusted = policy::builtin();
    trusted.extend(opts.extra_policies.iter().cloned());
    let compiling = std::time::Instant::now();
    let policies = Policies::compile_for(&trusted, &repo_policies, &|k| {
        opts.every_policy_file || held.contains(k)
    })?;
    tracing::debug!(
        elapsed_ms = compiling.elapsed().as_millis() as u64,
        "policies compiled"
    );
    drop(held);
    let roots = root_outcomes(&head_parsed);
    if let Some(note) = render_note(&roots, opts.changed_paths.is_some()) {
        notes.push(note);
    }
    let fail_closed = touched_failures(&head_parsed);
    let judge = Judge {
        opts,
        config: &config,
        policies: &policies,
        limits: &policy_limits(&config, &opts.policy_limits),
    };
    let base_label = base.as_ref().map(|b| b.label.clone()).unwrap_or_default();
    let head_schemas = std::sync::Arc::new(schema_files(head.tree, &config, &opts.limits));
    let base_schemas = std::sync::Arc::new(
        base.as_ref()
            .map(|b| schema_files(b.tree, &config, &opts.limits))
            .unwrap_or_default(),
    );
    let side = |loaded, labels: &Vec<_>, model, label: &str, schemas: &std::sync::Arc<_>| Side {
        schemas: std::sync::Arc::clone(schemas),
        loaded,
        labels: labels.clone(),
        model,
        label: label.to_string(),
    };
    let judged: Vec<(Option<std::sync::Arc<str>>, Judged)> = if meshes.is_empty() {
        let head_side = side(
            head_parsed.loaded,
            &head_parsed.namespace_labels,
            head_model,
            &head.label,
            &head_schemas,
        );
        let base_side = base_parsed.map(|p| {
            side(
                p.loaded,
                &p.namespace_labels,
                base_model.flatten(),
                &base_label,
                &base_schemas,
            )
        });
        vec![(None, judge.judge(head_side, base_side, None))]
    } else {
        let heads = clusters::split(head_parsed.loaded, &meshes);
        let mut bases = base_parsed
            .map(|p| {
                let labels = p.namespace_labels;
                clusters::split(p.loaded, &meshes)
                    .into_iter()
                    .map(move |l| (l, labels.clone()))
                    .collect::<Vec<_>>()
            })
            .map(Vec::into_iter);
        let head_labels = head_parsed.namespace_labels;
        meshes
            .iter()
            .zip(heads)
            .map(|(cluster, h)| {
                let b = bases
                    .as_mut()
                    .and_then(Iterator::next)
                    .map(|(l, labels)| side(l, &labels, None, &base_label, &base_schemas));
                let judged = judge.judge(
                    side(h, &head_labels, None, &head.label, &head_schemas),
                    b,
                    cluster.as_deref(),
                );
                (cluster.clone(), judged)
            })
            .collect()
    };
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "evaluated"
    );
    let mut findings: Vec<Finding> = Vec::new();
    for (_, j) in &judged {
        for note in &j.notes {
            if !notes.contains(note) {
                notes.push(note.clone());
            }
        }
        findings.extend(j.findings.iter().cloned());
    }
    let evidence = merged_evidence(judged.iter().filter_map(|(_, j)| j.evidence.as_ref()));
    for p in &policies.problems {
        findings.push(input_finding(
            "policy/error",
            Severity::Error,
            &p.file,
            1,
            p.message.clone(),
        ));
    }
    let policy_count = policies.count;
    // The compiled modules are many small allocations (a few ms to free).
    let_go(policies);
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
    let head_summary = added_up(judged.iter().map(|(_, j)| &j.head.summary));
    let base_summary = base.as_ref().map(|_| {
        added_up(
            judged
                .iter()
                .filter_map(|(_, j)| j.base.as_ref().map(|b| &b.summary)),
        )
    });

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
        policies: policy_count,
        head: head_summary.clone(),
        base: base_summary.clone(),
        nothing_to_check: nothing_to_check(&head_summary, base_summary.as_ref(), &roots, &findings),
        notes,
        roots,
        clusters: meshes.iter().flatten().map(|m| m.to_string()).collect(),
    };
    // Each mesh's coverage, changes and models; several side by side.
    let mut parts = Vec::new();
    let mut done = Vec::new();
    for (cluster, j) in judged {
        // What no cluster claims is shown as a mesh of its own only when it holds
        // more than the controllers' app objects.
        if cluster.is_none()
            && !meshes.is_empty()
            && j.head.resources.iter().all(clusters::controller_object)
        {
            continue;
        }
        let name = clusters::name(cluster.as_deref());
        // Each a pass over one or both models: side by side.
        let ((base_coverage, head_coverage), changes) = rayon::join(
            || {
                rayon::join(
                    || j.base.as_ref().map(|b| coverage::of(&b.model)),
                    || coverage::of(&j.head.model),
                )
            },
            || {
                j.base
                    .as_ref()
                    .map(|b| crate::changes::of(&b.model, &j.head.model, &config.mesh))
            },
        );
        let coverage = ClusterCoverage {
            cluster: name.clone(),
            base: base_coverage,
            head: head_coverage,
        };
        let models = crate::report::Models {
            changed: j.changed.unwrap_or_default(),
            head_resources: j.head.resources.iter().map(|r| r.id.clone()).collect(),
            head: j.head.model,
            base: j.base.map(|b| {
                done.push(b.resources);
                b.model
            }),
            clusters: Vec::new(),
        };
        done.push(j.head.resources);
        parts.push((name, coverage, changes, models));
    }
    let_go(done);
    let (coverage, changes, models) = if meshes.is_empty() {
        let (_, c, changes, models) = parts.pop().expect("one mesh is judged");
        let coverage = CoverageReport {
            base: c.base,
            head: c.head,
            clusters: Vec::new(),
        };
        (coverage, changes, models)
    } else {
        let covered: Vec<ClusterCoverage> = parts.iter().map(|p| p.1.clone()).collect();
        let coverage = CoverageReport {
            base: base.as_ref().map(|_| {
                clusters::whole_coverage(
                    covered
                        .iter()
                        .filter_map(|c| c.base.as_ref().map(|b| (c.cluster.as_str(), b))),
                )
            }),
            head: clusters::whole_coverage(covered.iter().map(|c| (c.cluster.as_str(), &c.head))),
            clusters: covered,
        };
        let changes = base.as_ref().map(|_| {
            clusters::whole_changes(
                parts
                    .iter_mut()
                    .filter_map(|p| p.2.take().map(|c| (p.0.clone(), c)))
                    .collect(),
            )
        });
        let models = crate::report::Models {
            clusters: parts.into_iter().map(|p| (p.0, p.3)).collect(),
            ..Default::default()
        };
        (coverage, changes, models)
    };
    Ok(Report {
        repo_prefix: String::new(),
        publish: config.publish.clone(),
        findings,
        suppressed,
        evidence,
        coverage,
        changes,
        summary,
        models,
    })
}

/// Why nothing was checked, when neither revision holds a Kubernetes object, a
/// render root or anything meshward has to say about its files.
fn nothing_to_check(
    head: &RevisionSummary,
    base: Option<&RevisionSummary>,
    roots: &[RootOutcome],
    findings: &[Finding],
) -> Option<String> {
    let empty = |e: &RevisionSummary| e.resources == 0;
    if !(empty(head) && base.is_none_or(empty) && roots.is_empty() && findings.is_empty()) {
        return None;
    }
    let h = head;
    Some(format!(
        "nothing to check: no Kubernetes objects and no render roots (kustomize, Helm, Argo CD or Flux apps) were found ({} YAML files read as manifests, {} documents in them that are not cluster objects, {} dot-files and CI configs not read). Point meshward at the folder that holds the manifests, or select them with paths.include in .meshward.yaml.",
        h.files, h.skipped_documents, h.files_not_read
    ))
}

/// One revision's summary over its meshes: the first names the revision and holds
/// its file counts, every one its objects.
fn added_up<'a>(mut parts: impl Iterator<Item = &'a RevisionSummary>) -> RevisionSummary {
    let mut out = parts.next().cloned().unwrap_or(RevisionSummary {
        revision: String::new(),
        files: 0,
        resources: 0,
        skipped_documents: 0,
        files_not_read: 0,
    });
    for p in parts {
        out.files += p.files;
        out.resources += p.resources;
        out.skipped_documents += p.skipped_documents;
        out.files_not_read += p.files_not_read;
    }
    out
}

/// The evidence of every mesh in one. Numbers for a namespace of one name in two
/// clusters come from the one Prometheus the repository names: the later wins.
fn merged_evidence<'a>(mut parts: impl Iterator<Item = &'a Evidence>) -> Option<Evidence> {
    let mut out = parts.next()?.clone();
    for e in parts {
        out.namespaces
            .extend(e.namespaces.iter().map(|(k, v)| (k.clone(), v.clone())));
        out.scopes
            .extend(e.scopes.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Some(out)
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

/// The files `.meshward.yaml` `schemas:` names, read for their
/// CustomResourceDefinitions; an entry that names nothing is said.
fn schema_files(tree: &Tree, config: &RepoConfig, limits: &Limits) -> manifest::Loaded {
    let mut named = vec![false; config.schemas.len()];
    let files: Vec<SourceFile> = tree
        .files
        .iter()
        .filter(|f| {
            let yaml = [".yaml", ".yml", ".json"]
                .iter()
                .any(|e| f.path.ends_with(e));
            let mut hit = false;
            for (i, s) in config.schemas.iter().enumerate() {
                let s = s.trim_end_matches('/');
                if yaml && (f.path == s || f.path.starts_with(&format!("{s}/"))) {
                    named[i] = true;
                    hit = true;
                }
            }
            hit
        })
        .cloned()
        .collect();
    let mut loaded = manifest::load(&files, limits);
    loaded
        .resources
        .retain(|r| r.kind == "CustomResourceDefinition");
    for (i, s) in config.schemas.iter().enumerate() {
        if !named[i] {
            loaded.findings.push(input_finding(
                crate::schema::NOT_CHECKED,
                Severity::Warning,
                CONFIG_FILE,
                1,
                format!("`schemas[{i}]` {s:?} names no YAML or JSON file of this revision: no CustomResourceDefinition was read from it, so the objects it was meant to define are checked against the CRDs among the manifests only."),
            ));
        }
    }
    loaded
}

/// Head resources that are new or whose object differs from base's.
/// One id may stand for several objects (the Jobs of one `generateName`): a head
/// object is unchanged when base has one like it under its id.
fn changed_resources(base: &[Resource], head: &[Resource]) -> std::collections::BTreeSet<String> {
    let mut before: HashMap<&str, Vec<&serde_json::Value>> = HashMap::default();
    for r in base {
        before.entry(r.id.as_str()).or_default().push(&*r.body);
    }
    head.iter()
        .filter(|r| {
            // Shared bodies (a file neither revision changed) are equal without a look.
            !before.get(r.id.as_str()).is_some_and(|bodies| {
                bodies
                    .iter()
                    .any(|b| std::ptr::eq(*b, &*r.body) || **b == *r.body)
            })
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

/// Set by a process that exits once its one check is done (the CLI).
static EXITS_AFTER_CHECK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Declares that this process exits when its check is done: what the check lets go
/// of once it is past its peak (a revision's policy values and parsed objects, a
/// hundred thousand small allocations each) is left to the system, which takes the
/// whole address space back at exit faster than it can be freed piece by piece.
pub fn exits_after_check() {
    EXITS_AFTER_CHECK.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Frees `value` on a thread of its own, so the report need not wait for it; in a
/// process that exits after its check (`exits_after_check`), leaves it to the exit.
pub(super) fn let_go<T: Send + 'static>(value: T) {
    if EXITS_AFTER_CHECK.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(value);
        return;
    }
    free_aside(value);
}

/// Frees `value` on a thread of its own. Unlike `let_go`, also where the process
/// exits after its check: for what shares memory that must be freed before the
/// peak (the parse cache holds every body, which the revisions release later).
fn free_aside<T: Send + 'static>(value: T) {
    // Where no thread can be started, the closure (and `value`) is dropped here.
    let _ = std::thread::Builder::new()
        .name("meshward-free".into())
        .spawn(move || drop(value));
}
