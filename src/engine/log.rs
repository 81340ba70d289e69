//! The event log: the single source of truth of a run.
//!
//! Workers and the observer append; everything a person sees (transcript, JSON lines,
//! the TUI, the checker) reads. Appending takes the timestamp under the same lock
//! that orders the events, so log order and time order always agree.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::backend::StoredWrite;
pub use crate::name::Name;
use crate::scenario::{Scenario, WaitStrategy};

/// Version of the event format, written in the first event of every log.
pub const LOG_FORMAT_VERSION: u32 = 1;

/// One fact, with when it became true.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the log, from 0.
    pub seq: u64,
    /// Scenario milliseconds since the run started (real time divided by the speed
    /// factor, so slow-motion runs have the same timestamps as normal ones).
    pub t_ms: f64,
    /// When it happened, when that was before it was logged: a class student's
    /// event, dated by the student's clock, reaches the class late (by its post, and
    /// the posts queued before it). The log stays in `t_ms` order, which every view
    /// reads; the checker orders and times beliefs by [`Event::happened`], so a
    /// release that arrived after the grant it let through is still before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub happened_ms: Option<f64>,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// When it happened: when it was logged, unless its sender dated it earlier.
    pub fn happened(&self) -> f64 {
        self.happened_ms.map_or(self.t_ms, |ms| ms.min(self.t_ms))
    }

    /// Events in the order they happened: by [`Event::happened`], then as logged
    /// (the log's own order but for a class student's events, logged as they arrive).
    pub fn happened_order(&self, other: &Event) -> std::cmp::Ordering {
        self.happened().total_cmp(&other.happened()).then(self.seq.cmp(&other.seq))
    }
}

