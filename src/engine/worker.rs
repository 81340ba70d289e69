//! One worker: a tokio task with its own connection, running its script of steps.
//!
//! A worker only ever knows what its own commands told it. It records that as
//! [`WorkerEvent`]s: its belief. While paused it issues no command at all, which is
//! the point: nothing can tell it that its lease ran out.

use std::sync::Arc;

use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::log::{EventKind, EventLog, WorkerEvent};
use crate::backend::{
    AcquireReply, BackendError, LockClient, StorageClient, StoredWrite, holder_name, holder_value,
};
use crate::scenario::{AcquireMode, ReleaseMode, Step, WorkerSpec};

/// How often a waiter re-tries a lock that has no expiry, in scenario ms.
const NO_TTL_RETRY_MS: f64 = 100.0;

/// What every worker of a run shares.
#[derive(Clone)]
pub struct WorkerSettings {
    pub ttl_ms: u64,
    pub acquire: AcquireMode,
    pub release: ReleaseMode,
    pub fencing: bool,
}

pub struct Worker<C> {
    pub spec: WorkerSpec,
    pub client: C,
    pub settings: WorkerSettings,
    pub log: Arc<EventLog>,
    pub cancel: CancellationToken,
    /// The random value of the current grant: how this worker recognises its lock.
    value: Option<String>,
    /// The fencing token of the last grant.
    token: Option<u64>,
}

/// Did the step sequence run to its end, or stop early?
enum Flow {
    Continue,
    Stop,
}

impl<C: LockClient + StorageClient> Worker<C> {
    pub fn new(
        spec: WorkerSpec,
        client: C,
        settings: WorkerSettings,
        log: Arc<EventLog>,
        cancel: CancellationToken,
    ) -> Self {
        Worker {
            spec,
            client,
            settings,
            log,
            cancel,
            value: None,
            token: None,
        }
    }

    /// Run the script to its end. A backend error is recorded and returned.
    pub async fn run(mut self) -> Result<(), BackendError> {
        let start = self.log.clock().instant_at(self.spec.start_ms as f64);
        if !self.sleep_until(start).await {
            return Ok(());
        }
        self.emit(WorkerEvent::Started);
        let steps = std::mem::take(&mut self.spec.steps);
        for step in &steps {
            match self.step(step).await {
                Ok(Flow::Continue) => {}
                Ok(Flow::Stop) => return Ok(()),
                Err(e) => {
                    self.emit(WorkerEvent::Failed {
                        error: e.to_string(),
                    });
                    return Err(e);
                }
            }
        }
        self.emit(WorkerEvent::Finished);
        Ok(())
    }

