//! A class in the TUI. The instructor's projector: a start screen with each student's
//! join command and its QR code until the students are in, then the playground's
//! screen (the same app, event loop and log) on the class's run, one lane per
//! student. A student's screen: the same view of a copy of the room's log, their own
//! lane selected and their situation said to them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

use ratatui::crossterm::event::{Event as Input, KeyCode, KeyEventKind};
use ratatui::layout::{Alignment, Constraint, Layout};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use super::app::lesson_state::LessonState;
use super::app::{App, ClassSeat, Msg};
use super::keys::{Action, action_for};
use super::render::lobby::{Lobby, LobbySeat, draw_lobby};
use super::ssh::SshRoom;
use super::theme::Theme;
use super::{Source, Ui, event_loop};
use crate::engine::log::{Event, EventKind, EventLog, RunClock, RunOutcome};
use crate::lesson::Lesson;
use crate::runtime::Shutdown;
use crate::scenario::{Program, Scenario};
use crate::service::class::{Attending, Hosting, for_students, seat_of, sits_out};

/// How often the start screen looks for students who have joined.
const ROLL_CALL: Duration = Duration::from_millis(250);

/// Run the class in the TUI: the start screen, then the run until the instructor
/// quits. A `lesson`'s narration is shown on the projector at its moments, as a
/// lesson shows it, and its questions are posed to the class. `None`: the instructor
/// quit before starting the run.
pub async fn instruct(
    room: &mut Hosting<'_>,
    ssh: Option<(&SshRoom, &str)>,
    lesson: &Lesson,
    fencing: bool,
    shutdown: &Shutdown,
) -> anyhow::Result<Option<(RunOutcome, Arc<EventLog>)>> {
    let mut ui = Ui::enter(None, shutdown)?;
    let seats = room.seats().into_iter();
    // Over SSH, a student types `ssh` and their password; otherwise `fencelab join`.
    let seats = seats.map(|(name, url)| match ssh {
        Some((ssh, host)) => {
            let password = ssh.password(&name).map(str::to_string);
            LobbySeat { command: ssh.command(&name, host), name, password }
        }
        None => LobbySeat { command: format!("fencelab join '{url}'"), name, password: None },
    });
    let mut lobby = Lobby {
        room: room.id().to_string(),
        seats: seats.collect(),
        host_key: ssh.map(|(ssh, _)| ssh.fingerprint.clone()),
        present: Vec::new(),
        selected: 0,
    };
    if !wait_in_lobby(&mut ui, room, &mut lobby).await? {
        return Ok(None);
    }
    // The students here play; one who never came sits the run out rather than hold
    // it up (a worker that never starts would keep the run from ending).
    let here: Vec<String> =
        lobby.seats.iter().map(|s| s.name.clone()).filter(|n| lobby.present.contains(n)).collect();
    let scenario = &for_students(&lesson.scenario, &here);
    let run = room.start(scenario, fencing, shutdown.token()).await?;
    let log = run.log.clone();
    let label = format!("class room {} · {} students", room.id(), here.len());
    let theme = Theme::initial(false);
    let mut app = App::new(scenario.clone(), fencing, 1.0, false, label, theme)
        .in_class(ClassSeat::Instructor);
    let checkpoints = lesson.scenario.checkpoints.clone();
    if !lesson.narration.runs.is_empty() || !checkpoints.is_empty() {
        // The screen holds at each step and question as a lesson's does (the run goes
        // on underneath), while the class answers.
        let told = class_lesson(lesson, &here, &app.run_label());
        app = app.with_lesson(told);
    }
    let quiz = Some(room.quiz(&here, checkpoints));
    let source = Source::Hosted { log: log.clone(), control: Some(run.control.clone()), quiz };
    let shown = event_loop(&mut app, source, ui).await;
    let outcome = run.wind_down().await;
    shown?;
    Ok(Some((outcome, log)))
}

/// The lesson as the projector tells it to a class playing the run labelled `label`
/// with the students `here`: that run's narration alone, with no offer of the next
/// (a class plays one run), its first step saying who plays whom, and the cast known,
/// so a step or question about a part whose players all left says so.
pub fn class_lesson(lesson: &Lesson, here: &[String], label: &str) -> LessonState {
    let mut narration = lesson.narration.clone();
    narration.runs.retain(|r| r.label == label);
    for step in narration.runs.iter_mut().flat_map(|r| r.steps.iter_mut()) {
        step.body = without_next_run(&step.body);
    }
    // The narration names the scenario's workers, the lanes the students.
    let said = parts(&lesson.scenario, here);
    for first in narration.runs.iter_mut().filter_map(|r| r.steps.first_mut()) {
        first.body = format!("*{said}.*\n\n{}", first.body);
    }
    let workers = &lesson.scenario.workers;
    let cast = here.iter().zip(workers.iter().cycle()).map(|(s, w)| (s.clone(), w.name.clone()));
    let checkpoints = lesson.scenario.checkpoints.clone();
    LessonState::new(narration, label, checkpoints, Vec::new()).with_cast(cast.collect())
}

/// A narration step's text without its paragraphs offering `c` (the next run), which
/// a class does not play: said instead how to see it.
fn without_next_run(body: &str) -> String {
    let offers = |p: &str| p.contains("Press **c**") || p.to_lowercase().contains("press c");
    if !body.split("\n\n").any(offers) {
        return body.to_string();
    }
    let kept: Vec<&str> = body.split("\n\n").filter(|p| !offers(p)).collect();
    let said = "*A class plays one run: for the next, end this class (q) and start another \
                (with `--fencing` for fencing tokens on).*";
    kept.into_iter().chain([said]).collect::<Vec<_>>().join("\n\n")
}

