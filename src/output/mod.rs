//! Views of an event log that are not the TUI: the transcript and JSON lines.

pub mod jsonl;
pub mod transcript;
