//! Private servers, started for one program run (or one test) and stopped with it.
//!
//! Every server here lives in a fresh temp dir, listens only on a unix socket there or
//! on a free loopback port, keeps as little on disk as the program allows, and cannot
//! outlive us: `Drop` stops it, and its [`Tether`] kills it if this process dies
//! without unwinding, so even `kill -9` leaves no orphan.

mod etcd;
mod pair;
mod postgres;
mod redis;
mod redlock;
mod zookeeper;

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

pub use etcd::PrivateEtcd;
pub use pair::RedisPair;
pub use postgres::PrivatePostgres;
pub use redis::PrivateRedis;
pub use redlock::RedisNodes;
pub use zookeeper::PrivateZooKeeper;

use crate::platform::{Package, Signal, Tether};

/// A server program and the package that provides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    pub name: &'static str,
    pub package: Package,
}

impl Program {
    /// The command that installs it on this machine.
    pub fn install_line(&self) -> String {
        crate::platform::install_line(&[self.package])
    }
}

pub const REDIS: Program = Program {
    name: "redis-server",
    package: Package { apt: "redis-server", dnf: Some("redis"), brew: "redis" },
};
pub const ETCD: Program = Program {
    name: "etcd",
    package: Package { apt: "etcd-server", dnf: Some("etcd"), brew: "etcd" },
};
pub const POSTGRES: Program = Program {
    name: "postgres",
    package: Package { apt: "postgresql", dnf: Some("postgresql-server"), brew: "postgresql@17" },
};
/// A Java program: `java` runs its jars (see `zookeeper.rs`). Homebrew's brings its
/// Java; Fedora has no package.
pub const ZOOKEEPER: Program = Program {
    name: "zookeeper",
    package: Package { apt: "zookeeper", dnf: None, brew: "zookeeper" },
};

/// Where `program` is installed, or that it is not.
pub(crate) fn find(program: Program) -> Result<PathBuf, ServerError> {
    crate::platform::find_program(program.name).ok_or(ServerError::NotInstalled(program))
}

/// Whether a private server of `program` can be started here: found where its start
/// looks for it (PostgreSQL's directory, ZooKeeper's jars and a Java).
pub fn installed(program: Program) -> bool {
    match program {
        POSTGRES => crate::platform::postgres_bin_dir().is_some(),
        ZOOKEEPER => crate::platform::zookeeper().is_some() && crate::platform::java().is_some(),
        other => crate::platform::find_program(other.name).is_some(),
    }
}

/// How long a fresh server may take to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{} is not installed (install it with: {})", .0.name, .0.install_line())]
    NotInstalled(Program),
    #[error("could not start {program}: {reason}")]
    Setup { program: &'static str, reason: String },
    #[error(
        "{program} could not listen on 127.0.0.1:{port}: another program already uses that port"
    )]
    PortTaken { program: &'static str, port: u16 },
    #[error("{program} exited during start-up ({status}); its output:\n{output}")]
    Died { program: &'static str, status: String, output: String },
    #[error(
        "{program} did not answer within {waited:?} (is the machine very busy?); its output:\n{output}"
    )]
    Slow { program: &'static str, waited: Duration, output: String },
}

impl ServerError {
    pub(crate) fn setup(program: Program, reason: impl std::fmt::Display) -> Self {
        ServerError::Setup { program: program.name, reason: reason.to_string() }
    }
}

/// Give a server the environment it needs and nothing else: `PATH` (to find its own
/// helpers) and the C locale. Our environment can hold secrets (`REDIS_URL`,
/// `FENCELAB_POSTGRES_URL` with passwords) and settings a server would obey
/// (`ETCD_*`, `PG*`), none of which a private server should see.
pub(crate) fn only_needed_env(cmd: &mut Command) -> &mut Command {
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd.env("LANG", "C").env("LC_ALL", "C")
}

/// A server's process, tied to this one's life (see [`crate::platform::tie_to_parent`]).
pub(crate) struct ServerProcess {
    child: Child,
    tether: Tether,
}

impl ServerProcess {
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        if status.is_some() {
            self.tether.release();
        }
        Ok(status)
    }

    /// SIGKILL, and wait until it is gone.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.tether.release();
    }
}

