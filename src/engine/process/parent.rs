//! The parent's side of a worker process: start it, copy its events into the run's
//! log, and turn a person's pause, resume and crash into signals.
//!
//! A pause is `SIGSTOP` (the script's pause steps too: the child says it pauses, the
//! parent freezes it for that long), a resume `SIGCONT`, a crash `SIGKILL`. Each is
//! logged as a `Signal` event, so the timeline tells a kernel pause from a worker that
//! chose to wait. A `SIGKILL` needs no `SIGCONT` first: the kernel ends a stopped
//! process too, and continuing it first would let a frozen worker run on for a moment
//! (and perhaps land the very write the crash was meant to prevent).
//!
//! No child outlives the program: it is tied to it (`platform::tie_to_parent`, as the
//! private servers are), so even a `kill -9` of fencelab kills it, and dropping a
//! [`WorkerProcess`] kills it too.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::log::{EventKind, EventLog, KernelSignal, WorkerEvent};
use super::super::worker::{WorkerCommand, sleep_until_opt};
use super::{FromChild, Orders, ProcessError, ToChild};
use crate::backend::BackendError;
use crate::platform::{Signal, Tether, monotonic_ns};

/// How long a worker process may take to start and connect to its servers.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the kernel may take to report a stopped process as stopped.
const STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// Once a child is stopped, everything it wrote is in the pipe already: this is only
/// the time the reactor takes to see it.
const DRAIN_GRACE: Duration = Duration::from_millis(5);

/// A worker process that has connected to its servers and waits for the run to start.
pub struct WorkerProcess {
    name: String,
    child: Child,
    /// Held as long as the child: it dies with fencelab.
    _tether: Tether,
    pid: u32,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: Option<ChildStderr>,
}

/// A pause under way: when it ends by itself, and whether it came from outside the
/// worker (a person, a `pause` fault: the parent then says `Resumed` for the worker,
/// which cannot know it was stopped).
struct Frozen {
    until: Option<Instant>,
    from_outside: bool,
}

