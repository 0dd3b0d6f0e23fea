//! Label sets and selectors, and the address check the CRD does not do.

use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

use super::InvalidLabel;

pub type Labels = BTreeMap<String, String>;

pub trait LabelsExt {
    fn from_json(map: &Map<String, Json>) -> Labels;
    /// Every selector label is present with the same value.
    fn selected_by(&self, selector: &Labels) -> bool;
    fn canonical(&self) -> String;
    fn invalid(&self) -> Vec<InvalidLabel>;
}

impl LabelsExt for Labels {
    fn from_json(map: &Map<String, Json>) -> Labels {
        map.iter()
            .map(|(k, v)| {
                let v = match v {
                    Json::String(s) => s.clone(),
                    Json::Null => String::new(),
                    other => other.to_string(),
                };
                (k.clone(), v)
            })
            .collect()
    }

    fn selected_by(&self, selector: &Labels) -> bool {
        selector.iter().all(|(k, v)| self.get(k) == Some(v))
    }

    fn canonical(&self) -> String {
        self.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn invalid(&self) -> Vec<InvalidLabel> {
        self.iter()
            .filter_map(|(k, v)| {
                let problem = if k.is_empty() {
                    "key is empty"
                } else if k.contains('*') {
                    "key contains *: selector keys are exact, there are no wildcards"
                } else if v.contains('*') {
                    "value contains *: selector values are exact, there are no wildcards"
                } else {
                    return None;
                };
                Some(InvalidLabel {
                    key: k.clone(),
                    value: v.clone(),
                    problem: problem.into(),
                })
            })
            .collect()
    }
}

/// What is wrong with a WorkloadEntry address, if anything. The CRD accepts any
/// string (it may be an IP, an FQDN or a unix socket); the control plane's analysis
/// does not.
pub fn address_problem(address: &str) -> Option<String> {
    if address.chars().any(char::is_whitespace) {
        return Some(format!("{address:?} contains whitespace"));
    }
    if address.is_empty() {
        return Some("the address is empty".into());
    }
    if let Some(path) = address.strip_prefix("unix://") {
        // An absolute path, or `@name`: an abstract socket (Linux).
        return if path.starts_with('/') || (path.len() > 1 && path.starts_with('@')) {
            None
        } else {
            Some(format!(
                "{address:?} is a unix socket address without an absolute path"
            ))
        };
    }
    if address.parse::<std::net::IpAddr>().is_ok() || is_fqdn(address) {
        return None;
    }
    Some(format!(
        "{address:?} is not a valid IP address, FQDN or unix socket"
    ))
}

fn is_fqdn(s: &str) -> bool {
    // Istio's ValidateFQDN: up to 255 characters.
    if s.is_empty() || s.len() > 255 {
        return false;
    }
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() {
        return false;
    }
    let labels: Vec<&str> = s.split('.').collect();
    // An all-numeric dotted name is a malformed IP, not a host name.
    if labels.iter().all(|l| l.chars().all(|c| c.is_ascii_digit())) {
        return false;
    }
    labels.iter().all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(address_problem("10.0.0.1"), None);
        assert_eq!(address_problem("2001:db8::1"), None);
        assert_eq!(address_problem("vm1.example.com"), None);
        assert_eq!(address_problem("unix:///var/run/app.sock"), None);
        assert_eq!(address_problem("unix://@foo"), None);
        assert!(address_problem("unix://@").is_some());
        let long = format!("{}.example", vec!["a".repeat(60); 4].join("."));
        assert_eq!(long.len(), 251);
        assert_eq!(address_problem(&format!("{long}.io")), None);
        assert!(address_problem(&format!("{long}.io.x")).is_some());
        assert!(address_problem("10.0.0.1 ").unwrap().contains("whitespace"));
        assert!(address_problem("10.0.0.300")
            .unwrap()
            .contains("not a valid"));
        assert!(address_problem("vm_1.example")
            .unwrap()
            .contains("not a valid"));
    }

    #[test]
    fn selection() {
        let l: Labels = [
            ("app".to_string(), "a".to_string()),
            ("v".to_string(), "1".to_string()),
        ]
        .into();
        let s: Labels = [("app".to_string(), "a".to_string())].into();
        assert!(l.selected_by(&s));
        let s2: Labels = [("app".to_string(), "b".to_string())].into();
        assert!(!l.selected_by(&s2));
    }
}
