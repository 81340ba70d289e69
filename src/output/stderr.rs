//! Every notice, progress line and top-level error on stderr goes through here.
//!
//! Why not `eprintln!`: it panics when the write fails (`2>/dev/full`), turning a
//! notice nobody can read into a crash with exit status 101. A line stderr cannot take
//! is lost, and there is nowhere left to say so: the write is tried and its error
//! ignored, so the command's exit status is what it would have been.

use std::io::Write;

/// Write `text` and a newline to stderr in one call, ignoring a failed write.
pub fn line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
