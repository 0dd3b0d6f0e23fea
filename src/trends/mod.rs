//! Coverage trends: time ranges and buckets, the series a repository's baseline runs
//! make (gaps explicit), and the metrics they carry. Pure: the store reads the rows,
//! [`render`] turns a series into a table, CSV or JSON, the server into JSON and HTML.

pub mod render;
mod series;
pub mod views;

pub use series::*;

use crate::store::Metrics;
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;
const WEEK_MS: i64 = 7 * DAY_MS;

/// At most this many buckets in one series (about 208 days hourly, 13 years daily).
pub const MAX_BUCKETS: i64 = 5_000;

/// The width of a bucket. Buckets are aligned in UTC: hours, days from midnight,
/// weeks from Monday midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Interval {
    Hour,
    Day,
    Week,
}

impl Interval {
    pub fn as_str(self) -> &'static str {
        match self {
            Interval::Hour => "hour",
            Interval::Day => "day",
            Interval::Week => "week",
        }
    }
    pub fn parse(s: &str) -> Result<Interval, TrendsError> {
        match s {
            "hour" => Ok(Interval::Hour),
            "day" => Ok(Interval::Day),
            "week" => Ok(Interval::Week),
            _ => Err(TrendsError::parameter(
                "interval",
                format!(
                    "`{}` is not an interval: use hour, day or week",
                    clip(s, 40)
                ),
            )),
        }
    }
    pub fn size_ms(self) -> i64 {
        match self {
            Interval::Hour => HOUR_MS,
            Interval::Day => DAY_MS,
            Interval::Week => WEEK_MS,
        }
    }
    /// Where buckets start: the epoch was a Thursday, weeks start on Monday.
    pub fn offset_ms(self) -> i64 {
        match self {
            Interval::Week => 4 * DAY_MS,
            _ => 0,
        }
    }
    /// The bucket (index) a time falls in.
    pub fn bucket_of(self, ms: i64) -> i64 {
        (ms - self.offset_ms()).div_euclid(self.size_ms())
    }
    pub fn bucket_start(self, bucket: i64) -> i64 {
        bucket * self.size_ms() + self.offset_ms()
    }
}

/// Bad input from a caller (a query parameter or a flag); the API answers 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrendsError {
    #[error("{name}: {message}")]
    Parameter { name: &'static str, message: String },
}

impl TrendsError {
    pub fn parameter(name: &'static str, message: impl Into<String>) -> TrendsError {
        TrendsError::Parameter {
            name,
            message: message.into(),
        }
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max).collect::<String>() + "…"
    }
}

/// A time as RFC 3339 in UTC (`2026-11-01T00:00:00Z`; milliseconds only when set).
pub fn format_time(ms: i64) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        None => ms.to_string(),
    }
}

/// Parses a time: RFC 3339, a date (midnight UTC), `now`, or an age before `now`
/// such as `30d`, `12h`, `2w`.
pub fn parse_time(name: &'static str, s: &str, now_ms: i64) -> Result<i64, TrendsError> {
    let s = s.trim();
    let bad = || {
        TrendsError::parameter(
            name,
            format!(
                "`{}` is not a time: use RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01), \
                 `now`, or an age such as 30d, 12h or 2w",
                clip(s, 60)
            ),
        )
    };
    if s == "now" {
        return Ok(now_ms);
    }
    if let Some(unit) = s.chars().last().filter(|c| matches!(c, 'h' | 'd' | 'w')) {
        let digits = s[..s.len() - 1].trim_start_matches('-');
        if !digits.is_empty() && digits.len() <= 6 && digits.bytes().all(|b| b.is_ascii_digit()) {
            let n: i64 = digits.parse().map_err(|_| bad())?;
            let unit_ms = match unit {
                'h' => HOUR_MS,
                'd' => DAY_MS,
                _ => WEEK_MS,
            };
            return Ok(now_ms - n * unit_ms);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return d
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc().timestamp_millis())
            .ok_or_else(bad);
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|_| bad())
}

/// A series' buckets: `[start_ms, end_ms)`, aligned to the interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub interval: Interval,
    pub start_ms: i64,
    pub end_ms: i64,
}

