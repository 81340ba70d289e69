//! The simulator's model of a worker's link, as `backend/proxy.rs` makes it on real
//! servers: a call's reply reaches the worker the link's delay late (on the virtual
//! clock), and a cut link fails every call at once, a call whose reply is still on its
//! way included (the server has acted; the worker never hears of it).
//!
//! Each call is one round trip here. On a real server a call of several round trips
//! (the two-step acquire: `SET`, then `INCR`) is late once per round trip; the lessons
//! use calls of one.

use std::future::Future;

use tokio::time::{Instant, sleep_until};

use crate::backend::link::LinkCondition;
use crate::backend::sql::{SqlOp, SqlReply};
use crate::backend::{
    AcquireReply, BackendError, LockClient, LockTruth, StorageClient, StorageTruth, StoredWrite,
    WorkerLink, WriteCheck, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// A simulated client whose calls travel over a worker's link.
pub struct Linked<C> {
    inner: C,
    link: WorkerLink,
}

impl<C> Linked<C> {
    pub fn new(inner: C, link: WorkerLink) -> Self {
        Linked { inner, link }
    }
}

/// What a real client reports when the proxy closes its connection.
fn cut() -> BackendError {
    BackendError::Lost { service: "Redis", message: "the link is cut (partition)".into() }
}

/// Send `call` over `link`: refused at once on a cut link; else done on the server at
/// once, its reply delivered when due unless the link is cut meanwhile.
async fn carry<T>(
    link: &WorkerLink,
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let mut condition = link.condition();
    if *condition.borrow() == LinkCondition::Cut {
        return Err(cut());
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
                    return Err(cut());
                }
            }
        }
    }
}

#[async_trait]
impl LockClient for Linked<Box<dyn LockClient>> {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
        tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        carry(&self.link, self.inner.acquire(value, ttl_ms, mode, tokens)).await
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        carry(&self.link, self.inner.release(value, mode)).await
    }

    async fn release_announcing(
        &mut self,
        value: &str,
        mode: ReleaseMode,
    ) -> Result<bool, BackendError> {
        carry(&self.link, self.inner.release_announcing(value, mode)).await
    }

    async fn listen_for_releases(&mut self) -> Result<bool, BackendError> {
        carry(&self.link, self.inner.listen_for_releases()).await
    }

    /// A message pushed to the subscriber: as late as any reply on this link.
    async fn next_release(&mut self) -> Result<(), BackendError> {
        carry(&self.link, self.inner.next_release()).await
    }

    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        carry(&self.link, self.inner.renew(value, ttl_ms, mode)).await
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        carry(&self.link, self.inner.holder()).await
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        carry(&self.link, self.inner.observe()).await
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        carry(&self.link, self.inner.cleanup()).await
    }
}

#[async_trait]
impl StorageClient for Linked<Box<dyn StorageClient>> {
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError> {
        carry(&self.link, self.inner.write(write, check)).await
    }

    async fn next_token(&mut self) -> Result<u64, BackendError> {
        carry(&self.link, self.inner.next_token()).await
    }

    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        carry(&self.link, self.inner.read_all()).await
    }

    async fn observe(&mut self) -> Result<StorageTruth, BackendError> {
        carry(&self.link, self.inner.observe()).await
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        carry(&self.link, self.inner.cleanup()).await
    }

    async fn sql(&mut self, worker: &str, op: &SqlOp) -> Result<SqlReply, BackendError> {
        carry(&self.link, self.inner.sql(worker, op)).await
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
