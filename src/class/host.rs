//! The instructor's side of a class run: each student's worker is a remote worker of
//! the engine. Its events come in through the roll (checked), and a person's pause,
//! resume and crash go out as controls, which the student's `fencelab join` turns
//! into signals to its worker process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::roll::{Arrival, Roll};
use super::room::{Controller, Room};
use super::{ClassError, Control, RoomKeys};
use crate::backend::BackendError;
use crate::backend::redis::RedisBackend;
use crate::engine::log::{EventKind, EventLog, WorkerEvent};
use crate::engine::{
    PreparedRun, RunOptions, WorkerCommand, WorkerHost, WorkerRun, prepare_hosted,
};
use crate::scenario::Scenario;

/// How long one read of a student's stream waits for something before the loop looks
/// at fencing again.
const READ_BLOCK: Duration = Duration::from_millis(200);

/// The class's run, ready to execute: every student's worker hosted by the room, on
/// the room's keys of the class's Redis (`admin_url`). The text mode and the TUI both
/// start it so.
pub async fn prepare_class(
    room: &Room,
    admin_url: &str,
    scenario: &Scenario,
    fencing: bool,
    cancel: &CancellationToken,
) -> Result<PreparedRun, BackendError> {
    let redis = RedisBackend::open(admin_url, "class Redis")?;
    let host = ClassHost {
        url: admin_url.to_string(),
        keys: room.keys.clone(),
        controller: room.controller(),
    };
    let options = RunOptions { label: "class".into(), ..RunOptions::new(fencing) };
    let run = (room.keys.id.as_str(), Arc::new(host) as Arc<dyn WorkerHost>);
    prepare_hosted(&redis, &redis, scenario, options, run, cancel).await
}

/// Mirror the log (but the inspector's commands) to the room, in order, to its end:
/// the students' screens show the run as the instructor's does.
pub async fn mirror(log: Arc<EventLog>, mut room: Controller) {
    let mut grown = log.subscribe();
    let mut sent = 0;
    loop {
        for event in log.since(sent) {
            sent += 1;
            if matches!(event.kind, EventKind::Command { .. }) {
                continue;
            }
            if room.mirror(&event).await.is_err() {
                return;
            }
            if matches!(event.kind, EventKind::RunEnded { .. }) {
                return;
            }
        }
        if grown.changed().await.is_err() {
            return;
        }
    }
}

/// The room, as the engine's host of the students' workers.
pub struct ClassHost {
    /// The instructor's URL (the roll reads every student's stream).
    pub url: String,
    pub keys: RoomKeys,
    pub controller: Controller,
}

impl WorkerHost for ClassHost {
    fn run(
        &self,
        name: &str,
        log: Arc<EventLog>,
        commands: mpsc::UnboundedReceiver<WorkerCommand>,
        fencing: Arc<AtomicBool>,
        cancel: CancellationToken,
    ) -> WorkerRun {
        let student = Student {
            name: name.to_string(),
            url: self.url.clone(),
            keys: self.keys.clone(),
            controller: self.controller.clone(),
        };
        Box::pin(async move {
            student
                .run(log, commands, fencing, cancel)
                .await
                .map_err(|e| BackendError::Service { service: "the class", message: e.to_string() })
        })
    }
}

struct Student {
    name: String,
    url: String,
    keys: RoomKeys,
    controller: Controller,
}

impl Student {
    async fn run(
        mut self,
        log: Arc<EventLog>,
        mut commands: mpsc::UnboundedReceiver<WorkerCommand>,
        fencing: Arc<AtomicBool>,
        cancel: CancellationToken,
    ) -> Result<(), ClassError> {
        let scenario = match log.snapshot().first().map(|e| e.kind.clone()) {
            Some(EventKind::RunStarted { scenario, .. }) => scenario,
            _ => return Err(ClassError::Worker("the run's log has no start".into())),
        };
        let mut roll = Roll::connect(&self.url, self.keys.clone(), &[self.name.clone()]).await?;
        let mut fencing_sent = fencing.load(Ordering::SeqCst);
        let start = Control::Start { student: self.name.clone(), scenario, fencing: fencing_sent };
        self.controller.send(&start).await?;
        let mut commands_open = true;
        loop {
            tokio::select! {
                arrived = roll.read(READ_BLOCK) => for arrival in arrived? {
                    match arrival {
                        Arrival::Event { kind, .. } => {
                            let over = ends_the_worker(&kind);
                            log.append(kind);
                            if over {
                                return Ok(());
                            }
                        }
                        Arrival::Refused { student, why } => {
                            log.append(EventKind::Refused { student, why });
                        }
                    }
                },
                command = commands.recv(), if commands_open => {
                    let student = self.name.clone();
                    let control = match command {
                        // A pause of a set length ends with the student's resume key or
                        // the instructor's: the room has one kind of pause.
                        Some(WorkerCommand::Pause { .. } | WorkerCommand::Stall { .. }) => {
                            Control::Pause { student }
                        }
                        Some(WorkerCommand::Resume) => Control::Resume { student },
                        Some(WorkerCommand::Crash) => Control::Crash { student },
                        None => {
                            commands_open = false;
                            continue;
                        }
                    };
                    self.controller.send(&control).await?;
                }
                () = cancel.cancelled() => {
                    self.controller.send(&Control::Stop { student: self.name.clone() }).await?;
                    return Ok(());
                }
            }
            let on = fencing.load(Ordering::SeqCst);
            if on != fencing_sent {
                fencing_sent = on;
                self.controller.send(&Control::Fencing { on }).await?;
            }
        }
    }
}

/// The last event a worker sends.
fn ends_the_worker(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Worker {
            what: WorkerEvent::Finished
                | WorkerEvent::Crashed
                | WorkerEvent::Failed { .. }
                | WorkerEvent::GaveUp
                | WorkerEvent::StoppedWork,
            ..
        }
    )
}
