//! A class in the TUI. The instructor's projector: a start screen with each student's
//! join command and its QR code until the students are in, then the playground's
//! screen (the same app, event loop and log) on the class's run, one lane per
//! student. A student's screen: the same view of a copy of the room's log, their own
//! lane selected and their situation said to them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{Event as Input, KeyCode, KeyEventKind};
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::app::{App, ClassSeat, Msg};
use super::keys::{Action, action_for};
use super::lesson::LessonState;
use super::theme::Theme;
use super::{Source, Ui, event_loop};
use crate::engine::log::{Event, EventKind, EventLog, RunClock, RunOutcome};
use crate::lesson::Lesson;
use crate::runtime::Shutdown;
use crate::scenario::{Program, Scenario};
use crate::session::class::{Attending, Hosting, for_students, seat_of, sits_out};

/// How often the start screen looks for students who have joined.
const ROLL_CALL: Duration = Duration::from_millis(250);

/// The start screen's state: each student, whether they are in, whose code is shown.
pub struct Lobby {
    pub room: String,
    /// (name, join command) per student.
    pub seats: Vec<(String, String)>,
    pub present: Vec<String>,
    pub selected: usize,
}

impl Lobby {
    pub fn everyone_in(&self) -> bool {
        self.seats.iter().all(|(name, _)| self.present.contains(name))
    }
}

/// Run the class in the TUI: the start screen, then the run until the instructor
/// quits. A `lesson`'s narration is shown on the projector at its moments, as a
/// lesson shows it, and its questions are posed to the class. `None`: the instructor
/// quit before starting the run.
pub async fn instruct(
    room: &mut Hosting<'_>,
    lesson: &Lesson,
    fencing: bool,
    shutdown: &Shutdown,
) -> anyhow::Result<Option<(RunOutcome, Arc<EventLog>)>> {
    let mut ui = Ui::enter(None, shutdown)?;
    let seats = room.seats().into_iter();
    let seats = seats.map(|(name, url)| (name, format!("fencelab join '{url}'")));
    let mut lobby = Lobby {
        room: room.id().to_string(),
        seats: seats.collect(),
        present: Vec::new(),
        selected: 0,
    };
    if !wait_in_lobby(&mut ui, room, &mut lobby).await? {
        return Ok(None);
    }
    // The students here play; one who never came sits the run out rather than hold
    // it up (a worker that never starts would keep the run from ending).
    let here: Vec<String> =
        lobby.seats.iter().map(|(n, _)| n.clone()).filter(|n| lobby.present.contains(n)).collect();
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

/// The start screen: the selected student's join command across the top, whole (a
/// command broken across lines is copied broken: it is split only at its space, and
/// never inside the URL), then the students (who is in) on the left and the command's
/// QR code on the right. Drawn at any size, however small, without a panic.
pub fn draw_lobby(screen: Rect, buf: &mut Buffer, lobby: &Lobby, theme: &Theme) {
    buf.set_style(screen, theme.base);
    let selected = lobby.seats.get(lobby.selected);
    let width = usize::from(screen.width);
    let said_text =
        selected.map_or(Vec::new(), |(name, command)| command_lines(name, command, width));
    let [header, said, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(said_text.len() as u16),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(screen);
    let joined = lobby.seats.iter().filter(|(n, _)| lobby.present.contains(n)).count();
    let head = format!(
        " fencelab class · room {} · {joined} of {} students joined",
        lobby.room,
        lobby.seats.len()
    );
    Paragraph::new(Line::styled(head, theme.title)).render(header, buf);
    let said_lines: Vec<Line> = said_text
        .iter()
        .enumerate()
        .map(|(i, l)| Line::styled(l.clone(), if i == 0 { theme.title } else { theme.key }))
        .collect();
    Paragraph::new(said_lines).render(said, buf);
    let [list, code] = Layout::horizontal([Constraint::Length(24), Constraint::Min(0)]).areas(body);
    // The list scrolls with the selection past a screenful.
    let rows = list.height.saturating_sub(2).max(1) as usize;
    let first = lobby.selected.saturating_sub(rows - 1);
    let names: Vec<Line> = lobby
        .seats
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, (name, _))| {
            let mark = if lobby.present.contains(name) { "✓" } else { "·" };
            let pointer = if i == lobby.selected { "▶" } else { " " };
            let style = if i == lobby.selected { theme.selected } else { theme.title };
            Line::styled(format!("{pointer}{mark} {name}"), style)
        })
        .collect();
    let block = |title: String| {
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(title)
            .title_style(theme.title)
    };
    Paragraph::new(names).block(block(" Students ".into())).render(list, buf);
    if let Some((name, command)) = selected {
        let inner = block(String::new()).inner(code);
        // Dense1x2 puts two rows of modules in one row of text. The quiet zone is a
        // blank row (two modules) above and below and two columns either side: the
        // code's own four-module zone would not fit a 100x30 screen.
        let art = qrcode::QrCode::new(command.as_bytes())
            .map(|qr| qr.render::<qrcode::render::unicode::Dense1x2>().quiet_zone(false).build());
        let art: Vec<String> =
            art.iter().flat_map(|a| a.lines()).map(|l| format!("  {l}  ")).collect();
        let widest = art.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let (title, lines) = if !art.is_empty()
            && widest <= usize::from(inner.width)
            && art.len() <= usize::from(inner.height)
        {
            (format!(" {name}: or scan it "), art.into_iter().map(Line::from).collect())
        } else {
            // A cut code scans as nothing (or as something else): whole, or not at all.
            let w = widest + 24 + 2;
            let h = 1 + said_text.len() + art.len() + 2 + 1;
            let larger = format!("Its QR code needs a larger terminal (about {w}x{h}).");
            (format!(" {name} "), vec![Line::styled(larger, theme.dim)])
        };
        Paragraph::new(lines).block(block(title)).render(code, buf);
    }
    let next = if lobby.everyone_in() {
        "everyone is here: Enter starts the run"
    } else if lobby.present.is_empty() {
        "waiting for the first student"
    } else {
        "Enter starts without those missing"
    };
    let keys = format!(" ↑↓ another student's code · {next} · q quits");
    Paragraph::new(Line::styled(keys, theme.dim)).render(footer, buf);
}

