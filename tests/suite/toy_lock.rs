//! A lock service fencelab has never heard of, defined here, wired in with one line
//! (a `Deployment` of it and the simulator's storage) and run through the engine: the
//! proof that a new lock service is one module plus one line.

use crate::support;

use std::sync::{Arc, Mutex};

use fencelab::backend::deployment::Deployment;
use fencelab::backend::sim::SimBackend;
use fencelab::backend::{
    AcquireReply, BackendError, Keys, LockClient, LockService, LockTruth, StorageClient,
    async_trait,
};
use fencelab::scenario::{AcquireMode, ReleaseMode, RenewMode, builtin};
use tokio::time::{Duration, Instant};

/// A lease table in memory, on tokio's clock: holder, deadline, and a counter.
#[derive(Clone, Default)]
struct ToyLock(Arc<Mutex<Table>>);

#[derive(Default)]
struct Table {
    holder: Option<(String, Option<Instant>)>,
    counter: u64,
}

impl Table {
    /// The holder, once its lease has run out: nobody.
    fn live(&mut self) -> Option<&mut (String, Option<Instant>)> {
        if self.holder.as_ref().is_some_and(|(_, d)| d.is_some_and(|d| Instant::now() > d)) {
            self.holder = None;
        }
        self.holder.as_mut()
    }
}

fn deadline(ttl_ms: u64) -> Option<Instant> {
    (ttl_ms > 0).then(|| Instant::now() + Duration::from_millis(ttl_ms))
}

#[async_trait]
impl LockService for ToyLock {
    async fn open(
        &self,
        _keys: &Keys,
        link: Option<&fencelab::backend::WorkerLink>,
    ) -> Result<Box<dyn LockClient>, BackendError> {
        // Its clients live in this process: no link carries them.
        fencelab::backend::refuse_link(link)?;
        Ok(Box::new(self.clone()))
    }

    fn describe(&self) -> String {
        "SIMULATOR: a toy lease table".into()
    }
}

#[async_trait]
impl LockClient for ToyLock {
    async fn acquire(
        &mut self,
        value: &str,
        ttl_ms: u64,
        _mode: AcquireMode,
        _tokens: Option<&mut dyn StorageClient>,
    ) -> Result<AcquireReply, BackendError> {
        let mut t = self.0.lock().unwrap();
        if let Some((_, d)) = t.live() {
            let left = d.map(|d| d.saturating_duration_since(Instant::now()).as_millis() as u64);
            return Ok(AcquireReply::Busy { pttl_ms: left });
        }
        t.holder = Some((value.to_string(), deadline(ttl_ms)));
        t.counter += 1;
        Ok(AcquireReply::Granted { token: t.counter })
    }

    async fn release(&mut self, value: &str, mode: ReleaseMode) -> Result<bool, BackendError> {
        let mut t = self.0.lock().unwrap();
        let ours = t.live().is_some_and(|(v, _)| v == value || mode == ReleaseMode::Del);
        if ours {
            t.holder = None;
        }
        Ok(ours)
    }

    async fn renew(&mut self, value: &str, ttl: u64, _: RenewMode) -> Result<bool, BackendError> {
        let mut t = self.0.lock().unwrap();
        let held = t.live().filter(|(v, _)| v == value).map(|h| h.1 = deadline(ttl));
        Ok(held.is_some())
    }

    async fn holder(&mut self) -> Result<Option<String>, BackendError> {
        Ok(self.0.lock().unwrap().live().map(|(v, _)| v.clone()))
    }

    async fn observe(&mut self) -> Result<LockTruth, BackendError> {
        let mut t = self.0.lock().unwrap();
        let counter = Some(t.counter);
        let (holder_value, pttl_ms) = match t.live() {
            Some((v, d)) => (Some(v.clone()), d.map(|d| (d - Instant::now()).as_millis() as u64)),
            None => (None, None),
        };
        Ok(LockTruth { holder_value, pttl_ms, counter, nodes: Vec::new() })
    }

    async fn cleanup(&mut self) -> Result<(), BackendError> {
        self.0.lock().unwrap().holder = None;
        Ok(())
    }
}

fn gc_pause_on_the_toy_lock(fencing: bool) -> Vec<fencelab::engine::log::Event> {
    // The one line: this lock service, with the simulator's storage.
    let deployment =
        Deployment::on_simulator(Arc::new(ToyLock::default()), Arc::new(SimBackend::default()));
    let scenario = builtin("gc-pause").unwrap().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(support::run_events(&deployment, &scenario, fencing))
}

#[test]
fn a_lock_service_defined_in_a_test_runs_the_gc_pause_like_redis() {
    let sim = |fencing| support::sim_run(&builtin("gc-pause").unwrap().unwrap(), fencing);
    for fencing in [false, true] {
        let toy = gc_pause_on_the_toy_lock(fencing);
        assert_eq!(support::outcomes(&toy), support::outcomes(&sim(fencing)), "fencing {fencing}");
        assert_eq!(support::storage(&toy), support::storage(&sim(fencing)));
    }
    assert_eq!(support::storage(&gc_pause_on_the_toy_lock(true)), ["B:2"]);
}
