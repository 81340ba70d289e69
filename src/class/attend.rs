//! A student's side of a class run (`fencelab join`): wait for the instructor's start,
//! run the student's worker as a process of its own on this machine (so the
//! instructor's pause is a real `SIGSTOP` here), and post its events to the room. The
//! worker is fencelab's own (`fencelab worker`) or the student's own program
//! (`join --program`, docs/worker-protocol.md), one more worker host.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::desk::Desk;
use super::{ClassError, Control};
use crate::backend::redis::RedisBackend;
use crate::engine::log::{Event, EventKind, EventLog, RunClock};
use crate::engine::process::Orders;
use crate::engine::process::parent::WorkerProcess;
use crate::engine::program::{self, ProgramHost};
use crate::engine::{WorkerCommand, WorkerHost, WorkerRun};
use crate::scenario::{Program, Scenario};

/// How long one read of the controls waits before trying again.
const LISTEN: Duration = Duration::from_secs(1);
/// How long a student's screen follows the room after its own worker is done.
const ROOM_LINGER: Duration = Duration::from_secs(5);

/// Where an event a student is shown comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// This machine's worker, as it happens (the student's own clock).
    Here,
    /// The instructor's log as the room mirrors it (the room's clock, truth included);
    /// `mine`: an event of this student's worker, already shown `Here`.
    Room { mine: bool },
}

/// What this student's own machine already shows (its worker's doings).
fn is_mine(kind: &EventKind, me: &str) -> bool {
    match kind {
        EventKind::Worker { worker, .. }
        | EventKind::Command { worker, .. }
        | EventKind::Claimed { worker, .. }
        | EventKind::Stderr { worker, .. }
        | EventKind::Signal { worker, .. } => worker == me,
        _ => false,
    }
}

