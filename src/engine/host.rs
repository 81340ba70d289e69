//! Workers that run elsewhere: a class's students each run theirs on their own
//! laptop. The engine still keeps the log, the observer and the storage read-back;
//! a [`WorkerHost`] brings a remote worker's events into the log and carries a
//! person's commands and fencing switches out to it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::WorkerCommand;
use super::log::EventLog;
use crate::backend::BackendError;

/// One worker's whole run, as a task of this process, a child process, or a remote one.
pub type WorkerRun = Pin<Box<dyn Future<Output = Result<(), BackendError>> + Send>>;

/// Where remote workers run, and how to reach them.
pub trait WorkerHost: Send + Sync {
    /// The run of worker `name`: append its events to `log` until its script ends,
    /// pass on `commands` and the value of `fencing`, and stop on `cancel`.
    fn run(
        &self,
        name: &str,
        log: Arc<EventLog>,
        commands: mpsc::UnboundedReceiver<WorkerCommand>,
        fencing: Arc<AtomicBool>,
        cancel: CancellationToken,
    ) -> WorkerRun;
}
