//! A model of one ZooKeeper server on tokio's clock: znodes, sessions and the zxid,
//! enough for the lock recipe.
//!
//! What it keeps of ZooKeeper's rules, because the lessons show them:
//! - every write takes the next zxid, whether it succeeds or fails (ZooKeeper logs a
//!   failed write as an error transaction); opening and closing a session are writes
//!   too, and a session's expiry is one close that deletes all its ephemeral znodes;
//! - a sequential znode's number is its parent's child version, which counts children
//!   created *and* deleted, per parent;
//! - a session lives while heartbeats arrive: here, unless its client is paused; a
//!   session paused for its whole timeout expires (ZooKeeper checks in ticks, up to one
//!   tick late; the model expires it exactly).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use crate::backend::BackendError;
use crate::backend::zookeeper::{Child, Queue, Queued, ZkEnsemble, Znodes, check_session_ms};

struct Znode {
    data: String,
    czxid: i64,
    /// The zxid of the last child created or deleted.
    pzxid: i64,
    /// Children created and deleted so far: the next sequential child's number.
    cversion: i64,
    /// The owning session of an ephemeral znode (0: persistent).
    owner: i64,
}

struct Session {
    timeout: Duration,
    /// Since when no heartbeat has left (the client is paused).
    silent_since: Option<Instant>,
}

struct Server {
    zxid: i64,
    znodes: BTreeMap<String, Znode>,
    sessions: HashMap<i64, Session>,
    next_session: i64,
    /// Bumped at every change, for watches.
    changes: watch::Sender<u64>,
}

impl Server {
    fn next_zxid(&mut self) -> i64 {
        self.zxid += 1;
        self.zxid
    }

    /// End every session that has been silent for its whole timeout.
    fn expire(&mut self) {
        let now = Instant::now();
        let expired: Vec<i64> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.silent_since.is_some_and(|since| now >= since + s.timeout))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.close(id);
        }
    }

    /// The earliest moment a silent session expires.
    fn next_expiry(&self) -> Option<Instant> {
        self.sessions.values().filter_map(|s| s.silent_since.map(|t| t + s.timeout)).min()
    }

    fn open(&mut self, timeout: Duration) -> i64 {
        self.next_zxid();
        let id = self.next_session;
        self.next_session += 1;
        self.sessions.insert(id, Session { timeout, silent_since: None });
        id
    }

    /// One transaction: the session ends and its ephemeral znodes go with it.
    fn close(&mut self, id: i64) {
        if self.sessions.remove(&id).is_none() {
            return;
        }
        let zxid = self.next_zxid();
        let owned: Vec<String> =
            self.znodes.iter().filter(|(_, z)| z.owner == id).map(|(p, _)| p.clone()).collect();
        for path in owned {
            self.remove(&path, zxid);
        }
        self.changes.send_modify(|n| *n += 1);
    }

    fn remove(&mut self, path: &str, zxid: i64) {
        self.znodes.remove(path);
        if let Some(parent) = self.znodes.get_mut(parent_of(path)) {
            parent.cversion += 1;
            parent.pzxid = zxid;
        }
    }

    /// Create `path` under an existing parent; its creation zxid, or None (the parent
    /// is missing or the znode exists: a failed write, which takes a zxid all the same).
    fn create(&mut self, path: &str, data: &str, owner: i64) -> Option<i64> {
        let zxid = self.next_zxid();
        if self.znodes.contains_key(path) || !self.znodes.contains_key(parent_of(path)) {
            return None;
        }
        let parent = self.znodes.get_mut(parent_of(path))?;
        parent.cversion += 1;
        parent.pzxid = zxid;
        let znode = Znode { data: data.to_string(), czxid: zxid, pzxid: zxid, cversion: 0, owner };
        self.znodes.insert(path.to_string(), znode);
        self.changes.send_modify(|n| *n += 1);
        Some(zxid)
    }
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

/// The simulated ZooKeeper: every session shares one server.
#[derive(Clone)]
pub struct SimZooKeeper {
    server: Arc<Mutex<Server>>,
}

impl Default for SimZooKeeper {
    fn default() -> Self {
        let root = Znode { data: String::new(), czxid: 0, pzxid: 0, cversion: 0, owner: 0 };
        let server = Server {
            zxid: 0,
            znodes: BTreeMap::from([("/".to_string(), root)]),
            sessions: HashMap::new(),
            next_session: 1,
            changes: watch::channel(0).0,
        };
        SimZooKeeper { server: Arc::new(Mutex::new(server)) }
    }
}

