//! The checker's judgment of accepted writes: stale ones, and ones by a worker that
//! did not hold the lock, each judged where the storage took it (its place in the
//! storage's order, and who held the lock when it was sent), not when its reply
//! reached the worker: a link that delays replies changes the order they are logged
//! in, never what happened at the storage.

use std::collections::BTreeMap;

use super::{Violation, lease_and_scale, lock_of};
use crate::engine::log::{Event, EventKind, Name, WorkerEvent};
use crate::scenario::LockSpec;

/// Which accepted writes are stale, judged in the order the storage took them (each
/// write's `order`), whatever order their replies were logged in: the one rule the
/// checker and the run model (the storage panel's STALE mark) share. Fed the log in
/// order, it may learn of a write the storage took earlier only after later ones (a
/// link delayed its reply); it then judges the later ones again.
#[derive(Debug, Clone, Default)]
pub struct StaleRule {
    /// On a queue (`lock = "stream"`) tokens are job numbers: then a second worker's
    /// write of a job is the violation (done twice), and a lower number is just an
    /// earlier job.
    jobs: bool,
    /// When each worker's current grant was handed out, as a number that orders the
    /// grants (the run model's: its `Acquired` event's seq; the checker's: its place
    /// among the run's grants, as they happened): between two writes with the same
    /// token, the older grant's is the stale one.
    granted: BTreeMap<Name, u64>,
    /// Every accepted write so far, in the storage's order: a write almost always
    /// goes at the end, so a sorted `Vec` (no node to allocate per check).
    taken: Vec<(Place, Taken)>,
    /// The judgment of `taken`, walked in order up to its last write.
    walk: Walk,
    /// The highest storage order given so far: a write logged without one (a log from
    /// before writes carried it) is placed there, as its reply arrived.
    latest: u64,
}

/// Where an accepted write stands: the storage's order, then the order it was logged
/// in (which alone orders writes logged without the storage's).
type Place = (u64, u64);

/// One accepted write, as the rule keeps it.
#[derive(Debug, Clone)]
struct Taken {
    /// The caller's name for it, returned when it is found stale.
    id: u64,
    worker: Name,
    token: u64,
    /// The writer's grant when it wrote (its number, as [`StaleRule::granted`] had it).
    grant: Option<u64>,
    /// Found stale: the write it came after (its writer and token).
    after: Option<(Name, u64)>,
}

/// What the writes taken so far, in storage order, say of the next one.
#[derive(Debug, Clone, Default)]
struct Walk {
    /// The highest token accepted so far: its first write's writer, token and grant.
    highest: Option<(Name, u64, Option<u64>)>,
    /// On a queue: which worker's write of each job the storage took first.
    first_of_job: BTreeMap<u64, Name>,
}

impl Walk {
    /// Take `w` in: the write it is stale after, if it is.
    fn take(&mut self, w: &Taken, jobs: bool) -> Option<(Name, u64)> {
        if jobs {
            let first = self.first_of_job.entry(w.token).or_insert_with(|| w.worker.clone());
            return (*first != w.worker).then(|| (first.clone(), w.token));
        }
        let stale = self.highest.as_ref().filter(|(_, token, grant)| {
            w.token < *token || (w.token == *token && w.grant < *grant)
        });
        let stale = stale.map(|(worker, token, _)| (worker.clone(), *token));
        if self.highest.as_ref().is_none_or(|(_, h, _)| w.token > *h) {
            self.highest = Some((w.worker.clone(), w.token, w.grant));
        }
        stale
    }
}

/// A write found stale: the caller's id for it, and the write it came after.
#[derive(Debug, Clone, PartialEq)]
pub struct Stale {
    pub id: u64,
    pub after_worker: Name,
    pub after_token: u64,
}

impl StaleRule {
    /// The rule for a run on `lock`.
    pub fn for_lock(lock: &LockSpec) -> Self {
        StaleRule { jobs: lock.queue, ..StaleRule::default() }
    }

    /// Whether tokens are a queue's job numbers (a write [`Self::accepted`] finds is
    /// then a job done twice).
    pub fn counts_jobs(&self) -> bool {
        self.jobs
    }

    /// `worker` was granted the lock, by the grant numbered `order` (any numbering that
    /// orders a run's grants: the event's seq, say).
    pub fn granted(&mut self, worker: &str, order: u64) {
        match self.granted.get_mut(worker) {
            Some(grant) => *grant = order,
            None => {
                self.granted.insert(worker.into(), order);
            }
        }
    }

