//! A real Redis server, reached by URL: connections bound to a run's keys, errors a
//! person can act on, URLs with passwords redacted.
//!
//! One server can be the lock service (`lock/redis.rs`: `SET NX PX` plus the fence
//! counter), the storage (`storage/redis.rs`: a list, fenced by a Lua script), or both,
//! as in the article's experiment. Every worker gets its own `ConnectionManager` per
//! role (its own TCP or unix-socket connection), so commands from different workers
//! interleave on the server exactly as they would from separate processes. The manager is configured to give up fast:
//! a lesson about failures must show Redis failing, not retry it away silently.
//!
//! A URL may name any node of a Redis Cluster. All keys of a run share one hash tag
//! (`keys.rs`), so one slot and one master: each connection first reads the run's own
//! lock key, and a `MOVED` answer (a cluster node that does not own the slot) makes it
//! redis-rs's cluster client, which follows redirections. Why not `INFO cluster`: a
//! user with the minimal ACL may not run `INFO`, and each refusal would land in the
//! shared server's `ACL LOG`; `GET` on the run's own key is allowed already.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ConnectionAddr, ErrorKind, FromRedisValue, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, Value,
};

use super::proxy::Upstream;
use super::{BackendError, Keys, WorkerLink, scripts};

/// How long to wait for a connection or a reply before calling Redis unreachable.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(2);

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
    if let Some(refused) = super::acl::refusal(&text) {
        return refused;
    }
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
    con: &mut Connection,
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
    if let Some(refused) = super::acl::refusal(&e.to_string()) {
        refused
    } else if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
    {
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
        self.connect_to(self.client.clone(), keys, Duration::ZERO).await
    }

    /// A new connection bound to a run's keys, through a worker's link: the client
    /// dials the link's proxy for this server, and waits for a reply as much longer
    /// as the link's longest delay.
    pub async fn connect_via(
        &self,
        keys: &Keys,
        link: &WorkerLink,
    ) -> Result<RedisClient, BackendError> {
        let info = self.client.get_connection_info().clone();
        let upstream = match info.addr() {
            ConnectionAddr::Tcp(host, port) => Upstream::Tcp { host: host.clone(), port: *port },
            ConnectionAddr::Unix(path) => Upstream::Unix(path.clone()),
            _ => {
                return Err(BackendError::Unsupported(
                    "link faults need a Redis reached without TLS (redis:// or unix://)".into(),
                ));
            }
        };
        let proxy = link.dial(upstream).await.map_err(|e| BackendError::Unreachable {
            service: "Redis",
            url: self.shown_url.clone(),
            reason: format!("could not start the link's proxy: {e}"),
        })?;
        let addr = ConnectionAddr::Tcp(proxy.ip().to_string(), proxy.port());
        let client = redis::Client::open(info.set_addr(addr)).map_err(|e| self.classify(e))?;
        let mut linked = self.connect_to(client.clone(), keys, link.max_delay()).await?;
        if matches!(linked.con.con, RedisCon::Cluster(_)) {
            return Err(BackendError::Unsupported(
                "link faults need a single Redis, not a node of a Redis Cluster".into(),
            ));
        }
        let config = manager_config(link.max_delay());
        linked.con.link = Some(Linked { link: link.clone(), cuts_seen: 0, client, config });
        // Loaded now, while the link is clear: a delayed link then delays each call's
        // one round trip, not a `NOSCRIPT` answer and a `SCRIPT LOAD` as well.
        for (_, script, _) in &scripts::ALL {
            let _: String = script.load_async(&mut linked.con).await.map_err(lost)?;
        }
        Ok(linked)
    }

    async fn connect_to(
        &self,
        client: redis::Client,
        keys: &Keys,
        slack: Duration,
    ) -> Result<RedisClient, BackendError> {
        let manager = ConnectionManager::new_with_config(client.clone(), manager_config(slack))
            .await
            .map_err(|e| self.classify(e))?;
        let mut single = manager;
        // A PING proves the connection (and AUTH) works before the run starts.
        let _: String =
            redis::cmd("PING").query_async(&mut single).await.map_err(|e| self.classify(e))?;
        let probe: RedisResult<Option<String>> =
            redis::cmd("GET").arg(&keys.lock).query_async(&mut single).await;
        let con = match probe {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::Moved) => {
                RedisCon::Cluster(self.cluster().await?)
            }
            Err(e) => return Err(self.classify(e)),
            Ok(_) => RedisCon::Single(single),
        };
        let con = Connection { con, link: None };
        Ok(RedisClient { con, keys: keys.clone(), subscriber: client, releases: None })
    }

    /// A connection to the cluster the URL's server belongs to. The client reads the
    /// slot map (`CLUSTER SLOTS`: on a cluster the ACL needs `+cluster|slots`, README).
    async fn cluster(&self) -> Result<ClusterConnection, BackendError> {
        let client = ClusterClient::builder([self.client.get_connection_info().clone()])
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            // Enough to follow a MOVED after a slot refresh, not to hide an outage.
            .retries(2)
            .max_retry_wait(200)
            .build()
            .map_err(|e| self.classify(e))?;
        client.get_async_connection().await.map_err(|e| self.classify(e))
    }
}

