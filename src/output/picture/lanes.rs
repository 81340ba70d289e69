//! One run's lanes on the picture: a lane per worker (beliefs, lease, writes, marks)
//! and the lock service's own lane of holders. Each is painted into per-pixel columns
//! first and drawn from their runs, so its cost is one pass over the run's spans and
//! events plus the picture's width.

use std::collections::HashMap;

use svg::node::element::Group;

use super::columns::{Columns, Scale};
use super::text::{Placer, TextBox, elide_middle, width};
use super::{BAR, BAR_TOP, BODY, Colours, LANE, LEFT, MIN_PX, WORKERS, put, rect, vline};
use crate::engine::log::{EventKind, Said, WorkerEvent};
use crate::view_model::{Belief, RunModel, Span};

/// What a lane's column shows; a later variant outranks an earlier one in a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Shade {
    Waiting,
    Paused,
    Holding,
    Danger,
}

/// How a write is shown; a later variant wins a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Accepted,
    Rejected,
    Stale,
}

/// What the events say of one worker beyond its beliefs.
struct Extras {
    /// Its leases, from grant to release or to running out.
    leases: Columns<u8>,
    /// Where a lease ran out before the worker let it go.
    expiries: Columns<u8>,
    /// Where its `DEL` deleted another worker's key, and whose.
    deletes: Vec<(f64, String)>,
}

/// One run's lanes from `y` down; returns the group and the `y` below it.
pub fn section(
    model: &RunModel,
    scale: &Scale,
    mut y: f64,
    placer: &mut Placer,
    c: &Colours,
) -> (Group, f64) {
    let mut g = Group::new().set("class", "section").set("data-label", model.label.clone());
    let mut extras = extras(model, scale);
    for (i, lane) in model.lanes.iter().enumerate() {
        let colour = WORKERS[i % WORKERS.len()];
        let mut lg = Group::new().set("class", "lane").set("data-worker", lane.name.clone());
        let name = elide_middle(&lane.name, 24.0, true, LEFT - 30.0);
        let name =
            TextBox { x: 20.0, baseline: y + BAR_TOP + 24.0, size: 24.0, bold: true, text: name };
        lg = put(placer, lg, name, colour);
        lg = beliefs(lg, model, i, scale, y, colour, c);
        let extra = &mut extras[i];
        for (first, len, _) in extra.leases.runs() {
            let w = (len as f64).max(MIN_PX);
            let bar = rect(scale.column_x(first), y + BAR_TOP + BAR + 4.0, w, 6.0, colour);
            lg = lg.add(bar.set("class", "lease").set("opacity", 0.7));
        }
        // Labels above the bar, the most telling first: an unsafe DEL, writes, expiries.
        for (t, whose) in std::mem::take(&mut extra.deletes) {
            let x = scale.x(t);
            lg = lg.add(vline(x, y + BAR_TOP - 6.0, y + BAR_TOP + BAR + 12.0, c.danger, 3.0));
            let label = format!("DEL deletes {whose}'s key");
            let tb =
                TextBox { x: x + 5.0, baseline: y + 20.0, size: BODY, bold: true, text: label };
            lg = put(placer, lg.set("class", "lane"), tb, c.danger);
        }
        lg = writes(lg, model, &lane.name, scale, y, placer, c);
        for (first, _, _) in extra.expiries.runs() {
            let x = scale.column_x(first);
            let (top, bottom) = (y + BAR_TOP + BAR - 2.0, y + BAR_TOP + BAR + 14.0);
            let cross = |a: f64, b: f64| {
                svg::node::element::Line::new()
                    .set("x1", super::round(x - 6.0))
                    .set("x2", super::round(x + 6.0))
                    .set("y1", super::round(a))
                    .set("y2", super::round(b))
                    .set("stroke", c.text)
                    .set("stroke-width", 2.5)
            };
            lg = lg.add(
                Group::new().set("class", "expiry").add(cross(top, bottom)).add(cross(bottom, top)),
            );
            let tb = TextBox {
                x: x + 9.0,
                baseline: y + BAR_TOP + BAR + 30.0,
                size: BODY,
                bold: false,
                text: "lease ran out".to_string(),
            };
            lg = put(placer, lg, tb, c.dim);
        }
        // Per column its first grant (marks are in time order: the lowest index).
        let mut tokens = Columns::new(scale);
        for (n, mark) in model.marks.iter().enumerate() {
            if mark.lane == i && mark.label.starts_with("got") {
                let col = scale.column(mark.t_ms);
                tokens.paint((col, col), std::cmp::Reverse(n));
            }
        }
        for (first, _, std::cmp::Reverse(n)) in tokens.runs() {
            let mark = &model.marks[n];
            let label = match mark.label.as_str() {
                "got" => "no token".to_string(),
                got => got.replace("got", "token"),
            };
            let x = scale.column_x(first) + 3.0;
            let baseline = y + BAR_TOP + BAR + 30.0;
            let tb = TextBox { x, baseline, size: BODY, bold: false, text: label };
            lg = put(placer, lg, tb, c.dim);
        }
        // The worker's link failing (`~2.5s`, `✂`, `⇄`) and calls that got no answer:
        // above its bar, else below it, else on the bar itself (a write's label may
        // have taken the row above: a heal and a write come close together).
        for mark in model.marks.iter().filter(|m| m.lane == i && is_link_mark(&m.label)) {
            let x = scale.x(mark.t_ms) + 3.0;
            let rows = [
                (y + BAR_TOP - 6.0, c.dim),
                (y + BAR_TOP + BAR + 30.0, c.dim),
                (y + BAR_TOP + 23.0, c.background),
            ];
            let placed = rows.into_iter().find_map(|(baseline, fill)| {
                let text = mark.label.clone();
                let tb = TextBox { x, baseline, size: BODY, bold: false, text };
                placer.try_place(tb).map(|tb| (tb, fill))
            });
            if let Some((tb, fill)) = placed {
                lg = lg.add(super::text(&tb, fill).set("class", "link"));
            }
        }
        g = g.add(lg);
        y += LANE;
    }
    g = g.add(truth_lane(model, scale, y, placer, c));
    y += LANE;
    for node in 0..model.nodes.len() {
        g = g.add(node_lane(model, node, scale, y, placer, c));
        y += NODE_LANE;
    }
    (g, y)
}

