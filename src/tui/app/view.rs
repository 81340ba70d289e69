//! What the screen shows around the run: the selected lane, what is open over it
//! (help, the inspector), the colours, and the lines that say what just happened.

use super::Overlay;
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
