//! The storage on Redis: a list of writes, fenced (or deduplicated by idempotency key)
//! by a Lua script, with the high-water mark and a token counter beside it.

use redis::AsyncCommands;

use crate::backend::redis::{RedisBackend, RedisClient, keeping, lost};
use crate::backend::{
    BackendError, Keys, Storage, StorageClient, StorageTruth, StoredWrite, WorkerLink, WriteCheck,
    async_trait, scripts,
};

#[async_trait]
impl Storage for RedisBackend {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn StorageClient>, BackendError> {
        Ok(Box::new(RedisStorageClient(match link {
            None => RedisBackend::connect(self, keys).await?,
            Some(link) => RedisBackend::connect_via(self, keys, link).await?,
        })))
    }

    fn redis_url_for_workers(&self) -> Option<String> {
        Some(self.url_for_workers())
    }
}

/// One worker's connection to the storage on Redis.
pub struct RedisStorageClient(RedisClient);

#[async_trait]
impl StorageClient for RedisStorageClient {
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError> {
        let entry = serde_json::to_string(write).map_err(|e| BackendError::redis(e.to_string()))?;
        let k = &self.0.keys;
        let con = &mut self.0.con;
        // Each reply carries the list's length after the append, counted by Redis in
        // the same command or script as the write: the storage's own order.
        let length: i64 = match check {
            WriteCheck::None => {
                let rpush = |p: &mut redis::Pipeline| {
                    p.rpush(&k.storage, &entry);
                };
                keeping(con, rpush, None, &[&k.storage], k.expire_ms).await.map_err(lost)?
            }
            WriteCheck::Fencing(compare) => {
                let mut invocation = scripts::FENCED_WRITE.key(&k.storage);
                invocation.key(&k.storage_highest).arg(write.token.unwrap_or(0)).arg(&entry);
                invocation.arg(compare.op());
                let call = |p: &mut redis::Pipeline| {
                    p.invoke_script(&invocation);
                };
                let keys = [k.storage.as_str(), &k.storage_highest];
                let script = Some(&*scripts::FENCED_WRITE);
                let (_accepted, _highest, length): (i64, i64, i64) =
                    keeping(con, call, script, &keys, k.expire_ms).await.map_err(lost)?;
                length
            }
            WriteCheck::IdempotencyKey => {
                let mut invocation = scripts::IDEMPOTENT_WRITE.key(&k.storage);
                invocation.key(&k.storage_applied).arg(&write.value).arg(&entry);
                let call = |p: &mut redis::Pipeline| {
                    p.invoke_script(&invocation);
                };
                let keys = [k.storage.as_str(), &k.storage_applied];
                let script = Some(&*scripts::IDEMPOTENT_WRITE);
                keeping(con, call, script, &keys, k.expire_ms).await.map_err(lost)?
            }
        };
        Ok(u64::try_from(length).ok().filter(|n| *n > 0))
    }

    async fn observe(&mut self) -> Result<StorageTruth, BackendError> {
        let k = &self.0.keys;
        let (highest, fence): (Option<u64>, Option<u64>) = redis::pipe()
            .get(&k.storage_highest)
            .get(&k.fence)
            .query_async(&mut self.0.con)
            .await
            .map_err(lost)?;
        Ok(StorageTruth { highest: highest.unwrap_or(0), counter: fence.unwrap_or(0) })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        // Exactly the run's own keys, by name: no KEYS or SCAN over the user's data.
        let _: i64 = self.0.con.del(&self.0.keys.all()[..]).await.map_err(lost)?;
        Ok(())
    }

    async fn next_token(&mut self) -> Result<u64, BackendError> {
        let k = &self.0.keys;
        let incr = |p: &mut redis::Pipeline| {
            p.incr(&k.fence, 1);
        };
        keeping(&mut self.0.con, incr, None, &[&k.fence], k.expire_ms).await.map_err(lost)
    }

    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        self.read_entries()
            .await?
            .into_iter()
            .map(|e| e.map_err(|junk| BackendError::redis(format!("storage entry {junk}"))))
            .collect()
    }

    async fn read_entries(&mut self) -> Result<Vec<Result<StoredWrite, String>>, BackendError> {
        let entries: Vec<String> =
            self.0.con.lrange(&self.0.keys.storage, 0, -1).await.map_err(lost)?;
        Ok(entries
            .iter()
            .map(|e| serde_json::from_str(e).map_err(|err| format!("{:?}: {err}", shortened(e))))
            .collect())
    }
}

/// At most 80 characters of a junk entry, for a message: a student's entry may be
/// megabytes long.
fn shortened(entry: &str) -> String {
    match entry.char_indices().nth(80) {
        Some((end, _)) => format!("{}...", &entry[..end]),
        None => entry.to_string(),
    }
}
