//! `fencelab class` (the instructor) and `fencelab join` (a student): a class plays a
//! scenario on one Redis, each student's worker on the student's own machine.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::class_quiz::{StudentLines, answer_typed, project};
use super::run::{EXIT_INTERRUPTED, say};
use super::scenario_ref;
use crate::check::{check, lock_of};
use crate::class::attend::{Seen, attend, sits_out};
use crate::class::host::{mirror, prepare_class};
use crate::class::quiz::Quizmaster;
use crate::class::room::{CLOSE_WITHIN, Room};
use crate::class::server::{SHARED_LEAVES_OPEN, private_redis};
use crate::class::{for_students, new_room_id};
use crate::cli::{BackendArgs, ClassArgs};
use crate::engine::log::{EventKind, EventLog, RunOutcome};
use crate::engine::{RunControl, WorkerCommand};
use crate::output::transcript::verdict_after;
use crate::runtime::Shutdown;
use crate::scenario::{Checkpoint, Scenario};
use crate::service::class::Hosting;
use crate::service::quiz::QuizLink;
use crate::tui::class::{attend_screen, instruct};
use crate::tui::ssh::SshRoom;

/// The instructor's typed lines (headless).
type Typed = tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>;

/// How often the instructor looks for students who have not joined yet.
const ROLL_CALL: std::time::Duration = std::time::Duration::from_millis(250);
/// After SIGINT or SIGTERM: how long the run has to end, and then closing the room,
/// so the class exits well within a second even on a Redis that stopped answering.
const WIND_DOWN_AFTER_SIGNAL: std::time::Duration = std::time::Duration::from_millis(200);
const CLOSE_AFTER_SIGNAL: std::time::Duration = std::time::Duration::from_millis(200);

pub fn class(args: &ClassArgs, backend: &BackendArgs) -> anyhow::Result<ExitCode> {
    let lesson = scenario_ref::load(&args.scenario)?;
    // The user's Redis, or a private one students on the LAN can reach, with a
    // password of its own (never shown: students get users of their own).
    // `--redis URL` (or REDIS_URL) names the class's Redis; without it, a private
    // one. Both with `--host` is a contradiction, refused rather than guessed at.
    let (private, admin_url) = match &backend.redis {
        Some(url) => {
            let from = if std::env::var("REDIS_URL").ok().as_ref() == Some(url) {
                "REDIS_URL"
            } else {
                "--redis"
            };
            let shown = crate::backend::redis::redact_url(url);
            if args.host.is_some() && args.ssh.is_none() {
                anyhow::bail!(
                    "--host names this machine in the join URLs of a private redis-server (and in \
                     the ssh commands of --ssh), but {from} names the class's Redis ({shown}), \
                     whose URL students reach: drop one"
                );
            }
            note!("the class uses the Redis at {shown} (from {from})");
            note!("{SHARED_LEAVES_OPEN}");
            (None, url.clone())
        }
        None => {
            let host = args
                .host
                .clone()
                .or_else(crate::platform::hostname)
                .unwrap_or_else(|| args.listen.clone());
            let (server, url, upstream) = private_redis(args.students.len())?;
            (Some((server, upstream, host)), url)
        }
    };
    let runtime = crate::runtime::build(false)?;
    let result = runtime.block_on(async {
        let shutdown = Shutdown::on_signals()?;
        let cancel = shutdown.token();
        let id = new_room_id()?;
        // A private Redis listens on loopback only; students reach it through the gate.
        let (room, _gate) = match &private {
            Some((_, upstream, host)) => {
                let keys = crate::class::RoomKeys::new(&id);
                let gate = crate::class::gate::open(&args.listen, upstream, &keys, &args.students).await?;
                let students_url = format!("redis://{host}:{}", gate.addr.port());
                note!(
                    "the class uses a private redis-server; students reach it through fencelab's gate on {}:{}",
                    args.listen,
                    gate.addr.port()
                );
                let room = Room::open_behind(&admin_url, &students_url, &id, &args.students).await?;
                (room.with_lock_values(gate.values.clone()), Some(gate))
            }
            None => (Room::open(&admin_url, &id, &args.students).await?, None),
        };
        let mut room = room.with_janitor(&std::env::current_exe()?, &admin_url)?;
        let ssh = match args.ssh {
            Some(port) => {
                let seats = room.seats().iter().map(|s| (s.name.clone(), s.join_url().to_string()));
                let program = crate::engine::process::worker_program(false)?;
                let served = SshRoom::open((&args.listen, port), seats.collect(), program, &shutdown);
                let host = args.host.clone().or_else(crate::platform::hostname);
                Some((served.await?, host.unwrap_or_else(|| args.listen.clone())))
            }
            None => None,
        };
        let ssh_room = ssh.as_ref().map(|(room, host)| (room, host.as_str()));
        let class = async {
            // Text when asked for, or when there is no terminal to draw on.
            if !args.headless && std::io::stdout().is_terminal() {
                let mut hosting = Hosting::new(&mut room, &admin_url);
                let shown = instruct(&mut hosting, ssh_room, &lesson, args.fencing, &shutdown);
                return Ok(match shown.await? {
                    Some((outcome, log)) => verdict(outcome, &log),
                    None => ExitCode::from(EXIT_INTERRUPTED),
                });
            }
            print(&format!("class room {} is open; each student runs:", room.keys.id))?;
            if let Some((ssh, _)) = ssh_room {
                print(&format!("(over SSH, this room's host key is {})", ssh.fingerprint))?;
            }
            for seat in room.seats() {
                let command = match ssh_room {
                    Some((ssh, host)) => ssh.command(&seat.name, host),
                    None => format!("fencelab join '{}'", seat.join_url()),
                };
                print(&format!("\n{}:\n  {command}", seat.name))?;
                if let Some(password) = ssh_room.and_then(|(ssh, _)| ssh.password(&seat.name)) {
                    print(&format!("  password: {password}"))?;
                }
                if let Ok(code) = qrcode::QrCode::new(command.as_bytes()) {
                    print(
                        &code
                            .render::<qrcode::render::unicode::Dense1x2>()
                            .quiet_zone(true)
                            .build(),
                    )?;
                }
            }
            let mut typed = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            let Some(here) = wait_for(&mut room, &args.students, &mut typed, cancel).await? else {
                return Ok(ExitCode::from(EXIT_INTERRUPTED));
            };
            let scenario = for_students(&lesson.scenario, &here);
            let asked = (&here[..], lesson.scenario.checkpoints.clone());
            play(&mut room, &admin_url, (&scenario, asked), args.fencing, typed, cancel).await
        };
        // After a signal the class ends promptly whatever Redis does (stopped, busy):
        // what closing cannot delete expires with the room's lease, and is said.
        let signalled = async {
            cancel.cancelled().await;
            tokio::time::sleep(WIND_DOWN_AFTER_SIGNAL).await;
        };
        let outcome = tokio::select! {
            outcome = class => outcome,
            () = signalled => Ok(ExitCode::from(EXIT_INTERRUPTED)),
        };
        // The students over SSH leave (their workers killed) before the room goes.
        if let Some((ssh, _)) = ssh {
            ssh.close().await;
        }
        let budget = if cancel.is_cancelled() { CLOSE_AFTER_SIGNAL } else { CLOSE_WITHIN };
        match room.close_within(budget).await {
            Err(left) if cancel.is_cancelled() => note!("{left}"),
            closed => closed.context("closing the room")?,
        }
        // Output into a closed pipe (`| head -1`) ends the class quietly.
        match outcome {
            Err(e) if e.is::<StdoutClosed>() => Ok(ExitCode::SUCCESS),
            outcome => outcome,
        }
    });
    // The read of typed commands blocks a thread on stdin: do not wait for it.
    runtime.shutdown_background();
    result
}

