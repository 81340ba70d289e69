//! The stepper's observer: what Redis itself holds, logged as `Truth` events by the
//! rules of `engine/observer.rs` (a reading when the log grows, just after the lease
//! is due to end, and every 100 ms; an event only when the picture changed or the
//! lease's end moved; `expired` when the holder changed at its lease's end).

use super::redis::Value;
use super::{Cx, OBSERVER};
use crate::engine::log::{EventKind, Truth};

/// Longest gap between two readings, in ms (the engine's `IDLE_READ_MS`).
const IDLE_READ_MS: u64 = 100;
/// A lease end that moves by more than this is a renewal worth recording.
const DEADLINE_SLACK_MS: f64 = 5.0;

#[derive(Default)]
pub(super) struct Observer<'a> {
    /// The last recorded holder, token counter and storage high-water mark, and
    /// (Redlock) each node's holder.
    last: Option<(Option<&'a str>, u64, u64)>,
    last_nodes: Vec<Option<&'a str>>,
    /// When the last recorded lease ends, in ms.
    last_deadline: Option<f64>,
}

impl<'a> Observer<'a> {
    /// One reading; the next is set on the schedule.
    pub fn read(&mut self, cx: &mut Cx<'a>) {
        let now = cx.now;
        let holder = cx.db.holder(now).map(|v| cx.name(v));
        let names = &cx.names;
        let name = |v: Value| names.get(v.worker).copied().unwrap_or("");
        let nodes: Vec<Option<&'a str>> = cx.db.node_holders(now).map(|v| v.map(name)).collect();
        let pttl = cx.db.pttl(now);
        let (fence, highest) = (cx.db.fence, cx.db.highest);
        let now_ms = now as f64;
        let expired = match (self.last, self.last_deadline) {
            (Some((Some(last), ..)), Some(due))
                if holder != Some(last) && now_ms >= due - DEADLINE_SLACK_MS =>
            {
                Some(last)
            }
            _ => None,
        };
        let ttl_ms = pttl.map(|ms| ms as f64);
        let deadline = ttl_ms.map(|ttl| now_ms + ttl);
        let moved = match (deadline, self.last_deadline) {
            (Some(d), Some(prev)) => (d - prev).abs() > DEADLINE_SLACK_MS,
            (d, prev) => d.is_some() != prev.is_some(),
        };
        let changed = expired.is_some()
            || self.last != Some((holder, fence, highest))
            || self.last_nodes != nodes;
        if changed || moved {
            let truth = Truth {
                holder: holder.map(str::to_string),
                ttl_ms,
                fence_counter: fence,
                storage_highest: highest,
                nodes: nodes.iter().map(|n| n.map(str::to_string)).collect(),
                expired: expired.map(str::to_string),
            };
            cx.log.push(now, EventKind::Truth(truth));
            self.last = Some((holder, fence, highest));
            self.last_nodes = nodes;
            self.last_deadline = deadline;
        }
        let at_expiry = pttl.map_or(u64::MAX, |ms| now + ms + 1);
        cx.sched.sleep(OBSERVER, at_expiry.min(now + IDLE_READ_MS));
    }
}
