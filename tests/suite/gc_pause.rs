//! The article's experiment on a private real Redis: the stale write lands without
//! fencing and is rejected with it.

use crate::support;

use fencelab::backend::redis::RedisBackend;
use fencelab::check::{ViolationKind, check};
use fencelab::scenario::builtin;

fn kinds(events: &[fencelab::engine::log::Event]) -> Vec<ViolationKind> {
    let mut k: Vec<ViolationKind> = check(events).iter().map(|v| v.kind()).collect();
    k.dedup();
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fencing_the_paused_holders_stale_write_lands_last() {
    let server = support::redis();
    let backend = support::on_redis(RedisBackend::open(&server.url(), "test").unwrap());
    let scenario = builtin("gc-pause").unwrap().unwrap();
    let events = support::run_events(&backend, &scenario, false).await;
    assert_eq!(support::storage(&events), ["B:2", "A:1"]);
    let out = support::outcomes(&events);
    assert_eq!(out["A"][1], "acquired token 1");
    assert_eq!(out["B"][1], "acquired token 2");
    assert!(
        out["A"].contains(&"wrote token Some(1) accepted=true holder=None".to_string()),
        "{:?}",
        out["A"]
    );
    assert!(kinds(&events).contains(&ViolationKind::StaleWrite));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fencing_the_storage_rejects_the_stale_token() {
    let server = support::redis();
    let backend = support::on_redis(RedisBackend::open(&server.url(), "test").unwrap());
    let scenario = builtin("gc-pause").unwrap().unwrap();
    let events = support::run_events(&backend, &scenario, true).await;
    assert_eq!(support::storage(&events), ["B:2"]);
    assert!(
        support::outcomes(&events)["A"]
            .contains(&"wrote token Some(1) accepted=false holder=None".to_string())
    );
    assert_eq!(kinds(&events), [ViolationKind::OverlappingBelief]);
}

#[test]
fn the_headless_command_prints_the_articles_transcript() {
    let server = support::redis();
    let out = support::bin().args(["run", "gc-pause", "--redis", &server.url()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let expected_in_order = [
        "=== fencing tokens: off ===",
        "+ 0.0s A: got lock, fencing token 1",
        "+ 0.0s A: paused (GC / slow disk / VM steal) for 3.0s",
        "+ 2.0s B: got lock, fencing token 2",
        "+ 2.0s B: write ACCEPTED; still own lock? yes",
        "+ 3.0s A: write ACCEPTED; still own lock? no",
        "storage writes: ['B(token 2)', 'A(token 1)']",
        "checker: 1 stale write accepted (A token 1 after B token 2)",
        "=== fencing tokens: on ===",
        "+ 3.0s A: write REJECTED (stale token 1); still own lock? no",
        "storage writes: ['B(token 2)']",
        "checker: no stale write accepted",
    ];
    let mut rest = text.as_str();
    for line in expected_in_order {
        let at = rest
            .find(line)
            .unwrap_or_else(|| panic!("missing (or out of order) {line:?} in:\n{text}"));
        rest = &rest[at + line.len()..];
    }
}

#[test]
fn check_passes_on_real_redis_and_json_streams_the_log() {
    let server = support::redis();
    let out = support::bin()
        .args(["run", "gc-pause", "--fencing", "on", "--check", "--json", "--redis", &server.url()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert_eq!(lines.first().unwrap()["type"], "run_started");
    assert_eq!(lines.first().unwrap()["version"], 1);
    assert_eq!(lines.last().unwrap()["type"], "run_ended");
    assert!(String::from_utf8_lossy(&out.stderr).contains("check passed (fencing tokens: on)"));
}
