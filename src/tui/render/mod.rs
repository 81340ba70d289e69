//! Drawing the screen from `&App`. Rendering reads state and never blocks.
//!
//! ```text
//! ┌ header: backend · run state · time · speed · FENCING badge ──────────────────┐
//! ┌ Timeline ─────────────────────────────────────────┐┌ Tokens ────────────────┐
//! │ axis                                              ││ fence counter, holders │
//! │ A  ███████▓▓▓▓▓▓  belief lane (2 rows per worker) │└────────────────────────┘
//! │ B  ┄┄┄┄┄┄┄┄████                                   │┌ Storage ───────────────┐
//! │ Redis AAAAAAA·BBBB  truth lane                    ││ writes, newest last    │
//! │ lease ██████░░░ 1.2 s left                        ││                        │
//! └───────────────────────────────────────────────────┘└────────────────────────┘
//!  hint / status / inspected moment (one line)
//! ┌ Safety monitor (or Commands inspector) ─────────────────────────────────────┐
//! └─────────────────────────────────────────────────────────────────────────────┘
//!  footer: the main keys
//! ```

mod fit;
mod lesson;
pub mod lobby;
pub mod markdown;
mod overlay;
mod panels;
mod question;
mod timeline;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};

use super::app::{App, ClassSeat, Measured, Overlay};

pub use timeline::{LaneRow, lane_at, lane_rows, lanes_per_page};

/// Below this the screen cannot show a useful timeline; we say so instead.
/// A held token as a lane says it, in the lock kind's word (`tok`: "tok 3", "zxid 5",
/// "job 1"), or "no token" for a foreign program's grant that reported none (its
/// token is 0, which no lock service hands out).
fn tok(word: &str, token: u64) -> String {
    match (token, word) {
        (0, _) => "no token".to_string(),
        (_, "#") => format!("#{token}"),
        _ => format!("{word} {token}"),
    }
}

/// The system's own name for its token where it has one ("revision", "zxid"), for the
/// header's badge and the tokens panel; None for Redis's plain "token", or while a
/// question still to come asks which number is the token.
fn token_name(app: &App) -> Option<&'static str> {
    let token = app.lock().words.token;
    (token != "token" && app.tok_word() != "#").then_some(token)
}

/// A token column's cell: `token 2`, or `no token` for a write or grant without one.
fn token_cell(token: Option<u64>) -> String {
    token.map_or("no token".to_string(), |tk| format!("token {tk}"))
}

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;
/// Below this width the side panels stack under the timeline (playground), or a
/// lesson's narration goes under it across the whole width.
const WIDE: u16 = 120;
const SIDEBAR_WIDTH: u16 = 44;
/// Lessons need room for prose beside the timeline.
const LESSON_SIDEBAR_WIDTH: u16 = 60;
const LESSON_STORAGE_HEIGHT: u16 = 8;
/// The least a timeline keeps when a lesson's narration needs the room.
const NARROW_TIMELINE_MIN: u16 = 7;
/// The least the narration keeps under a timeline that needs more (a title, a
/// question's first lines, the rest a PgDn away).
const NARROW_LESSON_MIN: u16 = 7;
/// The storage beside the timeline when the narration is under it.
const NARROW_STORAGE_WIDTH: u16 = 32;
const TOKENS_HEIGHT: u16 = 10;
/// Tokens and storage side by side under the timeline, on a narrow screen.
const STACKED_HEIGHT: u16 = 7;
const MONITOR_HEIGHT: u16 = 6;
const NARROW_MONITOR_HEIGHT: u16 = 4;
const INSPECTOR_HEIGHT: u16 = 12;

/// The panels' places on a screen of a given size (a zero-sized area is not drawn).
pub struct Areas {
    pub header: Rect,
    pub timeline: Rect,
    pub tokens: Rect,
    pub lesson: Rect,
    pub storage: Rect,
    pub hint: Rect,
    pub bottom: Rect,
    pub footer: Rect,
}

/// What goes where a lesson's narration goes: the narration, or a class's question.
fn panel_shown(app: &App) -> bool {
    app.lesson().is_some() || app.posed().is_some()
}

/// Rows that panel needs at `width`.
fn panel_height(app: &App, width: u16) -> u16 {
    match app.posed() {
        Some(posed) => question::height(app, posed, width, false),
        None => lesson::narration_height(app, width),
    }
}