/// Spawn `cmd` with only the environment it needs, its output sent to `log` (or
/// discarded), tied to this process's life.
///
/// Linux's parent-death signal (the platform's extra, beside the portable tether)
/// fires when the *thread* that spawned the child exits, and a fault restarts a server
/// from whatever thread a run's task is on (a tokio worker in `block_in_place`, which
/// tokio may end seconds later). So every server is spawned by [`launcher`]'s thread,
/// which lives as long as the program.
pub(crate) fn spawn(
    program: Program,
    mut cmd: Command,
    log: Option<&Path>,
) -> Result<ServerProcess, ServerError> {
    let (stdout, stderr) = match log {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| ServerError::setup(program, e))?;
            let copy = file.try_clone().map_err(|e| ServerError::setup(program, e))?;
            (Stdio::from(file), Stdio::from(copy))
        }
        None => (Stdio::null(), Stdio::null()),
    };
    only_needed_env(&mut cmd).stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    let tether =
        crate::platform::tie_to_parent(&mut cmd).map_err(|e| ServerError::setup(program, e))?;
    let child = launch(cmd).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ServerError::NotInstalled(program),
        _ => ServerError::setup(program, e),
    })?;
    Ok(ServerProcess { child, tether })
}

/// A command to spawn, and where the child (or the error) goes.
type Launch = (Command, mpsc::SyncSender<io::Result<Child>>);

/// The thread that spawns every server: started once, it waits on its channel for the
/// rest of the program (the sender is never dropped), so no server it starts gets the
/// parent-death signal before the program itself ends.
fn launcher() -> io::Result<&'static mpsc::Sender<Launch>> {
    static LAUNCHER: OnceLock<mpsc::Sender<Launch>> = OnceLock::new();
    if let Some(tx) = LAUNCHER.get() {
        return Ok(tx);
    }
    let (tx, rx) = mpsc::channel::<Launch>();
    thread::Builder::new().name("fencelab-servers".into()).spawn(move || {
        for (mut cmd, reply) in rx {
            let _ = reply.send(cmd.spawn());
        }
    })?;
    // Two callers racing here start two launchers; the loser's ends at once, unused.
    Ok(LAUNCHER.get_or_init(|| tx))
}

/// Spawn `cmd` on the launcher's thread. The child can be waited for from any thread.
fn launch(cmd: Command) -> io::Result<Child> {
    let (reply, child) = mpsc::sync_channel(1);
    launcher()?
        .send((cmd, reply))
        .map_err(|_| io::Error::other("the thread that starts servers has stopped"))?;
    child.recv().map_err(|_| io::Error::other("the thread that starts servers has stopped"))?
}

/// Poll `ready` until it says yes, the child dies, or `within` passes. `log` is the
/// server's log file, quoted in the error (and searched for a taken port).
pub(crate) fn wait_until_ready(
    program: Program,
    child: &mut ServerProcess,
    log: &Path,
    port: Option<u16>,
    within: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), ServerError> {
    let deadline = Instant::now() + within;
    // The end of the log says why; the start is the program's banner.
    let output = || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n")
    };
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let output = output();
            if let Some(port) = port.filter(|_| output.contains("already in use")) {
                return Err(ServerError::PortTaken { program: program.name, port });
            }
            return Err(ServerError::Died {
                program: program.name,
                status: status.to_string(),
                output,
            });
        }
        if ready() {
            return Ok(());
        }
        if Instant::now() > deadline {
            child.kill();
            return Err(ServerError::Slow {
                program: program.name,
                waited: within,
                output: output(),
            });
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// How many times a server started on free ports is tried again on new ones.
const PORT_ATTEMPTS: usize = 4;

/// Start a server on ports from [`free_port`], choosing new ones when another process
/// bound one between our choice and the server's own bind: a race nothing can close
/// from outside the server, seen when tests start servers side by side.
pub(crate) fn on_free_ports<T>(
    mut start: impl FnMut() -> Result<T, ServerError>,
) -> Result<T, ServerError> {
    for _ in 1..PORT_ATTEMPTS {
        match start() {
            Err(ServerError::PortTaken { .. }) => continue,
            other => return other,
        }
    }
    start()
}

/// A loopback port nobody listens on right now.
pub fn free_port(program: Program) -> Result<u16, ServerError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| ServerError::setup(program, e))
}

