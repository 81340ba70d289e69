//! `fencelab worker`: one worker in a process of its own, driven by its scenario's
//! steps and connected to the lock service and the storage itself.
//!
//! It runs the very `Worker` the in-process engine runs, on a log of its own whose
//! events it copies to stdout as they are appended, in order. Pauses, resumes and
//! crashes never arrive as messages: the parent sends signals, and the kernel does the
//! rest. When stdin closes (the parent is gone, or the run was stopped) the worker
//! stops at its next wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::log::{EventLog, RunClock};
use super::super::worker::{Worker, WorkerSettings};
use super::{FromChild, Orders, ProcessError, ToChild};
use crate::backend::redis::RedisBackend;
use crate::backend::{Keys, LockService, Storage};
use crate::platform::monotonic_ns;

/// Serve one worker: read orders from `input`, report on `output`, until the worker's
/// script ends. A backend failure is both reported as the worker's `Failed` event and
/// returned.
pub async fn serve(
    input: impl AsyncRead + Unpin + Send + 'static,
    mut output: impl AsyncWrite + Unpin,
) -> Result<(), ProcessError> {
    let mut lines = BufReader::new(input).lines();
    let orders = match next(&mut lines).await? {
        ToChild::Orders(orders) => orders,
        other => return Err(ProcessError::Protocol(format!("expected orders, got {other:?}"))),
    };
    let Orders {
        scenario,
        worker,
        run_id,
        expire_ms,
        lock_url,
        storage_url,
        fencing,
        time_scale,
        seed,
    } = *orders;
    let spec = scenario.workers.iter().find(|w| w.name == worker).cloned().ok_or_else(|| {
        ProcessError::Protocol(format!("the scenario has no worker named {worker:?}"))
    })?;
    let keys = Keys { expire_ms, ..Keys::for_run(&run_id) };
    let lock = LockService::connect(&RedisBackend::open(&lock_url, "Redis")?, &keys).await?;
    let storage = Storage::connect(&RedisBackend::open(&storage_url, "Redis")?, &keys).await?;
    send(&mut output, &FromChild::Ready).await?;

    let started = match next(&mut lines).await? {
        ToChild::Start { monotonic_ns: start } => {
            let ago = Duration::from_nanos(monotonic_ns().saturating_sub(start));
            Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
        }
        other => return Err(ProcessError::Protocol(format!("expected start, got {other:?}"))),
    };
    let log = Arc::new(EventLog::new(RunClock::started_at(started, time_scale)));
    let fencing = Arc::new(AtomicBool::new(fencing));
    let cancel = CancellationToken::new();
    tokio::spawn(follow_changes(lines, fencing.clone(), cancel.clone()));
    // Commands come as signals, never through the worker's channel: it stays empty.
    let (_, commands) = mpsc::unbounded_channel();
    let worker = Worker::new(
        spec,
        (lock, storage, keys),
        // No observer in this process to tell: its lock is on Redis, whose leases the
        // parent's observer reads to the millisecond.
        WorkerSettings::of(&scenario, fencing, Arc::default()),
        log.clone(),
        cancel,
        commands,
        fastrand::Rng::with_seed(seed),
    );
    let done = CancellationToken::new();
    let run = {
        let done = done.clone();
        tokio::spawn(async move {
            let result = worker.run().await;
            done.cancel();
            result
        })
    };
    let mut grown = log.subscribe();
    let mut sent = 0;
    loop {
        // Read `done` first: every event appended before it is then in `since`.
        let finished = done.is_cancelled();
        for event in log.since(sent) {
            send(&mut output, &FromChild::Event(event.kind)).await?;
            sent += 1;
        }
        if finished {
            break;
        }
        tokio::select! {
            _ = grown.changed() => {}
            () = done.cancelled() => {}
        }
    }
    match run.await {
        Ok(result) => Ok(result?),
        Err(e) => Err(ProcessError::Protocol(format!("the worker task failed: {e}"))),
    }
}

/// Apply the parent's later messages; when it closes the pipe, stop the worker.
async fn follow_changes(
    mut lines: Lines<BufReader<impl AsyncRead + Unpin>>,
    fencing: Arc<AtomicBool>,
    cancel: CancellationToken,
) {
    while let Ok(Some(line)) = lines.next_line().await {
        if let Ok(ToChild::Fencing(on)) = serde_json::from_str(&line) {
            fencing.store(on, Ordering::SeqCst);
        }
    }
    cancel.cancel();
}

async fn next(
    lines: &mut Lines<BufReader<impl AsyncRead + Unpin>>,
) -> Result<ToChild, ProcessError> {
    let line = lines
        .next_line()
        .await?
        .ok_or_else(|| ProcessError::Protocol("stdin closed before the run started".into()))?;
    serde_json::from_str(&line).map_err(|e| ProcessError::Protocol(format!("bad message: {e}")))
}

/// One message as one line, flushed at once: the parent acts on it (a pause in
/// particular) as soon as it is written.
async fn send(
    output: &mut (impl AsyncWrite + Unpin),
    message: &FromChild,
) -> Result<(), ProcessError> {
    let mut line =
        serde_json::to_vec(message).map_err(|e| ProcessError::Protocol(e.to_string()))?;
    line.push(b'\n');
    output.write_all(&line).await?;
    output.flush().await?;
    Ok(())
}
