//! Views of an event log that are not the TUI: the transcript and JSON lines; and
//! reading a saved log back.

pub mod jsonl;
pub mod load;
pub mod picture;
pub mod printable;
pub mod stderr;
pub mod stdout;
pub mod transcript;
