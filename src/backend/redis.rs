//! A real Redis server, reached by URL: connections bound to a run's keys, errors a
//! person can act on, URLs with passwords redacted.
//!
//! One server can be the lock service (`lock/redis.rs`: `SET NX PX` plus the fence
//! counter), the storage (`storage/redis.rs`: a list, fenced by a Lua script), or both,
//! as in the article's experiment. Every worker gets its own `ConnectionManager` per
//! role (its own TCP or unix-socket connection), so commands from different workers
//! interleave on the server exactly as they would from separate processes. The manager is configured to give up fast:
//! a lesson about failures must show Redis failing, not retry it away silently.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, FromRedisValue, Pipeline, RedisError, RedisResult, ServerErrorKind};

use super::{BackendError, Keys};

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
    /// The URL as given, password included: only ever handed to a worker process.
    url: String,
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
        Ok(RedisBackend { client, shown_url, label: label.to_string(), url: url.to_string() })
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
    } else if e.kind() == redis::ErrorKind::Parse {
        BackendError::NotRedis { service, url: url.to_string() }
    } else {
        BackendError::Unreachable { service, url: url.to_string(), reason: first_line(&text) }
    }
}

/// `call` (one command or script) and, in the same round trip, `PEXPIRE` on `keys`
/// (so a run's keys expire by themselves if the run cannot delete them). A script
/// Redis does not have yet (`NOSCRIPT`: a fresh or restarted server) is loaded and the
/// round trip repeated; `EVALSHA` fails before running, so nothing happens twice.
pub(crate) async fn keeping<T: FromRedisValue>(
    con: &mut ConnectionManager,
    call: impl FnOnce(&mut Pipeline),
    script: Option<&redis::Script>,
    keys: &[&str],
    expire_ms: u64,
) -> RedisResult<T> {
    let mut pipe = redis::pipe();
    call(&mut pipe);
    let ms = i64::try_from(expire_ms).unwrap_or(i64::MAX);
    for key in keys {
        pipe.pexpire(*key, ms).ignore();
    }
    match pipe.query_async::<(T,)>(con).await {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            let Some(script) = script else { return Err(e) };
            let _: String = script.load_async(con).await?;
            pipe.query_async::<(T,)>(con).await.map(|(v,)| v)
        }
        other => other.map(|(v,)| v),
    }
}

/// An error during a run: the connection was there and is now gone or confused.
pub(crate) fn lost(e: RedisError) -> BackendError {
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
    /// "private redis-server unix:///...": the label, then the redacted URL.
    pub fn describe(&self) -> String {
        format!("{} {}", self.label, self.shown_url)
    }

    /// The URL as given (password included), for a worker process of this run.
    pub fn url_for_workers(&self) -> String {
        self.url.clone()
    }

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

/// One connection to Redis, bound to one run's keys: a worker's lock client, or one
/// Redlock node.
pub struct RedisClient {
    pub(crate) con: ConnectionManager,
    pub(crate) keys: Keys,
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
