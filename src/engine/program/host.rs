//! A foreign program as a run's worker: driven through its scenario's steps or left
//! to run freely, paused with `SIGSTOP`, crashed with `SIGKILL`, and never trusted: its
//! lines are its belief, the log's truth is the observer's, and its writes go through
//! fencelab's storage client. Its process (started, tied to fencelab, read within
//! bounds) is child.rs's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::armed::call_name;
use super::child::{MAX_LINE, MAX_LINES_PER_SECOND, Program, failed};
use super::protocol::{self, Mode, Order, Report, StepName};
use super::traffic::Traffic;
use crate::backend::{
    BackendError, Keys, LockClient, StorageClient, StoredWrite, WriteCheck, wire,
};
use crate::engine::host::{WorkerHost, WorkerRun};
use crate::engine::log::{
    EventKind, EventLog, KernelSignal, Name, ProgramCall, Refusal, WorkerEvent,
};
use crate::engine::observer::Holders;
use crate::engine::policy::WritePolicy;
use crate::engine::worker::{WorkerCommand, sleep_until_opt};
use crate::platform::Signal;
use crate::scenario::{Step, StorageKind};

/// How long a program has to exit after `stop` before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// How long a free-running program whose stdout closed has to exit.
const EXIT_GRACE: Duration = Duration::from_secs(10);
/// How long the kernel may take to report a stopped process as stopped.
const STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// Once a program is stopped, what it wrote is in the pipe: the reactor's time to see it.
const DRAIN_GRACE: Duration = Duration::from_millis(5);

/// What a program's run needs beyond the program: its own clients, the run's log.
pub struct Bench {
    /// For "who holds the lock now", read after each write (as a built-in worker does).
    pub lock: Box<dyn LockClient>,
    pub storage: Box<dyn StorageClient>,
    pub keys: Keys,
    pub storage_kind: StorageKind,
    /// How the storage checks a write: the same policy as a built-in worker's (an
    /// idempotency key, fencing, or nothing), so a program writes as they do.
    pub policy: WritePolicy,
    pub holders: Arc<Holders>,
}

/// The run's programs, as the engine's host for them.
#[derive(Default)]
pub struct ProgramHost {
    ready: Mutex<HashMap<String, (Program, Bench)>>,
}

impl ProgramHost {
    pub fn add(&self, program: Program, bench: Bench) {
        if let Ok(mut ready) = self.ready.lock() {
            ready.insert(program.name().to_string(), (program, bench));
        }
    }
}

impl WorkerHost for ProgramHost {
    fn run(
        &self,
        name: &str,
        log: Arc<EventLog>,
        commands: mpsc::UnboundedReceiver<WorkerCommand>,
        fencing: Arc<AtomicBool>,
        cancel: CancellationToken,
    ) -> WorkerRun {
        let taken = self.ready.lock().ok().and_then(|mut r| r.remove(name));
        let name = name.to_string();
        Box::pin(async move {
            let Some((program, bench)) = taken else {
                return Err(failed(&name, "was not started"));
            };
            let mut run = Run {
                program,
                bench,
                log,
                commands: Some(commands),
                fencing,
                cancel,
                frozen: None,
                traffic: Traffic::default(),
                lost: false,
                gave_up: false,
                done: None,
                landed: HashMap::new(),
                own_write: None,
            };
            let result = run.run().await;
            run.program.proxy.0.cancel();
            run.program.proxy.1.close();
            // Its last words (an exit's traceback) are in the log before its failure.
            while let Ok(line) = run.program.said.try_recv() {
                let worker = run.program.spec.name.clone();
                run.log.append(EventKind::Stderr { worker: worker.into(), line });
            }
            if let Err(e) = &result {
                run.emit(WorkerEvent::Failed { error: e.to_string() });
            }
            result
        })
    }
}

/// A pause under way: when it ends by itself (None: when resumed).
struct Frozen {
    until: Option<Instant>,
}

