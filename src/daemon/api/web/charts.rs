//! The app's charts as inline SVG, drawn on the server: a time chart (lines with a point per
//! sample, each point carrying its value for hover), a sparkline, and a trace's span
//! waterfall. Pure: data in, markup out. Colours come from the stylesheet (classes `c0`…`c5`),
//! so dark mode needs nothing here.

use std::collections::HashMap;

use maud::{html, Markup};

use super::format::{self, MINUTE_NS};

/// One line of a time chart: `(time ns, value)` points in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(u64, f64)>,
}

/// A horizontal reference line (a baseline, a threshold).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimeChart {
    pub from_ns: u64,
    pub to_ns: u64,
    /// Written after each value: `/s`, ` records`, ….
    pub unit: String,
    pub series: Vec<Series>,
    pub rules: Vec<Rule>,
    /// Shown instead of an empty plot: why there is nothing and what would fill it.
    pub empty: String,
    pub size: Size,
}

/// A chart's drawing size: its text stays readable at the width it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// A card in a grid, about a third of a laptop screen.
    Card,
    /// The page's width.
    Wide,
}

impl Size {
    fn dimensions(self) -> (f64, f64) {
        match self {
            Size::Card => (380.0, 150.0),
            Size::Wide => (1100.0, 230.0),
        }
    }
}

const LEFT: f64 = 46.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 22.0;
/// Colour classes in the stylesheet.
const COLOURS: usize = 6;

/// The largest value a chart must show, rounded up to a readable top.
fn top_of(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|f| f * magnitude).find(|t| *t >= max).unwrap_or(10.0 * magnitude)
}

pub fn time_chart(chart: &TimeChart) -> Markup {
    let points: usize = chart.series.iter().map(|s| s.points.len()).sum();
    if points == 0 {
        return html! { p.empty-chart { (chart.empty) } };
    }
    let span = chart.to_ns.saturating_sub(chart.from_ns).max(1) as f64;
    let max = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(chart.rules.iter().map(|r| r.value))
        .fold(0.0f64, f64::max);
    let top = top_of(max);
    let (w, h) = chart.size.dimensions();
    let x = |t: u64| LEFT + (t.saturating_sub(chart.from_ns) as f64 / span).min(1.0) * (w - LEFT - RIGHT);
    let y = |v: f64| TOP + (1.0 - (v / top).clamp(0.0, 1.0)) * (h - TOP - BOTTOM);
    let mid = chart.from_ns + (chart.to_ns - chart.from_ns) / 2;
    html! {
        figure.chart {
            svg.time-chart viewBox={ "0 0 " (w) " " (h) } role="img" {
                @for f in [0.0, 0.5, 1.0] {
                    line.grid x1=(LEFT) x2=(w - RIGHT) y1=(y(top * f)) y2=(y(top * f)) {}
                    text.axis x=(LEFT - 4.0) y=(y(top * f) + 4.0) text-anchor="end" { (format::number(top * f)) }
                }
                @for (t, anchor) in [(chart.from_ns, "start"), (mid, "middle"), (chart.to_ns, "end")] {
                    text.axis x=(x(t)) y=(h - 6.0) text-anchor=(anchor) { (format::utc_clock(t)) }
                }
                @for r in &chart.rules {
                    line.rule x1=(LEFT) x2=(w - RIGHT) y1=(y(r.value)) y2=(y(r.value)) {
                        title { (r.name) ": " (format::number(r.value)) (chart.unit) }
                    }
                    text.rule-label x=(w - RIGHT - 2.0) y=(y(r.value) - 3.0) text-anchor="end" { (r.name) }
                }
                @for (i, s) in chart.series.iter().enumerate() {
                    @let colour = format!("c{}", i % COLOURS);
                    polyline class={ "line " (colour) } points=(polyline(&s.points, &x, &y)) {}
                    @for (t, v) in &s.points {
                        @let tip = format!("{}: {}{} at {}", s.name, format::number(*v), chart.unit, format::utc(*t));
                        circle class={ "pt " (colour) } cx=(x(*t)) cy=(y(*v)) r="2.5" data-tip=(tip) { title { (tip) } }
                    }
                }
            }
            figcaption.legend {
                @for (i, s) in chart.series.iter().enumerate() {
                    span.key { span class={ "swatch c" (i % COLOURS) } {} (s.name) }
                }
                @for r in &chart.rules {
                    span.key { span.swatch.rule-swatch {} (r.name) " " (format::number(r.value)) (chart.unit) }
                }
            }
        }
    }
}

