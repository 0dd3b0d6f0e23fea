//! `meshward trends` output: a table with a sparkline per metric, CSV (one row per
//! bucket) or JSON (the API's body). Pure functions of a [`Series`].

use super::{short_sha, Series, METRICS};
use anyhow::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrendsFormat {
    Table,
    Json,
    Csv,
}

pub fn render(series: &Series, format: TrendsFormat) -> Result<String> {
    match format {
        TrendsFormat::Table => Ok(table(series)),
        TrendsFormat::Json => Ok(serde_json::to_string_pretty(series)? + "\n"),
        TrendsFormat::Csv => csv(series),
    }
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// One character per value, scaled between the series' minimum and maximum; a gap
/// is a space. A flat series is drawn at mid height.
pub fn sparkline(values: &[Option<i64>]) -> String {
    let present = values.iter().flatten();
    let (Some(min), Some(max)) = (present.clone().min(), present.max()) else {
        return " ".repeat(values.len());
    };
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(_) if max == min => BARS[3],
            Some(v) => {
                let level = ((v - min) as f64 / (max - min) as f64 * 7.0).round() as usize;
                BARS[level.min(7)]
            }
        })
        .collect()
}

fn signed(n: i64) -> String {
    if n > 0 {
        format!("+{n}")
    } else {
        n.to_string()
    }
}

/// The terminal table: what the series covers, then per metric its first and last
/// value, the change and a sparkline (one character per bucket).
pub fn table(series: &Series) -> String {
    let mut out = String::new();
    let mut scope = match &series.namespace {
        Some(ns) => format!("namespace {ns}"),
        None => "all namespaces".to_string(),
    };
    match &series.cluster {
        Some(c) => scope = format!("cluster {c}, {scope}"),
        None if !series.clusters.is_empty() => scope = format!("all clusters, {scope}"),
        None => {}
    }
    let with = series.points.len() - series.gaps();
    out.push_str(&format!(
        "{}, {scope}: per {} from {} to {} (UTC)\n",
        series.repo,
        series.interval.as_str(),
        series.from,
        series.to
    ));
    if !series.clusters.is_empty() {
        out.push_str(&format!(
            "clusters: {} (--cluster NAME for one)\n",
            series.clusters.join(", ")
        ));
    }
    out.push_str(&format!(
        "{} buckets: {with} with coverage, {} without (blank in the trend)\n",
        series.points.len(),
        series.gaps()
    ));
    match series.latest() {
        Some(p) => {
            if let Some(run) = &p.run {
                out.push_str(&format!(
                    "latest: commit {} (run {}, finished {})\n",
                    short_sha(&run.commit),
                    run.id,
                    run.finished_at
                ));
            }
        }
        None => {
            out.push_str("no baseline with coverage in this range: nothing to show\n");
            for p in series.points.iter().filter(|p| p.run.is_some()) {
                if let Some(gap) = &p.gap {
                    out.push_str(&format!("  {}: {gap}\n", p.start));
                }
            }
            return out;
        }
    }
    out.push('\n');
    let label_w = METRICS.iter().map(|m| m.label.len()).max().unwrap_or(10);
    out.push_str(&format!(
        "{:<label_w$}  {:>7}  {:>7}  {:>7}  trend\n",
        "metric", "first", "last", "change"
    ));
    for m in METRICS {
        let values: Vec<Option<i64>> = series
            .points
            .iter()
            .map(|p| p.metrics.as_ref().and_then(m.get))
            .collect();
        let first = values.iter().flatten().next().copied();
        let last = values.iter().flatten().last().copied();
        let (Some(first), Some(last)) = (first, last) else {
            continue; // not recorded at this scope (namespaces injected and ambient, per namespace)
        };
        out.push_str(&format!(
            "{:<label_w$}  {first:>7}  {last:>7}  {:>7}  {}\n",
            m.label,
            signed(last - first),
            sparkline(&values).trim_end()
        ));
    }
    let errors: Vec<_> = series
        .points
        .iter()
        .filter(|p| p.run.is_some() && p.metrics.is_none())
        .collect();
    if !errors.is_empty() {
        out.push_str("\nbuckets with a run but no numbers:\n");
        for p in errors {
            if let Some(gap) = &p.gap {
                out.push_str(&format!("  {}: {gap}\n", p.start));
            }
        }
    }
    out
}

/// One row per bucket: its bounds, the run, the gap reason, every metric (empty in
/// a gap), and the namespace's mTLS mode for a namespace series.
pub fn csv(series: &Series) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "bucket_start",
        "bucket_end",
        "baselines",
        "run_id",
        "commit",
        "finished_at",
        "outcome",
        "gap",
        "mtls_mode",
    ];
    header.extend(METRICS.iter().map(|m| m.key));
    w.write_record(&header)?;
    for p in &series.points {
        let mut row = vec![
            p.start.clone(),
            p.end.clone(),
            p.baselines.to_string(),
            p.run.as_ref().map(|r| r.id.to_string()).unwrap_or_default(),
            p.run.as_ref().map(|r| r.commit.clone()).unwrap_or_default(),
            p.run
                .as_ref()
                .map(|r| r.finished_at.clone())
                .unwrap_or_default(),
            p.run
                .as_ref()
                .map(|r| r.outcome.as_str().to_string())
                .unwrap_or_default(),
            p.gap.clone().unwrap_or_default(),
            p.metrics
                .as_ref()
                .and_then(|m| m.coverage.mtls_mode.clone())
                .unwrap_or_default(),
        ];
        for m in METRICS {
            row.push(
                p.metrics
                    .as_ref()
                    .and_then(m.get)
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
            );
        }
        w.write_record(&row)?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_between_min_and_max_and_leave_gaps_blank() {
        assert_eq!(sparkline(&[Some(0), Some(7), None, Some(14)]), "▁▅ █");
        assert_eq!(sparkline(&[Some(5), Some(5)]), "▄▄");
        assert_eq!(sparkline(&[None, None]), "  ");
    }
}
