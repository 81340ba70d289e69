//! The commands inspector shows what a lock's client really sent, in its own
//! protocol: the etcd lesson, the Kubernetes-style Lease and ZooKeeper's recipe, on the
//! simulator and on private servers, show etcd's gateway requests and ZooKeeper's
//! calls, never the Redis commands (`EVALSHA ... acquire.lua`, `GET lock`) a lock on
//! Redis would have sent. The storage's own commands (these lessons write to a Redis
//! list: `RPUSH`, `fenced_write.lua`) are the storage's, and allowed.

use fencelab::engine::log::{Event, EventKind};
use fencelab::lesson;

use crate::support;

/// The lessons, and how each one's acquire starts in its own protocol.
const LESSONS: [(&str, &str); 3] = [
    ("etcd-lease", "POST /v3/kv/txn if MOD=0 put A:"),
    ("kubernetes-lease", "POST /v3/kv/txn if MOD=0 put {holderIdentity A:"),
    ("zookeeper", "create -e -s /fencelab/"),
];

/// Every worker's command that is not a storage write (the run's storage is a Redis
/// list in these lessons: `wire::write`'s `RPUSH` or fenced / idempotent script).
fn lock_commands(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Command { command, .. } => Some(command.clone()),
            _ => None,
        })
        .filter(|c| !c.starts_with("RPUSH ") && !c.contains("_write.lua"))
        .collect()
}

fn assert_own_protocol(lesson: &str, acquire: &str, backend: &str, events: &[Event]) {
    let commands = lock_commands(events);
    let redis = ["EVALSHA", "GET fencelab", "SET ", "PEXPIRE", ".lua"];
    let foreign: Vec<&String> =
        commands.iter().filter(|c| redis.iter().any(|r| c.contains(r))).collect();
    assert!(foreign.is_empty(), "{lesson} on {backend} shows Redis's commands: {foreign:#?}");
    assert!(
        commands.iter().any(|c| c.starts_with(acquire)),
        "{lesson} on {backend}: no acquire in its own protocol ({acquire}...) in {commands:#?}"
    );
}

fn scenario(name: &str) -> fencelab::scenario::Scenario {
    lesson::find(name).unwrap().unwrap().scenario
}

#[test]
fn the_simulator_shows_each_lock_in_its_own_protocol() {
    for (name, acquire) in LESSONS {
        let s = scenario(name);
        for fencing in [false, true] {
            assert_own_protocol(name, acquire, "the simulator", &support::sim_run(&s, fencing));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_servers_show_each_lock_in_its_own_protocol() {
    for (name, acquire) in LESSONS {
        let s = scenario(name);
        let deployment = support::deployment_for(&s, false);
        let events = support::run_events(&deployment, &s, s.fencing).await;
        assert_own_protocol(name, acquire, "private servers", &events);
        tokio::task::spawn_blocking(move || drop(deployment)).await.unwrap();
    }
}
