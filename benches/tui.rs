//! TUI costs, reported as medians and ratios to the targets:
//! - render time per frame at 160x48 with 8 workers and 10,000 events (target < 2 ms);
//! - a class's long run: 30 lanes of one work step every 50 ms for up to ten minutes
//!   (360,000 events): a frame must not cost the whole run (it did, through a
//!   `skip` that walked every span per column);
//! - CPU used by the real binary while idle after a run, over 10 s (target < 1% of a core),
//!   measured in tmux from /proc; and, for contrast, while a run is live.
//!
//! Run with `cargo bench --bench tui` (needs tmux for the CPU part).

// A measurement that cannot run stops with a panic, as a test does.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::process::Command;
use std::time::{Duration, Instant};

use fencelab::backend::sim::SimBackend;
use fencelab::engine::log::Event;
use fencelab::engine::{RunOptions, run};
use fencelab::scenario::{Scenario, Step, WorkerSpec, builtin};
use fencelab::tui::app::{App, Msg};
use fencelab::tui::render::draw;
use fencelab::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio_util::sync::CancellationToken;

const EVENTS: usize = 10_000;

fn busy_scenario() -> Scenario {
    let mut scenario = builtin("playground").unwrap().unwrap();
    scenario.ttl_ms = 50;
    scenario.workers = (0..8)
        .map(|i| WorkerSpec {
            name: ((b'A' + i) as char).to_string(),
            start_ms: i as u64 * 3,
            steps: (0..400)
                .flat_map(|n| {
                    [
                        Step::Acquire { give_up_ms: None },
                        Step::Work { ms: 5 },
                        Step::Write { value: format!("{n}") },
                        Step::Release,
                    ]
                })
                .collect(),
            clock_rate: 1.0,
            program: None,
        })
        .collect();
    scenario
}

fn events() -> Vec<Event> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let scenario = busy_scenario();
    let log = rt.block_on(async {
        let options = RunOptions { seed: Some(1), ..RunOptions::new(true) };
        let sim = SimBackend::default();
        run(&sim, &sim, &scenario, options, &CancellationToken::new()).await.unwrap()
    });
    let mut events = log.snapshot();
    assert!(events.len() >= EVENTS, "only {} events", events.len());
    events.truncate(EVENTS);
    events
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn render_bench() {
    let events = events();
    let mut app = App::new(busy_scenario(), true, 1.0, true, "SIMULATOR".into(), Theme::DEFAULT);
    let end = events.last().unwrap().t_ms;
    app.update(Msg::RunStarting);
    app.update(Msg::Logged(events.clone()));
    app.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
    for (label, moment) in
        [("live view (now at the right edge)", None), ("inspecting a moment", Some(end / 2.0))]
    {
        if let Some(m) = moment {
            app.update(Msg::Seek(m));
        }
        let mut times = Vec::new();
        for _ in 0..300 {
            let start = Instant::now();
            terminal.draw(|f| draw(f, &app)).unwrap();
            times.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        let m = median(times);
        println!(
            "render 160x48, 8 workers, {EVENTS} events, {label}: median {m:.3} ms per frame ({:.0}% of the 2 ms target)",
            m / 2.0 * 100.0
        );
    }
    let start = Instant::now();
    let mut fresh = App::new(busy_scenario(), true, 1.0, true, "SIMULATOR".into(), Theme::DEFAULT);
    fresh.update(Msg::RunStarting);
    fresh.update(Msg::Logged(events.clone()));
    fresh.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
    println!(
        "ingesting {EVENTS} events into a fresh model: {:.2} ms",
        start.elapsed().as_secs_f64() * 1000.0
    );
    // A live frame: one new event arrives and the cursor moves with the clock.
    let (head, tail) = events.split_at(EVENTS - 300);
    let mut live = App::new(busy_scenario(), true, 1.0, true, "SIMULATOR".into(), Theme::DEFAULT);
    live.update(Msg::RunStarting);
    live.update(Msg::Logged(head.to_vec()));
    live.update(Msg::Clock { reached_ms: head.last().unwrap().t_ms, real_ms: 0.0 });
    let mut times = Vec::new();
    for e in tail {
        let start = Instant::now();
        live.update(Msg::Logged(vec![e.clone()]));
        live.update(Msg::Clock { reached_ms: e.t_ms, real_ms: 1.0 });
        terminal.draw(|f| draw(f, &live)).unwrap();
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "a live frame (one new event, the cursor moves, the frame drawn): median {:.3} ms",
        median(times)
    );
}

/// A class of 30 students, one work step each every 50 ms (what `bench class` posts),
/// drawn at 160x48 after 1, 3 and 10 minutes of it.
fn long_run_bench() {
    use fencelab::engine::log::{EventKind, WorkerEvent};
    let names: Vec<String> = (1..=30).map(|i| format!("s{i:03}")).collect();
    // A lane per student, as a class has (the events below are what is drawn).
    let scenario = fencelab::class::for_students(&builtin("playground").unwrap().unwrap(), &names);
    for minutes in [1u64, 3, 10] {
        let posts = minutes * 60 * 20;
        let mut events = Vec::new();
        for n in 0..posts {
            for (i, name) in names.iter().enumerate() {
                events.push(Event {
                    seq: events.len() as u64 + 1,
                    t_ms: n as f64 * 50.0 + i as f64,
                    kind: EventKind::Worker {
                        worker: name.as_str().into(),
                        what: WorkerEvent::Working { ms: 50 },
                    },
                    happened_ms: None,
                });
            }
        }
        let (count, end) = (events.len(), events.last().unwrap().t_ms);
        let mut app = App::new(scenario.clone(), false, 1.0, false, "class".into(), Theme::DEFAULT);
        app.update(Msg::RunStarting);
        app.update(Msg::Logged(events));
        app.update(Msg::Clock { reached_ms: end, real_ms: 0.0 });
        let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
        let mut times = Vec::new();
        for _ in 0..20 {
            let start = Instant::now();
            terminal.draw(|f| draw(f, &app)).unwrap();
            times.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "a class's run, 30 lanes, {minutes} min ({count} events), 160x48: median {:.3} ms per frame",
            median(times)
        );
    }
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

fn tmux(socket: &str, args: &[&str]) -> String {
    let out =
        Command::new("tmux").args(["-L", socket]).args(args).output().expect("tmux is installed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn cpu_bench() {
    let socket = format!("fencelab-bench-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_fencelab");
    tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-s",
            "b",
            "-x",
            "160",
            "-y",
            "48",
            bin,
            "play",
            "--sim",
            "--speed",
            "0.5",
        ],
    );
    let pid: u32 = tmux(&socket, &["display", "-p", "-t", "b", "#{pane_pid}"]).parse().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let measure = |secs: u64| {
        let before = cpu_ticks(pid);
        std::thread::sleep(Duration::from_secs(secs));
        (cpu_ticks(pid) - before) as f64 / ticks_per_second() / secs as f64 * 100.0
    };
    let live = measure(4);
    println!("CPU while a run is live (simulator, 0.5x, ~30 fps): {live:.1}% of a core");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !tmux(&socket, &["capture-pane", "-p", "-t", "b"]).contains("ENDED") {
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(200));
    }
    let idle = measure(10);
    println!(
        "CPU while idle after the run, over 10 s: {idle:.2}% of a core ({:.0}% of the 1% target)",
        idle * 100.0
    );
    tmux(&socket, &["kill-server"]);
}

fn main() {
    // `cargo test` also runs benches with --bench absent; only measure when asked.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    render_bench();
    long_run_bench();
    cpu_bench();
}
