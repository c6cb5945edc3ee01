//! The latency-over-time plot: a hand-written SVG with p50 (dashed) and p99 (solid)
//! polylines per tenant class over the seconds of the run, a logarithmic milliseconds axis
//! with labelled ticks, and a legend.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::report::{OTHERS, Report, SeriesPoint, WHALES};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

fn colour(class: &str) -> &'static str {
    match class {
        WHALES => "#d62728",
        OTHERS => "#1f77b4",
        _ => "#2ca02c",
    }
}

/// Escapes text for SVG content and attribute values.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The y-axis range in decades: 10^lo .. 10^hi milliseconds, at least one decade.
fn decades(values: impl Iterator<Item = f64>) -> (i32, i32) {
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
        min = min.min(v);
        max = max.max(v);
    }
    if !min.is_finite() {
        return (0, 1);
    }
    let lo = min.log10().floor() as i32;
    let hi = (max.log10().ceil() as i32).max(lo + 1);
    (lo, hi)
}

fn tick_label(exp: i32) -> String {
    let v = 10f64.powi(exp);
    if exp >= 0 {
        format!("{v:.0} ms")
    } else {
        format!("{v} ms")
    }
}

/// The SVG for `report`'s per-second series.
pub fn svg(report: &Report) -> String {
    svg_of(
        &report.series,
        &format!("loadgen: latency per second ({})", load_label(report)),
    )
}

fn load_label(report: &Report) -> String {
    match report.config.load {
        super::Load::Open { rate, .. } => format!("open loop, {rate} req/s"),
        super::Load::Closed { concurrency } => format!("closed loop, {concurrency} workers"),
    }
}

/// The SVG for a series (p50 and p99 per second and class).
pub fn svg_of(series: &[SeriesPoint], title: &str) -> String {
    let mut by_class: BTreeMap<&str, Vec<&SeriesPoint>> = BTreeMap::new();
    for p in series {
        by_class.entry(p.class.as_str()).or_default().push(p);
    }
    let seconds = series
        .iter()
        .map(|p| p.second + 1)
        .max()
        .unwrap_or(1)
        .max(1);
    let (lo, hi) = decades(series.iter().flat_map(|p| [p.p50_ms, p.p99_ms]).flatten());
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |second: f64| LEFT + second / seconds as f64 * plot_w;
    let y = |ms: f64| {
        let v = ms.max(10f64.powi(lo)).log10();
        TOP + plot_h - (v - f64::from(lo)) / f64::from(hi - lo) * plot_h
    };

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(title)
    );
    // Y axis: a grid line and label per decade, faint lines at 2 and 5.
    for exp in lo..=hi {
        let yy = y(10f64.powi(exp));
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ccc"/>"##,
            LEFT + plot_w
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            yy + 4.0,
            tick_label(exp)
        );
        if exp < hi {
            for m in [2.0, 5.0] {
                let yy = y(m * 10f64.powi(exp));
                let _ = writeln!(
                    out,
                    r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#eee"/>"##,
                    LEFT + plot_w
                );
            }
        }
    }
    // X axis: about ten labelled ticks.
    let step = (seconds as f64 / 10.0).ceil().max(1.0) as u64;
    for s in (0..=seconds).step_by(step as usize) {
        let xx = x(s as f64);
        let _ = writeln!(
            out,
            r##"<line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#999"/>"##,
            TOP + plot_h,
            TOP + plot_h + 5.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{xx:.1}" y="{:.1}" text-anchor="middle">{s}</text>"#,
            TOP + plot_h + 18.0
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since start (intended send time)</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">latency (ms, log scale)</text>"#,
        TOP + plot_h / 2.0
    );
    // One polyline per class and percentile, points at the middle of each second.
    let mut legend = Vec::new();
    for (class, points) in &by_class {
        for (label, dash, value) in [
            (
                "p99",
                "",
                (|p: &SeriesPoint| p.p99_ms) as fn(&SeriesPoint) -> Option<f64>,
            ),
            ("p50", r#" stroke-dasharray="5,4""#, |p: &SeriesPoint| {
                p.p50_ms
            }),
        ] {
            let coords: Vec<String> = points
                .iter()
                .filter_map(|p| {
                    value(p).map(|v| format!("{:.1},{:.1}", x(p.second as f64 + 0.5), y(v)))
                })
                .collect();
            if coords.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{dash} points="{}"/>"#,
                colour(class),
                coords.join(" ")
            );
            legend.push((format!("{class} {label}"), colour(class), dash));
        }
    }
    let lx = LEFT + plot_w + 15.0;
    for (i, (text, colour, dash)) in legend.iter().enumerate() {
        let ly = TOP + 10.0 + i as f64 * 20.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2"{dash}/>"#,
            lx + 28.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 34.0,
            ly + 4.0,
            escape(text)
        );
    }
    if legend.is_empty() {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">no requests were measured</text>"#,
            LEFT + plot_w / 2.0,
            TOP + plot_h / 2.0
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(second: u64, class: &str, p50: f64, p99: f64) -> SeriesPoint {
        SeriesPoint {
            second,
            class: class.to_owned(),
            count: 10,
            p50_ms: Some(p50),
            p99_ms: Some(p99),
        }
    }

    #[test]
    fn the_plot_has_a_polyline_per_class_and_percentile_a_legend_and_decade_ticks() {
        let series = [
            point(0, "whales", 2.0, 40.0),
            point(1, "whales", 3.0, 60.0),
            point(0, "others", 1.0, 5.0),
            point(1, "others", 1.5, 8.0),
        ];
        let svg = svg_of(&series, "a <title>");
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 4);
        for text in ["whales p99", "whales p50", "others p99", "others p50"] {
            assert!(svg.contains(text), "{text}");
        }
        for tick in [">1 ms<", ">10 ms<", ">100 ms<"] {
            assert!(svg.contains(tick), "{tick}");
        }
        assert!(svg.contains("a &lt;title&gt;"));
    }

    #[test]
    fn an_empty_series_still_makes_a_valid_plot() {
        let svg = svg_of(&[], "empty");
        assert!(svg.contains("no requests were measured"));
        assert_eq!(svg.matches("<polyline").count(), 0);
    }

    #[test]
    fn sub_millisecond_latencies_get_fractional_ticks() {
        let (lo, hi) = decades([0.3, 4.0].into_iter());
        assert_eq!((lo, hi), (-1, 1));
        assert_eq!(tick_label(-1), "0.1 ms");
    }
}