/// A point of a scatter: where, whether it failed, where a click goes and what hover says.
#[derive(Debug, Clone, PartialEq)]
pub struct ScatterPoint {
    pub time_ns: u64,
    pub value: f64,
    pub error: bool,
    pub href: String,
    pub tip: String,
}

/// Durations over time: a point per trace, red when it failed, each a link (its trace).
/// `value_text` writes the y axis's values (durations).
pub fn scatter(
    points: &[ScatterPoint],
    from_ns: u64,
    to_ns: u64,
    value_text: fn(f64) -> String,
    empty: &str,
) -> Markup {
    if points.is_empty() {
        return html! { p.empty-chart { (empty) } };
    }
    let (w, h) = Size::Wide.dimensions();
    let left = LEFT + 14.0;
    let span = to_ns.saturating_sub(from_ns).max(1) as f64;
    let top = top_of(points.iter().map(|p| p.value).fold(0.0f64, f64::max));
    let x = |t: u64| left + (t.saturating_sub(from_ns) as f64 / span).min(1.0) * (w - left - RIGHT);
    let y = |v: f64| TOP + (1.0 - (v / top).clamp(0.0, 1.0)) * (h - TOP - BOTTOM);
    let mid = from_ns + (to_ns - from_ns) / 2;
    html! {
        figure.chart {
            svg.scatter viewBox={ "0 0 " (w) " " (h) } role="img" {
                @for f in [0.0, 0.5, 1.0] {
                    line.grid x1=(left) x2=(w - RIGHT) y1=(y(top * f)) y2=(y(top * f)) {}
                    text.axis x=(left - 4.0) y=(y(top * f) + 4.0) text-anchor="end" { (value_text(top * f)) }
                }
                @for (t, anchor) in [(from_ns, "start"), (mid, "middle"), (to_ns, "end")] {
                    text.axis x=(x(t)) y=(h - 6.0) text-anchor=(anchor) { (format::utc_clock(t)) }
                }
                @for p in points {
                    a href=(p.href) {
                        circle class=(if p.error { "pt dot error" } else { "pt dot" }) cx=(x(p.time_ns)) cy=(y(p.value)) r="4" data-tip=(p.tip) { title { (p.tip) } }
                    }
                }
            }
        }
    }
}

/// Counts per time bucket, stacked by series (a severity each): `buckets` holds each bucket's
/// start and its count per series, in the order of `series` (name, colour class).
pub fn stacked_bars(
    buckets: &[(u64, Vec<u64>)],
    bucket_ns: u64,
    series: &[(&str, &str)],
    from_ns: u64,
    to_ns: u64,
    empty: &str,
) -> Markup {
    let total: u64 = buckets.iter().flat_map(|b| b.1.iter()).sum();
    if total == 0 {
        return html! { p.empty-chart { (empty) } };
    }
    let (w, h) = Size::Wide.dimensions();
    let span = to_ns.saturating_sub(from_ns).max(1) as f64;
    let top = top_of(buckets.iter().map(|b| b.1.iter().sum::<u64>() as f64).fold(0.0, f64::max));
    let x = |t: u64| LEFT + (t.saturating_sub(from_ns) as f64 / span).min(1.0) * (w - LEFT - RIGHT);
    let y = |v: f64| TOP + (1.0 - (v / top).clamp(0.0, 1.0)) * (h - TOP - BOTTOM);
    let bar_w = ((bucket_ns as f64 / span) * (w - LEFT - RIGHT) - 1.0).max(1.0);
    let mid = from_ns + (to_ns - from_ns) / 2;
    // Each bucket's segments bottom up, in the order of `series`.
    let mut rects = Vec::new();
    for (start, counts) in buckets {
        let mut below = 0u64;
        for ((name, class), n) in series.iter().zip(counts).filter(|(_, n)| **n > 0) {
            let tip = format!("{n} {name} at {}", format::utc(*start));
            let (upper, lower) = (y((below + n) as f64), y(below as f64));
            rects.push((x(*start), upper, (lower - upper).max(0.5), *class, tip));
            below += n;
        }
    }
    html! {
        figure.chart {
            svg.bars viewBox={ "0 0 " (w) " " (h) } role="img" {
                @for f in [0.0, 0.5, 1.0] {
                    line.grid x1=(LEFT) x2=(w - RIGHT) y1=(y(top * f)) y2=(y(top * f)) {}
                    text.axis x=(LEFT - 4.0) y=(y(top * f) + 4.0) text-anchor="end" { (format::number(top * f)) }
                }
                @for (t, anchor) in [(from_ns, "start"), (mid, "middle"), (to_ns, "end")] {
                    text.axis x=(x(t)) y=(h - 6.0) text-anchor=(anchor) { (format::utc_clock(t)) }
                }
                @for (x0, y0, height, class, tip) in &rects {
                    rect class={ "bar " (class) } x=(x0) y=(y0) width=(bar_w) height=(height) data-tip=(tip) { title { (tip) } }
                }
            }
            figcaption.legend {
                @for (name, class) in series {
                    span.key { span class={ "swatch " (class) } {} (name) }
                }
            }
        }
    }
}