impl Range {
    /// The buckets covering `[from, to)`: `to` defaults to now, `from` to 30 days
    /// before `to`.
    pub fn new(
        from: Option<&str>,
        to: Option<&str>,
        interval: Interval,
        now_ms: i64,
    ) -> Result<Range, TrendsError> {
        let to_ms = match to {
            Some(s) if !s.trim().is_empty() => parse_time("to", s, now_ms)?,
            _ => now_ms,
        };
        let from_ms = match from {
            Some(s) if !s.trim().is_empty() => parse_time("from", s, now_ms)?,
            _ => to_ms - 30 * DAY_MS,
        };
        if from_ms >= to_ms {
            return Err(TrendsError::parameter(
                "from",
                format!(
                    "{} is not before to ({})",
                    format_time(from_ms),
                    format_time(to_ms)
                ),
            ));
        }
        let first = interval.bucket_of(from_ms);
        // `to` is exclusive: a bucket starting exactly at `to` is not included.
        let last = interval.bucket_of(to_ms - 1);
        let buckets = last - first + 1;
        if buckets > MAX_BUCKETS {
            return Err(TrendsError::parameter(
                "from",
                format!(
                    "{} to {} is {buckets} {}s; at most {MAX_BUCKETS} fit in one series: \
                     narrow the range or use a wider interval",
                    format_time(from_ms),
                    format_time(to_ms),
                    interval.as_str()
                ),
            ));
        }
        Ok(Range {
            interval,
            start_ms: interval.bucket_start(first),
            end_ms: interval.bucket_start(last + 1),
        })
    }

    pub fn first_bucket(&self) -> i64 {
        self.interval.bucket_of(self.start_ms)
    }

    pub fn buckets(&self) -> i64 {
        (self.end_ms - self.start_ms) / self.interval.size_ms()
    }
}

/// A metric of a series, as tables, CSV, charts and gauges name it.
pub struct MetricDef {
    pub key: &'static str,
    pub label: &'static str,
    pub get: fn(&Metrics) -> Option<i64>,
}

/// Every metric, in display order.
pub const METRICS: &[MetricDef] = &[
    MetricDef {
        key: "workloads",
        label: "workloads",
        get: |m| Some(m.coverage.workloads),
    },
    MetricDef {
        key: "workloads_with_proxy",
        label: "workloads with a proxy",
        get: |m| Some(m.coverage.workloads_with_proxy),
    },
    MetricDef {
        key: "workloads_ambient",
        label: "workloads ambient",
        get: |m| Some(m.coverage.workloads_ambient),
    },
    MetricDef {
        key: "workloads_waypoint",
        label: "workloads behind a waypoint",
        get: |m| Some(m.coverage.workloads_waypoint),
    },
    MetricDef {
        key: "namespaces",
        label: "namespaces",
        get: |m| Some(m.coverage.namespaces),
    },
    MetricDef {
        key: "namespaces_strict",
        label: "namespaces STRICT",
        get: |m| Some(m.coverage.namespaces_strict),
    },
    MetricDef {
        key: "namespaces_permissive",
        label: "namespaces PERMISSIVE",
        get: |m| Some(m.coverage.namespaces_permissive),
    },
    MetricDef {
        key: "namespaces_disable",
        label: "namespaces DISABLE",
        get: |m| Some(m.coverage.namespaces_disable),
    },
    MetricDef {
        key: "namespaces_injected",
        label: "namespaces injected",
        get: |m| m.coverage.namespaces_injected,
    },
    MetricDef {
        key: "namespaces_ambient",
        label: "namespaces ambient",
        get: |m| m.coverage.namespaces_ambient,
    },
    MetricDef {
        key: "selectors_effective",
        label: "selectors effective",
        get: |m| Some(m.coverage.selectors_effective),
    },
    MetricDef {
        key: "selectors_ineffective",
        label: "selectors selecting nothing",
        get: |m| Some(m.coverage.selectors_ineffective),
    },
    MetricDef {
        key: "workload_entries_selected",
        label: "WorkloadEntries selected",
        get: |m| Some(m.coverage.workload_entries_selected),
    },
    MetricDef {
        key: "workload_entries_total",
        label: "WorkloadEntries",
        get: |m| Some(m.coverage.workload_entries_total),
    },
    MetricDef {
        key: "authz_as_written",
        label: "authz: as written",
        get: |m| Some(m.coverage.authz_as_written),
    },
    MetricDef {
        key: "authz_reduced_to_l4",
        label: "authz: reduced to L4",
        get: |m| Some(m.coverage.authz_reduced_to_l4),
    },
    MetricDef {
        key: "authz_not_enforced",
        label: "authz: not enforced",
        get: |m| Some(m.coverage.authz_not_enforced),
    },
    MetricDef {
        key: "routes_resolving",
        label: "routes reaching pods",
        get: |m| Some(m.coverage.routes_resolving),
    },
    MetricDef {
        key: "routes_nowhere",
        label: "routes going nowhere",
        get: |m| Some(m.coverage.routes_nowhere),
    },
    MetricDef {
        key: "routes_unchecked",
        label: "routes not checked",
        get: |m| Some(m.coverage.routes_unchecked),
    },
    MetricDef {
        key: "findings_error",
        label: "findings: error",
        get: |m| Some(m.findings.error),
    },
    MetricDef {
        key: "findings_warning",
        label: "findings: warning",
        get: |m| Some(m.findings.warning),
    },
    MetricDef {
        key: "findings_info",
        label: "findings: info",
        get: |m| Some(m.findings.info),
    },
    MetricDef {
        key: "findings_introduced",
        label: "findings: introduced",
        get: |m| Some(m.findings.introduced),
    },
    MetricDef {
        key: "findings_existing",
        label: "findings: existing",
        get: |m| Some(m.findings.existing),
    },
    MetricDef {
        key: "findings_resolved",
        label: "findings: resolved",
        get: |m| Some(m.findings.resolved),
    },
];

