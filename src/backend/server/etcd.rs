//! A private single-member etcd on two free loopback ports (clients and peers), its
//! data in a temp dir in memory. It is tuned for a teaching machine, not for production: a
//! 10 ms heartbeat lets it grant leases as short as one second.

use std::process::Command;
use std::time::Duration;

use crate::platform::Signal;

use super::{
    ETCD, START_TIMEOUT, ServerError, ServerProcess, find, free_port, memory_dir, on_free_ports,
    spawn, stop, wait_until_ready,
};

pub struct PrivateEtcd {
    child: ServerProcess,
    port: u16,
    dir: tempfile::TempDir,
}

impl PrivateEtcd {
    pub fn start() -> Result<Self, ServerError> {
        on_free_ports(|| Self::start_on(free_port(ETCD)?, START_TIMEOUT))
    }

    /// Start on a given client port, giving up after `within`.
    pub fn start_on(port: u16, within: Duration) -> Result<Self, ServerError> {
        // etcd syncs its log to disk on every write: in memory, a lease grant takes a
        // millisecond even while the disk is busy.
        let dir = memory_dir(ETCD)?;
        let peer = format!("http://127.0.0.1:{}", free_port(ETCD)?);
        let client = format!("http://127.0.0.1:{port}");
        let log = dir.path().join("etcd.log");
        let mut cmd = Command::new(find(ETCD)?);
        cmd.arg("--name=fencelab")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=fencelab={peer}"))
            .args(["--heartbeat-interval=10", "--election-timeout=50", "--logger=zap"])
            .arg("--log-outputs=stderr");
        let mut child = spawn(ETCD, cmd, Some(&log))?;
        let ready =
            || std::fs::read_to_string(&log).is_ok_and(|l| l.contains("serving client traffic"));
        wait_until_ready(ETCD, &mut child, &log, Some(port), within, ready)?;
        Ok(PrivateEtcd { child, port, dir })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for PrivateEtcd {
    fn drop(&mut self) {
        stop(&mut self.child, Signal::Term);
    }
}
