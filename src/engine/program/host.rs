//! A foreign program as a run's worker: started with its own process group, tied to
//! fencelab's life (`platform::tie_to_parent`: the group dies with fencelab, even after
//! `kill -9`), handed the run's facts (environment and hello line), driven
//! through its scenario's steps or left to run freely, paused with `SIGSTOP`, crashed
//! with `SIGKILL`, and never trusted: its lines are its belief, the log's truth is the
//! observer's, and its writes go through fencelab's storage client.
//!
//! Every read from it has a deadline and a size bound, so a broken program ends the
//! run with an error that names the worker and what was wrong, never a hang.

use std::collections::{HashMap, VecDeque};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::armed::{Armed, call_name};
use super::protocol::{self, Mode, Order, Report, StepName};
use super::traffic::Traffic;
use crate::backend::proxy::{self, LinkCondition, Tapped};
use crate::backend::{
    BackendError, Keys, LockClient, ProgramServer, ServerKind, StorageClient, StoredWrite,
    WriteCheck, wire,
};
use crate::engine::host::{WorkerHost, WorkerRun};
use crate::engine::log::{EventKind, EventLog, KernelSignal, ProgramCall, Refusal, WorkerEvent};
use crate::engine::observer::Holders;
use crate::engine::policy::WritePolicy;
use crate::engine::worker::{WorkerCommand, sleep_until_opt};
use crate::platform::{Signal, Tether};
use crate::scenario::{Step, StorageKind, WorkerSpec};

/// How long a program may take to start and say `ready`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest line a program may write on stdout.
pub const MAX_LINE: usize = 64 * 1024;
/// The most lines a second a program may write, on stdout and on stderr each.
pub const MAX_LINES_PER_SECOND: u32 = 1000;
/// How many of its last stderr lines an error quotes.
const STDERR_KEPT: usize = 6;
/// How much of one stderr line is kept.
const STDERR_LINE_CHARS: usize = 200;
/// How many of its stderr lines a run's log shows (the inspector, the transcript);
/// past them, one line says how many more there were.
const STDERR_LOGGED: usize = 100;
/// How long a program has to exit after `stop` before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// How long a free-running program whose stdout closed has to exit.
const EXIT_GRACE: Duration = Duration::from_secs(10);
/// How long the kernel may take to report a stopped process as stopped.
const STOP_TIMEOUT: Duration = Duration::from_secs(1);
/// Once a program is stopped, what it wrote is in the pipe: the reactor's time to see it.
const DRAIN_GRACE: Duration = Duration::from_millis(5);

/// A program's failure, in words that name the worker.
fn failed(worker: &str, message: impl std::fmt::Display) -> BackendError {
    BackendError::Service { service: "program", message: format!("worker {worker}: {message}") }
}

/// What every program of a run is given.
pub struct Setup {
    pub keys: Keys,
    /// The lock's kind, as the hello names it (`redis`, `redlock`, `etcd`, ...).
    pub lock: String,
    /// The servers the program may reach (the lock's, and a PostgreSQL storage), each
    /// through a proxy of its own per program, with the address to give it (the
    /// proxy's put in) and no password.
    pub servers: Vec<ProgramServer>,
    pub password: Option<String>,
    /// The key a program's Redis proxies ask for themselves, when the servers have no
    /// password (it is `password` then, and the program's Redis URLs carry it).
    pub proxy_password: Option<Arc<str>>,
    pub fencing: bool,
    /// The storage's table a program may write into itself (a PostgreSQL storage).
    pub table: Option<String>,
    /// How long a step may go without a word from the program (not counting pauses).
    pub step_timeout: Duration,
    /// The run's faults: the pauses placed at a program's own moments are its host's.
    pub faults: Vec<crate::scenario::Fault>,
}

/// A program that has said `ready`, waiting for the run to start.
pub struct Program {
    spec: WorkerSpec,
    child: Child,
    /// Its pid, and its process group's id (it leads a group of its own).
    pid: u32,
    /// Ties the program (and its group) to fencelab's life, even after `kill -9`.
    _tether: Tether,
    stdin: ChildStdin,
    stdout: Lines,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Set when the program floods its stderr.
    stderr_flooded: Arc<AtomicBool>,
    /// Its stderr lines for the log, the first [`STDERR_LOGGED`] of them.
    said: mpsc::UnboundedReceiver<String>,
    taps: mpsc::UnboundedReceiver<Tapped>,
    /// Stops the program's proxy (its listener and connections).
    proxy: (CancellationToken, TaskTracker),
    /// The condition of a link without faults, kept open for the proxy.
    _clear: Option<watch::Sender<LinkCondition>>,
    /// The key it uses: the one it was told, or the one its `ready` named.
    key: String,
    mode: Mode,
    step_timeout: Duration,
    /// Its pauses at its own moments, and its calls counted.
    armed: Armed,
    /// Set while its proxy holds each reply until the run has looked at it.
    hold_replies: Arc<AtomicBool>,
}

