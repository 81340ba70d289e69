//! One worker: a tokio task with its own connection, running its script of steps.
//!
//! A worker only ever knows what its own commands told it. It records that as
//! [`WorkerEvent`]s: its belief. While paused it issues no command at all, which is
//! the point: nothing can tell it that its lease ran out.
//!
//! A person can reach into a running worker through [`WorkerCommand`]s (the TUI's
//! pause and crash keys). A command takes effect at the worker's next wait or step
//! boundary; a Redis round trip already under way finishes first, as it would in a
//! real process frozen by a GC.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::log::{EventKind, EventLog, Name, Refusal, WorkerEvent};
use super::observer::Holders;
use super::policy::{self, Ms, WritePolicy};
use crate::backend::sql::{CAS_TRIES, SqlOp, SqlReply};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, StorageClient, StoredWrite, holder_name,
    holder_value, wire,
};
use crate::scenario::spec::Home;
use crate::scenario::{
    AcquireMode, ReleaseMode, RenewMode, Scenario, Step, StorageKind, TokenSource, WaitStrategy,
    WorkerSpec,
};

/// What every worker of a run shares.
#[derive(Clone)]
pub struct WorkerSettings {
    pub ttl_ms: u64,
    pub acquire: AcquireMode,
    pub release: ReleaseMode,
    /// Read at each write, so switching fencing during a run applies to later writes.
    pub fencing: Arc<AtomicBool>,
    pub renew: RenewMode,
    /// How writes are checked (fencing aside).
    pub writes: WritePolicy,
    /// Grants take their token from the storage's counter, not the lock's.
    pub tokens_from_storage: bool,
    /// What the storage is, for the inspector's form of each write.
    pub storage: StorageKind,
    /// How a waiter learns the lock is free, and (`poll`) its interval in scenario ms.
    pub wait: WaitStrategy,
    pub poll_ms: u64,
    /// The lock lives on Redis, so a call its client did not spell itself is spelled
    /// in Redis's commands (`wire.rs`); any other lock's client says what it sent.
    pub redis_lock: bool,
    /// The run's observer learns here whose release has gone out.
    pub holders: Arc<Holders>,
}

impl WorkerSettings {
    /// What a scenario's workers share, with fencing switchable through `fencing`,
    /// telling the run's observer through `holders`.
    pub fn of(scenario: &Scenario, fencing: Arc<AtomicBool>, holders: Arc<Holders>) -> Self {
        WorkerSettings {
            ttl_ms: scenario.ttl_ms,
            acquire: scenario.acquire,
            release: scenario.release,
            fencing,
            renew: scenario.renew,
            writes: WritePolicy::of(scenario),
            tokens_from_storage: scenario.token_source() == TokenSource::Storage,
            storage: scenario.storage,
            wait: scenario.wait,
            poll_ms: policy::poll_ms(scenario),
            redis_lock: matches!(scenario.lock.spec().home, Home::OneRedis | Home::OwnRedis),
            holders,
        }
    }
}

/// Something a person asks a running worker to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerCommand {
    /// Freeze for `ms` scenario milliseconds, or until [`WorkerCommand::Resume`].
    Pause {
        ms: Option<u64>,
    },
    Resume,
    /// Die on the spot, without releasing the lock.
    Crash,
    /// Freeze for `ms` because the scenario says so (a `pause` fault), not a person:
    /// logged as the script's pause is.
    Stall {
        ms: u64,
    },
}

pub struct Worker {
    spec: WorkerSpec,
    /// This worker's own connection(s) to the lock service.
    lock: Box<dyn LockClient>,
    /// This worker's own connection to the storage.
    storage: Box<dyn StorageClient>,
    /// The run's keys, named in the commands the inspector shows.
    keys: Keys,
    settings: WorkerSettings,
    log: Arc<EventLog>,
    cancel: CancellationToken,
    commands: mpsc::UnboundedReceiver<WorkerCommand>,
    /// The random value of the current grant: how this worker recognises its lock.
    value: Option<String>,
    /// The fencing token of the last grant.
    token: Option<u64>,
    /// Makes lock values; seeded on the simulator so its runs repeat exactly.
    rng: fastrand::Rng,
    /// The last value read from the SQL tables (stock left, users found, balance).
    seen: Option<i64>,
    /// The account's version read with the balance.
    seen_version: Option<i64>,
    /// The job this worker claimed.
    job: Option<i64>,
}

