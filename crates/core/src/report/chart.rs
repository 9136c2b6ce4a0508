//! The report's charts as inline SVG: the timeline of stops with verify durations, tokens per
//! iteration, and a metric loop's series with its target and best so far.
//!
//! Charts carry no text of their own beyond numbers and reason codes; hover titles name the stop.
//! Colours come from the page's CSS classes, so print and dark mode restyle them in one place.

use std::fmt::Write;

use crate::host::usage::human_tokens;
use crate::report::escape;
use crate::report::model::{LoopReport, MetricSeries, how_it_failed};
use crate::support::text::duration::human_ms;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 14.0;

/// Coordinates are written with at most one decimal: enough for a crisp line, short to read.
fn n(x: f64) -> String {
    let rounded = (x * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 { format!("{rounded:.0}") } else { format!("{rounded:.1}") }
}

/// A round upper bound for an axis from 0 to `max`.
fn nice_ceiling(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|step| step * magnitude).find(|c| *c >= max).unwrap_or(max)
}

/// Which slots get an x-axis label: every one when few, else about a dozen evenly.
fn label_every(count: usize) -> usize {
    count.div_ceil(12).max(1)
}

/// A horizontal grid line at `y` with its value on the left axis.
fn gridline(svg: &mut String, y: f64, label: &str) {
    let _ = write!(
        svg,
        r#"<line class="grid" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}"/><text class="axis" x="{tx}" y="{ty}" text-anchor="end">{label}</text>"#,
        x1 = n(LEFT),
        x2 = n(WIDTH - RIGHT),
        y = n(y),
        tx = n(LEFT - 8.0),
        ty = n(y + 4.0),
    );
}

/// An iteration number under the x axis.
fn x_label(svg: &mut String, x: f64, plot_bottom: f64, iteration: u32) {
    let _ = write!(
        svg,
        r#"<text class="axis" x="{x}" y="{y}" text-anchor="middle">{iteration}</text>"#,
        x = n(x),
        y = n(plot_bottom + 16.0)
    );
}

/// The start of a chart of class `class`, with its accessible title.
fn open(class: &str, height: f64, title: &str) -> String {
    format!(
        r#"<svg class="chart {class}" viewBox="0 0 {w} {h}" role="img" aria-labelledby="{class}-title"><title id="{class}-title">{title}</title>"#,
        w = n(WIDTH),
        h = n(height)
    )
}

/// The x axis's caption, and the end of the chart.
fn close(svg: &mut String, height: f64) {
    let _ = write!(
        svg,
        r#"<text class="axis caption" x="{x}" y="{y}" text-anchor="middle">iteration</text></svg>"#,
        x = n(LEFT + (WIDTH - LEFT - RIGHT) / 2.0),
        y = n(height - 4.0)
    );
}

/// A non-negative axis value as a whole number, for labels.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole(v: f64) -> u64 {
    // `as` saturates: NaN and negatives give 0, and nothing here comes near u64::MAX.
    v.round().max(0.0) as u64
}

/// The timeline: one slot per ledger line, a mark coloured by its reason code in the top lane,
/// and the verify duration as a bar below it.
/// The most marks the timeline draws. A longer loop's stops are drawn in runs of consecutive
/// stops, one mark each, so 2,000 stops read as a line of 200 marks rather than a smear.
pub(crate) const MAX_MARKS: usize = 200;

/// One mark of the timeline: a stop, or a run of consecutive stops drawn as the last of them,
/// with the longest verify of the run as its bar.
struct Mark<'a> {
    /// The stop the mark is drawn as: the last of its run.
    stop: &'a crate::report::model::Stop,
    /// How many stops it stands for.
    count: usize,
    /// The first stop's iteration, for a run.
    first: u32,
    /// The longest verify of the run.
    verify: Option<&'a crate::state::VerifyRecord>,
    /// Each reason of the run and how many stops had it, in the order first seen.
    reasons: Vec<(crate::state::ReasonCode, usize)>,
}

/// The marks for `stops`: one per stop up to [`MAX_MARKS`], else runs of equal length.
fn marks(stops: &[crate::report::model::Stop]) -> Vec<Mark<'_>> {
    let per = stops.len().div_ceil(MAX_MARKS).max(1);
    stops
        .chunks(per)
        .filter_map(|run| {
            let last = run.last()?;
            let mut reasons: Vec<(crate::state::ReasonCode, usize)> = Vec::new();
            for stop in run {
                match reasons.iter_mut().find(|(code, _)| *code == stop.reason) {
                    Some((_, n)) => *n += 1,
                    None => reasons.push((stop.reason, 1)),
                }
            }
            let verify = run.iter().filter_map(|s| s.verify.as_ref()).max_by_key(|v| v.duration_ms);
            Some(Mark { stop: last, count: run.len(), first: run[0].iteration, verify, reasons })
        })
        .collect()
}