/// What a wait in [`Run::wait`] waits for.
#[derive(Clone, Copy, PartialEq)]
enum Wanted {
    Done(StepName),
    Until(Instant),
    Thawed,
    Exit,
}

/// Whether the worker goes on.
#[derive(PartialEq)]
enum Flow {
    Continue,
    Stop,
}

struct Run {
    program: Program,
    bench: Bench,
    log: Arc<EventLog>,
    /// A person's commands; None once nobody can send any.
    commands: Option<mpsc::UnboundedReceiver<WorkerCommand>>,
    fencing: Arc<AtomicBool>,
    cancel: CancellationToken,
    frozen: Option<Frozen>,
    traffic: Traffic,
    /// The program said it lost the lock (`lost`, or `checked` false) in this step.
    lost: bool,
    /// The program said it gave up waiting for the lock in this step.
    gave_up: bool,
    /// A `done` read while taking in its last lines before a pause.
    done: Option<StepName>,
    /// How many of its writes of each value the storage has been seen to take.
    landed: HashMap<String, usize>,
    /// Its own write waiting for its commit.
    own_write: Option<OwnWrite>,
}

/// A write a program made itself, between its `wrote` and its `committed`.
struct OwnWrite {
    id: u64,
    value: String,
    token: Option<u64>,
    /// Who held the lock before the commit, as the server listed it.
    holder: Option<String>,
}

impl Run {
    async fn run(&mut self) -> Result<(), BackendError> {
        // From here on its taps are read: a pause at a reply can be made before the
        // reply reaches it.
        self.program.arm();
        let holds = self.program.armed.holds_replies();
        self.program.hold_replies.store(holds, Ordering::SeqCst);
        let start = self.log.clock().instant_at(self.program.spec.start_ms as f64);
        if self.wait(Wanted::Until(start)).await? == Flow::Stop {
            return Ok(());
        }
        self.emit(WorkerEvent::Started);
        if self.program.mode == Mode::Free {
            // A free-running program waits for `start` after its `ready`: its logic
            // begins at the worker's start in the scenario, as a driven program's first
            // step does, not while the other programs are still starting.
            self.program.send(&Order::Start {}).await?;
            if self.wait(Wanted::Exit).await? == Flow::Stop {
                return Ok(());
            }
            return self.exited().await;
        }
        let steps = self.program.spec.steps.clone();
        for (i, step) in steps.iter().enumerate() {
            // A pause placed before this step comes first; a frozen program reads the
            // step only when it runs on, as a paused process would.
            if let Some(ms) = self.program.armed.enter(i + 1)
                && self.frozen.is_none()
            {
                self.freeze(Some(ms), WorkerEvent::Paused { ms: Some(ms), by_user: false }).await?;
            }
            if self.step(step).await? == Flow::Stop {
                return Ok(());
            }
        }
        self.emit(WorkerEvent::Finished);
        self.program.send(&Order::Stop {}).await?;
        // What it still says before it exits is logged; then it is gone.
        let _ = tokio::time::timeout(STOP_GRACE, self.wait(Wanted::Exit)).await;
        self.program.wait_exit(Duration::ZERO).await;
        Ok(())
    }

    /// A free-running program has exited: fine with status 0, an error otherwise. Its
    /// stdout has closed, so it is on its way out; an interpreter's teardown on a
    /// loaded machine can take longer than a second, hence [`EXIT_GRACE`].
    async fn exited(&mut self) -> Result<(), BackendError> {
        match self.program.wait_exit(EXIT_GRACE).await {
            Some(status) if status.success() => {
                self.emit(WorkerEvent::Finished);
                Ok(())
            }
            _ => Err(self.program.ended_early().await),
        }
    }

