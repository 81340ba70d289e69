//! `fencelab bench class --ssh`: a class whose students join over SSH, every screen
//! drawn by the instructor's own process, beside the same class joined with
//! `fencelab join` (each student a process of its own, as on their laptops). Both
//! play the same run for real: a private Redis behind the class gate, each student's
//! worker a process. Measured: the frames each SSH student receives a second while
//! the run is live (read by a real SSH client, russh's, at 80x24), and the projector's
//! frames in the same process (the instructor's screen at 160x48, drawn every 33 ms as
//! the TUI does): how late each comes, and how long it takes to draw.

use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use russh::ChannelMsg;
use russh::keys::{HashAlg, PublicKeyOrCertificate};

use super::stats::{median, percentile};
use crate::class::host::{mirror, prepare_class};
use crate::class::room::Room;
use crate::class::server::private_redis;
use crate::class::{RoomKeys, for_students, gate, new_room_id};
use crate::engine::log::EventLog;
use crate::runtime::Shutdown;
use crate::scenario::{Scenario, builtin};
use crate::tui::app::{App, ClassSeat, Msg};
use crate::tui::ssh::SshRoom;
use crate::tui::theme::Theme;

/// The projector's frame, as the TUI's event loop ticks while a run is live.
const FRAME: Duration = Duration::from_millis(33);
/// How long everyone has to join before the measure gives up.
const JOINING: Duration = Duration::from_secs(60);

/// How the students reach the room.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    /// `ssh`: their screens drawn here.
    Ssh,
    /// `fencelab join`: each a process of its own (headless: its screen would be
    /// drawn on its own laptop).
    Join,
}

/// What one measure found.
struct Measured {
    /// Frames a second each SSH student received (none for `join`).
    frames: Vec<f64>,
    /// The projector's frame intervals and draw times, in ms.
    intervals: Vec<f64>,
    draws: Vec<f64>,
}