impl Mark<'_> {
    /// The hover title: the stop, or the run's iterations and reasons.
    fn title(&self) -> String {
        let stop = self.stop;
        let mut title = if self.count == 1 {
            format!("#{} · {}", stop.iteration, stop.reason.as_str())
        } else {
            let reasons: Vec<String> =
                self.reasons.iter().map(|(code, n)| format!("{} ×{n}", code.as_str())).collect();
            format!("#{}–#{} · {} stops: {}", self.first, stop.iteration, self.count, reasons.join(", "))
        };
        if let Some(verify) = self.verify {
            let longest = if self.count == 1 { "verify" } else { "longest verify" };
            let _ =
                write!(title, " · {longest} {} in {}", how_it_failed(verify), human_ms(verify.duration_ms));
        }
        title
    }
}

pub(crate) fn timeline(report: &LoopReport) -> String {
    let marks = marks(&report.stops);
    let stops = &marks;
    let height = 230.0;
    let lane = TOP + 10.0;
    let plot_top = lane + 22.0;
    let plot_bottom = height - 34.0;
    let plot_height = plot_bottom - plot_top;
    let slot = (WIDTH - LEFT - RIGHT) / stops.len().max(1) as f64;
    let max_ms = stops.iter().filter_map(|m| m.verify.map(|v| v.duration_ms)).max().unwrap_or(0);
    let ceiling = nice_ceiling(max_ms as f64);
    let mut svg =
        open("timeline", height, "Each stop, coloured by its reason, with the verify duration as a bar");
    for (value, y) in [(ceiling, plot_top), (ceiling / 2.0, plot_top + plot_height / 2.0), (0.0, plot_bottom)]
    {
        gridline(&mut svg, y, &if value <= 0.0 { "0".to_string() } else { human_ms(whole(value)) });
    }
    let _ = write!(
        svg,
        r#"<text class="axis lane-label" x="{x}" y="{y}" text-anchor="end">stop</text>"#,
        x = n(LEFT - 8.0),
        y = n(lane + 4.0)
    );
    let every = label_every(stops.len());
    let bar_width = (slot * 0.62).clamp(1.0, 36.0);
    let radius = (slot * 0.32).clamp(2.0, 7.0);
    for (i, mark) in stops.iter().enumerate() {
        let stop = mark.stop;
        let cx = LEFT + slot * (i as f64 + 0.5);
        let code = stop.reason.as_str();
        let title = mark.title();
        if let Some(verify) = mark.verify {
            let bar = if ceiling > 0.0 { verify.duration_ms as f64 / ceiling * plot_height } else { 0.0 };
            // A run too short to see still gets a sliver, so every verify run shows.
            let bar = bar.max(1.5);
            let _ = write!(
                svg,
                r#"<rect class="bar r-{code}" x="{x}" y="{y}" width="{w}" height="{h}"><title>{t}</title></rect>"#,
                x = n(cx - bar_width / 2.0),
                y = n(plot_bottom - bar),
                w = n(bar_width),
                h = n(bar),
                t = escape::text(&title)
            );
        }
        let shape = if stop.is_judged() {
            format!(r#"<circle cx="{x}" cy="{y}" r="{r}""#, x = n(cx), y = n(lane), r = n(radius))
        } else {
            // Events (a resume, a host override, a fault) are diamonds, set apart from stops.
            let r = radius * 1.15;
            format!(
                r#"<path d="M{x} {top}L{right} {y}L{x} {bottom}L{left} {y}Z""#,
                x = n(cx),
                y = n(lane),
                top = n(lane - r),
                bottom = n(lane + r),
                left = n(cx - r),
                right = n(cx + r)
            )
        };
        let _ = write!(
            svg,
            r#"{shape} class="mark r-{code}" data-reason="{code}" data-iteration="{it}"><title>{t}</title>{close}"#,
            it = stop.iteration,
            t = escape::text(&title),
            close = if stop.is_judged() { "</circle>" } else { "</path>" }
        );
        if i % every == 0 {
            x_label(&mut svg, cx, plot_bottom, stop.iteration);
        }
    }
    close(&mut svg, height);
    svg
}

/// Tokens per iteration as stacked bars: input, cache writes and output (what a token budget
/// counts), with cache reads left out of the bars and named in the hover title.
pub(crate) fn tokens(report: &LoopReport) -> Option<String> {
    let rows: Vec<(u32, crate::host::TokenCounts)> = report
        .stops
        .iter()
        .filter_map(|stop| stop.tokens.as_ref().map(|t| (stop.iteration, t.total())))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let height = 200.0;
    let plot_top = TOP;
    let plot_bottom = height - 34.0;
    let plot_height = plot_bottom - plot_top;
    let ceiling = nice_ceiling(rows.iter().map(|(_, c)| c.counted()).max().unwrap_or(0) as f64);
    let slot = (WIDTH - LEFT - RIGHT) / rows.len() as f64;
    let bar_width = (slot * 0.62).clamp(1.0, 36.0);
    let mut svg = open("tokens", height, "Tokens counted per iteration");
    for (value, y) in [(ceiling, plot_top), (ceiling / 2.0, plot_top + plot_height / 2.0), (0.0, plot_bottom)]
    {
        gridline(&mut svg, y, &human_tokens(whole(value)));
    }
    let every = label_every(rows.len());
    for (i, (iteration, counts)) in rows.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let title = format!(
            "#{iteration} · {} counted: {} input, {} cache write, {} output; {} cache read (not counted)",
            human_tokens(counts.counted()),
            human_tokens(counts.input),
            human_tokens(counts.cache_write),
            human_tokens(counts.output),
            human_tokens(counts.cache_read)
        );
        let mut y = plot_bottom;
        for (class, value) in
            [("t-input", counts.input), ("t-cache-write", counts.cache_write), ("t-output", counts.output)]
        {
            if value == 0 {
                continue;
            }
            let h = value as f64 / ceiling * plot_height;
            y -= h;
            let _ = write!(
                svg,
                r#"<rect class="{class}" x="{x}" y="{y}" width="{w}" height="{h}"><title>{t}</title></rect>"#,
                x = n(cx - bar_width / 2.0),
                y = n(y),
                w = n(bar_width),
                h = n(h),
                t = escape::text(&title)
            );
        }
        if i % every == 0 {
            x_label(&mut svg, cx, plot_bottom, *iteration);
        }
    }
    close(&mut svg, height);
    Some(svg)
}

