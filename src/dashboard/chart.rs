//! Line charts as inline SVG: no script, no fonts or files to fetch, so the
//! dashboard works offline and under a strict Content-Security-Policy. Each point is
//! a `circle.point` with its value and commit in `data-*` attributes and a tooltip
//! (`<title>`); a bucket without data is a shaded `rect.gap` saying why.

use maud::{html, Markup};

pub struct Line<'a> {
    pub label: &'a str,
    pub color: &'a str,
    /// One value per bucket; None is a gap in the line.
    pub values: Vec<Option<i64>>,
}

pub struct Chart<'a> {
    pub id: &'a str,
    pub title: &'a str,
    /// One label per bucket (its start), shown for the first, middle and last.
    pub x_labels: &'a [String],
    /// Per bucket: the commit of the point (for tooltips and tests).
    pub commits: &'a [Option<String>],
    /// Per bucket: why it has no data (None when it has).
    pub gaps: &'a [Option<String>],
    pub lines: Vec<Line<'a>>,
}

const W: f64 = 720.0;
const H: f64 = 220.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 26.0;

/// The smallest of 1, 2, 5 × 10^k at or above `max` (at least 1).
fn nice_max(max: i64) -> i64 {
    let mut step = 1;
    loop {
        for m in [1, 2, 5] {
            if m * step >= max.max(1) {
                return m * step;
            }
        }
        step *= 10;
    }
}

/// 0, the middle when it is a whole number, and the top.
fn ticks(y_max: i64) -> Vec<i64> {
    if y_max % 2 == 0 {
        vec![0, y_max / 2, y_max]
    } else {
        vec![0, y_max]
    }
}

fn fmt(v: f64) -> String {
    format!("{v:.1}")
}

pub fn render(c: &Chart) -> Markup {
    let n = c.x_labels.len().max(1);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let band = plot_w / n as f64;
    let max = c
        .lines
        .iter()
        .flat_map(|l| l.values.iter().flatten())
        .copied()
        .max()
        .unwrap_or(0);
    let y_max = nice_max(max);
    let x = |i: usize| LEFT + band * (i as f64 + 0.5);
    let y = |v: i64| TOP + plot_h - plot_h * v as f64 / y_max as f64;
    let label_at: Vec<usize> = {
        let mut v = vec![0, n / 2, n - 1];
        v.dedup();
        v
    };
    html! {
        figure.chart id=(c.id) {
            figcaption { (c.title) }
            svg.chart role="img" aria-label=(c.title) viewBox={"0 0 " (W) " " (H)}
                preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg" {
                @for (i, gap) in c.gaps.iter().enumerate() {
                    @if let Some(reason) = gap {
                        rect.gap x=(fmt(LEFT + band * i as f64)) y=(fmt(TOP)) width=(fmt(band)) height=(fmt(plot_h))
                            data-bucket=(c.x_labels.get(i).map(String::as_str).unwrap_or("")) {
                            title { (c.x_labels.get(i).map(String::as_str).unwrap_or("")) ": " (reason) }
                        }
                    }
                }
                @for tick in ticks(y_max) {
                    line.grid x1=(fmt(LEFT)) x2=(fmt(W - RIGHT)) y1=(fmt(y(tick))) y2=(fmt(y(tick))) {}
                    text.ylabel x=(fmt(LEFT - 6.0)) y=(fmt(y(tick) + 4.0)) text-anchor="end" { (tick) }
                }
                @for i in &label_at {
                    text.xlabel x=(fmt(x(*i))) y=(fmt(H - 8.0)) text-anchor="middle" {
                        (c.x_labels.get(*i).map(String::as_str).unwrap_or(""))
                    }
                }
                @for line in &c.lines {
                    @let d = path(&line.values, &x, &y);
                    @if !d.is_empty() {
                        path.line d=(d) stroke=(line.color) fill="none" stroke-width="2" data-series=(line.label) {}
                    }
                    @for (i, v) in line.values.iter().enumerate() {
                        @if let Some(v) = v {
                            circle.point cx=(fmt(x(i))) cy=(fmt(y(*v))) r="3" fill=(line.color)
                                data-series=(line.label) data-value=(v)
                                data-bucket=(c.x_labels.get(i).map(String::as_str).unwrap_or(""))
                                data-commit=(c.commits.get(i).cloned().flatten().unwrap_or_default()) {
                                title {
                                    (c.x_labels.get(i).map(String::as_str).unwrap_or("")) ": " (v) " " (line.label)
                                    @if let Some(Some(sha)) = c.commits.get(i) { " (commit " (crate::trends::short_sha(sha)) ")" }
                                }
                            }
                        }
                    }
                }
            }
            ul.legend {
                @for line in &c.lines {
                    li { span.swatch style={"background:" (line.color)} {} (line.label) }
                }
            }
        }
    }
}

/// Segments of consecutive values: a gap lifts the pen.
fn path(values: &[Option<i64>], x: &dyn Fn(usize) -> f64, y: &dyn Fn(i64) -> f64) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    for (i, v) in values.iter().enumerate() {
        match v {
            Some(v) => {
                d.push_str(if pen_down { " L" } else { " M" });
                d.push_str(&format!("{} {}", fmt(x(i)), fmt(y(*v))));
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    d.trim_start().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_maxima_are_round_and_gaps_lift_the_pen() {
        assert_eq!(nice_max(0), 1);
        assert_eq!(nice_max(7), 10);
        assert_eq!(nice_max(12), 20);
        assert_eq!(nice_max(48), 50);
        let d = path(&[Some(1), Some(2), None, Some(3)], &|i| i as f64, &|v| {
            v as f64
        });
        assert_eq!(d, "M0.0 1.0 L1.0 2.0 M3.0 3.0");
    }
}
