//! A storage on PostgreSQL that checks fencing tokens itself, with the article's
//! statement:
//!
//! ```sql
//! UPDATE record SET ..., fence_token = $t WHERE id = 1 AND fence_token <= $t
//! ```
//!
//! "0 rows updated" means a holder with a newer token has already written. The check
//! is `<=`, not `<`: an equal token is the current holder writing again, which the
//! Redis storage (`assets/lua/fenced_write.lua`) and the simulator accept too, so the
//! same scenario means the same thing on every storage. Each accepted write is also
//! appended to a history table in the same statement, which is what the storage panel
//! lists.
//!
//! Every table lives in a schema of the run's own (`fencelab_<run id>`), dropped at
//! the end: nothing else on a user's database is read or written.
//!
//! A run killed outright (`kill -9`) cannot drop its schema. So, as a run's Redis keys
//! get a TTL, its schema gets a deadline: a comment `fencelab: drop after <unix
//! seconds>` (the run's longest length plus an hour, `Keys::expire_ms`), and every
//! later run drops the `fencelab_<hex>` schemas it owns whose deadline has passed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls};

use super::sql::{
    BALANCE, DEPOSIT, JOBS, STOCK, SqlOp, SqlReply, deposited, did_job, signed_up, sold,
};
use crate::backend::proxy::Upstream;
use crate::backend::redis::redact_url;
use crate::backend::{
    BackendError, Keys, Storage, StorageClient, StorageTruth, StoredWrite, WorkerLink, WriteCheck,
    async_trait,
};

/// Where the SQL storage lives: a connection string (`postgres://...` or
/// `host=/tmp/... user=...`) and how to name it on screen.
#[derive(Clone)]
pub struct PgStorage {
    config: Arc<tokio_postgres::Config>,
    label: String,
    /// Where it is, for errors: the URL with its password redacted, or the host.
    shown: Arc<str>,
}

/// How long connecting, or any one call, may take before PostgreSQL is reported as
/// not answering (a server that accepts connections and never answers, or is stopped).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// `call`, or an error naming PostgreSQL and where it is if no answer came within
/// [`CALL_TIMEOUT`] and `slack` (a worker's link's longest delay).
async fn within<T>(
    shown: &str,
    slack: Duration,
    what: &str,
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let deadline = CALL_TIMEOUT + slack;
    tokio::time::timeout(deadline, call).await.unwrap_or_else(|_| {
        Err(BackendError::ServiceUnreachable {
            service: "PostgreSQL",
            url: shown.to_string(),
            reason: format!("no answer to {what} within {} s", seconds(deadline)),
        })
    })
}

/// A deadline as its message says it: "5" (the call's own), "7.5" (with a link's delay).
fn seconds(deadline: Duration) -> String {
    let s = deadline.as_secs_f64();
    if s.fract() == 0.0 { format!("{s:.0}") } else { format!("{s:.1}") }
}

/// What a call reports while the worker's link is cut, or when a cut ended it: the
/// connection is lost, as a Redis client's is (`redis.rs`).
fn cut() -> BackendError {
    BackendError::Lost { service: "PostgreSQL", message: "the link is cut (partition)".into() }
}

/// A connection string as errors may show it: a URL with its password redacted; for
/// `key=value` strings, only the host(s) and port(s), never the rest.
fn shown(url: &str, config: &tokio_postgres::Config) -> String {
    if url.contains("://") {
        return redact_url(url);
    }
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    match (hosts.is_empty(), ports.is_empty()) {
        (true, _) => "the default host".to_string(),
        (false, true) => hosts.join(","),
        (false, false) => format!("{} port {}", hosts.join(","), ports.join(",")),
    }
}

impl PgStorage {
    /// `label` is shown instead of the connection string when given (private servers);
    /// else the URL, with its password redacted.
    pub fn open(url: &str, label: Option<&str>) -> Result<Self, BackendError> {
        let mut config = url.parse::<tokio_postgres::Config>().map_err(|e| {
            BackendError::ServiceUnreachable {
                service: "PostgreSQL",
                url: redact_url(url),
                reason: e.to_string(),
            }
        })?;
        config.connect_timeout(CALL_TIMEOUT);
        let shown: Arc<str> = shown(url, &config).into();
        let label = label.map_or_else(|| format!("PostgreSQL at {shown}"), str::to_string);
        Ok(PgStorage { config: Arc::new(config), label, shown })
    }