/// A metric loop's values by iteration, kept and discarded told apart, the best so far as a step
/// line and the target as a dashed line.
pub(crate) fn metric(series: &MetricSeries) -> String {
    let height = 260.0;
    let plot_top = TOP + 6.0;
    let plot_bottom = height - 34.0;
    let values = series.points.iter().map(|p| p.value).chain(series.target);
    let (mut low, mut high) =
        values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if high - low < f64::EPSILON * high.abs().max(1.0) {
        low -= 1.0;
        high += 1.0;
    }
    let pad = (high - low) * 0.08;
    let (low, high) = (low - pad, high + pad);
    let y_of = |v: f64| plot_bottom - (v - low) / (high - low) * (plot_bottom - plot_top);
    let count = series.points.len();
    let slot = (WIDTH - LEFT - RIGHT) / count.max(1) as f64;
    let x_of = |i: usize| LEFT + slot * (i as f64 + 0.5);
    let mut svg = open("metric", height, "The metric at each stop, the best so far and the target");
    for value in [high - pad, f64::midpoint(high, low), low + pad] {
        gridline(&mut svg, y_of(value), &short_number(value));
    }
    if let Some(target) = series.target {
        let _ = write!(
            svg,
            r#"<line class="target" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}"/><text class="axis target-label" x="{x2}" y="{ty}" text-anchor="end">target {label}</text>"#,
            x1 = n(LEFT),
            x2 = n(WIDTH - RIGHT),
            y = n(y_of(target)),
            ty = n(y_of(target) - 6.0),
            label = short_number(target)
        );
    }
    let mut best = String::new();
    for (i, point) in series.points.iter().enumerate() {
        let (x0, x1, y) = (x_of(i) - slot / 2.0, x_of(i) + slot / 2.0, y_of(point.best));
        let _ = write!(
            best,
            "{}{} {}H{}",
            if i == 0 { "M" } else { "L" },
            n(x0.max(LEFT)),
            n(y),
            n(x1.min(WIDTH - RIGHT))
        );
    }
    let _ = write!(svg, r#"<path class="best" d="{best}"/>"#);
    let every = label_every(count);
    for (i, point) in series.points.iter().enumerate() {
        let class = match point.kept {
            Some(true) => "kept",
            Some(false) => "discarded",
            None => "measured",
        };
        let _ = write!(
            svg,
            r#"<circle class="point {class}" cx="{x}" cy="{y}" r="5" data-iteration="{it}"><title>#{it} · {v} · {class} · best so far {b}</title></circle>"#,
            x = n(x_of(i)),
            y = n(y_of(point.value)),
            it = point.iteration,
            v = short_number(point.value),
            b = short_number(point.best)
        );
        if i % every == 0 {
            x_label(&mut svg, x_of(i), plot_bottom, point.iteration);
        }
    }
    close(&mut svg, height);
    svg
}

/// A measurement for an axis or a title: up to four significant digits, no trailing zeros.
pub(crate) fn short_number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    // Four significant digits from 0.001 to 9999; whole numbers above.
    let digits = match v.abs() {
        a if a >= 1_000.0 => 0,
        a if a >= 100.0 => 1,
        a if a >= 10.0 => 2,
        a if a >= 1.0 => 3,
        a if a >= 0.1 => 4,
        a if a >= 0.01 => 5,
        _ => 6,
    };
    let text = format!("{v:.digits$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_round_numbers() {
        let ceilings: Vec<String> = [0.0, 830.0, 4_200.0, 21.0].map(|m| nice_ceiling(m).to_string()).to_vec();
        assert_eq!(ceilings, ["1", "1000", "5000", "25"]);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(short_number(123.456), "123.5");
        assert_eq!(short_number(0.001_234_6), "0.001235");
        assert_eq!(short_number(120.0), "120");
        assert_eq!(short_number(98_765.0), "98765");
        assert_eq!(n(3.04), "3");
        assert_eq!(n(3.06), "3.1");
    }
}
