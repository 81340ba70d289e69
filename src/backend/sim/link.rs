//! The simulator's model of a worker's link, as `backend/proxy.rs` makes it on real
//! servers: a call's reply reaches the worker the link's delay late (on the virtual
//! clock), and a cut link fails every call at once, a call whose reply is still on its
//! way included (the server has acted; the worker never hears of it).
//!
//! Each call is one round trip here. The link sits where the real one does, under the
//! calls that are one round trip on a real server: a Redis command, a Redlock node's
//! command (so a delay longer than Redlock's node timeout makes every node a "no", on
//! both), one HTTP request to etcd, one SQL statement. A call of several round trips
//! on a real server (the two-step acquire: `SET`, then `INCR`; a lesson's SQL step and
//! its history row) is late once per round trip; the scenarios with link faults use
//! calls of one.

use std::future::Future;

use tokio::time::{Instant, sleep_until};

use crate::backend::etcd::{KeyState, LeaseKv};
use crate::backend::link::LinkCondition;
use crate::backend::node::LockNode;
use crate::backend::sql::{SqlOp, SqlReply};
use crate::backend::{
    AcquireReply, BackendError, LockClient, LockTruth, StorageClient, StorageTruth, StoredWrite,
    WorkerLink, WriteCheck, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// A simulated client whose calls travel over a worker's link, or (no link) go
/// straight to the model: one type for both, so a lock made of several clients
/// (Redlock's nodes) holds either kind.
pub struct Linked<C> {
    inner: C,
    link: Option<WorkerLink>,
    /// The server the client speaks to, as a real client's errors name it.
    service: &'static str,
}

impl<C> Linked<C> {
    /// `inner`'s calls over `link`; `service` names the server in a cut call's error.
    pub fn new(inner: C, link: Option<WorkerLink>, service: &'static str) -> Self {
        Linked { inner, link, service }
    }

    /// Send `call` over the link (if any): see [`carry`].
    async fn carry<T>(
        link: Option<&WorkerLink>,
        service: &'static str,
        call: impl Future<Output = Result<T, BackendError>>,
    ) -> Result<T, BackendError> {
        match link {
            Some(link) => carry(link, service, call).await,
            None => call.await,
        }
    }
}

/// What a real client reports when the proxy closes its connection.
fn cut(service: &'static str) -> BackendError {
    BackendError::Lost { service, message: "the link is cut (partition)".into() }
}

/// Send `call` over `link`: refused at once on a cut link; else done on the server at
/// once, its reply delivered when due unless the link is cut meanwhile.
async fn carry<T>(
    link: &WorkerLink,
    service: &'static str,
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let mut condition = link.condition();
    if *condition.borrow() == LinkCondition::Cut {
        return Err(cut(service));
    }
    // An error is a reply too: it is as late as any other.
    let reply = call.await;
    let due = Instant::now() + condition.borrow().delay();
    loop {
        tokio::select! {
            () = sleep_until(due) => return reply,
            changed = condition.changed() => {
                if changed.is_err() {
                    sleep_until(due).await;
                    return reply;
                }
                if *condition.borrow() == LinkCondition::Cut {
                    return Err(cut(service));
                }
            }
        }
    }
}

/// One call of the inner client, over the link: `over!(self, method(args))`.
macro_rules! over {
    ($self:ident, $call:ident ( $($arg:expr),* )) => {
        Self::carry($self.link.as_ref(), $self.service, $self.inner.$call($($arg),*)).await
    };
}

#[async_trait]
impl<C: LockClient> LockClient for Linked<C> {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
        tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        over!(self, acquire(value, ttl_ms, mode, tokens))
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        over!(self, release(value, mode))
    }

    async fn release_announcing(
        &mut self,
        value: &str,
        mode: ReleaseMode,
    ) -> Result<bool, BackendError> {
        over!(self, release_announcing(value, mode))
    }

    async fn listen_for_releases(&mut self) -> Result<bool, BackendError> {
        over!(self, listen_for_releases())
    }

    /// A message pushed to the subscriber: as late as any reply on this link.
    async fn next_release(&mut self) -> Result<(), BackendError> {
        over!(self, next_release())
    }

    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        over!(self, renew(value, ttl_ms, mode))
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        over!(self, holder())
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        over!(self, observe())
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        over!(self, cleanup())
    }
}

