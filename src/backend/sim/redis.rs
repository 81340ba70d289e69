//! The built-in simulator: a model of the few Redis commands the lesson needs.
//!
//! It is a model, not a mock: it keeps keys, values and expiry deadlines and applies
//! Redis's rules (`SET NX PX`, lazy expiry, `INCR`, compare-and-delete, the fenced
//! write) to them. Its clock is tokio's: run it on a runtime with paused time and
//! every sleep and every expiry happens in virtual time, so the same scenario gives
//! the same outcomes on every machine, instantly. The differential test runs each
//! scenario here and on a real `redis-server` and compares the outcomes.
//!
//! Each client method takes the one lock on the database for its whole body, which is
//! what makes it atomic, like a Lua script on Redis.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::{Duration, Instant};

use super::link::Linked;
use super::pubsub::{Channels, Subscription};
use super::stream::SimStream;
use crate::backend::key_rules::{self, Held};
use crate::backend::lock::stream::{ConsumerGroup, GROUP, Pending, QueueServer};
use crate::backend::node::LockNode;
use crate::backend::sql::{SqlOp, SqlReply};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, Storage, StorageClient,
    StorageTruth, StoredWrite, WorkerLink, WriteCheck, async_trait,
};
use crate::scenario::{AcquireMode, QUEUED_JOBS, ReleaseMode, RenewMode};

/// The simulator. Cloning it shares the same database.
#[derive(Clone, Default)]
pub struct SimBackend {
    db: Arc<Mutex<SimDb>>,
    /// Its pub/sub channels: not data, so a replica's copy or a restart leaves them.
    channels: Channels,
}

/// A string value with an optional expiry deadline, as Redis keeps it.
type Entry = Held<String, Instant>;

#[derive(Default, Clone)]
struct SimDb {
    strings: HashMap<String, Entry>,
    lists: HashMap<String, Vec<String>>,
    /// Streams with their consumer group (`lock = "stream"`), by key.
    streams: HashMap<String, SimStream>,
    /// Each run's SQL tables (lessons without a lock), by the run's key prefix.
    tables: HashMap<String, crate::backend::sql::Tables>,
}

impl SimDb {
    /// The string `key` as `key_rules` sees one (taken out of the map, put back after
    /// `f`), at the virtual clock's now.
    fn with_key<R>(&mut self, key: &str, f: impl FnOnce(&mut Option<Entry>, Instant) -> R) -> R {
        let mut slot = self.strings.remove(key);
        let said = f(&mut slot, Instant::now());
        if let Some(entry) = slot {
            self.strings.insert(key.to_string(), entry);
        }
        said
    }

    /// The key if it is live (`key_rules::live`: gone once `now > deadline`).
    fn live(&mut self, key: &str) -> Option<&mut Entry> {
        self.with_key(key, |slot, now| {
            key_rules::live(slot, now);
        });
        self.strings.get_mut(key)
    }

    fn get(&mut self, key: &str) -> Option<String> {
        self.live(key).map(|e| e.value.clone())
    }

    /// `SET key value NX [PX ttl]`.
    fn set_nx(&mut self, key: &str, value: &str, ttl_ms: u64) -> bool {
        self.with_key(key, |slot, now| {
            let deadline = (ttl_ms > 0).then(|| now + Duration::from_millis(ttl_ms));
            key_rules::set_nx(slot, now, value.to_string(), deadline)
        })
    }

    /// `PTTL key`: -2 no key, -1 no expiry, else ms left.
    fn pttl(&mut self, key: &str) -> i64 {
        self.with_key(key, |slot, now| match key_rules::expiry(slot, now) {
            None => -2,
            Some(None) => -1,
            Some(Some(d)) => d.saturating_duration_since(now).as_millis() as i64,
        })
    }

    fn incr(&mut self, key: &str) -> u64 {
        let next = self.get_u64(key) + 1;
        self.strings.insert(key.to_string(), Entry { value: next.to_string(), deadline: None });
        next
    }

    fn get_u64(&mut self, key: &str) -> u64 {
        self.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn del(&mut self, key: &str) -> bool {
        let existed = self.live(key).is_some()
            || self.lists.contains_key(key)
            || self.streams.contains_key(key);
        self.strings.remove(key);
        self.lists.remove(key);
        self.streams.remove(key);
        existed
    }
}

impl SimBackend {
    fn db(&self) -> MutexGuard<'_, SimDb> {
        // A poisoned lock means a panic in another worker; the data is still consistent
        // because every method finishes its update before it can panic.
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make `replica` an exact copy of this database: what replication achieves.
    pub fn replicate_to(&self, replica: &SimBackend) {
        let copy = self.db().clone();
        *replica.db() = copy;
    }

