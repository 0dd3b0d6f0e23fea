//! SARIF 2.1.0, as GitHub code scanning accepts it.

use super::rules;
use super::Report;
use crate::finding::{Severity, Status};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

pub fn render(report: &Report) -> Value {
    let live: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.status != Status::Resolved)
        .collect();
    // Every rule that produced a result gets an entry, built-in or the repo's own.
    let mut rule_ids: BTreeMap<&str, Severity> = BTreeMap::new();
    for f in &live {
        rule_ids.entry(f.rule.as_str()).or_insert(f.severity);
    }
    let index: BTreeMap<&str, usize> = rule_ids
        .keys()
        .enumerate()
        .map(|(i, id)| (*id, i))
        .collect();
    let rules: Vec<Value> = rule_ids
        .iter()
        .map(|(id, sev)| {
            let doc = rules::find(id);
            let summary = doc
                .map(|d| d.summary)
                .unwrap_or("Rule from a repository policy");
            let help = doc
                .map(|d| d.help)
                .unwrap_or("Defined in the repository's .meshward/policies.");
            let mut rule = json!({
                "id": id,
                "name": id.replace(['/', '-'], "_"),
                "shortDescription": {"text": summary},
                "fullDescription": {"text": help},
                "help": {"text": help, "markdown": format!("**{summary}**\n\n{help}")},
                "defaultConfiguration": {"level": level(*sev)},
                "properties": {"tags": ["istio", "kubernetes", "gitops"]},
            });
            if let Some(code) = doc.and_then(|d| d.istio_code) {
                rule["properties"]["istio_code"] = json!(code);
            }
            rule
        })
        .collect();
    let results: Vec<Value> = live
        .iter()
        .map(|f| {
            let mut result = json!({
                "ruleId": f.rule,
                "ruleIndex": index.get(f.rule.as_str()).copied().unwrap_or(0),
                "level": level(f.severity),
                "message": {"text": f.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {
                            "uri": format!("{}{}", report.repo_prefix, f.file),
                            "uriBaseId": "%SRCROOT%",
                        },
                        "region": {"startLine": f.line.max(1)}
                    }
                }],
                "partialFingerprints": {"meshward/v1": fingerprint(f)},
                "properties": {"status": f.status.as_str()},
            });
            if let Some(r) = &f.resource {
                result["properties"]["resource"] = json!(r.id());
            }
            result
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "meshward",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/meshward/meshward",
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": "file:///"}},
            "results": results,
        }]
    })
}

/// Stable across line moves, so code scanning tracks the same alert.
fn fingerprint(f: &crate::finding::Finding) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    f.identity().hash(&mut h);
    format!("{:016x}", h.finish())
}