    async fn step(&mut self, step: &Step) -> Result<Flow, BackendError> {
        let mut give_up_ms = None;
        let (name, value, stop_if_lost) = match step {
            Step::Acquire { give_up_ms: patience } => {
                let clock = self.log.clock();
                give_up_ms = patience.map(|ms| clock.real(ms as f64).as_millis() as u64);
                (StepName::Acquire, None, false)
            }
            Step::Write { value } => (StepName::Write, Some(value.clone()), false),
            Step::Release => {
                self.bench.holders.giving_back(&self.program.spec.name);
                (StepName::Release, None, false)
            }
            Step::Renew { stop_if_lost } => (StepName::Renew, None, *stop_if_lost),
            Step::Check { stop_if_lost } => (StepName::Check, None, *stop_if_lost),
            Step::Pause { ms } => {
                let paused = WorkerEvent::Paused { ms: Some(*ms), by_user: false };
                self.freeze(Some(*ms), paused).await?;
                return self.wait(Wanted::Thawed).await;
            }
            Step::Work { ms } => {
                self.emit(WorkerEvent::Working { ms: *ms });
                let until = Instant::now() + self.log.clock().real(*ms as f64);
                return self.wait(Wanted::Until(until)).await;
            }
            Step::Crash => {
                self.crash().await;
                return Ok(Flow::Stop);
            }
            other => {
                return Err(failed(
                    &self.program.spec.name,
                    format!("a program cannot do the step {other:?}"),
                ));
            }
        };
        self.lost = false;
        self.gave_up = false;
        self.program.send(&Order::Step { step: name, value, give_up_ms }).await?;
        if self.wait(Wanted::Done(name)).await? == Flow::Stop {
            return Ok(Flow::Stop);
        }
        // A program that gave up waiting holds nothing: it does no more of its part, as
        // a built-in worker that gave up.
        if self.gave_up {
            self.program.send(&Order::Stop {}).await?;
            self.program.wait_exit(STOP_GRACE).await;
            return Ok(Flow::Stop);
        }
        if stop_if_lost && self.lost {
            self.emit(WorkerEvent::StoppedWork);
            self.program.send(&Order::Stop {}).await?;
            self.program.wait_exit(STOP_GRACE).await;
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }

    /// Take in what the program says, its traffic and a person's commands until
    /// `wanted` happens. `Stop`: it was crashed or the run was cancelled.
    async fn wait(&mut self, wanted: Wanted) -> Result<Flow, BackendError> {
        let timeout = self.program.step_timeout;
        let mut silent_until = Instant::now() + timeout;
        loop {
            if wanted == Wanted::Thawed && self.frozen.is_none() {
                return Ok(Flow::Continue);
            }
            if let Some(step) = self.done.take() {
                self.done_with(wanted, step)?;
                return Ok(Flow::Continue);
            }
            if self.program.stderr_flooded.load(Ordering::SeqCst) {
                return Err(failed(
                    &self.program.spec.name,
                    format!(
                        "it floods its stderr: more than {MAX_LINES_PER_SECOND} lines a second, or a line over {} KiB",
                        MAX_LINE / 1024
                    ),
                ));
            }
            let thaw = self.frozen.as_ref().and_then(|f| f.until);
            let until = match wanted {
                Wanted::Until(at) => Some(at),
                _ => None,
            };
            let silent = matches!(wanted, Wanted::Done(_)) && self.frozen.is_none();
            tokio::select! {
                line = self.program.stdout.next() => {
                    silent_until = Instant::now() + timeout;
                    match self.program.line(line)? {
                        Some(Report::Done { step }) => {
                            self.done_with(wanted, step)?;
                            return Ok(Flow::Continue);
                        }
                        Some(report) => self.report(report).await?,
                        None if wanted == Wanted::Exit => return Ok(Flow::Continue),
                        None => return Err(self.program.ended_early().await),
                    }
                }
                Some(line) = self.program.said.recv() => {
                    let worker = self.program.spec.name.clone();
                    self.log.append(EventKind::Stderr { worker: worker.into(), line });
                }
                Some(tapped) = self.program.taps.recv() => {
                    // A program talking to its server is not silent.
                    silent_until = Instant::now() + timeout;
                    self.tapped(tapped).await?;
                }
                command = next_command(&mut self.commands) => match command {
                    Some(WorkerCommand::Pause { ms }) if self.frozen.is_none() => {
                        self.freeze(ms, WorkerEvent::Paused { ms, by_user: true }).await?;
                    }
                    Some(WorkerCommand::Stall { ms }) if self.frozen.is_none() => {
                        let paused = WorkerEvent::Paused { ms: Some(ms), by_user: false };
                        self.freeze(Some(ms), paused).await?;
                    }
                    Some(WorkerCommand::Resume) => self.thaw(),
                    Some(WorkerCommand::Crash) => {
                        self.crash().await;
                        return Ok(Flow::Stop);
                    }
                    Some(WorkerCommand::Pause { .. } | WorkerCommand::Stall { .. }) => {}
                    // Nobody can send commands any more: go on without them.
                    None => self.commands = None,
                },
                () = sleep_until_opt(thaw) => {
                    self.thaw();
                    silent_until = Instant::now() + timeout;
                }
                () = sleep_until_opt(until) => return Ok(Flow::Continue),
                () = tokio::time::sleep_until(silent_until), if silent => {
                    let Wanted::Done(step) = wanted else { continue };
                    return Err(failed(&self.program.spec.name, format!(
                        "its program said nothing for {:.0} s while doing the step {:?} (a silent program?){}",
                        timeout.as_secs_f64(), step.as_str(), self.program.said()
                    )));
                }
                () = self.cancel.cancelled() => {
                    self.program.kill_group(Signal::Kill);
                    self.program.wait_exit(Duration::ZERO).await;
                    return Ok(Flow::Stop);
                }
            }
        }
    }

    /// Bytes its proxy carried: the calls they complete go into the log, and a pause
    /// placed at one of their replies is made before the proxy lets the reply reach
    /// the program (a held reply's `go` is dropped last).
    async fn tapped(
        &mut self,
        mut tapped: crate::backend::proxy::Tapped,
    ) -> Result<(), BackendError> {
        let go = tapped.go.take();
        let step = self.program.armed.step();
        for call in self.traffic.take(tapped, Instant::now()) {
            let grant = call.granted.is_some();
            if let Some(value) = &call.granted {
                self.claim(value);
            }
            let pause = self.program.armed.reply(call_name(&call.command), grant);
            self.log.append(EventKind::Command {
                worker: self.program.spec.name.as_str().into(),
                command: call.command,
                reply: call.reply,
                latency_ms: (call.latency_ms * 1000.0).round() / 1000.0,
                program: Some(ProgramCall { step, grant }),
            });
            if let Some(ms) = pause
                && self.frozen.is_none()
            {
                self.freeze(Some(ms), WorkerEvent::Paused { ms: Some(ms), by_user: false }).await?;
            }
        }
        drop(go);
        Ok(())
    }

    /// One report: belief into the log, a write performed and answered.
    async fn report(&mut self, report: Report) -> Result<(), BackendError> {
        match report {
            Report::Ready { .. } => Err(failed(
                &self.program.spec.name,
                format!("line {} of its stdout: ready, a second time", self.program.stdout.number),
            )),
            Report::Write { id, value, token } => self.write(id, value, token).await,
            Report::Wrote { id, value, token } => self.wrote(id, value, token).await,
            Report::Committed { id } => self.committed(id).await,
            Report::Error { message } => {
                Err(failed(&self.program.spec.name, format!("its program says: {message}")))
            }
            Report::Done { .. } => Ok(()),
            belief => {
                if let Report::Acquired { value, .. } = &belief {
                    self.claim(value);
                    self.bench.holders.holds_again(&self.program.spec.name);
                }
                self.lost |=
                    matches!(belief, Report::Lost { .. } | Report::Checked { owner: false });
                self.gave_up |= matches!(belief, Report::GaveUp { .. });
                if let Some(what) = protocol::belief(belief) {
                    self.emit(what);
                }
                Ok(())
            }
        }
    }

    /// Perform a program's write on the run's storage, log it as a built-in worker's
    /// write is logged, and answer.
    async fn write(
        &mut self,
        id: u64,
        value: String,
        token: Option<u64>,
    ) -> Result<(), BackendError> {
        let fencing = self.fencing.load(Ordering::SeqCst);
        let check = self.bench.policy.check(fencing);
        let write = StoredWrite { worker: self.program.spec.name.as_str().into(), token, value };
        let started = Instant::now();
        let no_token = matches!(check, WriteCheck::Fencing(_)) && token.is_none();
        let (order, reason) = if no_token {
            (
                None,
                Some(
                    "no token: with fencing on, the storage takes only writes with a token"
                        .to_string(),
                ),
            )
        } else {
            let order = self.bench.storage.write(&write, check).await?;
            let accepted = order.is_some();
            let (command, reply) =
                wire::write(&self.bench.keys, self.bench.storage_kind, token, check, accepted);
            self.log.append(EventKind::Command {
                worker: write.worker.as_str().into(),
                command,
                reply,
                latency_ms: (started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0,
                program: None,
            });
            let reason = (!accepted)
                .then(|| "stale token: the storage has accepted a higher one".to_string());
            (order, reason)
        };
        let accepted = order.is_some();
        if accepted {
            *self.landed.entry(write.value.clone()).or_default() += 1;
        }
        let refused = if accepted { None } else { Refusal::of(check, token) };
        let holder = self.bench.lock.holder().await?.map(|v| self.bench.holders.name(&v));
        self.wrote_as((id, write.value, token), (order, holder), (refused, false), reason).await
    }

    /// A write the program made itself into the storage's table, in its own
    /// transaction, not committed yet: who holds the lock is read now, while that
    /// transaction still holds whatever it holds (its commit may free a
    /// transaction-level lock at the same instant), and the program is told to commit.
    async fn wrote(
        &mut self,
        id: u64,
        value: String,
        token: Option<u64>,
    ) -> Result<(), BackendError> {
        if self.bench.storage_kind != StorageKind::Postgres {
            return Err(failed(
                &self.program.spec.name,
                format!(
                    "line {} of its stdout: wrote, but only a PostgreSQL storage (storage = \"postgres\") has a table a program can write into itself; ask fencelab to write instead (event write)",
                    self.program.stdout.number
                ),
            ));
        }
        let holder = self.bench.lock.holder().await?.map(|v| self.bench.holders.name(&v));
        self.own_write = Some(OwnWrite { id, value, token, holder });
        self.program.send(&Order::Commit { id }).await
    }

    /// The program tried to commit its own write: it is in the storage when the
    /// table has one more row of this worker's with this value than were counted
    /// before. What the program says of its commit is not taken: the table is read.
    async fn committed(&mut self, id: u64) -> Result<(), BackendError> {
        let Some(own) = self.own_write.take().filter(|w| w.id == id) else {
            return Err(failed(
                &self.program.spec.name,
                format!(
                    "line {} of its stdout: committed {id}, but no wrote {id} was waiting for its commit",
                    self.program.stdout.number
                ),
            ));
        };
        let rows = self.bench.storage.read_all().await?;
        let worker = &self.program.spec.name;
        let mine: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].worker == *worker && rows[i].value == own.value)
            .collect();
        let counted = self.landed.entry(own.value.clone()).or_default();
        let order = mine.get(*counted).map(|&i| i as u64 + 1);
        let (refused, reason) = match order {
            Some(_) => {
                *counted += 1;
                (None, None)
            }
            None => (
                Some(Refusal::NotLanded),
                Some("not in the storage: its transaction did not commit".to_string()),
            ),
        };
        let OwnWrite { value, token, holder, .. } = own;
        self.wrote_as((id, value, token), (order, holder), (refused, true), reason).await
    }