    /// Forget everything, as a server restarted without persistence would.
    pub fn wipe(&self) {
        let mut db = self.db();
        db.strings.clear();
        db.lists.clear();
        db.streams.clear();
        db.tables.clear();
    }

    /// How many keys exist (live or not yet lazily expired); tests use it to show
    /// cleanup leaves nothing behind.
    pub fn key_count(&self) -> usize {
        let db = self.db();
        db.strings.len() + db.lists.len() + db.streams.len()
    }
}

impl SimBackend {
    /// A new client bound to a run's keys.
    pub fn client(&self, keys: &Keys) -> SimClient {
        let id = NEXT_CLIENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        SimClient { sim: self.clone(), keys: keys.clone(), id, releases: None }
    }
}

#[async_trait]
impl LockService for SimBackend {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        Ok(match link {
            None => Box::new(self.client(keys)),
            Some(link) => Box::new(Linked::new(self.client(keys), Some(link.clone()), "Redis")),
        })
    }

    fn describe(&self) -> String {
        "SIMULATOR (virtual clock, no Redis)".to_string()
    }
}

#[async_trait]
impl Storage for SimBackend {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn StorageClient>, BackendError> {
        let client = SimStorageClient(self.client(keys));
        Ok(match link {
            None => Box::new(client),
            Some(link) => Box::new(Linked::new(client, Some(link.clone()), "Redis")),
        })
    }
}

/// Numbers the simulator's clients, so row locks know their owner.
static NEXT_CLIENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One worker's handle on the simulator.
pub struct SimClient {
    sim: SimBackend,
    keys: Keys,
    id: u64,
    /// The release channel, once this client waits with `notify`.
    releases: Option<Subscription>,
}

impl SimClient {
    /// Compare-and-delete (or a plain `DEL`) of the lock, while holding `db`.
    fn release_in(&self, mut db: MutexGuard<'_, SimDb>, value: &str, mode: ReleaseMode) -> bool {
        let value = value.to_string();
        db.with_key(&self.keys.lock, |slot, now| key_rules::release(slot, now, &value, mode))
    }
}

/// A closed connection ends its transaction: the row locks it held are released.
impl Drop for SimClient {
    fn drop(&mut self) {
        if let Some(tables) = self.sim.db().tables.get_mut(&self.keys.prefix) {
            tables.disconnect(self.id);
        }
    }
}

#[async_trait]
impl LockClient for SimClient {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let k = &self.keys;
        let granted = self.sim.db().set_nx(&k.lock, value, ttl_ms);
        if !granted {
            return Ok(AcquireReply::from_pttl(self.sim.db().pttl(&k.lock)));
        }
        if mode == AcquireMode::TwoStep {
            // Two commands, two round trips: let other workers run in between, as the
            // network would.
            tokio::task::yield_now().await;
        }
        Ok(AcquireReply::Granted { token: self.sim.db().incr(&k.fence) })
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        let db = self.sim.db();
        Ok(self.release_in(db, value, mode))
    }

    /// The release, then the `PUBLISH` with no await between them (the simulator's
    /// runtime has one thread): no other command runs in between, as in the Lua
    /// script on Redis.
    async fn release_announcing(
        &mut self,
        value: &str,
        mode: ReleaseMode,
    ) -> Result<bool, BackendError> {
        let db = self.sim.db();
        let released = self.release_in(db, value, mode);
        // Only the compare-and-delete script publishes (validation refuses the rest).
        if released && mode == ReleaseMode::CompareAndDelete {
            self.sim.channels.publish(&self.keys.released);
        }
        Ok(released)
    }

    async fn listen_for_releases(&mut self) -> Result<bool, BackendError> {
        if self.releases.is_none() {
            self.releases = Some(self.sim.channels.subscribe(&self.keys.released));
        }
        Ok(true)
    }

    async fn next_release(&mut self) -> Result<(), BackendError> {
        match &mut self.releases {
            Some(subscription) => subscription.next().await,
            None => std::future::pending().await,
        }
        Ok(())
    }

    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        let mut db = self.sim.db();
        Ok(db.with_key(&self.keys.lock, |slot, now| {
            let after = |ms| now + Duration::from_millis(ms);
            key_rules::renew(slot, now, value.to_string(), (ttl_ms, after), mode)
        }))
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        Ok(self.sim.db().get(&self.keys.lock))
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let mut db = self.sim.db();
        let k = &self.keys;
        Ok(LockTruth {
            holder_value: db.get(&k.lock),
            pttl_ms: u64::try_from(db.pttl(&k.lock)).ok(),
            counter: db.get(&k.fence).and_then(|v| v.parse().ok()),
            nodes: Vec::new(),
        })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        let mut db = self.sim.db();
        for key in self.keys.all() {
            db.del(key);
        }
        db.tables.remove(&self.keys.prefix);
        Ok(())
    }
}

