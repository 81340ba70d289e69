//! A clock that jumps ahead on one server: the run's keys on that server (and on no
//! other, and nothing outside the run's prefix) reach their deadline sooner, on real
//! Redis servers; the simulator's nodes agree.

use crate::support;

use fencelab::backend::Keys;
use fencelab::backend::node::LockNode;
use fencelab::backend::redis::RedisBackend;
use fencelab::backend::sim::SimBackend;
use redis::Commands;

const LEASE_MS: u64 = 10_000;
const JUMP_MS: u64 = 4_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_jump_shortens_only_that_nodes_keys_on_real_redis() {
    let servers: Vec<_> = (0..3).map(|_| support::redis()).collect();
    let keys = Keys::for_run("jump");
    let mut nodes = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        let backend = RedisBackend::open(&server.url(), &format!("node {}", i + 1)).unwrap();
        let mut node = backend.connect(&keys).await.unwrap();
        assert!(node.set_nx("A:1", LEASE_MS).await.unwrap());
        nodes.push(node);
    }
    // On node 2, a key of someone else (and one of another run) with the same lease.
    let mut con = support::sync_con(&servers[1]);
    let _: () = con.pset_ex("theirs", "x", LEASE_MS).unwrap();
    let _: () = con.pset_ex("fencelab:other:lock", "x", LEASE_MS).unwrap();

    assert_eq!(nodes[1].jump_clock(JUMP_MS).await.unwrap(), 1, "one key of the run shortened");

    for (i, node) in nodes.iter_mut().enumerate() {
        let left = node.pttl().await.unwrap();
        let expected = if i == 1 { LEASE_MS - JUMP_MS } else { LEASE_MS };
        assert!(
            (expected - 1000..=expected).contains(&(left as u64)),
            "node {}: {left} ms left, expected about {expected}",
            i + 1
        );
    }
    for other in ["theirs", "fencelab:other:lock"] {
        let left: i64 = con.pttl(other).unwrap();
        assert!(left > (LEASE_MS - 1000) as i64, "{other} was touched: {left} ms left");
    }

    // A jump past the deadline expires the key at once.
    assert_eq!(nodes[0].jump_clock(LEASE_MS).await.unwrap(), 1);
    assert_eq!(nodes[0].pttl().await.unwrap(), -2, "the key is gone");
    assert!(nodes[0].set_nx("B:1", LEASE_MS).await.unwrap(), "and the node grants it again");
}

#[tokio::test(start_paused = true)]
async fn the_simulator_shortens_the_same_keys_by_the_same_amount() {
    let keys = Keys::for_run("jump");
    let sims: Vec<SimBackend> = (0..3).map(|_| SimBackend::default()).collect();
    let mut nodes: Vec<_> = sims.iter().map(|s| s.client(&keys)).collect();
    for node in &mut nodes {
        assert!(node.set_nx("A:1", LEASE_MS).await.unwrap());
    }
    let mut theirs = sims[1].client(&Keys::for_run("other"));
    assert!(theirs.set_nx("X:1", LEASE_MS).await.unwrap());

    assert_eq!(nodes[1].jump_clock(JUMP_MS).await.unwrap(), 1);
    let left: Vec<i64> = pttls(&mut nodes).await;
    assert_eq!(left, [10_000, 6_000, 10_000]);
    assert_eq!(theirs.pttl().await.unwrap(), 10_000, "another run's key is untouched");

    // Node 2's key now expires 4 s early: gone just after 6 s, the others still there.
    tokio::time::advance(std::time::Duration::from_millis(6_001)).await;
    assert_eq!(pttls(&mut nodes).await, [3_999, -2, 3_999]);

    assert_eq!(nodes[0].jump_clock(LEASE_MS).await.unwrap(), 1);
    assert_eq!(nodes[0].pttl().await.unwrap(), -2, "a jump past the deadline expires it");
}

async fn pttls(nodes: &mut [impl LockNode]) -> Vec<i64> {
    let mut left = Vec::new();
    for node in nodes {
        left.push(node.pttl().await.unwrap());
    }
    left
}

#[test]
fn a_fault_logged_before_sizes_existed_still_loads_and_a_jump_keeps_its_size() {
    use fencelab::engine::log::{Event, EventKind};
    use fencelab::scenario::FaultKind;
    let old: Event =
        serde_json::from_str(r#"{"seq":2,"t_ms":0.0,"type":"fault","node":4,"kind":"kill"}"#)
            .unwrap();
    assert_eq!(old.kind, EventKind::Fault { node: 4, kind: FaultKind::Kill, ms: None });
    let jump = Event {
        seq: 6,
        t_ms: 600.0,
        kind: EventKind::Fault { node: 3, kind: FaultKind::ClockJump, ms: Some(4000) },
        happened_ms: None,
    };
    let text = serde_json::to_string(&jump).unwrap();
    assert!(text.contains(r#""kind":"clock-jump","ms":4000"#), "{text}");
    assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), jump);
}
