//! The bounded space of fault schedules `fencelab break` searches: which faults, on
//! which workers or servers, starting when (a grid over the design's own run) and
//! lasting how long (a grid reaching past two leases, since a pause shorter than the
//! lease can never outlive it, and a length just past each of the design's own
//! leases and timeouts).
//!
//! A *design* is the scenario with the schedule someone chose taken out: its scripted
//! `pause` steps and its faults of the kinds searched. What is left (the lock, the
//! workers' code, any other faults as the setting) is what the search tries to break.

use std::fmt;

use crate::scenario::{Fault, FaultKind, Scenario, Step, WaitStrategy, spec};

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

/// Whether a searched fault of `kind` can happen to `scenario`'s lock servers. A
/// searched kill is a server down for a while, then back empty: a lock whose servers
/// come back only when the next run resets them (the failover pair's) has none.
fn searchable_on(scenario: &Scenario, kind: FaultKind) -> bool {
    let lock = scenario.lock;
    lock.can(kind) && (kind != FaultKind::Kill || lock.can(FaultKind::Restart))
}

/// Why `scenario` cannot suffer a fault of `kind` (None: it can).
fn impossible(scenario: &Scenario, kind: FaultKind) -> Option<String> {
    match kind {
        FaultKind::Pause => None,
        FaultKind::Delay => scenario.link_faults_refused(),
        _ if searchable_on(scenario, kind) => None,
        FaultKind::Kill if scenario.lock.can(kind) => Some(format!(
            "a searched kill is a server down for a while, then restarted empty, and the servers of {} do not restart (its own kills stay in the design)",
            scenario.lock.name()
        )),
        _ => {
            let searchable = SEARCHABLE.iter().filter(|&&k| searchable_on(scenario, k));
            let can: Vec<&str> = searchable.map(|k| k.name()).collect();
            Some(format!(
                "{} has no such servers to fail ({} does: {})",
                scenario.lock.name(),
                spec::REDLOCK.name,
                if can.is_empty() { "kill, clock-jump".to_string() } else { can.join(", ") }
            ))
        }
    }
}