#[async_trait]
impl LockNode for SimClient {
    async fn set_nx(&mut self, value: &str, ttl_ms: u64) -> Result<bool, BackendError> {
        Ok(self.sim.db().set_nx(&self.keys.lock, value, ttl_ms))
    }

    async fn pttl(&mut self) -> Result<i64, BackendError> {
        Ok(self.sim.db().pttl(&self.keys.lock))
    }

    /// As assets/lua/clock_jump.lua does on a real server.
    async fn jump_clock(&mut self, ms: u64) -> Result<u64, BackendError> {
        let mut db = self.sim.db();
        let jump = Duration::from_millis(ms);
        let mut changed = 0;
        for key in self.keys.all() {
            let Some(deadline) = db.live(key).and_then(|e| e.deadline.as_mut()) else {
                continue;
            };
            changed += 1;
            match deadline.checked_sub(jump).filter(|d| *d > Instant::now()) {
                Some(sooner) => *deadline = sooner,
                None => {
                    db.strings.remove(key);
                }
            }
        }
        Ok(changed)
    }
}

/// One worker's handle on the simulator's storage.
pub struct SimStorageClient(SimClient);

#[async_trait]
impl StorageClient for SimStorageClient {
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError> {
        let entry = serde_json::to_string(write).map_err(|e| BackendError::sim(e.to_string()))?;
        let mut db = self.0.sim.db();
        let k = &self.0.keys;
        // The same rules as assets/lua/fenced_write.lua and idempotent_write.lua.
        let mut highest = db.get_u64(&k.storage_highest);
        let first_time = || {
            let applied = db.lists.entry(k.storage_applied.clone()).or_default();
            let first = !applied.contains(&write.value);
            if first {
                applied.push(write.value.clone());
            }
            first
        };
        if !key_rules::takes_write(check, write.token, &mut highest, first_time) {
            return Ok(None);
        }
        if let WriteCheck::Fencing(_) = check {
            let value = Entry { value: highest.to_string(), deadline: None };
            db.strings.insert(k.storage_highest.clone(), value);
        }
        // The list's length after the append, as the scripts return it: the write's
        // place in the storage's order.
        let list = db.lists.entry(k.storage.clone()).or_default();
        list.push(entry);
        Ok(Some(list.len() as u64))
    }

    async fn observe(&mut self) -> Result<StorageTruth, BackendError> {
        let mut db = self.0.sim.db();
        let k = &self.0.keys;
        Ok(StorageTruth { highest: db.get_u64(&k.storage_highest), counter: db.get_u64(&k.fence) })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        LockClient::cleanup(&mut self.0).await
    }

    async fn next_token(&mut self) -> Result<u64, BackendError> {
        Ok(self.0.sim.db().incr(&self.0.keys.fence))
    }

    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        let db = self.0.sim.db();
        db.lists
            .get(&self.0.keys.storage)
            .map(|entries| {
                entries.iter().map(|e| serde_json::from_str(e)).collect::<Result<_, _>>()
            })
            .transpose()
            .map(Option::unwrap_or_default)
            .map_err(|e| BackendError::sim(e.to_string()))
    }

    async fn sql(&mut self, worker: &str, op: &SqlOp) -> Result<SqlReply, BackendError> {
        let mut db = self.0.sim.db();
        let reply = db.tables.entry(self.0.keys.prefix.clone()).or_default().apply(self.0.id, op);
        if let Some(result) = &reply.result {
            let write = StoredWrite { worker: worker.into(), token: None, value: result.clone() };
            let entry =
                serde_json::to_string(&write).map_err(|e| BackendError::sim(e.to_string()))?;
            db.lists.entry(self.0.keys.storage.clone()).or_default().push(entry);
        }
        Ok(reply)
    }
}

/// The simulator as a queue's server: consumers of `sim/stream.rs`'s model, kept in
/// the same database as the keys (so cleanup and a restart treat it as Redis does).
#[async_trait]
impl QueueServer for SimBackend {
    async fn open(&self, keys: &Keys) -> Result<Box<dyn ConsumerGroup>, BackendError> {
        Ok(Box::new(SimConsumer { sim: self.clone(), keys: keys.clone() }))
    }

