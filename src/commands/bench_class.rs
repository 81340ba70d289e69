//! `fencelab bench class`: a room of scripted students on loopback. Each student is
//! the real desk code (`class::desk`), posting events that carry their posting time
//! (`platform::monotonic_ns`, one clock on one machine); the instructor is the real roll.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::class::desk::Desk;
use crate::class::roll::{Arrival, Roll};
use crate::class::room::Room;
use crate::class::server::private_redis;
use crate::engine::log::{Event, EventKind, WorkerEvent};
use crate::platform::monotonic_ns;
use crate::scenario::{Scenario, Step, WorkerSpec, builtin};
use crate::tui::app::{App, Msg};
use crate::tui::theme::Theme;

/// How long the instructor waits, past the time the students need to post everything,
/// before calling the rest lost.
const PATIENCE: Duration = Duration::from_secs(30);

/// One path from the students to the room's Redis.
#[derive(Clone, Copy)]
enum Path {
    /// Through the class gate, as `fencelab class` opens a private Redis.
    Gate,
    /// Straight to Redis, as on a Redis the instructor names (`--redis`).
    Direct,
}

/// What one measure of a path found.
struct Measured {
    latencies: Vec<f64>,
    refused: Vec<String>,
    log: Vec<(f64, String)>,
    took: f64,
    /// CPU seconds spent from the first post to the last read, by this process and by
    /// redis-server (None where either could not say).
    cpu: Option<(f64, f64)>,
}

