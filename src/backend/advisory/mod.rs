//! PostgreSQL as the advisory lock uses it: [`Session`], the handful of statements it
//! needs (take the lock, give it back, keep the session busy, see who holds it), and
//! where sessions come from ([`Sessions`]). A real PostgreSQL is `real.rs`; the
//! simulator's model of one is `sim/advisory.rs`; the lock over it is
//! `lock/advisory.rs`.
//!
//! A session advisory lock belongs to the session that took it, not to a lease: it
//! lives as long as the session does. That is the opposite failure of a lease: a paused
//! holder keeps the lock for as long as its connection lives, and the others wait. A
//! session opened with `idle_session_timeout` is ended by the server after that long
//! without a statement (the lock with it): then the timeout is a lease, and the
//! paused holder's write after it is as stale as on Redis.

mod real;

pub use real::RealPostgres;

use super::BackendError;

/// Who holds a lock, as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// The session's `application_name` (a worker's lock value), else its backend pid.
    pub name: String,
    /// How long it has been idle, in ms; None: a statement is running.
    pub idle_ms: Option<f64>,
}

/// One PostgreSQL session, as the advisory lock uses it.
pub trait Session: Send + 'static {
    /// `pg_try_advisory_lock(id)`, the session named `name` (its `application_name`)
    /// first; in a new session when the server had ended this one (idle too long).
    fn try_lock(
        &mut self,
        id: i64,
        name: &str,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// `pg_advisory_unlock(id)`: whether this session held it (false too when the
    /// session had ended, and the lock with it).
    fn unlock(&mut self, id: i64) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// A statement that keeps the session from idling, answering whether it still
    /// holds `id` (false when the session had ended).
    fn still_holds(&mut self, id: i64) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Who holds `id` now, as `pg_locks` and `pg_stat_activity` list it.
    fn holder(
        &mut self,
        id: i64,
    ) -> impl Future<Output = Result<Option<Holder>, BackendError>> + Send;
}

/// Where sessions come from: a real PostgreSQL or the model.
pub trait Sessions: Send + Sync + 'static {
    type Session: Session;
    /// A session the server ends after `idle_ms` without a statement (0: never).
    fn open(
        &self,
        idle_ms: u64,
    ) -> impl Future<Output = Result<Self::Session, BackendError>> + Send;
    fn describe(&self) -> String;
    /// Where a foreign program reaches it (None: the simulator's model).
    fn program_server(&self) -> Option<super::ProgramServer> {
        None
    }
}

/// The advisory lock's id for a run: a 64-bit number from the run's lock key (FNV-1a),
/// the same on every backend and for a program told it (`FENCELAB_KEY` is this id).
pub fn lock_id(key: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // Positive, so it reads the same in every language's integers.
    i64::try_from(hash >> 1).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_runs_lock_id_is_its_own_and_positive() {
        let a = super::lock_id("fencelab:{1a2b}:lock");
        assert_eq!(a, super::lock_id("fencelab:{1a2b}:lock"));
        assert_ne!(a, super::lock_id("fencelab:{1a2c}:lock"));
        assert!(a > 0);
    }
}