/// The file in each server's temp dir that names the fencelab process owning it.
const OWNER_FILE: &str = "fencelab.pid";

/// A temp dir for one server, named after it and marked with our pid.
///
/// A fencelab killed outright (`kill -9`) cannot remove its dirs, though the kernel
/// stops its servers. So each new dir first sweeps away the dirs of fencelab processes
/// that are gone: what one run could not clean, the next one does. The commands that
/// can start servers also sweep when the program starts ([`sweep_orphaned_dirs`]),
/// so a run on the simulator or on the user's own servers cleans up too.
pub(crate) fn temp_dir(program: Program) -> Result<tempfile::TempDir, ServerError> {
    temp_dir_in(program, &std::env::temp_dir())
}

/// Where a server that syncs every write to disk should keep its data: in memory
/// when the machine has a file system there, so a busy disk cannot stall a lesson's timing.
/// Nothing here needs to survive the run.
pub(crate) fn memory_dir(program: Program) -> Result<tempfile::TempDir, ServerError> {
    temp_dir_in(program, &memory_base())
}

fn memory_base() -> PathBuf {
    crate::platform::memory_dir()
}

/// Remove the server dirs that fencelab processes killed outright left behind, in
/// both places servers keep them.
pub fn sweep_orphaned_dirs() {
    remove_orphaned_dirs(&std::env::temp_dir());
    remove_orphaned_dirs(&memory_base());
}

fn temp_dir_in(program: Program, base: &Path) -> Result<tempfile::TempDir, ServerError> {
    remove_orphaned_dirs(base);
    let dir = tempfile::Builder::new()
        .prefix(&format!("fencelab-{}-", program.name))
        .tempdir_in(base)
        .map_err(|e| ServerError::setup(program, e))?;
    std::fs::write(dir.path().join(OWNER_FILE), std::process::id().to_string())
        .map_err(|e| ServerError::setup(program, e))?;
    Ok(dir)
}

/// Remove fencelab server dirs whose owner process no longer exists. Dirs without an
/// owner file (being created right now, or not ours) are left alone.
fn remove_orphaned_dirs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours =
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("fencelab-"));
        let owner = std::fs::read_to_string(path.join(OWNER_FILE)).ok();
        let owner = owner.and_then(|pid| pid.trim().parse::<u32>().ok());
        if let Some(pid) = owner.filter(|_| ours)
            && !crate::platform::process_exists(pid)
        {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Stop a server: ask it to go with `signal`, then kill it if it has not gone within a
/// second.
pub(crate) fn stop(child: &mut ServerProcess, signal: Signal) {
    // SIGCONT after: a stopped server (SIGSTOP) acts on the signal at once. The
    // child has not been reaped yet (we hold it), so its pid is still its own.
    if crate::platform::signal(child.id(), signal) {
        crate::platform::signal(child.id(), Signal::Cont);
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
    child.kill();
}

#[cfg(test)]
mod tests {
    use super::{PORT_ATTEMPTS, ServerError, on_free_ports};

    fn taken() -> ServerError {
        ServerError::PortTaken { program: "etcd", port: 1 }
    }

    #[test]
    fn a_port_taken_under_a_server_is_tried_again_a_few_times_then_reported() {
        let mut tries = 0;
        let started = on_free_ports(|| {
            tries += 1;
            if tries < 3 { Err(taken()) } else { Ok(tries) }
        });
        assert_eq!(started.unwrap(), 3);

        let mut tries = 0;
        let never = on_free_ports::<()>(|| {
            tries += 1;
            Err(taken())
        });
        assert!(matches!(never, Err(ServerError::PortTaken { .. })));
        assert_eq!(tries, PORT_ATTEMPTS);

        // Any other failure is not a race: reported at once.
        let mut tries = 0;
        let missing = on_free_ports::<()>(|| {
            tries += 1;
            Err(ServerError::Setup { program: "etcd", reason: "no".into() })
        });
        assert!(matches!(missing, Err(ServerError::Setup { .. })));
        assert_eq!(tries, 1);
    }
}
