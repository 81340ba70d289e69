//! The class's storage as the verdict reads it. Every student's ACL user can write
//! the run's storage list (their worker must), so what the list holds at the end is
//! not proof of a write: an entry counts only when an accepted write in the log (a
//! student's, checked by the roll and against the storage as it was) accounts for
//! it. The rest is left out of the verdict and said, as a refusal.

use std::sync::{Arc, OnceLock};

use crate::backend::redis::RedisBackend;
use crate::backend::{
    BackendError, Keys, Storage, StorageClient, StorageTruth, StoredWrite, WriteCheck, async_trait,
};
use crate::engine::log::{EventKind, EventLog, WorkerEvent};

/// The class Redis's storage, read back through the run's log (set once the run
/// has one).
pub struct VettedStorage {
    pub redis: RedisBackend,
    pub log: Arc<OnceLock<Arc<EventLog>>>,
}

#[async_trait]
impl Storage for VettedStorage {
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&crate::backend::WorkerLink>,
    ) -> Result<Box<dyn StorageClient>, BackendError> {
        crate::backend::refuse_link(link)?;
        let inner = Storage::connect(&self.redis, keys).await?;
        Ok(Box::new(VettedClient { inner, log: self.log.clone() }))
    }
}

struct VettedClient {
    inner: Box<dyn StorageClient>,
    log: Arc<OnceLock<Arc<EventLog>>>,
}

#[async_trait]
impl StorageClient for VettedClient {
    async fn write(
        &mut self,
        write: &StoredWrite,
        check: WriteCheck,
    ) -> Result<Option<u64>, BackendError> {
        self.inner.write(write, check).await
    }

    async fn next_token(&mut self) -> Result<u64, BackendError> {
        self.inner.next_token().await
    }

    async fn read_all(&mut self) -> Result<Vec<StoredWrite>, BackendError> {
        let entries = self.inner.read_entries().await?;
        let Some(log) = self.log.get() else {
            return entries.into_iter().map(|e| e.map_err(BackendError::redis)).collect();
        };
        Ok(accounted(entries, log))
    }

    async fn observe(&mut self) -> Result<StorageTruth, BackendError> {
        self.inner.observe().await
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        self.inner.cleanup().await
    }
}

/// The entries of `stored` an accepted write in `log` accounts for (each write one
/// entry); each other entry, junk that is no write at all included, is logged as
/// refused.
fn accounted(stored: Vec<Result<StoredWrite, String>>, log: &EventLog) -> Vec<StoredWrite> {
    let mut writes: Vec<StoredWrite> = log
        .snapshot()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Worker {
                worker,
                what: WorkerEvent::Wrote { value, token, accepted: true, .. },
            } => Some(StoredWrite { worker: worker.clone(), token, value }),
            _ => None,
        })
        .collect();
    let mut kept = Vec::new();
    let (mut junk, mut unaccounted) = (Named::default(), Named::default());
    for entry in stored {
        let entry = match entry {
            Ok(entry) => entry,
            Err(what) => {
                junk.name(log, "an unknown student", || {
                    format!("the storage holds an entry that is not a write, {what}: left out of the verdict")
                });
                continue;
            }
        };
        if let Some(i) = writes.iter().position(|w| *w == entry) {
            writes.remove(i);
            kept.push(entry);
        } else {
            unaccounted.name(log, &entry.worker.clone(), || {
                format!(
                    "the storage holds {}, which no accepted write of the run accounts for: left out of the verdict",
                    entry.label()
                )
            });
        }
    }
    junk.count(log, "entries that are not writes");
    unaccounted.count(log, "entries no accepted write accounts for");
    kept
}

/// Entries named one by one, up to [`NAMED_IN_FULL`]; the rest counted in one line, so
/// a storage filled with junk makes a few lines on every screen, not one an entry.
#[derive(Default)]
struct Named {
    total: u64,
}

/// How many refused entries of one kind are named one by one.
const NAMED_IN_FULL: u64 = 10;

impl Named {
    fn name(&mut self, log: &EventLog, student: &str, why: impl FnOnce() -> String) {
        self.total += 1;
        if self.total <= NAMED_IN_FULL {
            log.append(EventKind::Refused { student: student.into(), why: why(), total: 1 });
        }
    }

    /// One line for those past the first [`NAMED_IN_FULL`].
    fn count(&self, log: &EventLog, what: &str) {
        if self.total > NAMED_IN_FULL {
            let why = format!(
                "and {} more {what} ({} in all): left out of the verdict",
                self.total - NAMED_IN_FULL,
                self.total
            );
            log.append(EventKind::Refused {
                student: "the storage".into(),
                why,
                total: self.total,
            });
        }
    }
}
