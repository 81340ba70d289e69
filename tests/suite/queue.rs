//! A queue with competing consumers (`lock = "stream"`, lesson 27): a consumer that
//! leaves its job idle past the lease loses it to another consumer's `XAUTOCLAIM`.
//! On a private redis-server the server's own pending list (`XPENDING`, read on a
//! connection of the test's) shows the job moving; on the simulator the same calls
//! give the same answers, to the millisecond, on the virtual clock.

use crate::support;

use std::time::Duration;

use fencelab::backend::lock::stream::StreamQueue;
use fencelab::backend::redis::RedisBackend;
use fencelab::backend::sim::SimBackend;
use fencelab::backend::{AcquireReply, Keys, LockClient, LockService};
use fencelab::engine::log::{EventKind, WorkerEvent};
use fencelab::scenario::{AcquireMode, ReleaseMode, parse_scenario};
use redis::streams::StreamPendingCountReply;

const LEASE_MS: u64 = 300;

/// The server's pending list, as `XPENDING jobs workers - + 10` answers it:
/// (message id, consumer, deliveries).
fn pending(con: &mut redis::Connection, keys: &Keys) -> Vec<(String, String, usize)> {
    let reply: StreamPendingCountReply = redis::cmd("XPENDING")
        .arg(&keys.jobs)
        .arg("workers")
        .arg("-")
        .arg("+")
        .arg(10)
        .query(con)
        .unwrap();
    reply.ids.into_iter().map(|p| (p.id, p.consumer, p.times_delivered)).collect()
}

async fn acquire(client: &mut Box<dyn LockClient>, value: &str) -> AcquireReply {
    client.acquire(value, LEASE_MS, AcquireMode::Script, None).await.unwrap()
}

#[tokio::test]
async fn on_redis_xautoclaim_moves_an_idle_job_to_the_claimer_and_the_first_consumers_xack_then_finds_nothing()
 {
    let server = support::redis();
    let mut con = support::sync_con(&server);
    let queue = StreamQueue::new(RedisBackend::open(&server.url(), "test").unwrap());
    let keys = Keys::for_run("q1");
    let (mut a, mut b) = (queue.connect(&keys).await.unwrap(), queue.connect(&keys).await.unwrap());
    let ttl: i64 = redis::cmd("PTTL").arg(&keys.jobs).query(&mut con).unwrap();
    assert!(ttl > 3_000_000, "the stream expires by itself if the run cannot delete it: {ttl}");
    let length: usize = redis::cmd("XLEN").arg(&keys.jobs).query(&mut con).unwrap();
    assert_eq!(length, 1, "the second client found the group and added no job");

    assert_eq!(acquire(&mut a, "A:1").await, AcquireReply::Granted { token: 1 });
    assert_eq!(pending(&mut con, &keys), [("1-0".to_string(), "A:1".to_string(), 1)]);
    // Nothing new, and A's job is not idle long enough: B is told how long to wait.
    let AcquireReply::Busy { pttl_ms: Some(left) } = acquire(&mut b, "B:1").await else {
        panic!("B must wait for A's job")
    };
    assert!(left <= LEASE_MS && left > LEASE_MS / 2, "{left} ms left of {LEASE_MS}");
    assert_eq!(pending(&mut con, &keys)[0].1, "A:1", "a refused claim moves nothing");

    tokio::time::sleep(Duration::from_millis(left + 20)).await;
    assert_eq!(acquire(&mut b, "B:1").await, AcquireReply::Granted { token: 1 });
    assert_eq!(
        pending(&mut con, &keys),
        [("1-0".to_string(), "B:1".to_string(), 2)],
        "the server's pending list: job 1 is B's now, delivered twice"
    );
    assert_eq!(b.holder().await.unwrap().as_deref(), Some("B:1"));
    assert_eq!(a.holder().await.unwrap().as_deref(), Some("B:1"), "A can ask, if it asks");

    assert!(b.release("B:1", ReleaseMode::CompareAndDelete).await.unwrap(), "B's XACK: 1");
    assert!(!a.release("A:1", ReleaseMode::CompareAndDelete).await.unwrap(), "A's XACK: 0");
    assert!(pending(&mut con, &keys).is_empty());

    a.cleanup().await.unwrap();
    let left: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(left, 0, "the stream, its group and its consumers are gone with the run");
}

