//! ZooKeeper's lock recipe: each contender joins a queue with an ephemeral sequential
//! znode under the lock path; the first in sequence order holds the lock; each other
//! one watches only the znode just before its own (so a release wakes one waiter, not
//! the whole herd). There is no lease on the lock itself: the znode lives as long as
//! its creator's *session*, and the session as long as heartbeats reach the server
//! within its timeout (the scenario's `ttl_ms`). A client that stops (a GC pause)
//! sends none, the server expires the session, the znode goes, and the next in line
//! holds the lock, while the paused client still believes it does.
//!
//! The fencing token is the znode's creation zxid (`czxid`): the zxid numbers every
//! transaction of the whole ensemble, so it only grows, across every lock path. The
//! sequence number in the znode's name would order one queue too, but it is counted
//! per parent: another lock path hands out the same numbers. Tokens are shown counted
//! from the zxid that created the run's lock path, so runs read alike on a fresh
//! server and on one that has been up for a while.
//!
//! Paths: `/fencelab/<run id>/lock/lock-NNNNNNNNNN`; the run's own paths are deleted at
//! cleanup, and `/fencelab` too once no run uses it. Nothing else is touched.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::zookeeper::{Queue, Queued, ZkEnsemble, Znodes};
use crate::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, StorageClient,
    async_trait, holder_name,
};
use crate::scenario::{AcquireMode, ReleaseMode, RenewMode};

/// Every run's paths live under this one.
const ROOT: &str = "/fencelab";

/// The ZooKeeper lock.
pub struct ZooKeeperBackend<E> {
    zk: E,
}

impl<E: ZkEnsemble> ZooKeeperBackend<E> {
    pub fn new(zk: E) -> Self {
        ZooKeeperBackend { zk }
    }
}

#[async_trait]
impl<E: ZkEnsemble> LockService for ZooKeeperBackend<E> {
    /// Open a session whose timeout is the run's lease, and make the run's lock path
    /// if this is the run's first client (clients connect one after another).
    async fn open(
        &self,
        keys: &Keys,
        link: Option<&crate::backend::WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        crate::backend::refuse_link(link)?;
        let mut session = self.zk.connect(keys.lease_ms).await?;
        let run = format!("{ROOT}/{}", keys.run_id);
        // The run's lock path; a program may name its own under the run (its `ready`).
        let dir = match keys.lock.starts_with(&format!("{run}/")) {
            true => keys.lock.clone(),
            false => format!("{run}/lock"),
        };
        session.ensure(ROOT).await?;
        session.ensure(&run).await?;
        let base = session.ensure(&dir).await?;
        let lease_ms = keys.lease_ms;
        Ok(Box::new(ZkLockClient {
            session,
            run,
            dir,
            base,
            lease_ms,
            mine: None,
            before_mine: None,
            sent: Vec::new(),
        }))
    }

    fn describe(&self) -> String {
        self.zk.describe()
    }

    fn servers_for_programs(&self) -> Result<Vec<crate::backend::ProgramServer>, BackendError> {
        self.zk.program_server().into_iter().collect()
    }

    /// A path, not a key: the program's lock recipe queues its znodes under it.
    fn lock_name(&self, keys: &Keys) -> String {
        format!("{ROOT}/{}/lock", keys.run_id)
    }

    /// A run's tokens count the zxids after its lock path's: every transaction of
    /// another run on the same server (its sessions, its znodes) takes one of them,
    /// so two runs at once would each show tokens the other made up.
    fn shared_by_runs(&self) -> bool {
        false
    }
}

/// One worker's session and its place in the queue.
pub struct ZkLockClient<S> {
    session: S,
    /// `/fencelab/<run id>`, and the lock path under it.
    run: String,
    dir: String,
    /// The lock path's creation zxid: tokens count from it.
    base: i64,
    /// The session timeout, in real ms.
    lease_ms: u64,
    /// This client's znode in the queue, once it has joined.
    mine: Option<Queued>,
    /// The znode just before ours, which a waiter watches.
    before_mine: Option<String>,
    /// The last call's requests and answers, for the inspector, with how long it took.
    sent: Vec<((String, String), Duration)>,
}

/// The queue as `getChildren` answers it: each znode with its owner and the session it
/// lives by.
fn children(queue: &Queue) -> String {
    let owners: Vec<String> = queue
        .children
        .iter()
        .map(|c| format!("{} {} session {:#x}", c.name, holder_name(&c.data), c.session))
        .collect();
    format!("[{}]", owners.join(", "))
}

impl<S: Znodes> ZkLockClient<S> {
    /// `getChildren` of the lock path, written down for the inspector with `why`
    /// (what the caller reads from the answer).
    async fn read_queue(
        &mut self,
        why: impl Fn(&Self, &Queue) -> String,
    ) -> Result<Queue, BackendError> {
        let started = Instant::now();
        let queue = self.session.queue(&self.dir).await?;
        let answer = format!("{}{}", children(&queue), why(self, &queue));
        self.sent.push(((format!("getChildren {}", self.dir), answer), started.elapsed()));
        Ok(queue)
    }

    fn token(&self, zxid: i64) -> u64 {
        u64::try_from(zxid - self.base).unwrap_or(0)
    }

    /// Whether `queue` puts our znode first.
    fn first(&self, queue: &Queue) -> bool {
        let first = queue.children.first().map(|c| c.name.as_str());
        self.mine.as_ref().is_some_and(|mine| first == Some(mine.name.as_str()))
    }
}

