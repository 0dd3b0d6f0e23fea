//! Evaluating the policies over one revision and turning what they return into findings.

use crate::config::RepoConfig;
use crate::evidence::Evidence;
use crate::finding::{Finding, Severity, Status};
use crate::manifest::{self, input_finding, Resource};
use crate::model::Model;
use crate::policy::input::{policy_value, policy_value_against, InputParts};
use crate::policy::{Packages, Policies, PolicyLimits, PolicyProblem, RawFinding};
use crate::report::RevisionSummary;
use anyhow::Result;
use foldhash::{HashMap, HashSet};

pub(super) struct Evaluated {
    /// The bodies are released (null) once their policy values are built: read
    /// nothing from them after judging.
    pub(super) resources: Vec<Resource>,
    pub(super) findings: Vec<Finding>,
    pub(super) model: Model,
    pub(super) summary: RevisionSummary,
}

/// One revision ready for its policies.
pub(super) struct Prepared {
    loaded: manifest::Loaded,
    model: Model,
    schema: Vec<crate::schema::Checked>,
    label: String,
    parts: InputParts,
}

/// The revision's model as a policy value.
pub(super) enum ModelValue<'a> {
    /// Built already (base's, which head's input holds too).
    Built(&'a regorus::Value),
    /// To build, sharing what it holds alike with base's model and its value.
    Against(&'a Model, &'a regorus::Value),
    /// To build (there is no base).
    Alone,
}

/// Builds one revision's policy input. `base` is base's model as a policy value.
#[allow(clippy::too_many_arguments)]
pub(super) fn prepare(
    (loaded, model): (manifest::Loaded, Model),
    schema: Vec<crate::schema::Checked>,
    own: ModelValue,
    base: Option<&regorus::Value>,
    bodies: Vec<regorus::Value>,
    label: &str,
    config: &RepoConfig,
    evidence: Option<&Evidence>,
) -> Prepared {
    let started = std::time::Instant::now();
    let own = || match own {
        ModelValue::Built(value) => value.clone(),
        ModelValue::Against(base, value) => policy_value_against(&model, (base, value)),
        ModelValue::Alone => policy_value(&model),
    };
    let parts = InputParts::new(&loaded.resources, bodies, own, base, evidence, config);
    tracing::debug!(
        revision = label,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "policy input built"
    );
    Prepared {
        loaded,
        model,
        schema,
        label: label.to_string(),
        parts,
    }
}

impl Prepared {
    /// The revision's model, where it was prepared before the model was at hand.
    pub(super) fn with_model(self, model: Model) -> Prepared {
        Prepared { model, ..self }
    }
}

/// What evaluating gave one revision.
type Raw = (Vec<RawFinding>, Vec<PolicyProblem>);

/// Evaluates the policies over head and base (with the ids of the objects base holds
/// exactly as head does: one copy each, the same parse). Per-object packages run once
/// on head and only on base's other objects: on a shared object they find the same in
/// both revisions. Every package and part runs side by side.
pub(super) fn evaluate_revisions(
    head: Prepared,
    base: Option<(Prepared, HashSet<String>)>,
    (policies, limits): (&Policies, &PolicyLimits),
    config: &RepoConfig,
) -> (Evaluated, Option<Evaluated>) {
    #[derive(Clone, Copy, PartialEq)]
    enum Of {
        Head,
        HeadPart,
        Base,
        BasePart,
    }
    let started = std::time::Instant::now();
    let split = policies.has_per_object();
    let mut requests = Vec::new();
    let mut of = Vec::new();
    // A revision: its whole input for the other packages, and the per-object ones
    // on `own` (its objects not shared with the other revision), in parts.
    let mut ask = |revision: &Prepared, own: Vec<usize>, whole: Of, part: Of| {
        requests.push((
            revision.parts.input(0..revision.parts.len()),
            Packages::Joined,
        ));
        of.push(whole);
        if split {
            let kind = |i: usize| revision.loaded.resources.get(i).map(|r| r.kind.as_str());
            for objects in parts(own, kind) {
                requests.push((revision.parts.input(objects), Packages::PerObject));
                of.push(part);
            }
        }
    };
    ask(
        &head,
        (0..head.parts.len()).collect(),
        Of::Head,
        Of::HeadPart,
    );
    if let Some((b, shared)) = &base {
        let own = (0..b.parts.len())
            .filter(|&i| !shared.contains(&b.loaded.resources[i].id))
            .collect();
        ask(b, own, Of::Base, Of::BasePart);
    }
    let results = policies.evaluate_many(requests, limits);
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "policies evaluated"
    );
    let (mut head_raw, mut base_raw): (Raw, Raw) = Default::default();
    for (whose, (findings, problems)) in of.into_iter().zip(results) {
        if whose == Of::HeadPart {
            // What a per-object package found on an object base holds alike is
            // base's too; a part that failed, failed for base's copy as well.
            if let Some((_, shared)) = &base {
                base_raw.0.extend(
                    findings
                        .iter()
                        .filter(|f| f.resource.as_ref().is_some_and(|r| shared.contains(r)))
                        .cloned(),
                );
                base_raw.1.extend(problems.iter().cloned());
            }
        }
        let to = match whose {
            Of::Head | Of::HeadPart => &mut head_raw,
            Of::Base | Of::BasePart => &mut base_raw,
        };
        to.0.extend(findings);
        to.1.extend(problems);
    }
    rayon::join(
        || finish(head, head_raw, config),
        || base.map(|(b, _)| finish(b, base_raw, config)),
    )
}