/// Whether the worker goes on with its script.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

impl Worker {
    pub fn new(
        spec: WorkerSpec,
        (mut lock, storage, keys): (Box<dyn LockClient>, Box<dyn StorageClient>, Keys),
        settings: WorkerSettings,
        log: Arc<EventLog>,
        cancel: CancellationToken,
        commands: mpsc::UnboundedReceiver<WorkerCommand>,
        rng: fastrand::Rng,
    ) -> Self {
        lock.set_clock_rate(spec.clock_rate);
        Worker {
            spec,
            lock,
            storage,
            keys,
            settings,
            log,
            cancel,
            commands,
            value: None,
            token: None,
            rng,
            seen: None,
            seen_version: None,
            job: None,
        }
    }

    /// Run the script to its end. A backend error is recorded and returned.
    pub async fn run(mut self) -> Result<(), BackendError> {
        let start = self.log.clock().instant_at(self.spec.start_ms as f64);
        if self.sleep_until(start).await == Flow::Stop {
            return Ok(());
        }
        self.emit(WorkerEvent::Started);
        let steps = std::mem::take(&mut self.spec.steps);
        let cancel = self.cancel.clone();
        for step in &steps {
            let flow = match self.take_pending_commands().await {
                Flow::Stop => Ok(Flow::Stop),
                Flow::Continue => tokio::select! {
                    flow = self.step(step) => flow,
                    // A call to a server that stopped answering is abandoned with the
                    // run (the observer found it lost), not waited out.
                    () = cancel.cancelled() => Ok(Flow::Stop),
                },
            };
            match flow {
                Ok(Flow::Continue) => {}
                Ok(Flow::Stop) => return Ok(()),
                Err(e) => {
                    self.emit(WorkerEvent::Failed { error: e.to_string() });
                    return Err(e);
                }
            }
        }
        self.emit(WorkerEvent::Finished);
        Ok(())
    }