#[async_trait]
impl<S: Znodes> LockClient for ZkLockClient<S> {
    /// Join the queue (once: a waiter asking again keeps its place), then hold the
    /// lock if first, else note the znode before ours to watch. The lease is the
    /// session's timeout, fixed when the session opened, so `ttl_ms` is not sent, and
    /// `mode` (Redis's one or two round trips) does not apply.
    async fn acquire(
        &mut self,
        value: &str,
        _ttl_ms: u64,
        _mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let started = Instant::now();
        let mut queue = self.session.queue(&self.dir).await?;
        let queued = |q: &Queue, mine: &Option<Queued>| {
            mine.as_ref().is_some_and(|m| q.children.iter().any(|c| c.name == m.name))
        };
        let mut calls = Vec::new();
        let mut answers = Vec::new();
        // Not yet queued, or our znode went with an expired session: join (again).
        if !queued(&queue, &self.mine) {
            let mine = self.session.enqueue(&self.dir, value).await?;
            calls.push(format!("create -e -s {}/lock- {value}", self.dir));
            let token = self.token(mine.czxid);
            answers.push(format!("{} (sequence {}, czxid +{token})", mine.name, mine.seq));
            self.mine = Some(mine);
            queue = self.session.queue(&self.dir).await?;
        }
        calls.push(format!("getChildren {}", self.dir));
        answers.push(children(&queue));
        self.sent = vec![((calls.join("; "), answers.join("; ")), started.elapsed())];
        if let Some(mine) = self.mine.as_ref().filter(|_| self.first(&queue)) {
            self.before_mine = None;
            return Ok(AcquireReply::Granted { token: self.token(mine.czxid) });
        }
        let mine = self.mine.as_ref().map(|m| m.name.as_str());
        let at = queue.children.iter().position(|c| Some(c.name.as_str()) == mine);
        self.before_mine = at
            .and_then(|i| i.checked_sub(1))
            .map(|i| format!("{}/{}", self.dir, queue.children[i].name));
        // A silent holder's znode outlives it by at most a session timeout: the
        // waiter looks again after one, if the watch (`next_release`) has not woken it.
        Ok(AcquireReply::Busy { pttl_ms: Some(self.lease_ms) })
    }

    fn take_sent(&mut self) -> Vec<((String, String), Duration)> {
        std::mem::take(&mut self.sent)
    }

    /// Delete our znode (whatever the mode: the recipe only ever deletes its own). An
    /// expired session's znode is already gone: false.
    async fn release(&mut self, _value: &str, _mode: ReleaseMode) -> Result<bool, BackendError> {
        self.before_mine = None;
        let Some(mine) = self.mine.take() else { return Ok(false) };
        let started = Instant::now();
        let path = format!("{}/{}", self.dir, mine.name);
        let deleted = self.session.delete(&path).await?;
        let answer = if deleted { "deleted" } else { "no node (the session expired)" };
        self.sent = vec![((format!("delete {path}"), answer.to_string()), started.elapsed())];
        Ok(deleted)
    }

    /// Heartbeats keep the session alive by themselves; a renewal asks whether our
    /// znode is still first, i.e. whether the session (the lease) survived.
    async fn renew(
        &mut self,
        _value: &str,
        _ttl_ms: u64,
        _mode: RenewMode,
    ) -> Result<bool, BackendError> {
        let mine = |me: &Self, q: &Queue| match me.first(q) {
            true => "; mine is first".to_string(),
            false => "; mine is not first".to_string(),
        };
        let queue = self.read_queue(mine).await?;
        Ok(self.first(&queue))
    }

    /// The watch on the znode before ours is this lock's release channel.
    async fn listen_for_releases(&mut self) -> Result<bool, BackendError> {
        let watched = self.before_mine.clone().unwrap_or_default();
        // The watch itself is set by `next_release`'s call: nothing is sent yet.
        let shown = (format!("exists -w {watched}"), "watching it".to_string());
        self.sent = vec![(shown, Duration::ZERO)];
        Ok(true)
    }

    /// Until the znode before ours goes (released, or its session expired).
    async fn next_release(&mut self) -> Result<(), BackendError> {
        match self.before_mine.clone() {
            Some(path) => self.session.gone(&path).await,
            None => std::future::pending().await,
        }
    }

    fn set_paused(&mut self, paused: bool) {
        self.session.set_paused(paused);
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        let queue = self.read_queue(|_, _| String::new()).await?;
        Ok(queue.children.into_iter().next().map(holder_of))
    }

    /// The first znode's owner; the "counter" is the zxid of the queue's last change,
    /// which no token handed out so far exceeds. A session's time left is the server's
    /// own: no client can read it, so the lease row stays empty.
    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let queue = self.session.queue(&self.dir).await?;
        Ok(LockTruth {
            counter: Some(self.token(queue.pzxid)),
            holder_value: queue.children.into_iter().next().map(holder_of),
            pttl_ms: None,
            nodes: Vec::new(),
        })
    }

    /// Delete the run's paths, every worker's znode first: they are all this run's.
    async fn cleanup(&mut self) -> Result<(), BackendError> {
        let queue = self.session.queue(&self.dir).await?;
        for child in queue.children {
            self.session.delete(&format!("{}/{}", self.dir, child.name)).await?;
        }
        self.session.delete(&self.dir).await?;
        self.session.delete(&self.run).await?;
        // Only when empty: another run may be using it (false otherwise).
        self.session.delete(ROOT).await?;
        Ok(())
    }
}

/// Whose the first znode is: what its creator stored in it, or (a library that stores
/// nothing, as kazoo without an identifier) its name.
fn holder_of(child: crate::backend::zookeeper::Child) -> String {
    match child.data.is_empty() {
        true => child.name,
        false => child.data,
    }
}
