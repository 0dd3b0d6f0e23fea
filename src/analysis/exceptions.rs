//! The config file's exceptions: findings they cover, and exceptions expired or unused.

use crate::config::{RepoConfig, CONFIG_FILE};
use crate::finding::{Finding, Severity};
use crate::manifest::input_finding;
use crate::report::Suppressed;
use chrono::NaiveDate;

/// A pattern of the config file; one that does not compile matches nothing.
fn glob(pattern: &str) -> Option<globset::GlobMatcher> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// Removes findings an exception covers; reports expired and unused exceptions.
pub(super) fn apply_exceptions(
    findings: &mut Vec<Finding>,
    config: &RepoConfig,
    today: NaiveDate,
) -> Vec<Suppressed> {
    let mut suppressed = Vec::new();
    let mut used = vec![false; config.exceptions.len()];
    let mut kept = Vec::with_capacity(findings.len());
    // Compiled once: findings grow with the repository.
    let globs: Vec<(Option<globset::GlobMatcher>, Option<globset::GlobMatcher>)> = config
        .exceptions
        .iter()
        .map(|e| (glob(&e.rule), glob(&e.resource)))
        .collect();
    for f in findings.drain(..) {
        let subject = f
            .resource
            .as_ref()
            .map(|r| r.id())
            .unwrap_or_else(|| f.file.clone());
        let matches = |i: usize| {
            let (rule, resource) = &globs[i];
            rule.as_ref().is_some_and(|g| g.is_match(&f.rule))
                && resource.as_ref().is_some_and(|g| g.is_match(&subject))
        };
        // A renewed exception may sit after the expired one it replaces: a live
        // match wins wherever it is in the list.
        let hit = config
            .exceptions
            .iter()
            .enumerate()
            .find(|(i, e)| e.expires >= today && matches(*i))
            .or_else(|| {
                config
                    .exceptions
                    .iter()
                    .enumerate()
                    .find(|(i, _)| matches(*i))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> RepoConfig {
        RepoConfig::parse(text).expect("config")
    }

    #[test]
    fn a_live_exception_suppresses_and_expired_or_unused_ones_are_said() {
        let config = config(
            "exceptions:\n- rule: serviceentry/*\n  resource: a.yaml\n  reason: VM until Q2\n  expires: 2027-01-31\n- rule: authz/*\n  resource: b.yaml\n  reason: old\n  expires: 2026-01-01\n- rule: mtls/*\n  resource: c.yaml\n  reason: nothing matches\n  expires: 2027-01-31\n",
        );
        let finding = |rule: &str, file: &str| {
            input_finding(rule, Severity::Error, file, 1, format!("{rule} in {file}"))
        };
        let mut findings = vec![
            finding("serviceentry/location-mismatch", "a.yaml"),
            finding("authz/matches-nothing", "b.yaml"),
        ];
        let today = NaiveDate::from_ymd_opt(2026, 12, 3).expect("date");
        let suppressed = apply_exceptions(&mut findings, &config, today);
        assert_eq!(suppressed.len(), 1);
        assert_eq!(suppressed[0].reason, "VM until Q2");
        let rules: Vec<&str> = findings.iter().map(|f| f.rule.as_str()).collect();
        assert!(
            rules.contains(&"authz/matches-nothing"),
            "the expired one no longer applies: {rules:?}"
        );
        assert!(rules.contains(&"exception/expired"), "{rules:?}");
        assert!(rules.contains(&"exception/unused"), "{rules:?}");
        assert!(
            !rules.contains(&"serviceentry/location-mismatch"),
            "{rules:?}"
        );
    }
}