impl WorkerProcess {
    /// Start `program worker`, hand it its orders, and wait until it has connected.
    pub async fn start(program: &Path, orders: Orders) -> Result<Self, ProcessError> {
        let name = orders.worker.clone();
        let mut cmd = std::process::Command::new(program);
        cmd.arg("worker");
        crate::backend::server::only_needed_env(&mut cmd);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let tether = crate::platform::tie_to_parent(cmd.as_std_mut())?;
        let mut child = cmd.spawn().map_err(|e| {
            ProcessError::Protocol(format!("cannot start {} worker: {e}", program.display()))
        })?;
        let pid = child.id().ok_or_else(|| {
            ProcessError::Protocol("the worker process ended as it started".into())
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ProcessError::Protocol("no pipes to the worker process".into()));
        };
        let stderr = child.stderr.take();
        let mut process = WorkerProcess {
            name,
            child,
            _tether: tether,
            pid,
            stdin,
            lines: BufReader::new(stdout).lines(),
            stderr,
        };
        process.send(&ToChild::Orders(Box::new(orders))).await?;
        match tokio::time::timeout(READY_TIMEOUT, process.lines.next_line()).await {
            Ok(Ok(Some(line))) if matches!(parse(&line)?, FromChild::Ready) => Ok(process),
            Ok(Ok(Some(line))) => Err(ProcessError::Protocol(format!("expected ready: {line}"))),
            Ok(Ok(None)) => Err(process.failure().await),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(ProcessError::Protocol(format!(
                "worker {} did not connect within {}s",
                process.name,
                READY_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Run the worker to its end: start its clock, copy its events into `log`, obey
    /// `commands` with signals, pass fencing switches on, and kill it on `cancel`.
    pub async fn run(
        mut self,
        log: Arc<EventLog>,
        mut commands: mpsc::UnboundedReceiver<WorkerCommand>,
        fencing: Arc<AtomicBool>,
        cancel: CancellationToken,
    ) -> Result<(), BackendError> {
        let start = monotonic_ns().saturating_sub(log.clock().start().elapsed().as_nanos() as u64);
        self.send(&ToChild::Start { monotonic_ns: start }).await?;
        let mut frozen: Option<Frozen> = None;
        let mut fencing_sent = fencing.load(Ordering::SeqCst);
        let mut grown = log.subscribe();
        let mut failed = false;
        let mut ended_by_us = false;
        loop {
            let thaw = frozen.as_ref().and_then(|f| f.until);
            tokio::select! {
                line = self.lines.next_line() => match line {
                    Ok(Some(line)) => {
                        let kind = self.event(&line)?;
                        failed |= matches!(&kind, EventKind::Worker { what: WorkerEvent::Failed { .. }, .. });
                        let pause = match &kind {
                            EventKind::Worker { what: WorkerEvent::Paused { ms, .. }, .. } => *ms,
                            _ => None,
                        };
                        log.append(kind);
                        // The script's own pause: the kernel does it, for that long.
                        if let (Some(ms), None) = (pause, &frozen) {
                            let until = Instant::now() + log.clock().real(ms as f64);
                            frozen = Some(self.freeze(&log, Some(until), None).await?);
                        }
                    }
                    Ok(None) | Err(_) => break,
                },
                command = commands.recv(), if !ended_by_us => match command {
                    Some(WorkerCommand::Pause { ms }) if frozen.is_none() => {
                        frozen = Some(self.pause(&log, ms, true).await?);
                    }
                    Some(WorkerCommand::Stall { ms }) if frozen.is_none() => {
                        frozen = Some(self.pause(&log, Some(ms), false).await?);
                    }
                    Some(WorkerCommand::Resume) => {
                        if let Some(f) = frozen.take() {
                            self.thaw(&log, &f);
                        }
                    }
                    Some(WorkerCommand::Crash) => {
                        self.kill_and_drain(&log).await?;
                        log.append(self.signal_event(KernelSignal::Kill));
                        log.append(self.worker_event(WorkerEvent::Crashed));
                        ended_by_us = true;
                    }
                    Some(WorkerCommand::Pause { .. } | WorkerCommand::Stall { .. }) | None => {}
                },
                () = sleep_until_opt(thaw) => {
                    if let Some(f) = frozen.take() {
                        self.thaw(&log, &f);
                    }
                }
                _ = grown.changed() => {
                    let on = fencing.load(Ordering::SeqCst);
                    if on != fencing_sent {
                        fencing_sent = on;
                        // A child that is gone has no writes left to fence.
                        let _ = self.send(&ToChild::Fencing(on)).await;
                    }
                }
                () = cancel.cancelled(), if !ended_by_us => {
                    self.kill_and_drain(&log).await?;
                    ended_by_us = true;
                }
            }
        }
        let status = self.child.wait().await.map_err(ProcessError::from)?;
        if ended_by_us || status.success() {
            return Ok(());
        }
        let error = self.failure().await;
        if !failed {
            log.append(self.worker_event(WorkerEvent::Failed { error: error.to_string() }));
        }
        Err(error.into())
    }

    /// A pause from outside the child (a person's, or a scheduled `pause` fault):
    /// frozen for `ms` of the run's time, or until resumed.
    async fn pause(
        &mut self,
        log: &EventLog,
        ms: Option<u64>,
        by_user: bool,
    ) -> Result<Frozen, ProcessError> {
        let until = ms.map(|ms| Instant::now() + log.clock().real(ms as f64));
        self.freeze(log, until, Some(WorkerEvent::Paused { ms, by_user })).await
    }

    /// `SIGSTOP`, then wait until the kernel has stopped the process and take in what
    /// it wrote before, so the log has its last events before the pause, not after.
    /// `paused` is the `Paused` event logged for the worker when the pause comes from
    /// outside it (a person, a `pause` fault); the child logs its script's own.
    async fn freeze(
        &mut self,
        log: &EventLog,
        until: Option<Instant>,
        paused: Option<WorkerEvent>,
    ) -> Result<Frozen, ProcessError> {
        self.kill(Signal::Stop);
        let pid = self.pid;
        let stopped = tokio::task::spawn_blocking(move || crate::platform::wait_until_stopped(pid));
        let _ = tokio::time::timeout(STOP_TIMEOUT, stopped).await;
        self.drain(log, Some(DRAIN_GRACE)).await?;
        let from_outside = paused.is_some();
        if let Some(paused) = paused {
            log.append(self.worker_event(paused));
        }
        log.append(self.signal_event(KernelSignal::Stop));
        Ok(Frozen { until, from_outside })
    }

    fn thaw(&mut self, log: &EventLog, frozen: &Frozen) {
        self.kill(Signal::Cont);
        log.append(self.signal_event(KernelSignal::Cont));
        if frozen.from_outside {
            log.append(self.worker_event(WorkerEvent::Resumed));
        }
    }

    /// `SIGKILL`, then take in everything it wrote before it died (until the pipe closes).
    async fn kill_and_drain(&mut self, log: &EventLog) -> Result<(), ProcessError> {
        self.kill(Signal::Kill);
        self.drain(log, None).await
    }

    /// Copy the lines already written into the log: until the pipe closes, or (with a
    /// grace) until nothing more comes within it.
    async fn drain(&mut self, log: &EventLog, grace: Option<Duration>) -> Result<(), ProcessError> {
        loop {
            let line = match grace {
                Some(grace) => match tokio::time::timeout(grace, self.lines.next_line()).await {
                    Ok(line) => line?,
                    Err(_) => return Ok(()),
                },
                None => self.lines.next_line().await?,
            };
            match line {
                Some(line) => {
                    log.append(self.event(&line)?);
                }
                None => return Ok(()),
            }
        }
    }

    /// One event line from the child: only what its own worker did or sent. A child
    /// cannot speak for another worker, nor for the lock service (truth comes from
    /// the observer alone).
    fn event(&self, line: &str) -> Result<EventKind, ProcessError> {
        let kind = match parse(line)? {
            FromChild::Event(kind) => kind,
            FromChild::Ready => return Err(ProcessError::Protocol("ready twice".into())),
        };
        match &kind {
            EventKind::Worker { worker, .. } | EventKind::Command { worker, .. }
                if *worker == self.name =>
            {
                Ok(kind)
            }
            _ => Err(ProcessError::Protocol(format!(
                "worker {} sent an event it may not send: {line}",
                self.name
            ))),
        }
    }

    /// Signal our own child, which we have not reaped (we hold it): the pid is its own.
    fn kill(&self, signal: Signal) {
        crate::platform::signal(self.pid, signal);
    }

    fn signal_event(&self, signal: KernelSignal) -> EventKind {
        EventKind::Signal { worker: self.name.as_str().into(), signal, pid: self.pid }
    }

    fn worker_event(&self, what: WorkerEvent) -> EventKind {
        EventKind::Worker { worker: self.name.as_str().into(), what }
    }

    async fn send(&mut self, message: &ToChild) -> Result<(), ProcessError> {
        let mut line =
            serde_json::to_vec(message).map_err(|e| ProcessError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Why the child ended: the last line it wrote on stderr (its error), or its status.
    async fn failure(&mut self) -> ProcessError {
        let mut text = String::new();
        if let Some(mut stderr) = self.stderr.take() {
            let _ = (&mut stderr).take(64 * 1024).read_to_string(&mut text).await;
        }
        let status = self.child.wait().await.map(|s| s.to_string()).unwrap_or_default();
        let said = text.lines().rev().find(|l| !l.trim().is_empty()).map(str::trim);
        let said = said.map(|s| s.trim_start_matches("error: ").to_string());
        ProcessError::Protocol(match said {
            Some(said) => format!("{} ended: {said}", self.name),
            None => format!("{} ended ({status})", self.name),
        })
    }
}

impl From<ProcessError> for BackendError {
    fn from(e: ProcessError) -> Self {
        match e {
            ProcessError::Backend(e) => e,
            other => {
                BackendError::Service { service: "worker process", message: other.to_string() }
            }
        }
    }
}

fn parse(line: &str) -> Result<FromChild, ProcessError> {
    serde_json::from_str(line)
        .map_err(|e| ProcessError::Protocol(format!("unreadable message ({e}): {line}")))
}
