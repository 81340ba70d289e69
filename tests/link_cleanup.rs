//! A run with link faults on a real redis-server leaves nothing behind: every socket
//! the run opened (its clients, the proxies' listeners and connections) is closed when
//! the run ends. Its own test binary, so no other test opens sockets meanwhile.

// Tests may unwrap and panic: that is how they fail.
#![allow(clippy::unwrap_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use fencelab::backend::redis::RedisBackend;
use fencelab::engine::log::{EventKind, WorkerEvent};

/// Sockets this process has open.
fn open_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_run_fails_its_calls_at_once_and_leaves_no_socket_open() {
    let server = support::redis();
    let deployment = support::on_redis(RedisBackend::open(&server.url(), "test").unwrap());
    let scenario = fencelab::scenario::builtin("partitioned-holder").unwrap().unwrap();
    let before = open_sockets();

    let events = support::run_events(&deployment, &scenario, false).await;

    // A's renewals at 1.2 s and 1.8 s, during the partition, fail at once: no call
    // waits out its deadline on a cut link.
    let unanswered: Vec<f64> = events
        .iter()
        .filter(|e| {
            matches!(&e.kind, EventKind::Worker { what: WorkerEvent::Unanswered { .. }, .. })
        })
        .map(|e| e.t_ms)
        .collect();
    assert_eq!(unanswered.len(), 2, "{unanswered:?}");
    for (t, due) in unanswered.iter().zip([1200.0, 1800.0]) {
        assert!((due..due + 100.0).contains(t), "a renewal due at {due} ms failed at {t} ms");
    }
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::RunEnded { outcome: fencelab::engine::log::RunOutcome::Completed, .. })
    ));

    // Client connections close a moment after their last handle drops.
    let deadline = Instant::now() + Duration::from_secs(2);
    while open_sockets() > before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(open_sockets(), before, "sockets outlived the run");
}
