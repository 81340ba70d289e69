//! The simulator's model of a worker's link, as `backend/proxy.rs` makes it on real
//! servers: a call's reply reaches the worker the link's delay late (on the virtual
//! clock), and a cut link fails every call at once, a call whose reply is still on its
//! way included (the server has acted; the worker never hears of it).

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
    let reply = call.await?;
    let due = Instant::now() + condition.borrow().delay();
    loop {
        tokio::select! {
            () = sleep_until(due) => return Ok(reply),
            changed = condition.changed() => {
                if changed.is_err() {
                    sleep_until(due).await;
                    return Ok(reply);
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
        tokens: &mut dyn StorageClient,
    ) -> Result<AcquireReply, BackendError> {
        carry(&self.link, self.inner.acquire(value, ttl_ms, mode, tokens)).await
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        carry(&self.link, self.inner.release(value, mode)).await
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
    ) -> Result<bool, BackendError> {
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