fn polyline(points: &[(u64, f64)], x: &impl Fn(u64) -> f64, y: &impl Fn(f64) -> f64) -> String {
    points.iter().map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v))).collect::<Vec<_>>().join(" ")
}

/// Per-minute counts over `[from, to)`, every minute present (zero when absent), as points.
pub fn minutes_filled(counts: &[(u64, u64)], from_ns: u64, to_ns: u64) -> Vec<(u64, f64)> {
    let by_minute: HashMap<u64, u64> = counts.iter().map(|(m, c)| (m / MINUTE_NS, *c)).collect();
    (from_ns / MINUTE_NS..to_ns.div_ceil(MINUTE_NS))
        .map(|m| (m * MINUTE_NS, by_minute.get(&m).copied().unwrap_or(0) as f64))
        .collect()
}

/// A small line of per-minute counts over `[from, to)`.
pub fn sparkline(counts: &[(u64, u64)], from_ns: u64, to_ns: u64) -> Markup {
    const SW: f64 = 120.0;
    const SH: f64 = 24.0;
    let points = minutes_filled(counts, from_ns, to_ns);
    let total: u64 = counts.iter().map(|c| c.1).sum();
    let peak = points.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let n = points.len().max(2) as f64 - 1.0;
    let top = peak.max(1.0);
    let line = points
        .iter()
        .enumerate()
        .map(|(i, (_, v))| format!("{:.1},{:.1}", i as f64 / n * SW, 1.0 + (1.0 - v / top) * (SH - 2.0)))
        .collect::<Vec<_>>()
        .join(" ");
    let tip = format!("{total} lines in this window, at most {} a minute", format::number(peak));
    html! {
        svg.sparkline viewBox={ "0 0 " (SW) " " (SH) } width=(SW) height=(SH) role="img" {
            title { (tip) }
            polyline.line.c0 points=(line) {}
        }
    }
}

/// A span as the waterfall draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub span_id: String,
    pub parent_span_id: String,
    pub service: String,
    pub operation: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub error: bool,
    /// The span's events, marked on its bar.
    pub events: Vec<EventMark>,
    /// Its time outside its children, ns.
    pub self_ns: u64,
    /// On the trace's critical path.
    pub critical: bool,
}

/// A span event as the waterfall marks it: where, and what its hover says.
#[derive(Debug, Clone, PartialEq)]
pub struct EventMark {
    pub time_ns: u64,
    /// An exception: drawn apart from other events.
    pub exception: bool,
    /// The hover text: name, time, attributes.
    pub tip: String,
}

/// The spans in tree order (each parent before its children, siblings by start), with
/// their depth. A span whose parent is not in the trace is drawn as a root.
pub fn tree_order(bars: &[Bar]) -> Vec<(usize, &Bar)> {
    crate::otlp::tree::tree_order(bars.len(), |i| {
        (bars[i].span_id.as_str(), bars[i].parent_span_id.as_str(), bars[i].start_ns)
    })
    .into_iter()
    .map(|(depth, i)| (depth, &bars[i]))
    .collect()
}

/// From the first start to the last end of the spans, ns.
pub fn trace_length(bars: &[Bar]) -> u64 {
    let start = bars.iter().map(|b| b.start_ns).min().unwrap_or(0);
    let end = bars.iter().map(|b| b.end_ns.max(b.start_ns)).max().unwrap_or(start);
    end.saturating_sub(start)
}

