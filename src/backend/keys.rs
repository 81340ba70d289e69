//! The keys one run uses. Every key starts with `fencelab:{<run id>}:`, so a run can
//! delete exactly its own keys and never touches anything else on a shared Redis.
//!
//! The braces are a Redis Cluster hash tag: only `<run id>` is hashed, so all keys of
//! one run live in one slot, on one master. The scripts that touch two keys at once
//! (the lock and its fence counter, the storage and its high-water mark) and the
//! pipelines that read several would otherwise fail with `CROSSSLOT` on a cluster.

/// The full names of a run's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The run's id: what names its PostgreSQL schema.
    pub run_id: String,
    /// `fencelab:{<run id>}:`, in front of every key.
    pub prefix: String,
    /// The lock itself: `SET ... NX PX`.
    pub lock: String,
    /// The fence counter: `INCR` hands out tokens.
    pub fence: String,
    /// The storage: a list of JSON-encoded writes.
    pub storage: String,
    /// The highest fencing token the storage has accepted.
    pub storage_highest: String,
    /// The idempotency keys the storage has applied (a set).
    pub storage_applied: String,
    /// The queue of jobs (`lock = "stream"`): a Redis Stream whose consumer group,
    /// pending entries and consumers live inside it, so deleting it deletes them all.
    pub jobs: String,
    /// The channel a releasing worker publishes on (`wait = "notify"`): a channel, not
    /// a key, so `all()` leaves it out; named under the prefix so a shared server's
    /// other subscribers never hear it, with the run's hash tag so a cluster's
    /// sharded channels would keep it with the keys.
    pub released: String,
    /// The TTL (real ms) the fence counter and the storage keys get each time they are
    /// written, so a run that cannot delete them (killed with SIGKILL, a server that
    /// stopped answering) leaves nothing behind for long: well beyond the run's length.
    pub expire_ms: u64,
    /// The scenario's lease in real ms, for a lock whose lease is fixed when a client
    /// connects rather than at each acquire (a ZooKeeper session's timeout); 0 until
    /// the run sets it.
    pub lease_ms: u64,
}

/// A run's keys expire this long after their last write, at the least (1 hour).
pub const MIN_EXPIRE_MS: u64 = 3_600_000;

impl Keys {
    /// Keys for a run with the given id.
    pub fn for_run(run_id: &str) -> Self {
        let prefix = format!("fencelab:{{{run_id}}}:");
        Keys {
            lock: format!("{prefix}lock"),
            fence: format!("{prefix}fence"),
            storage: format!("{prefix}storage"),
            storage_highest: format!("{prefix}storage:highest"),
            storage_applied: format!("{prefix}storage:applied"),
            jobs: format!("{prefix}jobs"),
            released: format!("{prefix}released"),
            prefix,
            run_id: run_id.to_string(),
            expire_ms: MIN_EXPIRE_MS,
            lease_ms: 0,
        }
    }

    /// The same keys, expiring `run_ms` (the run's longest possible length, in real
    /// ms) plus an hour after their last write.
    pub fn expiring_after(mut self, run_ms: u64) -> Self {
        self.expire_ms = run_ms.saturating_add(MIN_EXPIRE_MS).min(i64::MAX as u64);
        self
    }

    /// The same keys, for a run whose lease is `lease_ms` real ms.
    pub fn with_lease(mut self, lease_ms: u64) -> Self {
        self.lease_ms = lease_ms;
        self
    }

    /// All keys of the run: what cleanup deletes.
    pub fn all(&self) -> [&str; 6] {
        [
            &self.lock,
            &self.fence,
            &self.storage,
            &self.storage_highest,
            &self.storage_applied,
            &self.jobs,
        ]
    }
}

/// A short random run id (8 hex digits), unique enough for concurrent runs on one server.
pub fn new_run_id(rng: &mut fastrand::Rng) -> String {
    format!("{:08x}", rng.u32(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_lives_under_the_run_prefix() {
        let keys = Keys::for_run("abc");
        assert_eq!(keys.prefix, "fencelab:{abc}:");
        for k in keys.all() {
            assert!(k.starts_with("fencelab:{abc}:"), "{k}");
        }
    }

    /// A Redis Cluster hashes only what is between the first `{` and the next `}`:
    /// every key of a run must have exactly the run id there, so they share a slot.
    #[test]
    fn every_key_of_a_run_has_the_run_id_as_its_hash_tag() {
        let keys = Keys::for_run("1f2e3d4c");
        for k in keys.all() {
            let open = k.find('{').unwrap();
            let close = open + k[open..].find('}').unwrap();
            assert_eq!(&k[open + 1..close], "1f2e3d4c", "{k}");
        }
    }
}