/// Standard output was closed (`| head -1`): the class ends, quietly.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
struct StdoutClosed;

/// Print a line (its control characters made visible); a closed stdout is an error
/// that ends the class quietly.
fn print(line: &str) -> Result<(), StdoutClosed> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", crate::output::printable::printable(line))
        .and_then(|()| out.flush())
        .map_err(|_| StdoutClosed)
}

/// Resolves once nobody reads standard output any more (the reader of a pipe has
/// gone, `| head -1`): waiting for students who may never come would never notice,
/// as nothing is written meanwhile.
async fn stdout_closed() {
    loop {
        if crate::platform::stdout_reader_gone() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Wait until every student is connected, or the instructor presses Enter to start
/// without those missing (or gives up with Ctrl-C): an absent student never holds up
/// the class. Returns the students who play, in roll order (None: interrupted).
async fn wait_for(
    room: &mut Room,
    students: &[String],
    typed: &mut Typed,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<Vec<String>>> {
    print("\nwaiting for every student; press Enter to start without those missing")?;
    let mut told = Vec::new();
    let mut typing = true;
    loop {
        let present = room.present().await?;
        for s in &present {
            if !told.contains(s) {
                print(&format!("{s} joined"))?;
                told.push(s.clone());
            }
        }
        if present.len() == students.len() {
            return Ok(Some(present));
        }
        tokio::select! {
            () = tokio::time::sleep(ROLL_CALL) => {}
            line = typed.next_line(), if typing => match line {
                Ok(Some(_)) if present.is_empty() => print("nobody has joined yet")?,
                Ok(Some(_)) => {
                    let missing: Vec<&str> =
                        students.iter().filter(|s| !present.contains(s)).map(String::as_str).collect();
                    print(&format!("starting without {}: they sit this run out", missing.join(", ")))?;
                    return Ok(Some(present));
                }
                // No more input (not a terminal, or closed): wait for everyone.
                _ => typing = false,
            },
            () = cancel.cancelled() => {
                note!("interrupted before every student joined");
                return Ok(None);
            }
            () = stdout_closed() => return Err(StdoutClosed.into()),
        }
    }
}

/// Play `scenario` with the students `here`, the lesson's `checkpoints` posed to
/// them, the run printed as the projector shows it (`class_quiz::project`).
async fn play(
    room: &mut Room,
    admin_url: &str,
    (scenario, (here, checkpoints)): (&Scenario, (&[String], Vec<Checkpoint>)),
    fencing: bool,
    typed: Typed,
    cancel: &CancellationToken,
) -> anyhow::Result<ExitCode> {
    say("\nthe run starts");
    let prepared = prepare_class(room, admin_url, scenario, fencing, cancel).await?;
    let log = prepared.log();
    let (reveals, revealing) = tokio::sync::mpsc::unbounded_channel();
    let keys = tokio::spawn(obey_typed_commands(prepared.control(), typed, reveals));
    let mirror = tokio::spawn(mirror(log.clone(), room.controller()));
    let quiz = QuizLink::instructor(Quizmaster::of(room, here), checkpoints.clone());
    let printer = tokio::spawn(project(log.clone(), checkpoints, quiz, revealing));
    let outcome = prepared.execute().await;
    // A question still open at the run's end waits for the instructor's Enter.
    let _ = printer.await;
    keys.abort();
    // The students' screens get the end of the run before the room closes.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), mirror).await;
    Ok(verdict(outcome, &log))
}

/// Say how the run went (after the screen is given back, in the TUI), and the exit
/// code that goes with it.
fn verdict(outcome: RunOutcome, log: &EventLog) -> ExitCode {
    let events = log.snapshot();
    for line in verdict_after(&outcome, &check(&events), lock_of(&events)) {
        say(&line);
    }
    // Who left mid-run: their part ended there, as a crash, which the verdict's
    // reader must know to read it.
    for line in crate::output::transcript::who_left(&events) {
        say(&line);
    }
    match outcome {
        RunOutcome::Completed => ExitCode::SUCCESS,
        RunOutcome::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        RunOutcome::Failed { error } => {
            note!("error: {}", crate::output::printable::printable(&error));
            ExitCode::FAILURE
        }
    }
}

/// The instructor's controls, typed one per line: `pause NAME`, `resume NAME`,
/// `crash NAME`, `fencing on|off`; Enter (or `reveal`) reveals the open question, sent
/// to `reveals` (dropped when the input ends).
async fn obey_typed_commands(
    control: RunControl,
    mut lines: Typed,
    reveals: tokio::sync::mpsc::UnboundedSender<()>,
) {
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] | ["reveal"] => drop(reveals.send(())),
            ["pause", who] => control.send(who, WorkerCommand::Pause { ms: None }),
            ["resume", who] => control.send(who, WorkerCommand::Resume),
            ["crash", who] => control.send(who, WorkerCommand::Crash),
            ["fencing", "on"] => control.set_fencing(true),
            ["fencing", "off"] => control.set_fencing(false),
            _ => note!(
                "type: pause NAME, resume NAME, crash NAME, fencing on|off, or Enter to reveal a question"
            ),
        }
    }
}

