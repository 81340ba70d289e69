//! The failover pair on real private `redis-server`s: a primary and its replica.

use std::sync::Mutex;
use std::time::Duration;

use super::{PrivateRedis, REDIS, ServerError, free_port};
use crate::backend::lock::failover::{Pair, PairState, pair_takes};
use crate::backend::node::LockNode;
use crate::backend::redis::{RedisBackend, RedisClient};
use crate::backend::{BackendError, FaultKind, Keys};

/// A real primary (on a loopback port, which replication needs) and its replica.
pub struct RedisPair {
    servers: Mutex<Vec<PrivateRedis>>,
    backends: [RedisBackend; 2],
    state: PairState,
    /// The primary's loopback port, which the replica follows.
    port: String,
}

/// One command on a fresh synchronous connection (faults are rare and must be done
/// before the run goes on).
fn run(url: &str, cmd: &mut redis::Cmd) -> Result<(), BackendError> {
    let failed = |e: redis::RedisError| BackendError::redis(e.to_string());
    let mut con = redis::Client::open(url).map_err(failed)?.get_connection().map_err(failed)?;
    cmd.query::<()>(&mut con).map_err(failed)
}

impl RedisPair {
    /// Start the primary and a replica of it, and wait until the replica is in sync.
    pub fn start() -> Result<Self, ServerError> {
        let port = free_port(REDIS)?.to_string();
        // No delay before the first sync: the replica is in step within milliseconds.
        let primary = PrivateRedis::start_with(&[
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--repl-diskless-sync-delay",
            "0",
        ])?;
        let replica = PrivateRedis::start_with(&["--replicaof", "127.0.0.1", &port])?;
        wait_in_sync(&replica.url())?;
        let open = |s: &PrivateRedis, label| {
            RedisBackend::open(&s.url(), label).map_err(|e| ServerError::setup(REDIS, e))
        };
        let backends = [open(&primary, "primary")?, open(&replica, "replica")?];
        Ok(RedisPair {
            servers: Mutex::new(vec![primary, replica]),
            backends,
            state: PairState::default(),
            port,
        })
    }

    fn url(&self, node: usize) -> Result<String, BackendError> {
        let servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers
            .get(node)
            .map(PrivateRedis::url)
            .ok_or_else(|| BackendError::Unsupported(format!("no node {}", node + 1)))
    }
}

/// Wait until the replica reports its link to the primary up.
fn wait_in_sync(url: &str) -> Result<(), ServerError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let failed = |e: redis::RedisError| ServerError::setup(REDIS, e);
    let mut con = redis::Client::open(url).map_err(failed)?.get_connection().map_err(failed)?;
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut con).map_err(failed)?;
        if info.contains("master_link_status:up") {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            let waited = Duration::from_secs(10);
            let output = "the replica never reported its link to the primary up".into();
            return Err(ServerError::Slow { program: REDIS.name, waited, output });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Pair for RedisPair {
    type Node = RedisClient;

    async fn connect(&self, node: usize, keys: &Keys) -> Result<RedisClient, BackendError> {
        RedisBackend::connect(&self.backends[node], keys).await
    }

    async fn fault(&self, node: usize, kind: FaultKind) -> Result<(), BackendError> {
        pair_takes(kind)?;
        let url = self.url(node)?;
        // Killing waits for the process (and its guard) to end, and the other faults
        // wait for the server's answer: let this runtime's other tasks move to another
        // thread meanwhile. (On the runtime's own thread, one kill on a loaded machine
        // took 3.7 s and held every timer of the runtime as long.)
        tokio::task::block_in_place(|| {
            if kind == FaultKind::Kill {
                let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
                servers[node].kill();
                Ok(())
            } else {
                // Detach or promote: the same command; what differs is whether clients
                // follow (the state records a promotion).
                run(&url, redis::cmd("REPLICAOF").arg("NO").arg("ONE"))
            }
        })?;
        self.state.record(node, kind);
        Ok(())
    }

    /// Restart a killed server (or one whose process has gone) on its port and make
    /// node 2 the primary's replica again.
    async fn reset(&self) -> Result<(), BackendError> {
        tokio::task::block_in_place(|| {
            let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
            for (node, server) in servers.iter_mut().enumerate() {
                if !self.state.up(node) || server.exited() {
                    server.restart().map_err(|e| BackendError::redis(e.to_string()))?;
                }
            }
            run(&servers[1].url(), redis::cmd("REPLICAOF").arg("127.0.0.1").arg(&self.port))?;
            wait_in_sync(&servers[1].url()).map_err(|e| BackendError::redis(e.to_string()))
        })?;
        self.state.reset();
        Ok(())
    }

    fn describe(&self) -> String {
        "private redis-server primary + replica".to_string()
    }

    async fn wait_replicas(
        &self,
        node: &mut RedisClient,
        replicas: u64,
        timeout_ms: u64,
    ) -> Result<u64, BackendError> {
        LockNode::wait_replicas(node, replicas, timeout_ms).await
    }

    fn state(&self) -> &PairState {
        &self.state
    }
}
