//! Prometheus durations (`7d`, `1w`, `1h30m`): the window in `.meshward.yaml` and the
//! retention a server reports. The grammar is Prometheus' own (model.ParseDuration):
//! integers with the units y, w, d, h, m, s, ms, largest first, each at most once.

use std::time::Duration;

const UNITS: &[(&str, u64)] = &[
    ("y", 365 * 24 * 3600 * 1000),
    ("w", 7 * 24 * 3600 * 1000),
    ("d", 24 * 3600 * 1000),
    ("h", 3600 * 1000),
    ("m", 60 * 1000),
    ("s", 1000),
    ("ms", 1),
];

/// Parses a Prometheus duration. `0` alone is zero; otherwise every part needs a unit.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() || t.len() > 32 {
        return Err(format!("{text:?} is not a duration like 7d, 12h or 1h30m"));
    }
    let bad = || format!("{text:?} is not a duration like 7d, 12h or 1h30m");
    let mut rest = t;
    let mut total: u64 = 0;
    // Index into UNITS of the last unit seen: units must come largest first.
    let mut last: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        // "ms" before "m": try the two-letter unit first.
        let (idx, len) = if rest.starts_with("ms") {
            (6, 2)
        } else {
            let c = rest.get(..1).ok_or_else(bad)?;
            let idx = UNITS.iter().position(|(u, _)| *u == c).ok_or_else(bad)?;
            (idx, 1)
        };
        if last.is_some_and(|l| idx <= l) {
            return Err(bad());
        }
        last = Some(idx);
        rest = &rest[len..];
        total = n
            .checked_mul(UNITS[idx].1)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    Ok(Duration::from_millis(total))
}

/// Formats a duration the way Prometheus does (`1w`, `15d`, `1h30m`): years and
/// weeks only when they divide it exactly.
pub fn format(d: Duration) -> String {
    let mut ms = d.as_millis() as u64;
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (i, (unit, mult)) in UNITS.iter().enumerate() {
        let exact_only = i < 2;
        if exact_only && ms % mult != 0 {
            continue;
        }
        let v = ms / mult;
        if v > 0 {
            out.push_str(&format!("{v}{unit}"));
            ms -= v * mult;
        }
    }
    out
}

/// The time part of Prometheus' `storageRetention` (`15d`, `30d or 10GiB`, `10GiB`).
/// None when the server keeps data by size only, or says nothing we can read: then
/// how far back it reaches cannot be known from it.
pub fn retention_time(reported: &str) -> Option<Duration> {
    reported
        .split(" or ")
        .filter_map(|part| parse(part).ok())
        .find(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prometheus_durations() {
        assert_eq!(parse("7d").unwrap(), Duration::from_secs(7 * 86400));
        assert_eq!(parse("1w").unwrap(), parse("7d").unwrap());
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1m500ms").unwrap(), Duration::from_millis(60_500));
        for bad in [
            "",
            "7",
            "d",
            "7 days",
            "30m1h",
            "1h1h",
            "-1d",
            "1.5h",
            "99999999999999999y",
        ] {
            assert!(parse(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn formats_like_prometheus() {
        assert_eq!(format(parse("7d").unwrap()), "1w");
        assert_eq!(format(parse("15d").unwrap()), "15d");
        assert_eq!(format(parse("90m").unwrap()), "1h30m");
    }

    #[test]
    fn retention_reports() {
        assert_eq!(retention_time("15d"), Some(Duration::from_secs(15 * 86400)));
        assert_eq!(
            retention_time("2w or 10GiB"),
            Some(Duration::from_secs(14 * 86400))
        );
        assert_eq!(retention_time("10GiB"), None);
        assert_eq!(retention_time(""), None);
    }
}
