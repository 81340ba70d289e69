//! Saved logs at scale: reading, exporting and opening a replay of logs of 80k, 160k,
//! 320k and 1.5M events (a gc-pause-like pattern repeated, `tests/support::long_log`),
//! reported as median and p90 over repeated runs. Export should grow linearly with the
//! events (a picture has a fixed number of columns), and a replay's first frame should
//! cost the loading plus one cut of the model at its start.
//!
//! Run with `cargo bench --bench logs` (release build; a few minutes).

// A measurement that cannot run stops with a panic, as a test does.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;

use fencelab::output::load::parse_runs;
use fencelab::output::picture::{Palette, picture};
use fencelab::tui::ReplayOptions;
use fencelab::tui::app::Msg;
use fencelab::tui::keys::Action;
use fencelab::tui::render::draw;
use fencelab::view_model::RunModel;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Median and p90 of the samples, in ms.
fn summary(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!("median {:7.1} ms  p90 {:7.1} ms  (n={})", at(0.5), at(0.9), ms.len())
}

fn main() {
    for (events, repeats) in [(80_000, 7), (160_000, 7), (320_000, 5), (1_500_000, 3)] {
        let cycles = events / 5;
        let text = support::long_log(cycles, cycles as f64 * 50.0);
        let (mut load, mut export, mut first_frame) = (Vec::new(), Vec::new(), Vec::new());
        let mut late_frame = Vec::new();
        for _ in 0..repeats {
            let started = Instant::now();
            let run = parse_runs(&text, "long.jsonl").unwrap().remove(0);
            load.push(started.elapsed().as_secs_f64() * 1000.0);

            let started = Instant::now();
            let svg = picture(&[RunModel::from_log(run.clone())], Palette::Light).svg;
            export.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(svg.len() < 200_000, "{} bytes", svg.len());

            let options = ReplayOptions {
                file: "long.jsonl".into(),
                speed: 1.0,
                presenter: false,
                record: None,
            };
            let started = Instant::now();
            let app = fencelab::tui::replay_app(&run, &options).unwrap();
            let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
            terminal.draw(|f| draw(f, &app)).unwrap();
            first_frame.push(started.elapsed().as_secs_f64() * 1000.0);

            // Playing near the end: one frame's worth of time, then a draw.
            let mut app = app;
            let end = run.last().unwrap().t_ms;
            app.update(Msg::Seek(end - 5000.0));
            app.update(Action::SimPlayPause);
            for _ in 0..10 {
                let started = Instant::now();
                app.update(Msg::Clock { reached_ms: 0.0, real_ms: 33.0 });
                terminal.draw(|f| draw(f, &app)).unwrap();
                late_frame.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        println!("{events:>9} events  read            {}", summary(load));
        println!("{events:>9} events  model + SVG     {}", summary(export));
        println!("{events:>9} events  replay 1st frame {}", summary(first_frame));
        println!("{events:>9} events  frame near end  {}", summary(late_frame));
    }
}
