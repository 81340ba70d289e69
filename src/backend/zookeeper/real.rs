//! A real ZooKeeper through the `zookeeper-client` crate.
//!
//! The crate keeps a session alive on its own: a task of the runtime that opened the
//! session sends heartbeats while the caller does nothing. A worker that pauses must
//! stop them, as a process frozen by a GC (or SIGSTOP) does, or its session would never
//! expire and the lesson would show nothing. So each session gets a runtime of its own
//! on a thread of its own (its *heart*), and a pause blocks that thread: nothing of the
//! session runs, exactly as in a stopped process, and the server expires it after its
//! timeout. After the pause the crate finds the session expired, as a real client does;
//! the next call opens a new session (Curator's way), whose znodes are new ones.
//!
//! Every call has a deadline ([`CALL`]) but the wait for a znode to go, which the lock
//! races against its own timers.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::timeout;
use zookeeper_client as zk;

use super::{Child, Queue, Queued, ZkEnsemble, Znodes, check_session_ms};
use crate::backend::BackendError;

const SERVICE: &str = "ZooKeeper";

/// How long one call may take: a local server answers in milliseconds.
const CALL: Duration = Duration::from_secs(5);

/// How long a dropped session's thread waits for its close to reach the server.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// A ZooKeeper at `address` (`host:port`).
pub struct RealZooKeeper {
    address: String,
    label: &'static str,
}

impl RealZooKeeper {
    /// `label` names it on screen ("private ZooKeeper").
    pub fn new(address: &str, label: &'static str) -> Self {
        RealZooKeeper { address: address.to_string(), label }
    }
}

impl ZkEnsemble for RealZooKeeper {
    type Session = ZkSession;

    fn program_server(&self) -> Option<Result<crate::backend::ProgramServer, BackendError>> {
        Some(crate::backend::ProgramServer::zookeeper(&self.address))
    }

    async fn connect(&self, session_ms: u64) -> Result<ZkSession, BackendError> {
        check_session_ms(session_ms)?;
        let (heart, client) = Heart::open(&self.address, session_ms).await?;
        Ok(ZkSession { address: self.address.clone(), session_ms, client, heart })
    }

    fn describe(&self) -> String {
        format!("{} {} (lock recipe: ephemeral sequential znodes)", self.label, self.address)
    }
}

/// The thread whose runtime runs one session's I/O and heartbeats, and the gate a
/// pause closes to stop it.
struct Heart {
    handle: tokio::runtime::Handle,
    /// True while paused; the thread waits on the condvar until it is false again.
    paused: Arc<(Mutex<bool>, Condvar)>,
    /// Ends the thread, handing it the session's state so it waits for the close.
    stop: Option<oneshot::Sender<zk::StateWatcher>>,
}

impl Heart {
    async fn open(address: &str, session_ms: u64) -> Result<(Heart, zk::Client), BackendError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed(format!("cannot start a session's thread: {e}")))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<zk::StateWatcher>();
        std::thread::Builder::new()
            .name("zookeeper-session".into())
            .spawn(move || {
                runtime.block_on(async {
                    if let Ok(mut state) = stopped.await {
                        // The crate sends `closeSession` once the client is dropped:
                        // let it go out, so the znodes go now and not a timeout later.
                        let closed = async { while !state.changed().await.is_terminated() {} };
                        let _ = timeout(CLOSE_WAIT, closed).await;
                    }
                });
            })
            .map_err(|e| failed(format!("cannot start a session's thread: {e}")))?;
        let heart = Heart { handle, paused: Arc::default(), stop: Some(stop) };
        let address = address.to_string();
        let deadline = tokio::time::Instant::now() + CALL;
        // The crate gives up on a session not established within its timeout (as
        // short as 200 ms), which a JVM that has just started, on a busy machine, can
        // miss: try again until our own deadline.
        let client = loop {
            let connector = zk::Client::connector()
                .with_session_timeout(Duration::from_millis(session_ms))
                .with_connection_timeout(CALL);
            let to = address.clone();
            let connecting = heart.handle.spawn(async move { connector.connect(&to).await });
            let reason = match tokio::time::timeout_at(deadline, connecting).await {
                Ok(Ok(Ok(client))) => break client,
                Ok(Ok(Err(zk::Error::Timeout))) if tokio::time::Instant::now() < deadline => {
                    continue;
                }
                Ok(Ok(Err(e))) => e.to_string(),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no session within {CALL:?}"),
            };
            return Err(unreachable(&address, reason));
        };
        let granted = client.session_timeout();
        if granted != Duration::from_millis(session_ms) {
            return Err(failed(format!(
                "asked for a session of {session_ms} ms and was granted {} ms (is its tick 100 ms?)",
                granted.as_millis()
            )));
        }
        Ok((heart, client))
    }

    fn set_paused(&self, paused: bool) {
        let (flag, wake) = &*self.paused;
        *flag.lock().unwrap_or_else(|p| p.into_inner()) = paused;
        wake.notify_all();
        if paused {
            let gate = self.paused.clone();
            // Blocking the runtime's only thread is the point: the session's task
            // cannot run, so no heartbeat leaves until the pause ends.
            self.handle.spawn(async move {
                let (flag, wake) = &*gate;
                let mut paused = flag.lock().unwrap_or_else(|p| p.into_inner());
                while *paused {
                    paused = wake.wait(paused).unwrap_or_else(|p| p.into_inner());
                }
            });
        }
    }

    /// Stop the thread once `client` (the session's last handle) is dropped.
    fn stop(&mut self, client: &zk::Client) {
        self.set_paused(false);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(client.state_watcher());
        }
    }
}

/// One session, reopened when it expired.
pub struct ZkSession {
    address: String,
    session_ms: u64,
    client: zk::Client,
    heart: Heart,
}