#[cfg(test)]
impl Event {
    /// `worker`'s event `what` at `t_ms` (numbered 0): a log written by hand in a test.
    pub fn of_worker(t_ms: f64, worker: &str, what: WorkerEvent) -> Event {
        let kind = EventKind::Worker { worker: worker.into(), what };
        Event { seq: 0, t_ms, happened_ms: None, kind }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The first event: what runs, where, and how.
    RunStarted {
        version: u32,
        run_id: String,
        /// Shared, not copied: a search hands each trial's schedule on as it is, and
        /// every copy of the log (snapshots, views) points at the one scenario.
        scenario: Arc<Scenario>,
        fencing: bool,
        /// What the run is called ("fencing tokens: off", a lesson's variant).
        #[serde(default)]
        label: String,
        backend: String,
        /// Real time per scenario time: 2.0 is half speed.
        time_scale: f64,
    },
    /// What a worker did or learned: its belief.
    Worker { worker: Name, what: WorkerEvent },
    /// What Redis itself holds: the observer's reading.
    Truth(Truth),
    /// A foreign program's lock value is `worker`'s: its `acquired` report, or its
    /// server's OK to its `SET ... NX` (seen by its proxy), said so. The observer names
    /// the holder it reads by it; in a class it travels with the student's events.
    Claimed { worker: Name, value: String },
    /// A line a foreign program wrote on its stderr (its own log: shown, bounded,
    /// never parsed).
    Stderr { worker: Name, line: String },
    /// One call a worker made, as the commands sent and the reply, for the inspector.
    Command {
        worker: Name,
        command: String,
        reply: String,
        latency_ms: f64,
        /// A foreign program's own call, carried by its proxy (absent for fencelab's
        /// calls, the writes it makes for a program among them): where `break` finds a
        /// program's own moments to pause it at.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        program: Option<ProgramCall>,
    },
    /// Fencing was switched during the run; it applies to later writes.
    FencingChanged { on: bool },
    /// A lock server failed (Redlock), as the scenario said. `node` counts from 1;
    /// `ms` is the fault's size (a clock jump's), absent for kinds without one (and in
    /// logs saved before sizes existed).
    Fault {
        node: usize,
        kind: crate::scenario::FaultKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// A worker's link to its servers changed, as the scenario said: delayed by `ms`
    /// (scenario ms), partitioned, or healed.
    Link {
        worker: Name,
        kind: crate::scenario::FaultKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// A server the run depends on did not answer the observer within its deadline
    /// (stopped, overloaded) or went away (refused or closed the connection), with no
    /// fault in the scenario to explain it: the run ends with an error naming `server`.
    ServerLost { server: String, reason: String },
    /// The kernel was told to stop, continue or kill a worker that runs as its own
    /// process (`--processes`): a pause nothing inside the worker had a say in.
    Signal { worker: Name, signal: KernelSignal, pid: u32 },
    /// A class's room refused something a student posted (an event in another's name,
    /// events that never arrived): shown, and kept out of the worker's lane.
    /// `total`: how many of this student's posts the room has refused so far (a flood
    /// is logged a line a second, each with the count).
    Refused {
        student: String,
        why: String,
        #[serde(default)]
        total: u64,
    },
    /// A class's student left mid-run (their `fencelab join` ended or lost the room):
    /// their worker counts as crashed from here, its lease expiring as a crash's does.
    Left {
        student: String,
        why: String,
        /// When the room first found them gone, where it found it (no connection for a
        /// while) rather than being told: their part had ended by then, though this
        /// event is logged only once the room gave up on them. None: they said they
        /// were leaving, at this event's time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gone_since_ms: Option<f64>,
    },
    /// The last event.
    RunEnded {
        /// The storage contents, read back from the store at the end.
        storage: Vec<StoredWrite>,
        outcome: RunOutcome,
    },
}

/// Where a foreign program's call came: the step of its script (from 1; absent for a
/// free-running program), and whether the server's reply granted it the lock (its
/// `SET ... NX` answered OK).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grant: bool,
}

/// What a worker believes: each event is something it did, or an answer it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkerEvent {
    Started,
    /// The lock is taken; the worker sleeps `retry_in_ms` (the holder's remaining
    /// lease, or with `wait = "poll"` the interval) and tries again; with
    /// `wait = "notify"` a release wakes it sooner. `retry_in_ms` is None when the
    /// lease never expires.
    Waiting {
        holder: Option<Name>,
        retry_in_ms: Option<f64>,
        /// Absent in logs of `ttl` waiters (all logs before waiting strategies).
        #[serde(default, skip_serializing_if = "WaitStrategy::is_default")]
        wait: WaitStrategy,
    },
    /// The worker gave up waiting.
    GaveUp,
    /// The worker now believes it holds the lock, with this fencing token.
    Acquired {
        token: u64,
    },
    /// Frozen for `ms` (None: until resumed): no commands, no chance to notice
    /// anything. `by_user` when someone pressed a key rather than the script pausing.
    Paused {
        ms: Option<u64>,
        by_user: bool,
    },
    Resumed,
    Working {
        ms: u64,
    },
    /// "Do I still hold the lock?" answered by Redis.
    Checked {
        still_owner: bool,
    },
    /// A write to the storage and the storage's verdict. `redis_holder` is who Redis
    /// listed as the lock holder right after the write: the "still own lock?" answer.
    Wrote {
        value: String,
        token: Option<u64>,
        accepted: bool,
        redis_holder: Option<Name>,
        /// An accepted write's place in the storage's own order (its n-th entry,
        /// counted by the storage in the same atomic step as the write): the checker
        /// judges writes in this order, not in the order their replies were logged,
        /// which a link that delays replies can change. Absent in logs from before it
        /// was kept (judged in log order) and for a refused write.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        order: Option<u64>,
        /// Why the storage refused it (None for an accepted write, and in logs from
        /// before reasons were kept, where a refusal was a stale token).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<Refusal>,
        /// Written by a program itself, in its own transaction (the protocol's
        /// `wrote`): a row it inserted into the storage's table, which fencelab found
        /// there (or not), not a write fencelab made and checked.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        own: bool,
    },
    /// The release; `deleted` is false when the lock was no longer ours to delete
    /// (compare-and-delete), or when there was nothing to delete.
    Released {
        deleted: bool,
        unsafe_del: bool,
    },
    /// A lease extension; `extended` is false when the lock was already lost.
    Renewed {
        extended: bool,
    },
    /// `WAIT`'s answer: how many replicas had the worker's writes within the timeout.
    Replicated {
        acked: u64,
        wanted: u64,
    },
    /// A lesson statement on the SQL tables (no lock involved): the SQL, rows returned
    /// or changed, the value read, and what it made happen ("sold 1 (stock was 1)").
    Sql {
        statement: String,
        rows: u64,
        value: Option<i64>,
        result: Option<String>,
    },
    /// What a foreign program reported that fencelab cannot see for itself (its
    /// library waits, noticed it lost the lock, could not release it), in its own
    /// words: every view tells it as the program's, never with a reason or a mechanism
    /// the program did not give.
    Said {
        said: Said,
    },
    /// A call got no answer because the connection was lost (the worker's link was
    /// cut): the worker cannot tell whether it still holds the lock, and goes on.
    Unanswered {
        call: String,
    },
    Crashed,
    /// Learned it had lost the lock and stopped its work there (the safe reaction).
    StoppedWork,
    Finished,
    /// A backend failure ended this worker.
    Failed {
        error: String,
    },
}

/// A foreign program's report, as it gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Said {
    /// Its library waits for the lock (why, and for how long, it did not say).
    Waiting,
    /// Its library noticed it lost the lock, or gave up on it; its reason, if any.
    Lost {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    /// Its release did nothing; its reason, if any.
    ReleaseFailed {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
}

/// Why the storage refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// Its token was lower than one the fenced storage had accepted (or equal, when
    /// it compares strictly).
    StaleToken,
    /// It carried no token, and the storage fences: it takes only writes with one.
    NoToken,
    /// Its idempotency key (the write's value) had been applied before.
    Repeat,
    /// A write a program made itself, in its own transaction, that the storage does
    /// not have: its transaction did not commit (`wrote` in the worker protocol).
    NotLanded,
}

impl Refusal {
    /// Why a storage that checks writes as `check` refused one with `token`.
    pub fn of(check: crate::backend::WriteCheck, token: Option<u64>) -> Option<Self> {
        use crate::backend::WriteCheck;
        match check {
            WriteCheck::None => None,
            WriteCheck::Fencing(_) if token.is_none() => Some(Refusal::NoToken),
            WriteCheck::Fencing(_) => Some(Refusal::StaleToken),
            WriteCheck::IdempotencyKey => Some(Refusal::Repeat),
        }
    }
}

/// The observer's reading of Redis at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// The worker Redis lists as holder (from the lock value), if any.
    pub holder: Option<Name>,
    /// Remaining lease in scenario ms (None: no holder, or no expiry).
    pub ttl_ms: Option<f64>,
    pub fence_counter: u64,
    pub storage_highest: u64,
    /// Redlock: who each node lists (None: nobody, or the node is down).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Option<Name>>,
    /// Set when the previous holder lost the key because its lease ran out (its
    /// deadline had passed), as opposed to deleting it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired: Option<Name>,
}