    async fn step(&mut self, step: &Step) -> Result<Flow, BackendError> {
        match step {
            Step::Acquire { give_up_ms } => return self.acquire(*give_up_ms).await,
            Step::Pause { ms } => {
                self.emit(WorkerEvent::Paused { ms: Some(*ms), by_user: false });
                self.lock.set_paused(true);
                if self.sleep_scenario(*ms as f64).await == Flow::Stop {
                    return Ok(Flow::Stop);
                }
                self.lock.set_paused(false);
                self.emit(WorkerEvent::Resumed);
            }
            Step::Work { ms } => {
                self.emit(WorkerEvent::Working { ms: *ms });
                return Ok(self.sleep_scenario(*ms as f64).await);
            }
            Step::Check { stop_if_lost } => {
                let holder = self.get_holder().await?;
                let still_owner = holder.is_some() && holder == self.value;
                self.emit(WorkerEvent::Checked { still_owner });
                return Ok(self.stop_if(*stop_if_lost && !still_owner));
            }
            Step::Write { value } => {
                let value = self.settings.writes.value(value, self.token).into_owned();
                let write = StoredWrite {
                    worker: self.spec.name.as_str().into(),
                    token: self.token,
                    value,
                };
                let check =
                    self.settings.writes.check(self.settings.fencing.load(Ordering::SeqCst));
                let started = Instant::now();
                let order = self.storage.write(&write, check).await?;
                let accepted = order.is_some();
                let storage = self.settings.storage;
                let shown = wire::write(&self.keys, storage, self.token, check, accepted);
                self.command(started, shown);
                let redis_holder = self.get_holder().await?.map(|v| holder_name(&v).into());
                self.emit(WorkerEvent::Wrote {
                    value: write.value,
                    token: self.token,
                    accepted,
                    redis_holder,
                    order,
                    refused: if accepted { None } else { Refusal::of(check, self.token) },
                    own: false,
                });
            }
            Step::Release => {
                let value = self.value.take().unwrap_or_default();
                let mode = self.settings.release;
                self.settings.holders.giving_back(&self.spec.name);
                let started = Instant::now();
                let (deleted, shown) = if self.settings.wait == WaitStrategy::Notify {
                    let deleted = self.lock.release_announcing(&value, mode).await?;
                    (deleted, wire::release_announcing(&self.keys, &value, deleted))
                } else {
                    let deleted = self.lock.release(&value, mode).await?;
                    (deleted, wire::release(&self.keys, &value, mode, deleted))
                };
                self.calls(started, shown);
                let unsafe_del = mode == ReleaseMode::Del;
                self.emit(WorkerEvent::Released { deleted, unsafe_del });
            }
            Step::Renew { stop_if_lost } => {
                let value = self.value.clone().unwrap_or_default();
                let (ttl, mode) = (self.real_ttl(), self.settings.renew);
                let started = Instant::now();
                let extended = match self.lock.renew(&value, ttl, mode).await {
                    // A renewal is what a background thread does while the work goes on:
                    // when its connection is gone (a cut link), it reports and the work
                    // carries on, not knowing whether the lease still stands.
                    Err(BackendError::Lost { .. }) => {
                        let (command, _) = wire::renew(&self.keys, &value, ttl, mode, false);
                        self.calls(started, (command, "(no answer: connection lost)".into()));
                        self.emit(WorkerEvent::Unanswered { call: "renew".to_string() });
                        return Ok(self.stop_if(*stop_if_lost));
                    }
                    renewed => renewed?,
                };
                self.calls(started, wire::renew(&self.keys, &value, ttl, mode, extended));
                self.emit(WorkerEvent::Renewed { extended });
                return Ok(self.stop_if(*stop_if_lost && !extended));
            }
            Step::WaitReplicas { timeout_ms, stop_if_missing } => {
                let timeout = self.log.clock().real(*timeout_ms as f64);
                let timeout = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
                let acked = self.lock.wait_replicas(1, timeout).await?;
                self.emit(WorkerEvent::Replicated { acked, wanted: 1 });
                return Ok(self.stop_if(*stop_if_missing && acked < 1));
            }
            Step::Crash => {
                self.emit(WorkerEvent::Crashed);
                return Ok(Flow::Stop);
            }
            Step::ReadStock => self.seen = self.sql(SqlOp::ReadStock).await?,
            Step::WriteStock => match self.seen {
                Some(seen) if seen > 0 => {
                    self.sql(SqlOp::SetStock { seen }).await?;
                }
                _ => self.skip_sql("no UPDATE: the stock I read was 0"),
            },
            Step::Buy => {
                self.sql(SqlOp::TakeStock).await?;
            }
            Step::FindUser { email } => {
                self.seen = self.sql(SqlOp::FindUser { email: email.clone() }).await?;
            }
            Step::AddUser { email, unique } => {
                if !unique && self.seen.is_some_and(|found| found > 0) {
                    self.skip_sql("no INSERT: my SELECT found the user");
                } else {
                    self.sql(SqlOp::AddUser { email: email.clone(), unique: *unique }).await?;
                }
            }
            Step::ClaimJob { skip_locked } => {
                self.job = self.sql(SqlOp::ClaimJob { skip_locked: *skip_locked }).await?;
            }
            Step::FinishJob => match self.job.take() {
                Some(job) => {
                    self.sql(SqlOp::FinishJob { job }).await?;
                }
                None => self.skip_sql("no UPDATE: I claimed no job"),
            },
            Step::ReadBalance => self.read_balance().await?,
            Step::WriteBalance { if_version, retry } => {
                self.write_balance(*if_version, *retry).await?;
            }
        }
        Ok(Flow::Continue)
    }