pub fn areas(screen: Rect, app: &App) -> Areas {
    let none = Rect::default();
    let wide = screen.width >= WIDE;
    if panel_shown(app) && !wide {
        // A lesson on a projector-sized screen: no monitor; the narration gets the room
        // it needs (its question, choices and feedback), under the timeline.
        let [header, body, hint, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(8),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(screen);
        // The timeline keeps the rows it cannot do without (its lanes, thin, and the
        // rows of the lesson's service: every Redlock node's, the truth, the lease, a
        // queue's `pending for` and `job idle`, which lessons 20 and 27 ask about), as
        // long as the narration keeps a few lines, or an open question and its choices
        // (its feedback and the step before it a PgDn/PgUp away); short of that, the
        // lanes go to a row each (`timeline::rows`). A class's question is shown
        // whole first (its choices, the tally, its bars packed if need be). Never less
        // than the timeline's axis and two thin lanes.
        let wanted = panel_height(app, body.width);
        let timeline_whole = timeline::needed_height(app).max(NARROW_TIMELINE_MIN);
        let floor = match app.posed() {
            Some(posed) => question::height(app, posed, body.width, true),
            None => lesson::choices_height(app, body.width).unwrap_or(0).max(NARROW_LESSON_MIN),
        };
        let lesson_h = wanted
            .min(body.height.saturating_sub(timeline_whole))
            .max(wanted.min(floor))
            .min(body.height.saturating_sub(NARROW_TIMELINE_MIN));
        let [top, lesson] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(lesson_h)]).areas(body);
        // `i` still shows the commands: under the timeline, which keeps its axis and a
        // lane (the narration and its question stay whole).
        let (top, bottom) = if app.inspector() {
            let h = INSPECTOR_HEIGHT.min(top.height.saturating_sub(4)).max(3);
            let [top, bottom] =
                Layout::vertical([Constraint::Min(0), Constraint::Length(h)]).areas(top);
            (top, bottom)
        } else {
            (top, none)
        };
        let [timeline, storage] =
            Layout::horizontal([Constraint::Min(30), Constraint::Length(NARROW_STORAGE_WIDTH)])
                .areas(top);
        return Areas { header, timeline, tokens: none, lesson, storage, hint, bottom, footer };
    }
    let bottom_height = match (app.inspector(), wide) {
        (true, _) => INSPECTOR_HEIGHT,
        (false, true) => MONITOR_HEIGHT,
        (false, false) => NARROW_MONITOR_HEIGHT,
    };
    let [header, body, hint, bottom, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(8),
        Constraint::Length(1),
        Constraint::Length(bottom_height),
        Constraint::Length(1),
    ])
    .areas(screen);
    let tokens_shown = app.uses_lock();
    if panel_shown(app) {
        let width = LESSON_SIDEBAR_WIDTH.min(screen.width / 2);
        let [timeline, sidebar] =
            Layout::horizontal([Constraint::Min(30), Constraint::Length(width)]).areas(body);
        let needed = panel_height(app, sidebar.width);
        let lesson_h = needed
            .min(sidebar.height.saturating_sub(4))
            .max(sidebar.height.saturating_sub(LESSON_STORAGE_HEIGHT));
        let [lesson, storage] =
            Layout::vertical([Constraint::Length(lesson_h), Constraint::Min(0)]).areas(sidebar);
        return Areas { header, timeline, tokens: none, lesson, storage, hint, bottom, footer };
    }
    if wide {
        let [timeline, sidebar] =
            Layout::horizontal([Constraint::Min(30), Constraint::Length(SIDEBAR_WIDTH)])
                .areas(body);
        let tokens_h = if tokens_shown { TOKENS_HEIGHT } else { 0 };
        let [tokens, storage] =
            Layout::vertical([Constraint::Length(tokens_h), Constraint::Min(3)]).areas(sidebar);
        return Areas { header, timeline, tokens, lesson: none, storage, hint, bottom, footer };
    }
    // Narrow playground: the side panels side by side under the timeline.
    let [timeline, stacked] =
        Layout::vertical([Constraint::Min(6), Constraint::Length(STACKED_HEIGHT)]).areas(body);
    let [tokens, storage] = if tokens_shown {
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(stacked)
    } else {
        [none, stacked]
    };
    Areas { header, timeline, tokens, lesson: none, storage, hint, bottom, footer }
}

/// What a frame of `screen` measured that the app must know for the next keys: how
/// many lanes a page holds, and how far the narration can scroll (drawn only where
/// `draw` draws it). The event loop sends it as `Msg::Measured` after each frame:
/// drawing reads the app and never writes it.
pub fn measure(screen: Rect, app: &App) -> Measured {
    let lesson = areas(screen, app).lesson;
    let drawn = screen.width >= MIN_WIDTH
        && screen.height >= MIN_HEIGHT
        && app.posed().is_none()
        && !lesson.is_empty();
    Measured {
        lanes_per_page: lanes_per_page(screen, app),
        narration_room: drawn.then(|| lesson::narration_room(lesson, app)).flatten(),
    }
}