/// A signal sent to a worker's process, as `kill(1)` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KernelSignal {
    /// Freeze the process mid-instruction (it cannot catch or ignore this).
    #[serde(rename = "SIGSTOP")]
    Stop,
    /// Let a stopped process run on from where it was frozen.
    #[serde(rename = "SIGCONT")]
    Cont,
    /// End the process on the spot: it releases nothing.
    #[serde(rename = "SIGKILL")]
    Kill,
}

impl KernelSignal {
    pub fn name(self) -> &'static str {
        match self {
            KernelSignal::Stop => "SIGSTOP",
            KernelSignal::Cont => "SIGCONT",
            KernelSignal::Kill => "SIGKILL",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunOutcome {
    Completed,
    Interrupted,
    Failed { error: String },
}

/// The log itself, shared by the engine and every live view.
pub struct EventLog {
    events: Mutex<Vec<Event>>,
    clock: RunClock,
    /// How long after `clock`'s start the run's clock was started again
    /// ([`EventLog::restart_clock`]), in ns.
    restarted_ns: AtomicU64,
    /// Carries the number of events, so views can wait for "something new".
    len: watch::Sender<usize>,
}

/// Scenario time for one run: real (or virtual) time since start, over the speed factor.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    start: Instant,
    time_scale: f64,
}

impl RunClock {
    pub fn start_now(time_scale: f64) -> Self {
        RunClock { start: Instant::now(), time_scale }
    }

