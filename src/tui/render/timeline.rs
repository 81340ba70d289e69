//! The timeline: one belief lane per worker, the Redis truth lane, the lease bar.
//!
//! Time runs left to right with "now" at the right edge while a run is live (the
//! window fills from the left first). Each column stands for a slice of time; a
//! lane's glyph there is the worker's belief at that moment, and a danger glyph
//! where the worker believes it holds the lock but Redis lists someone else.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Widget};
use unicode_width::UnicodeWidthStr;

use super::super::app::{App, ClassSeat};
use super::super::theme::Theme;
use super::fit::{first_fitting, title_room};
use crate::view_model::{Belief, RunModel, at};

/// Width of the label column on the left of each lane.
const GUTTER: u16 = 16;
/// Rows per lane: at least the bar and its labels; more (a thicker bar, easier to
/// see on a projector) when the screen has room.
const MIN_LANE_ROWS: usize = 2;
const MAX_LANE_ROWS: usize = 4;
/// The lease row's bar is left out below this many cells.
const MIN_BAR: usize = 4;

/// One timeline row and what it shows.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Row {
    Axis,
    /// "run 1 (fencing off)" above each run in compare mode.
    Title {
        previous: bool,
    },
    Belief {
        previous: bool,
        lane: usize,
    },
    Marks {
        previous: bool,
        lane: usize,
    },
    Truth {
        previous: bool,
    },
    /// Redlock: one lane per node.
    Node {
        previous: bool,
        node: usize,
    },
    Lease,
    /// Compact lanes that do not all fit: which are shown, and how to see the rest.
    More {
        first: usize,
        shown: usize,
    },
}

/// A worker lane's place on screen (both of its rows), for mouse hit-testing.
#[derive(Debug, Clone, Copy)]
pub struct LaneRow {
    pub area: Rect,
    pub lane: usize,
    /// In the current run (not the compared one above it).
    pub current: bool,
}

/// The rows of a timeline `height` rows tall.
fn rows(app: &App, height: u16) -> Vec<Row> {
    fitted_rows(app, height, true)
}

/// The rows of a timeline `height` rows tall; `one_row_lanes`: a lesson's lanes too
/// go to a row each when two do not fit (a class's always do), so the rows of the
/// lesson's service under them stay on screen.
fn fitted_rows(app: &App, height: u16, one_row_lanes: bool) -> Vec<Row> {
    let lock = app.uses_lock();
    let mut runs: Vec<(bool, &RunModel)> =
        app.previous().into_iter().map(|r| (true, r)).chain([(false, app.run())]).collect();
    // A compare run on a screen too small for both: the run just asked for, alone,
    // rather than the earlier one with this one cut off below it.
    if runs.len() > 1 && room_for(&runs, app, lock, height) < lanes_in(&runs) * MIN_LANE_ROWS {
        runs.remove(0);
    }
    let lanes = lanes_in(&runs);
    let room = room_for(&runs, app, lock, height);
    // Short of two rows a lane, each lane gets one (its marks go) before the truth,
    // node and lease rows are cut off the bottom: those are what a lesson's service
    // is about (a queue's `pending for` and `job idle`, Redlock's nodes).
    // (A class's lanes are its students: with a lesson they keep their marks, cut
    // short as they were.)
    let one_row = (one_row_lanes && app.class_seat().is_none()) || app.lesson().is_none();
    if app.previous().is_none() && one_row && room < lanes * MIN_LANE_ROWS {
        return compact_rows(app, room, lock);
    }
    let per_lane = room.checked_div(lanes).unwrap_or(0);
    let per_lane = per_lane.clamp(MIN_LANE_ROWS, MAX_LANE_ROWS);
    let mut rows = vec![Row::Axis];
    for (previous, run) in runs {
        if app.previous().is_some() {
            rows.push(Row::Title { previous });
        }
        for lane in 0..run.lanes.len() {
            rows.extend(std::iter::repeat_n(Row::Belief { previous, lane }, per_lane - 1));
            rows.push(Row::Marks { previous, lane });
        }
        if lock {
            rows.push(Row::Truth { previous });
        }
        rows.extend((0..run.nodes.len()).map(|node| Row::Node { previous, node }));
    }
    if lock {
        rows.push(Row::Lease);
    }
    rows
}

/// The height (with its border) below which the timeline cuts rows off its bottom:
/// its axis, each lane at its thinnest (two rows in a lesson), the truth, every node
/// and the lease.
pub fn needed_height(app: &App) -> u16 {
    u16::try_from(fitted_rows(app, 0, false).len() + 2).unwrap_or(u16::MAX)
}

