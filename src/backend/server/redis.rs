//! A private `redis-server` on a unix socket in a temp dir (no TCP port unless asked
//! for, nothing for anyone else to find), keeping nothing on disk (`--save ''`,
//! `--appendonly no`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{
    REDIS, START_TIMEOUT, ServerError, ServerProcess, find, spawn, temp_dir, wait_until_ready,
};

/// A running private server. Dropping it stops the server and removes its temp dir.
pub struct PrivateRedis {
    child: ServerProcess,
    socket: PathBuf,
    /// Held for its `Drop`: removes the socket and log when the server is gone.
    dir: tempfile::TempDir,
    /// Kept for restarts.
    extra_args: Vec<String>,
}

fn command(dir: &Path, socket: &Path, extra_args: &[String]) -> Result<Command, ServerError> {
    let mut cmd = Command::new(find(REDIS)?);
    cmd.args(["--port", "0", "--unixsocketperm", "700", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(socket)
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args(extra_args);
    Ok(cmd)
}

impl PrivateRedis {
    /// Start a server and wait until it answers PING.
    pub fn start() -> Result<Self, ServerError> {
        Self::start_with(&[])
    }

    /// Start a server with extra `redis-server` arguments (tests use `--requirepass`).
    pub fn start_with(extra_args: &[&str]) -> Result<Self, ServerError> {
        Self::start_within(extra_args, START_TIMEOUT)
    }

    /// The same, giving up when the server does not answer within `within`.
    pub fn start_within(extra_args: &[&str], within: Duration) -> Result<Self, ServerError> {
        let dir = temp_dir(REDIS)?;
        let socket = dir.path().join("redis.sock");
        let extra_args: Vec<String> = extra_args.iter().map(|a| a.to_string()).collect();
        let child = spawn(REDIS, command(dir.path(), &socket, &extra_args)?, None)?;
        let mut server = PrivateRedis { child, socket, dir, extra_args };
        server.wait(within)?;
        Ok(server)
    }

    /// Kill the server (SIGKILL): its keys are gone; the socket stays where it was.
    pub fn kill(&mut self) {
        self.child.kill();
    }

    /// Whether the server's process has ended (reaping it if so): a server should be
    /// up here, so one that is not must be started again before the next run.
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Start the server again, empty, on the same socket (after [`Self::kill`]).
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.kill();
        let cmd = command(self.dir.path(), &self.socket, &self.extra_args)?;
        self.child = spawn(REDIS, cmd, None)?;
        self.wait(START_TIMEOUT)
    }

    fn wait(&mut self, within: Duration) -> Result<(), ServerError> {
        let log = self.dir.path().join("redis.log");
        let port = self.tcp_port();
        let (socket, url) = (self.socket.clone(), self.url());
        wait_until_ready(REDIS, &mut self.child, &log, port, within, || {
            socket.exists() && ping(&url).is_ok()
        })
    }

    /// The TCP port it was asked to listen on, if any (`--port N`, N > 0).
    fn tcp_port(&self) -> Option<u16> {
        let at = self.extra_args.iter().position(|a| a == "--port")?;
        self.extra_args.get(at + 1)?.parse().ok().filter(|p| *p > 0)
    }

    /// The URL to reach it: `unix:///tmp/fencelab-redis-server-XXXX/redis.sock`.
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Its unix socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
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

fn ping(url: &str) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection_with_timeout(Duration::from_millis(500))?;
    match redis::cmd("PING").query::<String>(&mut con) {
        Ok(_) => Ok(()),
        // Up, but password-protected: that is ready too.
        Err(e) if e.to_string().contains("NOAUTH") => Ok(()),
        Err(e) => Err(e),
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        // Nothing is persisted, so there is nothing to flush: stop it at once.
        self.child.kill();
    }
}
