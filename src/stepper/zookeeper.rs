//! ZooKeeper's lock recipe as the stepper runs it: the run's lock path with its queue
//! of ephemeral sequential znodes, the sessions they live by, and the zxid, with the
//! calls `backend/lock/zookeeper.rs` makes in the order it makes them. The rules are
//! the simulator's (`backend/sim/zookeeper.rs`):
//! - every write takes the next zxid, a failed delete too, and so do opening and
//!   closing a session; a session's close deletes its znodes in that one zxid;
//! - a session lives while its client is not paused; one silent for its whole timeout
//!   is closed by the first call made once that much time has passed (`now >=`);
//! - a client whose session was closed opens a new one with its next call;
//! - a worker's session closes as its script ends (its client dropped).
//!
//! Tokens are znodes' creation zxids counted from the lock path's own. A waiter that
//! watches (`wait = "notify"`) wakes when anything changes and looks whether the znode
//! before its own is gone, and else at the next moment a silent session may expire,
//! as known when it began to wait.

use super::Value;
use crate::backend::AcquireReply;

/// A session: its client's heartbeats stopped since `silent_since` (paused).
#[derive(Clone, Copy)]
struct Session {
    open: bool,
    silent_since: Option<u64>,
}

/// A znode of the queue: its sequence number, its session, what it holds.
#[derive(Clone, Copy)]
struct Znode {
    seq: u64,
    session: usize,
    value: Value,
}

/// What one worker's client keeps: its session, its znode in the queue (sequence
/// number and czxid), and the one before it that it watches.
#[derive(Clone, Copy)]
struct Client {
    session: usize,
    mine: Option<(u64, u64)>,
    before_mine: Option<u64>,
}

pub(super) struct ZooKeeper {
    zxid: u64,
    /// The lock path's czxid: tokens count from it.
    base: u64,
    /// The lock path's children created and deleted (the next sequence number), and
    /// the zxid of the last of them.
    cversion: u64,
    pzxid: u64,
    /// The queue, in sequence order.
    queue: Vec<Znode>,
    sessions: Vec<Session>,
    /// The sessions' timeout: the run's lease.
    timeout: u64,
    clients: Vec<Client>,
    /// Bumped at every change, as the simulator's `changes` wakes watchers.
    changes: u64,
}

impl ZooKeeper {
    /// The server as the run finds it when its first step comes: the first worker's
    /// session made the run's paths (`/fencelab`, the run's, its lock path: three
    /// zxids), then every other worker, the observer and the bookkeeper opened one.
    pub fn new(workers: usize, timeout: u64) -> Self {
        let quiet = Session { open: true, silent_since: None };
        let clients = (0..workers).map(|session| Client { session, mine: None, before_mine: None });
        let base = 4;
        ZooKeeper {
            zxid: base + workers as u64 - 1 + 2,
            base,
            cversion: 0,
            pzxid: base,
            queue: Vec::new(),
            sessions: vec![quiet; workers],
            timeout,
            clients: clients.collect(),
            changes: 0,
        }
    }

    /// How many changes so far: a watcher looks again when this grows.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// A token: a creation zxid counted from the lock path's.
    pub fn token(&self, zxid: u64) -> u64 {
        zxid - self.base
    }

    /// The observer's counter: the queue's last change, counted likewise.
    pub fn counter(&self) -> u64 {
        self.token(self.pzxid)
    }

    fn next_zxid(&mut self) -> u64 {
        self.zxid += 1;
        self.zxid
    }

    /// Close every session silent for its whole timeout by `now`, in one zxid each.
    fn expire(&mut self, now: u64) {
        for id in 0..self.sessions.len() {
            let s = self.sessions[id];
            if s.open && s.silent_since.is_some_and(|since| now >= since + self.timeout) {
                self.close(id);
            }
        }
    }

    /// One transaction: the session ends and its znodes go with it.
    fn close(&mut self, id: usize) {
        if !self.sessions[id].open {
            return;
        }
        self.sessions[id].open = false;
        let zxid = self.next_zxid();
        let before = self.queue.len();
        self.queue.retain(|z| z.session != id);
        let gone = (before - self.queue.len()) as u64;
        if gone > 0 {
            self.cversion += gone;
            self.pzxid = zxid;
        }
        self.changes += 1;
    }

