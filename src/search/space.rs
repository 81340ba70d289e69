//! The bounded space of fault schedules `fencelab break` searches: which faults, on
//! which workers or servers, starting when (a grid over the design's own run) and
//! lasting how long (a grid reaching past two leases, since a pause shorter than the
//! lease can never outlive it).
//!
//! A *design* is the scenario with the schedule someone chose taken out: its scripted
//! `pause` steps and its faults of the kinds searched. What is left (the lock, the
//! workers' code, any other faults as the setting) is what the search tries to break.

use std::fmt;

use crate::scenario::{Fault, FaultKind, LockShape, Scenario, Step, StorageKind};

/// The fault kinds `break` can search over, by their scenario-file names.
pub const SEARCHABLE: [FaultKind; 4] =
    [FaultKind::Pause, FaultKind::Delay, FaultKind::ClockJump, FaultKind::Kill];

/// Why the asked-for space cannot be searched: each is one line for the user.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpaceError {
    #[error("unknown fault {0:?}: break searches over {1}")]
    Unknown(String, String),
    #[error("--faults is empty: name at least one of {0}")]
    Empty(String),
    #[error("{scenario:?} cannot have a `{kind}` fault: {why}")]
    Impossible { scenario: String, kind: &'static str, why: String },
}

fn searchable_names() -> String {
    SEARCHABLE.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// `pause,delay` as fault kinds.
pub fn parse_kinds(list: &str) -> Result<Vec<FaultKind>, SpaceError> {
    let mut kinds = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let kind = SEARCHABLE
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| SpaceError::Unknown(name.to_string(), searchable_names()))?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        return Err(SpaceError::Empty(searchable_names()));
    }
    Ok(kinds)
}

/// Why `scenario` cannot suffer a fault of `kind` (None: it can).
fn impossible(scenario: &Scenario, kind: FaultKind) -> Option<String> {
    match kind {
        FaultKind::Pause => None,
        FaultKind::Delay if (scenario.lock, scenario.storage) == (LockShape::Redis, StorageKind::Redis) => {
            None
        }
        FaultKind::Delay => Some(
            "link delays need the lock and the storage on one Redis (the proxy carries Redis connections only)"
                .into(),
        ),
        _ if scenario.lock.can(kind) => None,
        _ => {
            let can: Vec<&str> =
                SEARCHABLE.iter().filter(|&&k| scenario.lock.can(k)).map(|k| k.name()).collect();
            Some(format!(
                "{} has no such servers to fail ({} does: {})",
                scenario.lock.name(),
                LockShape::Redlock { nodes: 5 }.name(),
                if can.is_empty() { "kill, clock-jump".to_string() } else { can.join(", ") }
            ))
        }
    }
}

/// The kinds asked for, each checked against the scenario; `None` asks for every kind
/// the scenario can have but `delay`. A delayed reply makes the checker judge a write
/// when its reply arrives, not when the storage took it, so it can call a write
/// stale that the storage took in order: asked for by name, its finds need a look
/// at the storage's order.
pub fn kinds_for(
    scenario: &Scenario,
    asked: Option<&[FaultKind]>,
) -> Result<Vec<FaultKind>, SpaceError> {
    match asked {
        None => Ok(SEARCHABLE
            .into_iter()
            .filter(|&k| k != FaultKind::Delay && impossible(scenario, k).is_none())
            .collect()),
        Some(kinds) => {
            for &kind in kinds {
                if let Some(why) = impossible(scenario, kind) {
                    return Err(SpaceError::Impossible {
                        scenario: scenario.name.clone(),
                        kind: kind.name(),
                        why,
                    });
                }
            }
            Ok(kinds.to_vec())
        }
    }
}

/// What a scripted pause becomes in the design: a short stretch of work, where the
/// author said a pause can come. Removed outright, it would leave no moment between
/// the steps around it (a simulated command takes no time), so no searched pause
/// could land there; on real servers it would be a race of microseconds.
pub const PAUSE_SITE_MS: u64 = 100;

/// The scenario with the chosen schedule taken out: scripted pauses become
/// [`PAUSE_SITE_MS`] of work (when pauses are searched), and faults of a searched kind
/// go (a kill's restart with it).
pub fn design(scenario: &Scenario, kinds: &[FaultKind]) -> Scenario {
    let mut d = scenario.clone();
    let searched = |k: FaultKind| {
        kinds.contains(&k) || (k == FaultKind::Restart && kinds.contains(&FaultKind::Kill))
    };
    d.faults.retain(|f| !searched(f.kind));
    if kinds.contains(&FaultKind::Pause) {
        for step in d.workers.iter_mut().flat_map(|w| w.steps.iter_mut()) {
            if matches!(step, Step::Pause { .. }) {
                *step = Step::Work { ms: PAUSE_SITE_MS };
            }
        }
    }
    d.variants.clear();
    d.sweep = None;
    d.checkpoints.clear();
    d
}