/// How many lanes `runs` have between them.
fn lanes_in(runs: &[(bool, &RunModel)]) -> usize {
    runs.iter().map(|(_, r)| r.lanes.len()).sum()
}

/// The rows left for `runs`' lanes in a timeline `height` rows tall, after the axis,
/// the lease row, and each run's title, truth row and node rows.
fn room_for(runs: &[(bool, &RunModel)], app: &App, lock: bool, height: u16) -> usize {
    let titles = if app.previous().is_some() { runs.len() } else { 0 };
    let node_lanes: usize = runs.iter().map(|(_, r)| r.nodes.len()).sum();
    let truth_lanes = if lock { runs.len() } else { 0 };
    let fixed = 1 + usize::from(lock) + titles + truth_lanes + node_lanes;
    (height as usize).saturating_sub(fixed)
}

/// A class has a lane per student: when two rows a lane do not fit in `room` rows,
/// each lane gets one (its belief, label in the gutter), and past a screenful the
/// lanes scroll a page at a time with the selection (PgUp/PgDn), a row saying which
/// are shown.
fn compact_rows(app: &App, room: usize, lock: bool) -> Vec<Row> {
    let lanes = app.run().lanes.len();
    let (first, shown) = lane_page(lanes, room, app.selected());
    let mut rows = vec![Row::Axis];
    rows.extend((first..first + shown).map(|lane| Row::Belief { previous: false, lane }));
    if shown < lanes {
        rows.push(Row::More { first, shown });
    }
    if lock {
        rows.push(Row::Truth { previous: false });
        rows.extend((0..app.run().nodes.len()).map(|node| Row::Node { previous: false, node }));
        rows.push(Row::Lease);
    }
    rows
}

/// The first lane and how many are shown, `lanes` compact lanes in `room` rows: all
/// of them, or the page (one row kept for the "more" line) holding `selected`.
fn lane_page(lanes: usize, room: usize, selected: usize) -> (usize, usize) {
    if lanes <= room {
        return (0, lanes);
    }
    let per_page = room.saturating_sub(1).max(1);
    let first = selected.min(lanes - 1) / per_page * per_page;
    (first, per_page.min(lanes - first))
}

/// How many lanes one page of a timeline `height` rows tall shows: what PgUp/PgDn
/// move the selection by.
pub fn lanes_per_page(screen: Rect, app: &App) -> usize {
    let area = inner(super::areas(screen, app).timeline);
    rows(app, area.height)
        .iter()
        .take(area.height as usize)
        .filter(|r| matches!(r, Row::Belief { previous: false, .. }))
        .count()
        .max(1)
}

fn inner(area: Rect) -> Rect {
    Block::default().borders(Borders::ALL).inner(area)
}

/// The worker whose lane (in the current run) is at `at`, if any.
pub fn lane_at(screen: Rect, app: &App, at: ratatui::layout::Position) -> Option<usize> {
    lane_rows(screen, app)
        .into_iter()
        .find(|row| row.current && row.area.contains(at))
        .map(|r| r.lane)
}

/// Where each lane of the current screen is.
pub fn lane_rows(screen: Rect, app: &App) -> Vec<LaneRow> {
    let area = inner(super::areas(screen, app).timeline);
    let mut out: Vec<LaneRow> = Vec::new();
    for (i, row) in rows(app, area.height).into_iter().enumerate() {
        let y = area.y + i as u16;
        if y >= area.bottom() {
            break;
        }
        if let Row::Belief { previous, lane } | Row::Marks { previous, lane } = row {
            match out.last_mut() {
                Some(last) if last.lane == lane && last.current != previous => {
                    last.area.height += 1
                }
                _ => out.push(LaneRow {
                    area: Rect::new(area.x, y, area.width, 1),
                    lane,
                    current: !previous,
                }),
            }
        }
    }
    out
}

/// The visible time window [start, end) in scenario ms: the view's moment at the
/// right edge (the window fills from the left first).
fn window(app: &App) -> (f64, f64) {
    let w = app.window_ms();
    let end = app.view_ms().max(w);
    (end - w, end)
}

