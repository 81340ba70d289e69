//! One worker of the stepper: `engine/worker.rs`'s script as a state machine. Where
//! the engine's worker awaits, this one returns, leaving in `at` where to go on from
//! when it is polled again.

use std::time::Duration;

use super::Value;
use super::{Cx, OBSERVER};
use crate::backend::lock::failover::{FAILOVER_POLL, FAILOVER_WAIT};
use crate::backend::{AcquireReply, WriteCheck};
use crate::engine::log::{Name, Refusal, WorkerEvent};
use crate::engine::policy::{self, Ms, WritePolicy};
use crate::scenario::{ReleaseMode, RenewMode, Scenario, Step, WaitStrategy, WorkerSpec};

/// What every worker of a run shares, as `WorkerSettings` holds it.
struct Settings {
    ttl_ms: u64,
    release: ReleaseMode,
    renew: RenewMode,
    writes: WritePolicy,
    check: WriteCheck,
    wait: WaitStrategy,
    poll_ms: u64,
}

/// Where a worker is in its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Sleeping until its start.
    Start,
    /// At a step boundary (frozen there by a fault).
    Step,
    /// In a `pause` step, until `until`.
    PauseEnd,
    /// In a `work` step, until `until`.
    WorkEnd,
    /// In a `wait-replicas` step whose replica will not answer, until its timeout
    /// (`until`); a pause fault waits for it, as the engine's worker takes one only
    /// between calls.
    Replicating,
    /// Waiting for the lock until `until` (or a release, when listening).
    Waiting,
    /// Woken from waiting: it asks again once the instant's other tasks have run.
    Retry,
    /// In a call to the failover pair whose primary is down (since `since`): it looks
    /// again at `until`, and makes the call (the step, or the acquire's retry) once a
    /// new primary is up. A pause fault waits for the call's end (the engine's worker
    /// takes commands only between steps), and does not wake it.
    Failover {
        since: u64,
        retry: bool,
    },
    Done,
}

/// The acquire step under way.
#[derive(Default)]
struct Attempt<'a> {
    value: Option<Value>,
    give_up_at: Option<u64>,
    /// The holder last announced in a `Waiting` event.
    announced: Option<Option<&'a str>>,
    /// Subscribed during this step (`wait = "notify"`).
    listening: bool,
}

pub(super) struct Worker<'a> {
    index: usize,
    spec: &'a WorkerSpec,
    settings: Settings,
    pc: usize,
    at: At,
    /// When the sleep it is in ends.
    until: u64,
    /// Frozen by a `pause` fault until then.
    frozen_until: Option<u64>,
    /// A `pause` fault delivered and not yet obeyed, with its length.
    stall: Option<u64>,
    /// The current grant's value and the last grant's token.
    value: Option<Value>,
    token: Option<u64>,
    grants: u32,
    /// Subscribed to the release channel, and how many messages it has heard.
    subscribed: bool,
    heard: u64,
    attempt: Attempt<'a>,
    /// Its client dropped, once its script ended.
    closed: bool,
}

impl<'a> Worker<'a> {
    pub fn new(index: usize, spec: &'a WorkerSpec, scenario: &Scenario, fencing: bool) -> Self {
        let writes = WritePolicy::of(scenario);
        let settings = Settings {
            ttl_ms: scenario.ttl_ms,
            release: scenario.release,
            renew: scenario.renew,
            writes,
            check: writes.check(fencing),
            wait: scenario.wait,
            poll_ms: policy::poll_ms(scenario),
        };
        Worker {
            index,
            spec,
            settings,
            pc: 0,
            at: At::Start,
            until: spec.start_ms,
            frozen_until: None,
            stall: None,
            value: None,
            token: None,
            grants: 0,
            subscribed: false,
            heard: 0,
            attempt: Attempt::default(),
            closed: false,
        }
    }

    pub fn done(&self) -> bool {
        self.at == At::Done
    }

