//! The stepper: a run of a scenario as a plain discrete-event loop, for searches that
//! need a hundred thousand runs a second (`fencelab break`, `fencelab bench sim`).
//!
//! The simulator proper runs the engine itself (tokio tasks, channels, the observer,
//! the backends behind trait objects) on a paused-clock runtime: the same code as on
//! real servers, which is what makes it trustworthy, and about 6,000 runs a second,
//! most of it building runtimes, spawning tasks and formatting commands. This module
//! is the same run written as a loop over instants, on one thread, with no runtime,
//! no tasks and no channels: a few `Vec`s per run, and the scenario it is handed,
//! shared with the run's log rather than copied into it.
//!
//! Why it is shaped like tokio's scheduler rather than like "every worker, in order":
//! where two things happen at one instant (a waiter retrying the moment a lease ends,
//! a worker waking as another releases), the order decides the outcome, and the
//! simulator's order is the current-thread runtime's. So the loop keeps its three
//! rules: timers due at one instant fire in the order they were set; a woken task
//! runs, until it waits again, in the order it was woken; a waiter that slept
//! (`yield_now` in `engine/worker.rs`) tries again only after every task woken at
//! that instant has run. The observer is a task like the others, woken by the log
//! growing, by its lease-end timer and every 100 ms, so `Truth` events fall where the
//! engine's would. Where the runtime itself is not deterministic (`select!` picks at
//! random among branches ready together: a `pause` fault landing at the very instant
//! a worker's sleep ends), the stepper takes the fault first.
//!
//! Kept honest by `tests/suite/stepper.rs`: for every scenario it supports, and for
//! hundreds of random `pause` fault schedules, its outcomes, storage and checker
//! violations equal the simulator's, which `tests/suite/differential.rs` holds to real
//! Redis. It logs no `Command` events (the inspector's commands): on the simulator
//! they take no time, so the checker learns nothing from them, and formatting them
//! was most of a run's cost.
//!
//! It covers one Redis with its list storage: `SET NX PX` acquire with the `ttl`,
//! `poll` and `notify` waiters and `give_up_ms`, compare-and-delete or `DEL`, renew
//! (if owner, or `SET`), check, work, pause, write (fenced `<=`/`<`, idempotent, or
//! not), crash, and `pause` faults; Redlock on N nodes (tokens from the storage,
//! `ttl` and `poll` waiters) with `kill`, `restart` and `clock-jump` faults; the
//! failover pair (a replica copying its primary until cut off, `kill`, `detach` and
//! `promote` faults, `WAIT`, tokens from the primary's counter or the storage's, a
//! call while the primary is down waiting for the promotion) but for a wait that
//! gives up and a write whose question to the lock would wait; and the
//! etcd lock (a lease, the key created on it if absent, the revision as the token)
//! and the Kubernetes-style Lease on etcd (a record swapped on its revision, each
//! contender judging the holder gone by its own clock, at its worker's `clock_rate`),
//! both with `ttl` and `poll` waiters and the storage on Redis; and ZooKeeper's lock
//! recipe (a queue of znodes living by sessions that expire while their worker is
//! paused, the czxid as the token, waiters that watch the znode before theirs); and
//! the queue on a Redis Stream (jobs taken new or claimed once idle for the lease,
//! acknowledged by whoever does them, the job's number as the token).
//! [`supports`] says whether a scenario stays within that; the simulator runs the
//! rest. A run that would never end (a waiter on a lock that never expires, with no
//! `give_up_ms`, or on a queue whose jobs are all done) is cut where a search cuts it
//! on the simulator (`policy::stopped_at_ms`, a minute past its longest possible end)
//! and ends `Interrupted`: a search must not hang on one schedule.

mod etcd;
mod failover;
mod k8s_lease;
mod node;
mod observer;
mod queue;
mod redis;
mod worker;
mod zookeeper;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::backend::StoredWrite;
use crate::backend::keys::new_run_id;
use crate::engine::log::{Event, EventKind, LOG_FORMAT_VERSION, RunOutcome, WorkerEvent};
use crate::engine::policy;
use crate::scenario::{
    AcquireMode, Fault, FaultKind, LockShape, Scenario, Step, StorageKind, TokenSource,
    WaitStrategy, ZOOKEEPER_SESSION_MS,
};
use observer::Observer;
use redis::Db;
use worker::Worker;