impl Program {
    /// Start `spec`'s program behind a proxy on the link `condition`, hand it the hello
    /// line, and wait for its `ready`.
    pub async fn start(
        spec: &WorkerSpec,
        setup: &Setup,
        (condition, clear): (watch::Receiver<LinkCondition>, Option<watch::Sender<LinkCondition>>),
    ) -> Result<Self, BackendError> {
        let name = spec.name.as_str();
        let Some(program) = &spec.program else {
            return Err(failed(name, "has no program"));
        };
        let mode = if spec.steps.is_empty() { Mode::Free } else { Mode::Driven };
        let (cancel, tasks) = (CancellationToken::new(), TaskTracker::new());
        let (tap, taps) = mpsc::unbounded_channel();
        let armed = Armed::of(name, &setup.faults);
        // Replies are held once the run starts (`Run::run`): before, nobody reads them.
        let hold_replies = Arc::new(AtomicBool::new(false));
        let tapping =
            proxy::Tapping { tap, hold_replies: hold_replies.clone(), kind: ServerKind::Redis };
        let mut servers =
            protocol::Servers { password: setup.password.clone(), ..Default::default() };
        let mut redis = Vec::new();
        for server in &setup.servers {
            let tapping = proxy::Tapping { kind: server.kind, ..tapping.clone() };
            let (condition, tap) = (condition.clone(), Some(tapping));
            let upstream = server.upstream.clone();
            let asks = setup.proxy_password.clone().filter(|_| server.kind == ServerKind::Redis);
            let proxied = proxy::listen_tapped(
                upstream,
                condition,
                cancel.clone(),
                &tasks,
                tap,
                asks.clone(),
            )
            .await
            .map_err(|e| failed(name, format!("could not start its proxy: {e}")))?;
            // The proxy's key is made for the run and opens nothing once it ends: the
            // URL carries it, so a program that knows only its URL gets in.
            let address = match &asks {
                Some(key) => {
                    server.address(proxied).replacen("redis://", &format!("redis://:{key}@"), 1)
                }
                None => server.address(proxied),
            };
            match server.kind {
                ServerKind::Redis => redis.push(address),
                ServerKind::Etcd => servers.etcd = Some(address),
                ServerKind::ZooKeeper => servers.zookeeper = Some(address),
                ServerKind::Postgres => servers.postgres = Some(address),
            }
        }
        // One Redis is `redis`; Redlock's nodes are `redis_nodes`.
        match redis.len() {
            1 => servers.redis = redis.pop(),
            _ => servers.redis_nodes = redis,
        }
        let hello = Order::Hello {
            fencelab: protocol::PROTOCOL_VERSION,
            worker: spec.name.clone(),
            run: setup.keys.run_id.clone(),
            key: setup.keys.lock.clone(),
            token_key: setup.keys.fence.clone(),
            lease_ms: setup.keys.lease_ms,
            mode,
            fencing: setup.fencing,
            lock: setup.lock.clone(),
            servers: Box::new(servers),
            table: setup.table.clone(),
        };
        let mut cmd = tokio::process::Command::new(&program.argv[0]);
        cmd.args(&program.argv[1..]).env_clear().envs(protocol::environment(&hello));
        for var in ["PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV", "NODE_PATH"] {
            if let Some(value) = std::env::var_os(var) {
                cmd.env(var, value);
            }
        }
        // Its report lines leave at once, not when a buffer fills.
        cmd.env("PYTHONUNBUFFERED", "1");
        if let Some(dir) = &program.dir {
            cmd.current_dir(dir);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // A group of its own: a pause or a kill reaches every process it started.
        cmd.process_group(0).kill_on_drop(true);
        let tether = crate::platform::tie_family_to_parent(cmd.as_std_mut())
            .map_err(|e| failed(name, format!("cannot tie its program to fencelab: {e}")))?;
        let mut child = cmd.spawn().map_err(|e| {
            failed(
                name,
                format!(
                    "cannot start {}: {e}",
                    shlex::try_join(program.argv.iter().map(String::as_str)).unwrap_or_default()
                ),
            )
        })?;
        let pid = child.id();
        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) =
            (pid, child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(failed(name, "its program ended as it started"));
        };
        let stderr_lines = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_flooded = Arc::new(AtomicBool::new(false));
        let (say, said) = mpsc::unbounded_channel();
        tokio::spawn(keep_stderr(stderr, (stderr_lines.clone(), say), stderr_flooded.clone()));
        let mut program = Program {
            spec: spec.clone(),
            child,
            pid,
            _tether: tether,
            stdin,
            stdout: Lines::new(stdout),
            stderr: stderr_lines,
            stderr_flooded,
            said,
            taps,
            proxy: (cancel, tasks),
            _clear: clear,
            key: setup.keys.lock.clone(),
            mode,
            step_timeout: setup.step_timeout,
            armed,
            hold_replies,
        };
        program.send(&hello).await?;
        let ready = tokio::time::timeout(READY_TIMEOUT, program.stdout.next()).await;
        let line = match ready {
            Err(_) => {
                return Err(failed(
                    name,
                    format!(
                        "its program did not say {{\"event\":\"ready\"}} within {} s (a silent program?){}",
                        READY_TIMEOUT.as_secs(),
                        program.said()
                    ),
                ));
            }
            Ok(line) => line,
        };
        match program.line(line)? {
            Some(Report::Ready { key }) => {
                if let Some(key) = key {
                    if !key.contains(&setup.keys.run_id) {
                        return Err(failed(
                            name,
                            format!(
                                "its ready names the key {key:?}, which is not this run's (it must contain {})",
                                setup.keys.run_id
                            ),
                        ));
                    }
                    program.key = key;
                }
                Ok(program)
            }
            Some(other) => Err(failed(
                name,
                format!(
                    "line 1 of its stdout: expected {{\"event\":\"ready\"}} first, got {:?}",
                    other.name()
                ),
            )),
            None => Err(program.ended_early().await),
        }
    }

