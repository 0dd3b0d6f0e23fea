//! The PromQL meshward runs, built as text a reviewer can paste into Prometheus.
//! Zero plaintext into a scope over a window W, from Istio's standard metrics:
//! `sum(increase(istio_requests_total{reporter="destination",<scope>,connection_security_policy!="mutual_tls"}[W]))`
//! and the same for `istio_tcp_connections_opened_total`; the totals drop the last
//! matcher. Ambient workloads have no sidecar: their ztunnel reports TCP metrics only,
//! with `connection_security_policy="unknown"` for plaintext, so the TCP queries cover
//! them, and plaintext bytes received (`istio_tcp_received_bytes_total`) catch
//! long-lived plaintext connections opened before the window. Everything
//! user-supplied is escaped.

use super::scopes::Subject;
use std::collections::BTreeMap;

pub const HTTP_METRIC: &str = "istio_requests_total";
pub const TCP_METRIC: &str = "istio_tcp_connections_opened_total";
pub const TCP_BYTES_METRIC: &str = "istio_tcp_received_bytes_total";

/// The numbers of one subject, by the names the evidence uses.
pub const NUMBERS: [&str; 5] = [
    "requests_plaintext",
    "requests_total",
    "tcp_connections_plaintext",
    "tcp_connections_total",
    "tcp_bytes_plaintext",
];

/// A PromQL double-quoted string.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A regular expression (RE2) matching exactly `value`.
fn regex_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The label matchers that pick a subject's server-side traffic.
fn subject_matchers(subject: &Subject) -> Vec<String> {
    let mut m = vec![format!("reporter={}", quote("destination"))];
    match subject {
        Subject::Mesh { exclude } if exclude.is_empty() => {}
        Subject::Mesh { exclude } => {
            let alternatives: Vec<String> = exclude.iter().map(|v| regex_literal(v)).collect();
            m.push(format!(
                "destination_workload_namespace!~{}",
                quote(&alternatives.join("|"))
            ));
        }
        Subject::Namespaces(nss) => m.push(one_or_many("destination_workload_namespace", nss)),
        Subject::Workloads { namespace, names } => {
            m.push(format!(
                "destination_workload_namespace={}",
                quote(namespace)
            ));
            m.push(one_or_many("destination_workload", names));
        }
    }
    m
}

fn one_or_many(label: &str, values: &[String]) -> String {
    match values {
        [one] => format!("{label}={}", quote(one)),
        many => {
            let alternatives: Vec<String> = many.iter().map(|v| regex_literal(v)).collect();
            format!("{label}=~{}", quote(&alternatives.join("|")))
        }
    }
}

/// The queries for one subject: number name → PromQL.
pub fn queries(
    subject: &Subject,
    extra: &BTreeMap<String, String>,
    window: &str,
) -> BTreeMap<String, String> {
    let base = subject_matchers(subject);
    let extra: Vec<String> = extra
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    let build = |metric: &str, plaintext: bool| {
        let mut m = base.clone();
        if plaintext {
            m.push(format!(
                "connection_security_policy!={}",
                quote("mutual_tls")
            ));
        }
        m.extend(extra.iter().cloned());
        format!("sum(increase({metric}{{{}}}[{window}]))", m.join(","))
    };
    BTreeMap::from([
        (NUMBERS[0].to_string(), build(HTTP_METRIC, true)),
        (NUMBERS[1].to_string(), build(HTTP_METRIC, false)),
        (NUMBERS[2].to_string(), build(TCP_METRIC, true)),
        (NUMBERS[3].to_string(), build(TCP_METRIC, false)),
        (NUMBERS[4].to_string(), build(TCP_BYTES_METRIC, true)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_queries_are_the_documented_ones() {
        let q = queries(
            &Subject::Namespaces(vec!["shop".into()]),
            &BTreeMap::from([("cluster".to_string(), "prod-eu1".to_string())]),
            "7d",
        );
        assert_eq!(
            q["requests_plaintext"],
            r#"sum(increase(istio_requests_total{reporter="destination",destination_workload_namespace="shop",connection_security_policy!="mutual_tls",cluster="prod-eu1"}[7d]))"#
        );
        assert_eq!(
            q["tcp_connections_total"],
            r#"sum(increase(istio_tcp_connections_opened_total{reporter="destination",destination_workload_namespace="shop",cluster="prod-eu1"}[7d]))"#
        );
    }

    #[test]
    fn workload_queries_escape_hostile_names() {
        let q = queries(
            &Subject::Workloads {
                namespace: "shop".into(),
                names: vec!["cart".into(), "a.b\"}or vector(0)".into()],
            },
            &BTreeMap::new(),
            "1h",
        );
        assert_eq!(
            q["requests_total"],
            r#"sum(increase(istio_requests_total{reporter="destination",destination_workload_namespace="shop",destination_workload=~"cart|a\\.b\"\\}or vector\\(0\\)"}[1h]))"#
        );
    }

    #[test]
    fn mesh_queries_cover_every_namespace_but_the_excluded() {
        let q = queries(
            &Subject::Mesh {
                exclude: vec!["kube-system".into(), "legacy".into()],
            },
            &BTreeMap::new(),
            "7d",
        );
        assert_eq!(
            q["requests_plaintext"],
            r#"sum(increase(istio_requests_total{reporter="destination",destination_workload_namespace!~"kube-system|legacy",connection_security_policy!="mutual_tls"}[7d]))"#
        );
    }

    #[test]
    fn label_names() {
        assert!(crate::config::valid_label_name("cluster"));
        assert!(crate::config::valid_label_name("_x1"));
        assert!(!crate::config::valid_label_name("1x"));
        assert!(!crate::config::valid_label_name("a-b"));
        assert!(!crate::config::valid_label_name(""));
    }
}
