//! The playground's settings: the scenario and how its runs are set up (fencing,
//! speed, the pause key's length), and where they run. Edits apply from the next run.

use crate::scenario::Scenario;

/// How the runs are set up, and where they run.
pub struct Setup {
    /// The playground's settings; edits apply from the next run.
    pub(super) scenario: Scenario,
    /// Fencing for the live run's later writes and for the next run.
    pub(super) fencing: bool,
    pub(super) speed: f64,
    pub(super) pause_ms: u64,
    pub(super) simulated: bool,
    pub(super) backend_label: String,
    pub(super) sim_playing: bool,
}