    /// The storage accepted `worker`'s write with `token`, as its `order`-th write
    /// (None: not known, judged as logged); `id` names it for the caller. Returns the
    /// writes this shows to be stale, each with the write it came after: this one, or
    /// (when the storage took this one before writes already logged) later ones. A
    /// write once found stale stays so.
    pub fn accepted(
        &mut self,
        id: u64,
        worker: &str,
        token: u64,
        order: Option<u64>,
    ) -> Vec<Stale> {
        let order = order.unwrap_or(self.latest);
        self.latest = self.latest.max(order);
        let place = (order, self.taken.len() as u64);
        let grant = self.granted.get(worker).copied();
        let w = Taken { id, worker: worker.into(), token, grant, after: None };
        let at = self.taken.partition_point(|(p, _)| *p < place);
        self.taken.insert(at, (place, w));
        if at + 1 == self.taken.len() {
            // The usual case: the storage's latest write, judged on what came before.
            return judge(&mut self.walk, self.taken[at..].iter_mut().map(|(_, w)| w), self.jobs);
        }
        // Taken before writes already judged: walk them all again.
        self.walk = Walk::default();
        judge(&mut self.walk, self.taken.iter_mut().map(|(_, w)| w), self.jobs)
    }

    /// The highest token accepted so far.
    pub fn highest(&self) -> Option<u64> {
        self.walk.highest.as_ref().map(|(_, t, _)| *t)
    }
}

/// Walk `writes` in storage order on from `walk`: the ones newly found stale.
fn judge<'a>(
    walk: &mut Walk,
    writes: impl Iterator<Item = &'a mut Taken>,
    jobs: bool,
) -> Vec<Stale> {
    let mut found = Vec::new();
    for w in writes {
        let after = walk.take(w, jobs);
        if w.after.is_none()
            && let Some((after_worker, after_token)) = after
        {
            found.push(Stale { id: w.id, after_worker: after_worker.clone(), after_token });
            w.after = Some((after_worker, after_token));
        }
    }
    found
}

/// Who held the lock when the storage took each write, as far as the log tells.
///
/// A write's "still own lock?" reading (`redis_holder`) is asked right after its
/// reply. Over a link that delays replies, that is long after the storage took the
/// write: the request travelled on time, only its reply was late. So for a worker
/// whose link is delayed, the holder is what the lock service listed (the observer's
/// latest reading) when the write was sent.
#[derive(Default)]
struct HolderAtWrite<'a> {
    time_scale: f64,
    /// Foreign programs: fencelab writes for them, and asks who holds the lock, on
    /// connections of its own, which their link does not delay.
    programs: Vec<&'a str>,
    /// Workers whose replies arrive late now.
    late: std::collections::BTreeSet<&'a str>,
    /// When each worker sent its first call since its last event (scenario ms): a
    /// write's, when the event is its `Wrote`.
    sent: BTreeMap<&'a str, f64>,
    /// Each reading of the lock service's holder, in time order; kept only where a
    /// link delays a worker's replies (nothing else reads them, and most runs, a
    /// search's hundred thousand a second among them, have none).
    readings: Option<Vec<(f64, Option<&'a str>)>>,
}

impl<'a> HolderAtWrite<'a> {
    fn new(events: &'a [Event]) -> Self {
        let programs = events.iter().find_map(|e| match &e.kind {
            EventKind::RunStarted { scenario, .. } => Some(
                scenario
                    .workers
                    .iter()
                    .filter(|w| w.program.is_some())
                    .map(|w| w.name.as_str())
                    .collect(),
            ),
            _ => None,
        });
        let time_scale = lease_and_scale(events).1;
        let delayed = events.iter().any(|e| {
            matches!(e.kind, EventKind::Link { kind: crate::scenario::FaultKind::Delay, .. })
        });
        HolderAtWrite {
            time_scale,
            programs: programs.unwrap_or_default(),
            readings: delayed.then(Vec::new),
            ..Self::default()
        }
    }

    /// Take in `e` (every event, in log order).
    fn see(&mut self, e: &'a Event) {
        match &e.kind {
            EventKind::Link { worker, kind, .. }
                if *kind == crate::scenario::FaultKind::Delay
                    && !self.programs.contains(&worker.as_str()) =>
            {
                self.late.insert(worker);
            }
            EventKind::Link { worker, .. } => {
                self.late.remove(worker.as_str());
            }
            EventKind::Truth(truth) => {
                if let Some(readings) = &mut self.readings {
                    readings.push((e.t_ms, truth.holder.as_deref()));
                }
            }
            EventKind::Command { worker, latency_ms, .. } => {
                let at = e.happened() - latency_ms / self.time_scale;
                self.sent.entry(worker).or_insert(at);
            }
            _ => {}
        }
    }

