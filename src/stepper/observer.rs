//! The stepper's observer: what Redis itself holds, logged as `Truth` events by the
//! rules of `engine/observer.rs` (a reading when the log grows, just after the lease
//! is due to end, and every 100 ms; an event only when the picture changed or the
//! lease's end moved; `expired` when the holder changed at its lease's end).

use super::Value;
use super::{Cx, OBSERVER};
use crate::engine::log::{EventKind, Truth};
use crate::engine::recording::{IDLE_READ_MS, Reading, Recorder};

#[derive(Default)]
pub(super) struct Observer<'a> {
    recorder: Recorder<&'a str>,
}

impl<'a> Observer<'a> {
    /// One reading; the next is set on the schedule.
    pub fn read(&mut self, cx: &mut Cx<'a>) {
        let now = cx.now;
        let holder = cx.db.holder(now, None).map(|v| cx.name(v));
        let names = &cx.names;
        let name = |v: Value| names.get(v.worker).copied().unwrap_or("");
        let nodes: Vec<Option<&'a str>> = cx.db.node_holders(now).map(|v| v.map(name)).collect();
        let pttl = cx.db.pttl(now);
        let (fence, highest) = (cx.db.counter(), cx.db.highest);
        let ttl_ms = pttl.map(|ms| ms as f64);
        let reading = Reading { holder, fence, highest, nodes, ttl_ms };
        if let Some((reading, expired)) = self.recorder.record(now as f64, reading) {
            let truth = Truth {
                holder: reading.holder.map(str::to_string),
                ttl_ms,
                fence_counter: fence,
                storage_highest: highest,
                nodes: reading.nodes.iter().map(|n| n.map(str::to_string)).collect(),
                expired: expired.map(str::to_string),
            };
            cx.log.push(now, EventKind::Truth(truth));
        }
        // A session it found expired woke the watchers.
        cx.settle(None);
        let at_expiry = pttl.map_or(u64::MAX, |ms| now + ms + 1);
        cx.sched.sleep(OBSERVER, at_expiry.min(now + IDLE_READ_MS));
    }
}