/// How the stepper's runs name their backend in `RunStarted`.
pub const BACKEND: &str = "SIMULATOR (event stepper, virtual clock, no Redis)";

/// Whether the stepper models everything `scenario` uses; when it does not, run the
/// scenario on the simulator.
pub fn supports(scenario: &Scenario) -> bool {
    let step = |s: &Step| {
        matches!(
            s,
            Step::Acquire { .. }
                | Step::Pause { .. }
                | Step::Work { .. }
                | Step::Check { .. }
                | Step::Write { .. }
                | Step::Release
                | Step::Crash
        ) || matches!(s, Step::Renew { .. } if scenario.lock.spec().can.renew)
            || matches!(s, Step::WaitReplicas { .. } if scenario.lock == LockShape::Replicated)
    };
    let nodes = match scenario.lock {
        LockShape::Redis => 0,
        // Redlock, etcd and the Lease have no release channel: their `notify` waiters
        // wait as `ttl` ones do, which is not modelled.
        LockShape::Redlock { nodes } if scenario.wait != WaitStrategy::Notify => nodes,
        LockShape::Etcd | LockShape::K8sLease
            if scenario.wait != WaitStrategy::Notify
                && scenario.token_source() == TokenSource::Lock =>
        {
            0
        }
        LockShape::Replicated if scenario.wait != WaitStrategy::Notify => 2,
        // A queue's consumer cannot hear of an acknowledgement.
        LockShape::Stream if scenario.wait != WaitStrategy::Notify => 0,
        // A session ZooKeeper grants: outside, the run fails as it starts.
        LockShape::ZooKeeper
            if scenario.token_source() == TokenSource::Lock
                && ZOOKEEPER_SESSION_MS.contains(&scenario.ttl_ms) =>
        {
            0
        }
        _ => return false,
    };
    let fault_known = |f: &Fault| match (f.kind, &f.worker) {
        (FaultKind::Pause, Some(w)) => scenario.workers.iter().any(|s| &s.name == w),
        (FaultKind::Kill | FaultKind::Restart | FaultKind::ClockJump, None)
            if scenario.lock != LockShape::Replicated =>
        {
            (1..=nodes).contains(&f.node.unwrap_or(0))
        }
        (FaultKind::Kill | FaultKind::Detach | FaultKind::Promote, None)
            if scenario.lock == LockShape::Replicated =>
        {
            (1..=nodes).contains(&f.node.unwrap_or(0))
        }
        _ => false,
    };
    nodes <= redis::MAX_NODES
        && scenario.storage == StorageKind::Redis
        && scenario.acquire == AcquireMode::Script
        // Only a Lease's contenders read their own clocks (to judge the holder gone).
        && scenario.workers.iter().all(|w| {
            (w.clock_rate == 1.0 || scenario.lock == LockShape::K8sLease) && w.steps.iter().all(step)
        })
        && scenario.faults.iter().all(fault_known)
}

/// Run `scenario` (which [`supports`] accepts) with fencing on or off, and return the
/// events the engine would log on the simulator, `Command` events aside. `seed` makes
/// the run id, as the simulator's seed does. None when the run went where the stepper
/// does not follow (on the failover pair, a wait for a promotion that gives up, or a
/// write made while the primary is down): run it on the simulator.
pub fn run(scenario: &Arc<Scenario>, fencing: bool, seed: u64) -> Option<Vec<Event>> {
    let mut run = Run::new(scenario, fencing, seed);
    run.play();
    (!run.cx.db.unfollowed()).then(|| run.finish())
}

/// A lock value: whose grant wrote it. Each acquire step makes a new one, as the
/// engine draws a new random value per acquire; [`Value::EMPTY`] is the empty string a
/// worker sends when it never held the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Value {
    /// The worker's index, or `usize::MAX` for the empty value.
    pub worker: usize,
    /// Counts the worker's acquire steps.
    pub grant: u32,
}

impl Value {
    pub const EMPTY: Value = Value { worker: usize::MAX, grant: 0 };
}

/// What a task of the run changes when it runs: the time, the database, the log and
/// the schedule.
struct Cx<'a> {
    pub now: u64,
    pub db: Db<'a>,
    pub log: Log,
    pub sched: Sched,
    /// Workers' names, by index: the lock values' owners.
    pub names: Vec<&'a str>,
    /// Which workers sleep listening on the release channel, by index.
    pub listening: Vec<bool>,
    /// The lock's changes a ZooKeeper watcher has been woken for.
    pub seen_changes: u64,
}