/// A Redlock node's lane: lower than a worker's, a bar and a row of labels.
const NODE_LANE: f64 = 64.0;
const NODE_BAR: f64 = 20.0;

/// Redlock: who node `node` lists (a worker's colour), striped while it is down,
/// and its own marks (lesson 20's clock jump), so a slide shows what the majority
/// was made of.
fn node_lane(
    model: &RunModel,
    node: usize,
    scale: &Scale,
    y: f64,
    placer: &mut Placer,
    c: &Colours,
) -> Group {
    let mut g = Group::new().set("class", "node").set("data-node", node + 1);
    let bar_top = y + 6.0;
    let name = TextBox {
        x: 40.0,
        baseline: bar_top + 16.0,
        size: BODY,
        bold: false,
        text: format!("node {}", node + 1),
    };
    g = put(placer, g, name, c.dim);
    let index: HashMap<&str, usize> =
        model.lanes.iter().enumerate().map(|(i, l)| (l.name.as_str(), i)).collect();
    let mut listed: Vec<Columns<u8>> = model.lanes.iter().map(|_| Columns::new(scale)).collect();
    let mut down = Columns::new(scale);
    let spans = model.nodes.get(node).map_or(&[][..], Vec::as_slice);
    for (from, to, state) in stretches(spans, super::run_end(model)) {
        let columns = match &state {
            None => &mut down,
            Some(Some(holder)) => match index.get(holder.as_str()) {
                Some(&i) => &mut listed[i],
                None => continue,
            },
            Some(None) => continue,
        };
        columns.paint(scale.span(from, to.max(from)), 1);
    }
    for (i, cols) in listed.iter().enumerate() {
        for (first, len, _) in cols.runs() {
            let (x, w) = (scale.column_x(first), (len as f64).max(MIN_PX));
            let fill = WORKERS[i % WORKERS.len()];
            g = g.add(
                rect(x, bar_top, w, NODE_BAR, fill).set("opacity", 0.85).set("class", "holder"),
            );
            let who = &model.lanes[i].name;
            if width(who, BODY, true) + 8.0 <= w {
                let text = who.clone();
                let tb =
                    TextBox { x: x + 4.0, baseline: bar_top + 16.0, size: BODY, bold: true, text };
                g = put(placer, g, tb, c.background);
            }
        }
    }
    for (first, len, _) in down.runs() {
        let (x, w) = (scale.column_x(first), (len as f64).max(MIN_PX));
        g = g.add(rect(x, bar_top, w, NODE_BAR, "url(#paused)").set("class", "down"));
        let text = "down".to_string();
        let tb = TextBox {
            x: x + 4.0,
            baseline: bar_top + NODE_BAR + 22.0,
            size: BODY,
            bold: false,
            text,
        };
        g = put(placer, g, tb, c.dim);
    }
    for mark in model.node_marks.iter().filter(|m| m.lane == node) {
        let x = scale.x(mark.t_ms);
        g = g.add(
            vline(x, bar_top - 4.0, bar_top + NODE_BAR + 4.0, c.danger, 3.0).set("class", "jump"),
        );
        let text = format!("clock {}", mark.label.trim_start_matches('»'));
        let tb = TextBox {
            x: x + 5.0,
            baseline: bar_top + NODE_BAR + 22.0,
            size: BODY,
            bold: true,
            text,
        };
        g = put(placer, g, tb, c.danger);
    }
    g
}

