//! macOS's side of [`crate::platform`].

use std::path::PathBuf;
use std::process::Command;

pub const NAME: &str = "macOS";

/// What `std::time::Instant` reads on macOS (not `CLOCK_MONOTONIC`, which there goes
/// on counting while the machine sleeps).
pub const INSTANT_CLOCK: libc::clockid_t = libc::CLOCK_UPTIME_RAW;

/// macOS has no parent-death signal: the portable guard is all there is.
pub fn tie_extra(_cmd: &mut Command) {}

/// macOS mounts no file system in memory by default: servers keep their data in the
/// temp dir.
pub fn memory_dir() -> Option<PathBuf> {
    None
}

/// `ru_maxrss` in KiB: macOS counts it in bytes.
pub fn max_rss_kib(ru_maxrss: u64) -> u64 {
    ru_maxrss / 1024
}