    /// A clock that started at `start`: a worker process keeps its parent's run clock.
    pub fn started_at(start: Instant, time_scale: f64) -> Self {
        RunClock { start, time_scale }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// Scenario milliseconds since start, to the microsecond.
    pub fn now_ms(&self) -> f64 {
        let real_ms = self.start.elapsed().as_secs_f64() * 1000.0;
        (real_ms / self.time_scale * 1000.0).round() / 1000.0
    }

    /// The real instant at which scenario time `ms` is reached.
    pub fn instant_at(&self, ms: f64) -> Instant {
        self.start + self.real(ms)
    }

    /// The real duration of `ms` scenario milliseconds.
    pub fn real(&self, ms: f64) -> std::time::Duration {
        std::time::Duration::from_secs_f64((ms * self.time_scale).max(0.0) / 1000.0)
    }

    /// Scenario milliseconds for a real duration in ms (a PTTL reply, say).
    pub fn scenario_ms(&self, real_ms: f64) -> f64 {
        real_ms / self.time_scale
    }
}

impl EventLog {
    pub fn new(clock: RunClock) -> Self {
        let restarted_ns = AtomicU64::new(0);
        EventLog { events: Mutex::new(Vec::new()), clock, restarted_ns, len: watch::Sender::new(0) }
    }

    pub fn clock(&self) -> RunClock {
        let since = std::time::Duration::from_nanos(self.restarted_ns.load(Ordering::SeqCst));
        RunClock { start: self.clock.start + since, ..self.clock }
    }

    /// Start the run's clock again, now: a run prepared ahead of its time (a search's
    /// spare, whose programs start while the trials before it run) begins when it is
    /// executed, not when it was ready. Only the events of its preparation are older,
    /// stamped at 0.
    pub fn restart_clock(&self) {
        let since = self.clock.start.elapsed().as_nanos();
        self.restarted_ns.store(u64::try_from(since).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Event>> {
        // Appends finish before anything can panic, so a poisoned log is still whole.
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Change the scenario of the run's start (its first event) with `change`, while
    /// nothing else has happened; what `change` returns (false when it cannot).
    pub fn restate_start(&self, change: impl FnOnce(&mut Scenario) -> bool) -> bool {
        match self.lock().as_mut_slice() {
            [Event { kind: EventKind::RunStarted { scenario, .. }, .. }] => {
                change(Arc::make_mut(scenario))
            }
            _ => false,
        }
    }

    /// Append an event stamped with the current scenario time.
    pub fn append(&self, kind: EventKind) -> Event {
        let mut events = self.lock();
        let t_ms = self.clock().now_ms();
        let event = Event { seq: events.len() as u64, t_ms, happened_ms: None, kind };
        events.push(event.clone());
        let n = events.len();
        drop(events);
        self.len.send_replace(n);
        event
    }

    /// Append an event now that happened at scenario time `happened_ms` by its
    /// sender's reckoning (a student's worker, whose events reach the class later
    /// than they happened).
    pub fn append_happened(&self, kind: EventKind, happened_ms: f64) -> Event {
        let mut events = self.lock();
        let t_ms = self.clock().now_ms();
        let happened_ms = Some(happened_ms).filter(|ms| *ms < t_ms);
        let event = Event { seq: events.len() as u64, t_ms, happened_ms, kind };
        events.push(event.clone());
        let n = events.len();
        drop(events);
        self.len.send_replace(n);
        event
    }

    /// Add an event as another log stamped it: a student's screen keeps a copy of the
    /// class's log, in the instructor's numbering and time.
    pub fn copy(&self, event: Event) {
        let mut events = self.lock();
        events.push(event);
        let n = events.len();
        drop(events);
        self.len.send_replace(n);
    }

    /// A copy of every event so far.
    pub fn snapshot(&self) -> Vec<Event> {
        self.lock().clone()
    }

    /// Events from position `from` on.
    pub fn since(&self, from: usize) -> Vec<Event> {
        let events = self.lock();
        events.get(from..).map(<[Event]>::to_vec).unwrap_or_default()
    }

    /// Call `f` on every event, past and future, until the run's last event.
    pub async fn follow(&self, mut f: impl FnMut(&Event)) {
        let mut grown = self.subscribe();
        let mut seen = 0;
        loop {
            let new = self.since(seen);
            seen += new.len();
            for e in &new {
                f(e);
                if matches!(e.kind, EventKind::RunEnded { .. }) {
                    return;
                }
            }
            if grown.changed().await.is_err() {
                return;
            }
        }
    }

    /// Wakes whenever the log grows.
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.len.subscribe()
    }
}
