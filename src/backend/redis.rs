//! The real thing: the lock and the storage on a Redis server.
//!
//! One server can be the lock service (`SET NX PX` plus the fence counter), the
//! storage (a list, fenced by a Lua script), or both, as in the article's experiment.
//! Every worker gets its own `ConnectionManager` per role (its own TCP or unix-socket
//! connection), so commands from different workers interleave on the server exactly
//! as they would from separate processes. The manager is configured to give up fast:
//! a lesson about failures must show Redis failing, not retry it away silently.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, RedisError};

use super::node::LockNode;
use super::scripts;
use super::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, Storage, StorageClient,
    StorageTruth, StoredWrite, WriteCheck, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// How long to wait for a connection or a reply before calling Redis unreachable.
const TIMEOUT: Duration = Duration::from_secs(2);

/// A Redis server, reached by URL.
#[derive(Clone)]
pub struct RedisBackend {
    client: redis::Client,
    /// The URL with any password replaced by `***`: the only form ever shown or saved.
    shown_url: String,
    /// Said in front of the URL on screen ("private redis-server", "Redis").
    label: String,
}

impl RedisBackend {
    /// A backend for `url` (`redis://`, `rediss://`, `unix://`, `redis+unix://`).
    pub fn open(url: &str, label: &str) -> Result<Self, BackendError> {
        let shown_url = redact_url(url);
        let client = redis::Client::open(url).map_err(|e| BackendError::Unreachable {
            service: "Redis",
            url: shown_url.clone(),
            reason: format!(
                "not a usable Redis URL ({})",
                e.detail().unwrap_or("check the syntax")
            ),
        })?;
        Ok(RedisBackend { client, shown_url, label: label.to_string() })
    }

    fn classify(&self, e: RedisError) -> BackendError {
        classify(&self.shown_url, e)
    }
}

/// Turn a connect-time error into one a person can act on.
fn classify(url: &str, e: RedisError) -> BackendError {
    let text = e.to_string();
    let service = "Redis";
    let auth = e.kind() == redis::ErrorKind::AuthenticationFailed
        || ["WRONGPASS", "NOAUTH", "invalid password", "invalid username-password"]
            .iter()
            .any(|m| text.contains(m));
    if auth {
        BackendError::Auth { service, url: url.to_string(), reason: first_line(&text) }
    } else {
        BackendError::Unreachable { service, url: url.to_string(), reason: first_line(&text) }
    }
}

/// An error during a run: the connection was there and is now gone or confused.
fn lost(e: RedisError) -> BackendError {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        BackendError::Lost { service: "Redis", message: first_line(&e.to_string()) }
    } else {
        BackendError::redis(first_line(&e.to_string()))
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_string()
}

impl RedisBackend {
    /// A new connection bound to a run's keys.
    pub async fn connect(&self, keys: &Keys) -> Result<RedisClient, BackendError> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let mut con = ConnectionManager::new_with_config(self.client.clone(), config)
            .await
            .map_err(|e| self.classify(e))?;
        // A PING proves the connection (and AUTH) works before the run starts.
        let _: String =
            redis::cmd("PING").query_async(&mut con).await.map_err(|e| self.classify(e))?;
        Ok(RedisClient { con, keys: keys.clone() })
    }
}

#[async_trait]
impl LockService for RedisBackend {
    async fn connect(&self, keys: &Keys) -> Result<Box<dyn LockClient>, BackendError> {
        Ok(Box::new(RedisBackend::connect(self, keys).await?))
    }

    fn describe(&self) -> String {
        format!("{} {}", self.label, self.shown_url)
    }
}

#[async_trait]
impl Storage for RedisBackend {
    async fn connect(&self, keys: &Keys) -> Result<Box<dyn StorageClient>, BackendError> {
        Ok(Box::new(RedisStorageClient(RedisBackend::connect(self, keys).await?)))
    }
}

/// One connection to Redis, bound to one run's keys: a worker's lock client, or one
/// Redlock node.
pub struct RedisClient {
    con: ConnectionManager,
    keys: Keys,
}