    /// Log a write's outcome as a built-in worker's is logged (its place in the
    /// storage, and who held the lock as it was written), and answer the program.
    async fn wrote_as(
        &mut self,
        (id, value, token): (u64, String, Option<u64>),
        (order, redis_holder): (Option<u64>, Option<String>),
        (refused, own): (Option<Refusal>, bool),
        reason: Option<String>,
    ) -> Result<(), BackendError> {
        let accepted = order.is_some();
        let redis_holder = redis_holder.map(Name::from);
        let wrote =
            WorkerEvent::Wrote { value, token, accepted, redis_holder, order, refused, own };
        self.emit(wrote);
        self.program.send(&Order::WriteResult { id, accepted, reason }).await
    }

    /// `SIGSTOP` the program's group, wait until the kernel has stopped it, and take in
    /// what it wrote before, so the log has its last events before the pause.
    async fn freeze(&mut self, ms: Option<u64>, paused: WorkerEvent) -> Result<(), BackendError> {
        self.program.kill_group(Signal::Stop);
        // A program already reaped has nothing to stop, and its pid may be a newer
        // child's, which `waitid` would wait on.
        if self.program.child.id().is_some() {
            let pid = self.program.pid;
            let stopped =
                tokio::task::spawn_blocking(move || crate::platform::wait_until_stopped(pid));
            let _ = tokio::time::timeout(STOP_TIMEOUT, stopped).await;
        }
        // Everything it wrote is in the pipe now: this is only the reactor's time.
        while let Ok(line) = tokio::time::timeout(DRAIN_GRACE, self.program.stdout.next()).await {
            match self.program.line(line)? {
                Some(Report::Done { step }) => self.done = Some(step),
                Some(report) => self.report(report).await?,
                // Its exit is seen by the wait that follows.
                None => break,
            }
        }
        self.emit(paused);
        self.log.append(self.signal(KernelSignal::Stop));
        let until = ms.map(|ms| Instant::now() + self.log.clock().real(ms as f64));
        self.frozen = Some(Frozen { until });
        Ok(())
    }