pub fn render(area: Rect, buf: &mut Buffer, app: &App) {
    let theme = &app.theme();
    // Each title with a shorter form for a narrow timeline: what to press stays.
    let moment;
    let forms: &[&str] = match app.moment() {
        Some(m) => {
            let at = format!("{:.3} s", m / 1000.0);
            moment = [
                format!(" Timeline · frozen at {at} · ←/→ move · Esc back "),
                format!(" {at} · ←/→ · Esc "),
            ];
            &[&moment[0], &moment[1]]
        }
        None if app.held() => match (app.class_seat(), app.posed()) {
            (Some(ClassSeat::Instructor), Some(p)) if p.is_open() => {
                &[" Timeline · held for the question ", " held for the question "]
            }
            (Some(ClassSeat::Instructor), Some(_)) => &[
                " Timeline · held for the question · Enter goes on ",
                " Timeline · held · Enter goes on ",
                " held · Enter goes on ",
            ],
            (Some(ClassSeat::Student(_)), _) => {
                &[" Timeline · held until the reveal ", " held until the reveal "]
            }
            // A lesson's question waits for its answer, not for Enter.
            _ if app.lesson().is_some_and(|l| l.open_checkpoint().is_some()) => {
                &[" Timeline · held for the question ", " held for the question "]
            }
            _ => &[
                " Timeline · held for the lesson · Enter goes on ",
                " Timeline · held · Enter goes on ",
                " held · Enter goes on ",
            ],
        },
        None if app.log_ended().is_some_and(|end| app.view_ms() >= end) => {
            &[" Timeline · the run is over · ←/→ inspect a moment ", " Timeline · run over "]
        }
        None => &[" Timeline · now at the right edge ", " Timeline · now on the right "],
    };
    let title = first_fitting(forms, title_room(area));
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border)
        .title(title)
        .title_style(theme.title)
        .render(area, buf);
    let area = inner(area);
    if area.width <= GUTTER + 2 || area.height == 0 {
        return;
    }
    let plot = Rect::new(area.x + GUTTER, area.y, area.width - GUTTER, area.height);
    let (start, end) = window(app);
    let ms_per_col = (end - start) / plot.width as f64;
    let ctx = Ctx { buf, theme, plot, start, ms_per_col, app };
    let mut ctx = ctx;
    let mut previous_row = None;
    for (i, row) in rows(app, area.height).into_iter().enumerate() {
        let y = area.y + i as u16;
        if y >= area.bottom() {
            break;
        }
        // Only the first row of a thick lane carries the label.
        let first = previous_row != Some(row);
        ctx.row(area.x, y, row, first);
        previous_row = Some(row);
    }
}

struct Ctx<'a> {
    buf: &'a mut Buffer,
    theme: &'a Theme,
    plot: Rect,
    start: f64,
    ms_per_col: f64,
    app: &'a App,
}

