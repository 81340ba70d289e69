//! Saved logs as a hostile user might hand them over: times out of order or negative
//! are refused with the line; a log spanning 1e15 ms or holding many events exports
//! in bounded time and size.

use crate::support;

use fencelab::output::jsonl::to_line;
use fencelab::output::load::parse_runs;
use fencelab::scenario::builtin;

fn gc_pause_lines() -> Vec<String> {
    let scenario = builtin("gc-pause").unwrap().unwrap();
    support::sim_run(&scenario, false).iter().map(to_line).collect()
}

fn error_of(lines: &[String]) -> String {
    parse_runs(&lines.join("\n"), "run.jsonl").unwrap_err().to_string()
}

/// Line `i` of the log with its time replaced by `t_ms`.
fn with_time(lines: &[String], i: usize, t_ms: &str) -> Vec<String> {
    let mut event: serde_json::Value = serde_json::from_str(&lines[i]).unwrap();
    event["t_ms"] = serde_json::from_str(t_ms).unwrap();
    let mut lines = lines.to_vec();
    lines[i] = event.to_string();
    lines
}

#[test]
fn a_negative_time_is_refused_with_its_line() {
    let lines = gc_pause_lines();
    assert_eq!(
        error_of(&with_time(&lines, 3, "-5.0")),
        "run.jsonl:4: t_ms is -5: times in a log are milliseconds from the run's start, never negative"
    );
    // When a class student's event happened, which may be before it was logged.
    let mut event: serde_json::Value = serde_json::from_str(&lines[3]).unwrap();
    event["happened_ms"] = serde_json::json!(-2.5);
    let mut dated = lines.clone();
    dated[3] = event.to_string();
    assert_eq!(
        error_of(&dated),
        "run.jsonl:4: happened_ms is -2.5: times in a log are milliseconds from the run's start, never negative"
    );
}

#[test]
fn time_going_backwards_is_refused_with_both_lines() {
    let lines = gc_pause_lines();
    let last = lines.len() - 1;
    // The last event is at 3 s; put the one before it at 5 s.
    let err = error_of(&with_time(&lines, last - 1, "5000.0"));
    assert_eq!(
        err,
        format!(
            "run.jsonl:{}: t_ms 3000 goes back in time (line {} was at 5000): a log's events are in time order",
            last + 1,
            last
        )
    );
}

#[test]
fn each_run_of_a_file_starts_its_own_clock() {
    let mut lines = gc_pause_lines();
    lines.extend(gc_pause_lines());
    assert_eq!(parse_runs(&lines.join("\n"), "run.jsonl").unwrap().len(), 2);
}

/// Waits for `child`, at most `limit`, and returns whether it succeeded and its peak
/// resident memory in KB, read from its own /proc status (`VmHWM`, a high-water mark)
/// until it ends. Not getrusage's or wait4's `ru_maxrss`: a child spawned by vfork
/// counts the spawning process's peak too, and this process is the whole suite.
fn wait_with_peak_rss_kb(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> (bool, i64) {
    let deadline = std::time::Instant::now() + limit;
    let mut peak = 0;
    loop {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
        let hwm = status.ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<i64>().ok()
        });
        peak = peak.max(hwm.unwrap_or(0));
        if let Some(status) = child.try_wait().unwrap() {
            return (status.success(), peak);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("export of a 1e15 ms log still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_log_spanning_1e15_ms_with_many_events_exports_in_bounded_time_memory_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("long.jsonl");
    std::fs::write(&saved, support::long_log(20_000, 1e15)).unwrap();
    let svg = dir.path().join("long.svg");
    let mut child = support::bin()
        .arg("export")
        .arg(&saved)
        .arg("--svg")
        .arg(&svg)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Today's cost would grow with the span (a grid line per second): give it 60 s.
    let (ok, rss_kb) = wait_with_peak_rss_kb(&mut child, std::time::Duration::from_secs(60));
    assert!(ok);
    let size = std::fs::metadata(&svg).unwrap().len();
    assert!(size < 150_000, "the SVG is {size} bytes: more than a picture's columns need");
    let rss_mb = rss_kb / 1024;
    assert!(rss_mb < 300, "export peaked at {rss_mb} MB");
    let text = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&text).unwrap();
}

#[test]
fn a_long_log_is_judged_in_one_sweep_not_pair_by_pair() {
    let runs = parse_runs(&support::long_log(60_000, 60_000.0 * 50.0), "long.jsonl").unwrap();
    let started = std::time::Instant::now();
    let violations = fencelab::check::check(&runs[0]);
    let took = started.elapsed();
    assert!(violations.is_empty(), "{:?}", violations.first());
    // 60,000 beliefs: comparing every pair is 1.8e9 comparisons, minutes even on an idle
    // machine; one sweep takes well under a second, so 20 s only fails the quadratic.
    assert!(took < std::time::Duration::from_secs(20), "the checker took {took:?}");
}
