//! The latency-over-time plot: a hand-written SVG with p50 (dashed) and p99 (solid)
//! polylines per tenant class over the seconds of the run, a logarithmic milliseconds axis
//! with labelled ticks, and a legend. With a fault timeline (`--timeline`), each fault
//! window is a shaded band and errors per second are bars along the bottom.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::faults::FaultReport;
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
        report.faults.as_ref(),
    )
}

fn load_label(report: &Report) -> String {
    match report.config.load {
        crate::config::Load::Open { rate, .. } => format!("open loop, {rate} req/s"),
        crate::config::Load::Closed { concurrency } => {
            format!("closed loop, {concurrency} workers")
        }
    }
}

/// A fault's band colour: one per kind, moves the faintest (there are many).
fn fault_colour(fault: &str) -> &'static str {
    match fault {
        "move" => "#5b5bb0",
        "kill-web" | "kill-worker" | "kill-move" => "#fde0c5",
        "pause-shard" => "#d9ecd0",
        "restart-shard" | "stop-replica" | "restart-control" => "#f4d3dc",
        _ => "#e3d7ef",
    }
}

/// The SVG for a series (p50 and p99 per second and class), with `faults` marked.
pub fn svg_of(series: &[SeriesPoint], title: &str, faults: Option<&FaultReport>) -> String {
    let mut by_class: BTreeMap<&str, Vec<&SeriesPoint>> = BTreeMap::new();
    for p in series {
        by_class.entry(p.class.as_str()).or_default().push(p);
    }
    let seconds = series
        .iter()
        .map(|p| p.second + 1)
        .chain(faults.map(|f| f.errors_per_second.len() as u64))
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
    // Fault windows behind everything else, labelled at the top; moves (there are many, and
    // they overlap) as a thin strip along the top edge instead.
    let mut legend = Vec::new();
    if let Some(f) = faults {
        for w in &f.windows {
            let x0 = x(w.start_s.max(0.0));
            let x1 = x(w.end_s.min(seconds as f64)).max(x0 + 1.0);
            let title = escape(&format!(
                "#{} {} {} {}",
                w.seq.unwrap_or(0),
                w.fault,
                w.target,
                w.detail
            ));
            if w.fault == "move" {
                let _ = writeln!(
                    out,
                    r#"<rect x="{x0:.1}" y="{TOP}" width="{:.1}" height="5" fill="{}" fill-opacity="0.6"><title>{title}</title></rect>"#,
                    x1 - x0,
                    fault_colour(&w.fault),
                );
                continue;
            }
            let _ = writeln!(
                out,
                r#"<rect x="{x0:.1}" y="{TOP}" width="{:.1}" height="{plot_h}" fill="{}" fill-opacity="0.7"><title>{title}</title></rect>"#,
                x1 - x0,
                fault_colour(&w.fault),
            );
            let _ = writeln!(
                out,
                r##"<text transform="translate({:.1},{:.1}) rotate(90)" font-size="9" fill="#555">{}</text>"##,
                x0 + 2.0,
                TOP + 8.0,
                escape(&format!("{} {}", w.fault, w.target))
            );
        }
        // Errors per second: bars up to a quarter of the plot's height.
        let most = f.errors_per_second.iter().copied().max().unwrap_or(0);
        if most > 0 {
            let bar_w = (plot_w / seconds as f64).max(1.0);
            for (second, &n) in f
                .errors_per_second
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
            {
                let h = n as f64 / most as f64 * plot_h / 4.0;
                let _ = writeln!(
                    out,
                    r##"<rect x="{:.1}" y="{:.1}" width="{bar_w:.1}" height="{h:.1}" fill="#b00"><title>{n} errors in second {second}</title></rect>"##,
                    x(second as f64),
                    TOP + plot_h - h
                );
            }
            legend.push((format!("errors/s (max {most})"), "#b00", ""));
        }
        legend.push(("fault window".to_owned(), "#f4d3dc", ""));
        legend.push(("move (top strip)".to_owned(), "#5b5bb0", ""));
    }
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
    if series.is_empty() {
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
        let svg = svg_of(&series, "a <title>", None);
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
    fn fault_windows_are_bands_with_labels_and_errors_are_bars() {
        let window = |seq, fault: &str, start_s, end_s| crate::faults::WindowRow {
            seq: Some(seq),
            fault: fault.to_owned(),
            target: "web1".to_owned(),
            detail: "down 3s".to_owned(),
            start_s,
            end_s,
            requests: 10,
            ok: 8,
            errors: Default::default(),
            p50_ms: None,
            p99_ms: None,
            max_ms: None,
        };
        let faults = FaultReport {
            healed: true,
            windows: vec![window(1, "kill-web", 1.0, 2.0), window(2, "move", 0.5, 3.0)],
            outside: window(0, "outside every fault", 0.0, 4.0),
            errors_per_second: vec![0, 2, 1, 0],
        };
        let series = [point(0, "others", 1.0, 5.0), point(3, "others", 1.0, 5.0)];
        let svg = svg_of(&series, "faults", Some(&faults));
        assert!(
            svg.contains("<title>#1 kill-web web1 down 3s</title>"),
            "{svg}"
        );
        assert!(svg.contains(">kill-web web1</text>"), "a fault is labelled");
        assert!(!svg.contains(">move web1</text>"), "moves are not labelled");
        assert_eq!(svg.matches("errors in second").count(), 2);
        assert!(svg.contains("errors/s (max 2)"));
        assert_eq!(svg.matches("<polyline").count(), 2);
    }

    #[test]
    fn an_empty_series_still_makes_a_valid_plot() {
        let svg = svg_of(&[], "empty", None);
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