impl ZkSession {
    /// The client to call: this session's, or a new session's when this one expired
    /// (after a pause) and its znodes are gone.
    async fn live(&mut self) -> Result<&zk::Client, BackendError> {
        if self.client.state() == zk::SessionState::Expired {
            let (heart, client) = Heart::open(&self.address, self.session_ms).await?;
            let old = std::mem::replace(&mut self.client, client);
            self.heart.stop(&old);
            self.heart = heart;
        }
        Ok(&self.client)
    }

    /// Run `call` on a live session. A call that fails because the connection broke
    /// (after a pause, the crate finds the server gone quiet and reconnects) or the
    /// session expired is tried again once the session has settled: reconnected, or
    /// expired and replaced by a new one.
    async fn call<T, F>(&mut self, call: impl Fn(zk::Client) -> F) -> Result<T, BackendError>
    where
        F: Future<Output = Result<T, zk::Error>>,
    {
        let mut last = String::new();
        for _ in 0..3 {
            let client = self.live().await?.clone();
            match timeout(CALL, call(client.clone())).await {
                Ok(Ok(done)) => return Ok(done),
                Ok(Err(e)) if settled(&client, &e).await => last = e.to_string(),
                Ok(Err(e)) => return Err(failed(e.to_string())),
                Err(_) => {
                    return Err(failed(format!("{} did not answer within {CALL:?}", self.address)));
                }
            }
        }
        Err(failed(format!("{} kept failing: {last}", self.address)))
    }
}

/// After a call failed with `error`: whether to try it again, because the session was
/// interrupted (the connection broke, or the session expired: the crate reports a
/// server gone quiet with a message of its own) and it has settled since, connected
/// again or expired (a new session replaces it). A refusal (no such znode, ...) is the
/// call's answer.
async fn settled(client: &zk::Client, error: &zk::Error) -> bool {
    let interrupted = matches!(
        error,
        zk::Error::ConnectionLoss | zk::Error::SessionExpired | zk::Error::Custom(_)
    );
    if !interrupted {
        return false;
    }
    let mut state = client.state_watcher();
    let settle = async {
        loop {
            match state.peek_state() {
                zk::SessionState::SyncConnected | zk::SessionState::Expired => return true,
                s if s.is_terminated() => return false,
                _ => {
                    state.changed().await;
                }
            }
        }
    };
    timeout(CALL, settle).await.unwrap_or(false)
}

impl Drop for ZkSession {
    fn drop(&mut self) {
        let client = self.client.clone();
        self.heart.stop(&client);
    }
}

impl Znodes for ZkSession {
    async fn ensure(&mut self, path: &str) -> Result<i64, BackendError> {
        let path = path.to_string();
        self.call(|zk| {
            let path = path.clone();
            async move {
                if let Some(stat) = zk.check_stat(&path).await? {
                    return Ok(stat.czxid);
                }
                let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                match zk.create(&path, b"", &options).await {
                    Ok((stat, _)) => Ok(stat.czxid),
                    // Another client made it in between: it is there all the same.
                    Err(zk::Error::NodeExists) => Ok(zk.get_data(&path).await?.1.czxid),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    async fn enqueue(&mut self, dir: &str, data: &str) -> Result<Queued, BackendError> {
        let prefix = format!("{dir}/lock-");
        let data = data.to_string();
        self.call(|zk| {
            let (prefix, data) = (prefix.clone(), data.clone());
            async move {
                let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
                let (stat, seq) = zk.create(&prefix, data.as_bytes(), &options).await?;
                Ok(Queued { name: format!("lock-{seq}"), seq: seq.into_i64(), czxid: stat.czxid })
            }
        })
        .await
    }

    async fn queue(&mut self, dir: &str) -> Result<Queue, BackendError> {
        let dir = dir.to_string();
        self.call(|zk| {
            let dir = dir.clone();
            async move {
                let (mut names, stat) = zk.get_children(&dir).await?;
                names.sort();
                let mut children = Vec::with_capacity(names.len());
                for name in names {
                    // A znode that went between the listing and this read is not queued.
                    match zk.get_data(&format!("{dir}/{name}")).await {
                        Ok((data, stat)) => children.push(Child {
                            name,
                            data: String::from_utf8_lossy(&data).into_owned(),
                            czxid: stat.czxid,
                            session: stat.ephemeral_owner,
                        }),
                        Err(zk::Error::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                super::in_sequence(&mut children);
                Ok(Queue { children, pzxid: stat.pzxid })
            }
        })
        .await
    }

    async fn delete(&mut self, path: &str) -> Result<bool, BackendError> {
        let path = path.to_string();
        self.call(|zk| {
            let path = path.clone();
            async move {
                match zk.delete(&path, None).await {
                    Ok(()) => Ok(true),
                    Err(zk::Error::NoNode | zk::Error::NotEmpty) => Ok(false),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    async fn gone(&mut self, path: &str) -> Result<(), BackendError> {
        let client = self.live().await?.clone();
        let (stat, watch) = timeout(CALL, client.check_and_watch_stat(path))
            .await
            .map_err(|_| failed(format!("{} did not answer within {CALL:?}", self.address)))?
            .map_err(|e| failed(e.to_string()))?;
        if stat.is_some() {
            // Deleted, or our own session ended: either way, look again.
            watch.changed().await;
        }
        Ok(())
    }

    fn set_paused(&mut self, paused: bool) {
        self.heart.set_paused(paused);
    }
}

fn failed(message: String) -> BackendError {
    BackendError::Service { service: SERVICE, message }
}

fn unreachable(url: &str, reason: String) -> BackendError {
    BackendError::ServiceUnreachable { service: SERVICE, url: url.to_string(), reason }
}