    /// A `pause` fault for `ms` reaches the worker; whether it wakes it. A frozen or
    /// finished worker ignores it, and so does one with a fault still to obey.
    pub fn stall(&mut self, ms: u64) -> bool {
        if self.done() || self.frozen_until.is_some() || self.stall.is_some() {
            return false;
        }
        self.stall = Some(ms);
        !matches!(self.at, At::Failover { .. })
    }

    /// Run until the worker waits again (or ends). A worker whose script ended drops
    /// its client (on ZooKeeper its session closes); what it changed wakes watchers.
    pub fn poll(&mut self, cx: &mut Cx<'a>, task: usize) {
        self.run(cx, task);
        if self.done() && !self.closed {
            self.closed = true;
            cx.db.close(cx.now, self.index);
        }
        cx.listening[self.index] = self.listens();
        cx.settle(Some(self.index));
    }

    fn run(&mut self, cx: &mut Cx<'a>, task: usize) {
        loop {
            if let Some(until) = self.frozen_until {
                if cx.now < until {
                    return cx.sched.sleep(task, until);
                }
                self.frozen_until = None;
                cx.db.set_paused(cx.now, self.index, false);
                self.emit(cx, WorkerEvent::Resumed);
            }
            match self.at {
                At::Done => return cx.sched.cancel(task),
                At::Step | At::Start | At::PauseEnd | At::WorkEnd | At::Waiting
                    if self.stall.is_some() =>
                {
                    self.freeze(cx);
                }
                At::Step | At::Retry
                    if cx.db.primary_down() && (self.at == At::Retry || self.calls_the_lock()) =>
                {
                    let retry = self.at == At::Retry;
                    (self.at, self.until) = (At::Failover { since: cx.now, retry }, cx.now);
                }
                At::Step => self.step(cx),
                At::Retry => self.try_acquire(cx),
                At::Failover { since, retry } => {
                    if self.until > cx.now {
                        return cx.sched.sleep(task, self.until);
                    }
                    if cx.db.primary_down() {
                        if cx.now >= since + ms(FAILOVER_WAIT) {
                            cx.db.unfollow();
                            return cx.sched.cancel(task);
                        }
                        self.until = cx.now + ms(FAILOVER_POLL);
                        return cx.sched.sleep(task, self.until);
                    }
                    match retry {
                        true => self.try_acquire(cx),
                        false => self.step(cx),
                    }
                }
                At::Start | At::PauseEnd | At::WorkEnd | At::Waiting | At::Replicating => {
                    let listening = self.at == At::Waiting && self.attempt.listening;
                    let heard = listening && cx.db.released(cx.now, self.index, self.heard);
                    if !heard && self.until > cx.now {
                        // A watcher also looks when a silent session may have expired.
                        let expiry = cx.db.next_expiry().filter(|&at| listening && at > cx.now);
                        return cx
                            .sched
                            .sleep(task, expiry.map_or(self.until, |e| e.min(self.until)));
                    }
                    if heard {
                        self.heard = cx.db.published;
                    }
                    match self.at {
                        At::Start => {
                            self.emit(cx, WorkerEvent::Started);
                            self.at = At::Step;
                        }
                        At::PauseEnd => {
                            cx.db.set_paused(cx.now, self.index, false);
                            self.emit(cx, WorkerEvent::Resumed);
                            self.next(cx);
                        }
                        At::WorkEnd => self.next(cx),
                        At::Replicating => {
                            self.emit(cx, WorkerEvent::Replicated { acked: 0, wanted: 1 });
                            let stop = matches!(
                                self.spec.steps.get(self.pc),
                                Some(Step::WaitReplicas { stop_if_missing: true, .. })
                            );
                            self.go_on_unless(cx, stop);
                        }
                        _ => {
                            // Let every task woken at this instant run first, as the
                            // engine's waiter does with `yield_now`.
                            self.at = At::Retry;
                            return cx.sched.defer(task);
                        }
                    }
                }
            }
        }
    }

