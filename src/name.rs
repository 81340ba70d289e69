//! A worker's name as events, storage entries and violations carry it.

/// Held inline up to 24 bytes, as names are, so that writing an event allocates
/// nothing for it (the stepper writes the events of hundreds of thousands of runs a
/// second, and the checker names workers in what it finds). It reads and compares as
/// a `&str`, and is a plain string in the JSON. Its own module, below both the log and
/// the backends, which both name workers.
pub type Name = compact_str::CompactString;