/// Whether a lane mark is about the worker's link (see `view_model::link_mark`).
fn is_link_mark(label: &str) -> bool {
    label.starts_with(['~', '✂', '⇄', '?'])
}

/// Belief stretches as (from, to, belief), the last one ending at the run's end.
fn stretches<T: Clone>(spans: &[Span<T>], end: f64) -> impl Iterator<Item = (f64, f64, T)> + '_ {
    spans.iter().enumerate().map(move |(i, s)| {
        (s.from_ms, spans.get(i + 1).map_or(end, |n| n.from_ms), s.value.clone())
    })
}

fn shade(belief: Belief) -> Option<Shade> {
    match belief {
        Belief::Holding { .. } => Some(Shade::Holding),
        Belief::Paused { .. } => Some(Shade::Paused),
        Belief::Waiting => Some(Shade::Waiting),
        _ => None,
    }
}

/// The lane's bar: each belief, cut at every change of the truth so danger shows
/// exactly where the worker believed it held the lock and the service listed another.
fn beliefs(
    mut g: Group,
    model: &RunModel,
    i: usize,
    scale: &Scale,
    y: f64,
    colour: &str,
    c: &Colours,
) -> Group {
    let lane = &model.lanes[i];
    let me = Some(lane.name.as_str());
    let truth = &model.truth;
    let mut cols = Columns::new(scale);
    for (from, to, belief) in stretches(&lane.spans, super::run_end(model)) {
        let Some(base) = shade(belief) else { continue };
        if to < from {
            continue;
        }
        if belief.held_token().is_none() {
            cols.paint(scale.span(from, to), base);
            continue;
        }
        if to == from {
            // A hold of no time (acquire, write, release in one ms): safe if the
            // service listed this worker at that moment.
            let lo = truth.partition_point(|s| s.from_ms < from).saturating_sub(1);
            let hi = truth.partition_point(|s| s.from_ms <= from);
            let mine = truth[lo.min(hi)..hi].iter().any(|s| s.value.as_deref() == me);
            cols.paint(scale.span(from, to), if mine { base } else { Shade::Danger });
            continue;
        }
        let mut k = truth.partition_point(|s| s.from_ms <= from);
        let mut holder = k.checked_sub(1).and_then(|k| truth[k].value.as_deref());
        let mut a = from;
        loop {
            let b = truth.get(k).map_or(to, |s| s.from_ms.min(to));
            if b > a {
                cols.paint(scale.span(a, b), if holder == me { base } else { Shade::Danger });
            }
            match truth.get(k) {
                Some(s) if s.from_ms < to => {
                    a = s.from_ms;
                    holder = s.value.as_deref();
                    k += 1;
                }
                _ => break,
            }
        }
    }
    // Lower shades first, so a short hold drawn at its minimum width stays on top.
    let mut runs = cols.runs();
    runs.sort_by_key(|r| r.2);
    for (first, len, shade) in runs {
        let x = scale.column_x(first);
        let w = if shade >= Shade::Holding { (len as f64).max(MIN_PX) } else { len as f64 };
        let (fill, opacity, class) = match shade {
            Shade::Danger => (c.danger, 1.0, "danger"),
            Shade::Holding => (colour, 1.0, "holding"),
            Shade::Paused => (colour, 0.35, "paused"),
            Shade::Waiting => (c.dim, 0.25, "waiting"),
        };
        g = g.add(rect(x, y + BAR_TOP, w, BAR, fill).set("opacity", opacity).set("class", class));
        if shade == Shade::Paused {
            g = g.add(rect(x, y + BAR_TOP, w, BAR, "url(#paused)"));
        }
    }
    g
}

