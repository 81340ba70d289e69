//! A picture of a saved run for slides and posts: the timeline as SVG.
//!
//! One lane per worker shows what it believed (holding, paused, waiting) and its lease
//! as a thin bar; where it believed it held the lock while the lock service said
//! otherwise, the lane turns to the danger colour. Under the workers, the truth lane
//! shows who the lock service listed as holder. Writes carry their token and verdict;
//! a rejected write is marked as such. Built from the same run model as the TUI, so
//! the picture and the screen agree.

use svg::Document;
use svg::node::element::{Group, Line, Rectangle, Text, Title};

use crate::engine::log::{Event, EventKind};
use crate::model::{Belief, RunModel, Span, WriteMark};
use crate::scenario::LockService;

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
                dim: "#6b6b6b",
                grid: "#e3e3e3",
                danger: "#d55e00",
                accepted: "#009e73",
                rejected: "#cc79a7",
            },
            Palette::Dark => Colours {
                background: "#16181d",
                text: "#f0f0f0",
                dim: "#9a9a9a",
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
const LEFT: f64 = 150.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 90.0;
const LANE: f64 = 64.0;
const BAR: f64 = 26.0;
const FONT: &str = "DejaVu Sans, Verdana, sans-serif";

/// Horizontal position of scenario time `t_ms`.
struct Scale {
    end_ms: f64,
}

impl Scale {
    fn x(&self, t_ms: f64) -> f64 {
        LEFT + (t_ms / self.end_ms).clamp(0.0, 1.0) * (WIDTH - LEFT - RIGHT)
    }
}

/// The SVG text of one run's timeline.
pub fn timeline_svg(events: &[Event], palette: Palette) -> String {
    let model = RunModel::from_events(events);
    let c = palette.colours();
    let last = model.ended.as_ref().map_or(model.last_ms, |(t, _)| *t);
    // Whole seconds, with room after the last event.
    let scale = Scale { end_ms: ((last * 1.05) / 1000.0).ceil().max(1.0) * 1000.0 };
    let service = match events.first().map(|e| &e.kind) {
        Some(EventKind::RunStarted { scenario, .. })
            if scenario.lock.service() == LockService::Etcd =>
        {
            "etcd"
        }
        _ => "Redis",
    };
    let truth_y = TOP + LANE * model.lanes.len() as f64;
    let height = truth_y + LANE + 110.0;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, WIDTH, height))
        .set("width", WIDTH)
        .set("height", height)
        .set("font-family", FONT)
        .add(Title::new(format!("{}: {}", model.scenario_title, model.label)))
        .add(rect(0.0, 0.0, WIDTH, height, c.background));
    doc = doc.add(heading(&model, &c)).add(grid(&scale, truth_y + LANE, &c));
    for i in 0..model.lanes.len() {
        doc = doc.add(worker_lane(&model, i, lane_y(i), &scale, &c));
    }
    doc = doc.add(truth_lane(&model, service, truth_y, &scale, &c)).add(legend(
        service,
        height - 50.0,
        &c,
    ));
    // XML 1.0 allows no control characters but tab and newlines: a title or a worker
    // name from a scenario file must not leave a picture that no viewer opens.
    super::printable::printable(&doc.to_string()).into_owned()
}

fn lane_y(i: usize) -> f64 {
    TOP + LANE * i as f64
}

fn rect(x: f64, y: f64, w: f64, h: f64, fill: &str) -> Rectangle {
    Rectangle::new()
        .set("x", round(x))
        .set("y", round(y))
        .set("width", round(w.max(0.0)))
        .set("height", round(h))
        .set("fill", fill)
}

fn text(x: f64, y: f64, size: u32, fill: &str, content: impl Into<String>) -> Text {
    Text::new(content)
        .set("x", round(x))
        .set("y", round(y))
        .set("font-size", size)
        .set("fill", fill)
}

/// Two decimals are plenty for a picture, and keep the file stable across runs.
fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn heading(model: &RunModel, c: &Colours) -> Group {
    let fencing = if model.fencing_at_start { "fencing ON · " } else { "fencing OFF · " };
    let fencing = if model.label.contains("fencing") { "" } else { fencing };
    let verdict = crate::output::transcript::verdict(&model.violations);
    let verdict = verdict.first().map_or("", |v| v.trim_start_matches("checker: "));
    Group::new()
        .set("class", "heading")
        .add(text(LEFT, 36.0, 24, c.text, model.scenario_title.clone()).set("font-weight", "bold"))
        .add(text(
            LEFT,
            62.0,
            15,
            c.dim,
            format!("{} · {fencing}{verdict} · recorded on {}", model.label, model.backend),
        ))
}

