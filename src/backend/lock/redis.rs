//! The lock on one Redis: `SET NX PX` and `INCR` (one Lua script, or two commands),
//! compare-and-delete, renew-if-owner. The same connection is also one Redlock node.

use redis::AsyncCommands;

use crate::backend::node::LockNode;
use crate::backend::redis::{RedisBackend, RedisClient, TIMEOUT, keeping, lost};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, StorageClient,
    WorkerLink, async_trait, scripts,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

#[async_trait]
impl LockService for RedisBackend {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        Ok(Box::new(match link {
            None => RedisBackend::connect(self, keys).await?,
            Some(link) => RedisBackend::connect_via(self, keys, link).await?,
        }))
    }

    fn describe(&self) -> String {
        RedisBackend::describe(self)
    }

    fn redis_url_for_workers(&self) -> Option<String> {
        Some(self.url_for_workers())
    }
}

#[async_trait]
impl LockClient for RedisClient {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let k = &self.keys;
        match mode {
            AcquireMode::Script => {
                let mut invocation = scripts::ACQUIRE.key(&k.lock);
                invocation.key(&k.fence).arg(value).arg(ttl_ms);
                let call = |p: &mut redis::Pipeline| {
                    p.invoke_script(&invocation);
                };
                let (granted, n): (i64, i64) =
                    keeping(&mut self.con, call, Some(&scripts::ACQUIRE), &[&k.fence], k.expire_ms)
                        .await
                        .map_err(lost)?;
                Ok(if granted == 1 {
                    AcquireReply::Granted { token: n as u64 }
                } else {
                    AcquireReply::from_pttl(n)
                })
            }
            AcquireMode::TwoStep => {
                let mut set = redis::cmd("SET");
                set.arg(&k.lock).arg(value).arg("NX");
                if ttl_ms > 0 {
                    set.arg("PX").arg(ttl_ms);
                }
                let ok: Option<String> = set.query_async(&mut self.con).await.map_err(lost)?;
                if ok.is_some() {
                    let incr = |p: &mut redis::Pipeline| {
                        p.incr(&k.fence, 1);
                    };
                    let token: u64 = keeping(&mut self.con, incr, None, &[&k.fence], k.expire_ms)
                        .await
                        .map_err(lost)?;
                    Ok(AcquireReply::Granted { token })
                } else {
                    let pttl: i64 = self.con.pttl(&k.lock).await.map_err(lost)?;
                    Ok(AcquireReply::from_pttl(pttl))
                }
            }
        }
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        let deleted: i64 = match mode {
            ReleaseMode::CompareAndDelete => scripts::RELEASE
                .key(&self.keys.lock)
                .arg(value)
                .invoke_async(&mut self.con)
                .await
                .map_err(lost)?,
            ReleaseMode::Del => self.con.del(&self.keys.lock).await.map_err(lost)?,
        };
        Ok(deleted == 1)
    }

    async fn release_announcing(
        &mut self,
        value: &str,
        mode: ReleaseMode,
    ) -> Result<bool, BackendError> {
        if mode == ReleaseMode::Del {
            return self.release(value, mode).await;
        }
        let deleted: i64 = scripts::RELEASE_NOTIFY
            .key(&self.keys.lock)
            .arg(value)
            .arg(&self.keys.released)
            .invoke_async(&mut self.con)
            .await
            .map_err(lost)?;
        Ok(deleted == 1)
    }

    /// A connection of its own (a subscribed one can send nothing else), opened and
    /// subscribed within the usual deadline. Why not keyspace notifications for the
    /// expiry too: they need `CONFIG SET notify-keyspace-events`, a change to the
    /// server's config that fencelab never makes on a user's Redis; and the waiter
    /// knows the lease's end already (the acquire reply's `PTTL`), so it sets a timer.
    async fn listen_for_releases(&mut self) -> Result<bool, BackendError> {
        if self.releases.is_some() {
            return Ok(true);
        }
        let subscribe = async {
            let mut pubsub = self.subscriber.get_async_pubsub().await?;
            pubsub.subscribe(&self.keys.released).await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        let stream = tokio::time::timeout(TIMEOUT, subscribe)
            .await
            .map_err(|_| BackendError::Lost {
                service: "Redis",
                message: format!("SUBSCRIBE took more than {} s", TIMEOUT.as_secs()),
            })?
            .map_err(lost)?;
        self.releases = Some(stream);
        Ok(true)
    }

    /// A closed subscriber connection (the server or the link gone) is an error, as
    /// any lost connection is; the waiter's TTL timer does not depend on it.
    async fn next_release(&mut self) -> Result<(), BackendError> {
        use futures_util::StreamExt;
        let Some(stream) = &mut self.releases else { return std::future::pending().await };
        match stream.next().await {
            Some(_) => Ok(()),
            None => {
                self.releases = None;
                Err(BackendError::Lost {
                    service: "Redis",
                    message: "the release channel's connection closed".into(),
                })
            }
        }
    }

    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        if mode == RenewMode::Set {
            let _: () = redis::cmd("SET")
                .arg(&self.keys.lock)
                .arg(value)
                .arg("PX")
                .arg(ttl_ms.max(1))
                .query_async(&mut self.con)
                .await
                .map_err(lost)?;
            return Ok(true);
        }
        let extended: i64 = scripts::RENEW
            .key(&self.keys.lock)
            .arg(value)
            .arg(ttl_ms)
            .invoke_async(&mut self.con)
            .await
            .map_err(lost)?;
        Ok(extended == 1)
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        self.con.get(&self.keys.lock).await.map_err(lost)
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let k = &self.keys;
        let (holder_value, pttl, counter): (Option<String>, i64, Option<u64>) = redis::pipe()
            .get(&k.lock)
            .pttl(&k.lock)
            .get(&k.fence)
            .query_async(&mut self.con)
            .await
            .map_err(lost)?;
        Ok(LockTruth {
            holder_value,
            pttl_ms: u64::try_from(pttl).ok(),
            counter,
            nodes: Vec::new(),
        })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        // Exactly the run's own keys, by name: no KEYS or SCAN over the user's data.
        let _: i64 = self.con.del(&self.keys.all()[..]).await.map_err(lost)?;
        Ok(())
    }
}

#[async_trait]
impl LockNode for RedisClient {
    async fn set_nx(&mut self, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        let mut set = redis::cmd("SET");
        set.arg(&self.keys.lock).arg(value).arg("NX");
        if ttl_ms > 0 {
            set.arg("PX").arg(ttl_ms);
        }
        let ok: Option<String> = set.query_async(&mut self.con).await.map_err(lost)?;
        Ok(ok.is_some())
    }

    async fn pttl(&mut self) -> Result<i64, BackendError> {
        self.con.pttl(&self.keys.lock).await.map_err(lost)
    }

    /// One script over the run's keys by name, so the jump is atomic on this server
    /// and touches nothing outside the run's prefix.
    async fn jump_clock(&mut self, ms: u64) -> Result<u64, BackendError> {
        let mut invocation = scripts::CLOCK_JUMP.prepare_invoke();
        for key in self.keys.all() {
            invocation.key(key);
        }
        invocation.arg(ms).invoke_async(&mut self.con).await.map_err(lost)
    }

    /// `WAIT replicas timeout_ms` on this client's own connection, so it counts this
    /// client's writes.
    async fn wait_replicas(&mut self, replicas: u64, timeout_ms: u64) -> Result<u64, BackendError> {
        redis::cmd("WAIT")
            .arg(replicas)
            .arg(timeout_ms)
            .query_async(&mut self.con)
            .await
            .map_err(lost)
    }
}