/// Leases, expiries and unsafe deletes per lane, from one pass over the events.
fn extras(model: &RunModel, scale: &Scale) -> Vec<Extras> {
    let index: HashMap<&str, usize> =
        model.lanes.iter().enumerate().map(|(i, l)| (l.name.as_str(), i)).collect();
    let mut out: Vec<Extras> = model
        .lanes
        .iter()
        .map(|_| Extras {
            leases: Columns::new(scale),
            expiries: Columns::new(scale),
            deletes: Vec::new(),
        })
        .collect();
    // ttl 0: a lease that never runs out by itself.
    let ttl = (model.ttl_ms > 0).then_some(model.ttl_ms as f64);
    // Per worker: the open lease's grant and deadline.
    let mut open: Vec<Option<(f64, Option<f64>)>> = vec![None; model.lanes.len()];
    let close = |extra: &mut Extras, (from, deadline): (f64, Option<f64>), at: f64| {
        let until = deadline.map_or(at, |d| d.min(at));
        extra.leases.paint(scale.span(from, until), 1);
        if let Some(d) = deadline.filter(|d| *d < at) {
            let col = scale.column(d);
            extra.expiries.paint((col, col), 1);
        }
    };
    // A lease starts when the lock service granted it: the reply's time less the
    // call's latency (a reply that arrives late comes from a grant made long before).
    let mut time_scale = 1.0;
    let mut latency = vec![0.0; model.lanes.len()];
    for e in model.events() {
        let (worker, what) = match &e.kind {
            EventKind::RunStarted { time_scale: scale, .. } => {
                time_scale = *scale;
                continue;
            }
            EventKind::Command { worker, latency_ms, .. } => {
                if let Some(&i) = index.get(worker.as_str()) {
                    latency[i] = latency_ms / time_scale;
                }
                continue;
            }
            EventKind::Worker { worker, what } => (worker, what),
            _ => continue,
        };
        let Some(&i) = index.get(worker.as_str()) else { continue };
        let t = e.t_ms;
        match what {
            WorkerEvent::Acquired { .. } => {
                if let Some(lease) = open[i].take() {
                    close(&mut out[i], lease, t);
                }
                let granted = t - latency[i];
                open[i] = Some((granted, ttl.map(|ttl| granted + ttl)));
            }
            WorkerEvent::Renewed { extended: true } => {
                if let Some((_, deadline)) = open[i].as_mut() {
                    *deadline = ttl.map(|ttl| t + ttl);
                }
            }
            WorkerEvent::Released { deleted, unsafe_del } => {
                if *deleted && *unsafe_del {
                    let before = model.truth.partition_point(|s| s.from_ms < t);
                    let holder = before.checked_sub(1).and_then(|k| model.truth[k].value.clone());
                    if let Some(other) = holder.filter(|h| h != worker) {
                        out[i].deletes.push((t, other));
                    }
                }
                if let Some(lease) = open[i].take() {
                    close(&mut out[i], lease, t);
                }
            }
            WorkerEvent::Renewed { extended: false }
            | WorkerEvent::Said { said: Said::ReleaseFailed { .. } } => {
                if let Some(lease) = open[i].take() {
                    close(&mut out[i], lease, t);
                }
            }
            _ => {}
        }
    }
    let end = super::run_end(model);
    for (i, lease) in open.into_iter().enumerate() {
        if let Some(lease) = lease {
            close(&mut out[i], lease, end);
        }
    }
    out
}

