//! A picture of a saved run for slides and posts: the timeline as SVG, 1200 px wide
//! with body text of 18 px and more, so it reads on a projected slide.
//!
//! One lane per worker shows what it believed (holding, paused, waiting) and its lease
//! as a thin bar, from the grant to the release (or to the moment it ran out, marked);
//! where it believed it held the lock while the lock service said otherwise, the lane
//! turns to the danger colour. Under the workers, the truth lane shows who the lock
//! service listed as holder. Writes carry their token and verdict; an unsafe `DEL`
//! that deleted another worker's key is marked. `export --compare` draws two runs of a
//! file one above the other on one time axis.
//!
//! Everything is drawn per pixel column (`columns.rs`), the most important thing in a
//! column winning, and every text goes through a placer that refuses overlaps
//! (`text.rs`): a log of a million events or of 10^15 ms gives a picture of the same
//! size as a short one. Built from the same run model as the TUI, so the picture and
//! the screen agree.

mod columns;
mod lanes;
pub mod text;

use svg::Document;
use svg::node::element::{Definitions, Group, Line, Pattern, Rectangle, Text, Title};

use crate::engine::log::{Event, EventKind};
use crate::view_model::RunModel;
use columns::{Scale, tick_label, tick_step};
use text::{Placer, TextBox, elide_middle};

/// Colours for a light slide or a dark one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Palette {
    Light,
    Dark,
}

struct Colours {
    background: &'static str,
    text: &'static str,
    dim: &'static str,
    grid: &'static str,
    danger: &'static str,
    accepted: &'static str,
    rejected: &'static str,
}

impl Palette {
    fn colours(self) -> Colours {
        match self {
            Palette::Light => Colours {
                background: "#ffffff",
                text: "#1a1a1a",
                dim: "#5e5e5e",
                grid: "#e3e3e3",
                danger: "#d55e00",
                accepted: "#009e73",
                rejected: "#cc79a7",
            },
            Palette::Dark => Colours {
                background: "#16181d",
                text: "#f0f0f0",
                dim: "#a8a8a8",
                grid: "#30343c",
                danger: "#ff7a2f",
                accepted: "#3ccf9c",
                rejected: "#e79ac8",
            },
        }
    }
}

/// Workers' colours (Okabe-Ito, colour-blind safe), as in the TUI.
const WORKERS: [&str; 5] = ["#0072b2", "#e69f00", "#56b4e9", "#009e73", "#cc79a7"];

const WIDTH: f64 = 1200.0;
/// Room for the lane names.
const LEFT: f64 = 170.0;
const RIGHT: f64 = 40.0;
/// The plot has one column per pixel.
const COLUMNS: usize = (WIDTH - LEFT - RIGHT) as usize;
/// A lane: a row of labels, the bar, the lease bar, a row of token labels.
const LANE: f64 = 100.0;
const BAR_TOP: f64 = 28.0;
const BAR: f64 = 32.0;
/// Body text; titles and lane names are larger.
const BODY: f64 = 18.0;
/// The narrowest a hold or a holder is drawn, so a hold of 1 ms shows.
const MIN_PX: f64 = 5.0;
const FONT: &str = "DejaVu Sans, Verdana, sans-serif";

/// A laid-out picture: the SVG, and the texts with their boxes (for tests).
#[derive(Debug)]
pub struct Picture {
    pub width: f64,
    pub height: f64,
    pub texts: Vec<TextBox>,
    pub svg: String,
}

/// The SVG text of one run's timeline.
pub fn timeline_svg(events: &[Event], palette: Palette) -> String {
    picture(&[RunModel::from_events(events)], palette).svg
}

/// Two runs of a file (a lesson's variants, fencing off and on) one above the other
/// on one time axis.
pub fn compare_svg(first: &[Event], second: &[Event], palette: Palette) -> String {
    picture(&[RunModel::from_events(first), RunModel::from_events(second)], palette).svg
}

