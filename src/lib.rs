//! fencelab: distributed locks, leases and fencing tokens, run for real.
//!
//! The domain (scenario, engine, backends, checker) lives here with no terminal UI
//! code; `output` turns event logs into text and JSON; `commands` wires them to the
//! command line. See ARCHITECTURE.md for the picture.

pub mod backend;
pub mod check;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod lesson;
pub mod output;
pub mod runtime;
pub mod scenario;
pub mod tui;