/// `name`'s join command in lines of at most `width` characters, after a line that
/// says whose it is: whole on one line, or split at its one space (the URL alone on
/// the second), or, where even the URL does not fit, a line saying how wide a terminal
/// it needs. Never cut: a command typed or copied from a cut line fails, or worse.
fn command_lines(name: &str, command: &str, width: usize) -> Vec<String> {
    let fits = |s: &str| s.chars().count() < width;
    let whose = format!(" {name} types:");
    if fits(&format!(" {command}")) {
        return vec![whose, format!(" {command}")];
    }
    match command.rsplit_once(' ') {
        Some((program, url)) if fits(url) => {
            vec![format!(" {name} types (one line):"), format!(" {program}"), url.to_string()]
        }
        split => {
            if let Some(lines) = split.and_then(|(program, url)| continued(program, url, width)) {
                let whose = format!(" {name} types (a line ending in \\ goes on below):");
                return [whose].into_iter().chain(lines).collect();
            }
            // Split at its space, the URL alone needs its own length and a column.
            let need =
                split.map_or(command.chars().count() + 2, |(_, url)| url.chars().count() + 1);
            vec![format!(
                " {name}'s join command needs {need} columns: a wider terminal, or --headless"
            )]
        }
    }
}

/// The command as shell lines continued by a backslash, for a screen too narrow for
/// its URL (80 columns): the URL unquoted (only where every character of it is one a
/// shell takes as it is) and broken only after a `:` or an `@`, so the password (hex)
/// is always whole on one line. Continuation lines start at their first column: a
/// backslash-newline inside a word joins it with no space.
fn continued(program: &str, url: &str, width: usize) -> Option<Vec<String>> {
    let bare = url.trim_start_matches('\'').trim_end_matches('\'');
    let safe = |c: char| c.is_ascii_alphanumeric() || ":/@.-_".contains(c);
    if bare.is_empty() || !bare.chars().all(safe) {
        return None;
    }
    let mut pieces = Vec::new();
    let mut rest = bare;
    while let Some(at) = rest.find([':', '@']) {
        let (piece, tail) = rest.split_at(at + 1);
        pieces.push(piece);
        rest = tail;
    }
    pieces.push(rest);
    // Each line with its backslash fits in fewer than `width` columns.
    let room = width.checked_sub(2)?;
    let mut lines = vec![format!(" {program} \\")];
    let mut line = String::new();
    for piece in pieces {
        if piece.len() > room {
            return None;
        }
        if line.len() + piece.len() > room {
            lines.push(format!("{line}\\"));
            line.clear();
        }
        line.push_str(piece);
    }
    lines.push(line);
    Some(lines)
}

/// A student's screen: join with `url`, run the student's worker (as `program
/// worker`), and show the class's run as the room sees it, the student's own lane
/// selected and their situation said to them, until they quit.
pub async fn attend_screen(
    url: String,
    (program, own): (PathBuf, Option<Program>),
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let (id, me) = seat_of(&url)?;
    let mut ui = Ui::enter(None, shutdown)?;
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
    let quiz = Some(crate::session::quiz::QuizLink::student(url));
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
                Layout::vertical([Constraint::Fill(1), Constraint::Length(2), Constraint::Fill(1)])
                    .areas(frame.area());
            let text = vec![Line::from(format!("fencelab · {waiting} …")), Line::from("q quits")];
            frame.render_widget(Paragraph::new(text).alignment(Alignment::Center), middle);
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
