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

mod lesson;
pub mod markdown;
mod overlay;
mod panels;
mod timeline;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};

use super::app::{App, Overlay};

pub use timeline::{LaneRow, lane_rows};

/// Below this the screen cannot show a useful timeline; we say so instead.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;
const SIDEBAR_WIDTH: u16 = 44;
/// Lessons need room for prose beside the timeline.
const LESSON_SIDEBAR_WIDTH: u16 = 60;
const LESSON_STORAGE_HEIGHT: u16 = 8;
const TOKENS_HEIGHT: u16 = 10;
const MONITOR_HEIGHT: u16 = 6;
const INSPECTOR_HEIGHT: u16 = 12;

/// The panels' places on a screen of a given size.
pub struct Areas {
    pub header: Rect,
    pub timeline: Rect,
    /// The tokens panel, or in a lesson the narration.
    pub tokens: Rect,
    pub storage: Rect,
    pub hint: Rect,
    pub bottom: Rect,
    pub footer: Rect,
}

pub fn areas(screen: Rect, app: &App) -> Areas {
    let bottom_height = if app.inspector { INSPECTOR_HEIGHT } else { MONITOR_HEIGHT };
    let [header, body, hint, bottom, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(8),
        Constraint::Length(1),
        Constraint::Length(bottom_height),
        Constraint::Length(1),
    ])
    .areas(screen);
    let lesson = app.lesson.is_some();
    let width = if lesson { LESSON_SIDEBAR_WIDTH.min(screen.width / 2) } else { SIDEBAR_WIDTH };
    let [timeline, sidebar] =
        Layout::horizontal([Constraint::Min(30), Constraint::Length(width)]).areas(body);
    let split = if lesson {
        [Constraint::Min(6), Constraint::Length(LESSON_STORAGE_HEIGHT)]
    } else {
        [Constraint::Length(TOKENS_HEIGHT), Constraint::Min(3)]
    };
    let [tokens, storage] = Layout::vertical(split).areas(sidebar);
    Areas { header, timeline, tokens, storage, hint, bottom, footer }
}

/// Draw everything.
pub fn draw(frame: &mut Frame, app: &App) {
    let screen = frame.area();
    let buf = frame.buffer_mut();
    if screen.width < MIN_WIDTH || screen.height < MIN_HEIGHT {
        overlay::too_small(screen, buf, &app.theme);
        return;
    }
    buf.set_style(screen, app.theme.base);
    let a = areas(screen, app);
    panels::header(a.header, buf, app);
    timeline::render(a.timeline, buf, app);
    if app.lesson.is_some() {
        lesson::narration(a.tokens, buf, app);
    } else {
        panels::tokens(a.tokens, buf, app);
    }
    panels::storage(a.storage, buf, app);
    panels::hint(a.hint, buf, app);
    if app.inspector {
        panels::inspector(a.bottom, buf, app);
    } else {
        panels::monitor(a.bottom, buf, app);
    }
    panels::footer(a.footer, buf, app);
    if let Some(error) = &app.error {
        overlay::error(screen, buf, &app.theme, error);
    }
    if app.overlay == Overlay::Help {
        overlay::help(screen, buf, &app.theme);
    }
}
