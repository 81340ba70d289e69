//! The room's janitor: a small `fencelab room-janitor` process that removes a room's
//! student users and keys when its instructor dies without closing it (`kill -9`, a
//! crash). Redis has no expiring ACL user, so a room's lease alone leaves its users
//! behind, able to log in, until an admin sweeps them (a later class, `doctor`).
//!
//! The instructor starts it with a pipe as its stdin and writes the room on it (the
//! admin URL, whose password so travels only on the pipe, never in an argument or
//! the environment), then keeps the pipe open. Closing the room writes `closed`: the
//! janitor leaves without touching anything. End of file without it means the
//! instructor is gone: the janitor deletes the room's users and keys, within
//! `BUDGET`, and exits. So it outlives fencelab by seconds, as the guard of
//! `platform::tie_to_parent` does, and never longer. It runs in a process group of its
//! own, so the terminal's Ctrl-C (which the instructor handles by closing the room)
//! does not take it first.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{ClassError, RoomKeys, connect};

/// How long the janitor tries to clean up after its instructor, at most.
const BUDGET: Duration = Duration::from_secs(8);
/// Set to `off`, the instructor starts no janitor (a test of what a lapsed room leaves).
const OFF: &str = "FENCELAB_ROOM_JANITOR";

/// What the instructor tells its janitor, as one JSON line.
#[derive(Serialize, Deserialize)]
struct Charge {
    url: String,
    room: String,
    users: Vec<String>,
}

/// The instructor's end: the janitor's process and the pipe it watches.
pub struct Janitor {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl Janitor {
    /// Start `program room-janitor` for room `room` (its `users`) on `admin_url`. None
    /// when `FENCELAB_ROOM_JANITOR=off`.
    pub fn start(
        program: &Path,
        admin_url: &str,
        room: &str,
        users: Vec<String>,
    ) -> std::io::Result<Option<Janitor>> {
        if std::env::var(OFF).is_ok_and(|v| v == "off") {
            return Ok(None);
        }
        let mut child = Command::new(program)
            .arg("room-janitor")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let mut pipe = child.stdin.take();
        let charge = Charge { url: admin_url.to_string(), room: room.to_string(), users };
        if let Some(pipe) = pipe.as_mut() {
            let line = serde_json::to_string(&charge).map_err(std::io::Error::other)?;
            pipe.write_all(format!("{line}\n").as_bytes())?;
            pipe.flush()?;
        }
        Ok(Some(Janitor { child, pipe }))
    }

    /// The room is closed: the janitor leaves, touching nothing.
    pub fn dismiss(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(b"closed\n");
        }
        let _ = self.child.wait();
    }
}

/// `fencelab room-janitor`: read the charge, wait for the instructor's pipe to close,
/// and clean up unless the room was closed.
pub async fn serve() -> Result<(), ClassError> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let first = lines.next_line().await.map_err(|e| ClassError::Redis(e.to_string()))?;
    let Some(first) = first else { return Ok(()) };
    let charge: Charge =
        serde_json::from_str(&first).map_err(|e| ClassError::Redis(e.to_string()))?;
    loop {
        match lines.next_line().await {
            Ok(Some(line)) if line == "closed" => return Ok(()),
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        }
    }
    let keys = RoomKeys::new(&charge.room);
    let clean = async {
        loop {
            if let Ok(mut con) = connect(&charge.url).await
                && super::lease::delete_room(&mut con, &keys, &charge.users).await.is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    // Past the budget the room's lease ends it anyway (keys), and a later class or
    // `doctor` sweeps its users.
    let _ = tokio::time::timeout(BUDGET, clean).await;
    Ok(())
}