/// A revision's objects in parts to evaluate side by side: one per core from a few
/// thousand objects on, each in the revision's order. Each kind's objects are dealt
/// out in turn: what an object costs to check depends on its kind (a ServiceEntry
/// tens of times a Deployment), and a revision's order is its files' order, in which
/// the costly kinds sit together (in runs, one part took 0.42 s and the other 0.15 s
/// at 100k; dealt without regard to kind, the ServiceEntries and WorkloadEntries of
/// files holding one of each went to one part each).
fn parts<'a>(objects: Vec<usize>, kind: impl Fn(usize) -> Option<&'a str>) -> Vec<Vec<usize>> {
    const PER_PART: usize = 2_000;
    if objects.is_empty() {
        return Vec::new();
    }
    let count = (objects.len() / PER_PART).clamp(1, rayon::current_num_threads().max(1));
    let mut out = vec![Vec::with_capacity(objects.len().div_ceil(count)); count];
    let mut dealt: HashMap<Option<&str>, usize> = HashMap::default();
    for i in objects {
        let turn = dealt.entry(kind(i)).or_default();
        out[*turn % count].push(i);
        *turn += 1;
    }
    out
}

/// Turns what the policies returned for one revision into its findings.
fn finish(prepared: Prepared, (raw, problems): Raw, config: &RepoConfig) -> Evaluated {
    let Prepared {
        loaded,
        model,
        schema,
        label,
        parts,
    } = prepared;
    super::let_go(parts);
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
    // The schema net's findings are the repository's to lower or turn off, as the
    // policies' are.
    let schema = schema
        .into_iter()
        .filter_map(|mut c| {
            c.finding.severity = configured(&c.finding.rule, c.finding.severity, config)?;
            Some(c)
        })
        .collect();
    crate::schema::merge_restated(&mut findings, schema);
    // Policies may return the same finding through two rule bodies. Identities are
    // built once per finding, not once per comparison.
    let mut keyed: Vec<_> = findings.into_iter().map(|f| (f.identity(), f)).collect();
    keyed.sort_by(|(a, fa), (b, fb)| a.cmp(b).then(fa.message.cmp(&fb.message)));
    keyed.dedup_by(|(a, fa), (b, fb)| a == b && fa.message == fb.message);
    let findings: Vec<Finding> = keyed.into_iter().map(|(_, f)| f).collect();
    Evaluated {
        summary: RevisionSummary {
            revision: label,
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

/// A rule's severity as `.meshward.yaml` `rules:` sets it; None when it is off.
fn configured(rule: &str, severity: Severity, config: &RepoConfig) -> Option<Severity> {
    match config.rules.get(rule) {
        Some(setting) => setting.severity(),
        None => Some(severity),
    }
}

pub(super) fn to_finding(
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
    match configured(&raw.rule, severity, config) {
        None => return Ok(None),
        Some(s) => severity = s,
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
        occurrence: None,
        cluster: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{load, Limits};

    /// What a per-object package finds on a revision is what it finds on each of its
    /// objects alone, and each finding names its object: the contract that lets base
    /// and head share findings and a revision be evaluated in parts. Checked on the
    /// Istio documents of the schema fixtures (one per webhook constraint class).
    #[test]
    fn per_object_packages_find_on_each_object_what_they_find_on_all() {
        let mut files = crate::manifest::fixture_files("schema/istio/invalid", "invalid/");
        files.extend(crate::manifest::fixture_files(
            "schema/istio/valid",
            "valid/",
        ));
        let loaded = load(&files, &Limits::default());
        assert!(loaded.resources.len() > 400, "{}", loaded.resources.len());
        let model = crate::model::build(&loaded.resources, &Default::default(), None);
        let bodies = crate::policy::input::BodyValues::of(loaded.resources.iter())
            .of_each(&loaded.resources);
        let config = RepoConfig::default();
        let parts = InputParts::new(
            &loaded.resources,
            bodies,
            || policy_value(&model),
            None,
            None,
            &config,
        );
        let policies = Policies::compile(&crate::policy::builtin(), &[]).expect("compile");
        assert!(policies.has_per_object());
        // A repository's policy may add rules to any package: none is per-object then.
        let own = crate::policy::PolicySource {
            path: ".meshward/policies/own.rego".into(),
            text: "package meshward.rules

import rego.v1

schema.findings contains f if {
	some f in input.resources
	false
}
"
            .into(),
        };
        let with_own = Policies::compile(&crate::policy::builtin(), &[own]).expect("compile");
        assert!(with_own.problems.is_empty(), "{:?}", with_own.problems);
        assert!(!with_own.has_per_object());
        let limits = PolicyLimits {
            runner: None,
            ..PolicyLimits::default()
        };
        let key =
            |f: &RawFinding| format!("{:?} {:?} {} {}", f.resource, f.path, f.rule, f.message);
        let mut requests = vec![(parts.input(0..parts.len()), Packages::PerObject)];
        requests.extend((0..parts.len()).map(|i| (parts.input([i]), Packages::PerObject)));
        let mut results = policies.evaluate_many(requests, &limits).into_iter();
        let (whole, problems) = results.next().expect("whole");
        assert!(problems.is_empty(), "{problems:?}");
        assert!(whole.len() > 100, "{}", whole.len());
        assert!(
            whole.iter().all(|f| f.resource.is_some()),
            "a finding names no object"
        );
        let mut alone: Vec<String> = Vec::new();
        for (found, problems) in results {
            assert!(problems.is_empty(), "{problems:?}");
            alone.extend(found.iter().map(key));
        }
        let mut whole: Vec<String> = whole.iter().map(key).collect();
        whole.sort();
        whole.dedup();
        alone.sort();
        alone.dedup();
        assert_eq!(whole, alone);
    }
}
