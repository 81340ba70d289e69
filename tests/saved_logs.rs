//! Saved logs as a hostile user might hand them over: times out of order or negative
//! are refused with the line; a log spanning 1e15 ms or holding many events exports
//! in bounded time and size.

mod support;

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