/// Join with `url`, play the student's worker (run by `program worker`, or the
/// student's `own` program under the worker protocol) when the instructor starts, and
/// show each event with `show` as it is posted (`Here`) and as the room mirrors it
/// (`Room`). A student who joins once the run has started without them (or is over)
/// has no start coming: they are shown the room's run, and play nothing ([`sits_out`]
/// says so). `leave`: the student quits; their worker is killed as a crash is, and its
/// last events posted, so the room learns at once.
pub async fn attend(
    url: &str,
    (program, own): (&Path, Option<&Program>),
    leave: CancellationToken,
    mut show: impl FnMut(Seen, &Event),
) -> Result<(), ClassError> {
    let mut desk = Desk::join(url).await?;
    let me = desk.name.clone();
    // A desk of its own for listening: its blocking reads never hold up a post.
    let (mut heard, listener) = Desk::join(url).await?.listen(LISTEN);
    // Both readers end with this function, however it ends (a student who leaves
    // before the start too): their connections are what says the student is in.
    let listener = AbortOnDropHandle::new(listener);
    // A third desk watches the room (from its start: a rejoining student catches up).
    let mut eyes = Desk::join(url).await?;
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let _watcher = AbortOnDropHandle::new(tokio::spawn(async move {
        let mut after = "0".to_string();
        loop {
            let (last, events) = eyes.room(&after, LISTEN).await?;
            after = last;
            for event in events {
                if seen_tx.send(event).is_err() {
                    return Ok::<(), ClassError>(());
                }
            }
        }
    }));
    // Rejoining a run under way: its start was sent before this desk listened.
    let mut under_way = None;
    for control in desk.history().await? {
        match control {
            Control::Start { student, scenario, fencing } if student == me => {
                under_way = Some((scenario, fencing));
            }
            Control::Stop { student } if student == me => under_way = None,
            _ => {}
        }
    }
    // The room's events while waiting, shown once it is clear whether this student
    // plays (they come before the start meant for them, or instead of it).
    let mut before = Vec::new();
    let mut watching = true;
    let start = loop {
        if let Some(start) = under_way.take() {
            break Some(start);
        }
        tokio::select! {
            control = heard.recv() => match control {
                Some(Control::Start { student, scenario, fencing }) if student == me => {
                    break Some((scenario, fencing));
                }
                Some(_) => {}
                None => return Err(listener_failure(listener).await),
            },
            event = seen.recv(), if watching => match event {
                Some(event) => {
                    // A run that plays without this student (it started before they
                    // joined), or is over: no start is coming for them.
                    let without_me = sits_out(&event.kind, &me).is_some()
                        || matches!(event.kind, EventKind::RunEnded { .. });
                    before.push(event);
                    if without_me {
                        break None;
                    }
                }
                None => watching = false,
            },
            () = leave.cancelled() => return Ok(()),
        }
    };
    let Some((scenario, fencing_on)) = start else {
        let watched = watch(before, (&mut seen, &mut heard), &leave, &mut show).await;
        if watched.is_err() {
            return Err(listener_failure(listener).await);
        }
        return Ok(());
    };
    let orders = Orders {
        scenario: std::sync::Arc::unwrap_or_clone(scenario),
        worker: me.clone(),
        run_id: desk.keys.id.clone(),
        expire_ms: desk.keys.run.expire_ms,
        lock_url: url.to_string(),
        storage_url: url.to_string(),
        fencing: fencing_on,
        time_scale: 1.0,
        seed: fastrand::u64(..),
    };
    // The run's clock starts with the instructor's start, not once the worker is up:
    // a program's start-up (an interpreter, its imports) is time the run goes on.
    let log = Arc::new(EventLog::new(RunClock::start_now(1.0)));
    let (commands, rx) = mpsc::unbounded_channel();
    let fencing = Arc::new(AtomicBool::new(fencing_on));
    let cancel = CancellationToken::new();
    let done = CancellationToken::new();
    let run = {
        let (log, fencing, cancel, done) =
            (log.clone(), fencing.clone(), cancel.clone(), done.clone());
        let run: WorkerRun = match own {
            None => {
                let child = WorkerProcess::start(program, orders)
                    .await
                    .map_err(|e| ClassError::Worker(e.to_string()))?;
                Box::pin(child.run(log, rx, fencing, cancel))
            }
            Some(own) => {
                let host = start_own(url, &desk, &orders.scenario, own, fencing_on).await?;
                host.run(&me, log, rx, fencing, cancel)
            }
        };
        tokio::spawn(async move {
            let result = run.await;
            done.cancel();
            result
        })
    };
    let mut grown = log.subscribe();
    let mut posted = 0;
    let mut hearing = true;
    let mut room_ended = false;
    for event in before {
        show(Seen::Room { mine: is_mine(&event.kind, &me) }, &event);
    }
    let mut linger = None;
    let mut leaving = false;
    loop {
        let finished = done.is_cancelled();
        for event in log.since(posted) {
            show(Seen::Here, &event);
            desk.post_at(&event.kind, Some(event.t_ms)).await?;
            posted += 1;
        }
        if finished && (room_ended || !watching || leave.is_cancelled()) {
            break;
        }
        // After its own worker, the student still sees the rest of the run, a while.
        let wait_room = async {
            match linger {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = grown.changed() => {}
            () = leave.cancelled(), if !leaving => {
                leaving = true;
                // Said first, so the room names who left (the verdict, the lane) and
                // does not read the crash that follows as the instructor's.
                let why = "they quit their screen".to_string();
                let left = EventKind::Left { student: me.clone(), why, gone_since_ms: None };
                desk.post(&left).await?;
                let _ = commands.send(WorkerCommand::Crash);
            }
            () = done.cancelled(), if linger.is_none() => {
                linger = Some(tokio::time::Instant::now() + ROOM_LINGER);
            }
            () = wait_room => break,
            event = seen.recv(), if watching => match event {
                Some(event) => {
                    room_ended |= matches!(event.kind, EventKind::RunEnded { .. });
                    show(Seen::Room { mine: is_mine(&event.kind, &me) }, &event);
                }
                None => watching = false,
            },
            control = heard.recv(), if hearing => match control {
                Some(Control::Fencing { on }) => fencing.store(on, Ordering::SeqCst),
                Some(c) if c.student() == Some(me.as_str()) => match c {
                    Control::Pause { .. } => drop(commands.send(WorkerCommand::Pause { ms: None })),
                    Control::Resume { .. } => drop(commands.send(WorkerCommand::Resume)),
                    Control::Crash { .. } => drop(commands.send(WorkerCommand::Crash)),
                    Control::Stop { .. } => cancel.cancel(),
                    Control::Start { .. }
                    | Control::Fencing { .. }
                    | Control::Ask { .. }
                    | Control::Reveal { .. }
                    | Control::Cursor { .. } => {}
                },
                Some(_) => {}
                // The room cannot be heard any more: end the worker rather than let it
                // run on unsteered.
                None => {
                    hearing = false;
                    cancel.cancel();
                }
            },
        }
    }
    if !hearing {
        return Err(listener_failure(listener).await);
    }
    match run.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(ClassError::Worker(e.to_string())),
        Err(e) => Err(ClassError::Worker(format!("the worker task failed: {e}"))),
    }
}

