//! The simulator's model of PostgreSQL's advisory locks, on tokio's clock: sessions,
//! each with its idle timeout and the time of its last statement, and the locks they
//! hold. A session idle past its timeout is ended by the server at that moment, and its
//! locks go with it (as the real server's `idle_session_timeout`); a session with none
//! lives as long as its client keeps it. The differential test compares the two.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::backend::BackendError;
use crate::backend::advisory::{Holder, Session, Sessions};

/// The simulated server: every session shares its lock table.
#[derive(Clone, Default)]
pub struct SimPostgres {
    server: Arc<Mutex<Server>>,
}

#[derive(Default)]
struct Server {
    sessions: HashMap<u64, Alive>,
    /// Each advisory lock's holding session.
    locks: HashMap<i64, u64>,
    next_session: u64,
}

/// A session the server has not ended.
struct Alive {
    name: String,
    idle_ms: u64,
    last: Instant,
}

impl Server {
    /// End the sessions idle past their timeout, as of now; their locks go with them.
    fn now(&mut self) -> Instant {
        let now = Instant::now();
        let over = |s: &Alive| s.idle_ms > 0 && now >= s.last + ms(s.idle_ms);
        let ended: Vec<u64> =
            self.sessions.iter().filter(|(_, s)| over(s)).map(|(id, _)| *id).collect();
        for id in ended {
            self.sessions.remove(&id);
            self.locks.retain(|_, holder| *holder != id);
        }
        now
    }

    fn open(&mut self, idle_ms: u64, now: Instant) -> u64 {
        self.next_session += 1;
        let alive = Alive { name: String::new(), idle_ms, last: now };
        self.sessions.insert(self.next_session, alive);
        self.next_session
    }
}

fn ms(ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis(ms)
}

impl SimPostgres {
    fn server(&self) -> std::sync::MutexGuard<'_, Server> {
        self.server.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Sessions for SimPostgres {
    type Session = SimSession;

    async fn open(&self, idle_ms: u64) -> Result<SimSession, BackendError> {
        let mut server = self.server();
        let now = server.now();
        let id = server.open(idle_ms, now);
        Ok(SimSession { sim: self.clone(), id, idle_ms })
    }

    fn describe(&self) -> String {
        "SIMULATOR (PostgreSQL advisory lock, virtual clock)".to_string()
    }
}

/// One session of the model; `id` is replaced by a new session's when the server
/// ended it.
pub struct SimSession {
    sim: SimPostgres,
    id: u64,
    idle_ms: u64,
}

impl SimSession {
    /// Whether this session is still alive as of now; a statement on it keeps it so.
    fn statement(&self, server: &mut Server, now: Instant) -> bool {
        match server.sessions.get_mut(&self.id) {
            Some(alive) => {
                alive.last = now;
                true
            }
            None => false,
        }
    }
}

impl Session for SimSession {
    async fn try_lock(&mut self, id: i64, name: &str) -> Result<bool, BackendError> {
        let sim = self.sim.clone();
        let mut server = sim.server();
        let now = server.now();
        if !self.statement(&mut server, now) {
            self.id = server.open(self.idle_ms, now);
        }
        if let Some(alive) = server.sessions.get_mut(&self.id) {
            alive.name = name.to_string();
        }
        let holder = *server.locks.entry(id).or_insert(self.id);
        Ok(holder == self.id)
    }

    async fn unlock(&mut self, id: i64) -> Result<bool, BackendError> {
        let sim = self.sim.clone();
        let mut server = sim.server();
        let now = server.now();
        if !self.statement(&mut server, now) || server.locks.get(&id) != Some(&self.id) {
            return Ok(false);
        }
        server.locks.remove(&id);
        Ok(true)
    }

    async fn still_holds(&mut self, id: i64) -> Result<bool, BackendError> {
        let sim = self.sim.clone();
        let mut server = sim.server();
        let now = server.now();
        Ok(self.statement(&mut server, now) && server.locks.get(&id) == Some(&self.id))
    }

    async fn holder(&mut self, id: i64) -> Result<Option<Holder>, BackendError> {
        let sim = self.sim.clone();
        let mut server = sim.server();
        let now = server.now();
        self.statement(&mut server, now);
        let Some(holder) = server.locks.get(&id) else { return Ok(None) };
        Ok(server.sessions.get(holder).map(|s| Holder {
            name: s.name.clone(),
            idle_ms: Some(now.saturating_duration_since(s.last).as_secs_f64() * 1000.0),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_idle_session_is_ended_at_its_timeout_and_its_lock_with_it() {
        let pg = SimPostgres::default();
        let (mut a, mut b) = (pg.open(1000).await.unwrap(), pg.open(1000).await.unwrap());
        assert!(a.try_lock(7, "A:1").await.unwrap());
        assert!(!b.try_lock(7, "B:1").await.unwrap());
        tokio::time::advance(ms(900)).await;
        assert!(!b.try_lock(7, "B:1").await.unwrap(), "A idle 0.9 s of 1 s: still A's");
        let seen = b.holder(7).await.unwrap().unwrap();
        assert_eq!(seen.name, "A:1");
        tokio::time::advance(ms(100)).await;
        assert!(b.try_lock(7, "B:2").await.unwrap(), "A's session ended, its lock with it");
        assert!(!a.still_holds(7).await.unwrap());
        assert!(!a.unlock(7).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_timeout_a_silent_holder_keeps_the_lock() {
        let pg = SimPostgres::default();
        let (mut a, mut b) = (pg.open(0).await.unwrap(), pg.open(0).await.unwrap());
        assert!(a.try_lock(7, "A:1").await.unwrap());
        tokio::time::advance(ms(3_600_000)).await;
        assert!(!b.try_lock(7, "B:1").await.unwrap());
        assert!(a.unlock(7).await.unwrap());
        assert!(b.try_lock(7, "B:1").await.unwrap());
    }
}
