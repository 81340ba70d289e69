//! What the screen shows around the run: the selected lane, what is open over it
//! (help, the inspector), the colours, and the lines that say what just happened.

use super::{App, Overlay};
use crate::tui::keys::Action;
use crate::tui::theme::Theme;

/// The screen's own state, apart from the run it shows.
pub struct View {
    pub(super) selected: usize,
    /// How many lanes the screen shows at once (measured by the last frame; all until
    /// then): what PgUp/PgDn move the selection by outside lessons.
    pub(super) lanes_per_page: usize,
    pub(super) overlay: Overlay,
    /// How far the help is scrolled (it is taller than a projector's screen).
    pub(super) help_scroll: u16,
    pub(super) inspector: bool,
    pub(super) theme: Theme,
    /// A one-line message about the last change ("lease 3.5 s from the next run").
    pub(super) status: Option<String>,
    /// The status message being aged, and for how long (wall ms) it has been shown
    /// during a live run: past `STATUS_SHOWN_MS` it gives the line back to the hint
    /// (the playground's "Press 1" must not wait for the run's end).
    pub(super) status_age: (Option<String>, f64),
    /// A failure to show in the error panel; the UI stays up.
    pub(super) error: Option<String>,
}

impl App {
    /// A key that changes only what the screen shows (help, selection, the moment
    /// inspected, zoom, theme), never the run: whether `action` was one.
    pub(super) fn view_key(&mut self, action: Action) -> bool {
        match action {
            Action::Help => {
                self.view.help_scroll = 0;
                self.view.overlay =
                    if self.view.overlay == Overlay::Help { Overlay::None } else { Overlay::Help };
            }
            Action::Back => {
                if self.view.overlay != Overlay::None {
                    self.view.overlay = Overlay::None;
                } else if self.view.error.is_some() {
                    self.view.error = None;
                } else {
                    self.cursor.moment = None;
                }
            }
            Action::SelectPrev => self.view.selected = self.view.selected.saturating_sub(1),
            Action::SelectNext => {
                self.view.selected =
                    (self.view.selected + 1).min(self.shown.run.lanes.len().saturating_sub(1));
            }
            Action::ToggleInspector => self.view.inspector = !self.view.inspector,
            Action::MomentBack | Action::MomentForward => {
                let delta = self.cursor.window_ms / 60.0;
                let from = self.view_ms();
                let to = if action == Action::MomentBack { from - delta } else { from + delta };
                // Within what the view has reached: never past the cursor.
                self.cursor.moment = Some(to.clamp(0.0, self.cursor.cursor_ms));
            }
            Action::ZoomIn => {
                self.cursor.zoomed = true;
                self.cursor.window_ms = (self.cursor.window_ms / 1.5).max(1000.0);
            }
            Action::ZoomOut => {
                self.cursor.zoomed = true;
                self.cursor.window_ms = (self.cursor.window_ms * 1.5).min(120_000.0);
            }
            Action::NextViolation => self.next_violation(),
            Action::CycleTheme => self.view.theme = self.view.theme.next(),
            _ => return false,
        }
        true
    }
}