impl<'a> Cx<'a> {
    /// The worker a lock value names ("" for the empty value), as `holder_name` reads it.
    pub fn name(&self, value: Value) -> &'a str {
        self.names.get(value.worker).copied().unwrap_or("")
    }

    /// `PUBLISH` on the release channel: every worker sleeping on it wakes, before
    /// the release is logged (the engine logs a call once it returns).
    pub fn announce_release(&mut self) {
        self.db.published += 1;
        for (i, &listening) in self.listening.iter().enumerate() {
            if listening {
                self.sched.wake(FIRST_WORKER + i);
            }
        }
    }

    /// What changed on ZooKeeper since last looked wakes every watcher but the worker
    /// `by` that changed it (it is running, not watching): a watch fires as the change
    /// is made, before the call that made it returns.
    pub fn settle(&mut self, by: Option<usize>) {
        let changes = self.db.changes();
        if changes == self.seen_changes {
            return;
        }
        self.seen_changes = changes;
        for (i, &listening) in self.listening.iter().enumerate() {
            if listening && Some(i) != by {
                self.sched.wake(FIRST_WORKER + i);
            }
        }
    }

    /// Log what worker `index` did; the observer wakes, as the log grew.
    pub fn emit(&mut self, index: usize, what: WorkerEvent) {
        self.settle(Some(index));
        let worker = self.names[index].into();
        self.log.push(self.now, EventKind::Worker { worker, what });
        self.sched.wake(OBSERVER);
    }
}

/// The log being written: events numbered and stamped as `EventLog::append` does.
struct Log {
    events: Vec<Event>,
}

impl Log {
    /// Room for a run's events: a few per step, and the observer's.
    fn with_capacity(scenario: &Scenario) -> Self {
        let steps: usize = scenario.workers.iter().map(|w| w.steps.len() + 2).sum();
        Log { events: Vec::with_capacity(4 * steps + 8) }
    }

    pub fn push(&mut self, now: u64, kind: EventKind) {
        let seq = self.events.len() as u64;
        self.events.push(Event { seq, t_ms: now as f64, kind, happened_ms: None });
    }
}

/// Task numbers: the observer, the fault injector, then the workers.
const OBSERVER: usize = 0;
const FAULTS: usize = 1;
const FIRST_WORKER: usize = 2;

/// The current-thread runtime's order, for tasks numbered as above: each task's one
/// timer (with the order it was set in), the run queue, and the tasks that yielded.
struct Sched {
    timers: Vec<Option<(u64, u64)>>,
    timers_set: u64,
    queue: VecDeque<usize>,
    queued: Vec<bool>,
    deferred: Vec<usize>,
    /// Scratch for the timers firing at one instant.
    firing: Vec<(u64, usize)>,
}

impl Sched {
    fn new(tasks: usize) -> Self {
        Sched {
            timers: vec![None; tasks],
            timers_set: 0,
            queue: VecDeque::with_capacity(tasks),
            queued: vec![false; tasks],
            deferred: Vec::with_capacity(tasks),
            firing: Vec::with_capacity(tasks),
        }
    }

    /// Wake `task` at `at` (later than now): its previous timer is dropped, as a
    /// `select!` drops its sleep when it polls again.
    pub fn sleep(&mut self, task: usize, at: u64) {
        self.timers[task] = Some((at, self.timers_set));
        self.timers_set += 1;
    }

    /// `task` waits for nothing any more.
    pub fn cancel(&mut self, task: usize) {
        self.timers[task] = None;
    }

    /// Put `task` on the run queue, unless it is there already.
    pub fn wake(&mut self, task: usize) {
        if !self.queued[task] {
            self.queued[task] = true;
            self.queue.push_back(task);
        }
    }

    /// `yield_now`: run `task` again once everything woken at this instant has run.
    pub fn defer(&mut self, task: usize) {
        self.deferred.push(task);
    }

    /// Wake a task that may have yielded: it runs now, not with the deferred ones.
    pub fn wake_early(&mut self, task: usize) {
        self.deferred.retain(|&t| t != task);
        self.wake(task);
    }