    /// The key this program's lock lives at.
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// One line from stdout as a report; `None` when stdout closed.
    fn line(
        &mut self,
        line: Result<Option<String>, LineError>,
    ) -> Result<Option<Report>, BackendError> {
        let name = self.spec.name.clone();
        let number = self.stdout.number;
        match line {
            Ok(None) => Ok(None),
            Ok(Some(text)) => protocol::parse_report(&text).map(Some).map_err(|e| {
                let shown: String = text.chars().take(120).collect();
                failed(&name, format!("line {number} of its stdout is not a report: {e}: {shown}"))
            }),
            Err(LineError::TooLong) => Err(failed(
                &name,
                format!(
                    "line {number} of its stdout is longer than {} KiB (a flood?)",
                    MAX_LINE / 1024
                ),
            )),
            Err(LineError::Flood) => Err(failed(
                &name,
                format!(
                    "it floods its stdout: more than {MAX_LINES_PER_SECOND} lines a second (line {number})"
                ),
            )),
            Err(LineError::Io(e)) => Err(failed(&name, format!("cannot read its stdout: {e}"))),
        }
    }

    async fn send(&mut self, order: &Order) -> Result<(), BackendError> {
        let mut line = serde_json::to_vec(order).map_err(|e| failed(&self.spec.name, e))?;
        line.push(b'\n');
        let sent = async {
            self.stdin.write_all(&line).await?;
            self.stdin.flush().await
        };
        // A stopped program's pipe can fill: a pause is not a reason to wait here.
        match tokio::time::timeout(Duration::from_millis(200), sent).await {
            Ok(Ok(())) | Err(_) => Ok(()),
            // It closed its stdin or exited: what it does next (or its exit) says why.
            Ok(Err(_)) => Ok(()),
        }
    }

    /// Its last lines on stderr, as the end of an error message.
    fn said(&self) -> String {
        let lines = self.stderr.lock().map(|l| l.iter().cloned().collect::<Vec<_>>());
        match lines {
            Ok(lines) if !lines.is_empty() => {
                format!("; its last lines on stderr: {}", lines.join(" | "))
            }
            _ => String::new(),
        }
    }

    /// The error for a program whose stdout closed before the run's end.
    async fn ended_early(&mut self) -> BackendError {
        let status = self.wait_exit(Duration::from_secs(2)).await;
        // Let its last stderr lines arrive.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let status =
            status.map_or_else(|| "still running, stdout closed".to_string(), |s| s.to_string());
        failed(
            &self.spec.name,
            format!("its program exited before the run's end ({status}){}", self.said()),
        )
    }

    /// Wait up to `within` for the program to exit; kill its group when it does not.
    async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let status = match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => None,
        };
        self.kill_group(Signal::Kill);
        if status.is_none() {
            let _ = self.child.wait().await;
        }
        status
    }

    /// Signal the process group our child leads (its pid is the group's id).
    fn kill_group(&self, signal: Signal) {
        crate::platform::signal_group(self.pid, signal);
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // Whatever it started dies with it; the proxy stops.
        self.kill_group(Signal::Kill);
        self.proxy.0.cancel();
    }
}

