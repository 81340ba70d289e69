//! The stepper's observer: what Redis itself holds, logged as `Truth` events by the
//! rules of `engine/observer.rs` (a reading when the log grows, just after the lease
//! is due to end, and every 100 ms; an event only when the picture changed or the
//! lease's end moved; `expired` when the holder changed at its lease's end).

use super::Value;
use super::{Cx, OBSERVER};
use crate::engine::log::{EventKind, Name, Truth};
use crate::engine::recording::{IDLE_READ_MS, Reading, Recorder};

#[derive(Default)]
pub(super) struct Observer<'a> {
    recorder: Recorder<&'a str>,
    /// Each node's holder, as last read: kept for its room, a reading every 100 ms.
    nodes: Vec<Option<&'a str>>,
    /// After a reading: the log's length and ZooKeeper's count of changes then, the
    /// instant until which the lock reads the same while those stay so
    /// (`Db::quiet_until`: every call and fault that changes the lock is logged, or on
    /// ZooKeeper counted), and the lease's end that reading set the next one for. A
    /// reading within those would be the same one, and records nothing: it only sets
    /// the next, as it would have. Most readings of a run are such idle ones, 100 ms
    /// apart.
    quiet: Option<Quiet>,
}

#[derive(Clone, Copy)]
struct Quiet {
    log_len: usize,
    changes: u64,
    until: u64,
    at_expiry: u64,
}

impl Quiet {
    /// Nothing was logged, nor changed on ZooKeeper, since the reading.
    fn unchanged(&self, cx: &Cx) -> bool {
        self.log_len == cx.log.events.len() && self.changes == cx.db.changes()
    }
}

impl<'a> Observer<'a> {
    /// Skip the idle readings due before any other task's timer (and before `bound`,
    /// where the run stops), all at once: each would only set the next, 100 ms on,
    /// with nothing else running at its instant. Most instants of a run are such
    /// readings, and each cost a turn of the whole loop. The timer ends where the last
    /// of them would have set it, and is set now, after every other timer, as it would
    /// have been then: timers due together still fire in the order they would have.
    pub fn skip_idle(&self, cx: &mut Cx<'a>, bound: u64) {
        let (Some(q), Some(mut at)) = (self.quiet, cx.sched.due(OBSERVER)) else { return };
        if !q.unchanged(cx) {
            return;
        }
        let others = cx.sched.first_due_but(OBSERVER).unwrap_or(u64::MAX).min(bound);
        let first = at;
        while at < others && at <= q.until && at < q.at_expiry {
            at = q.at_expiry.min(at + IDLE_READ_MS);
        }
        if at != first {
            cx.sched.sleep(OBSERVER, at);
        }
    }

    /// One reading; the next is set on the schedule.
    pub fn read(&mut self, cx: &mut Cx<'a>) {
        let now = cx.now;
        if let Some(q) = self.quiet
            && q.unchanged(cx)
            && now <= q.until
            && now < q.at_expiry
        {
            cx.sched.sleep(OBSERVER, q.at_expiry.min(now + IDLE_READ_MS));
            return;
        }
        let names = &cx.names;
        let name = |v: Value| names.get(v.worker).copied().unwrap_or("");
        let mut nodes = std::mem::take(&mut self.nodes);
        nodes.clear();
        let (holder, pttl) = cx.db.read(now, |v| nodes.push(v.map(name)));
        let holder = holder.map(name);
        let (fence, highest) = (cx.db.counter(), cx.db.highest);
        let ttl_ms = pttl.map(|ms| ms as f64);
        let reading = Reading { holder, fence, highest, nodes, ttl_ms };
        if let Some(expired) = self.recorder.record(now as f64, &reading) {
            let truth = Truth {
                holder: reading.holder.map(Name::from),
                ttl_ms,
                fence_counter: fence,
                storage_highest: highest,
                nodes: reading.nodes.iter().map(|n| n.map(Name::from)).collect(),
                expired: expired.map(Name::from),
            };
            cx.log.push(now, EventKind::Truth(truth));
        }
        self.nodes = reading.nodes;
        // A session it found expired woke the watchers.
        cx.settle(None);
        let at_expiry = pttl.map_or(u64::MAX, |ms| now + ms + 1);
        let (log_len, changes) = (cx.log.events.len(), cx.db.changes());
        self.quiet = cx.db.quiet_until().map(|until| Quiet { log_len, changes, until, at_expiry });
        cx.sched.sleep(OBSERVER, at_expiry.min(now + IDLE_READ_MS));
    }
}
