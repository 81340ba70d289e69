//! A child process tied to fencelab's life, on every Unix alike.
//!
//! Before the child starts, fencelab opens a pipe and starts a *guard*: a tiny
//! `/bin/sh` whose stdin is the pipe's read end. Fencelab alone keeps the write end
//! (close-on-exec: no program it starts inherits it). The child, between `fork` and
//! `exec`, writes its own pid into the pipe; the guard reads it and then waits for
//! the end of the pipe. The kernel closes the write end when fencelab dies, however
//! it dies (`kill -9` too): the guard reads end-of-file and kills the child. When
//! fencelab ends the child itself, dropping the [`Tether`] kills the guard first, so
//! the guard never signals a pid that may have been reused.
//!
//! The child names its own pid before it runs a single instruction of the program,
//! so there is no moment at which a dead fencelab would leave it unwatched. Linux's
//! `PR_SET_PDEATHSIG` is added as a second line (see `linux.rs`), and
//! `FENCELAB_PDEATHSIG=off` leaves it out, which is how `tests/suite/platform.rs` proves
//! that the guard alone does the work.

use std::io::{self, PipeWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The guard: ignore the terminal's signals (a Ctrl-C reaches the whole process
/// group; fencelab handles it and ends its children itself), read the child's pid,
/// wait for the pipe to close, kill the child, and its process group when it leads
/// one (a user's program started in a group of its own: what it started dies too).
/// A family's guard (`$1`, its tag) then kills every process whose environment holds
/// the tag: what the child started in a session of its own (`setsid`, a double fork)
/// left the group but kept the environment. Told `done` on the pipe (fencelab ended
/// the child itself), it kills the family only.
const GUARD: &str = "trap '' INT QUIT TERM HUP TSTP
read -r pid || exit 0
tag=$1
sweep() {
  [ -n \"$tag\" ] || return 0
  ps axeww -o pid= -o command= 2>/dev/null | while read -r p rest; do
    case \"$rest\" in *\"FENCELAB_FAMILY=$tag\"*) kill -KILL \"$p\" 2>/dev/null;; esac
  done
}
while read -r line; do
  [ \"$line\" = done ] && { sweep; exit 0; }
done
kill -KILL -\"$pid\" 2>/dev/null
kill -KILL \"$pid\" 2>/dev/null
sweep";

/// The environment variable that tags a family: a child and all it starts.
const FAMILY: &str = "FENCELAB_FAMILY";

/// Ties one child to fencelab's life while it is held: keep it beside the child and
/// drop it once the child is gone (it kills the guard, never the child).
#[must_use = "the child dies with fencelab only while its Tether is held"]
pub struct Tether {
    guard: Option<Child>,
    /// A family's tether: on release the guard kills what the child left behind.
    family: bool,
    /// The guard watches for it to close; written only to say `done`.
    pipe: PipeWriter,
}

/// Make the child that `cmd` starts die with fencelab, even when fencelab is killed
/// with `kill -9`. Call it right before `cmd.spawn()`, and keep the [`Tether`] as
/// long as the child: `let tether = platform::tie_to_parent(&mut cmd)?;`. For a
/// `tokio::process::Command`, pass `cmd.as_std_mut()`.
pub fn tie_to_parent(cmd: &mut Command) -> io::Result<Tether> {
    tie(cmd, None)
}

/// [`tie_to_parent`] for a child and every process it starts, even one that leaves
/// its process group for a session of its own (a user's program, whose daemons
/// fencelab does not know of): they die with fencelab, and when fencelab ends the
/// child. The family is known by a tag in its environment.
pub fn tie_family_to_parent(cmd: &mut Command) -> io::Result<Tether> {
    let tag = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    cmd.env(FAMILY, &tag);
    tie(cmd, Some(tag))
}

fn tie(cmd: &mut Command, tag: Option<String>) -> io::Result<Tether> {
    let (reader, writer) = io::pipe()?;
    let family = tag.is_some();
    let guard = Command::new("/bin/sh")
        .args(["-c", GUARD, "fencelab-guard"])
        .arg(tag.unwrap_or_default())
        .env_clear()
        .env("PATH", "/bin:/usr/bin")
        .stdin(Stdio::from(reader))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let fd = writer.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls run: getpid and
    // write, on a buffer on the stack; nothing allocates or takes a lock.
    unsafe {
        cmd.pre_exec(move || {
            let mut line = [0u8; 24];
            let len = pid_line(libc::getpid() as u32, &mut line);
            if libc::write(fd, line.as_ptr().cast(), len) != len as isize {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    super::os::tie_extra(cmd);
    Ok(Tether { guard: Some(guard), family, pipe: writer })
}

/// How long a family's guard has to kill what the child left behind.
const SWEEP_WITHIN: Duration = Duration::from_secs(2);
/// How often a guard that is sweeping is looked at.
const SWEEP_POLL: Duration = Duration::from_millis(5);

impl Tether {
    /// The child is gone (reaped): stop watching it now, before its pid can be reused.
    /// A family's guard is told `done` and sweeps what the child left behind on its
    /// own; the wait for it to end is the sweeps' thread's (below), so this does not
    /// sleep on the thread that calls it (unless that thread could not be started).
    pub fn release(&mut self) {
        let Some(mut guard) = self.guard.take() else { return };
        if self.family && writeln!(self.pipe, "done").is_ok() {
            let sweeping = Sweeping { guard, until: Instant::now() + SWEEP_WITHIN };
            let unsent = match sweeps() {
                Some(sweeps) => sweeps.send(sweeping).err().map(|e| e.0),
                None => Some(sweeping),
            };
            if let Some(mut sweeping) = unsent {
                while !sweeping.over() {
                    std::thread::sleep(SWEEP_POLL);
                }
            }
            return;
        }
        let _ = guard.kill();
        let _ = guard.wait();
    }
}

/// A family's guard told `done`: it sweeps (a `ps` of the machine, 10-50 ms on a busy
/// one), then exits, or is killed at `until`.
struct Sweeping {
    guard: Child,
    until: Instant,
}

impl Sweeping {
    /// Whether the guard is gone: it exited (reaped now), or its time is up (killed).
    fn over(&mut self) -> bool {
        match self.guard.try_wait() {
            Ok(None) if Instant::now() < self.until => false,
            Ok(None) => {
                let _ = self.guard.kill();
                let _ = self.guard.wait();
                true
            }
            _ => true,
        }
    }
}

/// The thread that waits for every family's guard to end its sweep. A program's
/// tether is released where its run drops it, on a worker of the run's async runtime:
/// a sleep there held up every other task of that worker, the proxies that place a
/// trial's pauses among them, for 17 ms (median) to 54 ms a release in a search.
/// The guards are not fencelab's to wait for at its end: each has read `done` and
/// ends its sweep on its own.
fn sweeps() -> Option<&'static mpsc::Sender<Sweeping>> {
    static SWEEPS: OnceLock<Option<mpsc::Sender<Sweeping>>> = OnceLock::new();
    let started = SWEEPS.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new().name("fencelab-sweeps".into());
        thread.spawn(move || wait_for_sweeps(&rx)).ok().map(|_| tx)
    });
    started.as_ref()
}

fn wait_for_sweeps(new: &mpsc::Receiver<Sweeping>) {
    let mut sweeping: Vec<Sweeping> = Vec::new();
    loop {
        let next = match sweeping.is_empty() {
            true => new.recv().map_err(|_| RecvTimeoutError::Disconnected),
            false => new.recv_timeout(SWEEP_POLL),
        };
        match next {
            Ok(one) => sweeping.push(one),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        sweeping.retain_mut(|s| !s.over());
    }
}

impl Drop for Tether {
    fn drop(&mut self) {
        self.release();
    }
}

/// `pid` in decimal and a newline, into `out`, without allocating; returns the length.
fn pid_line(mut pid: u32, out: &mut [u8; 24]) -> usize {
    let mut digits = [0u8; 10];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (pid % 10) as u8;
        n += 1;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    out[n] = b'\n';
    n + 1
}

#[cfg(test)]
mod tests {
    use super::pid_line;

    #[test]
    fn a_pid_is_written_as_a_decimal_line() {
        let mut out = [0u8; 24];
        for pid in [0, 7, 10, 4_194_304, u32::MAX] {
            let len = pid_line(pid, &mut out);
            assert_eq!(&out[..len], format!("{pid}\n").as_bytes());
        }
    }
}