    /// A `done` for `step`: an error unless the wait was for that step.
    fn done_with(&self, wanted: Wanted, step: StepName) -> Result<(), BackendError> {
        match wanted {
            Wanted::Done(asked) if asked == step => Ok(()),
            _ => Err(failed(
                &self.program.spec.name,
                format!(
                    "line {} of its stdout: done {:?}, but that step was not asked for",
                    self.program.stdout.number,
                    step.as_str()
                ),
            )),
        }
    }

    fn thaw(&mut self) {
        if self.frozen.take().is_some() {
            self.program.kill_group(Signal::Cont);
            self.log.append(self.signal(KernelSignal::Cont));
            self.emit(WorkerEvent::Resumed);
        }
    }

    async fn crash(&mut self) {
        self.program.kill_group(Signal::Kill);
        self.program.wait_exit(Duration::ZERO).await;
        self.log.append(self.signal(KernelSignal::Kill));
        self.emit(WorkerEvent::Crashed);
    }

    fn signal(&self, signal: KernelSignal) -> EventKind {
        EventKind::Signal {
            worker: self.program.spec.name.as_str().into(),
            signal,
            pid: self.program.pid,
        }
    }

    /// The lock value `value` is this program's: named so here and, through the log,
    /// wherever the run's observer is (a class's room).
    fn claim(&self, value: &str) {
        let worker = self.program.spec.name.clone();
        if self.bench.holders.insert(value, &worker) {
            self.log.append(EventKind::Claimed { worker: worker.into(), value: value.to_string() });
        }
    }

    fn emit(&self, what: WorkerEvent) {
        self.log.append(EventKind::Worker { worker: self.program.spec.name.as_str().into(), what });
    }
}

/// The next command, or never once nobody can send any.
async fn next_command(
    commands: &mut Option<mpsc::UnboundedReceiver<WorkerCommand>>,
) -> Option<WorkerCommand> {
    match commands {
        Some(commands) => commands.recv().await,
        None => std::future::pending().await,
    }
}