/// What one searched fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Worker(String),
    /// A lock server, counting from 1 as scenario files do.
    Node(usize),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Worker(w) => write!(f, "{w}"),
            Target::Node(n) => write!(f, "node {n}"),
        }
    }
}

/// One fault of a schedule: what, to whom, when, how long (a pause's length, a delay,
/// a clock's jump, or how long a killed server stays down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub kind: FaultKind,
    pub target: Target,
    pub at_ms: u64,
    pub ms: u64,
}

impl Move {
    /// As `[[faults]]`: a kill is followed by its restart.
    pub fn faults(&self) -> Vec<Fault> {
        let (worker, node) = match &self.target {
            Target::Worker(w) => (Some(w.clone()), None),
            Target::Node(n) => (None, Some(*n)),
        };
        let fault = |at_ms, kind, ms| Fault { at_ms, node, worker: worker.clone(), ms, kind };
        match self.kind {
            FaultKind::Kill => vec![
                fault(self.at_ms, FaultKind::Kill, None),
                fault(self.at_ms + self.ms, FaultKind::Restart, None),
            ],
            kind => vec![fault(self.at_ms, kind, Some(self.ms))],
        }
    }
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (at, ms) = (secs(self.at_ms), secs(self.ms));
        match self.kind {
            FaultKind::Pause => write!(f, "{} freezes at {at} for {ms}", self.target),
            FaultKind::Delay => write!(f, "from {at}, {}'s replies arrive {ms} late", self.target),
            FaultKind::ClockJump => write!(f, "at {at}, {}'s clock jumps {ms} ahead", self.target),
            FaultKind::Kill => {
                write!(f, "{} dies at {at} and restarts, empty, {ms} later", self.target)
            }
            other => write!(f, "{} at {at} on {}", other.name(), self.target),
        }
    }
}

/// A schedule: the faults added to the design, at most a few.
pub type Schedule = Vec<Move>;

/// The scenario a schedule makes of a design.
pub fn apply(design: &Scenario, schedule: &[Move]) -> Scenario {
    let mut s = design.clone();
    s.faults.extend(schedule.iter().flat_map(Move::faults));
    s.faults.sort_by_key(|f| f.at_ms);
    s
}

/// Evenly spaced values `from..=to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub from: u64,
    pub to: u64,
    pub step: u64,
}

impl Grid {
    pub fn count(&self) -> u64 {
        (self.to - self.from) / self.step + 1
    }

    pub fn at(&self, i: u64) -> u64 {
        self.from + i * self.step
    }

    /// Every value, smallest first.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = u64> + use<> {
        let g = *self;
        (0..g.count()).map(move |i| g.at(i))
    }
}

/// A round step that cuts `span` into about `parts`: 10, 20, 50, 100, 200, 500 ms ...
fn round_step(span: u64, parts: u64) -> u64 {
    let raw = (span / parts).max(10);
    let mut unit = 10;
    loop {
        for m in [1, 2, 5] {
            if unit * m >= raw {
                return unit * m;
            }
        }
        unit *= 10;
    }
}

/// Every schedule of at most `max_faults` faults, on the grids.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub kinds: Vec<FaultKind>,
    /// Each kind with each thing it can hit.
    pub targets: Vec<(FaultKind, Target)>,
    pub start: Grid,
    pub length: Grid,
    pub max_faults: usize,
}

/// How many start times and lengths each grid has, about.
const GRID_PARTS: u64 = 40;

/// About as many on real servers: a few trials placed well, not many.
const COARSE_PARTS: u64 = 8;

/// Schedules hold at most this many faults: the smallest stories are one or two.
pub const MAX_FAULTS: usize = 2;

impl Space {
    /// The space for `design`, whose fault-free run ends at `end_ms`: starts from 0 to
    /// then, lengths up to two leases and the run (5 s for a lock without a lease).
    pub fn new(design: &Scenario, kinds: &[FaultKind], end_ms: u64) -> Space {
        Space::with_parts(design, kinds, end_ms, GRID_PARTS)
    }

    /// The same space on grids of about [`COARSE_PARTS`] steps: for trials on real
    /// servers, each a run of seconds, and for their shrinking.
    pub fn coarse(design: &Scenario, kinds: &[FaultKind], end_ms: u64) -> Space {
        Space::with_parts(design, kinds, end_ms, COARSE_PARTS)
    }