    /// A connection, with the run's schema and tables created if they are not yet.
    /// Where the server listens (the first host of the connection string): what a
    /// proxy in front of it dials. None: no host given (libpq's defaults).
    fn upstream(&self) -> Option<Upstream> {
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        Some(match self.config.get_hosts().first()? {
            Host::Tcp(host) => Upstream::Tcp { host: host.clone(), port },
            Host::Unix(dir) => Upstream::Unix(dir.join(format!(".s.PGSQL.{port}"))),
        })
    }

    /// Where a foreign program reaches this PostgreSQL: as the same user, on the same
    /// database, through its proxy.
    pub fn program_server(&self) -> Option<crate::backend::ProgramServer> {
        let user = self.config.get_user().unwrap_or("postgres");
        let dbname = self.config.get_dbname().unwrap_or(user);
        let password = self.config.get_password().map(|p| String::from_utf8_lossy(p).into_owned());
        Some(crate::backend::ProgramServer::postgres(self.upstream()?, user, dbname, password))
    }

    /// A bare session (no schema of the run's, nothing created), which the server ends
    /// after `idle_ms` without a statement (0: never): the advisory lock's.
    pub async fn session(&self, idle_ms: u64) -> Result<Client, BackendError> {
        let client = open(&self.config, &self.shown, Duration::ZERO).await?;
        if idle_ms > 0 {
            let set = format!("SET idle_session_timeout = {idle_ms}");
            self.call("setting the session's idle timeout", client.batch_execute(&set)).await?;
        }
        Ok(client)
    }