#[async_trait]
impl LockClient for RedisClient {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: AcquireMode,
        _tokens: &mut dyn StorageClient,
    ) -> Result<AcquireReply, BackendError> {
        let k = &self.keys;
        match mode {
            AcquireMode::Script => {
                let (granted, n): (i64, i64) = scripts::ACQUIRE
                    .key(&k.lock)
                    .key(&k.fence)
                    .arg(value)
                    .arg(ttl_ms)
                    .invoke_async(&mut self.con)
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
                    let token: u64 = self.con.incr(&k.fence, 1).await.map_err(lost)?;
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
        let (holder_value, pttl, fence): (Option<String>, i64, Option<u64>) = redis::pipe()
            .get(&k.lock)
            .pttl(&k.lock)
            .get(&k.fence)
            .query_async(&mut self.con)
            .await
            .map_err(lost)?;
        Ok(LockTruth {
            holder_value,
            pttl_ms: u64::try_from(pttl).ok(),
            counter: Some(fence.unwrap_or(0)),
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

    async fn get(&mut self) -> Result<Option<String>, BackendError> {
        LockClient::holder(self).await
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        LockClient::release(self, value, mode).await
    }

    async fn renew(
        &mut self,
        value: &str,
        ttl_ms: u64,
        mode: RenewMode,
    ) -> Result<bool, BackendError> {
        LockClient::renew(self, value, ttl_ms, mode).await
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        LockClient::cleanup(self).await
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

/// One worker's connection to the storage on Redis.
pub struct RedisStorageClient(RedisClient);

#[async_trait]
impl StorageClient for RedisStorageClient {
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<bool, BackendError> {
        let entry = serde_json::to_string(write).map_err(|e| BackendError::redis(e.to_string()))?;
        let k = &self.0.keys;
        let accepted: i64 = match check {
            WriteCheck::None => {
                let _: i64 = self.0.con.rpush(&k.storage, entry).await.map_err(lost)?;
                1
            }
            WriteCheck::Fencing => {
                let (accepted, _highest): (i64, i64) = scripts::FENCED_WRITE
                    .key(&k.storage)
                    .key(&k.storage_highest)
                    .arg(write.token.unwrap_or(0))
                    .arg(entry)
                    .invoke_async(&mut self.0.con)
                    .await
                    .map_err(lost)?;
                accepted
            }
            WriteCheck::IdempotencyKey => scripts::IDEMPOTENT_WRITE
                .key(&k.storage)
                .key(&k.storage_applied)
                .arg(&write.value)
                .arg(entry)
                .invoke_async(&mut self.0.con)
                .await
                .map_err(lost)?,
        };
        Ok(accepted == 1)
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
        self.0.con.incr(&self.0.keys.fence, 1).await.map_err(lost)
    }

    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        let entries: Vec<String> =
            self.0.con.lrange(&self.0.keys.storage, 0, -1).await.map_err(lost)?;
        entries
            .iter()
            .map(|e| {
                serde_json::from_str(e)
                    .map_err(|err| BackendError::redis(format!("storage entry {e:?}: {err}")))
            })
            .collect()
    }
}

/// The URL with any password (userinfo or `?pass=` / `?password=`) replaced by `***`.
/// Anything that does not parse as a URL is shown as `<unparsable URL>`, since it
/// might contain a secret in a shape we do not recognise.
pub fn redact_url(raw: &str) -> String {
    let Ok(mut url) = url::Url::parse(raw) else {
        return "<unparsable URL>".to_string();
    };
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    let secret_query = url.query_pairs().any(|(k, _)| k == "pass" || k == "password");
    if secret_query {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v =
                    if k == "pass" || k == "password" { "***".to_string() } else { v.into_owned() };
                (k.into_owned(), v)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string().replace("%2A%2A%2A", "***")
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_never_shown() {
        for (raw, shown) in [
            ("redis://:hunter2@localhost:6379/0", "redis://:***@localhost:6379/0"),
            ("rediss://alice:hunter2@db.example:6380", "rediss://alice:***@db.example:6380"),
            ("unix:///tmp/r.sock?pass=hunter2&db=1", "unix:///tmp/r.sock?pass=***&db=1"),
            ("redis://localhost", "redis://localhost"),
            ("not a url :hunter2", "<unparsable URL>"),
        ] {
            let out = redact_url(raw);
            assert_eq!(out, shown);
            assert!(!out.contains("hunter2"));
        }
    }
}
