//! How waiters wake (`wait = "ttl" | "poll" | "notify"`, lesson 23): Q releases early
//! at 0.25 s of a 1 s lease while R waits. Exact times on the simulator's virtual
//! clock; on a real redis-server, orderings with generous margins.

use crate::support;

use std::time::Duration;

use fencelab::engine::log::{Event, EventKind, WorkerEvent};
use fencelab::scenario::{PlannedRun, Scenario, WaitStrategy, parse_scenario};

fn lesson() -> Scenario {
    fencelab::scenario::builtin("waiters").unwrap().unwrap()
}

/// The lesson's run that waits with `wait`.
fn run_with(wait: WaitStrategy) -> PlannedRun {
    let lesson = lesson();
    let runs = lesson.planned_runs(&[false]);
    runs.into_iter().find(|r| r.scenario.wait == wait).unwrap()
}

/// When `who` first did `what`, in scenario ms.
fn first(events: &[Event], who: &str, what: fn(&WorkerEvent) -> bool) -> f64 {
    events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::Worker { worker, what: w } if worker == who && what(w)))
        .unwrap_or_else(|| panic!("{who} never did it"))
        .t_ms
}

fn acquired(w: &WorkerEvent) -> bool {
    matches!(w, WorkerEvent::Acquired { .. })
}

fn released(w: &WorkerEvent) -> bool {
    matches!(w, WorkerEvent::Released { .. })
}

/// The commands `who` sent from its first refusal up to its grant: what waiting cost
/// Redis.
fn commands_while_waiting(events: &[Event], who: &str) -> usize {
    let until = first(events, who, acquired);
    events
        .iter()
        .filter(|e| e.t_ms <= until)
        .filter(|e| matches!(&e.kind, EventKind::Command { worker, .. } if worker == who))
        .count()
}

#[test]
fn on_the_simulator_a_ttl_waiter_sleeps_out_the_lease_a_poller_takes_over_at_its_next_try_and_a_subscriber_at_once()
 {
    let ttl = support::sim_run(&run_with(WaitStrategy::Ttl).scenario, false);
    let poll = support::sim_run(&run_with(WaitStrategy::Poll).scenario, false);
    let notify = support::sim_run(&run_with(WaitStrategy::Notify).scenario, false);
    for events in [&ttl, &poll, &notify] {
        assert_eq!(first(events, "Q", released), 250.0);
    }
    // R asked at 100 ms with 900 ms of Q's lease left: it sleeps one ms past it.
    assert_eq!(first(&ttl, "R", acquired), 1001.0);
    // Tries at 100, 200, 300 ms: the first after the release wins.
    assert_eq!(first(&poll, "R", acquired), 300.0);
    // The release's message wakes R at the same virtual instant.
    assert_eq!(first(&notify, "R", acquired), 250.0);
    // What waiting cost: ttl the acquire and a GET; poll both at every try (3 tries);
    // notify the acquire, SUBSCRIBE, the acquire again and a GET, then the grant.
    assert_eq!(commands_while_waiting(&ttl, "R"), 3);
    assert_eq!(commands_while_waiting(&poll, "R"), 5);
    assert_eq!(commands_while_waiting(&notify, "R"), 5);
}

#[test]
fn on_the_simulator_a_subscriber_still_wakes_at_the_lease_end_when_the_holder_never_releases() {
    let mut s = run_with(WaitStrategy::Notify).scenario;
    // Q dies holding the lock (an expiry publishes nothing); S, who would race R at
    // the lease's end, stays away.
    s.workers.truncate(2);
    s.workers[0].steps.truncate(2);
    s.workers[0].steps.push(fencelab::scenario::Step::Crash);
    let events = support::sim_run(&s, false);
    assert_eq!(first(&events, "R", acquired), 1001.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_notify_wakes_a_waiter_within_milliseconds_of_the_release_and_ttl_does_not() {
    let server = support::redis();
    let redis = fencelab::backend::redis::RedisBackend::open(&server.url(), "test").unwrap();
    let deployment = support::on_redis(redis);
    let handover = |events: &[Event]| first(events, "R", acquired) - first(events, "Q", released);
    let within = Duration::from_secs(20);
    let notify = run_with(WaitStrategy::Notify).scenario;
    let events = tokio::time::timeout(within, support::run_events(&deployment, &notify, false))
        .await
        .expect("the run ends");
    // Typically 1 ms or less; the bound leaves room for a loaded CI machine, and is
    // still far below the poll interval (100 ms) and the lease left (750 ms).
    assert!(
        handover(&events) < 50.0,
        "notify: R took over {} ms after Q's release",
        handover(&events)
    );
    let ttl = run_with(WaitStrategy::Ttl).scenario;
    let events = tokio::time::timeout(within, support::run_events(&deployment, &ttl, false))
        .await
        .expect("the run ends");
    assert!(
        first(&events, "R", acquired) >= 1000.0,
        "ttl: R took over at {} ms, before Q's lease ended",
        first(&events, "R", acquired)
    );
}

#[test]
fn a_waiting_strategy_that_cannot_work_is_refused_at_load_with_file_line_and_column() {
    let base = "name = \"w\"\ntitle = \"w\"\nttl_ms = 1000\n";
    let workers = "\n[[workers]]\nname = \"A\"\nsteps = [{ do = \"acquire\" }]\n";
    for (settings, at, says) in [
        ("wait = \"poll\"\n", "w.toml:4:1:", "needs poll_ms"),
        ("wait = \"poll\"\npoll_ms = 0\n", "w.toml:5:1:", "poll_ms = 0"),
        ("wait = \"ttl\"\npoll_ms = 100\n", "w.toml:5:1:", "poll_ms is for wait = \"poll\""),
        ("wait = \"notify\"\nredlock_nodes = 3\n", "w.toml:4:1:", "needs the one-Redis lock"),
        ("wait = \"notify\"\nrelease = \"del\"\n", "w.toml:4:1:", "drop release = \"del\""),
        ("wait = \"often\"\n", "w.toml:4:8:", "unknown variant `often`"),
    ] {
        let err = parse_scenario(&format!("{base}{settings}{workers}"), "w.toml").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(at) && text.contains(says), "{settings:?}: {text}");
    }
}