    /// Whether the step at hand calls the lock service (the failover pair's primary).
    /// A write asks it too, after the storage: that wait is left to the simulator.
    fn calls_the_lock(&self) -> bool {
        matches!(
            self.spec.steps.get(self.pc),
            Some(
                Step::Acquire { .. }
                    | Step::Release
                    | Step::Renew { .. }
                    | Step::Check { .. }
                    | Step::WaitReplicas { .. }
            )
        )
    }

    /// Obey the fault: frozen for its length, wherever the worker is.
    fn freeze(&mut self, cx: &mut Cx<'a>) {
        let ms = self.stall.take().unwrap_or(0);
        self.emit(cx, WorkerEvent::Paused { ms: Some(ms), by_user: false });
        cx.db.set_paused(cx.now, self.index, true);
        self.frozen_until = Some(cx.now + ms);
    }

    /// On to the next step, or the end of the script.
    fn next(&mut self, cx: &mut Cx<'a>) {
        self.pc += 1;
        self.at = At::Step;
        if self.pc >= self.spec.steps.len() {
            self.emit(cx, WorkerEvent::Finished);
            self.at = At::Done;
        }
    }

    /// Stop here: a crash, a lost lock noticed, giving up.
    fn stop(&mut self, cx: &mut Cx<'a>, what: WorkerEvent) {
        self.emit(cx, what);
        self.at = At::Done;
    }

    fn step(&mut self, cx: &mut Cx<'a>) {
        let Some(step) = self.spec.steps.get(self.pc) else {
            // An empty script: the parser refuses one, so this is only for safety.
            return self.stop(cx, WorkerEvent::Finished);
        };
        let now = cx.now;
        match step {
            Step::Acquire { give_up_ms } => {
                self.grants += 1;
                self.attempt = Attempt {
                    value: Some(Value { worker: self.index, grant: self.grants }),
                    give_up_at: give_up_ms.map(|ms| now + ms),
                    announced: None,
                    listening: false,
                };
                self.try_acquire(cx);
            }
            Step::Pause { ms } => {
                self.emit(cx, WorkerEvent::Paused { ms: Some(*ms), by_user: false });
                cx.db.set_paused(now, self.index, true);
                (self.at, self.until) = (At::PauseEnd, now + ms);
            }
            Step::Work { ms } => {
                self.emit(cx, WorkerEvent::Working { ms: *ms });
                (self.at, self.until) = (At::WorkEnd, now + ms);
            }
            Step::Check { stop_if_lost } => {
                let holder = cx.db.holder(now, Some(self.index));
                let still_owner = holder.is_some() && holder == self.value;
                self.emit(cx, WorkerEvent::Checked { still_owner });
                self.go_on_unless(cx, *stop_if_lost && !still_owner);
            }
            Step::Write { value } => {
                let value = self.settings.writes.value(value, self.token);
                let order =
                    cx.db.write((self.index, self.token, value.clone()), self.settings.check);
                let redis_holder =
                    cx.db.holder(now, Some(self.index)).map(|v| Name::from(cx.name(v)));
                let (token, accepted) = (self.token, order.is_some());
                let value = value.into_owned();
                let refused = if accepted { None } else { Refusal::of(self.settings.check, token) };
                let wrote = WorkerEvent::Wrote {
                    value,
                    token,
                    accepted,
                    redis_holder,
                    order,
                    refused,
                    own: false,
                };
                self.emit(cx, wrote);
                self.next(cx);
            }
            Step::Release => {
                let value = self.value.take().unwrap_or(Value::EMPTY);
                let mode = self.settings.release;
                let deleted = cx.db.release(now, self.index, value, mode);
                if deleted
                    && mode == ReleaseMode::CompareAndDelete
                    && self.settings.wait == WaitStrategy::Notify
                {
                    cx.announce_release();
                }
                let unsafe_del = mode == ReleaseMode::Del;
                self.emit(cx, WorkerEvent::Released { deleted, unsafe_del });
                self.next(cx);
            }
            Step::Renew { stop_if_lost } => {
                let value = self.value.unwrap_or(Value::EMPTY);
                let renew = (self.settings.ttl_ms, self.settings.renew);
                let extended = cx.db.renew(now, self.index, value, renew);
                self.emit(cx, WorkerEvent::Renewed { extended });
                self.go_on_unless(cx, *stop_if_lost && !extended);
            }
            Step::WaitReplicas { timeout_ms, .. } => {
                if cx.db.wait_replica() {
                    self.emit(cx, WorkerEvent::Replicated { acked: 1, wanted: 1 });
                    self.next(cx);
                } else {
                    (self.at, self.until) = (At::Replicating, now + (*timeout_ms).max(1));
                }
            }
            Step::Crash => self.stop(cx, WorkerEvent::Crashed),
            // `supports` keeps every other step out.
            _ => {
                let error = "the stepper does not model this step: run it on the simulator";
                self.stop(cx, WorkerEvent::Failed { error: error.into() });
            }
        }
    }