/// Draw everything.
pub fn draw(frame: &mut Frame, app: &App) {
    let screen = frame.area();
    let buf = frame.buffer_mut();
    if screen.width < MIN_WIDTH || screen.height < MIN_HEIGHT {
        overlay::too_small(screen, buf, app.theme());
        return;
    }
    buf.set_style(screen, app.theme().base);
    let a = areas(screen, app);
    panels::header(a.header, buf, app);
    timeline::render(a.timeline, buf, app);
    match app.posed() {
        Some(posed) if !a.lesson.is_empty() => question::draw(a.lesson, buf, app, posed),
        _ if !a.lesson.is_empty() => lesson::narration(a.lesson, buf, app),
        _ => {}
    }
    if !a.tokens.is_empty() {
        panels::tokens(a.tokens, buf, app);
    }
    if a.storage.height >= 3 {
        panels::storage(a.storage, buf, app);
    }
    panels::hint(a.hint, buf, app);
    if !a.bottom.is_empty() {
        if app.inspector() {
            panels::inspector(a.bottom, buf, app);
        } else {
            panels::monitor(a.bottom, buf, app);
        }
    }
    panels::footer(a.footer, buf, app);
    if let Some(error) = &app.error() {
        if let Some(ClassSeat::Student(_)) = app.class_seat() {
            overlay::class_over(screen, buf, app.theme(), error);
        } else {
            overlay::error(screen, buf, app.theme(), error);
        }
    }
    if app.overlay() == Overlay::Help {
        overlay::help(screen, buf, app.theme(), app.help_scroll());
    }
}

#[cfg(test)]
mod token_tests {
    #[test]
    fn a_grant_without_a_token_is_drawn_as_none() {
        assert_eq!(super::tok("tok", 0), "no token");
        assert_eq!(super::tok("tok", 2), "tok 2");
        assert_eq!(super::tok("zxid", 5), "zxid 5");
        assert_eq!(super::tok("#", 5), "#5");
        assert_eq!(super::token_cell(None), "no token");
        assert_eq!(super::token_cell(Some(2)), "token 2");
    }

    /// A program's grant without a token, past its lease while another holds the lock:
    /// the lane, its mark and the tokens panel say so, never a made-up token 0.
    #[test]
    fn a_tokenless_grant_past_its_lease_is_drawn_without_a_fake_zero() {
        use crate::engine::log::{Event, EventKind, Truth, WorkerEvent};
        use crate::tui::app::{App, Msg};
        let scenario = crate::scenario::builtin("playground").unwrap().unwrap();
        let theme = crate::tui::theme::Theme::DEFAULT;
        let mut app = App::new(scenario.clone(), false, 1.0, false, "t".into(), theme);
        app.update(Msg::RunStarting);
        let started = EventKind::RunStarted {
            version: 1,
            run_id: "r".into(),
            scenario: std::sync::Arc::new(scenario),
            fencing: false,
            label: "t".into(),
            backend: "test".into(),
            time_scale: 1.0,
        };
        let truth = |holder: &str| {
            let (ttl_ms, nodes, expired) = (Some(3000.0), Vec::new(), None);
            let holder = Some(holder.into());
            EventKind::Truth(Truth {
                holder,
                ttl_ms,
                fence_counter: 1,
                storage_highest: 0,
                nodes,
                expired,
            })
        };
        let worker = |worker: &str, what| EventKind::Worker { worker: worker.into(), what };
        let events = [
            started,
            worker("A", WorkerEvent::Acquired { token: 0 }),
            truth("A"),
            worker("B", WorkerEvent::Acquired { token: 1 }),
            truth("B"),
            worker(
                "A",
                WorkerEvent::Wrote {
                    value: "a".into(),
                    token: None,
                    accepted: true,
                    redis_holder: Some("B".into()),
                    order: None,
                    refused: None,
                    own: false,
                },
            ),
        ];
        let t = [0.0, 10.0, 11.0, 3100.0, 3101.0, 3150.0];
        let events = events.into_iter().zip(t).enumerate();
        let events = events.map(|(seq, (kind, t_ms))| Event {
            seq: seq as u64,
            t_ms,
            kind,
            happened_ms: None,
        });
        let mut events: Vec<Event> = events.collect();
        let write = events.pop().unwrap();
        let screen = |app: &App| {
            let backend = ratatui::backend::TestBackend::new(160, 48);
            let mut terminal = ratatui::Terminal::new(backend).unwrap();
            terminal.draw(|f| super::draw(f, app)).unwrap();
            let buf = terminal.backend().buffer().clone();
            (0..48)
                .map(|y| (0..160).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
                .collect::<String>()
        };
        // Before its write: it believes it holds the lock B holds.
        app.update(Msg::Logged(events));
        app.update(Msg::Clock { reached_ms: 3120.0, real_ms: 3120.0 });
        let before = screen(&app);
        assert!(before.contains("⚠ thinks held"), "{before}");
        app.update(Msg::Logged(vec![write]));
        app.update(Msg::Clock { reached_ms: 3200.0, real_ms: 80.0 });
        let text = before + &screen(&app);
        assert!(text.contains(" got ") && text.contains("✔w"), "{text}");
        assert!(text.contains("A   no token"), "{text}");
        assert!(text.contains("B   token 1"), "{text}");
        for fake in ["tok0", "token 0", "got 0", "w-", "w0"] {
            assert!(!text.contains(fake), "{fake:?} drawn:\n{text}");
        }
    }
}