/// `fencelab join URL`: the student's worker (or `own` program), here, with the run on the student's
/// screen (or its events printed, `headless` or without a terminal).
pub fn join(url: &str, headless: bool, own: Option<&str>) -> anyhow::Result<ExitCode> {
    let program = crate::engine::process::worker_program(false)?;
    let own = own.map(super::scenario_ref::parse_program).transpose()?;
    let runtime = crate::runtime::build(false)?;
    if !headless && std::io::stdout().is_terminal() {
        let shutdown = Shutdown::on_signals()?;
        let shown = runtime.block_on(attend_screen(url.to_string(), (program, own), &shutdown));
        runtime.shutdown_background();
        shown?;
        return Ok(ExitCode::SUCCESS);
    }
    let (_, me) = crate::class::seat_of(url)?;
    let lines = Arc::new(StudentLines::default());
    let joined = runtime.block_on(async {
        let (over, told_over) = tokio::sync::watch::channel(None);
        let answering = tokio::spawn(answer_typed(url.to_string(), lines.clone(), told_over));
        let mut ended_ms = 0.0;
        let show = |seen: Seen, event: &crate::engine::log::Event| {
            if let EventKind::RunEnded { .. } = event.kind {
                ended_ms = event.t_ms;
            }
            // Joined once the run had started without this student: they watch it.
            if let Some(said) = sits_out(&event.kind, &me) {
                lines.watching();
                say(&said);
            }
            lines.show(seen, event);
        };
        let joined = attend(url, (&program, own.as_ref()), CancellationToken::new(), show).await;
        // A question still open at the run's end (or still to come: the projector
        // holds at each) is asked and revealed before the student's lines end.
        let _ = over.send(Some(ended_ms));
        match joined {
            Ok(()) => drop(answering.await),
            Err(_) => answering.abort(),
        }
        joined
    });
    runtime.shutdown_background();
    joined?;
    Ok(ExitCode::SUCCESS)
}

/// `fencelab room-janitor` (started by `class`, see `class::janitor`).
pub fn janitor() -> anyhow::Result<ExitCode> {
    let runtime = crate::runtime::build(false)?;
    let served = runtime.block_on(crate::class::janitor::serve());
    // The read of stdin blocks a thread that nothing can wake: do not wait for it.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}
