//! Each worker's link to its servers, and a run's links: where the scenario's link
//! faults (`delay`, `partition`, `heal`) are applied, for real connections through
//! `proxy.rs` and for the simulator's through `sim/link.rs`, from one condition per
//! worker.
//!
//! A partition *cuts* (connections closed, new ones dropped, in-flight bytes lost)
//! rather than *holds* (bytes kept and delivered at the heal). A held call would wait
//! out its client's deadline, and whether its bytes then reached the server after the
//! heal would depend on the client library's reconnect policy, not on the lesson. A
//! cut has one outcome on every backend, which the simulator models exactly: every call
//! fails at once, nothing sent during the partition ever arrives, and after the heal
//! the worker's next call reconnects and goes through. (A firewall that rejects, a
//! NAT or load balancer dropping its state, a peer restarted: all look like this.)

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use super::proxy::LinkCondition;
use super::proxy::{self, Upstream};
use crate::scenario::{Fault, FaultKind};

/// One worker's link: how a client of that worker reaches a server ("give me the
/// address to dial for this worker's link to server S"), and what the link does now.
#[derive(Clone)]
pub struct WorkerLink {
    condition: watch::Receiver<LinkCondition>,
    /// How many times the link has been cut so far.
    cuts: Arc<AtomicU64>,
    max_delay: Duration,
    /// One proxy per server, started on first use, shared by the worker's clients.
    proxies: Arc<Mutex<HashMap<Upstream, SocketAddr>>>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl WorkerLink {
    /// The address to dial for this worker's link to the server at `upstream`: a proxy
    /// on loopback, started on first use.
    pub async fn dial(&self, upstream: Upstream) -> io::Result<SocketAddr> {
        let mut proxies = self.proxies.lock().await;
        if let Some(addr) = proxies.get(&upstream) {
            return Ok(*addr);
        }
        let (condition, cancel) = (self.condition.clone(), self.cancel.clone());
        let addr = proxy::listen(upstream.clone(), condition, cancel, &self.tasks).await?;
        proxies.insert(upstream, addr);
        Ok(addr)
    }

    /// Whether nothing gets through now.
    pub fn is_cut(&self) -> bool {
        *self.condition.borrow() == LinkCondition::Cut
    }

    /// How many times the link has been cut so far: a connection opened before the
    /// last cut is gone.
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::SeqCst)
    }

    /// The link's condition, to watch.
    pub fn condition(&self) -> watch::Receiver<LinkCondition> {
        self.condition.clone()
    }

    /// The longest delay the scenario puts on this link. A call over it waits that
    /// much longer before giving up: a deadline the scenario's own delay always broke
    /// would show a timeout, not a late reply.
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }
}

/// The links of one run: one per worker that has link faults (the others connect
/// directly). Dropping it does not stop the proxies: [`Links::close`] does, and waits.
pub struct Links {
    conditions: BTreeMap<String, watch::Sender<LinkCondition>>,
    links: BTreeMap<String, WorkerLink>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl Links {
    /// The links of the workers `faults` names; `real` turns scenario ms into real time
    /// (slow motion stretches a delay as it stretches a lease).
    pub fn new(
        faults: &[Fault],
        real: impl Fn(u64) -> Duration,
        cancel: &CancellationToken,
    ) -> Self {
        let (cancel, tasks) = (cancel.child_token(), TaskTracker::new());
        let mut links = Links {
            conditions: BTreeMap::new(),
            links: BTreeMap::new(),
            cancel: cancel.clone(),
            tasks: tasks.clone(),
        };
        for f in faults {
            let Some(worker) = f.worker.as_ref().filter(|_| f.kind.through_link()) else {
                continue;
            };
            let late = real(f.ms.filter(|_| f.kind == FaultKind::Delay).unwrap_or(0));
            if let Some(link) = links.links.get_mut(worker) {
                link.max_delay = link.max_delay.max(late);
                continue;
            }
            let (tx, condition) = watch::channel(LinkCondition::Clear);
            links.conditions.insert(worker.clone(), tx);
            let proxies = Arc::default();
            let (cancel, tasks) = (cancel.clone(), tasks.clone());
            let cuts = Arc::default();
            let link = WorkerLink { condition, cuts, max_delay: late, proxies, cancel, tasks };
            links.links.insert(worker.clone(), link);
        }
        links
    }

    /// The link of `worker`, if the scenario has link faults for it.
    pub fn of(&self, worker: &str) -> Option<&WorkerLink> {
        self.links.get(worker)
    }

    /// Apply a link fault to `worker`'s link from now on (`late`: a delay's size, real).
    pub fn apply(&self, worker: &str, kind: FaultKind, late: Duration) {
        let condition = match kind {
            FaultKind::Delay => LinkCondition::Delayed(late),
            FaultKind::Partition => LinkCondition::Cut,
            _ => LinkCondition::Clear,
        };
        if let (Some(tx), Some(link)) = (self.conditions.get(worker), self.links.get(worker)) {
            if condition == LinkCondition::Cut {
                link.cuts.fetch_add(1, Ordering::SeqCst);
            }
            tx.send_replace(condition);
        }
    }

    /// Stop every proxy of the run and wait until all their tasks have ended, so no
    /// listener or connection outlives the run.
    pub async fn close(&self) {
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// A run dropped before it executed still stops its proxies (without waiting).
impl Drop for Links {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