impl<'a> Ctx<'a> {
    fn run(&self, previous: bool) -> &'a RunModel {
        let app: &'a App = self.app;
        match (app.previous(), previous) {
            (Some(p), true) => p,
            _ => app.run(),
        }
    }

    /// The last moment a run shows: its end, or the view's moment.
    fn reached(&self, previous: bool) -> f64 {
        let run = self.run(previous);
        match (&run.ended, previous) {
            (Some((t, _)), _) => *t,
            (None, true) => run.last_ms,
            (None, false) => self.app.view_ms(),
        }
    }

    /// The time slice column `c` stands for.
    fn slice(&self, c: u16) -> (f64, f64) {
        let from = self.start + c as f64 * self.ms_per_col;
        (from, from + self.ms_per_col)
    }

    /// The middle of column `c`, in scenario ms.
    fn time_of(&self, c: u16) -> f64 {
        self.start + (c as f64 + 0.5) * self.ms_per_col
    }

    fn column_of(&self, t: f64) -> Option<u16> {
        let c = ((t - self.start) / self.ms_per_col).floor();
        (c >= 0.0 && c < self.plot.width as f64).then_some(c as u16)
    }

    fn row(&mut self, x: u16, y: u16, row: Row, first: bool) {
        match row {
            Row::Axis => self.axis(x, y),
            Row::Title { previous } => {
                let run = self.run(previous);
                let which = if previous { "earlier run" } else { "this run" };
                let label =
                    if previous { self.app.previous_label() } else { self.app.compared_label() };
                let label = if label.is_empty() { &run.label } else { label };
                let text = format!("── {which}: {label} ──");
                self.buf.set_stringn(
                    x,
                    y,
                    text,
                    (self.plot.right() - x) as usize,
                    self.theme.title,
                );
            }
            Row::Belief { previous, lane } => self.belief(x, y, previous, lane, first),
            Row::Marks { previous, lane } => self.marks(x, y, previous, lane),
            Row::Truth { previous } => self.truth(x, y, previous),
            Row::Node { previous, node } => self.node(x, y, previous, node),
            Row::Lease => self.lease(x, y),
            Row::More { first, shown } => {
                let lanes = self.app.run().lanes.len();
                let text = format!(
                    "  lanes {}-{} of {lanes} · PgUp/PgDn for more",
                    first + 1,
                    first + shown
                );
                let room = (self.plot.right() - x) as usize;
                self.buf.set_stringn(x, y, text, room, self.theme.dim);
            }
        }
    }

    fn axis(&mut self, x: u16, y: u16) {
        self.buf.set_string(x, y, "time", self.theme.dim);
        // The finest tick whose labels do not run into each other.
        let tick = [500.0, 1000.0, 2000.0, 5000.0, 10_000.0, 30_000.0]
            .into_iter()
            .find(|t| t / self.ms_per_col >= 8.0)
            .unwrap_or(60_000.0);
        let marker = self.app.moment().and_then(|m| self.column_of(m));
        let mut t = (self.start / tick).ceil() * tick;
        while let Some(c) = self.column_of(t) {
            let label = if tick < 1000.0 {
                format!("│{:.1}s", t / 1000.0)
            } else {
                format!("│{:.0}s", t / 1000.0)
            };
            // A label the inspected moment's marker would land inside ("│▼s") is left
            // out: the marker on its own reads, a label missing a digit misleads.
            let width = label.chars().count() as u16;
            if marker.is_some_and(|m| m > c && m < c + width) {
                t += tick;
                continue;
            }
            let room = (self.plot.right() - (self.plot.x + c)) as usize;
            self.buf.set_stringn(self.plot.x + c, y, label, room, self.theme.dim);
            t += tick;
        }
        if let Some(c) = marker {
            self.buf.set_string(self.plot.x + c, y, "▼", self.theme.title);
        }
    }

    fn belief(&mut self, x: u16, y: u16, previous: bool, lane: usize, first: bool) {
        let run = self.run(previous);
        let Some(l) = run.lanes.get(lane) else { return };
        let selected = !previous && lane == self.app.selected();
        let label_style = if selected { self.theme.selected } else { self.theme.title };
        let marker = if selected { "▶" } else { " " };
        // A contender whose own clock ran at another rate in this run says so: where
        // expiry is judged by each contender's clock (a Lease), that is what its lane
        // means.
        let rate = Some(l.clock_rate).filter(|r| *r != 1.0);
        let clock = rate.map_or(String::new(), |r| format!(" clock {r}x"));
        let label = match first {
            true => format!("{marker}{} {}{clock}", lane + 1, l.name),
            false => String::new(),
        };
        self.buf.set_stringn(
            x,
            y,
            format!("{label:<width$}", width = GUTTER as usize - 1),
            GUTTER as usize - 1,
            label_style,
        );
        let reached = self.reached(previous);
        for c in 0..self.plot.width {
            let (from, to) = self.slice(c);
            if from > reached {
                break;
            }
            let t = self.time_of(c).min(reached);
            let mut belief = at(&l.spans, t).unwrap_or(Belief::Idle);
            let mut holder = run.holder_at(t);
            // A hold shorter than a column still gets its cell, in the light of what
            // the lock service listed during that column.
            let until = to.min(reached + 0.0005);
            if belief.held_token().is_none()
                && let Some(s) =
                    within(&l.spans, from, until).find(|s| s.value.held_token().is_some())
            {
                belief = s.value;
                holder = run.holder_at(s.from_ms);
                if starting_in(&run.truth, from, until)
                    .any(|s| s.value.as_deref() == Some(l.name.as_str()))
                {
                    holder = Some(l.name.as_str());
                }
            }
            let (glyph, style) = self.cell(belief, holder, &l.name);
            self.put(c, y, glyph, style);
        }
        self.cursor(y);
    }

    /// The glyph for a belief, given who Redis says holds the lock then.
    fn cell(&self, belief: Belief, redis_holder: Option<&str>, me: &str) -> (&'static str, Style) {
        let t = self.theme;
        let danger = belief.held_token().is_some() && redis_holder != Some(me);
        match belief {
            Belief::Idle | Belief::Released | Belief::Done => (" ", t.base),
            Belief::Waiting => ("┄", t.waiting),
            Belief::Holding { .. } if danger => ("▓", t.danger),
            Belief::Holding { .. } => ("█", t.holding),
            Belief::Paused { .. } if danger => ("▒", t.danger),
            Belief::Paused { .. } => ("░", t.paused),
            Belief::Crashed => (" ", t.base),
        }
    }

    /// Labels under a lane: grants, pauses, writes with their verdicts, crashes;
    /// and in the gutter, what the worker believes at the viewed moment.
    fn marks(&mut self, x: u16, y: u16, previous: bool, lane: usize) {
        let run = self.run(previous);
        let Some(l) = run.lanes.get(lane) else { return };
        let view = if previous { self.reached(true) } else { self.app.view_ms() };
        let belief = at(&l.spans, view).unwrap_or(Belief::Idle);
        let (text, style) = self.state_text(belief, run.holder_at(view), &l.name, view);
        self.buf.set_stringn(x + 1, y, text, GUTTER as usize - 2, style);
        let reached = self.reached(previous);
        let marks: Vec<_> = self
            .visible(&run.marks, |m| m.t_ms)
            .iter()
            .filter(|m| m.lane == lane && m.t_ms <= reached)
            .filter_map(|m| self.column_of(m.t_ms).map(|c| (c, m)))
            .collect();
        let wanted: Vec<(u16, u16)> =
            marks.iter().map(|(c, m)| (*c, m.label.width() as u16)).collect();
        for ((_, mark), place) in marks.iter().zip(place_labels(&wanted, self.plot.width)) {
            let Some((c, room)) = place else { continue };
            let style = if mark.label.contains("STALE") || mark.label.starts_with('⚠') {
                self.theme.danger
            } else if mark.label.starts_with('✔') {
                self.theme.accepted
            } else if mark.label.starts_with('✘') || mark.label.starts_with('✖') {
                self.theme.rejected
            } else {
                self.theme.dim
            };
            self.buf.set_stringn(self.plot.x + c, y, &mark.label, room as usize, style);
        }
        self.cursor(y);
    }

    fn state_text(
        &self,
        belief: Belief,
        holder: Option<&str>,
        me: &str,
        view: f64,
    ) -> (String, Style) {
        let t = self.theme;
        let danger = belief.held_token().is_some() && holder != Some(me);
        match belief {
            _ if danger => match belief.held_token() {
                // A grant that carried no token (a program's library without one).
                Some(0) | None => ("⚠ thinks held".into(), t.danger),
                // Tight beside the lane ("⚠ thinks tok1"): the gutter is narrow.
                Some(token) => (format!("⚠ thinks {}{token}", self.app.tok_word()), t.danger),
            },
            Belief::Idle => ("idle".into(), t.dim),
            Belief::Waiting => ("waiting".into(), t.waiting),
            Belief::Holding { token } => {
                (format!("holds {}", super::tok(self.app.tok_word(), token)), t.holding)
            }
            // A pause's time left, in the words the lessons use ("A wakes at 2.8 s"):
            // "‖ 1.3 s left" read as a lease's; "‖ held" as the lesson's hold. Tight
            // ("1.3s"), so two cells part it from the lane's first mark ("got 1").
            Belief::Paused { until: Some(until), .. } => {
                let left = (until - view).max(0.0) / 1000.0;
                let label = match format!("wakes in {left:.1}s") {
                    l if l.width() <= GUTTER as usize - 3 => l,
                    _ => format!("wakes in {left:.0}s"),
                };
                (label, t.paused)
            }
            Belief::Paused { until: None, .. } => ("paused".into(), t.paused),
            Belief::Released => ("released".into(), t.dim),
            Belief::Crashed => ("✖ crashed".into(), t.rejected),
            Belief::Done => ("done".into(), t.dim),
        }
    }

    fn truth(&mut self, x: u16, y: u16, previous: bool) {
        let run = self.run(previous);
        let service = self.app.service_name();
        let mut label = match self.app.lock().words.truth_row {
            Some(row) => row.to_string(),
            None => format!(" {service} holder"),
        };
        // "ZooKeeper holder" is wider than the labels' column: the name alone says it.
        if label.chars().count() >= usize::from(self.plot.x.saturating_sub(x)) {
            label = format!(" {service}");
        }
        self.buf.set_string(x, y, label, self.theme.title);
        let reached = self.reached(previous);
        for c in 0..self.plot.width {
            let (from, to) = self.slice(c);
            if from > reached {
                break;
            }
            let t = self.time_of(c).min(reached);
            let mut holder = run.holder_at(t);
            // A holder for less than a column still gets its cell.
            if let Some(s) = within(&run.truth, from, to.min(reached + 0.0005))
                .find(|s| s.value.is_some() && s.value.as_deref() != holder)
            {
                holder = s.value.as_deref();
            }
            let (glyph, style) = match holder {
                Some(h) => {
                    let i = run.lanes.iter().position(|l| l.name == h).unwrap_or(0);
                    let initial =
                        h.get(..h.chars().next().map_or(0, char::len_utf8)).unwrap_or("?");
                    (initial, self.theme.worker(i).add_modifier(Modifier::BOLD))
                }
                None => ("·", self.theme.dim),
            };
            self.put(c, y, glyph, style);
        }
        self.cursor(y);
    }

    /// One Redlock node: who it lists, `·` for nobody, `✖` while it is down.
    fn node(&mut self, x: u16, y: u16, previous: bool, node: usize) {
        let run = self.run(previous);
        let Some(spans) = run.nodes.get(node) else { return };
        self.buf.set_string(x, y, format!("   node {}", node + 1), self.theme.dim);
        let reached = self.reached(previous);
        for c in 0..self.plot.width {
            let t = self.time_of(c);
            if t > reached {
                break;
            }
            let i = spans.partition_point(|s| s.from_ms <= t);
            let state = i.checked_sub(1).map(|i| &spans[i].value);
            let (glyph, style) = match state {
                Some(None) => ("✖", self.theme.rejected),
                Some(Some(Some(h))) => {
                    let w = run.lanes.iter().position(|l| &l.name == h).unwrap_or(0);
                    let initial =
                        h.get(..h.chars().next().map_or(0, char::len_utf8)).unwrap_or("?");
                    (initial, self.theme.worker(w))
                }
                _ => ("·", self.theme.dim),
            };
            self.put(c, y, glyph, style);
        }
        // A clock jump: one glyph at its moment (a label there would hide what
        // follows), and its size beside the node's name.
        for mark in run.node_marks.iter().filter(|m| m.lane == node && m.t_ms <= reached) {
            if let Some(c) = self.column_of(mark.t_ms) {
                self.put(c, y, "»", self.theme.danger);
            }
            let name = format!("   node {} ", node + 1);
            let room = (GUTTER as usize - 1).saturating_sub(name.chars().count());
            self.buf.set_stringn(x + name.len() as u16, y, &mark.label, room, self.theme.danger);
        }
        self.cursor(y);
    }

    /// The current lease draining: who holds it and how much is left.
    fn lease(&mut self, x: u16, y: u16) {
        let run: &RunModel = self.app.run();
        // A queue has no lease: a pending job's idle time grows until someone may
        // claim it. Drawn as it grows, not as a count-down to a hand-over (which
        // would answer lesson 27's question before it is asked).
        let lock = self.app.lock();
        let queue = lock.queue;
        self.buf.set_string(x, y, lock.words.lease_row, self.theme.title);
        let view = self.app.view_ms();
        let ttl = run.ttl_ms as f64;
        // The text first, the bar in what is left of the row (at most half of it): the
        // words are what a learner reads.
        let (text, bar) = match run.lease_at(view) {
            Some((holder, Some(left))) if run.ttl_ms > 0 && queue => {
                let idle = (ttl - left).max(0.0);
                // The job pending at `holder`, and how many times it has been handed out.
                let job = run.lanes.iter().find(|l| l.name == holder).and_then(|l| l.last_token);
                let text = format!(" idle {} of {}", secs(idle), secs(ttl));
                // Narrower, the delivery count stays and the job's number goes (its
                // lane says `got 1`): a redelivery is what lesson 27 is about. Narrower
                // still, the times in short ("idle 1.5/2.0 s"), before the count goes.
                let (full, shorter) = match job {
                    Some(job) => {
                        let n = run.deliveries(job, view);
                        let brief = format!(" idle {:.1}/{}", idle / 1000.0, secs(ttl));
                        let shorter = vec![
                            format!("{text} · delivery {n}"),
                            format!("{brief} · delivery {n}"),
                            text.clone(),
                        ];
                        (format!("{text} · job {job}, delivery {n}"), shorter)
                    }
                    None => (text.clone(), vec![text]),
                };
                (full, Some((shorter, holder, idle / ttl)))
            }
            Some((holder, Some(left))) if run.ttl_ms > 0 => {
                let service = self.app.service_name();
                let text = format!(" {} left of {}", secs(left), secs(ttl));
                // A count a real server rounds: said so, in its words, whatever it
                // reads (a 2 s etcd lease reads "1.4 s left" a tenth of a second in).
                // The simulator counts to the ms, and is said only at 0.
                let rounds = (lock.words.rounded && !self.app.simulated()) || left <= 0.0;
                let text = match lock.words.overdue.filter(|_| rounds) {
                    Some(why) => vec![format!("{text} ({why})"), text],
                    None => vec![text],
                };
                let full = format!("{}, held by {holder} in {service}", text[0]);
                (full, Some((text, holder, left / ttl)))
            }
            // Nothing expires a Kubernetes-style Lease on the server (each contender
            // judges that by its own clock), and no client can read a ZooKeeper
            // session's time left: the row says so.
            Some((holder, _)) => match (lock.words.unexpiring, lock.words.renewed) {
                // The holder is on the row above: its renewal is what counts here.
                (Some(why), Some(field)) => match run.renewed_at(holder, view) {
                    Some(at) => (format!("{field} {}; {why}", secs(at)), None),
                    None => (format!("held by {holder}; {why}"), None),
                },
                (Some(why), None) => (format!("held by {holder}; {why}"), None),
                (None, _) => (format!("{holder} holds it with no expiry"), None),
            },
            // A queue with nothing pending has no lock for nobody to hold.
            None if queue => ("no job pending".to_string(), None),
            None => (
                format!("nobody holds the {} in {}", lock.words.grant, self.app.service_name()),
                None,
            ),
        };
        let width = self.plot.width as usize;
        // Too narrow for the bar and all the words: the first of the shorter texts
        // (most needed first; the holder is on the row above) that fits, beside the bar
        // when there is room for one, else alone: the words are worth more than the bar
        // (a queue's delivery count at 80 columns).
        let (text, bar) = match bar {
            Some((shorter, holder, fraction)) if text.width() + MIN_BAR > width => {
                let with_bar = |s: &String| s.width() + MIN_BAR <= width;
                match shorter.iter().find(|s| s.width() <= width) {
                    Some(s) if with_bar(s) => (s.clone(), Some((Vec::new(), holder, fraction))),
                    Some(s) => (s.clone(), None),
                    None => (shorter.last().cloned().unwrap_or_default(), None),
                }
            }
            _ => (text, bar),
        };
        let bar_width = match bar {
            Some(_) => (width / 2).min(width.saturating_sub(text.width())),
            None => 0,
        };
        if let Some((_, holder, fraction)) = bar.filter(|_| bar_width >= MIN_BAR) {
            self.lease_bar(run, holder, fraction, bar_width, y);
        }
        let bar_x = self.plot.x + if bar_width >= MIN_BAR { bar_width as u16 } else { 0 };
        let room = (self.plot.right().saturating_sub(bar_x)) as usize;
        self.buf.set_stringn(bar_x, y, words_in(&text, room), room, self.theme.base);
    }

    /// One glyph in plot column `c`: straight into the cell, which is much cheaper
    /// than `set_string` when done for every column of every lane.
    /// The lease row's bar: `fraction` of `width` filled, in the holder's colour.
    fn lease_bar(&mut self, run: &RunModel, holder: &str, fraction: f64, width: usize, y: u16) {
        let filled = ((fraction * width as f64).round() as usize).min(width);
        let bar = format!("{}{}", "█".repeat(filled), "░".repeat(width - filled));
        let i = run.lanes.iter().position(|l| l.name == holder).unwrap_or(0);
        self.buf.set_string(self.plot.x, y, &bar, self.theme.worker(i));
    }

    fn put(&mut self, c: u16, y: u16, glyph: &str, style: Style) {
        if let Some(cell) = self.buf.cell_mut((self.plot.x + c, y)) {
            cell.set_symbol(glyph).set_style(style);
        }
    }

    /// The items (sorted by time) that fall in the visible window.
    fn visible<'t, T>(&self, items: &'t [T], time: impl Fn(&T) -> f64) -> &'t [T] {
        let end = self.start + self.ms_per_col * self.plot.width as f64;
        let from = items.partition_point(|i| time(i) < self.start);
        let to = items.partition_point(|i| time(i) <= end);
        &items[from..to.max(from)]
    }

    /// The inspected moment as a highlighted column.
    fn cursor(&mut self, y: u16) {
        if let Some(m) = self.app.moment()
            && let Some(c) = self.column_of(m)
            && let Some(cell) = self.buf.cell_mut((self.plot.x + c, y))
        {
            cell.modifier.insert(Modifier::REVERSED);
            if cell.symbol() == " " {
                cell.set_symbol("│");
            }
        }
    }
}