/// A Redlock node's calls: each one round trip, as on a real node.
#[async_trait]
impl<C: LockNode> LockNode for Linked<C> {
    async fn set_nx(&mut self, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        over!(self, set_nx(value, ttl_ms))
    }

    async fn pttl(&mut self) -> Result<i64, BackendError> {
        over!(self, pttl())
    }

    async fn jump_clock(&mut self, ms: u64) -> Result<u64, BackendError> {
        over!(self, jump_clock(ms))
    }
}

#[async_trait]
impl<C: StorageClient> StorageClient for Linked<C> {
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError> {
        over!(self, write(write, check))
    }

    async fn next_token(&mut self) -> Result<u64, BackendError> {
        over!(self, next_token())
    }

    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        over!(self, read_all())
    }

    async fn observe(&mut self) -> Result<StorageTruth, BackendError> {
        over!(self, observe())
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        over!(self, cleanup())
    }

    async fn sql(&mut self, worker: &str, op: &SqlOp) -> Result<SqlReply, BackendError> {
        over!(self, sql(worker, op))
    }
}

/// etcd's calls: each one HTTP request and its answer, as through the real gateway.
impl<K: LeaseKv> LeaseKv for Linked<K> {
    const WHOLE_SECONDS: bool = K::WHOLE_SECONDS;

    async fn grant(&mut self, ttl_s: i64) -> Result<i64, BackendError> {
        over!(self, grant(ttl_s))
    }

    async fn put_if(
        &mut self,
        key: &str,
        value: &str,
        lease: i64,
        mod_revision: i64,
    ) -> Result<Option<i64>, BackendError> {
        over!(self, put_if(key, value, lease, mod_revision))
    }

    async fn put(&mut self, key: &str, value: &str, lease: i64) -> Result<i64, BackendError> {
        over!(self, put(key, value, lease))
    }

    async fn get(&mut self, key: &str) -> Result<Option<KeyState>, BackendError> {
        over!(self, get(key))
    }

    async fn delete(&mut self, key: &str, if_value: Option<&str>) -> Result<bool, BackendError> {
        over!(self, delete(key, if_value))
    }

    async fn keep_alive(&mut self, lease: i64) -> Result<bool, BackendError> {
        over!(self, keep_alive(lease))
    }

    async fn revoke(&mut self, lease: i64) -> Result<(), BackendError> {
        over!(self, revoke(lease))
    }

    async fn time_to_live_ms(&mut self, lease: i64) -> Result<Option<u64>, BackendError> {
        over!(self, time_to_live_ms(lease))
    }

    async fn revision(&mut self) -> Result<i64, BackendError> {
        over!(self, revision())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use crate::backend::link::Links;
    use crate::backend::sim::SimBackend;
    use crate::backend::{AcquireReply, BackendError, Keys, LockService};
    use crate::scenario::{AcquireMode, Fault, FaultKind};

    #[tokio::test(start_paused = true)]
    async fn a_reply_arrives_the_delay_late_and_a_cut_link_fails_at_once() {
        let sim = SimBackend::default();
        let keys = Keys::for_run("t");
        let fault = Fault {
            at_ms: 0,
            node: None,
            worker: Some("A".into()),
            ms: None,
            kind: FaultKind::Partition,
            on: None,
        };
        let links = Links::new(&[fault], Duration::from_millis, &CancellationToken::new());
        let link = links.of("A").unwrap();
        let mut a = LockService::connect_via(&sim, &keys, link).await.unwrap();
        let mut direct = LockService::connect(&sim, &keys).await.unwrap();

        links.apply("A", FaultKind::Delay, Duration::from_millis(2500));
        let asked = tokio::time::Instant::now();
        let reply = a.acquire("A:1", 2000, AcquireMode::Script, None).await.unwrap();
        assert_eq!(reply, AcquireReply::Granted { token: 1 });
        assert_eq!(asked.elapsed(), Duration::from_millis(2500), "the reply is exactly that late");
        assert_eq!(direct.holder().await.unwrap(), None, "granted at once, so expired by now");

        links.apply("A", FaultKind::Partition, Duration::ZERO);
        let asked = tokio::time::Instant::now();
        assert!(matches!(a.holder().await, Err(BackendError::Lost { .. })));
        assert_eq!(asked.elapsed(), Duration::ZERO, "a cut link fails at once");

        links.apply("A", FaultKind::Heal, Duration::ZERO);
        assert_eq!(a.holder().await.unwrap(), None);
        links.close().await;
    }
}
