//! fencelab: distributed locks, leases and fencing tokens, run for real.
//!
//! The domain (scenario, engine, backends, checker) lives here with no terminal UI
//! code; `model` is a run's log in the shapes views draw (below every view);
//! `output` turns event logs into text, JSON and pictures, `tui` into screens;
//! `commands` wires them to the command line. See ARCHITECTURE.md for the picture.

pub mod backend;
pub mod check;
pub mod class;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod lesson;
pub mod model;
pub mod output;
pub mod runtime;
pub mod scenario;
pub mod search;
pub mod stepper;
pub mod tui;
