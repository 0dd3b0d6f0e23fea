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
/// The least room left of the plot, for the y axis' labels (more for long ones).
const LEFT: f64 = 44.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 26.0;
/// No label comes closer to the edge of the drawing than this.
const EDGE: f64 = 2.0;
/// An upper bound on the width of a label's character at the 11px the CSS sets
/// (digits, `-` and `:` in any sans-serif are narrower). Only placement depends on it:
/// a label near an edge is anchored at the edge, so it fits whatever the font.
const CHAR_W: f64 = 7.0;

fn label_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR_W
}

/// Where an x axis label centred under `cx` goes, and its `text-anchor`: centred
/// where it fits, else flush with the edge it would cross (the first and last
/// labels of a chart sit half a band from the edges, less than half their width).
fn x_label_at(cx: f64, text: &str) -> (f64, &'static str) {
    let half = label_width(text) / 2.0;
    if cx - half < EDGE {
        (EDGE, "start")
    } else if cx + half > W - EDGE {
        (W - EDGE, "end")
    } else {
        (cx, "middle")
    }
}

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
    let plot_h = H - TOP - BOTTOM;
    let max = c
        .lines
        .iter()
        .flat_map(|l| l.values.iter().flatten())
        .copied()
        .max()
        .unwrap_or(0);
    let y_max = nice_max(max);
    // The y labels end 6 left of the plot: room for the widest (the top one).
    let left = LEFT.max(label_width(&y_max.to_string()) + 6.0 + EDGE);
    let plot_w = W - left - RIGHT;
    let band = plot_w / n as f64;
    let x = |i: usize| left + band * (i as f64 + 0.5);
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
                        rect.gap x=(fmt(left + band * i as f64)) y=(fmt(TOP)) width=(fmt(band)) height=(fmt(plot_h))
                            data-bucket=(c.x_labels.get(i).map(String::as_str).unwrap_or("")) {
                            title { (c.x_labels.get(i).map(String::as_str).unwrap_or("")) ": " (reason) }
                        }
                    }
                }
                @for tick in ticks(y_max) {
                    line.grid x1=(fmt(left)) x2=(fmt(W - RIGHT)) y1=(fmt(y(tick))) y2=(fmt(y(tick))) {}
                    text.ylabel x=(fmt(left - 6.0)) y=(fmt(y(tick) + 4.0)) text-anchor="end" { (tick) }
                }
                @for i in &label_at {
                    @let text = c.x_labels.get(*i).map(String::as_str).unwrap_or("");
                    @let (lx, anchor) = x_label_at(x(*i), text);
                    text.xlabel x=(fmt(lx)) y=(fmt(H - 8.0)) text-anchor=(anchor) { (text) }
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

    /// The x labels of a rendered chart: (x, anchor, text).
    fn x_labels(svg: &str) -> Vec<(f64, String, String)> {
        svg.split("<text class=\"xlabel\" ")
            .skip(1)
            .map(|t| {
                let attr = |name: &str| {
                    let from = t.find(&format!("{name}=\"")).expect("attribute") + name.len() + 2;
                    t[from..from + t[from..].find('"').expect("quote")].to_string()
                };
                let text =
                    t[t.find('>').expect(">") + 1..t.find("</text>").expect("end")].to_string();
                (attr("x").parse().expect("x"), attr("text-anchor"), text)
            })
            .collect()
    }

    /// Where a label at `x` with `anchor` spans, for a text `width` wide.
    fn span(x: f64, anchor: &str, width: f64) -> (f64, f64) {
        match anchor {
            "start" => (x, x + width),
            "end" => (x - width, x),
            _ => (x - width / 2.0, x + width / 2.0),
        }
    }

    #[test]
    fn axis_labels_stay_inside_the_drawing() {
        for (n, label) in [
            (7, "2026-11-01"),
            (31, "2026-11-01"),
            (2, "11-30 10:00"),
            (1, "2026-11-01"),
        ] {
            let labels = vec![label.to_string(); n];
            let none = vec![None; n];
            let svg = render(&Chart {
                id: "c",
                title: "t",
                x_labels: &labels,
                commits: &none,
                gaps: &none,
                lines: vec![Line {
                    label: "l",
                    color: "#000",
                    values: vec![Some(1_234_567); n],
                }],
            })
            .into_string();
            assert!(svg.contains(&format!("viewBox=\"0 0 {W} {H}\"")), "{svg}");
            let xs = x_labels(&svg);
            assert_eq!(xs.len(), n.min(3), "first, middle and last: {xs:?}");
            for (x, anchor, text) in &xs {
                // Wider than any font draws them: inside even so.
                let (from, to) = span(*x, anchor, label_width(text));
                assert!(
                    from >= 0.0 && to <= W,
                    "{n} buckets: {text:?} at {x} ({anchor}) spans {from}..{to}"
                );
            }
            // A month of days: the last label, centred under its point, would cross
            // the right edge (it was cut off there); it ends at the edge instead.
            if n == 31 {
                assert_eq!(xs[2], (W - EDGE, "end".into(), label.into()), "{xs:?}");
            }
            // The y axis' widest label (the top, 2,000,000) ends 6 left of the plot
            // and starts inside the drawing.
            let top = svg
                .split("<text class=\"ylabel\" ")
                .last()
                .expect("y labels");
            let x: f64 = top["x=\"".len()..]
                .split('"')
                .next()
                .expect("x")
                .parse()
                .expect("x");
            assert!(top.contains(">2000000<"), "{top}");
            assert!(x - label_width("2000000") >= 0.0, "y label at {x}");
        }
        // Centred where there is room, flush with the edge where there is not.
        assert_eq!(x_label_at(W / 2.0, "2026-11-01"), (W / 2.0, "middle"));
        assert_eq!(x_label_at(20.0, "2026-11-01"), (EDGE, "start"));
        assert_eq!(x_label_at(W - 20.0, "2026-11-01"), (W - EDGE, "end"));
    }

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
