//! Redlock's nodes on real private `redis-server`s, one per node.

use std::sync::Mutex;
use std::time::Duration;

use super::{PrivateRedis, REDIS, ServerError};
use crate::backend::lock::redlock::{NodeSet, nodes_take};
use crate::backend::node::NodeHealth;
use crate::backend::redis::{RedisBackend, RedisClient};
use crate::backend::{BackendError, FaultKind, Keys, WorkerLink};

/// Real private `redis-server`s, one per node.
pub struct RedisNodes {
    servers: Mutex<Vec<PrivateRedis>>,
    backends: Vec<RedisBackend>,
    health: NodeHealth,
}

impl RedisNodes {
    /// Start `count` private servers; returns them with how long starting took.
    pub fn start(count: usize) -> Result<(Self, Duration), ServerError> {
        let started = std::time::Instant::now();
        let servers = (0..count).map(|_| PrivateRedis::start()).collect::<Result<Vec<_>, _>>()?;
        let backends = servers
            .iter()
            .enumerate()
            .map(|(i, s)| RedisBackend::open(&s.url(), &format!("node {}", i + 1)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ServerError::setup(REDIS, e))?;
        let nodes =
            RedisNodes { servers: Mutex::new(servers), backends, health: NodeHealth::new(count) };
        Ok((nodes, started.elapsed()))
    }
}

impl NodeSet for RedisNodes {
    type Node = RedisClient;

    fn count(&self) -> usize {
        self.backends.len()
    }

    async fn connect(
        &self,
        node: usize,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<RedisClient, BackendError> {
        match link {
            Some(link) => self.backends[node].connect_via(keys, link).await,
            None => self.backends[node].connect(keys).await,
        }
    }

    async fn fault(&self, node: usize, kind: FaultKind) -> Result<(), BackendError> {
        // Restarting waits (a few ms) for the server to answer; let the other tasks
        // of this runtime move to another thread meanwhile.
        tokio::task::block_in_place(|| {
            let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
            let server = servers.get_mut(node).ok_or_else(|| {
                BackendError::Unsupported(format!("there is no node {}", node + 1))
            })?;
            nodes_take(kind)?;
            if kind == FaultKind::Kill {
                server.kill();
            } else {
                server.restart().map_err(|e| BackendError::redis(e.to_string()))?;
            }
            self.health.record(node, kind);
            Ok(())
        })
    }

    fn describe(&self) -> String {
        format!("Redlock over {} private redis-servers", self.backends.len())
    }

    fn health(&self, node: usize) -> (bool, u64) {
        self.health.get(node)
    }

    fn url_for_programs(&self, node: usize) -> Option<String> {
        self.backends.get(node).map(RedisBackend::url_for_workers)
    }

    fn exited(&self, node: usize) -> bool {
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers.get_mut(node).is_some_and(PrivateRedis::exited)
    }
}