#[tokio::test(start_paused = true)]
async fn on_the_simulator_a_claim_waits_exactly_the_lease_minus_the_idle_time() {
    let sim = SimBackend::default();
    let queue = StreamQueue::new(sim.clone());
    let keys = Keys::for_run("q2");
    let (mut a, mut b) = (queue.connect(&keys).await.unwrap(), queue.connect(&keys).await.unwrap());
    assert_eq!(acquire(&mut a, "A:1").await, AcquireReply::Granted { token: 1 });
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(acquire(&mut b, "B:1").await, AcquireReply::Busy { pttl_ms: Some(200) });
    tokio::time::advance(Duration::from_millis(199)).await;
    assert_eq!(acquire(&mut b, "B:1").await, AcquireReply::Busy { pttl_ms: Some(1) });
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(acquire(&mut b, "B:1").await, AcquireReply::Granted { token: 1 });
    assert_eq!(a.holder().await.unwrap().as_deref(), Some("B:1"));
    assert!(b.release("B:1", ReleaseMode::CompareAndDelete).await.unwrap());
    assert!(!a.release("A:1", ReleaseMode::CompareAndDelete).await.unwrap());
    // An empty queue: nothing new, nothing pending, no lease to wait for.
    assert_eq!(acquire(&mut b, "B:2").await, AcquireReply::Busy { pttl_ms: None });
    a.cleanup().await.unwrap();
    assert_eq!(sim.key_count(), 0);
}

#[test]
fn the_lessons_inspector_shows_the_claim_and_both_acknowledgements() {
    let lesson = fencelab::scenario::builtin("queue").unwrap().unwrap();
    let run = &lesson.planned_runs(&[false])[0];
    let events = support::sim_run(&run.scenario, run.fencing);
    let commands: Vec<(String, String, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Command { worker, command, reply, .. } => {
                Some((worker.to_string(), command.clone(), reply.clone()))
            }
            _ => None,
        })
        .collect();
    let claim = commands
        .iter()
        .find(|(w, c, r)| w == "B" && c.starts_with("XAUTOCLAIM") && r.contains("1-0"))
        .expect("B's XAUTOCLAIM took message 1-0");
    assert!(claim.1.contains(" workers B:") && claim.1.ends_with(" 2000 0-0 COUNT 1"), "{claim:?}");
    let acks: Vec<(&str, &str)> = commands
        .iter()
        .filter(|(_, c, _)| c.starts_with("XACK"))
        .map(|(w, _, r)| (w.as_str(), r.as_str()))
        .collect();
    assert_eq!(acks, [("B", "1"), ("A", "0")]);
    let did = |who: &str| {
        events.iter().any(|e| {
            matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Wrote { value, accepted: true, .. } }
                if worker == who && value == "receipt for 1-0")
        })
    };
    assert!(did("A") && did("B"), "both did job 1, with the message id in the key");
}

fn refusal(extra: &str, steps: &str) -> String {
    let src = format!(
        "name = \"q\"\ntitle = \"q\"\nttl_ms = 1000\n{extra}\n[[workers]]\nname = \"A\"\nsteps = [{steps}]\n"
    );
    parse_scenario(&src, "q.toml").unwrap_err().to_string()
}

#[test]
fn what_a_queue_cannot_do_is_refused_at_its_line() {
    let write = "{ do = \"acquire\" }, { do = \"write\", value = \"r {id}\" }";
    assert!(parse_scenario(&format!("name = \"q\"\ntitle = \"q\"\nttl_ms = 1000\nlock = \"stream\"\n[[workers]]\nname = \"A\"\nsteps = [{write}]\n"), "q.toml").is_ok());
    let err = refusal("", write);
    assert!(err.starts_with("q.toml:7:") && err.contains("needs lock = \"stream\""), "{err}");
    let err = refusal("lock = \"stream\"\nfencing = true", "{ do = \"acquire\" }");
    assert!(err.starts_with("q.toml:5:1:") && err.contains("idempotency = true"), "{err}");
    let err = refusal("lock = \"stream\"", "{ do = \"acquire\" }, { do = \"renew\" }");
    assert!(err.starts_with("q.toml:7:") && err.contains("not by renewing"), "{err}");
    let err = refusal(
        "lock = \"stream\"\n[[variants]]\nname = \"v\"\nttl_ms = 0",
        "{ do = \"acquire\" }",
    );
    assert!(err.contains("ttl_ms = 0: a queue's consumers claim"), "{err}");
    let err = refusal("lock = \"stream\"\nreplica = true", "{ do = \"acquire\" }");
    assert!(
        err.starts_with("q.toml:4:1:")
            && err.contains("a queue on a Redis Stream runs on one Redis server"),
        "{err}"
    );
}

#[test]
fn fencing_switched_on_for_a_queue_changes_nothing_job_numbers_are_no_order() {
    let lesson = fencelab::scenario::builtin("queue").unwrap().unwrap();
    let run = &lesson.planned_runs(&[false])[0];
    let fenced = support::sim_run(&run.scenario, true);
    assert_eq!(support::storage(&fenced), ["B:1", "A:1"]);
    let writes: Vec<&str> = fenced
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Command { command, .. } if command.contains(":storage ") => {
                Some(command.split_whitespace().next().unwrap_or(""))
            }
            _ => None,
        })
        .collect();
    assert_eq!(writes, ["RPUSH", "RPUSH"], "plain appends, no fenced_write.lua");
    let kinds: Vec<String> =
        fencelab::check::check(&fenced).iter().map(|v| v.kind().to_string()).collect();
    assert_eq!(kinds, ["overlapping-belief", "done-twice", "write-by-non-holder"]);
}