    /// `statement`, within [`CALL_TIMEOUT`]; its error in PostgreSQL's own words.
    pub async fn call<T>(
        &self,
        what: &str,
        statement: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, BackendError> {
        within(&self.shown, Duration::ZERO, what, async { statement.await.map_err(sql_error) })
            .await
    }

    /// Each step has [`CALL_TIMEOUT`].
    pub async fn connect(&self, keys: &Keys) -> Result<PgClient, BackendError> {
        self.connect_to(&self.config, keys, None).await
    }

    /// A connection through a worker's link: the client dials the link's proxy, which
    /// carries the connection to the server's TCP port or unix socket, and waits for an
    /// answer as much longer as the link's longest delay. (Of several hosts in the
    /// connection string, the first is the one reached.)
    pub async fn connect_via(
        &self,
        keys: &Keys,
        link: &WorkerLink,
    ) -> Result<PgClient, BackendError> {
        let unreachable = |reason: String| BackendError::ServiceUnreachable {
            service: "PostgreSQL",
            url: self.shown.to_string(),
            reason,
        };
        let Some(upstream) = self.upstream() else {
            return Err(unreachable("link faults need a host in the connection string".into()));
        };
        let proxy = link
            .dial(upstream)
            .await
            .map_err(|e| unreachable(format!("could not start the link's proxy: {e}")))?;
        let mut config = tokio_postgres::Config::new();
        config.host(proxy.ip().to_string()).port(proxy.port()).connect_timeout(CALL_TIMEOUT);
        if let Some(user) = self.config.get_user() {
            config.user(user);
        }
        if let Some(password) = self.config.get_password() {
            config.password(password);
        }
        if let Some(dbname) = self.config.get_dbname() {
            config.dbname(dbname);
        }
        if let Some(options) = self.config.get_options() {
            config.options(options);
        }
        let link = PgLink { link: link.clone(), cuts_seen: link.cuts(), config: Arc::new(config) };
        let config = link.config.clone();
        self.connect_to(&config, keys, Some(link)).await
    }

    async fn connect_to(
        &self,
        config: &tokio_postgres::Config,
        keys: &Keys,
        link: Option<PgLink>,
    ) -> Result<PgClient, BackendError> {
        let slack = link.as_ref().map_or(Duration::ZERO, |l| l.link.max_delay());
        let client = open(config, &self.shown, slack).await?;
        let schema = schema_of(keys);
        let expire_s = keys.expire_ms.div_ceil(1000);
        let setup =
            async { client.batch_execute(&setup(&schema, expire_s)).await.map_err(sql_error) };
        within(&self.shown, slack, "creating the run's tables", setup).await?;
        Ok(PgClient { client, schema, in_transaction: false, shown: self.shown.clone(), link })
    }
}

/// A new connection to the server `config` reaches.
async fn open(
    config: &tokio_postgres::Config,
    shown: &str,
    slack: Duration,
) -> Result<Client, BackendError> {
    let connected = within(shown, slack, "the connection", async {
        config.connect(NoTls).await.map_err(|e| BackendError::ServiceUnreachable {
            service: "PostgreSQL",
            url: shown.to_string(),
            reason: e.to_string(),
        })
    });
    let (client, connection) = connected.await?;
    tokio::spawn(async move {
        // The client reports a closed connection on its next call.
        let _ = connection.await;
    });
    Ok(client)
}

/// A worker's link under a connection, and what reconnecting through it takes.
struct PgLink {
    link: WorkerLink,
    /// The link's cuts this connection has reconnected after.
    cuts_seen: u64,
    /// The connection string to the link's proxy.
    config: Arc<tokio_postgres::Config>,
}

/// `fencelab_<run id>`: the run's schema, an SQL identifier (the id is hex digits).
/// The run's own schema: every table of the run's lives there (pg-boss's too).
pub fn schema_of(keys: &Keys) -> String {
    format!("fencelab_{}", keys.run_id)
}

/// What a run's schema comment says before its deadline (unix seconds).
const DEADLINE_NOTE: &str = "fencelab: drop after ";

/// Drop the schemas of earlier runs whose deadline has passed (runs killed outright),
/// among the ones this user owns and may drop; nothing else is looked at.
fn sweep_expired() -> String {
    format!(
        "DO $$ DECLARE s name; BEGIN
           FOR s IN SELECT nspname FROM pg_namespace
               WHERE nspname ~ '^fencelab_[0-9a-f]{{8}}$'
                 AND pg_has_role(current_user, nspowner, 'MEMBER')
                 AND obj_description(oid, 'pg_namespace') ~ '^{DEADLINE_NOTE}[0-9]{{1,18}}$'
                 AND substr(obj_description(oid, 'pg_namespace'), {from})::bigint
                     < extract(epoch FROM now())
           LOOP
             EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE', s);
           END LOOP;
         END $$;",
        from = DEADLINE_NOTE.len() + 1
    )
}

/// Create the run's tables once. A run's connections open together and wait for one
/// another on the run's advisory lock; the first creates the tables, and finds the
/// schemas of runs killed outright and drops them, under a lock every run on the
/// server shares; the others find the tables there and take no other lock. (Every
/// connection used to sweep: a server shared by several runs then queued all their
/// connections behind one lock, and on a loaded machine the last waited past its
/// deadline.) The schema's deadline is `expire_s` from its creation.
fn setup(s: &str, expire_s: u64) -> String {
    let sweep = sweep_expired();
    format!(
        "BEGIN;
         SELECT pg_advisory_xact_lock(hashtext('{s}'));
         DO $setup$ BEGIN
         IF to_regclass('{s}.accounts') IS NULL THEN
         PERFORM pg_advisory_xact_lock(hashtext('fencelab: sweep'));
         {sweep}
         CREATE SCHEMA IF NOT EXISTS {s};
         EXECUTE format('COMMENT ON SCHEMA {s} IS %L',
             '{DEADLINE_NOTE}' || (extract(epoch FROM now())::bigint + {expire_s}));
         CREATE TABLE IF NOT EXISTS {s}.record (
             id int PRIMARY KEY, writer text, value text, fence_token bigint NOT NULL DEFAULT 0);
         INSERT INTO {s}.record (id) VALUES (1) ON CONFLICT DO NOTHING;
         CREATE TABLE IF NOT EXISTS {s}.history (
             seq bigserial PRIMARY KEY, writer text NOT NULL, token bigint, value text NOT NULL);
         CREATE TABLE IF NOT EXISTS {s}.applied (key text PRIMARY KEY);
         CREATE SEQUENCE IF NOT EXISTS {s}.fence;
         CREATE TABLE IF NOT EXISTS {s}.items (id int PRIMARY KEY, qty int NOT NULL);
         INSERT INTO {s}.items VALUES (1, {STOCK}) ON CONFLICT DO NOTHING;
         CREATE TABLE IF NOT EXISTS {s}.users (email text NOT NULL);
         CREATE TABLE IF NOT EXISTS {s}.users_unique (email text PRIMARY KEY);
         CREATE TABLE IF NOT EXISTS {s}.jobs (
             id int PRIMARY KEY, state text NOT NULL DEFAULT 'queued', done_by text);
         INSERT INTO {s}.jobs (id) SELECT generate_series(1, {JOBS}) ON CONFLICT DO NOTHING;
         CREATE TABLE IF NOT EXISTS {s}.accounts (
             id int PRIMARY KEY, balance int NOT NULL, version int NOT NULL);
         INSERT INTO {s}.accounts VALUES (1, {BALANCE}, 1) ON CONFLICT DO NOTHING;
         END IF;
         END $setup$;
         COMMIT;"
    )
}

fn sql_error(e: tokio_postgres::Error) -> BackendError {
    // The server's own message ("relation ... does not exist") says more than "db error".
    let message = e.as_db_error().map_or_else(|| e.to_string(), |db| db.message().to_string());
    BackendError::Service { service: "PostgreSQL", message }
}

/// One worker's connection to the SQL storage.
pub struct PgClient {
    client: Client,
    schema: String,
    /// A job claimed `FOR UPDATE SKIP LOCKED` keeps its transaction open until done.
    in_transaction: bool,
    /// Where the server is, for errors.
    shown: Arc<str>,
    /// The worker's link, when its connection goes through one.
    link: Option<PgLink>,
}

impl PgClient {
    /// Before a call over a link: fail at once while it is cut (as a call to a host
    /// whose route is gone does), and open a new connection after each cut (the
    /// proxy closed the old one), as a client that saw its connection drop does. A
    /// transaction left open (a claimed job) ended with the old connection.
    async fn ready(&mut self) -> Result<(), BackendError> {
        let Some(link) = &mut self.link else { return Ok(()) };
        if link.link.is_cut() {
            return Err(cut());
        }
        if link.link.cuts() != link.cuts_seen {
            self.client = open(&link.config, &self.shown, link.link.max_delay()).await?;
            link.cuts_seen = link.link.cuts();
            self.in_transaction = false;
        }
        Ok(())
    }

