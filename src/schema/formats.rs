//! The string formats the API server checks in a CRD schema (kube-openapi's registry);
//! formats it does not know it ignores, and so do we.

use base64::Engine;

/// Why `text` is not of format `format`, or None when it is (or the format is not
/// one the API server checks).
pub(crate) fn check(format: &str, text: &str) -> Option<&'static str> {
    let ok = match format {
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(text),
        "mac" => is_mac(text),
        "uuid" | "uuid3" | "uuid4" | "uuid5" => is_uuid(text),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        "hostname" => is_hostname(text),
        "email" => text
            .split_once('@')
            .is_some_and(|(a, b)| !a.is_empty() && b.contains('.')),
        _ => return None,
    };
    (!ok).then_some(match format {
        "ipv4" | "ipv6" => "not an IP address",
        "cidr" => "not an IP range in CIDR form (10.0.0.0/8)",
        "byte" => "not base64",
        "date" => "not a date (2026-12-31)",
        "date-time" | "datetime" => "not an RFC 3339 time (2026-12-31T23:59:59Z)",
        "hostname" => "not a DNS host name",
        _ => "wrong form",
    })
}

fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_mac(text: &str) -> bool {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    matches!(parts.len(), 6 | 8 | 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// RFC 1123 host name: dot-separated labels of letters, digits and `-`, each at most
/// 63 characters, not starting or ending with `-`; 253 characters in all.
fn is_hostname(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn formats_the_api_server_checks() {
        assert_eq!(check("ipv4", "10.0.0.1"), None);
        assert!(check("ipv4", "10.0.0.300").is_some());
        assert_eq!(check("cidr", "10.0.0.0/8"), None);
        assert!(check("cidr", "10.0.0.0/33").is_some());
        assert_eq!(check("date-time", "2026-12-04T10:00:00Z"), None);
        assert!(check("date-time", "yesterday").is_some());
        assert!(check("hostname", "-bad.example").is_some());
        assert_eq!(check("some-format-nobody-checks", "anything"), None);
    }
}
