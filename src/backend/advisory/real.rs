//! The advisory lock on a real PostgreSQL: one connection per session, opened again
//! after the server ended one (idle too long). Every statement has the storage's
//! deadline (`PgStorage::call`).

use futures_util::future::BoxFuture;
use tokio_postgres::Client;

use super::{Holder, Session, Sessions};
use crate::backend::BackendError;
use crate::backend::storage::postgres::PgStorage;

/// A PostgreSQL the advisory lock's sessions open on: the storage's own server.
pub struct RealPostgres {
    server: PgStorage,
    label: String,
}

impl RealPostgres {
    pub fn new(server: PgStorage, label: &str) -> Self {
        RealPostgres { server, label: label.to_string() }
    }
}

impl Sessions for RealPostgres {
    type Session = PgSession;

    async fn open(&self, idle_ms: u64) -> Result<PgSession, BackendError> {
        let client = self.server.session(idle_ms).await?;
        Ok(PgSession { server: self.server.clone(), idle_ms, client: Some(client) })
    }

    fn describe(&self) -> String {
        self.label.clone()
    }

    fn program_server(&self) -> Option<crate::backend::ProgramServer> {
        self.server.program_server()
    }
}

/// One session; None while the server has ended it and no statement has opened
/// another yet.
pub struct PgSession {
    server: PgStorage,
    idle_ms: u64,
    client: Option<Client>,
}

/// `pg_locks` spells a bigint advisory key as two oids and `objsubid = 1`.
fn split(id: i64) -> (u32, u32) {
    let bits = id as u64;
    ((bits >> 32) as u32, (bits & 0xffff_ffff) as u32)
}

/// Whether an error says the session is gone: its connection closed, or the server
/// ended it for idling (SQLSTATE 57P05, on the first statement after).
fn ended(e: &BackendError) -> bool {
    let text = e.to_string();
    text.contains("idle-session timeout") || text.contains("connection closed")
}

/// A statement's future, borrowing only the session's connection.
type Statement<'c, T> = BoxFuture<'c, Result<T, tokio_postgres::Error>>;

impl PgSession {
    /// The session, opened again if the server ended it.
    async fn client(&mut self) -> Result<&Client, BackendError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = Some(self.server.session(self.idle_ms).await?);
        }
        self.client.as_ref().ok_or_else(|| BackendError::Unsupported("no session".into()))
    }

    /// `statement` on the session, opened again if the server had ended it; once more
    /// if it turns out to have ended only as the statement was sent. A session idle
    /// past its timeout is ended by the server at any moment, and a client hears of it
    /// only when it next speaks: that is the lease at work, never an error of the run.
    async fn on_session<T>(
        &mut self,
        what: &str,
        statement: impl for<'c> Fn(&'c Client) -> Statement<'c, T>,
    ) -> Result<T, BackendError> {
        for _ in 0..2 {
            let server = self.server.clone();
            let client = self.client().await?;
            let outcome = server.call(what, statement(client)).await;
            if let Some(value) = self.gone(outcome)? {
                return Ok(value);
            }
        }
        Err(BackendError::Service {
            service: "PostgreSQL",
            message: format!("the server ended two sessions in a row, each at {what}"),
        })
    }

    /// `outcome` of a statement on the session: a session the server ended is no
    /// error here, but None (and a new one next time).
    fn gone<T>(&mut self, outcome: Result<T, BackendError>) -> Result<Option<T>, BackendError> {
        match outcome {
            Ok(value) => Ok(Some(value)),
            Err(e) if ended(&e) => {
                self.client = None;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

const HOLDS: &str = "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
     AND granted AND pid = pg_backend_pid() AND classid = $1 AND objid = $2 AND objsubid = 1)";

impl Session for PgSession {
    async fn try_lock(&mut self, id: i64, name: &str) -> Result<bool, BackendError> {
        let sql = "SELECT set_config('application_name', $1, false), pg_try_advisory_lock($2)";
        let name = name.to_string();
        self.on_session("pg_try_advisory_lock", |client| {
            let name = name.clone();
            Box::pin(async move { Ok(client.query_one(sql, &[&name, &id]).await?.get(1)) })
        })
        .await
    }

    async fn unlock(&mut self, id: i64) -> Result<bool, BackendError> {
        let Some(client) = self.client.as_ref().filter(|c| !c.is_closed()) else {
            self.client = None;
            return Ok(false);
        };
        let row = self
            .server
            .call("pg_advisory_unlock", client.query_one("SELECT pg_advisory_unlock($1)", &[&id]))
            .await;
        Ok(self.gone(row.map(|r| r.get::<_, bool>(0)))?.unwrap_or(false))
    }

    async fn still_holds(&mut self, id: i64) -> Result<bool, BackendError> {
        let Some(client) = self.client.as_ref().filter(|c| !c.is_closed()) else {
            self.client = None;
            return Ok(false);
        };
        let (classid, objid) = split(id);
        let row = self
            .server
            .call("a check of the lock", client.query_one(HOLDS, &[&classid, &objid]))
            .await;
        Ok(self.gone(row.map(|r| r.get::<_, bool>(0)))?.unwrap_or(false))
    }

    /// Read on a new session when the server had ended this one: who holds the lock
    /// is the server's to say, whichever session asks.
    async fn holder(&mut self, id: i64) -> Result<Option<Holder>, BackendError> {
        let (classid, objid) = split(id);
        let sql = "SELECT a.application_name, a.pid, a.state LIKE 'idle%', \
             (EXTRACT(EPOCH FROM clock_timestamp() - a.state_change) * 1000)::float8 \
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1 \
             AND l.objid = $2 AND l.objsubid = 1";
        let rows = self
            .on_session("reading pg_locks", |client| {
                Box::pin(async move { client.query(sql, &[&classid, &objid]).await })
            })
            .await?;
        Ok(rows.first().map(|row| {
            let (name, pid): (String, i32) = (row.get(0), row.get(1));
            let idle: bool = row.get(2);
            let idle_ms: Option<f64> = row.get(3);
            Holder {
                name: if name.is_empty() { pid.to_string() } else { name },
                idle_ms: idle_ms.filter(|_| idle),
            }
        }))
    }
}