    /// The link's longest delay: how much longer a call may take.
    fn slack(&self) -> Duration {
        self.link.as_ref().map_or(Duration::ZERO, |l| l.link.max_delay())
    }

    /// `call` within its deadline; a call that failed because a cut closed its
    /// connection meanwhile fails as one the cut refused.
    async fn over<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, BackendError>>,
    ) -> Result<T, BackendError> {
        let cuts = self.link.as_ref().map(|l| l.link.cuts());
        let answer = within(&self.shown, self.slack(), what, call).await;
        self.settle(cuts, answer)
    }

    /// `answer` of a call begun at `cuts`: a cut's error if the link was cut since.
    fn settle<T>(
        &self,
        cuts: Option<u64>,
        answer: Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        match &self.link {
            Some(link) if answer.is_err() && Some(link.link.cuts()) != cuts => Err(cut()),
            _ => answer,
        }
    }

    /// The statement for each check. Each one updates the record and appends to the
    /// history only when the check passes, returning the history row's `seq`: a row
    /// means accepted, and its `seq` is the write's place in the storage's order (the
    /// `UPDATE` holds the record's row lock until the statement commits, so writes take
    /// their numbers in the order they are applied).
    fn statement(&self, check: WriteCheck) -> String {
        let s = &self.schema;
        let (applied, update) = match check {
            WriteCheck::None => (
                String::new(),
                format!("UPDATE {s}.record SET writer = $1, value = $3 WHERE id = 1 RETURNING 1"),
            ),
            WriteCheck::Fencing(compare) => (
                String::new(),
                format!(
                    "UPDATE {s}.record SET writer = $1, value = $3, fence_token = coalesce($2::bigint, 0) \
                     WHERE id = 1 AND fence_token {} coalesce($2::bigint, 0) RETURNING 1",
                    compare.op()
                ),
            ),
            WriteCheck::IdempotencyKey => (
                format!(
                    "key_new AS (INSERT INTO {s}.applied (key) VALUES ($3) \
                     ON CONFLICT DO NOTHING RETURNING key), "
                ),
                format!(
                    "UPDATE {s}.record SET writer = $1, value = $3 \
                     WHERE id = 1 AND EXISTS (SELECT 1 FROM key_new) RETURNING 1"
                ),
            ),
        };
        format!(
            "WITH {applied}written AS ({update}) \
             INSERT INTO {s}.history (writer, token, value) SELECT $1, $2::bigint, $3 FROM written \
             RETURNING seq"
        )
    }