/// A vertical line and a label every second.
fn grid(scale: &Scale, bottom: f64, c: &Colours) -> Group {
    let mut g = Group::new().set("class", "grid");
    let seconds = (scale.end_ms / 1000.0) as u32;
    for s in 0..=seconds {
        let x = scale.x(f64::from(s) * 1000.0);
        g = g
            .add(
                Line::new()
                    .set("x1", round(x))
                    .set("x2", round(x))
                    .set("y1", TOP - 10.0)
                    .set("y2", bottom)
                    .set("stroke", c.grid),
            )
            .add(text(x - 8.0, TOP - 16.0, 13, c.dim, format!("{s} s")));
    }
    g
}

/// Belief spans as (from, to, belief), the last one ending at the run's end.
fn stretches<T: Clone>(spans: &[Span<T>], end: f64) -> Vec<(f64, f64, T)> {
    spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.from_ms, spans.get(i + 1).map_or(end, |n| n.from_ms), s.value.clone()))
        .collect()
}

fn worker_lane(model: &RunModel, i: usize, y: f64, scale: &Scale, c: &Colours) -> Group {
    let lane = &model.lanes[i];
    let colour = WORKERS[i % WORKERS.len()];
    let end = model.ended.as_ref().map_or(model.last_ms, |(t, _)| *t);
    let mut g = Group::new()
        .set("class", "lane")
        .set("data-worker", lane.name.clone())
        .add(text(20.0, y + BAR * 0.8, 20, colour, lane.name.clone()).set("font-weight", "bold"));
    // Cut each belief at every change of the truth, so danger shows exactly.
    let mut cuts: Vec<f64> = model.truth.iter().map(|s| s.from_ms).collect();
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    for (from, to, belief) in stretches(&lane.spans, end) {
        if to <= from {
            continue;
        }
        let inner = cuts.iter().copied().filter(|t| *t > from && *t < to);
        let bounds: Vec<f64> = std::iter::once(from).chain(inner).chain([to]).collect();
        // One rectangle per run of the same verdict (safe or danger).
        let mut piece: Option<(f64, f64, bool)> = None;
        for w in bounds.windows(2) {
            let (a, b) = (w[0], w[1]);
            let holder = model.holder_at(a);
            let danger = belief.held_token().is_some() && holder != Some(lane.name.as_str());
            piece = match piece {
                Some((start, _, d)) if d == danger => Some((start, b, d)),
                Some((start, stop, d)) => {
                    g = g.add(belief_rect(belief, d, scale.x(start), scale.x(stop), y, colour, c));
                    Some((a, b, danger))
                }
                None => Some((a, b, danger)),
            };
        }
        if let Some((start, stop, d)) = piece {
            g = g.add(belief_rect(belief, d, scale.x(start), scale.x(stop), y, colour, c));
        }
    }
    for t in grants(model, &lane.name) {
        let (x0, x1) = (scale.x(t), scale.x(t + model.ttl_ms as f64));
        g = g.add(
            rect(x0, y + BAR + 4.0, x1 - x0, 4.0, colour).set("class", "lease").set("opacity", 0.6),
        );
    }
    for mark in model.marks.iter().filter(|m| m.lane == i && m.label.starts_with("got")) {
        let label = mark.label.replace("got", "token");
        g = g.add(text(scale.x(mark.t_ms) + 3.0, y + BAR + 22.0, 13, c.dim, label));
    }
    for w in model.writes.iter().filter(|w| w.worker == lane.name) {
        g = g.add(write_mark(w, scale.x(w.t_ms), y, c));
    }
    // The worker's link failing (`~2.5s`, `✂`, `⇄`) and calls that got no answer.
    for mark in model.marks.iter().filter(|m| m.lane == i && is_link_mark(&m.label)) {
        let label = text(scale.x(mark.t_ms) + 3.0, y - 3.0, 13, c.dim, mark.label.clone());
        g = g.add(label.set("class", "link"));
    }
    g
}

fn is_link_mark(label: &str) -> bool {
    label.starts_with(['~', '✂', '⇄', '?'])
}

