//! A class as its screens see it. The instructor's side ([`Hosting`]): who has come
//! into the room, the class's run with its log mirrored to the students, the
//! questions. A student's side ([`Attending`]): joining, playing their worker, the
//! room's log as it arrives, leaving. The TUI draws the screens; this module talks to
//! the room, and hands back only what a screen shows (names, logs, a run's control).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::quiz::QuizLink;
use crate::class::ClassError;
use crate::class::attend::{Seen, attend};
use crate::class::host::{mirror, prepare_class};
use crate::class::quiz::Quizmaster;
use crate::class::room::Room;
use crate::engine::RunControl;
use crate::engine::log::{Event, EventLog, RunOutcome};
use crate::scenario::{Checkpoint, Program, Scenario};

/// How long quitting waits for the run to end and clean up, and for the students'
/// screens to get its end; and for a student's worker to leave.
const WIND_DOWN: Duration = Duration::from_secs(3);

/// The scenario as a class of `students` plays it: a worker per student, taking the
/// scenario's parts in turn (`class::for_students`).
pub fn for_students(scenario: &Scenario, students: &[String]) -> Scenario {
    crate::class::for_students(scenario, students)
}

/// What a student is told who joined once the run had started without them
/// (`first`: the room's first event, the run's start); None when they play in it.
pub fn sits_out(first: &Event, me: &str) -> Option<String> {
    crate::class::attend::sits_out(&first.kind, me)
}

/// The room's id and the student's name in a join URL.
pub fn seat_of(url: &str) -> anyhow::Result<(String, String)> {
    Ok(crate::class::seat_of(url)?)
}

/// The instructor's open room on the class's Redis (`admin_url`).
pub struct Hosting<'a> {
    room: &'a mut Room,
    admin_url: &'a str,
}

impl<'a> Hosting<'a> {
    pub fn new(room: &'a mut Room, admin_url: &'a str) -> Self {
        Hosting { room, admin_url }
    }

    /// The room's id, as its students see it.
    pub fn id(&self) -> &str {
        &self.room.keys.id
    }

    /// Each student's name and the URL they join with (a secret, for them alone).
    pub fn seats(&self) -> Vec<(String, String)> {
        self.room.seats().iter().map(|s| (s.name.clone(), s.join_url().to_string())).collect()
    }

    /// The students in the room now.
    pub async fn present(&mut self) -> anyhow::Result<Vec<String>> {
        Ok(self.room.present().await?)
    }

    /// Start the class's run of `scenario` (a worker per student there, hosted by
    /// the room), its log mirrored to the students' screens as it grows.
    pub async fn start(
        &self,
        scenario: &Scenario,
        fencing: bool,
        cancel: &CancellationToken,
    ) -> anyhow::Result<HostedRun> {
        let prepared = prepare_class(self.room, self.admin_url, scenario, fencing, cancel).await?;
        let (log, control) = (prepared.log(), prepared.control());
        let run = tokio::spawn(prepared.execute());
        let mirrored = tokio::spawn(mirror(log.clone(), self.room.controller()));
        Ok(HostedRun { log, control, run, mirrored })
    }

    /// The projector's line to the room about the lesson's `checkpoints`, posed to
    /// the students `here`.
    pub fn quiz(&self, here: &[String], checkpoints: Vec<Checkpoint>) -> QuizLink {
        QuizLink::instructor(Quizmaster::of(self.room, here), checkpoints)
    }
}

/// The class's run under way: its log and its controls for the projector.
pub struct HostedRun {
    pub log: Arc<EventLog>,
    pub control: RunControl,
    run: JoinHandle<RunOutcome>,
    mirrored: JoinHandle<()>,
}

impl HostedRun {
    /// Stop the run and wait (briefly) for it to end and clean up, and for the
    /// students' screens to get its end; how it ended.
    pub async fn wind_down(self) -> RunOutcome {
        self.control.stop();
        let outcome = match tokio::time::timeout(WIND_DOWN, self.run).await {
            Ok(Ok(outcome)) => outcome,
            _ => RunOutcome::Failed { error: "the class's run did not end in time".into() },
        };
        let _ = tokio::time::timeout(WIND_DOWN, self.mirrored).await;
        outcome
    }
}

/// A student in the room: their worker played (as `program worker`, or their own
/// program) when the instructor starts, and the room's log as it arrives (only the
/// log, for a student who joined once the run had started without them). Dropped,
/// it stops at once; [`Attending::leave`] leaves as quitting does.
pub struct Attending {
    /// The room's events, until they are copied into a log.
    heard: Option<mpsc::UnboundedReceiver<Event>>,
    /// Joining and playing; `None` once it has ended (and been heard of).
    task: Option<JoinHandle<Result<(), ClassError>>>,
    leave: CancellationToken,
    copier: Option<JoinHandle<()>>,
}

impl Attending {
    /// Join with `url` (on this runtime).
    pub fn join(url: &str, (program, own): (PathBuf, Option<Program>)) -> Attending {
        let (tell, heard) = mpsc::unbounded_channel();
        let (url, leave) = (url.to_string(), CancellationToken::new());
        let leaving = leave.clone();
        let task = tokio::spawn(async move {
            attend(&url, (&program, own.as_ref()), leaving, |seen, event| {
                if let Seen::Room { .. } = seen {
                    let _ = tell.send(event.clone());
                }
            })
            .await
        });
        Attending { heard: Some(heard), task: Some(task), leave, copier: None }
    }

    /// The room's first event (the run's start); an error of joining, or having left
    /// before it, ends the wait with why.
    pub async fn first_event(&mut self) -> anyhow::Result<Event> {
        let left = || anyhow::anyhow!("left the room before the run started");
        let (Some(task), Some(heard)) = (self.task.as_mut(), self.heard.as_mut()) else {
            return Err(left());
        };
        let joined = tokio::select! {
            Some(event) = heard.recv() => return Ok(event),
            joined = task => joined,
        };
        self.task = None;
        match joined {
            Ok(Err(e)) => Err(e.into()),
            _ => Err(left()),
        }
    }

    /// From now on the room's events go into `log` as they arrive.
    pub fn copy_into(&mut self, log: Arc<EventLog>) {
        let Some(mut heard) = self.heard.take() else { return };
        self.copier = Some(tokio::spawn(async move {
            while let Some(event) = heard.recv().await {
                log.copy(event);
            }
        }));
    }

    /// Leave: the worker is killed as a crash is and the room told (a run still
    /// under way goes on without this student); then what attended ends.
    pub async fn leave(mut self) {
        self.leave.cancel();
        if let Some(task) = self.task.as_mut() {
            let _ = tokio::time::timeout(WIND_DOWN, task).await;
        }
    }
}

impl Drop for Attending {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        if let Some(copier) = &self.copier {
            copier.abort();
        }
    }
}