/// A stretch of time as the screen writes one: "1.5 s" (the header's "HELD 2.1 s",
/// the lease row, a paused lane's time left).
pub(super) fn secs(ms: f64) -> String {
    format!("{:.1} s", ms / 1000.0)
}

/// `text` in `room` cells: whole, or cut after its last word that fits, with a `…`
/// (a lease row's "held by A; its session ends…", never "…session ends wi").
fn words_in(text: &str, room: usize) -> String {
    if text.width() <= room {
        return text.to_string();
    }
    let mut kept = String::new();
    for word in text.split_inclusive(' ') {
        if kept.width() + word.trim_end().width() + 1 > room {
            break;
        }
        kept.push_str(word);
    }
    format!("{}…", kept.trim_end())
}

/// Where each of a lane's labels goes, given its column and width (in time order), on
/// a row `width` cells wide: as (first cell, cells it may take), None when there is
/// no cell left for it. A label starts at its column, or just after the one before
/// it, so neither erases the other ("got 1" and a pause's "‖" a column later are both
/// read); one that would run past the right edge moves left to end there, kept whole.
/// Only where labels are too many for the row is one cut, a cell before the next, to
/// at least its first glyph at its own column.
fn place_labels(labels: &[(u16, u16)], width: u16) -> Vec<Option<(u16, u16)>> {
    let mut starts: Vec<u16> = Vec::with_capacity(labels.len());
    for (i, (column, _)) in labels.iter().enumerate() {
        let after = match i.checked_sub(1) {
            Some(p) => starts[p].saturating_add(labels[p].1).saturating_add(1),
            None => 0,
        };
        starts.push((*column).max(after));
    }
    let mut placed = vec![None; labels.len()];
    // Right to left: each label ends a cell before the next one starts.
    let mut next: Option<u16> = None;
    for i in (0..labels.len()).rev() {
        let (column, label_width) = labels[i];
        let end = next.map_or(width, |n| n.saturating_sub(1));
        let whole = starts[i].min(end.saturating_sub(label_width));
        if whole + label_width <= end {
            placed[i] = Some((whole, label_width));
            next = Some(whole);
            continue;
        }
        let bound = next.unwrap_or(width);
        if bound == 0 {
            continue;
        }
        let start = column.min(bound - 1);
        placed[i] = Some((start, end.saturating_sub(start).max(1)));
        next = Some(start);
    }
    placed
}