/// When this worker was granted the lock: when the lock service granted it, which is
/// the reply's time less the call's latency (a reply that arrives late came from a
/// grant made long before).
fn grants<'a>(model: &'a RunModel, worker: &'a str) -> impl Iterator<Item = f64> + 'a {
    let mut latency = 0.0;
    let mut time_scale = 1.0;
    model.events().iter().filter_map(move |e| match &e.kind {
        EventKind::RunStarted { time_scale: scale, .. } => {
            time_scale = *scale;
            None
        }
        EventKind::Command { worker: w, latency_ms, .. } if w == worker => {
            latency = latency_ms / time_scale;
            None
        }
        EventKind::Worker { worker: w, what: crate::engine::log::WorkerEvent::Acquired { .. } }
            if w == worker =>
        {
            Some(e.t_ms - latency)
        }
        _ => None,
    })
}

fn belief_rect(
    belief: Belief,
    danger: bool,
    x0: f64,
    x1: f64,
    y: f64,
    colour: &str,
    c: &Colours,
) -> Rectangle {
    let (fill, opacity, class) = match belief {
        _ if danger => (c.danger, 1.0, "danger"),
        Belief::Holding { .. } => (colour, 1.0, "holding"),
        Belief::Paused { .. } => (colour, 0.35, "paused"),
        Belief::Waiting => (c.dim, 0.25, "waiting"),
        _ => (c.background, 0.0, "idle"),
    };
    rect(x0, y, x1 - x0, BAR, fill).set("opacity", opacity).set("class", class)
}

fn write_mark(w: &WriteMark, x: f64, y: f64, c: &Colours) -> Group {
    let token = w.token.map_or("-".to_string(), |t| t.to_string());
    let (label, colour, class) = match (w.accepted, w.stale) {
        (true, true) => (format!("✔ write {token} STALE"), c.danger, "write accepted stale"),
        (true, false) => (format!("✔ write {token}"), c.accepted, "write accepted"),
        (false, _) => (format!("✘ write {token} rejected"), c.rejected, "write rejected"),
    };
    Group::new()
        .set("class", class)
        .add(
            Line::new()
                .set("x1", round(x))
                .set("x2", round(x))
                .set("y1", round(y - 6.0))
                .set("y2", round(y + BAR + 6.0))
                .set("stroke", colour)
                .set("stroke-width", 3),
        )
        .add(text(x + 5.0, y - 8.0, 14, colour, label).set("font-weight", "bold"))
}

fn truth_lane(model: &RunModel, service: &str, y: f64, scale: &Scale, c: &Colours) -> Group {
    let end = model.ended.as_ref().map_or(model.last_ms, |(t, _)| *t);
    let mut g = Group::new()
        .set("class", "truth")
        .add(text(20.0, y + BAR * 0.55, 15, c.text, format!("{service} says")))
        .add(text(20.0, y + BAR * 1.25, 13, c.dim, "the holder"));
    for (from, to, holder) in stretches(&model.truth, end) {
        let Some(holder) = holder else { continue };
        let i = model.lanes.iter().position(|l| l.name == holder).unwrap_or(0);
        let (x0, x1) = (scale.x(from), scale.x(to));
        g = g.add(rect(x0, y, x1 - x0, BAR, WORKERS[i % WORKERS.len()]).set("opacity", 0.8)).add(
            text(x0 + 4.0, y + BAR * 0.72, 14, c.background, holder).set("font-weight", "bold"),
        );
    }
    g
}

fn legend(service: &str, y: f64, c: &Colours) -> Group {
    let items = [
        (WORKERS[0], 1.0, "believes it holds the lock".to_string()),
        (WORKERS[0], 0.35, "paused (GC, slow disk)".to_string()),
        (c.dim, 0.25, "waiting".to_string()),
        (c.danger, 1.0, format!("DANGER: believes it holds it, {service} disagrees")),
    ];
    let mut g = Group::new().set("class", "legend");
    let mut x = LEFT;
    for (fill, opacity, label) in items {
        g = g.add(rect(x, y, 18.0, 14.0, fill).set("opacity", opacity)).add(text(
            x + 24.0,
            y + 12.0,
            13,
            c.text,
            label.clone(),
        ));
        x += 34.0 + 7.2 * label.chars().count() as f64;
    }
    g.add(text(
        LEFT,
        y + 34.0,
        13,
        c.dim,
        "thin bar: the lease as granted · ✔ accepted / ✘ rejected write, with its fencing token",
    ))
}