    /// The record's token and the token sequence's last value, in one statement.
    async fn truth(&self) -> Result<StorageTruth, BackendError> {
        let s = &self.schema;
        let sql = format!(
            "SELECT (SELECT fence_token FROM {s}.record WHERE id = 1), \
                    (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {s}.fence)"
        );
        let row = self.client.query_typed_one(&sql, &[]).await.map_err(sql_error)?;
        let number = |i| u64::try_from(row.get::<_, Option<i64>>(i).unwrap_or(0)).unwrap_or(0);
        Ok(StorageTruth { highest: number(0), counter: number(1) })
    }

    async fn drop_schema(&self) -> Result<(), BackendError> {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        self.client.batch_execute(&sql).await.map_err(sql_error)
    }
}

impl PgClient {
    /// The lesson's statement, on the run's own tables.
    async fn run_sql(
        &mut self,
        worker: &str,
        op: &SqlOp,
    ) -> Result<SqlReply, tokio_postgres::Error> {
        let s = &self.schema;
        let c = &self.client;
        let read = SqlReply::read;
        Ok(match op {
            SqlOp::ReadStock => {
                let row =
                    c.query_one(&format!("SELECT qty FROM {s}.items WHERE id = 1"), &[]).await?;
                read(1, Some(i64::from(row.get::<_, i32>(0))))
            }
            SqlOp::SetStock { seen } => {
                let qty = i32::try_from(seen - 1).unwrap_or(0);
                let rows = c
                    .execute(&format!("UPDATE {s}.items SET qty = $1 WHERE id = 1"), &[&qty])
                    .await?;
                SqlReply { rows, ..SqlReply::done(sold(*seen)) }
            }
            SqlOp::TakeStock => {
                let sql = format!(
                    "UPDATE {s}.items SET qty = qty - 1 WHERE id = 1 AND qty > 0 RETURNING qty + 1"
                );
                let before = c.query_opt(&sql, &[]).await?.map(|r| i64::from(r.get::<_, i32>(0)));
                SqlReply { result: before.map(sold), ..SqlReply::rows(u64::from(before.is_some())) }
            }
            SqlOp::FindUser { email } => {
                let sql = format!("SELECT count(*) FROM {s}.users WHERE email = $1");
                read(1, Some(c.query_one(&sql, &[email]).await?.get::<_, i64>(0)))
            }
            SqlOp::AddUser { email, unique } => {
                let sql = if *unique {
                    format!(
                        "INSERT INTO {s}.users_unique (email) VALUES ($1) ON CONFLICT DO NOTHING"
                    )
                } else {
                    format!("INSERT INTO {s}.users (email) VALUES ($1)")
                };
                let rows = c.execute(&sql, &[email]).await?;
                SqlReply { result: (rows == 1).then(|| signed_up(email)), ..SqlReply::rows(rows) }
            }
            SqlOp::ClaimJob { skip_locked } => {
                let mut sql =
                    format!("SELECT id FROM {s}.jobs WHERE state = 'queued' ORDER BY id LIMIT 1");
                if *skip_locked {
                    sql.push_str(" FOR UPDATE SKIP LOCKED");
                    c.batch_execute("BEGIN").await?;
                }
                let job = c.query_opt(&sql, &[]).await?.map(|r| i64::from(r.get::<_, i32>(0)));
                self.in_transaction = *skip_locked && job.is_some();
                if *skip_locked && job.is_none() {
                    c.batch_execute("COMMIT").await?;
                }
                read(u64::from(job.is_some()), job)
            }
            SqlOp::FinishJob { job } => {
                let sql = format!("UPDATE {s}.jobs SET state = 'done', done_by = $2 WHERE id = $1");
                let id = i32::try_from(*job).unwrap_or(0);
                let rows = c.execute(&sql, &[&id, &worker]).await?;
                SqlReply { rows, ..SqlReply::done(did_job(*job)) }
            }
            SqlOp::ReadBalance => {
                let sql = format!("SELECT balance, version FROM {s}.accounts WHERE id = 1");
                let row = c.query_one(&sql, &[]).await?;
                let version = Some(i64::from(row.get::<_, i32>(1)));
                SqlReply { version, ..read(1, Some(i64::from(row.get::<_, i32>(0)))) }
            }
            SqlOp::WriteBalance { seen, version, if_version } => {
                let sql = format!(
                    "UPDATE {s}.accounts SET balance = $1, version = version + 1 WHERE id = 1"
                );
                let balance = i32::try_from(seen + DEPOSIT).unwrap_or(i32::MAX);
                let rows = if *if_version {
                    let read_at = i32::try_from(*version).unwrap_or(0);
                    c.execute(&format!("{sql} AND version = $2"), &[&balance, &read_at]).await?
                } else {
                    c.execute(&sql, &[&balance]).await?
                };
                SqlReply {
                    result: (rows == 1).then(|| deposited(*seen, *version)),
                    ..SqlReply::rows(rows)
                }
            }
        })
    }
}

