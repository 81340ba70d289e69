//! The view's clock, one type with one writer: where the screen is in the run (the
//! run's edge, a lesson's hold, an inspected moment), how fast it moves, and how much
//! of the run the timeline shows. Only `App::update` moves it.

/// Where the screen is in the run, and how it moves.
pub struct Cursor {
    /// Scenario time the run itself has reached (the live clock; a saved log's end).
    pub(super) reached_ms: f64,
    /// The view's cursor: the moment the screen shows when no moment is inspected.
    /// It follows the run, stops at a lesson's hold, and after one goes on at the
    /// run's pace from where it stopped; a replay moves it by keys and play.
    pub(super) cursor_ms: f64,
    /// The cursor is at the run's edge and stays there.
    pub(super) following: bool,
    /// Scenario ms per real ms of the current run (its speed).
    pub(super) pace: f64,
    /// Where an open lesson hold keeps the cursor.
    pub(super) hold_at: Option<f64>,
    /// A narration step's hold on real servers: how far it may move for its moment's
    /// late answers (`settle.rs`).
    pub(super) settle: Option<super::settle::Settle>,
    /// The cursor was standing still (a hold, a paused replay): the wall time since
    /// the last tick is not time the cursor should make up.
    pub(super) resumed: bool,
    /// A frozen moment being inspected (None: follow "now").
    pub(super) moment: Option<f64>,
    /// How much time the timeline shows, in scenario ms.
    pub(super) window_ms: f64,
    /// The learner zoomed (z / Z): the window is theirs, never fitted to a run.
    pub(super) zoomed: bool,
}

impl Cursor {
    /// At the run's start, following it at `pace` (scenario ms per real ms).
    pub fn new(pace: f64) -> Self {
        Cursor {
            reached_ms: 0.0,
            cursor_ms: 0.0,
            following: true,
            pace,
            hold_at: None,
            settle: None,
            resumed: false,
            moment: None,
            window_ms: super::DEFAULT_WINDOW_MS,
            zoomed: false,
        }
    }
}