    fn go_on_unless(&mut self, cx: &mut Cx<'a>, lost: bool) {
        if lost {
            self.stop(cx, WorkerEvent::StoppedWork);
        } else {
            self.next(cx);
        }
    }

    /// One try of the acquire step; when the lock is taken, wait as the scenario's
    /// strategy says (the engine's `Worker::acquire`, one loop turn).
    fn try_acquire(&mut self, cx: &mut Cx<'a>) {
        let now = cx.now;
        let value = self.attempt.value.unwrap_or(Value::EMPTY);
        let pttl = match cx.db.acquire(now, self.index, value, self.settings.ttl_ms) {
            AcquireReply::Granted { token } => {
                (self.value, self.token) = (Some(value), Some(token));
                self.emit(cx, WorkerEvent::Acquired { token });
                return self.next(cx);
            }
            AcquireReply::Busy { pttl_ms } => pttl_ms,
        };
        // The engine logs each call a worker makes (`Command` events, which the
        // stepper leaves out), and the observer wakes as the log grows: a retry that
        // announces nothing new wakes it all the same. Its readings then fall where the
        // engine's do, which decides the instant it sees an etcd lease end.
        cx.settle(Some(self.index));
        cx.sched.wake(OBSERVER);
        let wait = self.settings.wait;
        if policy::listens_first(wait, self.attempt.listening) {
            // Subscribe, then ask once more: a release in between is not missed.
            self.attempt.listening = true;
            if !self.subscribed {
                (self.subscribed, self.heard) = (true, cx.db.published);
            }
            return self.try_acquire(cx);
        }
        // One clock here: scenario ms are the servers' ms.
        let ms = |ms| match ms {
            Ms::Scenario(ms) | Ms::Server(ms) => ms,
        };
        let wait_ms = ms(policy::retry_after(wait, self.settings.poll_ms, pttl));
        let holder = cx.db.holder(now, Some(self.index)).map(|v| cx.name(v));
        if self.attempt.announced != Some(holder) {
            let retry_in = policy::announced_retry(wait, self.settings.poll_ms, pttl);
            let retry_in_ms = retry_in.map(|retry| ms(retry) as f64);
            let holder_name = holder.map(Name::from);
            self.emit(cx, WorkerEvent::Waiting { holder: holder_name, retry_in_ms, wait });
            self.attempt.announced = Some(holder);
        }
        let mut retry_at = now + wait_ms;
        if let Some(limit) = self.attempt.give_up_at {
            if now >= limit {
                return self.stop(cx, WorkerEvent::GaveUp);
            }
            retry_at = retry_at.min(limit);
        }
        (self.at, self.until) = (At::Waiting, retry_at);
    }

    /// Whether a release announced now wakes this worker: it sleeps listening.
    fn listens(&self) -> bool {
        self.at == At::Waiting && self.attempt.listening && self.frozen_until.is_none()
    }

    fn emit(&self, cx: &mut Cx<'a>, what: WorkerEvent) {
        cx.emit(self.index, what);
    }
}

/// A client's wait in scenario ms: the stepper's runs are at real speed.
fn ms(wait: Duration) -> u64 {
    wait.as_millis() as u64
}
