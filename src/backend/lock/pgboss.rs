//! pg-boss's job queue on PostgreSQL (`lock = "pg-boss"`): no lock at all. A worker
//! fetches the job (`SELECT ... FOR UPDATE SKIP LOCKED`, then `state = 'active'`), and
//! it is that worker's until it completes it, or until pg-boss's maintenance finds it
//! active past its `expire_in` and puts it back for a retry, when the next fetch gives
//! it to another worker with `retry_count` one higher. A worker frozen past the expiry
//! wakes still holding the job object, and finishes a job the queue already gave to
//! another.
//!
//! Only a program takes it: its library is pg-boss (npm), and fencelab has no client
//! of its own for built-in workers (the parser refuses one). The program is told the
//! queue as `FENCELAB_KEY` = `<schema>.<queue>`, the schema being the run's own, so
//! pg-boss's tables are dropped with the run's. The truth is read from pg-boss's own
//! table, never from the program: the active job of the queue, named `<id>:<retry
//! count>` (a fetch's grant: the same job fetched again is a new one), and what is
//! left of `started_on + expire_in`.

use tokio_postgres::Client;

use crate::backend::storage::postgres::{PgStorage, schema_of};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, ProgramServer, Storage,
    StorageClient, async_trait,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// The queue's name within the run's schema.
const QUEUE: &str = "work";

/// pg-boss's queue on a real PostgreSQL (None: the simulator, which has no pg-boss).
pub struct PgBossQueue {
    server: Option<PgStorage>,
    label: String,
}

impl PgBossQueue {
    pub fn new(server: Option<PgStorage>) -> Self {
        let label = match &server {
            Some(server) => format!("pg-boss on {}", server.note().unwrap_or_default()),
            None => "pg-boss (no simulator: a real PostgreSQL only)".to_string(),
        };
        PgBossQueue { server, label }
    }
}

/// Why a built-in worker cannot take it.
fn programs_only() -> BackendError {
    BackendError::Unsupported(
        "pg-boss's queue is taken only by a program with pg-boss itself (docs/worker-protocol.md)"
            .into(),
    )
}

#[async_trait]
impl LockService for PgBossQueue {
    /// A reader of pg-boss's table: the observer's, and a program's bench's.
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&crate::backend::WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        crate::backend::refuse_link(link)?;
        let Some(server) = self.server.clone() else {
            return Err(BackendError::Unsupported(
                "pg-boss needs a real PostgreSQL: the simulator has no model of it".into(),
            ));
        };
        let client = server.session(0).await?;
        Ok(Box::new(PgBossClient { server, client, schema: schema_of(keys), made: false }))
    }

    fn describe(&self) -> String {
        self.label.clone()
    }

    fn servers_for_programs(&self) -> Result<Vec<ProgramServer>, BackendError> {
        Ok(self.server.as_ref().and_then(PgStorage::program_server).into_iter().collect())
    }

    /// `<schema>.<queue>`: the schema to hand pg-boss (the run's own) and the queue.
    fn lock_name(&self, keys: &Keys) -> String {
        format!("{}.{QUEUE}", schema_of(keys))
    }
}

/// One session reading pg-boss's table in the run's schema.
pub struct PgBossClient {
    server: PgStorage,
    client: Client,
    schema: String,
    /// Whether pg-boss has made its tables yet (it does as its first program starts).
    made: bool,
}

impl PgBossClient {
    /// The queue's active job, `<id>:<retry count>`, and the ms left before it
    /// expires. Before pg-boss has made its tables, nobody holds anything.
    async fn active(&mut self) -> Result<Option<(String, f64)>, BackendError> {
        if !self.made {
            let table = format!("{}.job", self.schema);
            let exists = "SELECT to_regclass($1) IS NOT NULL";
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&table];
            let asked = self.client.query_one(exists, &params);
            let row = self.server.call("looking for pg-boss's job table", asked).await?;
            self.made = row.get(0);
            if !self.made {
                return Ok(None);
            }
        }
        let sql = format!(
            "SELECT id::text || ':' || retry_count, \
             (EXTRACT(EPOCH FROM started_on + expire_in - now()) * 1000)::float8 \
             FROM {}.job WHERE name = $1 AND state = 'active' ORDER BY started_on DESC LIMIT 1",
            self.schema
        );
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&QUEUE];
        let read = self.client.query(&sql, &params);
        let rows = self.server.call("reading pg-boss's job table", read).await?;
        Ok(rows.first().map(|row| (row.get(0), row.get::<_, Option<f64>>(1).unwrap_or(0.0))))
    }
}

#[async_trait]
impl LockClient for PgBossClient {
    async fn acquire(
        &mut self,
        _value: &str,
        _ttl_ms: u64,
        _mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        Err(programs_only())
    }

    async fn release(&mut self, _value: &str, _mode: ReleaseMode) -> Result<bool, BackendError> {
        Err(programs_only())
    }

    async fn renew(
        &mut self,
        _value: &str,
        _ttl_ms: u64,
        _mode: RenewMode,
    ) -> Result<bool, BackendError> {
        Err(programs_only())
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        Ok(self.active().await?.map(|(grant, _)| grant))
    }

    /// The active job's grant and what is left of its expiry (0 once past it, while
    /// maintenance has not yet put it back).
    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let active = self.active().await?;
        Ok(LockTruth {
            pttl_ms: active.as_ref().map(|(_, left)| left.max(0.0).round() as u64),
            holder_value: active.map(|(grant, _)| grant),
            counter: None,
            nodes: Vec::new(),
        })
    }

    /// pg-boss's tables are in the run's schema, which the storage drops.
    async fn cleanup(&mut self) -> Result<(), BackendError> {
        Ok(())
    }
}
