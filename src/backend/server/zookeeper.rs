//! A private single-server ZooKeeper (Debian's or Homebrew's `zookeeper`, a Java program)
//! on a free loopback port, its data in a temp dir in memory.
//!
//! It is started as `java ... ZooKeeperServerMain`, not through `zkServer.sh`: the JVM is
//! then our own child, so the parent-death signal and `Drop`'s signal reach the process
//! that holds the port (a wrapper shell would die and leave the JVM running). The tick
//! is 100 ms because ZooKeeper grants sessions of 2 to 20 ticks: a lesson's lease of a
//! second or less is then a real session timeout, not one the server stretched.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{
    START_TIMEOUT, ServerError, ServerProcess, ZOOKEEPER, free_port, memory_dir, on_free_ports,
    spawn, stop, wait_until_ready,
};
use crate::platform::Signal;

/// ZooKeeper's unit of time; sessions may last 2 to 20 ticks (0.2 s to 2 s).
const TICK_MS: u32 = 100;

/// How long one readiness probe may take: a JVM still starting refuses at once.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);

pub struct PrivateZooKeeper {
    child: ServerProcess,
    port: u16,
    dir: tempfile::TempDir,
}

impl PrivateZooKeeper {
    pub fn start() -> Result<Self, ServerError> {
        on_free_ports(|| Self::start_on(free_port(ZOOKEEPER)?, START_TIMEOUT))
    }

    /// Start on a given client port, giving up after `within`.
    pub fn start_on(port: u16, within: Duration) -> Result<Self, ServerError> {
        let jars = crate::platform::zookeeper().ok_or(ServerError::NotInstalled(ZOOKEEPER))?;
        // No Java is the package missing too: Debian's and Homebrew's `zookeeper`
        // depend on one.
        let java = crate::platform::java().ok_or(ServerError::NotInstalled(ZOOKEEPER))?;
        let dir = memory_dir(ZOOKEEPER)?;
        let log = dir.path().join("zookeeper.log");
        let mut cmd = Command::new(java);
        cmd.args(["-Xms16m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg("-cp")
            .arg(&jars.classpath)
            .args(&jars.jvm_args)
            // The admin web server would take port 8080; `ruok` is the readiness probe.
            .arg("-Dzookeeper.admin.enableServer=false")
            .arg("-Dzookeeper.4lw.commands.whitelist=ruok")
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(port.to_string())
            .arg(dir.path().join("data"))
            .arg(TICK_MS.to_string());
        let mut child = spawn(ZOOKEEPER, cmd, Some(&log))?;
        wait_until_ready(ZOOKEEPER, &mut child, &log, Some(port), within, || answers(port))?;
        Ok(PrivateZooKeeper { child, port, dir })
    }

    /// `127.0.0.1:PORT`, the form ZooKeeper clients take.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether the server says `imok` to the `ruok` four-letter command.
fn answers(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) else { return false };
    let mut reply = String::new();
    stream.set_read_timeout(Some(PROBE_TIMEOUT)).is_ok()
        && stream.write_all(b"ruok").is_ok()
        && stream.read_to_string(&mut reply).is_ok()
        && reply == "imok"
}

impl Drop for PrivateZooKeeper {
    fn drop(&mut self) {
        stop(&mut self.child, Signal::Term);
    }
}
