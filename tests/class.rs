//! A class on a private redis-server on TCP loopback with a password, as a classroom
//! would run it: students' ACL users, their streams, the roll's checks, closing.

mod support;

use std::time::Duration;

use fencelab::backend::server::{PrivateRedis, REDIS, free_port};
use fencelab::class::desk::Desk;
use fencelab::class::roll::{Arrival, Roll};
use fencelab::class::room::Room;
use fencelab::class::{ClassError, Control, RoomKeys};
use fencelab::engine::log::{EventKind, WorkerEvent};

const PASSWORD: &str = "instructor-secret";

/// A redis-server on 127.0.0.1 with a password; returns it and the admin URL.
fn server() -> (PrivateRedis, String) {
    let port = free_port(REDIS).unwrap().to_string();
    let args = ["--port", port.as_str(), "--bind", "127.0.0.1", "--requirepass", PASSWORD];
    let server = PrivateRedis::start_with(&args).expect("a real redis-server");
    (server, format!("redis://:{PASSWORD}@127.0.0.1:{port}"))
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn event(worker: &str, token: u64) -> EventKind {
    EventKind::Worker { worker: worker.into(), what: WorkerEvent::Acquired { token } }
}

/// A plain connection as `url`'s user.
fn con(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

fn refused(con: &mut redis::Connection, cmd: &mut redis::Cmd) -> bool {
    cmd.query::<redis::Value>(con).is_err_and(|e| e.to_string().to_uppercase().contains("NOPERM"))
}

#[tokio::test]
async fn a_student_can_touch_only_its_room_and_run_only_a_workers_commands() {
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice", "bob"])).await.unwrap();
    let other = Room::open(&admin, "r2", &names(&["carol"])).await.unwrap();
    let alice = room.seats()[0].join_url().to_string();
    let mut c = con(&alice);
    let (mine, theirs) = (RoomKeys::new("r1"), RoomKeys::new("r2"));

    // What a worker does, in its own room: allowed.
    let set: Option<String> = redis::cmd("SET")
        .arg(&mine.run.lock)
        .arg("alice:1")
        .arg("NX")
        .arg("PX")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(set.as_deref(), Some("OK"));
    let _: i64 = redis::cmd("INCR").arg(&mine.run.fence).query(&mut c).unwrap();

    // Another room: neither read nor write.
    assert!(refused(&mut c, redis::cmd("GET").arg(&theirs.run.lock)));
    assert!(refused(&mut c, redis::cmd("SET").arg(&theirs.run.lock).arg("x")));
    assert!(refused(&mut c, redis::cmd("XRANGE").arg(theirs.stream("carol")).arg("-").arg("+")));
    // Keys outside any room.
    assert!(refused(&mut c, redis::cmd("GET").arg("someone:else")));
    assert!(refused(&mut c, redis::cmd("SET").arg("someone:else").arg("x")));
    // Admin commands.
    assert!(refused(&mut c, &mut redis::cmd("FLUSHALL")));
    assert!(refused(&mut c, redis::cmd("CONFIG").arg("GET").arg("requirepass")));
    assert!(refused(&mut c, redis::cmd("KEYS").arg("*")));
    assert!(refused(&mut c, redis::cmd("ACL").arg("LIST")));
    // Another student's stream: readable (the room sees everything), not writable.
    assert!(refused(&mut c, redis::cmd("XADD").arg(mine.stream("bob")).arg("*").arg("seq").arg(1)));
    let _: Vec<redis::Value> =
        redis::cmd("XRANGE").arg(mine.stream("bob")).arg("-").arg("+").query(&mut c).unwrap();
    // Nor the instructor's controls.
    assert!(refused(
        &mut c,
        redis::cmd("XADD").arg(mine.controls()).arg("*").arg("control").arg("{}")
    ));
    room.close().await.unwrap();
    other.close().await.unwrap();
}

#[tokio::test]
async fn a_forged_event_is_refused_and_shown() {
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice", "bob"])).await.unwrap();
    let mut roll =
        Roll::connect(&admin, room.keys.clone(), &names(&["alice", "bob"])).await.unwrap();
    let mut desk = Desk::join(room.seats()[0].join_url()).await.unwrap();
    desk.post(&event("alice", 1)).await.unwrap();
    // Alice posts in her own stream (all she can write) as Bob: by sender, then by the
    // event's worker.
    let mut c = con(room.seats()[0].join_url());
    let bobs = serde_json::to_string(&event("bob", 2)).unwrap();
    let _: String = redis::cmd("XADD")
        .arg(room.keys.stream("alice"))
        .arg("*")
        .arg("seq")
        .arg(2)
        .arg("sender")
        .arg("bob")
        .arg("event")
        .arg(&bobs)
        .query(&mut c)
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg(room.keys.stream("alice"))
        .arg("*")
        .arg("seq")
        .arg(2)
        .arg("sender")
        .arg("alice")
        .arg("event")
        .arg(&bobs)
        .query(&mut c)
        .unwrap();
    let arrived = roll.read(Duration::from_millis(100)).await.unwrap();
    assert_eq!(arrived.len(), 3, "{arrived:?}");
    assert_eq!(
        arrived[0],
        Arrival::Event { student: "alice".into(), seq: 1, kind: event("alice", 1) }
    );
    for forged in &arrived[1..] {
        let Arrival::Refused { student, why } = forged else { panic!("{forged:?} accepted") };
        assert_eq!(student, "alice");
        assert!(why.contains("forged") && why.contains("bob"), "{why}");
    }
    room.close().await.unwrap();
}

#[tokio::test]
async fn a_student_who_drops_and_rejoins_carries_on_without_duplicates_or_gaps() {
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice"])).await.unwrap();
    let url = room.seats()[0].join_url().to_string();
    let mut roll = Roll::connect(&admin, room.keys.clone(), &names(&["alice"])).await.unwrap();
    let mut desk = Desk::join(&url).await.unwrap();
    for token in 1..=3 {
        desk.post(&event("alice", token)).await.unwrap();
    }
    drop(desk);
    let first = roll.read(Duration::from_millis(100)).await.unwrap();
    let mut desk = Desk::join(&url).await.unwrap();
    assert_eq!(desk.seq(), 3, "numbering carries on after a rejoin");
    for token in 4..=5 {
        desk.post(&event("alice", token)).await.unwrap();
    }
    // The same event posted twice (a retry after a lost reply) counts once.
    let mut c = con(&url);
    let again = serde_json::to_string(&event("alice", 5)).unwrap();
    let post = |seq: u64, c: &mut redis::Connection| {
        let _: String = redis::cmd("XADD")
            .arg(room.keys.stream("alice"))
            .arg("*")
            .arg("seq")
            .arg(seq)
            .arg("sender")
            .arg("alice")
            .arg("event")
            .arg(&again)
            .query(c)
            .unwrap();
    };
    post(5, &mut c);
    let second = roll.read(Duration::from_millis(100)).await.unwrap();
    let seqs: Vec<u64> = first
        .iter()
        .chain(&second)
        .map(|a| match a {
            Arrival::Event { seq, .. } => *seq,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    // A gap is said, not hidden.
    post(8, &mut c);
    let gap = roll.read(Duration::from_millis(100)).await.unwrap();
    assert!(
        matches!(&gap[0], Arrival::Refused { why, .. } if why.contains("6 to 7 never arrived")),
        "{gap:?}"
    );
    room.close().await.unwrap();
}

#[tokio::test]
async fn controls_reach_the_student_once() {
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice"])).await.unwrap();
    let mut desk = Desk::join(room.seats()[0].join_url()).await.unwrap();
    let pause = Control::Pause { student: "alice".into() };
    room.controller().send(&pause).await.unwrap();
    room.controller().send(&Control::Fencing { on: true }).await.unwrap();
    let got = desk.controls(Duration::from_millis(200)).await.unwrap();
    assert_eq!(got, [pause, Control::Fencing { on: true }]);
    assert!(desk.controls(Duration::from_millis(50)).await.unwrap().is_empty());
    room.close().await.unwrap();
}

#[tokio::test]
async fn closing_the_room_deletes_its_keys_and_its_users() {
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice", "bob"])).await.unwrap();
    let alice = room.seats()[0].join_url().to_string();
    let mut desk = Desk::join(&alice).await.unwrap();
    desk.post(&event("alice", 1)).await.unwrap();
    let mut a = con(&admin);
    let _: () = redis::cmd("SET").arg("not:the:room").arg("kept").query(&mut a).unwrap();
    room.close().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut a).unwrap();
    assert_eq!(keys, ["not:the:room"]);
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut a).unwrap();
    assert_eq!(users, ["default"]);
    let gone = redis::Client::open(alice.as_str()).unwrap().get_connection();
    assert!(gone.is_err(), "alice's password no longer works");
}

#[tokio::test]
async fn a_redis_that_refuses_acl_setuser_is_named_as_such() {
    let (_server, admin) = server();
    let mut a = con(&admin);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("managed")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .arg("-acl")
        .query(&mut a)
        .unwrap();
    let url = admin.replace(&format!(":{PASSWORD}@"), "managed:pw@");
    let refused = Room::open(&url, "r1", &names(&["alice"])).await;
    let Err(e @ ClassError::AclRefused { .. }) = refused else {
        panic!("expected a refusal, got {:?}", refused.err())
    };
    assert!(e.to_string().contains("refused ACL SETUSER"), "{e}");
}