/// Measure `students` students for `seconds` of a live run, over SSH then with `join`.
pub fn bench(students: u32, seconds: u32) -> anyhow::Result<ExitCode> {
    let names: Vec<String> = (1..=students).map(|i| format!("s{i:03}")).collect();
    let window = Duration::from_secs(seconds.into());
    out!(
        "a class of {students} students playing the playground for {seconds} s, on loopback \
         (each student's worker a process):"
    );
    let shutdown = Shutdown::on_signals()?;
    for (path, label) in
        [(Path::Ssh, "over SSH (screens drawn here)"), (Path::Join, "with fencelab join")]
    {
        let before = crate::platform::usage();
        let Measured { mut frames, mut intervals, mut draws } =
            measure(&names, path, window, &shutdown)?;
        out!("  {label}:");
        if let (Some(before), Some(after)) = (before, crate::platform::usage()) {
            // The room, the projector and (over SSH) every student's screen, not the
            // workers (processes of their own): CPU over the whole measure, joining included.
            out!("    this process: CPU {:.1} s", after.cpu_s - before.cpu_s);
        }
        if path == Path::Ssh {
            frames.sort_by(f64::total_cmp);
            if frames.len() != names.len() {
                bail!(
                    "{} of {} SSH students received no screen",
                    names.len() - frames.len(),
                    names.len()
                );
            }
            out!(
                "    each student's screen: median {:.1} frames/s, p10 {:.1}, worst {:.1} (80x24)",
                median(&frames),
                percentile(&frames, 10.0),
                frames[0]
            );
        } else {
            out!("    each student's screen: drawn on the student's own machine");
        }
        intervals.sort_by(f64::total_cmp);
        draws.sort_by(f64::total_cmp);
        out!(
            "    the projector (160x48, a frame every {} ms): interval median {:.1} ms, p90 {:.1}, p99 {:.1}, max {:.1}; draw median {:.2} ms, p99 {:.2}",
            FRAME.as_millis(),
            median(&intervals),
            percentile(&intervals, 90.0),
            percentile(&intervals, 99.0),
            intervals.last().copied().unwrap_or(f64::NAN),
            median(&draws),
            percentile(&draws, 99.0)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One class on `path`: open the room, seat everyone, play the run for `window`.
fn measure(
    names: &[String],
    path: Path,
    window: Duration,
    shutdown: &Shutdown,
) -> anyhow::Result<Measured> {
    let (_server, admin, upstream) = private_redis(names.len())?;
    let program = crate::engine::process::worker_program(false)?;
    let runtime = crate::runtime::build(false)?;
    let measured = runtime.block_on(async {
        let id = new_room_id()?;
        let gate = gate::open("127.0.0.1", &upstream, &RoomKeys::new(&id), names).await?;
        let students_url = format!("redis://127.0.0.1:{}", gate.addr.port());
        let room = Room::open_behind(&admin, &students_url, &id, names).await?;
        let mut room = room.with_lock_values(gate.values.clone());
        let seats: Vec<(String, String)> =
            room.seats().iter().map(|s| (s.name.clone(), s.join_url().to_string())).collect();
        let (mut frames, mut ssh, mut joins) = (Vec::new(), None, Vec::new());
        match path {
            Path::Ssh => {
                let served =
                    SshRoom::open(("127.0.0.1", 0), seats.clone(), program, shutdown).await?;
                for (name, _) in &seats {
                    let password = served.password(name).context("a seat without a password")?;
                    let counted = Arc::new(AtomicU64::new(0));
                    let key = served.fingerprint.clone();
                    let login = (name.clone(), password.to_string());
                    tokio::spawn(watch_screen(served.addr, key, login, counted.clone()));
                    frames.push(counted);
                }
                ssh = Some(served);
            }
            Path::Join => {
                for (_, url) in &seats {
                    let mut join = tokio::process::Command::new(&program);
                    join.args(["join", "--headless", url.as_str()]).kill_on_drop(true);
                    joins.push(join.stdin(Stdio::null()).stdout(Stdio::null()).spawn()?);
                }
            }
        }
        let joined = Instant::now() + JOINING;
        while room.present().await?.len() < names.len() {
            if Instant::now() > joined {
                bail!("only {} of {} students joined", room.present().await?.len(), names.len());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let Some(Ok(playground)) = builtin("playground") else { bail!("no playground") };
        let scenario = for_students(&playground, names);
        let prepared = prepare_class(&room, &admin, &scenario, false, shutdown.token()).await?;
        let (log, control) = (prepared.log(), prepared.control());
        let mirrored = tokio::spawn(mirror(log.clone(), room.controller()));
        let before: Vec<u64> = frames.iter().map(|f| f.load(Ordering::SeqCst)).collect();
        let run = tokio::spawn(prepared.execute());
        let (intervals, draws) = project(log, scenario, window).await;
        let after: Vec<u64> = frames.iter().map(|f| f.load(Ordering::SeqCst)).collect();
        control.stop();
        let _ = run.await;
        let _ = tokio::time::timeout(Duration::from_secs(2), mirrored).await;
        if let Some(ssh) = ssh {
            ssh.close().await;
        }
        drop(joins);
        room.close().await?;
        let frames = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| a > b)
            .map(|(b, a)| (a - b) as f64 / window.as_secs_f64());
        anyhow::Ok(Measured { frames: frames.collect(), intervals, draws })
    });
    runtime.shutdown_background();
    measured
}

/// The instructor's screen for `window`: the class's run at 160x48, a frame every
/// [`FRAME`]; each frame's interval from the one before and its update-and-draw time.
async fn project(log: Arc<EventLog>, scenario: Scenario, window: Duration) -> (Vec<f64>, Vec<f64>) {
    let theme = Theme::initial(false);
    let mut app = App::new(scenario, false, 1.0, false, "class".into(), theme)
        .in_class(ClassSeat::Instructor);
    app.update(Msg::RunStarting);
    let Ok(mut terminal) = Terminal::new(TestBackend::new(160, 48));
    let mut frames = tokio::time::interval(FRAME);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut intervals, mut draws) = (Vec::new(), Vec::new());
    let started = Instant::now();
    frames.tick().await;
    let mut last = Instant::now();
    while started.elapsed() < window {
        frames.tick().await;
        let now = Instant::now();
        intervals.push((now - last).as_secs_f64() * 1000.0);
        let real_ms = (now - last).as_secs_f64() * 1000.0;
        last = now;
        let new = log.since(app.log().len());
        if !new.is_empty() {
            app.update(Msg::Logged(new));
        }
        app.update(Msg::Clock { reached_ms: log.clock().now_ms(), real_ms });
        let _ = terminal.draw(|f| crate::tui::render::draw(f, &app));
        draws.push(now.elapsed().as_secs_f64() * 1000.0);
    }
    (intervals, draws)
}

/// A student on SSH at 80x24, with a real client: log in as `user` with `password`
/// (the server's key checked against the room's fingerprint `key`), open the screen,
/// and count its frames into `frames` until the server ends it. A frame is one draw:
/// ratatui hides the cursor at the end of each.
async fn watch_screen(
    addr: std::net::SocketAddr,
    key: String,
    (user, password): (String, String),
    frames: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let config = Arc::new(russh::client::Config::default());
    let mut session = russh::client::connect(config, addr, RoomKey(key)).await?;
    if !session.authenticate_password(user, password).await?.success() {
        bail!("the room refused a student's own password");
    }
    let mut channel = session.channel_open_session().await?;
    channel.request_pty(false, "xterm-256color", 80, 24, 0, 0, &[]).await?;
    channel.request_shell(false).await?;
    const HIDE: &[u8] = b"\x1b[?25l";
    while let Some(message) = channel.wait().await {
        if let ChannelMsg::Data { data } = message {
            let drawn = data.windows(HIDE.len()).filter(|w| *w == HIDE).count();
            frames.fetch_add(drawn as u64, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// A client that trusts only the room's host key.
struct RoomKey(String);

impl russh::client::Handler for RoomKey {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else { return Ok(false) };
        Ok(key.fingerprint(HashAlg::Sha256).to_string() == self.0)
    }
}