    /// The server as of `now`, with `worker`'s session open (a new one if its last
    /// expired), as every call of a client begins.
    fn live(&mut self, now: u64, worker: usize) {
        self.expire(now);
        let client = &mut self.clients[worker];
        if !self.sessions[client.session].open {
            self.zxid += 1;
            client.session = self.sessions.len();
            self.sessions.push(Session { open: true, silent_since: None });
        }
    }

    fn first(&self) -> Option<&Znode> {
        self.queue.first()
    }

    fn queued(&self, seq: u64) -> bool {
        self.queue.iter().any(|z| z.seq == seq)
    }

    /// Who holds the lock, as a client (`worker`) or the observer (None) reads the
    /// queue: the first znode's value.
    pub fn holder(&mut self, now: u64, worker: Option<usize>) -> Option<Value> {
        match worker {
            Some(w) => self.live(now, w),
            None => self.expire(now),
        }
        self.first().map(|z| z.value)
    }

    /// Join the queue unless the worker's znode is in it, then hold the lock if first;
    /// else watch the znode before its own and look again after a session's timeout.
    pub fn acquire(&mut self, now: u64, worker: usize, value: Value) -> AcquireReply {
        self.live(now, worker);
        let mine = self.clients[worker].mine.filter(|(seq, _)| self.queued(*seq));
        let (seq, czxid) = match mine {
            Some(mine) => mine,
            None => {
                let czxid = self.next_zxid();
                let (seq, session) = (self.cversion, self.clients[worker].session);
                self.cversion += 1;
                self.pzxid = czxid;
                self.queue.push(Znode { seq, session, value });
                self.changes += 1;
                self.clients[worker].mine = Some((seq, czxid));
                (seq, czxid)
            }
        };
        let at = self.queue.iter().position(|z| z.seq == seq).unwrap_or(0);
        self.clients[worker].before_mine = at.checked_sub(1).map(|i| self.queue[i].seq);
        match at {
            0 => AcquireReply::Granted { token: self.token(czxid) },
            _ => AcquireReply::Busy { pttl_ms: Some(self.timeout) },
        }
    }

    /// Delete the worker's znode (whatever the mode); false when it never joined, or
    /// its znode went with its session.
    pub fn release(&mut self, now: u64, worker: usize) -> bool {
        self.clients[worker].before_mine = None;
        let Some((seq, _)) = self.clients[worker].mine.take() else { return false };
        self.live(now, worker);
        let zxid = self.next_zxid();
        if !self.queued(seq) {
            return false;
        }
        self.queue.retain(|z| z.seq != seq);
        self.cversion += 1;
        self.pzxid = zxid;
        self.changes += 1;
        true
    }

    /// Whether the worker's znode is still first: its session (the lease) survived.
    pub fn renew(&mut self, now: u64, worker: usize) -> bool {
        self.live(now, worker);
        let mine = self.clients[worker].mine.map(|(seq, _)| seq);
        mine.is_some() && self.first().map(|z| z.seq) == mine
    }

    /// Whether the znode the worker watches is gone, as its watch looks (a worker
    /// that watches none waits for nothing to go).
    pub fn released(&mut self, now: u64, worker: usize) -> bool {
        let Some(watched) = self.clients[worker].before_mine else { return false };
        self.live(now, worker);
        !self.queued(watched)
    }

    /// The earliest moment a silent session expires, for a watcher to look again.
    pub fn next_expiry(&self) -> Option<u64> {
        let silent = self.sessions.iter().filter(|s| s.open).filter_map(|s| s.silent_since);
        silent.map(|since| since + self.timeout).min()
    }

    /// The last moment a reading finds every session as it is: just before the
    /// first silent one's timeout is out.
    pub fn quiet_until(&self) -> u64 {
        self.next_expiry().map_or(u64::MAX, |at| at.saturating_sub(1))
    }

    /// The worker's client stops (or starts again) sending heartbeats.
    pub fn set_paused(&mut self, now: u64, worker: usize, paused: bool) {
        self.expire(now);
        let session = &mut self.sessions[self.clients[worker].session];
        if session.open {
            session.silent_since = paused.then_some(now);
        }
    }

    /// The worker's script ended: its client goes, and its session with it.
    pub fn close_client(&mut self, now: u64, worker: usize) {
        self.expire(now);
        self.close(self.clients[worker].session);
    }
}
