//! Workers as their own OS processes (`--processes`): the same `Worker` (`engine::worker`)
//! code, run by `fencelab worker` in a child, so that a pause can be a real one.
//!
//! A GC pause, a slow disk or a VM steal freezes a *process*; nothing inside it gets a
//! say. A child process can be frozen the same way: `SIGSTOP` stops it mid-instruction,
//! `SIGCONT` lets it run on, and it carries on as a process after a GC pause does.
//! `SIGKILL` is a crash that releases nothing.
//!
//! The parent and the child talk over the child's stdin and stdout, one JSON line per
//! message. A pipe keeps order and loses nothing, so the child's events reach the run's
//! log exactly as the child made them:
//!
//! ```text
//! parent ──► Orders (scenario, worker, run id, Redis URLs)     child connects to Redis
//! parent ◄── Ready                                             (or exits, error on stderr)
//! parent ──► Start (the run clock's start, monotonic ns)      child runs its steps
//! parent ◄── Event, Event, ...                                 what the worker did
//! parent ──► Fencing(on)                                       fencing switched
//! ```
//!
//! The parent side ([`parent`]) turns pause, resume and crash into signals and
//! records them as [`EventKind::Signal`]; the child
//! side ([`child`]) is the `fencelab worker` command.

pub mod child;
pub mod parent;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::log::EventKind;
use crate::backend::BackendError;
use crate::scenario::Scenario;

/// A message from the parent to a worker process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToChild {
    Orders(Box<Orders>),
    /// The run's clock started `monotonic_ns` (`platform::monotonic_ns`: the clock
    /// `Instant` reads, the same in every process of the machine): the child keeps
    /// the parent's scenario time.
    Start {
        monotonic_ns: u64,
    },
    /// Fencing was switched: later writes use it.
    Fencing(bool),
}

/// A message from a worker process to its parent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromChild {
    /// Connected to the lock service and the storage: the run can start.
    Ready,
    /// Something the worker did or learned (a `Worker` or `Command` event).
    Event(EventKind),
}

/// What one worker process is to do, and where.
#[derive(Debug, Serialize, Deserialize)]
pub struct Orders {
    pub scenario: Scenario,
    /// Which of the scenario's workers this process is.
    pub worker: String,
    pub run_id: String,
    /// The TTL the run's keys get on each write (see `Keys::expire_ms`).
    pub expire_ms: u64,
    /// The lock's Redis and the storage's, passwords included (this pipe is the only
    /// place they travel: never a command line, which `ps` shows to every user).
    pub lock_url: String,
    pub storage_url: String,
    pub fencing: bool,
    pub time_scale: f64,
    /// Makes the worker's lock values.
    pub seed: u64,
}

/// Why a worker process could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("{0}")]
    Backend(#[from] BackendError),
    #[error("worker process: {0}")]
    Protocol(String),
    #[error("worker process: {0}")]
    Io(#[from] std::io::Error),
}

/// The program worker processes run (`fencelab worker`): this very executable. The
/// simulator keeps its workers in-process: its clock is virtual, and a child cannot
/// share it.
pub fn worker_program(simulated: bool) -> Result<PathBuf, BackendError> {
    if simulated {
        return Err(BackendError::Unsupported(
            "the simulator runs workers inside fencelab (its clock is virtual); --processes needs real servers: drop --sim, or drop --processes".into(),
        ));
    }
    std::env::current_exe().map_err(|e| {
        BackendError::Unsupported(format!(
            "cannot find fencelab's own program to start workers: {e}"
        ))
    })
}

/// The program to run a scenario's workers with on real servers: the one asked for
/// (`--processes`), else this program when the scenario says so (`processes = true`).
pub fn for_scenario(asked: Option<PathBuf>, scenario: &Scenario) -> Option<PathBuf> {
    asked.or_else(|| scenario.processes.then(|| worker_program(false).ok()).flatten())
}