    fn describe(&self) -> String {
        LockService::describe(self)
    }
}

/// One consumer's connection to the simulated stream.
struct SimConsumer {
    sim: SimBackend,
    keys: Keys,
}

impl SimConsumer {
    /// Run `f` on the run's stream (under the database's one lock: atomic, as a
    /// Redis command is); a stream that is not there is Redis's `NOGROUP` error.
    fn with<T>(&self, f: impl FnOnce(&mut SimStream) -> T) -> Result<T, BackendError> {
        let mut db = self.sim.db();
        let stream = db.streams.get_mut(&self.keys.jobs).ok_or_else(|| {
            BackendError::sim(format!(
                "NOGROUP No such key '{}' or consumer group '{GROUP}'",
                self.keys.jobs
            ))
        })?;
        Ok(f(stream))
    }
}

#[async_trait]
impl ConsumerGroup for SimConsumer {
    async fn create(&mut self) -> Result<(), BackendError> {
        let mut db = self.sim.db();
        let jobs = self.keys.jobs.clone();
        db.streams.entry(jobs).or_insert_with(|| SimStream::with_jobs(QUEUED_JOBS));
        Ok(())
    }

    async fn read_new(&mut self, consumer: &str) -> Result<Option<u64>, BackendError> {
        self.with(|s| s.read_new(consumer))
    }

    async fn autoclaim(
        &mut self,
        consumer: &str,
        min_idle_ms: u64,
    ) -> Result<Option<u64>, BackendError> {
        self.with(|s| s.autoclaim(consumer, min_idle_ms))
    }

    async fn pending(&mut self, job: Option<u64>) -> Result<Option<Pending>, BackendError> {
        self.with(|s| s.pending(job))
    }

    async fn ack(&mut self, job: u64) -> Result<bool, BackendError> {
        self.with(|s| s.ack(job))
    }

    async fn delete(&mut self) -> Result<(), BackendError> {
        let mut db = self.sim.db();
        for key in self.keys.all() {
            db.del(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::FenceCompare;

    fn client(sim: &SimBackend) -> SimClient {
        SimClient { sim: sim.clone(), keys: Keys::for_run("t"), id: 0, releases: None }
    }

    fn storage(sim: &SimBackend) -> SimStorageClient {
        SimStorageClient(client(sim))
    }

    #[tokio::test(start_paused = true)]
    async fn lease_expires_exactly_after_its_ttl_in_virtual_time() {
        let sim = SimBackend::default();
        let (mut a, mut b) = (client(&sim), client(&sim));
        assert_eq!(
            a.acquire("A:1", 2000, AcquireMode::Script, None).await.unwrap(),
            AcquireReply::Granted { token: 1 }
        );
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(
            b.acquire("B:1", 2000, AcquireMode::Script, None).await.unwrap(),
            AcquireReply::Busy { pttl_ms: Some(500) }
        );
        tokio::time::advance(Duration::from_millis(501)).await;
        assert_eq!(
            b.acquire("B:1", 2000, AcquireMode::Script, None).await.unwrap(),
            AcquireReply::Granted { token: 2 }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fenced_write_rejects_lower_token_and_accepts_equal() {
        let sim = SimBackend::default();
        let mut c = storage(&sim);
        let w =
            |who: &str, t| StoredWrite { worker: who.into(), token: Some(t), value: String::new() };
        let allow_equal = WriteCheck::Fencing(FenceCompare::AllowEqual);
        assert_eq!(c.write(&w("B", 2), allow_equal).await.unwrap(), Some(1));
        assert_eq!(
            c.write(&w("B", 2), allow_equal).await.unwrap(),
            Some(2),
            "equal token: same holder writing again, the storage's second entry"
        );
        assert_eq!(
            c.write(&w("A", 1), allow_equal).await.unwrap(),
            None,
            "lower token must be rejected"
        );
        assert_eq!(c.read_all().await.unwrap().len(), 2);
        c.cleanup().await.unwrap();
        assert_eq!(sim.key_count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_strict_fenced_write_refuses_an_equal_token() {
        let sim = SimBackend::default();
        let mut c = storage(&sim);
        let w =
            |who: &str, t| StoredWrite { worker: who.into(), token: Some(t), value: String::new() };
        let strict = WriteCheck::Fencing(FenceCompare::Strict);
        assert!(c.write(&w("B", 1), strict).await.unwrap().is_some());
        assert!(c.write(&w("A", 1), strict).await.unwrap().is_none(), "equal: refused with <");
        assert_eq!(c.write(&w("C", 2), strict).await.unwrap(), Some(2));
    }
}