    fn next(&mut self) -> Option<usize> {
        if self.queue.is_empty() {
            for task in self.deferred.drain(..) {
                self.queued[task] = true;
                self.queue.push_back(task);
            }
        }
        let task = self.queue.pop_front()?;
        self.queued[task] = false;
        Some(task)
    }

    /// When `task`'s timer is due, if it has one.
    pub fn due(&self, task: usize) -> Option<u64> {
        self.timers[task].map(|(at, _)| at)
    }

    /// The earliest timer of any task but `task` (None: no other is set).
    pub fn first_due_but(&self, task: usize) -> Option<u64> {
        let others = self.timers.iter().enumerate().filter(|&(t, _)| t != task);
        others.filter_map(|(_, timer)| timer.map(|(at, _)| at)).min()
    }

    /// Move the clock to the next timer and wake what is due then, in the order the
    /// timers were set; None when no timer is left.
    fn advance(&mut self) -> Option<u64> {
        let at = self.timers.iter().flatten().map(|&(at, _)| at).min()?;
        self.firing.clear();
        for (task, timer) in self.timers.iter_mut().enumerate() {
            if let Some((t, set)) = *timer
                && t == at
            {
                self.firing.push((set, task));
                *timer = None;
            }
        }
        self.firing.sort_unstable();
        for i in 0..self.firing.len() {
            let task = self.firing[i].1;
            self.wake(task);
        }
        Some(at)
    }
}

/// A fault of the scenario, as the injector plays it.
#[derive(Clone, Copy)]
struct Injected {
    at_ms: u64,
    what: Hit,
    ms: u64,
    kind: FaultKind,
}

/// What a fault hits.
#[derive(Clone, Copy)]
enum Hit {
    Worker(usize),
    /// A Redlock node, counting from 0.
    Node(usize),
}

struct Run<'a> {
    scenario: &'a Arc<Scenario>,
    fencing: bool,
    seed: u64,
    cx: Cx<'a>,
    observer: Observer<'a>,
    workers: Vec<Worker<'a>>,
    /// The faults, in time order, and how many have been injected.
    faults: Vec<Injected>,
    injected: usize,
}

impl<'a> Run<'a> {
    fn new(scenario: &'a Arc<Scenario>, fencing: bool, seed: u64) -> Self {
        let names: Vec<&str> = scenario.workers.iter().map(|w| w.name.as_str()).collect();
        let mut faults: Vec<Injected> = scenario
            .faults
            .iter()
            .filter_map(|f| {
                let (at_ms, ms) = (f.at_ms, f.ms.unwrap_or(0));
                Some(match &f.worker {
                    Some(w) => {
                        let worker = names.iter().position(|n| n == w)?;
                        Injected { at_ms, what: Hit::Worker(worker), ms, kind: f.kind }
                    }
                    None => Injected { at_ms, what: Hit::Node(f.node_index()), ms, kind: f.kind },
                })
            })
            .collect();
        faults.sort_by_key(|f| f.at_ms);
        let workers = scenario
            .workers
            .iter()
            .enumerate()
            .map(|(i, spec)| Worker::new(i, spec, scenario, fencing))
            .collect();
        let tasks = FIRST_WORKER + scenario.workers.len();
        Run {
            scenario,
            fencing,
            seed,
            cx: Cx {
                now: 0,
                db: Db::of(scenario),
                log: Log::with_capacity(scenario),
                sched: Sched::new(tasks),
                listening: vec![false; names.len()],
                seen_changes: 0,
                names,
            },
            observer: Observer::default(),
            workers,
            faults,
            injected: 0,
        }
    }

    /// Every instant until the workers are done, or until the instant a search's
    /// watchdog stops a run on the simulator, a minute past its longest possible end
    /// (a waiter on a lock that never expires retries forever). The watchdog's timer
    /// was set first, so at that instant it stops the run before anything else runs.
    fn play(&mut self) {
        let label = format!("fencing tokens: {}", if self.fencing { "on" } else { "off" });
        let run_id = new_run_id(&mut fastrand::Rng::with_seed(self.seed));
        self.cx.log.push(
            0,
            EventKind::RunStarted {
                version: LOG_FORMAT_VERSION,
                run_id,
                scenario: Arc::clone(self.scenario),
                fencing: self.fencing,
                label,
                backend: BACKEND.to_string(),
                time_scale: 1.0,
            },
        );
        let bound = policy::stopped_at_ms(self.scenario);
        // Spawned in the engine's order: the observer, the faults, the workers.
        self.cx.sched.wake(OBSERVER);
        if !self.faults.is_empty() {
            self.cx.sched.wake(FAULTS);
        }
        for i in 0..self.workers.len() {
            self.cx.sched.wake(FIRST_WORKER + i);
        }
        loop {
            while let Some(task) = self.cx.sched.next() {
                self.poll(task);
            }
            if self.workers.iter().all(Worker::done) || self.cx.db.unfollowed() {
                return;
            }
            self.observer.skip_idle(&mut self.cx, bound);
            match self.cx.sched.advance() {
                Some(at) if at < bound => self.cx.now = at,
                // Stopped where the simulator's watchdog stops it.
                _ => {
                    self.cx.now = bound;
                    return;
                }
            }
        }
    }

