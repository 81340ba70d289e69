//! When a reading of the servers becomes a `Truth` event: the one rule the engine's
//! observer (real time, `observer.rs`) and the stepper's (`stepper/observer.rs`, the
//! fast simulator) both follow, over whatever names of holders they keep (owned, or
//! the stepper's borrowed ones). The differential test holds them to the same log.
//!
//! A reading is recorded when the picture changed (holder, counters, each node's
//! holder) or the lease's end moved by more than [`DEADLINE_SLACK_MS`] (a renewal); a
//! holder that changed at its lease's end is named as the one whose lease expired.

/// Longest gap between two readings, in scenario ms.
pub const IDLE_READ_MS: u64 = 100;
/// A lease end that moves by more than this (scenario ms) is a renewal worth recording.
pub const DEADLINE_SLACK_MS: f64 = 5.0;

/// One reading of the servers, in scenario units.
#[derive(Debug, PartialEq)]
pub struct Reading<H> {
    pub holder: Option<H>,
    pub fence: u64,
    pub highest: u64,
    /// Each node's holder (Redlock).
    pub nodes: Vec<Option<H>>,
    /// What is left of the lease (None: no holder, or no expiry).
    pub ttl_ms: Option<f64>,
}

/// What was last recorded.
pub struct Recorder<H> {
    last: Option<Reading<H>>,
    /// Scenario time at which the last recorded lease ends.
    last_deadline: Option<f64>,
}

/// Written out for `clone_from`: the recorder keeps its last reading by copying each
/// new one into the old one's room (the stepper takes a reading every 100 ms of a
/// run, a hundred thousand runs a second).
impl<H: Clone> Clone for Reading<H> {
    fn clone(&self) -> Self {
        let (holder, nodes) = (self.holder.clone(), self.nodes.clone());
        Reading { holder, fence: self.fence, highest: self.highest, nodes, ttl_ms: self.ttl_ms }
    }

    fn clone_from(&mut self, from: &Self) {
        self.holder.clone_from(&from.holder);
        self.nodes.clone_from(&from.nodes);
        (self.fence, self.highest, self.ttl_ms) = (from.fence, from.highest, from.ttl_ms);
    }
}

impl<H> Default for Recorder<H> {
    fn default() -> Self {
        Recorder { last: None, last_deadline: None }
    }
}

impl<H: PartialEq + Clone> Recorder<H> {
    /// Whether the reading taken at `now_ms` is worth an event: if so, with whose
    /// lease it saw expire (the last holder, when the holder changed at its lease's
    /// end); None when nothing changed.
    pub fn record(&mut self, now_ms: f64, reading: &Reading<H>) -> Option<Option<H>> {
        let expired = match (&self.last, self.last_deadline) {
            (Some(last), Some(due)) if now_ms >= due - DEADLINE_SLACK_MS => {
                last.holder.clone().filter(|last| reading.holder.as_ref() != Some(last))
            }
            _ => None,
        };
        let deadline = reading.ttl_ms.map(|ttl| now_ms + ttl);
        let moved = match (deadline, self.last_deadline) {
            (Some(d), Some(prev)) => (d - prev).abs() > DEADLINE_SLACK_MS,
            (d, prev) => d.is_some() != prev.is_some(),
        };
        let changed = expired.is_some()
            || self.last.as_ref().is_none_or(|last| {
                (&last.holder, last.fence, last.highest, &last.nodes)
                    != (&reading.holder, reading.fence, reading.highest, &reading.nodes)
            });
        if !(changed || moved) {
            return None;
        }
        match &mut self.last {
            Some(last) => last.clone_from(reading),
            None => self.last = Some(reading.clone()),
        }
        self.last_deadline = deadline;
        Some(expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(holder: Option<&'static str>, ttl_ms: Option<f64>) -> Reading<&'static str> {
        Reading { holder, fence: 1, highest: 0, nodes: Vec::new(), ttl_ms }
    }

    #[test]
    fn a_reading_is_recorded_when_the_picture_changes_or_the_lease_end_moves() {
        let mut r = Recorder::default();
        assert!(r.record(0.0, &held(Some("A"), Some(1000.0))).is_some());
        // The same holder, its lease counting down: nothing new.
        assert!(r.record(400.0, &held(Some("A"), Some(600.0))).is_none());
        // Renewed: the end moved.
        assert!(r.record(500.0, &held(Some("A"), Some(1000.0))).is_some());
        // B at A's lease's end: A's lease expired.
        let expired = r.record(1500.0, &held(Some("B"), Some(1000.0))).unwrap();
        assert_eq!(expired, Some("A"));
        // C long before B's end: a change, but no expiry.
        let expired = r.record(1600.0, &held(Some("C"), Some(1000.0))).unwrap();
        assert_eq!(expired, None);
    }
}