    /// Try to take the lock; while it is taken, wait as the scenario's strategy says
    /// and try again:
    /// - `ttl`: exactly until the holder's lease runs out (one ms past it, as Redis
    ///   expires a key only once its deadline has passed). No fixed poll interval: the
    ///   hand-over after an expiry happens within a round trip; an early release goes
    ///   unnoticed until then.
    /// - `poll`: every `poll_ms`, whatever the lease says (redis-py's way).
    /// - `notify`: as `ttl`, and also at once when the release script publishes. The
    ///   subscription starts at the first refusal and the lock is asked again right
    ///   after it (Redisson's order), so a release in between is not missed.
    async fn acquire(&mut self, give_up_ms: Option<u64>) -> Result<Flow, BackendError> {
        let clock = self.log.clock();
        let give_up_at = give_up_ms.map(|ms| Instant::now() + clock.real(ms as f64));
        let value = holder_value(&self.spec.name, &mut self.rng);
        let mut announced: Option<Option<Name>> = None;
        let mut listening = false;
        loop {
            let (ttl, mode) = (self.real_ttl(), self.settings.acquire);
            let started = Instant::now();
            let tokens: Option<&mut dyn StorageClient> = match self.settings.tokens_from_storage {
                true => Some(self.storage.as_mut()),
                false => None,
            };
            let reply = self.lock.acquire(&value, ttl, mode, tokens).await?;
            self.calls(started, wire::acquire(&self.keys, &value, ttl, mode, &reply));
            let pttl_ms = match reply {
                AcquireReply::Granted { token } => {
                    self.settings.holders.holds_again(&self.spec.name);
                    self.value = Some(value);
                    self.token = Some(token);
                    self.emit(WorkerEvent::Acquired { token });
                    return Ok(Flow::Continue);
                }
                AcquireReply::Busy { pttl_ms } => pttl_ms,
            };
            if policy::listens_first(self.settings.wait, listening) {
                let started = Instant::now();
                listening = self.lock.listen_for_releases().await?;
                if listening {
                    self.calls(started, wire::subscribe_releases(&self.keys));
                    continue;
                }
            }
            let asked = Instant::now();
            let (strategy, poll_ms) = (self.settings.wait, self.settings.poll_ms);
            let wait = match policy::retry_after(strategy, poll_ms, pttl_ms) {
                Ms::Scenario(ms) => clock.real(ms as f64),
                Ms::Server(ms) => std::time::Duration::from_millis(ms),
            };
            let holder: Option<Name> = self.get_holder().await?.map(|v| holder_name(&v).into());
            if announced.as_ref() != Some(&holder) {
                let retry_in_ms =
                    policy::announced_retry(strategy, poll_ms, pttl_ms).map(|ms| match ms {
                        Ms::Scenario(ms) => ms as f64,
                        Ms::Server(ms) => clock.scenario_ms(ms as f64),
                    });
                let wait = strategy;
                self.emit(WorkerEvent::Waiting { holder: holder.clone(), retry_in_ms, wait });
                announced = Some(holder);
            }
            // A lease's end is worth waking for on time: Redis frees the key in the
            // millisecond after its deadline, and tokio's timers can fire ~2 ms late.
            let on_time = self.settings.wait != WaitStrategy::Poll && pttl_ms.is_some();
            let mut retry_at = asked + wait;
            if let Some(limit) = give_up_at {
                if Instant::now() >= limit {
                    self.emit(WorkerEvent::GaveUp);
                    return Ok(Flow::Stop);
                }
                retry_at = retry_at.min(limit);
            }
            let wake = Wake { released: listening, on_time };
            if self.sleep_or_release(retry_at, wake).await? == Flow::Stop {
                return Ok(Flow::Stop);
            }
            // Let every task woken at this same instant run first, the observer in
            // particular, so the log shows the expiry before the new grant (on the
            // simulator they wake at exactly the same virtual moment).
            tokio::task::yield_now().await;
        }
    }