/// The waterfall: a row per span (service and operation, indented by depth) and a bar on
/// the trace's time axis with its duration and self time; error spans marked, and the
/// critical path's spans marked `▶` and outlined (the legend says so). The axis is
/// `axis_ns` long (at least the trace), so two waterfalls given the same one are drawn on
/// one scale: the same nanoseconds per pixel at the same width.
pub fn waterfall(bars: &[Bar], axis_ns: u64) -> Markup {
    const WW: f64 = 1000.0;
    const LABEL: f64 = 300.0;
    const DURATION: f64 = 160.0;
    const ROW: f64 = 22.0;
    const AXIS: f64 = 20.0;
    let rows = tree_order(bars);
    let start = bars.iter().map(|b| b.start_ns).min().unwrap_or(0);
    let axis = axis_ns.max(trace_length(bars)).max(1);
    let span = axis as f64;
    let x = |t: u64| LABEL + (t.saturating_sub(start) as f64 / span).min(1.0) * (WW - LABEL - DURATION);
    let height = AXIS + ROW * rows.len() as f64 + 4.0;
    let critical = bars.iter().any(|b| b.critical);
    html! {
        figure.chart.waterfall-figure {
            svg.waterfall viewBox={ "0 0 " (WW) " " (height) } role="img" data-axis-ns=(axis) {
                @for f in [0.0, 0.25, 0.5, 0.75, 1.0] {
                    @let at = start + (span * f) as u64;
                    line.grid x1=(x(at)) x2=(x(at)) y1=(AXIS - 4.0) y2=(height) {}
                    text.axis x=(x(at)) y="12" text-anchor="middle" { (format::duration(span * f)) }
                }
                @for (row, (depth, b)) in rows.iter().enumerate() {
                    @let top = AXIS + ROW * row as f64;
                    @let duration = b.end_ns.saturating_sub(b.start_ns);
                    @let label = truncate(&format!("{} · {}", b.service, b.operation), 40 - (*depth).min(10) * 2);
                    @let tip = format!(
                        "{} · {}: {}, self {}{}{}",
                        b.service,
                        b.operation,
                        format::duration(duration as f64),
                        format::duration(b.self_ns as f64),
                        if b.error { " (error)" } else { "" },
                        if b.critical { "; on the critical path" } else { "" }
                    );
                    @let class = match (b.error, b.critical) {
                        (true, true) => "span error critical",
                        (true, false) => "span error",
                        (false, true) => "span critical",
                        (false, false) => "span",
                    };
                    g class=(class) data-span-id=(b.span_id) data-self-ns=(b.self_ns) {
                        title { (tip) }
                        @if b.critical { text.crit-mark x="2" y=(top + 15.0) { "▶" } }
                        text.label x=(14.0 + 14.0 * (*depth).min(10) as f64) y=(top + 15.0) { (label) }
                        rect.bar x=(x(b.start_ns)) y=(top + 4.0) width=(((x(b.end_ns.max(b.start_ns)) - x(b.start_ns)).max(2.0))) height=(ROW - 8.0) rx="2" {}
                        text.dur x=(x(b.end_ns.max(b.start_ns)) + 4.0) y=(top + 15.0) {
                            (format::duration(duration as f64))
                            @if b.self_ns < duration { " · self " (format::duration(b.self_ns as f64)) }
                        }
                        @for e in &b.events {
                            @let cx = x(e.time_ns.clamp(b.start_ns, b.end_ns.max(b.start_ns)));
                            @let cy = top + ROW / 2.0;
                            // A diamond on the bar, its own hover (SVG's title) naming the event.
                            polygon class=(if e.exception { "event exception" } else { "event" })
                                points={ (cx) "," (cy - 6.0) " " (cx + 5.0) "," (cy) " " (cx) "," (cy + 6.0) " " (cx - 5.0) "," (cy) } {
                                title { (e.tip) }
                            }
                        }
                    }
                }
            }
            @if critical {
                figcaption.legend {
                    span.key { span.crit-key { "▶" } "on the critical path: the spans the trace waited on, start to end" }
                    span.key { "self: time in a span outside its children" }
                }
            }
        }
    }
}