/// Lay out the runs (their models), one section each, on one time axis.
pub fn picture(models: &[RunModel], palette: Palette) -> Picture {
    let c = palette.colours();
    let mut placer = Placer::new(WIDTH);
    let mut parts: Vec<Group> = Vec::new();
    let none = RunModel::default();
    let first = models.first().unwrap_or(&none);

    // Heading: the title, then what was run and where, each fitted to the width.
    let mut head = Group::new().set("class", "heading");
    let title = fitted(20.0, 46.0, 34.0, true, &first.scenario_title);
    head = put(&mut placer, head, title, c.text);
    let mut y = 80.0;
    let mut subtitles = Vec::new();
    if models.len() == 1 {
        subtitles.push(run_line(first));
    }
    subtitles.push(format!("recorded on {}", first.backend));
    for line in subtitles {
        head = put(&mut placer, head, fitted(20.0, y, 20.0, false, &line), c.dim)
            .set("class", "heading subtitle");
        y += 28.0;
    }
    parts.push(head);

    let end_ms = models.iter().map(run_end).fold(0.0, f64::max);
    let scale = scale_to(end_ms);
    let axis_baseline = y + 14.0;
    let top = axis_baseline + 10.0;
    y = top + 8.0;
    let mut sections = Group::new().set("class", "runs");
    for (n, model) in models.iter().enumerate() {
        if models.len() > 1 {
            if n > 0 {
                sections = sections.add(hline(y - 4.0, c.text));
            }
            let label = fitted(20.0, y + 28.0, 22.0, true, &run_line(model));
            sections = put(&mut placer, sections, label, c.text);
            y += 44.0;
        }
        let section;
        (section, y) = lanes::section(model, &scale, y, &mut placer, &c);
        sections = sections.add(section);
        y += 16.0;
    }
    parts.push(axis(&scale, axis_baseline, top, y, &mut placer, &c));
    parts.push(sections);
    // Link faults' marks (lessons 21, 22) are explained only where they are drawn.
    let links =
        models.iter().any(|m| m.events().iter().any(|e| matches!(e.kind, EventKind::Link { .. })));
    let (legend, bottom) = legend(service_of(first), links, y + 20.0, &mut placer, &c);
    parts.push(legend);
    let height = (bottom + 24.0).round();

    let mut doc = Document::new()
        .set("viewBox", (0, 0, WIDTH, height))
        .set("width", WIDTH)
        .set("height", height)
        .set("font-family", FONT)
        .add(Title::new(format!("{}: {}", first.scenario_title, first.label)))
        .add(stripes(&c))
        .add(rect(0.0, 0.0, WIDTH, height, c.background));
    for part in parts {
        doc = doc.add(part);
    }
    // XML 1.0 allows no control characters but tab and newlines: a title or a worker
    // name from a scenario file must not leave a picture that no viewer opens.
    let svg = super::printable::printable(&doc.to_string()).into_owned();
    Picture { width: WIDTH, height, texts: placer.placed, svg }
}

/// When the run ended (or its last event, if it did not).
fn run_end(model: &RunModel) -> f64 {
    model.ended.as_ref().map_or(model.last_ms, |(t, _)| *t)
}

/// A scale from 0 to a little after `end_ms`, ending on a tick.
fn scale_to(end_ms: f64) -> Scale {
    let end = if end_ms.is_finite() && end_ms > 0.0 { end_ms.min(f64::MAX / 2.0) } else { 1000.0 };
    let raw = Scale { left: LEFT, columns: COLUMNS, end_ms: end * 1.04 };
    let step = tick_step(&raw, 110.0);
    let end_ms = ((raw.end_ms / step).ceil() * step).max(step);
    Scale { end_ms: if end_ms.is_finite() { end_ms } else { raw.end_ms }, ..raw }
}

/// "fencing tokens: on · fencing ON · no stale write accepted".
fn run_line(model: &RunModel) -> String {
    let fencing = if model.fencing_at_start { "fencing ON · " } else { "fencing OFF · " };
    let fencing = if model.label.contains("fencing") { "" } else { fencing };
    let verdict = crate::output::transcript::verdict(
        &model.violations,
        model.lock.unwrap_or(&crate::scenario::spec::REDIS),
    );
    let verdict = verdict.first().map_or("", |v| v.trim_start_matches("checker: "));
    format!("{} · {fencing}{verdict}", model.label)
}

fn service_of(model: &RunModel) -> &'static str {
    model.lock.map_or("Redis", |lock| lock.home.server())
}

/// A text box at (x, baseline), shortened in the middle to fit the canvas.
fn fitted(x: f64, baseline: f64, size: f64, bold: bool, content: &str) -> TextBox {
    let text = elide_middle(content, size, bold, WIDTH - x - 24.0);
    TextBox { x, baseline, size, bold, text }
}

/// Add `tb` to `g` if the placer finds room for it.
fn put(placer: &mut Placer, g: Group, tb: TextBox, fill: &str) -> Group {
    match placer.try_place(tb) {
        Some(tb) => g.add(text(&tb, fill)),
        None => g,
    }
}