    /// Stop the work here when the worker has learned it lost the lock and its
    /// script says to stop then (the safe reaction).
    fn stop_if(&self, lost: bool) -> Flow {
        if lost {
            self.emit(WorkerEvent::StoppedWork);
            Flow::Stop
        } else {
            Flow::Continue
        }
    }

    /// Who holds the lock (`GET lock` on Redis), recorded for the inspector.
    async fn get_holder(&mut self) -> Result<Option<String>, BackendError> {
        let started = Instant::now();
        let holder = self.lock.holder().await?;
        self.calls(started, wire::get_lock(&self.keys, holder.as_deref()));
        Ok(holder)
    }

    /// The lease handed to Redis, in real ms: slow motion stretches it.
    fn real_ttl(&self) -> u64 {
        let ttl = self.settings.ttl_ms;
        if ttl == 0 { 0 } else { (self.log.clock().real(ttl as f64).as_millis() as u64).max(1) }
    }

    async fn sleep_scenario(&mut self, ms: f64) -> Flow {
        let at = Instant::now() + self.log.clock().real(ms);
        self.sleep_until(at).await
    }

    /// Sleep until `at`, obeying commands meanwhile: a pause freezes the worker (and
    /// the sleep continues afterwards if `at` is still ahead), a crash or the run's
    /// cancellation stops it.
    async fn sleep_until(&mut self, at: Instant) -> Flow {
        // Not woken by releases, so the only error (a lost channel) cannot happen.
        let wake = Wake { released: false, on_time: false };
        self.sleep_or_release(at, wake).await.unwrap_or(Flow::Stop)
    }

