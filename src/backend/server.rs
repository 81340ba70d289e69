//! A private `redis-server`, started for one program run (or one test) and stopped
//! with it.
//!
//! It listens only on a unix socket in a fresh temp dir (no TCP port, nothing for
//! anyone else to find), keeps nothing on disk (`--save ''`, `--appendonly no`), and
//! cannot outlive us: [`Drop`] kills it, and the kernel kills it too if this process
//! dies without unwinding (`PR_SET_PDEATHSIG`), so even `kill -9` leaves no orphan.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The package to install when `redis-server` is missing, named in every error.
pub const INSTALL_HINT: &str = "apt-get install -y redis-server";

/// How long a fresh server may take to answer PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("redis-server is not installed (install it with: {INSTALL_HINT})")]
    NotInstalled,
    #[error("could not start redis-server: {0}")]
    Spawn(io::Error),
    #[error("redis-server exited during start-up ({status}); its output:\n{output}")]
    Died { status: String, output: String },
    #[error("redis-server did not answer within {0:?}")]
    Slow(Duration),
}

/// A running private server. Dropping it stops the server and removes its temp dir.
pub struct PrivateRedis {
    child: Child,
    socket: PathBuf,
    /// Held for its `Drop`: removes the socket and log when the server is gone.
    dir: tempfile::TempDir,
    /// Kept for restarts.
    extra_args: Vec<String>,
}

/// Spawn `redis-server` on a unix socket in `dir`, keeping nothing on disk, tied to
/// this process's life.
fn spawn(dir: &Path, socket: &Path, extra_args: &[String]) -> Result<Child, ServerError> {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", "0", "--unixsocketperm", "700", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(socket)
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args(extra_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: prctl only sets a flag on the new process; it is async-signal-safe and
    // touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ServerError::NotInstalled,
        _ => ServerError::Spawn(e),
    })
}

impl PrivateRedis {
    /// Start a server and wait until it answers PING.
    ///
    /// Call this from a thread that lives as long as the server should: the kernel's
    /// parent-death signal fires when the *thread* that spawned the child exits.
    pub fn start() -> Result<Self, ServerError> {
        Self::start_with(&[])
    }

    /// Start a server with extra `redis-server` arguments (tests use `--requirepass`).
    pub fn start_with(extra_args: &[&str]) -> Result<Self, ServerError> {
        let dir = tempfile::Builder::new()
            .prefix("fencelab-redis-")
            .tempdir()
            .map_err(ServerError::Spawn)?;
        let socket = dir.path().join("redis.sock");
        let extra_args: Vec<String> = extra_args.iter().map(|a| a.to_string()).collect();
        let child = spawn(dir.path(), &socket, &extra_args)?;
        let mut server = PrivateRedis { child, socket, dir, extra_args };
        server.wait_until_ready()?;
        Ok(server)
    }

    /// Kill the server (SIGKILL): its keys are gone; the socket stays where it was.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Start the server again, empty, on the same socket (after [`Self::kill`]).
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.kill();
        self.child = spawn(self.dir.path(), &self.socket, &self.extra_args)?;
        self.wait_until_ready()
    }

    fn wait_until_ready(&mut self) -> Result<(), ServerError> {
        let log = self.dir.path().join("redis.log");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let output = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(ServerError::Died { status: status.to_string(), output });
            }
            if self.socket.exists() && self.ping().is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ServerError::Slow(START_TIMEOUT));
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    fn ping(&self) -> redis::RedisResult<()> {
        let client = redis::Client::open(self.url())?;
        let mut con = client.get_connection_with_timeout(Duration::from_millis(500))?;
        match redis::cmd("PING").query::<String>(&mut con) {
            Ok(_) => Ok(()),
            // Up, but password-protected: that is ready too.
            Err(e) if e.to_string().contains("NOAUTH") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The URL to reach it: `unix:///tmp/fencelab-redis-XXXX/redis.sock`.
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The server's process id (tests check it is gone after drop).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The temp dir holding the socket (tests check it is removed).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        // Nothing is persisted, so there is nothing to flush: stop it at once.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
