//! A student's desk: joined with the URL the instructor handed out, it posts the
//! student's worker's events to the student's own stream and reads the controls.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::streams::StreamReadReply;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{ClassError, Control, RoomKeys, connect, deadline, deadline_after, seat_of};
use crate::engine::log::{Event, EventKind};

pub struct Desk {
    pub keys: RoomKeys,
    pub name: String,
    /// Posts; never blocks.
    con: MultiplexedConnection,
    /// Reads the controls with `XREAD BLOCK`, which would hold up posts on `con`.
    listen: MultiplexedConnection,
    /// The last event posted: the next is `seq + 1`, after a rejoin too.
    seq: u64,
    /// The last control read.
    controls_seen: String,
}

impl Desk {
    /// Join with a URL from the instructor (`redis://fencelab-ROOM-NAME:PASSWORD@...`).
    /// Numbering carries on from the student's last event in the room, and controls
    /// are read from now on (a pause sent before a rejoin is not played again).
    pub async fn join(url: &str) -> Result<Desk, ClassError> {
        let (id, name) = seat_of(url)?;
        let (id, name) = (id.as_str(), name.as_str());
        let mut keys = RoomKeys::new(id);
        let mut con = connect(url).await?;
        let listen = connect(url).await?;
        // The worker's writes expire with the room's lease: a room whose instructor is
        // gone leaves nothing behind for long.
        keys.run.expire_ms = super::lease::lease_of(&mut con, &keys).await?;
        let last = |key: String| {
            let mut cmd = redis::cmd("XREVRANGE");
            cmd.arg(key).arg("+").arg("-").arg("COUNT").arg(1);
            cmd
        };
        let mine: Vec<(String, Vec<(String, String)>)> =
            deadline(last(keys.stream(name)).query_async(&mut con)).await?;
        let seq = mine
            .first()
            .and_then(|(_, fields)| fields.iter().find(|(k, _)| k == "seq"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let controls: Vec<(String, Vec<(String, String)>)> =
            deadline(last(keys.controls()).query_async(&mut con)).await?;
        let controls_seen = controls.first().map_or("0".to_string(), |(id, _)| id.clone());
        Ok(Desk { keys, name: name.to_string(), con, listen, seq, controls_seen })
    }

    /// The number of the last event posted.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Post one event of this student's worker, undated (the class dates it when it
    /// arrives); returns its number.
    pub async fn post(&mut self, kind: &EventKind) -> Result<u64, ClassError> {
        self.post_at(kind, None).await
    }

    /// [`Desk::post`], with when it happened on the worker's run clock (`at_ms`):
    /// the class dates it by that, not by when it arrives, which is later by however
    /// many events were posted before it.
    pub async fn post_at(
        &mut self,
        kind: &EventKind,
        at_ms: Option<f64>,
    ) -> Result<u64, ClassError> {
        let json = serde_json::to_string(kind).map_err(|e| ClassError::Redis(e.to_string()))?;
        let seq = self.seq + 1;
        let mut cmd = redis::cmd("XADD");
        // NOMKSTREAM: a stream gone with the room's lease is not made again.
        // MAXLEN: the stream is capped, as the class's gate asks (`gate::MAX_STREAM`).
        cmd.arg(self.keys.stream(&self.name)).arg("NOMKSTREAM").arg("MAXLEN").arg("~");
        cmd.arg(super::gate::MAX_STREAM).arg("*");
        cmd.arg("seq").arg(seq).arg("sender").arg(&self.name).arg("event").arg(json);
        if let Some(at_ms) = at_ms {
            cmd.arg("at").arg(format!("{at_ms:.3}"));
        }
        // Then the roll's doorbell: it reads at once, not on its next look.
        let mut pipe = redis::pipe();
        pipe.add_command(cmd).cmd("PUBLISH").arg(self.keys.posted()).arg(&self.name).ignore();
        let (posted,): (Option<String>,) = deadline(pipe.query_async(&mut self.con)).await?;
        posted.ok_or_else(|| ClassError::RoomGone(self.keys.id.clone()))?;
        self.seq = seq;
        Ok(seq)
    }

    /// Answer question `number` with `choice` (from 1); the latest answer counts.
    pub async fn answer(&mut self, number: u32, choice: usize) -> Result<(), ClassError> {
        super::quiz::post(&mut self.con, &self.keys, &self.name, number, choice).await
    }

    /// Every control sent to the room so far, oldest first: a student who rejoins
    /// mid-run finds the start it missed.
    pub async fn history(&mut self) -> Result<Vec<Control>, ClassError> {
        let mut controls = Vec::new();
        let mut from = "-".to_string();
        // A page at a time, as the class's gate bounds a read (`gate::MAX_COUNT`).
        loop {
            let mut cmd = redis::cmd("XRANGE");
            cmd.arg(self.keys.controls()).arg(&from).arg("+").arg("COUNT");
            cmd.arg(super::gate::MAX_COUNT);
            let entries: Vec<(String, Vec<(String, String)>)> =
                deadline(cmd.query_async(&mut self.con)).await?;
            let whole = entries.len() < super::gate::MAX_COUNT as usize;
            if let Some((last, _)) = entries.last() {
                from = format!("({last}");
            }
            controls.extend(
                entries
                    .into_iter()
                    .flat_map(|(_, fields)| fields)
                    .filter(|(k, _)| k == "control")
                    .filter_map(|(_, v)| serde_json::from_str(&v).ok()),
            );
            if whole {
                return Ok(controls);
            }
        }
    }

    /// The instructor's log, mirrored: the events after `after` (a stream id; "0" for
    /// all, so a rejoining student catches up), with the id of the last.
    pub async fn room(
        &mut self,
        after: &str,
        block: Duration,
    ) -> Result<(String, Vec<Event>), ClassError> {
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(super::gate::MAX_COUNT);
        cmd.arg("BLOCK").arg(blocking(block)).arg("STREAMS");
        cmd.arg(self.keys.room()).arg(after);
        let reply: Option<StreamReadReply> =
            deadline_after(block, cmd.query_async(&mut self.listen)).await?;
        let mut last = after.to_string();
        let mut out = Vec::new();
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            last = entry.id.clone();
            let event: Option<String> = entry.get("event");
            out.extend(event.and_then(|e| serde_json::from_str(&e).ok()));
        }
        Ok((last, out))
    }

    /// Listen to the room on a task of its own, reading with `block`: every control
    /// from now on, in order, until the receiver is dropped. A desk that only listens,
    /// so its blocking reads never hold up another desk's posts.
    pub fn listen(
        mut self,
        block: Duration,
    ) -> (mpsc::UnboundedReceiver<Control>, JoinHandle<Result<(), ClassError>>) {
        let (heard_tx, heard) = mpsc::unbounded_channel();
        let listener = tokio::spawn(async move {
            loop {
                for control in self.controls(block).await? {
                    if heard_tx.send(control).is_err() {
                        return Ok(());
                    }
                }
            }
        });
        (heard, listener)
    }

    /// The controls sent since the last call, waiting up to `block` for one.
    pub async fn controls(&mut self, block: Duration) -> Result<Vec<Control>, ClassError> {
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(super::gate::MAX_COUNT);
        cmd.arg("BLOCK").arg(blocking(block)).arg("STREAMS");
        cmd.arg(self.keys.controls()).arg(&self.controls_seen);
        let reply: Option<StreamReadReply> =
            deadline_after(block, cmd.query_async(&mut self.listen)).await?;
        let mut out = Vec::new();
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            self.controls_seen = entry.id.clone();
            let control: Option<String> = entry.get("control");
            if let Some(c) = control.and_then(|c| serde_json::from_str(&c).ok()) {
                out.push(c);
            }
        }
        Ok(out)
    }
}

/// A read's block in ms, within what the class's gate allows: at least 1 (0 would
/// wait forever), at most `gate::MAX_BLOCK_MS`.
fn blocking(block: Duration) -> u64 {
    (block.as_millis() as u64).clamp(1, super::gate::MAX_BLOCK_MS)
}