impl SimZooKeeper {
    /// The server with expired sessions gone: every call sees it as of now.
    fn now(&self) -> MutexGuard<'_, Server> {
        let mut server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        server.expire();
        server
    }
}

impl ZkEnsemble for SimZooKeeper {
    type Session = SimZkSession;

    async fn connect(&self, session_ms: u64) -> Result<SimZkSession, BackendError> {
        check_session_ms(session_ms)?;
        let timeout = Duration::from_millis(session_ms);
        let id = self.now().open(timeout);
        Ok(SimZkSession { zk: self.clone(), id, timeout })
    }

    fn describe(&self) -> String {
        "SIMULATOR (ZooKeeper lock recipe, virtual clock)".to_string()
    }
}

/// One session of the model; a call after it expired opens a new one, as the real
/// client does.
pub struct SimZkSession {
    zk: SimZooKeeper,
    id: i64,
    timeout: Duration,
}

impl SimZkSession {
    /// The server, with this client's session live (a new one if it expired), and
    /// that session.
    fn live(&mut self) -> (MutexGuard<'_, Server>, i64) {
        let mut server = self.zk.now();
        if !server.sessions.contains_key(&self.id) {
            self.id = server.open(self.timeout);
        }
        (server, self.id)
    }
}

impl Drop for SimZkSession {
    fn drop(&mut self) {
        self.zk.now().close(self.id);
    }
}

fn no_node(path: &str) -> BackendError {
    BackendError::Service { service: "the simulator", message: format!("NoNode: {path}") }
}

impl Znodes for SimZkSession {
    async fn ensure(&mut self, path: &str) -> Result<i64, BackendError> {
        let (mut server, _) = self.live();
        if let Some(znode) = server.znodes.get(path) {
            return Ok(znode.czxid);
        }
        server.create(path, "", 0).ok_or_else(|| no_node(parent_of(path)))
    }

    async fn enqueue(&mut self, dir: &str, data: &str) -> Result<Queued, BackendError> {
        let (mut server, owner) = self.live();
        let seq = server.znodes.get(dir).ok_or_else(|| no_node(dir))?.cversion;
        let name = format!("lock-{seq:010}");
        let czxid =
            server.create(&format!("{dir}/{name}"), data, owner).ok_or_else(|| no_node(dir))?;
        Ok(Queued { name, seq, czxid })
    }

    async fn queue(&mut self, dir: &str) -> Result<Queue, BackendError> {
        let (server, _) = self.live();
        let pzxid = server.znodes.get(dir).ok_or_else(|| no_node(dir))?.pzxid;
        let prefix = format!("{dir}/");
        let children = server
            .znodes
            .range(prefix.clone()..)
            .take_while(|(path, _)| path.starts_with(&prefix))
            .filter(|(path, _)| !path[prefix.len()..].contains('/'))
            .map(|(path, z)| Child {
                name: path[prefix.len()..].to_string(),
                data: z.data.clone(),
                czxid: z.czxid,
                session: z.owner,
            })
            .collect::<Vec<_>>();
        let mut children = children;
        crate::backend::zookeeper::in_sequence(&mut children);
        Ok(Queue { children, pzxid })
    }

    async fn delete(&mut self, path: &str) -> Result<bool, BackendError> {
        let (mut server, _) = self.live();
        let zxid = server.next_zxid();
        let prefix = format!("{path}/");
        let has_children = server.znodes.keys().any(|p| p.starts_with(&prefix));
        if !server.znodes.contains_key(path) || has_children {
            return Ok(false);
        }
        server.remove(path, zxid);
        server.changes.send_modify(|n| *n += 1);
        Ok(true)
    }

    async fn gone(&mut self, path: &str) -> Result<(), BackendError> {
        loop {
            let (mut changes, next_expiry) = {
                let (server, _) = self.live();
                if !server.znodes.contains_key(path) {
                    return Ok(());
                }
                (server.changes.subscribe(), server.next_expiry())
            };
            let expiry = next_expiry.unwrap_or_else(Instant::now);
            tokio::select! {
                _ = changes.changed() => {}
                () = sleep_until(expiry), if next_expiry.is_some() => {}
            }
        }
    }

    fn set_paused(&mut self, paused: bool) {
        let mut server = self.zk.now();
        if let Some(session) = server.sessions.get_mut(&self.id) {
            session.silent_since = paused.then(Instant::now);
        }
    }
}