    fn with_parts(design: &Scenario, kinds: &[FaultKind], end_ms: u64, parts: u64) -> Space {
        let mut targets = Vec::new();
        for &kind in kinds {
            if kind == FaultKind::Pause || kind == FaultKind::Delay {
                targets
                    .extend(design.workers.iter().map(|w| (kind, Target::Worker(w.name.clone()))));
            } else {
                targets.extend((1..=design.lock.nodes()).map(|n| (kind, Target::Node(n))));
            }
        }
        let start_step = round_step(end_ms, parts);
        let start =
            Grid { from: 0, to: end_ms.div_ceil(start_step) * start_step, step: start_step };
        let lease = if design.ttl_ms == 0 { 5000 } else { design.ttl_ms };
        let longest = 2 * lease + end_ms;
        let length_step = round_step(longest, parts);
        let length = Grid {
            from: length_step,
            to: longest.div_ceil(length_step) * length_step,
            step: length_step,
        };
        Space { kinds: kinds.to_vec(), targets, start, length, max_faults: MAX_FAULTS }
    }

    /// How many one-fault schedules there are.
    pub fn singles(&self) -> u64 {
        self.targets.len() as u64 * self.start.count() * self.length.count()
    }

    /// The `i`-th one-fault schedule (target, then start, then length).
    pub fn single(&self, i: u64) -> Move {
        let (lengths, starts) = (self.length.count(), self.start.count());
        let (kind, target) = &self.targets[(i / (lengths * starts)) as usize];
        Move {
            kind: *kind,
            target: target.clone(),
            at_ms: self.start.at(i / lengths % starts),
            ms: self.length.at(i % lengths),
        }
    }

    /// A random schedule of two different faults.
    pub fn random_pair(&self, rng: &mut fastrand::Rng) -> Schedule {
        let first = self.single(rng.u64(0..self.singles()));
        loop {
            let second = self.single(rng.u64(0..self.singles()));
            if second != first {
                return vec![first, second];
            }
        }
    }

    /// The one-fault part in words: "single pauses of A and B from 0 to 2 s in 50 ms
    /// steps, lengths 0.1 to 4.2 s in 100 ms steps".
    pub fn describe(&self) -> String {
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|&k| {
                let on: Vec<String> = self
                    .targets
                    .iter()
                    .filter(|(tk, _)| *tk == k)
                    .map(|(_, t)| t.to_string())
                    .collect();
                format!("{} of {}", plural(k), and_list(&on))
            })
            .collect();
        format!(
            "single {} from {} to {} in {} ms steps, lengths {} to {} in {} ms steps",
            and_list(&kinds),
            secs(self.start.from),
            secs(self.start.to),
            self.start.step,
            secs(self.length.from),
            secs(self.length.to),
            self.length.step
        )
    }
}

fn plural(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Pause => "pauses",
        FaultKind::Delay => "reply delays",
        FaultKind::ClockJump => "clock jumps",
        FaultKind::Kill => "kills (down for the length)",
        _ => "faults",
    }
}

/// "A", "A and B", "A, B and C".
pub fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Milliseconds as a person reads them: "0 s", "2.05 s".
pub fn secs(ms: u64) -> String {
    let s = format!("{:.3}", ms as f64 / 1000.0);
    format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round() {
        assert_eq!(round_step(2000, 40), 50);
        assert_eq!(round_step(6200, 40), 200);
        assert_eq!(round_step(0, 40), 10);
    }

    #[test]
    fn unknown_and_empty_fault_lists_are_refused() {
        assert!(
            matches!(parse_kinds("pause,explode"), Err(SpaceError::Unknown(n, _)) if n == "explode")
        );
        assert_eq!(parse_kinds(" , "), Err(SpaceError::Empty(searchable_names())));
        assert_eq!(parse_kinds("pause,pause,kill").unwrap(), [FaultKind::Pause, FaultKind::Kill]);
    }

    #[test]
    fn singles_enumerate_every_target_start_and_length_once() {
        let space = Space {
            kinds: vec![FaultKind::Pause],
            targets: vec![
                (FaultKind::Pause, Target::Worker("A".into())),
                (FaultKind::Pause, Target::Worker("B".into())),
            ],
            start: Grid { from: 0, to: 100, step: 50 },
            length: Grid { from: 100, to: 200, step: 100 },
            max_faults: 2,
        };
        assert_eq!(space.singles(), 12);
        let mut all: Vec<String> = (0..12).map(|i| space.single(i).to_string()).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 12);
        assert_eq!(
            space.single(11),
            Move {
                kind: FaultKind::Pause,
                target: Target::Worker("B".into()),
                at_ms: 100,
                ms: 200
            }
        );
    }
}
