//! One server of a lock service made of several (Redlock's nodes, a primary and its
//! replica), as the algorithms over them use it.

use super::{BackendError, async_trait};
use crate::scenario::{ReleaseMode, RenewMode};

/// One Redis server as Redlock and the failover pair use it: plain `SET NX PX` (such
/// locks take no token per server), `GET`, `PTTL`, and the single-server scripts.
#[async_trait]
pub trait LockNode: Send {
    async fn set_nx(&mut self, value: &str, ttl_ms: u64) -> Result<bool, BackendError>;
    async fn pttl(&mut self) -> Result<i64, BackendError>;
    async fn get(&mut self) -> Result<Option<String>, BackendError>;
    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError>;
    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError>;
    /// Delete this run's keys on the node.
    async fn cleanup(&mut self) -> Result<(), BackendError>;
    /// `WAIT replicas timeout_ms` on this connection: real servers only (the simulated
    /// pair answers from its own model).
    async fn wait_replicas(&mut self, replicas: u64, timeout_ms: u64) -> Result<u64, BackendError> {
        let _ = (replicas, timeout_ms);
        Err(BackendError::Unsupported("this node has no replica to wait for".into()))
    }
}
