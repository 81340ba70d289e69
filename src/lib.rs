//! fencelab: distributed locks, leases and fencing tokens, run for real.
//!
//! The domain (scenario, engine, backends, checker) lives here with no terminal UI
//! code; `model` is a run's log in the shapes views draw (below every view);
//! `output` turns event logs into text, JSON and pictures, `tui` into screens;
//! `commands` wires them to the command line; `platform` holds everything that differs
//! between Linux and macOS. See ARCHITECTURE.md for the picture.

// Unit tests may unwrap and panic; the rest of the crate may not (Cargo.toml's [lints]).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::panic))]

// Before anything else fails to compile: fencelab needs a Unix (signals, pipes, the
// servers it starts).
#[cfg(not(unix))]
compile_error!(
    "fencelab runs on Linux and macOS; on Windows, run it under WSL2 (Windows Subsystem for Linux), as README.md says"
);
#[cfg(all(unix, not(any(target_os = "linux", target_vendor = "apple"))))]
compile_error!("fencelab runs on Linux and macOS (src/platform/ has no variant for this Unix yet)");

/// `note!("...", args)`: one line on stderr through `output::stderr`, which never
/// panics on a failed write (as `eprintln!` does on `2>/dev/full`).
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::output::stderr::line(&format!($($arg)*))
    };
}

pub mod backend;
pub mod check;
pub mod class;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod lesson;
pub mod name;
pub mod output;
pub mod platform;
pub mod runtime;
pub mod scenario;
pub mod search;
pub mod service;
pub mod stepper;
pub mod tui;
pub mod view_model;