fn as_sql_token(token: Option<u64>) -> Option<i64> {
    token.map(|t| i64::try_from(t).unwrap_or(i64::MAX))
}

#[async_trait]
impl Storage for PgStorage {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&WorkerLink>,
    ) -> Result<Box<dyn StorageClient>, BackendError> {
        Ok(Box::new(match link {
            None => PgStorage::connect(self, keys).await?,
            Some(link) => PgStorage::connect_via(self, keys, link).await?,
        }))
    }

    fn note(&self) -> Option<String> {
        Some(self.label.clone())
    }

    fn servers_for_programs(&self) -> Vec<crate::backend::ProgramServer> {
        self.program_server().into_iter().collect()
    }

    /// The run's sequence, which `next_token` draws from too.
    fn token_name(&self, keys: &Keys) -> String {
        format!("{}.fence", schema_of(keys))
    }

    /// The history the storage panel lists: a row a program inserts there in its own
    /// transaction is in the storage once that transaction commits.
    fn table_for_programs(&self, keys: &Keys) -> Option<String> {
        Some(format!("{}.history", schema_of(keys)))
    }
}

#[async_trait]
impl StorageClient for PgClient {
    /// One round trip (the statement is sent with its parameters' types, not prepared
    /// first): a link's delay makes it late once, as the simulator's does.
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError> {
        self.ready().await?;
        let token = as_sql_token(write.token);
        let statement = self.statement(check);
        let params: [(&(dyn ToSql + Sync), Type); 3] = [
            (&write.worker.as_str(), Type::TEXT),
            (&token, Type::INT8),
            (&write.value, Type::TEXT),
        ];
        let call = async { self.client.query_typed(&statement, &params).await.map_err(sql_error) };
        let rows = self.over("a write", call).await?;
        Ok(rows.first().and_then(|r| u64::try_from(r.get::<_, i64>(0)).ok()))
    }

    async fn next_token(&mut self) -> Result<u64, BackendError> {
        self.ready().await?;
        let sql = format!("SELECT nextval('{}.fence')", self.schema);
        let call = async { self.client.query_typed_one(&sql, &[]).await.map_err(sql_error) };
        let row = self.over("nextval", call).await?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        self.ready().await?;
        let sql = format!("SELECT writer, token, value FROM {}.history ORDER BY seq", self.schema);
        let call = async { self.client.query_typed(&sql, &[]).await.map_err(sql_error) };
        let rows = self.over("reading the history", call).await?;
        Ok(rows
            .iter()
            .map(|r| StoredWrite {
                worker: r.get::<_, &str>(0).into(),
                token: r.get::<_, Option<i64>>(1).and_then(|t| u64::try_from(t).ok()),
                value: r.get(2),
            })
            .collect())
    }

    async fn observe(&mut self) -> Result<StorageTruth, BackendError> {
        self.ready().await?;
        self.over("reading the record", self.truth()).await
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        self.ready().await?;
        self.over("dropping the run's schema", self.drop_schema()).await
    }

    async fn sql(&mut self, worker: &str, op: &SqlOp) -> Result<SqlReply, BackendError> {
        self.ready().await?;
        let (shown, slack) = (self.shown.clone(), self.slack());
        let cuts = self.link.as_ref().map(|l| l.link.cuts());
        let answer = within(&shown, slack, "a statement", self.sql_now(worker, op)).await;
        self.settle(cuts, answer)
    }
}

impl PgClient {
    /// The lesson's statement, its history row and, when a claimed job is finished,
    /// the commit.
    async fn sql_now(&mut self, worker: &str, op: &SqlOp) -> Result<SqlReply, BackendError> {
        let reply = self.run_sql(worker, op).await.map_err(sql_error)?;
        if let Some(result) = &reply.result {
            let sql =
                format!("INSERT INTO {}.history (writer, value) VALUES ($1, $2)", self.schema);
            self.client.execute(&sql, &[&worker, result]).await.map_err(sql_error)?;
        }
        if matches!(op, SqlOp::FinishJob { .. }) && self.in_transaction {
            self.client.batch_execute("COMMIT").await.map_err(sql_error)?;
            self.in_transaction = false;
        }
        Ok(reply)
    }
}