/// What a student is told who joined once the run had started without them, from
/// `kind` (the room's first event, the run's start); None when they play in it. A
/// class plays one run, so they are not seated for another: they watch this one.
pub fn sits_out(kind: &EventKind, me: &str) -> Option<String> {
    let EventKind::RunStarted { scenario, .. } = kind else { return None };
    (!scenario.workers.iter().any(|w| w.name == me)).then(|| {
        format!(
            "{me}: the run started before you joined, without you. You watch it as the \
             projector shows it, with no worker of your own; the instructor's next class \
             seats you"
        )
    })
}

/// Show the room's run to a student who plays no part in it (`before`: the events
/// seen so far, then those `seen`), to its end or until the student leaves. Err: the
/// room's controls could not be heard any more (`heard` ended: the room is gone).
async fn watch(
    before: Vec<Event>,
    (seen, heard): (&mut mpsc::UnboundedReceiver<Event>, &mut mpsc::UnboundedReceiver<Control>),
    leave: &CancellationToken,
    show: &mut impl FnMut(Seen, &Event),
) -> Result<(), ()> {
    let room = Seen::Room { mine: false };
    for event in &before {
        show(room, event);
    }
    if before.iter().any(|e| matches!(e.kind, EventKind::RunEnded { .. })) {
        return Ok(());
    }
    // The room closes right after the run's end is posted: the events already read
    // (that end among them) still come after the controls have ended, for a while.
    let mut room_gone = None;
    loop {
        tokio::select! {
            biased;
            event = seen.recv() => {
                let Some(event) = event else {
                    return if room_gone.is_some() { Err(()) } else { Ok(()) };
                };
                show(room, &event);
                if matches!(event.kind, EventKind::RunEnded { .. }) {
                    return Ok(());
                }
            }
            // The controls are not for a watcher; their end is the room's.
            control = heard.recv(), if room_gone.is_none() => if control.is_none() {
                room_gone = Some(Box::pin(tokio::time::sleep(LISTEN)));
            },
            () = async { room_gone.as_mut().expect("only while the room is gone").await },
                if room_gone.is_some() => return Err(()),
            () = leave.cancelled() => return Ok(()),
        }
    }
}

/// Start the student's own program as their part of `scenario`: its lock and its
/// writes on the room's Redis, through the student's own user (`url`), so the
/// instructor's observer and checker judge it as they judge a built-in worker.
async fn start_own(
    url: &str,
    desk: &Desk,
    scenario: &Scenario,
    own: &Program,
    fencing: bool,
) -> Result<Arc<ProgramHost>, ClassError> {
    let mut scenario = scenario.clone();
    for w in &mut scenario.workers {
        w.program = (w.name == desk.name).then(|| own.clone());
    }
    let redis =
        RedisBackend::open(url, "class Redis").map_err(|e| ClassError::Redis(e.to_string()))?;
    let keys = desk.keys.run.clone().with_lease(scenario.ttl_ms);
    program::start_alone((&redis, &redis), &scenario, &keys, fencing)
        .await
        .map_err(|e| ClassError::Worker(e.to_string()))
}

async fn listener_failure(listener: AbortOnDropHandle<Result<(), ClassError>>) -> ClassError {
    match listener.await {
        Ok(Err(e)) => e,
        _ => ClassError::Worker("stopped listening to the room".into()),
    }
}