fn truncate(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        let cut: String = text.chars().take(chars.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(id: &str, parent: &str, start: u64, end: u64) -> Bar {
        Bar {
            span_id: id.into(),
            parent_span_id: parent.into(),
            service: "svc".into(),
            operation: format!("op-{id}"),
            start_ns: start,
            end_ns: end,
            error: id == "c",
            events: if id == "c" {
                vec![EventMark { time_ns: 35, exception: true, tip: "exception at 35".into() }]
            } else {
                vec![]
            },
            self_ns: end - start,
            critical: id == "a" || id == "c",
        }
    }

    #[test]
    fn spans_are_drawn_parent_first_and_orphans_and_cycles_are_kept() {
        let bars = vec![
            bar("c", "a", 30, 40),
            bar("a", "", 0, 100),
            bar("b", "a", 10, 20),
            bar("d", "b", 12, 15),
            bar("o", "missing", 50, 60),
            bar("x", "y", 1, 2),
            bar("y", "x", 1, 2),
        ];
        let order: Vec<(usize, &str)> = tree_order(&bars).iter().map(|(d, b)| (*d, b.span_id.as_str())).collect();
        assert_eq!(&order[..5], &[(0, "a"), (1, "b"), (2, "d"), (1, "c"), (0, "o")]);
        assert_eq!(order.len(), bars.len(), "every span is drawn once");
        let svg = waterfall(&bars, 0).into_string();
        assert_eq!(svg.matches("<g class=\"span").count(), bars.len());
        assert_eq!(svg.matches("class=\"span error critical\"").count(), 1);
        assert_eq!(svg.matches("class=\"span critical\"").count(), 1, "a, marked");
        assert_eq!(svg.matches("<text class=\"crit-mark\"").count(), 2, "a marker, not only a colour");
        assert!(svg.contains("on the critical path:"), "the legend says what the marker means");
        assert_eq!(svg.matches("<polygon class=\"event exception\"").count(), 1, "the event marked on its bar");
        assert!(svg.contains("<title>exception at 35</title>"), "{svg}");
    }

    #[test]
    fn two_waterfalls_on_one_axis_draw_the_same_nanoseconds_per_pixel() {
        let width = |svg: &str| -> f64 {
            let at = svg.find("<rect class=\"bar\"").unwrap();
            let rest = &svg[at..];
            let w = &rest[rest.find("width=\"").unwrap() + 7..];
            w[..w.find('"').unwrap()].parse().unwrap()
        };
        let short = waterfall(&[bar("a", "", 0, 100)], 400).into_string();
        let long = waterfall(&[bar("a", "", 0, 400)], 400).into_string();
        assert!((width(&long) / width(&short) - 4.0).abs() < 1e-6, "{short}\n{long}");
        assert!(short.contains("data-axis-ns=\"400\"") && long.contains("data-axis-ns=\"400\""));
        let alone = waterfall(&[bar("a", "", 0, 100)], 0).into_string();
        assert!((width(&alone) - width(&long)).abs() < 1e-6, "alone, a trace fills its axis");
    }

    #[test]
    fn a_chart_has_a_point_per_sample_and_explains_an_empty_one() {
        let chart = TimeChart {
            from_ns: 0,
            to_ns: 120 * MINUTE_NS,
            unit: "/s".into(),
            series: vec![
                Series { name: "a".into(), points: vec![(0, 1.0), (MINUTE_NS, 3.0)] },
                Series { name: "b".into(), points: vec![(0, 0.5)] },
            ],
            rules: vec![Rule { name: "threshold".into(), value: 4.0 }],
            empty: "nothing".into(),
            size: Size::Card,
        };
        let svg = time_chart(&chart).into_string();
        assert_eq!(svg.matches("<circle class=\"pt").count(), 3);
        assert!(svg.contains("a: 3/s at 1970-01-01 00:01:00 UTC"), "{svg}");
        assert!(svg.contains("threshold"));
        let empty = time_chart(&TimeChart { series: vec![], ..chart }).into_string();
        assert!(empty.contains("nothing") && !empty.contains("<svg"), "{empty}");
    }

    #[test]
    fn tops_are_round_and_minutes_are_filled() {
        assert_eq!(top_of(0.0), 1.0);
        assert_eq!(top_of(7.0), 10.0);
        assert_eq!(top_of(180.0), 200.0);
        assert_eq!(top_of(0.3), 0.5);
        let filled = minutes_filled(&[(MINUTE_NS, 4)], 0, 3 * MINUTE_NS);
        assert_eq!(filled, vec![(0, 0.0), (MINUTE_NS, 4.0), (2 * MINUTE_NS, 0.0)]);
    }
}
