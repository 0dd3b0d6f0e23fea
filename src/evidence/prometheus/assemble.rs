//! Prometheus answers turned into evidence, one entry per STRICT scope.

use super::*;

pub(super) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub(super) fn source_text(target: &Target, retention: Option<&str>) -> String {
    let mut s = format!("prometheus {}", shown(&target.url));
    if !target.matchers.is_empty() {
        let m: Vec<String> = target
            .matchers
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        s.push_str(&format!(" ({})", m.join(", ")));
    }
    if let Some(r) = retention {
        s.push_str(&format!(", retention {r}"));
    }
    s
}

/// One subject of the evidence and its queries.
pub(super) struct SubjectQueries {
    /// `namespace:<ns>` or a workload scope key.
    pub(super) key: String,
    pub(super) workloads: Vec<String>,
    pub(super) queries: BTreeMap<String, String>,
    /// Why there is nothing to ask (a selector that selects no workload).
    pub(super) empty: Option<String>,
}

pub(super) fn subjects_for(
    scopes: &[StrictScope],
    matchers: &BTreeMap<String, String>,
    window: &str,
) -> Vec<SubjectQueries> {
    let mut out: BTreeMap<String, SubjectQueries> = BTreeMap::new();
    for s in scopes {
        match &s.subject {
            Subject::Mesh { .. } => {
                out.entry("mesh".to_string())
                    .or_insert_with(|| SubjectQueries {
                        key: "mesh".to_string(),
                        workloads: Vec::new(),
                        queries: promql::queries(&s.subject, matchers, window),
                        empty: None,
                    });
            }
            Subject::Namespaces(nss) => {
                for ns in nss {
                    out.entry(format!("namespace:{ns}"))
                        .or_insert_with(|| SubjectQueries {
                            key: format!("namespace:{ns}"),
                            workloads: Vec::new(),
                            queries: promql::queries(
                                &Subject::Namespaces(vec![ns.clone()]),
                                matchers,
                                window,
                            ),
                            empty: None,
                        });
                }
            }
            Subject::Workloads { names, .. } => {
                out.entry(s.scope_key.clone()).or_insert_with(|| SubjectQueries {
                    key: s.scope_key.clone(),
                    workloads: names.clone(),
                    queries: if names.is_empty() {
                        BTreeMap::new()
                    } else {
                        promql::queries(&s.subject, matchers, window)
                    },
                    empty: names.is_empty().then(|| {
                        format!(
                            "{} selects no workload in this repository, so there is no traffic to ask Prometheus about",
                            s.resource
                        )
                    }),
                });
            }
        }
    }
    let mut out: Vec<SubjectQueries> = out.into_values().collect();
    for s in out.iter_mut().skip(MAX_SUBJECTS) {
        s.empty = Some(format!(
            "meshward asks about at most {MAX_SUBJECTS} namespaces and workload scopes in one check, and this change turns STRICT on for more"
        ));
    }
    out
}

/// The evidence with its header.
pub(super) fn skeleton(target: Option<&Target>) -> Evidence {
    Evidence {
        taken_at: Some(now_rfc3339()),
        window: target.map(|t| t.window.clone()),
        source: target.map(|t| source_text(t, None)),
        ..Evidence::default()
    }
}

pub(super) fn put(evidence: &mut Evidence, key: &str, entry: TrafficEvidence) {
    match key.strip_prefix("namespace:") {
        Some(ns) => {
            evidence.namespaces.insert(ns.to_string(), entry);
        }
        None => {
            evidence.scopes.insert(key.to_string(), entry);
        }
    }
}

/// Every subject gets the same error: nothing could be asked.
pub(super) fn failed(
    target: &Result<Target, String>,
    scopes: &[StrictScope],
    reason: &str,
) -> Evidence {
    let t = target.as_ref().ok();
    let mut evidence = skeleton(t);
    let (matchers, window) = match t {
        Some(t) => (t.matchers.clone(), t.window.clone()),
        None => (BTreeMap::new(), String::new()),
    };
    for s in subjects_for(scopes, &matchers, &window) {
        let entry = TrafficEvidence {
            queries: if t.is_some() {
                s.queries
            } else {
                BTreeMap::new()
            },
            workloads: s.workloads,
            error: Some(s.empty.unwrap_or_else(|| reason.to_string())),
            ..TrafficEvidence::default()
        };
        put(&mut evidence, &s.key, entry);
    }
    evidence
}

pub(super) fn fill(
    evidence: &mut Evidence,
    subjects: &[SubjectQueries],
    answers: &HashMap<String, Cached>,
    errors: &BTreeMap<String, String>,
) {
    let now = evidence.taken_at.clone();
    for s in subjects {
        let mut entry = TrafficEvidence {
            workloads: s.workloads.clone(),
            ..TrafficEvidence::default()
        };
        entry.error = s.empty.clone();
        let mut oldest: Option<&str> = None;
        for (name, q) in &s.queries {
            if let Some(e) = errors.get(q) {
                entry.error.get_or_insert_with(|| e.clone());
                continue;
            }
            let Some(c) = answers.get(q) else {
                entry
                    .error
                    .get_or_insert_with(|| "the query was not answered".to_string());
                continue;
            };
            if Some(c.taken_at.as_str()) != now.as_deref() {
                oldest = Some(oldest.map_or(c.taken_at.as_str(), |o| o.min(c.taken_at.as_str())));
            }
            // increase() extrapolates: a single plaintext request may come back as
            // 0.4. Any plaintext at all must show, so plaintext rounds up.
            let n = if name.ends_with("plaintext") {
                if c.value > 0.0 {
                    c.value.ceil() as u64
                } else {
                    0
                }
            } else {
                c.value.round() as u64
            };
            match name.as_str() {
                "requests_plaintext" => entry.requests_plaintext = n,
                "requests_total" => entry.requests_total = n,
                "tcp_connections_plaintext" => entry.tcp_connections_plaintext = n,
                "tcp_connections_total" => entry.tcp_connections_total = n,
                "tcp_bytes_plaintext" => entry.tcp_bytes_plaintext = n,
                _ => {}
            }
        }
        entry.taken_at = oldest.map(str::to_string);
        entry.queries = s.queries.clone();
        put(evidence, &s.key, entry);
    }
}