    /// Who held the lock when the storage took `worker`'s write, whose reading was
    /// `redis_holder`; then its next calls start afresh.
    fn holder(&mut self, worker: &str, redis_holder: Option<&'a str>) -> Option<&'a str> {
        let sent = self.sent.remove(worker);
        let Some(sent) = sent.filter(|_| self.late.contains(worker)) else {
            return redis_holder;
        };
        let readings = self.readings.as_deref().unwrap_or_default();
        let before = readings.partition_point(|(t, _)| *t <= sent);
        before.checked_sub(1).map_or(redis_holder, |last| readings[last].1)
    }

    /// `worker` did something else: its next calls are a new step's.
    fn next_step(&mut self, worker: &str) {
        self.sent.remove(worker);
    }
}

/// Each grant of the run, in log order: the event that tells it, the worker, and its
/// number, counted in the order the grants happened (`Event::happened_order`): a
/// class logs a student's grant as it arrives, after a later grant of another's,
/// perhaps. One small `Vec`: the checker runs on each of a search's hundreds of thousands of
/// runs a second, and in all but a class's the log's order is the order they happened.
///
/// A program's grant is where its server gave it (the reply its proxy saw): a program
/// frozen as that reply reached it reports `acquired` only after it wakes, later than
/// a grant the server gave another after its lease ran out. Its report then names the
/// same grant, not a new one.
fn grant_numbers(events: &[Event]) -> Vec<Grant<'_>> {
    let mut granted_by_server = std::collections::BTreeSet::new();
    let mut grants = Vec::new();
    for e in events {
        let worker = match &e.kind {
            EventKind::Command { worker, program: Some(call), .. } if call.grant => {
                granted_by_server.insert(worker.as_str());
                worker
            }
            EventKind::Worker { worker, what: WorkerEvent::Acquired { .. } }
                if !granted_by_server.remove(worker.as_str()) =>
            {
                worker
            }
            _ => continue,
        };
        grants.push(Grant { event: e, worker, number: grants.len() as u64 + 1 });
    }
    if !grants.is_sorted_by(|a, b| a.event.happened_order(b.event).is_lt()) {
        let mut by_time: Vec<usize> = (0..grants.len()).collect();
        by_time.sort_by(|&i, &j| grants[i].event.happened_order(grants[j].event));
        for (i, number) in by_time.into_iter().zip(1..) {
            grants[i].number = number;
        }
    }
    grants
}

/// A grant, and its number in the run.
struct Grant<'a> {
    event: &'a Event,
    worker: &'a str,
    number: u64,
}

pub(super) fn bad_writes(events: &[Event]) -> Vec<Violation> {
    let mut rule = StaleRule::for_lock(lock_of(events));
    let mut holders = HolderAtWrite::new(events);
    let mut found = Vec::new();
    // A foreign program whose library hands out no tokens writes without one: its
    // write is judged by the order of its grant (the n-th grant of the run), which is
    // what a token would have said.
    let grants = grant_numbers(events);
    // The next of `grants` in log order: found by the event itself, whatever its seq.
    let mut next_grant = 0;
    let mut grant_of = BTreeMap::new();
    // Each accepted write's event, its writer, the token it is judged by, and whether
    // that was its grant's number: by the event's seq, the rule's id for it.
    let mut writes = Vec::new();
    for e in events {
        holders.see(e);
        if let Some(grant) = grants.get(next_grant).filter(|g| std::ptr::eq(g.event, e)) {
            next_grant += 1;
            // Its number orders it among grants as the rule asks: by when it happened.
            rule.granted(grant.worker, grant.number);
            grant_of.insert(grant.worker, grant.number);
        }
        let (worker, token, redis_holder, order) = match &e.kind {
            EventKind::Worker {
                worker,
                what: WorkerEvent::Wrote { token, accepted: true, redis_holder, order, .. },
            } => (worker, token, holders.holder(worker, redis_holder.as_deref()), order),
            EventKind::Worker { worker, .. } => {
                holders.next_step(worker);
                continue;
            }
            _ => continue,
        };
        let (by_grant, written) = (token.is_none(), *token);
        if let Some(token) = token.or_else(|| grant_of.get(worker.as_str()).copied()) {
            // Pushed in log order, so in the order of their seq.
            writes.push((e, worker, token, by_grant));
            for stale in rule.accepted(e.seq, worker, token, *order) {
                let Ok(at) = writes.binary_search_by_key(&stale.id, |(e, ..)| e.seq) else {
                    continue;
                };
                let (e, worker, token, by_grant) = writes[at];
                let (first, at_ms, seq) = (stale.after_worker, e.t_ms, e.seq);
                found.push(if rule.counts_jobs() {
                    let (second, result) = (worker.clone(), format!("job {token}"));
                    Violation::DoneTwice { result, first, second: second.clone(), at_ms, seq }
                } else {
                    let (worker, after_token) = (worker.clone(), stale.after_token);
                    Violation::StaleWrite {
                        worker: worker.clone(),
                        token,
                        after_worker: first,
                        after_token,
                        at_ms,
                        seq,
                        by_grant,
                    }
                });
            }
        }
        if redis_holder != Some(worker.as_str()) {
            found.push(Violation::WriteByNonHolder {
                worker: worker.clone(),
                // The write's own token: a grant's number stands in only for ordering.
                token: written,
                redis_holder: redis_holder.map(Name::from),
                at_ms: e.t_ms,
                seq: e.seq,
            });
        }
    }
    found
}