/// Keep the last lines of a program's stderr (cut short) for errors, pass the first
/// ones on to the log (`say`), and flag a flood.
async fn keep_stderr(
    stderr: ChildStderr,
    (kept, say): (Arc<Mutex<VecDeque<String>>>, mpsc::UnboundedSender<String>),
    flooded: Arc<AtomicBool>,
) {
    let mut lines = Lines::new(stderr);
    let mut told = 0;
    loop {
        let line = match lines.next().await {
            Ok(Some(line)) => line,
            Err(LineError::Flood | LineError::TooLong) => {
                flooded.store(true, Ordering::SeqCst);
                return;
            }
            Ok(None) | Err(LineError::Io(_)) => return,
        };
        if line.trim().is_empty() {
            continue;
        }
        let line: String = line.chars().take(STDERR_LINE_CHARS).collect();
        told += 1;
        if told <= STDERR_LOGGED {
            let _ = say.send(line.clone());
        } else if told == STDERR_LOGGED + 1 {
            let _ = say
                .send(format!("(more lines on stderr: the log shows the first {STDERR_LOGGED})"));
        }
        let Ok(mut kept) = kept.lock() else { return };
        kept.push_back(line);
        if kept.len() > STDERR_KEPT {
            kept.pop_front();
        }
    }
}

/// Why a line could not be read.
enum LineError {
    TooLong,
    Flood,
    Io(std::io::Error),
}

/// Lines of a pipe, each bounded in length, their rate bounded, and numbered. Reading
/// is cancel-safe: a line half read when a `select!` takes another branch stays in
/// the buffer for the next call.
struct Lines {
    reader: BufReader<Box<dyn tokio::io::AsyncRead + Send + Unpin>>,
    buffer: Vec<u8>,
    /// The number of the last line read, from 1.
    number: u64,
    window: (Instant, u32),
}

impl Lines {
    fn new(pipe: impl tokio::io::AsyncRead + Send + Unpin + 'static) -> Self {
        let reader: Box<dyn tokio::io::AsyncRead + Send + Unpin> = Box::new(pipe);
        Lines {
            reader: BufReader::new(reader),
            buffer: Vec::new(),
            number: 0,
            window: (Instant::now(), 0),
        }
    }

    async fn next(&mut self) -> Result<Option<String>, LineError> {
        loop {
            let room = (MAX_LINE + 1).saturating_sub(self.buffer.len()) as u64;
            let n = (&mut self.reader)
                .take(room)
                .read_until(b'\n', &mut self.buffer)
                .await
                .map_err(LineError::Io)?;
            let whole = self.buffer.last() == Some(&b'\n');
            if !whole && self.buffer.len() > MAX_LINE {
                return Err(LineError::TooLong);
            }
            if n == 0 && self.buffer.is_empty() {
                return Ok(None);
            }
            if !whole && n != 0 {
                continue;
            }
            let line = String::from_utf8_lossy(&self.buffer).trim_end().to_string();
            self.buffer.clear();
            self.number += 1;
            let now = Instant::now();
            if now.duration_since(self.window.0) >= Duration::from_secs(1) {
                self.window = (now, 0);
            }
            self.window.1 += 1;
            if self.window.1 > MAX_LINES_PER_SECOND {
                return Err(LineError::Flood);
            }
            return Ok(Some(line));
        }
    }
}

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
                run.log.append(EventKind::Stderr { worker, line });
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
            Step::Release => (StepName::Release, None, false),
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
                    self.log.append(EventKind::Stderr { worker, line });
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
                worker: self.program.spec.name.clone(),
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
        let write = StoredWrite { worker: self.program.spec.name.clone(), token, value };
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
                worker: write.worker.clone(),
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
        let wrote =
            WorkerEvent::Wrote { value, token, accepted, redis_holder, order, refused, own };
        self.emit(wrote);
        self.program.send(&Order::WriteResult { id, accepted, reason }).await
    }

    /// `SIGSTOP` the program's group, wait until the kernel has stopped it, and take in
    /// what it wrote before, so the log has its last events before the pause.
    async fn freeze(&mut self, ms: Option<u64>, paused: WorkerEvent) -> Result<(), BackendError> {
        self.program.kill_group(Signal::Stop);
        let pid = self.program.pid;
        let stopped = tokio::task::spawn_blocking(move || crate::platform::wait_until_stopped(pid));
        let _ = tokio::time::timeout(STOP_TIMEOUT, stopped).await;
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
        EventKind::Signal { worker: self.program.spec.name.clone(), signal, pid: self.program.pid }
    }

    /// The lock value `value` is this program's: named so here and, through the log,
    /// wherever the run's observer is (a class's room).
    fn claim(&self, value: &str) {
        let worker = self.program.spec.name.clone();
        if self.bench.holders.insert(value, &worker) {
            self.log.append(EventKind::Claimed { worker, value: value.to_string() });
        }
    }

    fn emit(&self, what: WorkerEvent) {
        self.log.append(EventKind::Worker { worker: self.program.spec.name.clone(), what });
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