/// Who plays which of the scenario's workers: "In this class alice and carol play
/// A, bob plays B" (the students take the parts in turn, as `for_students` does).
fn parts(scenario: &Scenario, students: &[String]) -> String {
    let said: Vec<String> = scenario
        .workers
        .iter()
        .enumerate()
        .filter_map(|(i, part)| {
            let names: Vec<&str> = students
                .iter()
                .skip(i)
                .step_by(scenario.workers.len())
                .map(String::as_str)
                .collect();
            let plays = if names.len() == 1 { "plays" } else { "play" };
            (!names.is_empty()).then(|| format!("{} {plays} {}", names.join(" and "), part.name))
        })
        .collect();
    format!("In this class {}", said.join(", "))
}

/// Show the start screen until Enter (true) or a quit (false).
async fn wait_in_lobby(
    ui: &mut Ui,
    room: &mut Hosting<'_>,
    lobby: &mut Lobby,
) -> anyhow::Result<bool> {
    let mut roll_call = tokio::time::interval(ROLL_CALL);
    let theme = Theme::initial(false);
    loop {
        ui.terminal.draw(|frame| draw_lobby(frame.area(), frame.buffer_mut(), lobby, &theme))?;
        tokio::select! {
            _ = roll_call.tick() => lobby.present = room.present().await?,
            Some(ev) = ui.input.recv() => {
                let Input::Key(key) = ev else { continue };
                if key.kind == KeyEventKind::Release {
                    continue;
                }
                let last = lobby.seats.len().saturating_sub(1);
                match (key.code, action_for(key)) {
                    (KeyCode::Enter, _) if !lobby.present.is_empty() => return Ok(true),
                    (_, Some(Action::Quit)) => return Ok(false),
                    (_, Some(Action::SelectPrev)) => lobby.selected = lobby.selected.saturating_sub(1),
                    (_, Some(Action::SelectNext)) => lobby.selected = (lobby.selected + 1).min(last),
                    _ => {}
                }
            }
            () = ui.shutdown.requested() => return Ok(false),
        }
    }
}

/// A student's screen: join with `url`, run the student's worker (as `program
/// worker`), and show the class's run as the room sees it, the student's own lane
/// selected and their situation said to them, until they quit.
pub async fn attend_screen(
    url: String,
    (program, own): (PathBuf, Option<Program>),
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    seat_of(&url)?;
    attend_on(Ui::enter(None, shutdown)?, url, (program, own)).await
}

/// A student's screen on `ui` (this terminal, or theirs over SSH): as
/// [`attend_screen`] says.
pub(super) async fn attend_on(
    mut ui: Ui,
    url: String,
    (program, own): (PathBuf, Option<Program>),
) -> anyhow::Result<()> {
    let (id, me) = seat_of(&url)?;
    let mut attending = Attending::join(&url, (program, own));
    let waiting = format!("room {id}: you are {me}. Waiting for the instructor to start the run");
    let Some(first) = wait_for_start(&mut ui, &waiting, &mut attending).await? else {
        return Ok(());
    };
    let EventKind::RunStarted { scenario, fencing, .. } = &first.kind else {
        bail!("the room's log does not start with the run's start");
    };
    // The room's clock, as near as this machine can tell: its first event is now.
    let start = std::time::Instant::now() - Duration::from_secs_f64(first.t_ms / 1000.0);
    let log = Arc::new(EventLog::new(RunClock::started_at(start.into(), 1.0)));
    // Joined once the run had started without them: they watch it, and are told so.
    let watching = sits_out(&first, &me);
    let label = match watching {
        Some(_) => format!("class room {id} · {me}, watching: the run started before you joined"),
        None => format!("class room {id} · you are {me}"),
    };
    let theme = Theme::initial(false);
    let mine = scenario.workers.iter().position(|w| w.name == me);
    let mut app = App::new((**scenario).clone(), *fencing, 1.0, false, label, theme)
        .in_class(ClassSeat::Student(me));
    app.update(Msg::Select(mine.unwrap_or(0)));
    if let Some(watching) = watching {
        app.update(Msg::Notice(watching));
    }
    log.copy(first);
    attending.copy_into(log.clone());
    let quiz = Some(crate::service::quiz::QuizLink::student(url));
    let shown = event_loop(&mut app, Source::Hosted { log, control: None, quiz }, ui).await;
    // Quitting kills the worker as a crash does and tells the room (a run still under
    // way then goes on without this student).
    attending.leave().await;
    shown
}

/// Say `waiting` until the room's first event (the run's start), which is returned;
/// `None`: the student quit first. An error of joining ends the wait with it.
async fn wait_for_start(
    ui: &mut Ui,
    waiting: &str,
    attending: &mut Attending,
) -> anyhow::Result<Option<Event>> {
    loop {
        ui.terminal.draw(|frame| {
            let [_, middle, _] =
                Layout::vertical([Constraint::Fill(1), Constraint::Length(4), Constraint::Fill(1)])
                    .areas(frame.area());
            let text = vec![Line::from(format!("fencelab · {waiting} …")), Line::from("q quits")];
            // Wrapped: an 80-column terminal (a student's over SSH) is narrower than it.
            let said = Paragraph::new(text).alignment(Alignment::Center).wrap(Wrap { trim: true });
            frame.render_widget(said, middle);
        })?;
        tokio::select! {
            first = attending.first_event() => return first.map(Some),
            Some(ev) = ui.input.recv() => {
                if let Input::Key(key) = ev
                    && action_for(key) == Some(Action::Quit)
                {
                    return Ok(None);
                }
            }
            () = ui.shutdown.requested() => return Ok(None),
        }
    }
}
