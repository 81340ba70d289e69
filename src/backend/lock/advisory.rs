//! A PostgreSQL session advisory lock (`lock = "advisory"`): `pg_try_advisory_lock`
//! on a session of the worker's own, held until `pg_advisory_unlock` or until the
//! session ends. Without `ttl_ms` nothing ends it but its connection: a paused holder
//! keeps the lock for as long as it sleeps, and every waiter waits (the opposite
//! failure of a lease, availability instead of safety). With `ttl_ms` the session runs
//! with `idle_session_timeout`: the server ends it after that long without a
//! statement, and the lock with it. Then it is a lease (any statement renews it), and
//! a paused holder's write after it is as stale as anywhere.
//!
//! No token of its own: tokens come from the storage's counter, as Redlock's do. The
//! holder is named by its session's `application_name` (each grant sets it to the
//! worker's lock value), else its backend pid (a program's session). The lock's id is
//! [`lock_id`] of the run's key: `FENCELAB_KEY` for a program.
//!
//! Written once over [`Sessions`]: a real PostgreSQL (`advisory/real.rs`) or the
//! simulator's model (`sim/advisory.rs`).

use crate::backend::advisory::{Session, Sessions, lock_id};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, ProgramServer,
    StorageClient, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// The advisory lock over `S`'s sessions.
pub struct AdvisoryBackend<S> {
    sessions: S,
}

impl<S: Sessions> AdvisoryBackend<S> {
    pub fn new(sessions: S) -> Self {
        AdvisoryBackend { sessions }
    }
}

/// The lock's id for a run's keys: the key a program named, when it is an id, else
/// the one made from the run's key.
fn id_of(keys: &Keys) -> i64 {
    keys.lock.parse().unwrap_or_else(|_| lock_id(&keys.lock))
}

#[async_trait]
impl<S: Sessions> LockService for AdvisoryBackend<S> {
    /// A session of the worker's own, ended by the server after the run's lease idle.
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&crate::backend::WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        crate::backend::refuse_link(link)?;
        let session = self.sessions.open(keys.lease_ms).await?;
        Ok(Box::new(AdvisoryClient { session, id: id_of(keys), lease_ms: keys.lease_ms }))
    }

    fn describe(&self) -> String {
        self.sessions.describe()
    }

    fn servers_for_programs(&self) -> Result<Vec<ProgramServer>, BackendError> {
        Ok(self.sessions.program_server().into_iter().collect())
    }

    /// The lock's id, which a program's library takes (`pg_try_advisory_lock(id)`).
    fn lock_name(&self, keys: &Keys) -> String {
        id_of(keys).to_string()
    }
}

/// One worker's session and the lock's id.
pub struct AdvisoryClient<T> {
    session: T,
    id: i64,
    /// The session's idle timeout, real ms (0: none).
    lease_ms: u64,
}

impl<T: Session> AdvisoryClient<T> {
    /// What is left of the holder's idle timeout, in ms: the whole of it while it runs
    /// a statement; None with no timeout (or no holder).
    fn left(&self, idle_ms: Option<f64>) -> Option<u64> {
        if self.lease_ms == 0 {
            return None;
        }
        let idle = idle_ms.unwrap_or(0.0);
        Some((self.lease_ms as f64 - idle).max(0.0).round() as u64)
    }
}

#[async_trait]
impl<T: Session> LockClient for AdvisoryClient<T> {
    /// `pg_try_advisory_lock`, the session named by `value`; the token from the
    /// storage's counter. Its lease was fixed when the session opened (`ttl_ms` is not
    /// sent), and `mode` (Redis's one or two round trips) does not apply.
    async fn acquire(
        &mut self,
        value: &str,
        _ttl_ms: u64,
        _mode: AcquireMode,
        tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        if self.session.try_lock(self.id, value).await? {
            let token = match tokens {
                Some(storage) => storage.next_token().await?,
                None => 0,
            };
            return Ok(AcquireReply::Granted { token });
        }
        let holder = self.session.holder(self.id).await?;
        Ok(AcquireReply::Busy { pttl_ms: holder.and_then(|h| self.left(h.idle_ms)) })
    }

    /// `pg_advisory_unlock`: only ever this session's own lock, whatever the mode.
    async fn release(&mut self, _value: &str, _mode: ReleaseMode) -> Result<bool, BackendError> {
        self.session.unlock(self.id).await
    }

    /// A statement on the session (it is no longer idle): whether it still holds the
    /// lock. `RenewMode::Set` takes it again blindly: here that is another try.
    async fn renew(
        &mut self,
        value: &str,
        _ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        match mode {
            RenewMode::Set => self.session.try_lock(self.id, value).await,
            _ => self.session.still_holds(self.id).await,
        }
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        Ok(self.session.holder(self.id).await?.map(|h| h.name))
    }

    /// The holding session, and what is left of its idle timeout. The counter is the
    /// storage's, read there.
    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let holder = self.session.holder(self.id).await?;
        Ok(LockTruth {
            pttl_ms: holder.as_ref().and_then(|h| self.left(h.idle_ms)),
            holder_value: holder.map(|h| h.name),
            counter: None,
            nodes: Vec::new(),
        })
    }

    /// A session's lock goes with its session: nothing is left on the server.
    async fn cleanup(&mut self) -> Result<(), BackendError> {
        self.session.unlock(self.id).await.map(|_| ())
    }
}
