//! Linux's side of [`crate::platform`].

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

pub const NAME: &str = "Linux";

/// What `std::time::Instant` reads on Linux.
pub const INSTANT_CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// Linux's own way for a child to die with its parent, added to the portable guard:
/// `PR_SET_PDEATHSIG`, unless `FENCELAB_PDEATHSIG=off` (tests use it to prove that
/// the guard alone is enough). The kernel sends the signal when the *thread* that
/// started the child ends, so servers are started from threads that live as long.
pub fn tie_extra(cmd: &mut Command) {
    if std::env::var_os("FENCELAB_PDEATHSIG").is_some_and(|v| v == "off") {
        return;
    }
    // SAFETY: prctl and getppid are async-signal-safe and touch no memory of the
    // parent. This runs after any uid change, which would otherwise clear the flag.
    unsafe {
        let parent = libc::getpid();
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the flag was set: the guard still has our pid.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("fencelab ended while starting a child"));
            }
            Ok(())
        });
    }
}

/// A file system in memory, when the machine has one mounted.
pub fn memory_dir() -> Option<PathBuf> {
    let shm = PathBuf::from("/dev/shm");
    shm.is_dir().then_some(shm)
}

/// `ru_maxrss` in KiB: Linux counts it in KiB already.
pub fn max_rss_kib(ru_maxrss: u64) -> u64 {
    ru_maxrss
}