pub fn metric(key: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.key == key)
}

/// `part` of `whole` in percent, None when `whole` is 0.
pub fn percent(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| 100.0 * part as f64 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_040_000_000; // 2026-11-30T12:00:00Z

    #[test]
    fn times_parse_in_every_accepted_form_and_errors_name_the_parameter() {
        assert_eq!(parse_time("from", "now", NOW), Ok(NOW));
        assert_eq!(parse_time("from", "2d", NOW), Ok(NOW - 2 * DAY_MS));
        assert_eq!(parse_time("from", "-12h", NOW), Ok(NOW - 12 * HOUR_MS));
        assert_eq!(parse_time("from", "1w", NOW), Ok(NOW - WEEK_MS));
        assert_eq!(
            parse_time("from", "2026-11-30", NOW),
            Ok(NOW - 12 * HOUR_MS)
        );
        assert_eq!(parse_time("to", "2026-11-30T13:00:00+01:00", NOW), Ok(NOW));
        let err = parse_time("to", "yesterday", NOW).unwrap_err().to_string();
        assert!(err.starts_with("to: `yesterday` is not a time"), "{err}");
        assert!(parse_time("to", "99999999d", NOW).is_err());
    }

    #[test]
    fn ranges_align_to_utc_buckets_and_weeks_start_on_monday() {
        let r = Range::new(
            Some("2026-11-30T10:30:00Z"),
            Some("2026-11-30T12:00:00Z"),
            Interval::Hour,
            NOW,
        )
        .unwrap();
        assert_eq!(format_time(r.start_ms), "2026-11-30T10:00:00Z");
        assert_eq!(format_time(r.end_ms), "2026-11-30T12:00:00Z");
        assert_eq!(r.buckets(), 2);
        // 2026-11-30 is a Monday; the Wednesday after is in the same week.
        let w = Range::new(Some("2026-12-02"), Some("2026-12-03"), Interval::Week, NOW).unwrap();
        assert_eq!(format_time(w.start_ms), "2026-11-30T00:00:00Z");
        assert_eq!(format_time(w.end_ms), "2026-12-07T00:00:00Z");
        let d = Range::new(None, None, Interval::Day, NOW).unwrap();
        assert_eq!(d.buckets(), 31, "30 days back from noon touch 31 days");
    }

    #[test]
    fn bad_ranges_are_refused_with_the_reason() {
        let e = Range::new(Some("2026-12-01"), Some("2026-11-01"), Interval::Day, NOW)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not before to"), "{e}");
        let e = Range::new(Some("5000d"), None, Interval::Hour, NOW)
            .unwrap_err()
            .to_string();
        assert!(e.contains("120000 hours; at most 5000"), "{e}");
        assert!(Interval::parse("month").is_err());
    }
}