/// The spans that begin and end within [from, to): too short for the column's middle
/// to fall in them.
fn within<T>(
    spans: &[crate::view_model::Span<T>],
    from: f64,
    to: f64,
) -> impl Iterator<Item = &crate::view_model::Span<T>> {
    let i = spans.partition_point(|s| s.from_ms < from);
    // Sliced, not `skip`ped: skipping a mapped iterator calls the map for every span
    // skipped, which made each column cost the whole run (a long class's frames).
    let later = spans.get(i + 1..).unwrap_or_default();
    let ends = later.iter().map(|s| s.from_ms).chain([f64::INFINITY]);
    spans[i..]
        .iter()
        .zip(ends)
        .take_while(move |(s, _)| s.from_ms < to)
        .filter(move |(_, end)| *end <= to)
        .map(|(s, _)| s)
}

/// The spans that begin within [from, to).
fn starting_in<T>(
    spans: &[crate::view_model::Span<T>],
    from: f64,
    to: f64,
) -> impl Iterator<Item = &crate::view_model::Span<T>> {
    let i = spans.partition_point(|s| s.from_ms < from);
    spans[i..].iter().take_while(move |s| s.from_ms < to)
}

#[cfg(test)]
mod tests {
    use super::place_labels;

    #[test]
    fn a_lease_row_too_long_for_its_room_is_cut_after_a_word() {
        use super::words_in;
        let text = "held by A; its session ends without heartbeats";
        assert_eq!(words_in(text, 30), "held by A; its session ends…");
        assert_eq!(words_in(text, 100), text);
        assert_eq!(words_in("idle 1.5 s of 2.0 s", 19), "idle 1.5 s of 2.0 s");
    }

    #[test]
    fn a_label_after_another_starts_past_its_text_instead_of_erasing_it() {
        // "got 1" at column 0, a pause's "‖" at column 2: both whole.
        assert_eq!(place_labels(&[(0, 5), (2, 1)], 40), [Some((0, 5)), Some((6, 1))]);
        // Apart already: each at its own column.
        assert_eq!(place_labels(&[(0, 5), (10, 1)], 40), [Some((0, 5)), Some((10, 1))]);
    }

    #[test]
    fn a_label_at_the_right_edge_moves_left_to_be_read_whole() {
        assert_eq!(place_labels(&[(38, 5)], 40), [Some((35, 5))]);
        // And pushes the one before it left, a cell apart.
        assert_eq!(place_labels(&[(33, 3), (38, 5)], 40), [Some((31, 3)), Some((35, 5))]);
    }

    #[test]
    fn labels_too_many_for_the_row_keep_at_least_their_first_glyph() {
        let placed = place_labels(&[(0, 4), (1, 4), (2, 4)], 8);
        assert_eq!(placed, [Some((0, 1)), Some((1, 2)), Some((4, 4))]);
    }
}
