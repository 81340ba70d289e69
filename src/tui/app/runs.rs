//! The runs a screen compares and plays next: the one before the current run (drawn
//! above it, with the commands the user gave in it, to give again), and a scenario's
//! own variants. Only `App::update` changes them.

use super::PlannedRun;
use crate::engine::WorkerCommand;
use crate::view_model::RunModel;

/// The runs compared and to come.
pub struct Runs {
    /// In compare mode, the earlier run, drawn above the current one.
    pub(super) previous: Option<RunModel>,
    pub(super) previous_label: String,
    /// Worker commands to send when the run reaches their moment: the pauses and
    /// crashes the user made in the first run of a compare.
    pub(super) scripted: Vec<(f64, String, WorkerCommand)>,
    /// The scenario's own runs to compare (its variants), if it has any.
    pub(super) variants: Vec<PlannedRun>,
    /// Which variant runs now.
    pub(super) variant: usize,
}

impl Runs {
    /// None before the first run; `variants` to play in turn.
    pub fn new(variants: Vec<PlannedRun>) -> Self {
        Runs {
            previous: None,
            previous_label: String::new(),
            scripted: Vec::new(),
            variants,
            variant: 0,
        }
    }
}
