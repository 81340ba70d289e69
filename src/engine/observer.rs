//! The observer: records what the lock service and the storage themselves hold, apart
//! from what workers believe.
//!
//! It reads the lock's holder, its remaining lease and its counter from the lock
//! service, the high-water mark (and, for a lock with no counter of its own, the
//! token counter) from the storage, merges them, and appends a [`Truth`] event whenever that
//! picture changes. It does not poll on a fixed short interval: it reads again when
//! the log grows (a worker did something), when the current lease is due to expire,
//! and otherwise only every [`IDLE_READ_MS`] to catch anything unexpected.
//!
//! It is also the run's watchdog on its servers. Workers may sit in a long pause and
//! send nothing for seconds, so a server that stopped (SIGSTOP, overload) or died
//! would otherwise be noticed only at the next worker command, or never while a
//! command waits. Each reading has [`ANSWER_WITHIN`] (real time); one that fails or
//! takes longer is a [`EventKind::ServerLost`] in the log and ends the run with an
//! error naming the server. Once the scenario has made a server fail on purpose (a
//! `Fault` in the log), a failed reading is the lesson, not an error: it is skipped.

use std::sync::Arc;

use tokio::time::{Duration, Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::log::{EventKind, EventLog, Name, Truth};
use super::recording::{Reading, Recorder};
use crate::backend::{BackendError, LockClient, StorageClient, TruthSample, holder_name};

/// How long (real time) a server has to answer one reading before it counts as lost:
/// a local or LAN Redis answers in well under a millisecond, so a second of silence
/// is a stopped or drowning server, and the run says so within 1-2 s.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// Longest gap between two readings, in scenario ms.
const IDLE_READ_MS: f64 = super::recording::IDLE_READ_MS as f64;
/// Gap between readings while a lease told in whole seconds is due (no time left, the
/// key still there), in scenario ms: far finer than a transcript's tenths.
const EXPIRY_REREAD_MS: f64 = IDLE_READ_MS / 20.0;

/// Which worker a lock value stands for. fencelab's own workers put their name in
/// front of the value (`A:…`); a foreign program's library picks its own (a UUID), and
/// fencelab learns whose it is from the server's OK to the program's `SET NX` (seen by
/// its proxy) or the program's `acquired` report, so the truth lane can name the holder
/// the server really has.
#[derive(Default)]
pub struct Holders {
    known: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// Values read before anyone said whose they are, and when first read: a program's
    /// grant is read by the observer a moment before its proxy sees the server's OK.
    unknown: std::sync::Mutex<std::collections::HashMap<String, Instant>>,
    /// Some worker is a program: its values need a name from `known`.
    programs: std::sync::atomic::AtomicBool,
    /// The run's workers: a value of fencelab's own (`name:…`, named in front) is
    /// never waited for, and no program can claim it.
    workers: std::collections::HashSet<String>,
    /// Workers whose release has gone out since they last got the lock. Where the
    /// service tells what is left of a lease in whole seconds (etcd), the lease's clock
    /// cannot tell a release in the lease's last second from its expiry: a key that
    /// goes away while its holder gives it back went with the release.
    giving_back: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// How long (real time) a value nobody has claimed is kept out of the truth lane.
const UNCLAIMED_FOR: Duration = Duration::from_millis(50);

impl Holders {
    /// Some of the run's `workers` may be programs (a class's students may bring
    /// their own).
    pub fn with_programs<'a>(mut self, workers: impl IntoIterator<Item = &'a str>) -> Self {
        self.programs.store(true, std::sync::atomic::Ordering::SeqCst);
        self.workers = workers.into_iter().map(str::to_string).collect();
        self
    }

    /// `value` is `worker`'s; false when it was known already, or is another
    /// worker's own value (`name:…`): the first claim stands, and a program cannot
    /// claim what fencelab's own workers store.
    pub fn insert(&self, value: &str, worker: &str) -> bool {
        if self.ours(value) {
            return false;
        }
        let Ok(mut known) = self.known.lock() else { return false };
        if known.contains_key(value) {
            return false;
        }
        known.insert(value.to_string(), worker.to_string());
        true
    }

    /// `worker` is about to send its release: what it holds goes away by its own hand.
    pub fn giving_back(&self, worker: &str) {
        if let Ok(mut giving) = self.giving_back.lock() {
            giving.insert(worker.to_string());
        }
    }

    /// `worker` got the lock again: a key of its that goes away may be an expiry again.
    pub fn holds_again(&self, worker: &str) {
        if let Ok(mut giving) = self.giving_back.lock() {
            giving.remove(worker);
        }
    }

    /// Whether `worker`'s release has gone out since it last got the lock.
    fn gave_back(&self, worker: &str) -> bool {
        self.giving_back.lock().is_ok_and(|giving| giving.contains(worker))
    }

    /// A value one of fencelab's own workers stores (named in front).
    fn ours(&self, value: &str) -> bool {
        let name = holder_name(value);
        name != value && self.workers.contains(name)
    }

    /// The worker `value` stands for: a claimed one, else the name in front of it.
    pub fn name(&self, value: &str) -> String {
        let known = self.known.lock().ok().and_then(|k| k.get(value).cloned());
        known.unwrap_or_else(|| holder_name(value).to_string())
    }

    /// Whether `value` may still be claimed in a moment: a value of a program's lock
    /// that nobody has claimed yet, first read less than [`UNCLAIMED_FOR`] ago.
    fn unclaimed(&self, value: &str) -> bool {
        if !self.programs.load(std::sync::atomic::Ordering::SeqCst) || self.ours(value) {
            return false;
        }
        if self.known.lock().is_ok_and(|k| k.contains_key(value)) {
            return false;
        }
        let Ok(mut unknown) = self.unknown.lock() else { return false };
        let first = *unknown.entry(value.to_string()).or_insert_with(Instant::now);
        first.elapsed() < UNCLAIMED_FOR
    }
}

pub struct Observer {
    lock: Box<dyn LockClient>,
    storage: Box<dyn StorageClient>,
    /// How the lock service and the storage are named when one is lost.
    names: (String, String),
    log: Arc<EventLog>,
    recorder: Recorder<String>,
    holders: Arc<Holders>,
    /// How much of the log has been looked through for claims.
    claims_read: usize,
}

impl Observer {
    /// `names`: the lock service's and the storage's descriptions, for the error.
    pub fn new(
        (lock, storage): (Box<dyn LockClient>, Box<dyn StorageClient>),
        names: (String, String),
        log: Arc<EventLog>,
        holders: Arc<Holders>,
    ) -> Self {
        let (recorder, claims_read) = (Recorder::default(), 0);
        Observer { lock, storage, names, log, recorder, holders, claims_read }
    }

    /// Read and record until `stop` is cancelled, then take one final reading.
    pub async fn run(mut self, stop: CancellationToken) -> Result<(), BackendError> {
        let mut grown = self.log.subscribe();
        loop {
            let next = self.read_or_report().await?;
            tokio::select! {
                () = stop.cancelled() => break,
                changed = grown.changed() => if changed.is_err() { break },
                () = sleep_until(next) => {}
            }
        }
        self.read_or_report().await.map(|_| ())
    }

    /// One reading. A lost server is logged and returned as the error, unless a
    /// scenario fault explains it; then the reading is skipped.
    async fn read_or_report(&mut self) -> Result<Instant, BackendError> {
        let (server, reason) = match self.read().await {
            Err(BackendError::ServerLost { server, reason }) => (server, reason),
            other => return other,
        };
        let events = self.log.snapshot();
        if events.iter().any(|e| matches!(e.kind, EventKind::Fault { .. })) {
            return Ok(Instant::now() + self.log.clock().real(IDLE_READ_MS));
        }
        let kind = EventKind::ServerLost { server: server.clone(), reason: reason.clone() };
        self.log.append(kind);
        Err(BackendError::ServerLost { server, reason })
    }

    /// Learn whose each newly claimed lock value is, from the log (in a class, a
    /// student's program's claims arrive with the student's events).
    fn take_claims(&mut self) {
        let new = self.log.since(self.claims_read);
        self.claims_read += new.len();
        for e in new {
            if let EventKind::Claimed { worker, value } = &e.kind {
                self.holders.insert(value, worker);
            }
        }
    }

    /// One reading; returns when the next one is due.
    async fn read(&mut self) -> Result<Instant, BackendError> {
        let lock = within(&self.names.0, self.lock.observe()).await?;
        let storage = within(&self.names.1, self.storage.observe()).await?;
        let sample = TruthSample::merge(lock, storage);
        self.take_claims();
        let values = sample.holder_value.iter().chain(sample.nodes.iter().flatten());
        if values.into_iter().any(|v| self.holders.unclaimed(v)) {
            // Read again in a moment, when whose it is is known.
            return Ok(Instant::now() + Duration::from_millis(2));
        }
        let clock = self.log.clock();
        let now_ms = clock.now_ms();
        let reading = to_reading(&sample, clock.scenario_ms(1.0), &self.holders);
        // A real etcd tells what is left of a lease in whole seconds.
        let coarse = self.lock.whole_seconds();
        if let Some(expired) = self.recorder.record(now_ms, &reading) {
            // Told in whole seconds, a lease's end is not known to the millisecond: a
            // key gone while its holder was giving it back went with that release.
            let expired = expired.filter(|old| !(coarse && self.holders.gave_back(old)));
            let Reading { holder, fence, highest, nodes, ttl_ms } = reading;
            let (fence_counter, storage_highest) = (fence, highest);
            let (holder, expired) = (holder.map(Name::from), expired.map(Name::from));
            let nodes = nodes.into_iter().map(|n| n.map(Name::from)).collect();
            let truth = Truth { holder, ttl_ms, fence_counter, storage_highest, nodes, expired };
            self.log.append(EventKind::Truth(truth));
        }
        let idle = Instant::now() + clock.real(IDLE_READ_MS);
        // Read again just after the lease is due to run out (Redis expires a key once
        // its deadline has passed), so the truth lane shows the expiry when it happens.
        // Told in whole seconds (etcd, which also drops a lease up to half a second
        // after its end), a lease is "due now" for up to 1.5 s: read again a moment
        // later each time, not back to back.
        let soon = match coarse {
            true => clock.real(EXPIRY_REREAD_MS),
            false => Duration::ZERO,
        };
        let at_expiry =
            sample.pttl_ms.map(|ms| Instant::now() + Duration::from_millis(ms + 1).max(soon));
        Ok(at_expiry.map_or(idle, |t| t.min(idle)))
    }
}

/// One call to `server` with [`ANSWER_WITHIN`]: no answer in time, or a connection
/// that is gone, is a lost server; any other error stays what it was.
async fn within<T>(
    server: &str,
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let lost = |reason: String| BackendError::ServerLost { server: server.to_string(), reason };
    match timeout(ANSWER_WITHIN, call).await {
        Err(_) => Err(lost(format!(
            "did not answer for {:.1} s (stopped, or overloaded?): the run was stopped",
            ANSWER_WITHIN.as_secs_f64()
        ))),
        Ok(Err(BackendError::Lost { message, .. })) => {
            Err(lost(format!("went away ({message}): the run was stopped")))
        }
        Ok(other) => other,
    }
}

/// Convert a raw sample to scenario units; `per_real_ms` is scenario ms per real ms.
fn to_reading(sample: &TruthSample, per_real_ms: f64, holders: &Holders) -> Reading<String> {
    Reading {
        holder: sample.holder_value.as_deref().map(|v| holders.name(v)),
        ttl_ms: sample.pttl_ms.map(|ms| ms as f64 * per_real_ms),
        fence: sample.fence_counter,
        highest: sample.storage_highest,
        nodes: sample.nodes.iter().map(|v| v.as_deref().map(|v| holders.name(v))).collect(),
    }
}
