//! `fencelab export` at scale: a saved log of 1M events (gc-pause's run, a stale
//! write each time, repeated as one run) read, modelled and drawn as SVG, and a log
//! whose worker has a 100,000-character name; reported as median, p90 and p99 over
//! repeated runs. Both were quadratic once (a label elided one character at a time);
//! the target is 1M events under 5 s.
//!
//! Run with `cargo bench --bench export` (release build). On the shared 2-core
//! machine, other builds running (load 14), December 2026: 1,001,702 events median
//! 3.7 s, p90 4.6 s, p99 4.7 s; the 100,000-character name median 40 ms, p99 51 ms.
//! Before the fix, 100k events took 165 s in a debug build and the long name over
//! a minute.

// A measurement that cannot run stops with a panic, as a test does.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;

use fencelab::output::load::load_runs;
use fencelab::output::picture::{Palette, picture};
use fencelab::view_model::RunModel;

/// Median, p90 and p99 of the samples, in ms.
fn summary(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!(
        "median {:8.1} ms  p90 {:8.1} ms  p99 {:8.1} ms  (n={})",
        at(0.5),
        at(0.9),
        at(0.99),
        ms.len()
    )
}

/// Read `text` from a file, model it and draw it, `repeats` times.
fn export(what: &str, text: &str, repeats: usize) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.jsonl");
    std::fs::write(&file, text).unwrap();
    let mut took = Vec::new();
    for _ in 0..repeats {
        let started = Instant::now();
        let run = load_runs(&file).unwrap().remove(0);
        let svg = picture(&[RunModel::from_log(run)], Palette::Light).svg;
        took.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(svg.len() < 400_000, "{} bytes", svg.len());
    }
    println!("{what:<40} {}", summary(took));
}

fn main() {
    let million = support::repeated_gc_pause(37_100);
    let events = million.lines().count();
    export(&format!("{events} events"), &million, 11);
    let name = "W".repeat(100_000);
    let long = support::repeated_gc_pause(10)
        .replace("\"worker\":\"A\"", &format!("\"worker\":\"{name}\""));
    export("a 100,000-character worker name", &long, 11);
}