    /// [`Self::sleep_until`], ending early when `wake.released` and the lock service
    /// announces a release (a release during a pause wakes the worker as it resumes).
    async fn sleep_or_release(&mut self, at: Instant, wake: Wake) -> Result<Flow, BackendError> {
        let released = wake.released;
        loop {
            let command = tokio::select! {
                () = sleep_until_maybe_on_time(at, wake.on_time) => return Ok(Flow::Continue),
                () = self.cancel.cancelled() => return Ok(Flow::Stop),
                heard = self.lock.next_release(), if released => return heard.map(|()| Flow::Continue),
                command = self.commands.recv() => command,
            };
            match command {
                Some(command) => {
                    if self.obey(command).await == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
                // Nobody can send commands any more: just finish the sleep.
                None => return self.sleep_plain(at, released).await,
            }
        }
    }

    async fn sleep_plain(&mut self, at: Instant, released: bool) -> Result<Flow, BackendError> {
        tokio::select! {
            () = sleep_until(at) => Ok(Flow::Continue),
            () = self.cancel.cancelled() => Ok(Flow::Stop),
            heard = self.lock.next_release(), if released => heard.map(|()| Flow::Continue),
        }
    }

    /// Obey commands that arrived while the worker was busy with Redis.
    async fn take_pending_commands(&mut self) -> Flow {
        while let Ok(command) = self.commands.try_recv() {
            if self.obey(command).await == Flow::Stop {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    async fn obey(&mut self, command: WorkerCommand) -> Flow {
        match command {
            WorkerCommand::Crash => {
                self.emit(WorkerEvent::Crashed);
                Flow::Stop
            }
            WorkerCommand::Resume => Flow::Continue,
            WorkerCommand::Pause { ms } => self.freeze(ms, true).await,
            WorkerCommand::Stall { ms } => self.freeze(Some(ms), false).await,
        }
    }

    /// Stop doing anything for `ms` (or until resumed), still obeying a crash.
    async fn freeze(&mut self, ms: Option<u64>, by_user: bool) -> Flow {
        self.emit(WorkerEvent::Paused { ms, by_user });
        // A lock kept alive by a heartbeat of its own (ZooKeeper's session) stops it too.
        self.lock.set_paused(true);
        let until = ms.map(|ms| Instant::now() + self.log.clock().real(ms as f64));
        loop {
            let next = tokio::select! {
                () = sleep_until_opt(until) => break,
                () = self.cancel.cancelled() => return Flow::Stop,
                next = self.commands.recv() => next,
            };
            match next {
                // A closed channel means nobody can resume us: resume now.
                Some(WorkerCommand::Resume) | None => break,
                Some(WorkerCommand::Crash) => {
                    self.emit(WorkerEvent::Crashed);
                    return Flow::Stop;
                }
                // Already paused: a second pause changes nothing.
                Some(WorkerCommand::Pause { .. } | WorkerCommand::Stall { .. }) => {}
            }
        }
        self.lock.set_paused(false);
        self.emit(WorkerEvent::Resumed);
        Flow::Continue
    }

    fn command(&self, started: Instant, shown: (String, String)) {
        self.command_took(shown, started.elapsed());
    }

    /// Log a lock call's commands: those the lock client spelled as it sent them (a
    /// queue's acquire sends one to three, depending on the answers; etcd's and
    /// ZooKeeper's clients speak their own protocols), else, on Redis only, `spelled`
    /// in Redis's commands. A lock elsewhere that sent nothing shows nothing.
    fn calls(&mut self, started: Instant, spelled: (String, String)) {
        let sent = self.lock.take_sent();
        if sent.is_empty() {
            if self.settings.redis_lock {
                self.command(started, spelled);
            }
            return;
        }
        for (shown, took) in sent {
            self.command_took(shown, took);
        }
    }

    fn command_took(&self, (command, reply): (String, String), took: std::time::Duration) {
        let latency_ms = took.as_secs_f64() * 1000.0;
        self.log.append(EventKind::Command {
            worker: self.spec.name.as_str().into(),
            command,
            reply,
            latency_ms: (latency_ms * 1000.0).round() / 1000.0,
            program: None,
        });
    }

    /// Run a lesson statement on the SQL tables and log it; returns the value read.
    async fn sql(&mut self, op: SqlOp) -> Result<Option<i64>, BackendError> {
        Ok(self.sql_reply(op).await?.value)
    }

    /// The same, returning the whole reply. The statement goes to the commands
    /// inspector too, with psql's answer ("UPDATE 0"), as a lock command does.
    async fn sql_reply(&mut self, op: SqlOp) -> Result<SqlReply, BackendError> {
        let started = Instant::now();
        let reply = self.storage.sql(&self.spec.name, &op).await?;
        self.command(started, (op.statement(), op.reply_shown(&reply)));
        self.emit(WorkerEvent::Sql {
            statement: op.statement(),
            rows: reply.rows,
            value: reply.value,
            result: reply.result.clone(),
        });
        Ok(reply)
    }

    async fn read_balance(&mut self) -> Result<(), BackendError> {
        let reply = self.sql_reply(SqlOp::ReadBalance).await?;
        (self.seen, self.seen_version) = (reply.value, reply.version);
        Ok(())
    }

    /// A read-modify-write on the account. The new balance comes from the last read;
    /// with `if_version` the database refuses it when the row changed since that read
    /// (compare-and-set), and with `retry` the worker reads again and retries, a
    /// bounded number of times, as an optimistic-locking loop does.
    async fn write_balance(&mut self, if_version: bool, retry: bool) -> Result<(), BackendError> {
        for _ in 0..CAS_TRIES {
            let (Some(seen), Some(version)) = (self.seen, self.seen_version) else {
                self.skip_sql("no UPDATE: I have not read the balance");
                return Ok(());
            };
            let reply = self.sql_reply(SqlOp::WriteBalance { seen, version, if_version }).await?;
            if reply.rows == 1 {
                return Ok(());
            }
            // Giving up is the UPDATE 0 itself: the lane and the inspector show it.
            if !retry {
                return Ok(());
            }
            self.read_balance().await?;
        }
        self.skip_sql("gave up: the balance changed under every try");
        Ok(())
    }

    /// A statement the worker's own logic decided not to send.
    fn skip_sql(&self, why: &str) {
        let statement = format!("-- {why}");
        self.emit(WorkerEvent::Sql { statement, rows: 0, value: None, result: None });
    }

    fn emit(&self, what: WorkerEvent) {
        self.log.append(EventKind::Worker { worker: self.spec.name.as_str().into(), what });
    }
}

/// How a waiter's sleep may end early or must end exactly.
#[derive(Debug, Clone, Copy)]
struct Wake {
    /// The lock service's release announcements wake it (`wait = "notify"`).
    released: bool,
    /// It waits for a lease's end: wake within tens of microseconds of `at`, not
    /// on the next whole millisecond after it.
    on_time: bool,
}

/// How long before a lease's end an on-time wait stops trusting tokio's timer: it
/// rounds a deadline up to its next millisecond tick and waits for events with a
/// timeout in whole milliseconds, so it fires up to ~2 ms late.
const ON_TIME_MARGIN: std::time::Duration = std::time::Duration::from_millis(3);

/// Sleep until `at`; `on_time`: sleep on tokio's timer until [`ON_TIME_MARGIN`]
/// before, then yield until `at` (a plain sleep's lateness is most of a hand-over
/// after expiry on a local Redis: `fencelab bench handover`, median 2.0 ms with the
/// margin at 1 ms, 1.4 ms at 3 ms). The simulator's clock moves only by timers:
/// when yielding does not move it, this is a paused clock, and the plain timer
/// finishes the wait. That timer is set first, as a plain sleep sets it, so waiters
/// due at the same virtual moment still wake in the order they always did.
async fn sleep_until_maybe_on_time(at: Instant, on_time: bool) {
    let timer = sleep_until(at);
    tokio::pin!(timer);
    let Some(early) = at.checked_sub(ON_TIME_MARGIN).filter(|_| on_time) else {
        return timer.await;
    };
    tokio::select! {
        biased;
        () = &mut timer => return,
        () = sleep_until(early) => {}
    }
    let mut last = Instant::now();
    while last < at {
        tokio::task::yield_now().await;
        let now = Instant::now();
        if now == last {
            return timer.await;
        }
        last = now;
    }
}

/// Sleep until `at`, or forever when there is no `at`.
pub(super) async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::sleep_until_maybe_on_time;

    /// On the simulator's paused clock, yielding never moves time: the sleep must
    /// notice that and let the timer finish, ending where a plain sleep ends (not
    /// hang, not end a millisecond early), so the simulator's runs stay as they were.
    #[tokio::test(start_paused = true)]
    async fn an_on_time_sleep_on_a_paused_clock_ends_where_a_plain_sleep_does() {
        let length = Duration::from_micros(1_500_300);
        let start = Instant::now();
        tokio::time::sleep_until(start + length).await;
        let plain = start.elapsed();
        let start = Instant::now();
        let slept = sleep_until_maybe_on_time(start + length, true);
        tokio::time::timeout(Duration::from_secs(5), slept).await.expect("the sleep ends");
        assert_eq!(start.elapsed(), plain);
    }

    /// Waiters due at the same virtual moment wake in the order plain sleeps would
    /// (the simulator's runs, and so the lessons' outcomes, depend on that order).
    #[tokio::test(start_paused = true)]
    async fn on_a_paused_clock_waiters_due_together_wake_in_a_plain_sleeps_order() {
        async fn order(on_time: bool) -> Vec<usize> {
            let at = Instant::now() + Duration::from_millis(2000);
            let woke = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for i in 0..4 {
                let woke = woke.clone();
                tasks.push(tokio::spawn(async move {
                    if on_time {
                        sleep_until_maybe_on_time(at, true).await;
                    } else {
                        tokio::time::sleep_until(at).await;
                    }
                    woke.lock().unwrap().push(i);
                }));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for t in tasks {
                t.await.unwrap();
            }
            woke.lock().unwrap().clone()
        }
        assert_eq!(order(true).await, order(false).await);
    }

    /// On a real clock it ends at its moment or after, never before.
    #[tokio::test]
    async fn an_on_time_sleep_on_a_real_clock_never_ends_early() {
        let at = Instant::now() + Duration::from_millis(3);
        sleep_until_maybe_on_time(at, true).await;
        assert!(Instant::now() >= at);
    }
}