    fn poll(&mut self, task: usize) {
        match task {
            OBSERVER => self.observer.read(&mut self.cx),
            FAULTS => self.inject(),
            worker => self.workers[worker - FIRST_WORKER].poll(&mut self.cx, worker),
        }
    }

    /// The faults due now, in order. A `pause` freezes its worker (a second one while
    /// frozen changes nothing, as `WorkerCommand::Stall` does nothing then); a node's
    /// fault is done, then logged, as the engine's injector does.
    fn inject(&mut self) {
        let now = self.cx.now;
        while let Some(&Injected { at_ms, what, ms, kind }) = self.faults.get(self.injected)
            && at_ms <= now
        {
            self.injected += 1;
            match what {
                Hit::Worker(worker) => {
                    if self.workers[worker].stall(ms) {
                        self.cx.sched.wake_early(FIRST_WORKER + worker);
                    }
                }
                Hit::Node(node) => {
                    self.cx.db.node_fault(node, kind, now, ms);
                    let ms = kind.needs().ms.then_some(ms);
                    self.cx.log.push(now, EventKind::Fault { node: node + 1, kind, ms });
                    self.cx.sched.wake(OBSERVER);
                }
            }
        }
        if let Some(f) = self.faults.get(self.injected) {
            self.cx.sched.sleep(FAULTS, f.at_ms);
        }
    }

    fn finish(mut self) -> Vec<Event> {
        let done = self.workers.iter().all(Worker::done);
        let storage = std::mem::take(&mut self.cx.db.storage)
            .into_iter()
            .map(|(worker, token, value)| StoredWrite {
                worker: self.cx.names[worker].into(),
                token,
                value: value.into_owned(),
            })
            .collect();
        let outcome = if done { RunOutcome::Completed } else { RunOutcome::Interrupted };
        self.cx.log.push(self.cx.now, EventKind::RunEnded { storage, outcome });
        self.cx.log.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Fault, builtin};

    fn fault(kind: FaultKind, worker: &str) -> Fault {
        Fault { at_ms: 100, node: None, worker: Some(worker.into()), ms: Some(100), kind, on: None }
    }

    fn gc_pause() -> Scenario {
        builtin("gc-pause").unwrap().unwrap()
    }

    #[test]
    fn what_it_does_not_model_goes_to_the_simulator() {
        assert!(supports(&gc_pause()));
        let with = |change: fn(&mut Scenario)| {
            let mut s = gc_pause();
            change(&mut s);
            supports(&s)
        };
        assert!(with(|s| s.lock = LockShape::Redlock { nodes: 3 }));
        assert!(!with(|s| {
            s.lock = LockShape::Redlock { nodes: 3 };
            s.wait = WaitStrategy::Notify;
        }));
        assert!(with(|s| s.lock = LockShape::Replicated));
        assert!(!with(|s| {
            s.lock = LockShape::Redlock { nodes: 3 };
            s.workers[0].steps.push(Step::WaitReplicas { timeout_ms: 100, stop_if_missing: false });
        }));
        assert!(with(|s| s.lock = LockShape::Etcd));
        assert!(with(|s| {
            s.lock = LockShape::K8sLease;
            s.workers[1].clock_rate = 2.0;
        }));
        assert!(!with(|s| s.workers[1].clock_rate = 2.0), "a clock of its own only on a Lease");
        assert!(!with(|s| {
            s.lock = LockShape::Etcd;
            s.wait = WaitStrategy::Notify;
        }));
        assert!(with(|s| {
            s.lock = LockShape::ZooKeeper;
            s.wait = WaitStrategy::Notify;
        }));
        assert!(
            !with(|s| {
                s.lock = LockShape::ZooKeeper;
                s.ttl_ms = 5000;
            }),
            "a session ZooKeeper would not grant"
        );
        assert!(with(|s| s.lock = LockShape::Stream));
        assert!(
            !with(|s| {
                s.lock = LockShape::Stream;
                s.workers[0].steps.push(Step::Renew { stop_if_lost: false });
            }),
            "a queue's consumer cannot renew"
        );
        assert!(!with(|s| s.storage = StorageKind::Postgres));
        assert!(!with(|s| s.acquire = AcquireMode::TwoStep));
        assert!(!with(|s| s.workers[0].steps.push(Step::ReadStock)));
        assert!(!with(|s| s.faults.push(fault(FaultKind::Delay, "A"))));
        assert!(with(|s| s.faults.push(fault(FaultKind::Pause, "B"))));
        let mut s = gc_pause();
        s.faults.push(fault(FaultKind::Pause, "Z"));
        assert!(!supports(&s), "a fault on a worker the scenario does not have");
    }