/// The kinds asked for, each checked against the scenario; `None` asks for every kind
/// the scenario can have.
pub fn kinds_for(
    scenario: &Scenario,
    asked: Option<&[FaultKind]>,
) -> Result<Vec<FaultKind>, SpaceError> {
    match asked {
        None => Ok(SEARCHABLE.into_iter().filter(|&k| impossible(scenario, k).is_none()).collect()),
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
    /// A pause of a program worker at a moment of its own (`at_ms` then says where
    /// that moment fell in the run it was found in).
    pub on: Option<crate::scenario::Moment>,
}

impl Move {
    /// As `[[faults]]`: a kill is followed by its restart.
    pub fn faults(&self) -> Vec<Fault> {
        let (worker, node) = match &self.target {
            Target::Worker(w) => (Some(w.clone()), None),
            Target::Node(n) => (None, Some(*n)),
        };
        let on = self.on.clone();
        let fault = |at_ms, kind, ms| Fault {
            at_ms,
            node,
            worker: worker.clone(),
            ms,
            kind,
            on: on.clone(),
        };
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
            FaultKind::Pause => match &self.on {
                Some(on) => write!(f, "{} freezes {on} (at {at} when found) for {ms}", self.target),
                None => write!(f, "{} freezes at {at} for {ms}", self.target),
            },
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

/// A lease or a timeout of the design, in scenario ms: a fault just longer than one
/// (a pause past the lease, a server down past the session timeout) is where a
/// design is likeliest to break, so the length grid always holds a length just past
/// each, whatever its step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeout {
    /// What it is, with the field it comes from and its value ("the lease (ttl_ms =
    /// 2000)").
    pub what: String,
    pub ms: u64,
}

/// How far past a lease or timeout its length goes: the room shrinking keeps too.
pub const PAST_MS: u64 = 100;

/// Every lease and timeout `design` has, each once, shortest first: the lock's own
/// (the lease, Redlock's TTL, etcd's lease, the Kubernetes Lease's
/// duration, ZooKeeper's session timeout, the queue's claim threshold), the poll
/// interval, and each worker's `give_up_ms` and `wait-replicas` timeout.
pub fn timeouts(design: &Scenario) -> Vec<Timeout> {
    let mut all = Vec::new();
    let ttl = design.ttl_ms;
    if ttl > 0 {
        let what = format!("{} (ttl_ms = {ttl})", design.lock.spec().words.lease_setting);
        all.push(Timeout { what, ms: ttl });
    }
    if let Some(poll) = design.poll_ms.filter(|&ms| ms > 0 && design.wait == WaitStrategy::Poll) {
        all.push(Timeout { what: format!("the poll interval (poll_ms = {poll})"), ms: poll });
    }
    for w in &design.workers {
        for step in &w.steps {
            match step {
                Step::Acquire { give_up_ms: Some(ms) } if *ms > 0 => all.push(Timeout {
                    what: format!("{}'s wait for the lock (give_up_ms = {ms})", w.name),
                    ms: *ms,
                }),
                Step::WaitReplicas { timeout_ms, .. } if *timeout_ms > 0 => all.push(Timeout {
                    what: format!("{}'s wait-replicas (timeout_ms = {timeout_ms})", w.name),
                    ms: *timeout_ms,
                }),
                _ => {}
            }
        }
    }
    all.sort_by_key(|t| t.ms);
    all.dedup_by_key(|t| t.ms);
    all
}

/// Every schedule of at most `max_faults` faults, on the grids.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub kinds: Vec<FaultKind>,
    /// Each kind with each thing it can hit.
    pub targets: Vec<(FaultKind, Target)>,
    pub start: Grid,
    /// The lengths tried, shortest first: a grid of `length_step`, and [`PAST_MS`]
    /// past each of `timeouts`.
    pub length: Vec<u64>,
    pub length_step: u64,
    /// The design's leases and timeouts the lengths reach past.
    pub timeouts: Vec<Timeout>,
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
    /// then, lengths up to two of its longest lease or timeout and the run (5 s for a
    /// design without any), and just past each lease and timeout. A run that never
    /// ends by itself (a waiter for a job nobody will free, stopped an hour later)
    /// counts until the design's longest possible run (`Scenario::longest_run_ms`):
    /// an hour-long run would make the grids' steps minutes long.
    pub fn new(design: &Scenario, kinds: &[FaultKind], end_ms: u64) -> Space {
        Space::with_parts(design, kinds, end_ms, GRID_PARTS)
    }

    /// The same space on grids of about `COARSE_PARTS` steps: for trials on real
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
        let end_ms = end_ms.min(design.longest_run_ms());
        let start_step = round_step(end_ms, parts);
        let start =
            Grid { from: 0, to: end_ms.div_ceil(start_step) * start_step, step: start_step };
        let timeouts = timeouts(design);
        let lease = timeouts.last().map_or(5000, |t| t.ms);
        let longest = 2 * lease + end_ms;
        let length_step = round_step(longest, parts);
        let grid = Grid {
            from: length_step,
            to: longest.div_ceil(length_step) * length_step,
            step: length_step,
        };
        let mut length: Vec<u64> =
            grid.values().chain(timeouts.iter().map(|t| t.ms + PAST_MS)).collect();
        length.sort_unstable();
        length.dedup();
        Space {
            kinds: kinds.to_vec(),
            targets,
            start,
            length,
            length_step,
            timeouts,
            max_faults: MAX_FAULTS,
        }
    }

    /// How many one-fault schedules there are.
    pub fn singles(&self) -> u64 {
        self.targets.len() as u64 * self.start.count() * self.length.len() as u64
    }

    /// The `i`-th one-fault schedule (target, then start, then length).
    pub fn single(&self, i: u64) -> Move {
        let (lengths, starts) = (self.length.len() as u64, self.start.count());
        let (kind, target) = &self.targets[(i / (lengths * starts)) as usize];
        Move {
            kind: *kind,
            target: target.clone(),
            at_ms: self.start.at(i / lengths % starts),
            ms: self.length[(i % lengths) as usize],
            on: None,
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
        let (shortest, longest) =
            (self.length.first().copied().unwrap_or(0), self.length.last().copied().unwrap_or(0));
        let mut line = format!(
            "single {} from {} to {} in {} ms steps, lengths {} to {} in {} ms steps",
            and_list(&kinds),
            secs(self.start.from),
            secs(self.start.to),
            self.start.step,
            secs(shortest),
            secs(longest),
            self.length_step
        );
        if !self.timeouts.is_empty() {
            let past: Vec<String> = self
                .timeouts
                .iter()
                .map(|t| format!("{} past {}", secs(t.ms + PAST_MS), t.what))
                .collect();
            line.push_str(&format!(" and {}", and_list(&past)));
        }
        line
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

pub use crate::scenario::and_list;

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

    /// A design of `lock` (a line of TOML) with a lease of `ttl_ms`, B giving up
    /// after 0.7 s.
    fn design_of(lock: &str, ttl_ms: u64) -> Scenario {
        let src = format!(
            "name = \"t\"\ntitle = \"T\"\nttl_ms = {ttl_ms}\n{lock}\n[[workers]]\nname = \"A\"\n\
             steps = [{{ do = \"acquire\" }}, {{ do = \"work\", ms = 200 }}, {{ do = \"write\", value = \"a\" }}]\n\
             [[workers]]\nname = \"B\"\nstart_ms = 100\n\
             steps = [{{ do = \"acquire\", give_up_ms = 700 }}, {{ do = \"write\", value = \"b\" }}]\n"
        );
        crate::scenario::parse_scenario(&src, "t.toml").unwrap_or_else(|e| panic!("{lock}: {e}"))
    }

    /// The grid holds a length just past each of the design's leases and timeouts,
    /// for every kind of lock, whatever the step of the rest of the grid.
    #[test]
    fn the_length_grid_reaches_just_past_each_lease_and_timeout_of_every_lock_kind() {
        for (lock, lease_ms, says) in [
            ("lock = \"redis\"", 1500, "the lease (ttl_ms = 1500)"),
            ("redlock_nodes = 5", 1500, "Redlock's TTL (ttl_ms = 1500)"),
            ("replica = true", 1500, "the lease (ttl_ms = 1500)"),
            // etcd grants whole seconds.
            ("lock = \"etcd\"", 2000, "etcd's lease (ttl_ms = 2000)"),
            ("lock = \"k8s-lease\"", 1500, "the Lease's duration (ttl_ms = 1500)"),
            (
                "lock = \"zookeeper\"\nwait = \"notify\"",
                1500,
                "the session timeout (ttl_ms = 1500)",
            ),
            (
                "lock = \"stream\"",
                1500,
                "the claim threshold, XAUTOCLAIM's min-idle-time (ttl_ms = 1500)",
            ),
        ] {
            let design = design_of(lock, lease_ms);
            // A run that never ends by itself, stopped an hour later.
            let space = Space::new(&design, &[FaultKind::Pause], 3_700_000);
            let found: Vec<(&str, u64)> =
                space.timeouts.iter().map(|t| (t.what.as_str(), t.ms)).collect();
            assert!(found.contains(&(says, lease_ms)), "{lock}: {found:?}");
            assert!(
                found.iter().any(|(w, ms)| w.contains("give_up_ms = 700") && *ms == 700),
                "{lock}: {found:?}"
            );
            for t in &space.timeouts {
                assert!(
                    space.length.contains(&(t.ms + PAST_MS)),
                    "{lock}: {} in {:?}",
                    t.what,
                    space.length
                );
            }
            // The steps stay those of the design's own times, not of an hour.
            assert!(space.length_step <= 500 && space.start.step <= 500, "{lock}: {space:?}");
            assert!(
                *space.length.last().unwrap()
                    <= 2 * lease_ms + design.longest_run_ms() + space.length_step
            );
            assert!(
                space.describe().contains(&format!("{} past {says}", secs(lease_ms + PAST_MS))),
                "{}",
                space.describe()
            );
        }
    }

    #[test]
    fn a_poll_interval_is_a_timeout_too() {
        let mut design = design_of("lock = \"redis\"", 1500);
        design.wait = WaitStrategy::Poll;
        design.poll_ms = Some(300);
        let space = Space::new(&design, &[FaultKind::Pause], 1000);
        assert!(space.timeouts.iter().any(|t| t.what == "the poll interval (poll_ms = 300)"));
        assert!(space.length.contains(&400), "{:?}", space.length);
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
            length: vec![100, 200],
            length_step: 100,
            timeouts: vec![],
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
                ms: 200,
                on: None
            }
        );
    }
}
