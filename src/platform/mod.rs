//! Everything fencelab does differently from one operating system to another, in one
//! place: the rest of `src/` calls these functions and names no OS-only API or path
//! (`tests/suite/platform.rs` greps for them). The variants sit side by side in `linux.rs`
//! and `macos.rs`; what POSIX gives every Unix alike is here.
//!
//! - [`tie_to_parent`]: a child process dies with fencelab, even when fencelab is
//!   killed with `kill -9`, by one mechanism on every Unix (a guard process and a
//!   pipe, below); Linux adds `PR_SET_PDEATHSIG` as a second line of defence.
//! - Processes: [`process_exists`] (`kill(pid, 0)`), [`signal`], [`wait_until_stopped`];
//!   the signals that ask fencelab itself to end ([`end_requested`]).
//! - Clocks and the machine: [`monotonic_ns`] (the clock `std::time::Instant` reads,
//!   shared by all processes), [`hostname`], [`load_average`], [`running_as_root`],
//!   [`user_ids`], [`memory_dir`], [`data_dir`] (the learner's progress).
//! - Servers: where each OS's packages put them ([`find_program`],
//!   [`postgres_bin_dir`], [`zookeeper`], [`java`]) and the line that installs one
//!   ([`install_line`]).

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;
#[cfg(target_vendor = "apple")]
#[path = "macos.rs"]
mod os;

mod search;
mod tether;

use std::ffi::CString;

pub use search::{
    Package, PackageManager, ZooKeeperInstall, find_program, install_line, java, package_manager,
    postgres_bin_dir, search_root, zookeeper,
};
pub use tether::{Tether, tie_family_to_parent, tie_to_parent};

/// The operating system, as people call it ("Linux", "macOS").
pub const OS_NAME: &str = os::NAME;

/// The signals fencelab sends its children and servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Freeze (a GC pause, done by the kernel).
    Stop,
    /// Run on after [`Signal::Stop`].
    Cont,
    /// A crash: nothing runs after it.
    Kill,
    /// Ask a server to shut down.
    Term,
    /// PostgreSQL's immediate shutdown.
    Quit,
    /// Ctrl-C.
    Int,
}

impl Signal {
    fn number(self) -> libc::c_int {
        match self {
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
            Signal::Kill => libc::SIGKILL,
            Signal::Term => libc::SIGTERM,
            Signal::Quit => libc::SIGQUIT,
            Signal::Int => libc::SIGINT,
        }
    }
}

/// Send `signal` to process `pid`. False when there is no such process (or it is not
/// ours to signal).
pub fn signal(pid: u32, signal: Signal) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, signal.number()) == 0 }
}

/// Send `signal` to every process of the group `pgid` leads (a child started with a
/// group of its own: what it started gets the pause or the kill too). False when
/// there is no such group.
pub fn signal_group(pgid: u32, signal: Signal) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else { return false };
    // SAFETY: kill(2) with a negative pid signals a process group; plain integers.
    unsafe { libc::kill(-pgid, signal.number()) == 0 }
}

/// What asks fencelab to end: SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal
/// closed). The handlers are in place when this returns (call it inside a runtime);
/// the future resolves at the first of them. Only `runtime::Shutdown` listens.
pub fn end_requested() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    })
}

/// Whether standard output is a pipe whose reader has gone (`| head -1` has exited):
/// `poll` with no events asked still reports an error or a hang-up on it, on Linux
/// and on macOS alike, without writing a byte.
pub fn stdout_reader_gone() -> bool {
    let mut fd = libc::pollfd { fd: libc::STDOUT_FILENO, events: 0, revents: 0 };
    // SAFETY: one pollfd we own, a zero timeout: poll only reads and writes it.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// Whether process `pid` exists (a zombie counts): `kill(pid, 0)`, which every Unix
/// has, rather than `/proc`, which macOS has not. A process of another user answers
/// `EPERM`: it exists.
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 checks only that the process can be signalled.
    let ok = unsafe { libc::kill(pid, 0) } == 0;
    ok || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Block until our child `pid` is stopped (or has exited), leaving its state for a
/// later `wait` (`waitid` with `WSTOPPED | WNOWAIT`, POSIX).
pub fn wait_until_stopped(pid: u32) {
    // SAFETY: waitid writes only into the siginfo we own; WNOWAIT reaps nothing.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WSTOPPED | libc::WEXITED | libc::WNOWAIT,
        );
    }
}

/// The machine's monotonic clock now, in ns: the very clock `std::time::Instant` reads
/// (`CLOCK_MONOTONIC` on Linux, `CLOCK_UPTIME_RAW` on macOS), and the same in every
/// process of the machine, so a worker process can keep its parent's run clock. It
/// runs on while a process is stopped.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own; the clock always exists.
    unsafe { libc::clock_gettime(os::INSTANT_CLOCK, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// This machine's name, as others on the LAN may reach it.
pub fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0)?;
    ok.then(|| String::from_utf8_lossy(&buf[..end]).into_owned()).filter(|h| !h.is_empty())
}

/// The load average over the last minute (`getloadavg`, on Linux and macOS alike).
pub fn load_average() -> Option<f64> {
    let mut load = [0f64; 1];
    // SAFETY: getloadavg writes at most 1 value into the array we own.
    let n = unsafe { libc::getloadavg(load.as_mut_ptr(), 1) };
    (n == 1).then_some(load[0])
}

/// What this process has used so far: its largest resident memory and its CPU time
/// (`getrusage`, on Linux and macOS alike; for `fencelab bench`'s soak figures).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub peak_rss_kib: u64,
    /// User plus system time, in seconds.
    pub cpu_s: f64,
}

pub fn usage() -> Option<Usage> {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a pointer to a rusage we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let peak = u64::try_from(ru.ru_maxrss).unwrap_or(0);
    Some(Usage {
        peak_rss_kib: os::max_rss_kib(peak),
        cpu_s: seconds(ru.ru_utime) + seconds(ru.ru_stime),
    })
}

/// Whether this process runs as root (PostgreSQL refuses to).
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid of the user `name`, if there is one.
pub fn user_ids(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; we copy the two
    // ids out at once, before any other call could overwrite it.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    // SAFETY: non-null, so it points at a valid passwd record.
    (!entry.is_null()).then(|| unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

/// Where a server that syncs every write to disk can keep its data in memory, so a busy
/// disk cannot stall a lesson's timing: Linux's `/dev/shm` when the machine has it,
/// else the temp dir (macOS has no memory file system by default).
pub fn memory_dir() -> std::path::PathBuf {
    os::memory_dir().unwrap_or_else(std::env::temp_dir)
}

/// Where fencelab keeps what it remembers for the learner (the course's progress):
/// `FENCELAB_DATA_DIR` when set (tests, a shared lab machine), else the platform's
/// standard place for an application's data (`~/.local/share/fencelab` on Linux,
/// `~/Library/Application Support/fencelab` on macOS). None when the machine has no
/// home directory to speak of.
pub fn data_dir() -> Option<std::path::PathBuf> {
    if let Some(dir) = std::env::var_os("FENCELAB_DATA_DIR").filter(|d| !d.is_empty()) {
        return Some(dir.into());
    }
    directories::ProjectDirs::from("", "", "fencelab").map(|d| d.data_dir().to_path_buf())
}