pub(super) fn text(tb: &TextBox, fill: &str) -> Text {
    let t = Text::new(tb.text.clone())
        .set("x", round(tb.x))
        .set("y", round(tb.baseline))
        .set("font-size", tb.size)
        .set("fill", fill);
    if tb.bold { t.set("font-weight", "bold") } else { t }
}

fn rect(x: f64, y: f64, w: f64, h: f64, fill: &str) -> Rectangle {
    Rectangle::new()
        .set("x", round(x))
        .set("y", round(y))
        .set("width", round(w.max(0.0)))
        .set("height", round(h))
        .set("fill", fill)
}

fn vline(x: f64, y1: f64, y2: f64, stroke: &str, width: f64) -> Line {
    Line::new()
        .set("x1", round(x))
        .set("x2", round(x))
        .set("y1", round(y1))
        .set("y2", round(y2))
        .set("stroke", stroke)
        .set("stroke-width", width)
}

fn hline(y: f64, stroke: &str) -> Line {
    Line::new()
        .set("x1", 20)
        .set("x2", WIDTH - RIGHT)
        .set("y1", round(y))
        .set("y2", round(y))
        .set("stroke", stroke)
        .set("stroke-width", 1)
}

/// Two decimals are plenty for a picture, and keep the file stable across runs.
fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// The hatching of a pause, drawn over the worker's pale colour (and over grey in the
/// legend), so "paused" never reads as another worker's colour.
fn stripes(c: &Colours) -> Definitions {
    Definitions::new().add(
        Pattern::new()
            .set("id", "paused")
            .set("patternUnits", "userSpaceOnUse")
            .set("width", 8)
            .set("height", 8)
            .set("patternTransform", "rotate(45)")
            .add(rect(0.0, 0.0, 3.0, 8.0, c.text).set("opacity", 0.45)),
    )
}

/// Vertical lines and their labels at ticks far enough apart for the labels.
fn axis(
    scale: &Scale,
    baseline: f64,
    top: f64,
    bottom: f64,
    placer: &mut Placer,
    c: &Colours,
) -> Group {
    let mut g = Group::new().set("class", "grid");
    let step = tick_step(scale, 110.0);
    let ticks = (scale.end_ms / step).round().min(COLUMNS as f64) as u64;
    for i in 0..=ticks {
        let t = i as f64 * step;
        let x = scale.x(t);
        g = g.add(vline(x, top, bottom, c.grid, 1.0));
        let label = tick_label(t);
        let w = text::width(&label, BODY, false);
        let tb = TextBox { x: x - w / 2.0, baseline, size: BODY, bold: false, text: label };
        g = put(placer, g, tb, c.dim);
    }
    g
}

/// What the colours and marks mean, in rows that wrap at the right edge.
fn legend(service: &str, links: bool, y: f64, placer: &mut Placer, c: &Colours) -> (Group, f64) {
    let items: [(&str, f64, bool, String); 4] = [
        (WORKERS[0], 1.0, false, "believes it holds the lock".to_string()),
        (c.dim, 0.35, true, "paused (GC, slow disk)".to_string()),
        (c.dim, 0.25, false, "waiting".to_string()),
        (c.danger, 1.0, false, format!("DANGER: believes it holds it, {service} disagrees")),
    ];
    let mut g = Group::new().set("class", "legend");
    let (mut x, mut y) = (LEFT, y);
    for (fill, opacity, striped, label) in items {
        let w = 30.0 + text::width(&label, BODY, false);
        if x + w > WIDTH - RIGHT {
            (x, y) = (LEFT, y + 30.0);
        }
        g = g.add(rect(x, y - 14.0, 22.0, 18.0, fill).set("opacity", opacity));
        if striped {
            g = g.add(rect(x, y - 14.0, 22.0, 18.0, "url(#paused)"));
        }
        let tb = TextBox { x: x + 30.0, baseline: y, size: BODY, bold: false, text: label };
        g = put(placer, g, tb, c.text);
        x += w + 30.0;
    }
    let notes = [
        "thin bar: the lease, from its grant to its release;  ╳ where it ran out",
        "✔ accepted / ✘ rejected write, with its fencing token",
        "the worker's link: ~2.5s replies that late · ✂ cut · ⇄ healed · ?renew no answer",
    ];
    for note in &notes[..if links { 3 } else { 2 }] {
        y += 30.0;
        g = put(placer, g, fitted(LEFT, y, BODY, false, note), c.dim);
    }
    (g, y)
}
