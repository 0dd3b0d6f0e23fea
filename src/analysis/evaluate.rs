//! Evaluating the policies over one revision and turning what they return into findings.

use crate::config::RepoConfig;
use crate::evidence::Evidence;
use crate::finding::{Finding, Severity, Status};
use crate::manifest::{self, input_finding, Resource};
use crate::model::Model;
use crate::policy::input::{build_input, policy_value};
use crate::policy::{Policies, PolicyLimits, RawFinding};
use crate::report::RevisionSummary;
use anyhow::Result;
use std::collections::HashMap;

pub(super) struct Evaluated {
    /// The bodies are released (null) once their policy values are built: read
    /// nothing from them after judging.
    pub(super) resources: Vec<Resource>,
    pub(super) findings: Vec<Finding>,
    pub(super) model: Model,
    pub(super) summary: RevisionSummary,
}

/// Evaluates the policies over one revision. `own` is the revision's model as a
/// policy value when the caller has it already; `base` is base's model as one.
#[allow(clippy::too_many_arguments)]
pub(super) fn evaluate_revision(
    (loaded, model): (manifest::Loaded, Model),
    schema: Vec<crate::schema::Checked>,
    own: Option<&regorus::Value>,
    base: Option<&regorus::Value>,
    bodies: Vec<regorus::Value>,
    label: &str,
    (policies, limits): (&Policies, &PolicyLimits),
    config: &RepoConfig,
    evidence: Option<&Evidence>,
) -> Evaluated {
    let started = std::time::Instant::now();
    let own = own.cloned().unwrap_or_else(|| policy_value(&model));
    let input = build_input(&loaded.resources, bodies, own, base, evidence, config);
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