/// Write ticks, one per column (the most telling write of the column), labelled where
/// there is room: stale writes first, then rejected, then accepted.
fn writes(
    mut g: Group,
    model: &RunModel,
    worker: &str,
    scale: &Scale,
    y: f64,
    placer: &mut Placer,
    c: &Colours,
) -> Group {
    // Per column: the winning write's verdict and index, and how many writes it holds.
    let mut cols: Vec<Option<(Verdict, usize, usize)>> = vec![None; scale.columns];
    for (n, w) in model.writes.iter().enumerate().filter(|(_, w)| w.worker == worker) {
        let verdict = match (w.accepted, w.stale) {
            (true, true) => Verdict::Stale,
            (true, false) => Verdict::Accepted,
            (false, _) => Verdict::Rejected,
        };
        let cell = &mut cols[scale.column(w.t_ms)];
        *cell = match *cell {
            Some((v, at, count)) if v >= verdict => Some((v, at, count + 1)),
            Some((_, _, count)) => Some((verdict, n, count + 1)),
            None => Some((verdict, n, 1)),
        };
    }
    let mut marks: Vec<(usize, Verdict, usize, usize)> = cols
        .iter()
        .enumerate()
        .filter_map(|(col, cell)| cell.map(|(v, n, count)| (col, v, n, count)))
        .collect();
    for &(col, verdict, _, _) in &marks {
        let colour = verdict_colour(verdict, c);
        let x = scale.column_x(col);
        g = g.add(vline(x, y + BAR_TOP - 6.0, y + BAR_TOP + BAR + 6.0, colour, 3.0));
    }
    marks.sort_by_key(|&(col, verdict, _, _)| (std::cmp::Reverse(verdict), col));
    for (col, verdict, n, count) in marks {
        let w = &model.writes[n];
        let token = w.token.map_or("(no token)".to_string(), |t| t.to_string());
        let mut label = match (verdict, &w.result) {
            // SQL lessons: what the statement did, and whether it had been done before.
            (Verdict::Stale, Some(result)) => format!("✔ {result}: done twice"),
            (Verdict::Rejected, Some(result)) => format!("✘ {result}: repeat refused"),
            (_, Some(result)) => format!("✔ {result}"),
            (Verdict::Stale, None) => format!("✔ write {token} STALE"),
            (Verdict::Accepted, None) => format!("✔ write {token}"),
            (Verdict::Rejected, None) => format!("✘ write {token} rejected"),
        };
        if count > 1 {
            label = format!("{label} (+{})", count - 1);
        }
        let class = match verdict {
            Verdict::Stale => "write accepted stale",
            Verdict::Accepted => "write accepted",
            Verdict::Rejected => "write rejected",
        };
        let tb = TextBox {
            x: scale.column_x(col) + 5.0,
            baseline: y + 20.0,
            size: BODY,
            bold: true,
            text: label,
        };
        if let Some(tb) = placer.try_place(tb) {
            let colour = verdict_colour(verdict, c);
            g = g.add(Group::new().set("class", class).add(super::text(&tb, colour)));
        }
    }
    g
}

fn verdict_colour(verdict: Verdict, c: &Colours) -> &'static str {
    match verdict {
        Verdict::Stale => c.danger,
        Verdict::Accepted => c.accepted,
        Verdict::Rejected => c.rejected,
    }
}

/// Who the lock service listed, a colour per worker; a holder for a millisecond still
/// gets `MIN_PX`.
fn truth_lane(model: &RunModel, scale: &Scale, y: f64, placer: &mut Placer, c: &Colours) -> Group {
    let service = super::service_of(model);
    let mut g = Group::new().set("class", "truth");
    let name = TextBox {
        x: 20.0,
        baseline: y + BAR_TOP + 14.0,
        size: 20.0,
        bold: true,
        text: format!("{service} says"),
    };
    g = put(placer, g, name, c.text);
    let sub = TextBox {
        x: 20.0,
        baseline: y + BAR_TOP + 36.0,
        size: BODY,
        bold: false,
        text: "the holder".to_string(),
    };
    g = put(placer, g, sub, c.dim);
    let index: HashMap<&str, usize> =
        model.lanes.iter().enumerate().map(|(i, l)| (l.name.as_str(), i)).collect();
    let mut holders: Vec<Columns<u8>> = model.lanes.iter().map(|_| Columns::new(scale)).collect();
    for (from, to, holder) in stretches(&model.truth, super::run_end(model)) {
        if let Some(&i) = holder.as_deref().and_then(|h| index.get(h)) {
            holders[i].paint(scale.span(from, to.max(from)), 1);
        }
    }
    // Long holds first, so a short one lands on top of its neighbours.
    let mut runs: Vec<(usize, usize, usize)> = holders
        .iter()
        .enumerate()
        .flat_map(|(i, cols)| cols.runs().into_iter().map(move |(first, len, _)| (i, first, len)))
        .collect();
    runs.sort_by_key(|&(_, _, len)| std::cmp::Reverse(len));
    // Names go on after every bar, so a later bar never covers one.
    let mut names = Vec::new();
    for (i, first, len) in runs {
        let x = scale.column_x(first);
        let w = (len as f64).max(MIN_PX);
        let fill = WORKERS[i % WORKERS.len()];
        g = g.add(rect(x, y + BAR_TOP, w, BAR, fill).set("opacity", 0.85).set("class", "holder"));
        let name = &model.lanes[i].name;
        if width(name, BODY, true) + 8.0 <= w {
            let tb = TextBox {
                x: x + 4.0,
                baseline: y + BAR_TOP + 23.0,
                size: BODY,
                bold: true,
                text: name.clone(),
            };
            names.push(tb);
        }
    }
    for tb in names {
        g = put(placer, g, tb, c.background);
    }
    g
}