/// One connection to a single server, or to a cluster through the cluster client
/// (which routes each command by its keys' slot and follows redirections).
#[derive(Clone)]
pub(crate) enum RedisCon {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for RedisCon {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisCon::Single(con) => con.req_packed_command(cmd),
            RedisCon::Cluster(con) => con.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisCon::Single(con) => con.req_packed_commands(pipeline, offset, count),
            RedisCon::Cluster(con) => con.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisCon::Single(con) => con.get_db(),
            RedisCon::Cluster(con) => con.get_db(),
        }
    }
}

/// How a connection gives up: fast, so a lesson about failures shows Redis failing;
/// `slack` more for a reply, on a link whose replies the scenario delays that much.
fn manager_config(slack: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT + slack))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(200))
}

/// One connection to Redis, bound to one run's keys: a worker's lock client, or one
/// Redlock node.
pub struct RedisClient {
    pub(crate) con: Connection,
    pub(crate) keys: Keys,
    /// Where a subscriber connection goes (through the worker's link, if any): a
    /// subscribed connection can send nothing else, so `notify` needs one of its own.
    pub(crate) subscriber: redis::Client,
    /// The run's release channel, once this client waits with `notify`.
    pub(crate) releases: Option<redis::aio::PubSubStream>,
}

/// A worker's connection to Redis (reconnecting when it drops), and the link it goes
/// over when the scenario makes that link fail.
///
/// While the link is cut, a call fails at once without a byte sent, as a call to a
/// host whose route is gone does (`ENETUNREACH`); the proxy has cut the connections
/// that were open (a reply still on its way is lost with them). The first call after
/// the heal opens a new connection first, as a client that saw its connection drop
/// does.
pub struct Connection {
    con: RedisCon,
    link: Option<Linked>,
}

/// What a connection over a link needs to notice a cut and to reconnect after it.
struct Linked {
    link: WorkerLink,
    /// The link's cuts this connection has reconnected after.
    cuts_seen: u64,
    client: redis::Client,
    config: ConnectionManagerConfig,
}

impl Connection {
    /// Fail while the link is cut; reconnect once after each cut.
    async fn ready(&mut self) -> RedisResult<()> {
        let Some(linked) = &mut self.link else { return Ok(()) };
        if linked.link.is_cut() {
            let why = "the link is cut (partition)";
            return Err(std::io::Error::new(std::io::ErrorKind::NetworkUnreachable, why).into());
        }
        let cuts = linked.link.cuts();
        if cuts != linked.cuts_seen {
            let (client, config) = (linked.client.clone(), linked.config.clone());
            // Links are refused on a cluster: the connection is a single server's.
            self.con = RedisCon::Single(ConnectionManager::new_with_config(client, config).await?);
            linked.cuts_seen = cuts;
        }
        Ok(())
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            self.ready().await?;
            self.con.req_packed_command(cmd).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            self.ready().await?;
            self.con.req_packed_commands(pipeline, offset, count).await
        })
    }

    fn get_db(&self) -> i64 {
        self.con.get_db()
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
    } else if !url.username().is_empty() {
        // `redis://PASSWORD@host`: people write a password so; never shown either.
        let _ = url.set_username("***");
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
            // A password written where the user name goes is still a password.
            ("redis://hunter2@localhost:6379", "redis://***@localhost:6379"),
            ("not a url :hunter2", "<unparsable URL>"),
        ] {
            let out = redact_url(raw);
            assert_eq!(out, shown);
            assert!(!out.contains("hunter2"));
        }
    }
}
