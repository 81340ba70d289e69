//! A foreign program's process: started with its own process group, tied to
//! fencelab's life (`platform::tie_to_parent`: the group dies with fencelab, even after
//! `kill -9`), handed the run's facts (environment and hello line), and read with a
//! deadline and a size bound on every line, so a broken program ends the run with an
//! error that names the worker and what was wrong, never a hang. What the program is
//! asked to do, step by step, is host.rs's.

use std::collections::VecDeque;
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

use super::armed::Armed;
use super::protocol::{self, Mode, Order, Report};
use crate::backend::proxy::{self, LinkCondition, Tapped};
use crate::backend::{BackendError, Keys, ProgramServer, ServerKind};
use crate::platform::{Signal, Tether};
use crate::scenario::WorkerSpec;

/// How long a program may take to say `ready` once greeted (its hello sent: on a
/// run prepared at once, as it starts).
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

/// A program's failure, in words that name the worker.
pub(super) fn failed(worker: &str, message: impl std::fmt::Display) -> BackendError {
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
    /// Read when the run starts: a run prepared ahead may take other pauses first
    /// (`PreparedRun::retarget`).
    pub faults: watch::Receiver<Vec<crate::scenario::Fault>>,
}

/// A program's process: once greeted ([`Loading::greet`]), one that has said `ready`,
/// waiting for the run to start.
pub struct Program {
    pub(super) spec: WorkerSpec,
    pub(super) child: Child,
    /// Its pid, and its process group's id (it leads a group of its own).
    pub(super) pid: u32,
    /// Ties the program (and its group) to fencelab's life, even after `kill -9`.
    pub(super) _tether: Tether,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: Lines,
    pub(super) stderr: Arc<Mutex<VecDeque<String>>>,
    /// Set when the program floods its stderr.
    pub(super) stderr_flooded: Arc<AtomicBool>,
    /// Its stderr lines for the log, the first [`STDERR_LOGGED`] of them.
    pub(super) said: mpsc::UnboundedReceiver<String>,
    pub(super) taps: mpsc::UnboundedReceiver<Tapped>,
    /// Stops the program's proxy (its listener and connections).
    pub(super) proxy: (CancellationToken, TaskTracker),
    /// The condition of a link without faults, kept open for the proxy.
    pub(super) _clear: Option<watch::Sender<LinkCondition>>,
    /// The key it uses: the one it was told, or the one its `ready` named.
    pub(super) key: String,
    pub(super) mode: Mode,
    pub(super) step_timeout: Duration,
    /// Its pauses at its own moments, and its calls counted.
    pub(super) armed: Armed,
    /// The run's faults, to arm it with when the run starts.
    faults: watch::Receiver<Vec<crate::scenario::Fault>>,
    /// Set while its proxy holds each reply until the run has looked at it.
    pub(super) hold_replies: Arc<AtomicBool>,
    /// Opens its proxies' way to the servers (`proxy::Tapping::greeted`), once its
    /// hello is sent; kept as long as the proxies are.
    greeted: watch::Sender<bool>,
}

/// A program started (its interpreter loading its libraries) and not yet greeted:
/// its environment has the run's facts, but it has not got its hello, and its
/// proxies carry nothing to a server until it has (a program that connects as it
/// starts waits there). A search's next run on servers another run is using starts
/// its programs so, ahead: what they do on the servers waits for that run's end.
pub struct Loading {
    program: Program,
    hello: Order,
    /// The run's id: the key its `ready` may name must contain it.
    run: String,
}