/// `pace`: the time between two posts of one student. Measures the gate's path, then
/// the direct one beside it.
pub fn bench(students: u32, events: u32, pace: Duration) -> anyhow::Result<ExitCode> {
    let names: Vec<String> = (1..=students).map(|i| format!("s{i:03}")).collect();
    let wanted = (students * events) as usize;
    out!(
        "{students} students x {events} events (one every {} ms each), on loopback:",
        pace.as_millis()
    );
    let mut lost = None;
    let mut gated_log = Vec::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (path, label) in
        [(Path::Gate, "through the class gate"), (Path::Direct, "straight to Redis (--redis)")]
    {
        let Measured { mut latencies, refused, log, took, cpu } =
            measure(&names, events, pace, path)?;
        latencies.sort_by(f64::total_cmp);
        let at = |q: f64| {
            latencies
                .get(((latencies.len() as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or(f64::NAN)
        };
        out!(
            "  {label}: received {} of {wanted} events in {took:.2} s ({:.0} events/s); post -> instructor's read: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            latencies.len(),
            latencies.len() as f64 / took,
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0)
        );
        // The whole room is this process: the instructor's roll, the gate, every desk;
        // Redis is a process of its own. Both share this machine's cores: where their
        // sum nears all of them, what is measured is a machine that is full.
        if let (Some((room, redis)), Some(usage)) = (cpu, crate::platform::usage()) {
            out!(
                "    CPU while posting and reading, of one core ({cores} here): this process (the room, every desk, the roll) {:.0} %, redis-server {:.0} %; peak RSS {:.1} MiB",
                room / took * 100.0,
                redis / took * 100.0,
                usage.peak_rss_kib as f64 / 1024.0,
            );
        }
        if latencies.len() != wanted || !refused.is_empty() {
            lost.get_or_insert((label, wanted - latencies.len(), refused));
        }
        if matches!(path, Path::Gate) {
            gated_log = log;
        }
    }
    let frame = frame_ms(&names, &gated_log);
    out!("  a frame of the run with {students} lanes, 160x48: median {frame:.3} ms");
    if let Some((label, missing, refused)) = lost {
        bail!("{label}: {missing} events lost, {} refused: {:?}", refused.len(), refused.first());
    }
    out!("  no event lost, none refused, every student's numbers 1..{events} in order");
    Ok(ExitCode::SUCCESS)
}

/// Post `events` from each of `names` along `path` and read them as the instructor.
fn measure(names: &[String], events: u32, pace: Duration, path: Path) -> anyhow::Result<Measured> {
    let students = names.len() as u32;
    let (_server, admin, upstream) = private_redis(names.len())?;
    let runtime = crate::runtime::build(false)?;
    let names = names.to_vec();
    // The instructor's reads run as a task on the runtime's threads, as a class's do
    // (each student's part of the run is a worker task, `class::host`). On the main
    // thread (`block_on`) every doorbell had to wake it from another thread: at 1,000
    // students the p99 was about twice as long, straight to Redis as well.
    let room = async move {
        let names = &names[..];
        let id = crate::class::new_room_id()?;
        let keys = crate::class::RoomKeys::new(&id);
        let (room, _gate) = match path {
            Path::Gate => {
                let gate = crate::class::gate::open("127.0.0.1", &upstream, &keys, names).await?;
                let students_url = format!("redis://127.0.0.1:{}", gate.addr.port());
                (Room::open_behind(&admin, &students_url, &id, names).await?, Some(gate))
            }
            Path::Direct => (Room::open_behind(&admin, &admin, &id, names).await?, None),
        };
        let mut roll = Roll::connect(&admin, room.keys.clone(), names).await?;
        let mut desks = Vec::new();
        for seat in room.seats() {
            desks.push(Desk::join(seat.join_url()).await?);
        }
        let mut redis = crate::class::connect(&admin).await?;
        let cpu_before = cpu_now(&mut redis).await;
        let started = Instant::now();
        for (i, mut desk) in desks.into_iter().enumerate() {
            tokio::spawn(async move {
                // Spread the students over one pace, as a class's clocks would be.
                tokio::time::sleep(pace * i as u32 / students).await;
                for _ in 0..events {
                    let kind = EventKind::Command {
                        worker: desk.name.as_str().into(),
                        command: "bench".into(),
                        reply: monotonic_ns().to_string(),
                        latency_ms: 0.0,
                        program: None,
                    };
                    if desk.post(&kind).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(pace).await;
                }
            });
        }
        let wanted = (students * events) as usize;
        let (mut latencies, mut refused, mut log) = (Vec::new(), Vec::new(), Vec::new());
        let deadline = Instant::now() + pace * events + PATIENCE;
        while latencies.len() < wanted && Instant::now() < deadline {
            for arrival in roll.read(Duration::from_millis(100)).await? {
                match arrival {
                    Arrival::Event { student, kind: EventKind::Command { reply, .. }, .. } => {
                        let sent: u64 = reply.parse().unwrap_or(0);
                        latencies.push(monotonic_ns().saturating_sub(sent) as f64 / 1e6);
                        let t_ms = started.elapsed().as_secs_f64() * 1000.0;
                        log.push((t_ms, student));
                    }
                    other => refused.push(format!("{other:?}")),
                }
            }
        }
        let took = started.elapsed().as_secs_f64();
        let cpu = match (cpu_before, cpu_now(&mut redis).await) {
            (Some(before), Some(after)) => Some((after.0 - before.0, after.1 - before.1)),
            _ => None,
        };
        room.close().await?;
        anyhow::Ok(Measured { latencies, refused, log, took, cpu })
    };
    let measured = runtime.block_on(runtime.spawn(room)).unwrap_or_else(|e| Err(e.into()));
    runtime.shutdown_background();
    measured
}

/// The CPU seconds this process and the Redis of `con` have used so far.
async fn cpu_now(con: &mut redis::aio::MultiplexedConnection) -> Option<(f64, f64)> {
    let mut cmd = redis::cmd("INFO");
    let info = cmd.arg("cpu").query_async::<String>(con);
    let info = tokio::time::timeout(Duration::from_secs(5), info).await.ok()?.ok()?;
    let field = |name: &str| -> Option<f64> {
        info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
    };
    let redis = field("used_cpu_user")? + field("used_cpu_sys")?;
    Some((crate::platform::usage()?.cpu_s, redis))
}

/// The median time to draw the run at 160x48: a lane per student, each with its
/// events (as work steps) in the order the instructor received them.
fn frame_ms(names: &[String], received: &[(f64, String)]) -> f64 {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let Some(Ok(base)) = builtin("playground") else { return f64::NAN };
    let workers = names.iter().map(|n| WorkerSpec {
        name: n.clone(),
        start_ms: 0,
        steps: vec![Step::Work { ms: 50 }],
        clock_rate: 1.0,
        program: None,
    });
    let scenario = Scenario { workers: workers.collect(), ..base };
    let events: Vec<Event> = received
        .iter()
        .enumerate()
        .map(|(seq, (t_ms, name))| Event {
            seq: seq as u64 + 1,
            t_ms: *t_ms,
            kind: EventKind::Worker {
                worker: name.as_str().into(),
                what: WorkerEvent::Working { ms: 50 },
            },
            happened_ms: None,
        })
        .collect();
    let end = events.last().map_or(0.0, |e| e.t_ms);
    let mut app = App::new(scenario, false, 1.0, false, "class".into(), Theme::DEFAULT);
    app.update(Msg::RunStarting);
    app.update(Msg::Logged(events));
    app.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
    let Ok(mut terminal) = Terminal::new(TestBackend::new(160, 48));
    let mut times = Vec::new();
    for _ in 0..30 {
        let start = Instant::now();
        let _ = terminal.draw(|f| crate::tui::render::draw(f, &app));
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
