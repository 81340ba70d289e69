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

use std::io::{self, PipeWriter};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// The guard: ignore the terminal's signals (a Ctrl-C reaches the whole process
/// group; fencelab handles it and ends its children itself), read the child's pid,
/// wait for the pipe to close, kill the child, and its process group when it leads
/// one (a user's program started in a group of its own: what it started dies too).
const GUARD: &str = "trap '' INT QUIT TERM HUP TSTP
read -r pid || exit 0
while read -r _; do :; done
kill -KILL -\"$pid\" 2>/dev/null
kill -KILL \"$pid\" 2>/dev/null";

/// Ties one child to fencelab's life while it is held: keep it beside the child and
/// drop it once the child is gone (it kills the guard, never the child).
#[must_use = "the child dies with fencelab only while its Tether is held"]
pub struct Tether {
    guard: Option<Child>,
    /// Held, never written by us: the guard watches for it to close.
    _pipe: PipeWriter,
}

/// Make the child that `cmd` starts die with fencelab, even when fencelab is killed
/// with `kill -9`. Call it right before `cmd.spawn()`, and keep the [`Tether`] as
/// long as the child: `let tether = platform::tie_to_parent(&mut cmd)?;`. For a
/// `tokio::process::Command`, pass `cmd.as_std_mut()`.
pub fn tie_to_parent(cmd: &mut Command) -> io::Result<Tether> {
    let (reader, writer) = io::pipe()?;
    let guard = Command::new("/bin/sh")
        .args(["-c", GUARD, "fencelab-guard"])
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
    Ok(Tether { guard: Some(guard), _pipe: writer })
}

impl Tether {
    /// The child is gone (reaped): stop watching it now, before its pid can be reused.
    pub fn release(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let _ = guard.kill();
            let _ = guard.wait();
        }
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