    /// A worker that calls while the pair's primary is down waits for the promotion,
    /// looking every 10 ms, and calls the new primary; a wait that would give up is
    /// left to the simulator.
    #[test]
    fn a_call_to_a_primary_that_is_down_waits_for_the_promotion() {
        let failover = builtin("failover").unwrap().unwrap();
        let mut late = failover.clone();
        late.workers[0].start_ms = 600;
        assert!(supports(&late));
        let events = run(&Arc::new(late.clone()), false, 0).expect("the stepper follows the wait");
        let acquired = events.iter().find_map(|e| match &e.kind {
            EventKind::Worker { worker, what: WorkerEvent::Acquired { token } }
                if worker == "A" =>
            {
                Some((e.t_ms, *token))
            }
            _ => None,
        });
        assert_eq!(
            acquired,
            Some((1200.0, 1)),
            "A asks at 0.6 s (node 1 died at 0.5 s) and gets node 2's first token as it is promoted"
        );
        let mut never = late;
        never.faults.retain(|f| f.kind != FaultKind::Promote);
        assert!(run(&Arc::new(never), false, 0).is_none(), "no promotion: the wait gives up");
    }

    #[test]
    fn a_frozen_holder_writes_after_its_lease_ended_and_fencing_refuses_it() {
        let writes = |fencing| {
            let events = run(&Arc::new(gc_pause()), fencing, 0).unwrap();
            let Some(EventKind::RunEnded { storage, outcome }) = events.last().map(|e| &e.kind)
            else {
                panic!("the log ends with run_ended");
            };
            assert_eq!(*outcome, RunOutcome::Completed);
            storage.iter().map(StoredWrite::short).collect::<Vec<_>>()
        };
        assert_eq!(writes(false), ["B:2", "A:1"]);
        assert_eq!(writes(true), ["B:2"]);
    }

    /// A contender on the Lease whose clock runs at a quarter of true speed judges the
    /// holder gone only after four leases: a long run, not one that never ends.
    #[test]
    fn a_slow_clock_waits_four_leases_and_its_run_is_not_cut_short() {
        let mut s = gc_pause();
        (s.lock, s.ttl_ms, s.workers[1].clock_rate) = (LockShape::K8sLease, 120_000, 0.25);
        let events = run(&Arc::new(s), false, 0).unwrap();
        let last = events.last().unwrap();
        assert!(
            matches!(&last.kind, EventKind::RunEnded { outcome: RunOutcome::Completed, .. }),
            "{last:?}"
        );
        assert!(last.t_ms > 4.0 * 120_000.0, "{}", last.t_ms);
    }

    #[test]
    fn a_waiter_on_a_lock_that_never_expires_is_stopped_at_a_bound() {
        let mut s = gc_pause();
        s.ttl_ms = 0;
        s.workers[0].steps.truncate(1);
        let events = run(&Arc::new(s.clone()), false, 0).unwrap();
        let last = events.last().unwrap();
        assert!(
            matches!(&last.kind, EventKind::RunEnded { outcome: RunOutcome::Interrupted, .. }),
            "{last:?}"
        );
        assert_eq!(last.t_ms, policy::stopped_at_ms(&s) as f64, "where a search stops it");
    }
}
