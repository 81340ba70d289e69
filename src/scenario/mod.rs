//! Scenarios: who the workers are and what each one does, as data.
//!
//! A scenario is plain TOML (see `assets/scenarios/gc-pause.toml`), so the built-in
//! ones, lesson files and test cases all share one format and one parser. Parsing is
//! strict (`deny_unknown_fields`) and every error names the file, line and column,
//! because instructors write these by hand.

mod builtin;
mod parse;

pub use builtin::{builtin, builtin_names};
pub use parse::{ScenarioError, parse_scenario};

use serde::{Deserialize, Serialize};

use crate::check::ViolationKind;

/// Everything the engine needs to run one experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short identifier, used on the command line (`fencelab run gc-pause`).
    pub name: String,
    /// Human title for headers.
    pub title: String,
    /// One-sentence summary for listings.
    #[serde(default)]
    pub summary: String,
    /// Lease length handed to Redis as `PX`, in scenario milliseconds. 0 means the
    /// lock never expires (the "locks must expire" lesson needs that).
    pub ttl_ms: u64,
    /// Whether the storage checks fencing tokens. The command line can override it.
    #[serde(default)]
    pub fencing: bool,
    /// How a worker takes the lock.
    #[serde(default)]
    pub acquire: AcquireMode,
    /// How a worker gives the lock back.
    #[serde(default)]
    pub release: ReleaseMode,
    pub workers: Vec<WorkerSpec>,
    /// What a correct run of this scenario shows, per fencing mode; `--check` compares.
    #[serde(default)]
    pub expect: Expect,
}

/// One worker: a name (also the lane label) and its script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpec {
    pub name: String,
    /// When the worker starts its script, in scenario milliseconds since the run began.
    #[serde(default)]
    pub start_ms: u64,
    pub steps: Vec<Step>,
}

/// One thing a worker does. Steps run in order; each waits for the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Step {
    /// Take the lock, waiting for it if another worker holds it. A waiter sleeps
    /// until the holder's lease is due to expire, then tries again; with
    /// `give_up_ms`, it stops waiting after that long.
    Acquire {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        give_up_ms: Option<u64>,
    },
    /// Stop dead for `ms` (a GC pause, a slow disk, a VM losing its CPU). The worker
    /// issues no command while paused, so it cannot notice its lease expiring.
    Pause { ms: u64 },
    /// Do useful work for `ms`. Unlike a pause this is expected and visible.
    Work { ms: u64 },
    /// Ask Redis "do I still hold the lock?" (`GET` == my value).
    Check,
    /// Write `value` to the storage, with the fencing token from the last grant.
    Write { value: String },
    /// Give the lock back (compare-and-delete, or plain `DEL` if the scenario says so).
    Release,
    /// Extend the lease to the full TTL again, only if still the owner.
    Renew,
    /// Die without releasing anything: the lock stays until its lease expires.
    Crash,
}

/// How the lock is taken; the gap between the two forms is itself a lesson.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AcquireMode {
    /// `SET NX PX` and `INCR` in one Lua call: the token is handed out atomically.
    #[default]
    Script,
    /// `SET NX PX`, then `INCR` as a second command: another client can slip between.
    TwoStep,
}

/// How the lock is given back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReleaseMode {
    /// Delete only if the key still holds my value (the safe Lua script).
    #[default]
    CompareAndDelete,
    /// Plain `DEL`: deletes whoever's lock is there now. Unsafe, kept for the lesson.
    Del,
}

/// The expected outcome of a scenario in each fencing mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub fencing_off: Option<Expectation>,
    pub fencing_on: Option<Expectation>,
}

impl Expect {
    /// The expectation for the given fencing mode, if the scenario states one.
    pub fn for_mode(&self, fencing: bool) -> Option<&Expectation> {
        if fencing { self.fencing_on.as_ref() } else { self.fencing_off.as_ref() }
    }
}

/// What the storage holds at the end and which kinds of violation the checker finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Accepted writes in storage order, each as `WORKER:TOKEN`.
    pub storage: Vec<String>,
    /// The kinds of violation the checker must report (and no others).
    #[serde(default)]
    pub violations: Vec<ViolationKind>,
}

impl Scenario {
    /// The worker names in lane order.
    pub fn worker_names(&self) -> Vec<String> {
        self.workers.iter().map(|w| w.name.clone()).collect()
    }
}