impl Program {
    /// Start `spec`'s program behind a proxy on the link `condition`, with the run's
    /// facts in its environment; [`Loading::greet`] hands it the hello line.
    pub async fn spawn(
        spec: &WorkerSpec,
        setup: &Setup,
        (condition, clear): (watch::Receiver<LinkCondition>, Option<watch::Sender<LinkCondition>>),
    ) -> Result<Loading, BackendError> {
        let name = spec.name.as_str();
        let Some(program) = &spec.program else {
            return Err(failed(name, "has no program"));
        };
        let mode = if spec.steps.is_empty() { Mode::Free } else { Mode::Driven };
        let (cancel, tasks) = (CancellationToken::new(), TaskTracker::new());
        // Its proxies stop if it never becomes a `Program` (an error, or a spare
        // aborted while it starts); then `Program`'s drop stops them.
        let proxies = cancel.clone().drop_guard();
        let (tap, taps) = mpsc::unbounded_channel();
        // Replies are held once the run starts (`Run::run`): before, nobody reads them.
        let hold_replies = Arc::new(AtomicBool::new(false));
        let (greeted, greeted_rx) = watch::channel(false);
        let tapping = proxy::Tapping {
            tap,
            hold_replies: hold_replies.clone(),
            greeted: greeted_rx,
            kind: ServerKind::Redis,
        };
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
        proxies.disarm();
        let program = Program {
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
            // Armed with its pauses as the run starts (`arm`): a run made ready ahead
            // learns its trial's faults only then.
            armed: Armed::default(),
            faults: setup.faults.clone(),
            hold_replies,
            greeted,
        };
        Ok(Loading { program, hello, run: setup.keys.run_id.clone() })
    }
}

impl Loading {
    /// Hand the program its hello (and with it, its servers), and wait for its
    /// `ready`.
    pub async fn greet(self) -> Result<Program, BackendError> {
        let Loading { mut program, hello, run } = self;
        let name = program.spec.name.clone();
        let name = name.as_str();
        program.greeted.send_replace(true);
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
                    if !key.contains(&run) {
                        return Err(failed(
                            name,
                            format!(
                                "its ready names the key {key:?}, which is not this run's (it must contain {run})"
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
}

impl Program {
    /// Arm it with the pauses at its own moments the run has as it starts.
    pub(super) fn arm(&mut self) {
        self.armed = Armed::of(&self.spec.name, &self.faults.borrow());
    }

    /// The key this program's lock lives at.
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// One line from stdout as a report; `None` when stdout closed.
    pub(super) fn line(
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

    pub(super) async fn send(&mut self, order: &Order) -> Result<(), BackendError> {
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
    pub(super) fn said(&self) -> String {
        let lines = self.stderr.lock().map(|l| l.iter().cloned().collect::<Vec<_>>());
        match lines {
            Ok(lines) if !lines.is_empty() => {
                format!("; its last lines on stderr: {}", lines.join(" | "))
            }
            _ => String::new(),
        }
    }

    /// The error for a program whose stdout closed before the run's end.
    pub(super) async fn ended_early(&mut self) -> BackendError {
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
    pub(super) async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let status = match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => None,
        };
        // What it started in its group goes with it. Reaped a moment ago, its pid is
        // not yet another's: an id is not given out again while a group bears it, and
        // an empty group's only after every other pid has been (`kill_group` says no
        // more once reaped).
        crate::platform::signal_group(self.pid, Signal::Kill);
        if status.is_none() {
            let _ = self.child.wait().await;
        }
        status
    }

    /// Signal the process group our child leads (its pid is the group's id), while the
    /// child is not reaped (tokio gives its id until then): its pid, and so the group's
    /// id, is its own. Once it is, the group is signalled by [`Program::wait_exit`],
    /// which reaped it, and no more: a group left empty gives its id up, and a later
    /// program (a group leader too, in a long search) may be given it.
    pub(super) fn kill_group(&self, signal: Signal) {
        if self.child.id().is_some() {
            crate::platform::signal_group(self.pid, signal);
        }
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
pub(super) enum LineError {
    TooLong,
    Flood,
    Io(std::io::Error),
}

/// Lines of a pipe, each bounded in length, their rate bounded, and numbered. Reading
/// is cancel-safe: a line half read when a `select!` takes another branch stays in
/// the buffer for the next call.
pub(super) struct Lines {
    reader: BufReader<Box<dyn tokio::io::AsyncRead + Send + Unpin>>,
    buffer: Vec<u8>,
    /// The number of the last line read, from 1.
    pub(super) number: u64,
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

    pub(super) async fn next(&mut self) -> Result<Option<String>, LineError> {
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