    async fn step(&mut self, step: &Step) -> Result<Flow, BackendError> {
        match step {
            Step::Acquire { give_up_ms } => return self.acquire(*give_up_ms).await,
            Step::Pause { ms } => {
                self.emit(WorkerEvent::Paused { ms: *ms });
                if !self.sleep_scenario(*ms as f64).await {
                    return Ok(Flow::Stop);
                }
                self.emit(WorkerEvent::Resumed);
            }
            Step::Work { ms } => {
                self.emit(WorkerEvent::Working { ms: *ms });
                if !self.sleep_scenario(*ms as f64).await {
                    return Ok(Flow::Stop);
                }
            }
            Step::Check => {
                let holder = self.client.holder().await?;
                let still_owner = holder.is_some() && holder == self.value;
                self.emit(WorkerEvent::Checked { still_owner });
            }
            Step::Write { value } => {
                let write = StoredWrite {
                    worker: self.spec.name.clone(),
                    token: self.token,
                    value: value.clone(),
                };
                let accepted = self.client.write(&write, self.settings.fencing).await?;
                let redis_holder = self
                    .client
                    .holder()
                    .await?
                    .map(|v| holder_name(&v).to_string());
                self.emit(WorkerEvent::Wrote {
                    value: value.clone(),
                    token: self.token,
                    accepted,
                    redis_holder,
                });
            }
            Step::Release => {
                let value = self.value.take().unwrap_or_default();
                let deleted = self.client.release(&value, self.settings.release).await?;
                let unsafe_del = self.settings.release == ReleaseMode::Del;
                self.emit(WorkerEvent::Released {
                    deleted,
                    unsafe_del,
                });
            }
            Step::Renew => {
                let value = self.value.clone().unwrap_or_default();
                let extended = self.client.renew(&value, self.real_ttl()).await?;
                self.emit(WorkerEvent::Renewed { extended });
            }
            Step::Crash => {
                self.emit(WorkerEvent::Crashed);
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Continue)
    }

    /// Try to take the lock; while it is taken, sleep exactly until the holder's
    /// lease runs out (one ms past it, as Redis expires a key only once its deadline
    /// has passed) and try again. No fixed poll interval: the hand-over happens
    /// within a round trip of the expiry.
    async fn acquire(&mut self, give_up_ms: Option<u64>) -> Result<Flow, BackendError> {
        let clock = *self.log.clock();
        let give_up_at = give_up_ms.map(|ms| Instant::now() + clock.real(ms as f64));
        let value = holder_value(&self.spec.name);
        let mut announced: Option<Option<String>> = None;
        loop {
            match self
                .client
                .acquire(&value, self.real_ttl(), self.settings.acquire)
                .await?
            {
                AcquireReply::Granted { token } => {
                    self.value = Some(value);
                    self.token = Some(token);
                    self.emit(WorkerEvent::Acquired { token });
                    return Ok(Flow::Continue);
                }
                AcquireReply::Busy { pttl_ms } => {
                    let asked = Instant::now();
                    let wait = match pttl_ms {
                        Some(ms) => std::time::Duration::from_millis(ms + 1),
                        None => clock.real(NO_TTL_RETRY_MS),
                    };
                    let holder = self
                        .client
                        .holder()
                        .await?
                        .map(|v| holder_name(&v).to_string());
                    if announced.as_ref() != Some(&holder) {
                        let retry_in_ms = pttl_ms.map(|ms| clock.scenario_ms(ms as f64));
                        self.emit(WorkerEvent::Waiting {
                            holder: holder.clone(),
                            retry_in_ms,
                        });
                        announced = Some(holder);
                    }
                    let mut retry_at = asked + wait;
                    if let Some(limit) = give_up_at {
                        if Instant::now() >= limit {
                            self.emit(WorkerEvent::GaveUp);
                            return Ok(Flow::Stop);
                        }
                        retry_at = retry_at.min(limit);
                    }
                    if !self.sleep_until(retry_at).await {
                        return Ok(Flow::Stop);
                    }
                    // Let every task woken at this same instant run first, the observer
                    // in particular, so the log shows the expiry before the new grant
                    // (on the simulator they wake at exactly the same virtual moment).
                    tokio::task::yield_now().await;
                }
            }
        }
    }

    /// The lease handed to Redis, in real ms: slow motion stretches it.
    fn real_ttl(&self) -> u64 {
        let ttl = self.settings.ttl_ms;
        if ttl == 0 {
            0
        } else {
            (self.log.clock().real(ttl as f64).as_millis() as u64).max(1)
        }
    }

    fn sleep_scenario(&self, ms: f64) -> impl Future<Output = bool> + Send + 'static {
        self.sleep_until(Instant::now() + self.log.clock().real(ms))
    }

    /// Sleep unless the run is cancelled first; resolves to false when cancelled.
    fn sleep_until(&self, at: Instant) -> impl Future<Output = bool> + Send + 'static {
        let cancel = self.cancel.clone();
        async move {
            tokio::select! {
                () = sleep_until(at) => true,
                () = cancel.cancelled() => false,
            }
        }
    }

    fn emit(&self, what: WorkerEvent) {
        self.log.append(EventKind::Worker {
            worker: self.spec.name.clone(),
            what,
        });
    }
}
