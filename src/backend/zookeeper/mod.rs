//! ZooKeeper as the lock recipe uses it: [`Znodes`], the handful of calls it needs
//! (make a path, join a queue with an ephemeral sequential znode, read the queue, delete,
//! wait for a znode to go), and where sessions come from ([`ZkEnsemble`]). A real
//! ZooKeeper is `real.rs` (the `zookeeper-client` crate); the simulator's model of one
//! is `sim/zookeeper.rs`; the lock over it is `lock/zookeeper.rs`.
//!
//! A client here is one *session*: its ephemeral znodes live exactly as long as it does,
//! and it lives as long as it sends heartbeats within its timeout. That timeout is fixed
//! when the session opens, which is why [`ZkEnsemble::connect`] takes it.

mod real;

pub use real::RealZooKeeper;

use super::BackendError;
use crate::scenario::ZOOKEEPER_SESSION_MS as SESSION_MS;

/// A znode this client created in a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// `lock-0000000003`: the prefix and the sequence number ZooKeeper appended.
    pub name: String,
    /// The parent's child counter when it was created: per parent, so two lock paths
    /// hand out the same numbers.
    pub seq: i64,
    /// The zxid of the transaction that created it: one counter for the whole ensemble.
    pub czxid: i64,
}

/// One znode of a queue, as anyone can read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub name: String,
    /// What its creator stored in it: the worker's lock value.
    pub data: String,
    pub czxid: i64,
    /// The session that owns it (an ephemeral znode goes with its session).
    pub session: i64,
}

/// A queue's znodes in sequence order (the first holds the lock), and the zxid of the
/// last change to the queue (a znode joined or went).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queue {
    pub children: Vec<Child>,
    pub pzxid: i64,
}

/// A sequential znode's sequence number: the ten digits ZooKeeper appends to its name,
/// whatever the prefix (`lock-0000000003`, kazoo's `<uuid>__lock__0000000003`).
pub fn sequence(name: &str) -> Option<i64> {
    let digits = name.len().checked_sub(10).and_then(|at| name.get(at..))?;
    digits.chars().all(|c| c.is_ascii_digit()).then(|| digits.parse().ok()).flatten()
}

/// A queue's znodes in the recipe's order: by sequence number, not by name (a library
/// that puts a random prefix in front sorts otherwise by name).
pub fn in_sequence(children: &mut [Child]) {
    children.sort_by(|a, b| (sequence(&a.name), &a.name).cmp(&(sequence(&b.name), &b.name)));
}

/// The ZooKeeper calls the lock uses: one session.
pub trait Znodes: Send + 'static {
    /// Create `path` as an empty persistent znode unless it exists; its creation zxid.
    fn ensure(&mut self, path: &str) -> impl Future<Output = Result<i64, BackendError>> + Send;
    /// Join the queue under `dir`: an ephemeral sequential znode holding `data`.
    fn enqueue(
        &mut self,
        dir: &str,
        data: &str,
    ) -> impl Future<Output = Result<Queued, BackendError>> + Send;
    fn queue(&mut self, dir: &str) -> impl Future<Output = Result<Queue, BackendError>> + Send;
    /// Delete `path`; false when it was not there.
    fn delete(&mut self, path: &str) -> impl Future<Output = Result<bool, BackendError>> + Send;
    /// Wait until `path` is gone (a watch set now: no polling). Not bounded by a
    /// deadline: waiting is what the caller wants, and it races it against its own timers.
    fn gone(&mut self, path: &str) -> impl Future<Output = Result<(), BackendError>> + Send;
    /// Freeze (or thaw) the session's heartbeats, as a paused process stops sending
    /// them: a session frozen longer than its timeout expires on the server.
    fn set_paused(&mut self, paused: bool);
}

/// Where sessions come from: a real ZooKeeper or the model.
pub trait ZkEnsemble: Send + Sync + 'static {
    type Session: Znodes;
    /// Open a session whose timeout (the recipe's lease) is `session_ms` real ms.
    fn connect(
        &self,
        session_ms: u64,
    ) -> impl Future<Output = Result<Self::Session, BackendError>> + Send;
    fn describe(&self) -> String;
    /// Where a foreign program reaches it (None: the simulator's model).
    fn program_server(&self) -> Option<Result<super::ProgramServer, BackendError>> {
        None
    }
}

/// A lease ZooKeeper cannot grant as asked, said before any session opens.
pub fn check_session_ms(session_ms: u64) -> Result<(), BackendError> {
    if SESSION_MS.contains(&session_ms) {
        return Ok(());
    }
    Err(BackendError::Unsupported(format!(
        "ZooKeeper grants sessions of {} to {} ms (2 to 20 ticks of 100 ms); this run's lease is {session_ms} ms in real time (ttl_ms, stretched by slow motion): pick a ttl_ms or a speed that fits",
        SESSION_MS.start(),
        SESSION_MS.end()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_ordered_by_sequence_whatever_the_names_prefix() {
        let child =
            |name: &str| Child { name: name.into(), data: String::new(), czxid: 0, session: 0 };
        let mut queue = vec![
            child("f37ffbe594b84c70__lock__0000000002"),
            child("0a1b2c3d__lock__0000000010"),
            child("ffff__lock__0000000001"),
        ];
        in_sequence(&mut queue);
        let names: Vec<&str> = queue.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ffff__lock__0000000001",
                "f37ffbe594b84c70__lock__0000000002",
                "0a1b2c3d__lock__0000000010"
            ]
        );
        assert_eq!(sequence("lock-0000000003"), Some(3));
        assert_eq!(sequence("short"), None);
    }
}
