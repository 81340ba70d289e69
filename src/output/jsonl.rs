//! The event log as JSON lines: one event per line, the first one `run_started`
//! carrying the format version. `--json` streams it; `--save` writes it to a file.

use std::io::{self, Write};

use crate::engine::log::Event;

/// One event as one line of JSON (without the newline).
pub fn to_line(event: &Event) -> String {
    // Events hold only strings, numbers, bools and lists: serialisation cannot fail.
    serde_json::to_string(event).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Write every event, one per line.
pub fn write_all(events: &[Event], mut out: impl Write) -> io::Result<()> {
    for e in events {
        writeln!(out, "{}", to_line(e))?;
    }
    out.flush()
}
