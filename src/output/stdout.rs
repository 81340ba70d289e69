//! Every command's stdout goes through here, so that output is honest in one place:
//! a reader that has gone (`fencelab bench sim | head -1`) ends the command quietly,
//! and a write that fails (a full disk, `> /dev/full`) is an error the command exits
//! with, never a panic (`println!`'s) and never an exit 0 with the output lost.
//!
//! Why a process-wide state and not a writer passed around: stdout is one per
//! process, and the lines of a run are printed from a task that cannot return an
//! error to the command. The first failure is kept; later writes are skipped, and
//! [`finish`] turns it into the command's exit.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::Mutex;

use super::printable::printable;

/// Why stdout takes no more output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Gone {
    /// The reader closed the pipe (`| head -1`): nothing wrong, nothing more to say.
    #[error("stdout was closed")]
    Closed,
    /// Anything else (ENOSPC, EIO): what was printed is lost, which the user must hear.
    #[error("cannot write to stdout ({0}): the output is lost")]
    Failed(String),
}

/// The first failure, if any.
static GONE: Mutex<Option<Gone>> = Mutex::new(None);

fn gone() -> Option<Gone> {
    GONE.lock().map_or(None, |g| g.clone())
}

/// Write `bytes` and flush them. Once stdout has gone, nothing is written and the
/// same reason comes back.
pub fn bytes(bytes: &[u8]) -> Result<(), Gone> {
    let mut state = GONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(gone) = state.as_ref() {
        return Err(gone.clone());
    }
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) => {
            let gone = match e.kind() {
                io::ErrorKind::BrokenPipe => Gone::Closed,
                _ => Gone::Failed(e.to_string()),
            };
            *state = Some(gone.clone());
            Err(gone)
        }
    }
}

/// One line of text, control characters made visible.
pub fn line(text: &str) -> Result<(), Gone> {
    let mut text = printable(text).into_owned();
    text.push('\n');
    bytes(text.as_bytes())
}

/// Whether stdout has gone (closed or failed): a long command may stop early.
pub fn is_gone() -> bool {
    gone().is_some()
}

/// The command's result, made honest about stdout: a failed write is an error even
/// when the command itself succeeded; a closed pipe (a [`Gone::Closed`] that stopped
/// the command, or one met along the way) ends it quietly with its own exit code, or
/// success when the closed pipe is what stopped it.
pub fn finish(result: anyhow::Result<ExitCode>) -> anyhow::Result<ExitCode> {
    // Whatever is still buffered (a `print!` elsewhere) must reach the file too.
    if !is_gone() {
        let _ = bytes(b"");
    }
    match (result, gone()) {
        (Err(e), _) if e.downcast_ref::<Gone>() == Some(&Gone::Closed) => Ok(ExitCode::SUCCESS),
        (Err(e), _) => Err(e),
        (Ok(_), Some(failed @ Gone::Failed(_))) => Err(failed.into()),
        (Ok(code), _) => Ok(code),
    }
}
