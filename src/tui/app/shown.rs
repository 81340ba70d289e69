//! The current run: every event so far, the model the panels draw (cut at the view's
//! moment), and what it is called.

use crate::engine::log::Event;
use crate::view_model::RunModel;

/// The run on screen.
pub struct Shown {
    /// Every event of the current run so far: the run may be ahead of the view.
    pub(super) log: Vec<Event>,
    /// The current run as the screen shows it: built only from the events of `log` up
    /// to the view's moment (`view_ms`), so no panel can draw anything later.
    pub(super) run: RunModel,
    /// What the current and the earlier run are called in compare headings.
    pub(super) run_label: String,
}
