//! The room's security on a shared Redis (a password-protected private redis-server on
//! loopback, as a classroom's would be): a student runs only the scripts the room
//! loaded, reads no other student's answers, and a room ends whatever happens to its
//! instructor (killed, interrupted on a stopped Redis, closing on a busy one).

use crate::support;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use fencelab::backend::redis::RedisBackend;
use fencelab::backend::server::{PrivateRedis, REDIS, free_port};
use fencelab::backend::{Keys, LockService, Storage, StoredWrite, WriteCheck, scripts};
use fencelab::class::desk::Desk;
use fencelab::class::lease::LEASE_VAR;
use fencelab::class::room::Room;
use fencelab::class::{ClassError, RoomKeys};
use fencelab::engine::log::{EventKind, WorkerEvent};
use fencelab::scenario::{AcquireMode, FenceCompare, ReleaseMode, RenewMode};

const PASSWORD: &str = "instructor-secret";

/// A redis-server on 127.0.0.1 with a password; returns it and the admin URL.
fn server(extra: &[&str]) -> (PrivateRedis, String) {
    let port = free_port(REDIS).unwrap().to_string();
    let mut args = vec!["--port", port.as_str(), "--bind", "127.0.0.1", "--requirepass", PASSWORD];
    args.extend(extra);
    let server = PrivateRedis::start_with(&args).expect("a real redis-server");
    (server, format!("redis://:{PASSWORD}@127.0.0.1:{port}"))
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn con(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

fn refused(con: &mut redis::Connection, cmd: &redis::Cmd) -> bool {
    cmd.query::<redis::Value>(con).is_err_and(|e| e.to_string().to_uppercase().contains("NOPERM"))
}

fn cmd(words: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(words[0]);
    for w in &words[1..] {
        cmd.arg(*w);
    }
    cmd
}

/// A script that keeps Redis busy for `ms` (then ends by itself).
fn busy(ms: u64) -> String {
    format!(
        "local t = redis.call('TIME') local t0 = t[1] * 1000 + t[2] / 1000 \
         while true do t = redis.call('TIME') \
         if t[1] * 1000 + t[2] / 1000 - t0 > {ms} then return 1 end end"
    )
}

/// Poll `done` every 20 ms until it holds, for at most `within`.
fn eventually(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    support::wait_for_within(what, within, || done().then_some(()));
}

/// Every key of the room `id` (admin's view).
fn room_keys(admin: &mut redis::Connection, id: &str) -> Vec<String> {
    redis::cmd("KEYS").arg(format!("fencelab:{{{id}}}:*")).query(admin).unwrap()
}

fn users(admin: &mut redis::Connection) -> Vec<String> {
    redis::cmd("ACL").arg("USERS").query(admin).unwrap()
}

#[tokio::test]
async fn a_students_busy_script_can_be_neither_loaded_nor_run() {
    let (_server, admin) = server(&[]);
    let room = Room::open(&admin, "r1", &names(&["alice"])).await.unwrap();
    let mut a = con(&admin);
    // A busy script someone else loaded: its SHA is no key to it.
    let foreign: String = cmd(&["SCRIPT", "LOAD", &busy(5000)]).query(&mut a).unwrap();
    let mut c = con(room.seats()[0].join_url());
    let acquire = scripts::ACQUIRE.get_hash();
    let function =
        "#!lua name=busy\nredis.register_function('spin', function() while true do end end)";
    let attempts: [&[&str]; 15] = [
        &["EVAL", &busy(5000), "0"],
        &["EVAL_RO", &busy(5000), "0"],
        &["EVALSHA", &foreign, "0"],
        &["EVALSHA_RO", &foreign, "0"],
        &["EVALSHA_RO", acquire, "0"],
        &["SCRIPT", "LOAD", &busy(5000)],
        &["SCRIPT", "FLUSH"],
        &["SCRIPT", "KILL"],
        &["SCRIPT", "EXISTS", acquire],
        &["FUNCTION", "LOAD", function],
        &["FUNCTION", "RESTORE", "x"],
        &["FCALL", "spin", "0"],
        &["FCALL_RO", "spin", "0"],
        &["MULTI"],
        &["CLIENT", "PAUSE", "5000"],
    ];
    for words in attempts {
        assert!(refused(&mut c, &cmd(words)), "{words:?} was not refused");
    }
    // The room's own scripts run, bounded: a few steps over the room's keys.
    let keys = RoomKeys::new("r1");
    let run = cmd(&["EVALSHA", acquire, "2", &keys.run.lock, &keys.run.fence, "alice:1", "1000"]);
    let granted: (i64, i64) = run.query(&mut c).unwrap();
    assert_eq!(granted, (1, 1));
    // ...over the room's keys only, from Lua too (Redis runs it as the student).
    let outside = cmd(&["EVALSHA", acquire, "2", "someone:else", "their:counter", "x", "1000"]);
    assert!(outside.query::<redis::Value>(&mut c).is_err());
    // Nothing was left running: the server answers at once, never BUSY.
    let pong: String = cmd(&["PING"]).query(&mut a).unwrap();
    assert_eq!(pong, "PONG");
    room.close().await.unwrap();
}

#[tokio::test]
async fn a_students_worker_does_everything_a_worker_does_with_the_rooms_scripts() {
    let (_server, admin) = server(&[]);
    let room = Room::open(&admin, "r1", &names(&["alice", "bob"])).await.unwrap();
    // The keys a joining student's worker gets (expiring with the room's lease).
    let desk = Desk::join(room.seats()[0].join_url()).await.unwrap();
    let keys: Keys = desk.keys.run.clone();
    assert_eq!(keys.expire_ms, 60_000);
    let as_student = |i: usize| RedisBackend::open(room.seats()[i].join_url(), "Redis").unwrap();
    let (alice, bob) = (as_student(0), as_student(1));
    let mut lock = LockService::connect(&alice, &keys).await.unwrap();
    let mut other = LockService::connect(&bob, &keys).await.unwrap();
    let mut storage = Storage::connect(&alice, &keys).await.unwrap();
    for mode in [AcquireMode::Script, AcquireMode::TwoStep] {
        let reply = lock.acquire("a", 5000, mode, None).await.unwrap();
        assert!(format!("{reply:?}").contains("Granted"), "{reply:?}");
        assert!(lock.renew("a", 5000, RenewMode::IfOwner).await.unwrap());
        assert!(lock.renew("a", 5000, RenewMode::Set).await.unwrap());
        assert!(lock.release("a", ReleaseMode::CompareAndDelete).await.unwrap());
    }
    lock.acquire("a", 5000, AcquireMode::Script, None).await.unwrap();
    assert!(lock.release("a", ReleaseMode::Del).await.unwrap());
    // wait = "notify": bob listens on the room's channel, alice's release wakes him.
    lock.acquire("a", 5000, AcquireMode::Script, None).await.unwrap();
    assert!(other.listen_for_releases().await.unwrap());
    assert!(lock.release_announcing("a", ReleaseMode::CompareAndDelete).await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), other.next_release()).await.unwrap().unwrap();
    let write = |token, value: &str| StoredWrite {
        worker: "alice".into(),
        token: Some(token),
        value: value.into(),
    };
    assert_eq!(storage.write(&write(1, "plain"), WriteCheck::None).await.unwrap(), Some(1));
    let fenced = WriteCheck::Fencing(FenceCompare::AllowEqual);
    assert_eq!(storage.write(&write(3, "fenced"), fenced).await.unwrap(), Some(2));
    assert_eq!(storage.write(&write(2, "stale"), fenced).await.unwrap(), None);
    let idempotent = WriteCheck::IdempotencyKey;
    assert_eq!(storage.write(&write(3, "pay"), idempotent).await.unwrap(), Some(3));
    assert_eq!(storage.write(&write(4, "pay"), idempotent).await.unwrap(), None);
    assert_eq!(storage.read_all().await.unwrap().len(), 3);
    drop((lock, other, storage, desk));
    room.close().await.unwrap();
}

#[tokio::test]
async fn answers_are_unreadable_to_other_students_before_the_reveal() {
    let (_server, admin) = server(&[]);
    let room = Room::open(&admin, "r1", &names(&["alice", "bob"])).await.unwrap();
    let mut desk = Desk::join(room.seats()[0].join_url()).await.unwrap();
    desk.answer(1, 2).await.unwrap();
    let mut bob = con(room.seats()[1].join_url());
    let alices = room.keys.answers("alice");
    for words in [
        &["XRANGE", alices.as_str(), "-", "+"][..],
        &["XREVRANGE", &alices, "+", "-"],
        &["XREAD", "STREAMS", &alices, "0"],
        &["GET", &alices],
    ] {
        assert!(refused(&mut bob, &cmd(words)), "{words:?} read alice's answers");
    }
    // Nor through one of the room's scripts: Redis runs it as bob.
    let release = scripts::RELEASE.get_hash();
    let through = cmd(&["EVALSHA", release, "1", &alices, "x"]);
    assert!(through.query::<redis::Value>(&mut bob).is_err());
    // Bob still reads the room (the controls, the events) and writes his own answers.
    let _: redis::Value =
        cmd(&["XRANGE", &room.keys.controls(), "-", "+"]).query(&mut bob).unwrap();
    let _: redis::Value =
        cmd(&["XRANGE", &room.keys.stream("alice"), "-", "+"]).query(&mut bob).unwrap();
    let mut answer = cmd(&["XADD", &room.keys.answers("bob"), "*", "question", "1"]);
    let _: String = answer.arg("sender").arg("bob").arg("choice").arg(1).query(&mut bob).unwrap();
    room.close().await.unwrap();
}

#[tokio::test]
async fn closing_works_after_redis_answered_busy() {
    let (_server, admin) = server(&["--busy-reply-threshold", "50"]);
    let room = Room::open(&admin, "r1", &names(&["alice"])).await.unwrap();
    let alice = room.seats()[0].join_url().to_string();
    let spinning = {
        let admin = admin.clone();
        std::thread::spawn(move || {
            let _: i64 = cmd(&["EVAL", &busy(1500), "0"]).query(&mut con(&admin)).unwrap();
        })
    };
    let mut probe = con(&admin);
    eventually("Redis answers BUSY", Duration::from_secs(10), || {
        cmd(&["PING"]).query::<String>(&mut probe).is_err_and(|e| e.to_string().contains("BUSY"))
    });
    room.close().await.unwrap();
    spinning.join().unwrap();
    let mut a = con(&admin);
    assert_eq!(room_keys(&mut a, "r1"), Vec::<String>::new());
    assert_eq!(users(&mut a), ["default"]);
    assert!(redis::Client::open(alice.as_str()).unwrap().get_connection().is_err());
}

#[tokio::test]
async fn a_room_whose_instructor_vanished_expires_and_the_next_class_removes_its_users() {
    let (_server, admin) = server(&[]);
    let lease = Duration::from_millis(1500);
    let mut a = con(&admin);
    // What is not the room's stays: a key, and a user someone named like a seat.
    let _: () = cmd(&["SET", "not:the:room", "kept"]).query(&mut a).unwrap();
    let _: () = cmd(&["ACL", "SETUSER", "fencelab-ops-admin", "on", ">pw", "~*", "+@all"])
        .query(&mut a)
        .unwrap();
    let room = Room::open_leased(&admin, "gone", &names(&["alice"]), lease).await.unwrap();
    let alice = room.seats()[0].join_url().to_string();
    let acquired =
        EventKind::Worker { worker: "alice".into(), what: WorkerEvent::Acquired { token: 1 } };
    Desk::join(&alice).await.unwrap().post(&acquired).await.unwrap();
    // As a panic would: the room dropped, never closed.
    drop(room);
    eventually("the room's keys expire", Duration::from_secs(20), || {
        room_keys(&mut a, "gone").is_empty()
    });
    // A student who joins now is told the room is gone.
    let late = Desk::join(&alice).await;
    assert!(matches!(late, Err(ClassError::RoomGone(_))), "{:?}", late.err());
    // The next class on this Redis removes the vanished room's users.
    let next = Room::open_leased(&admin, "next", &names(&["bob"]), lease).await.unwrap();
    let left = users(&mut a);
    assert!(!left.contains(&"fencelab-gone-alice".to_string()), "{left:?}");
    assert!(left.contains(&"fencelab-next-bob".to_string()), "{left:?}");
    assert!(left.contains(&"fencelab-ops-admin".to_string()), "{left:?}");
    let kept: Option<String> = cmd(&["GET", "not:the:room"]).query(&mut a).unwrap();
    assert_eq!(kept.as_deref(), Some("kept"));
    next.close().await.unwrap();
}

/// Multi-threaded: the room's keeper runs while the test waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_script_flush_a_student_is_told_and_the_instructor_loads_them_again() {
    let (_server, admin) = server(&[]);
    let lease = Duration::from_millis(1200);
    let room = Room::open_leased(&admin, "r1", &names(&["alice"]), lease).await.unwrap();
    let desk = Desk::join(room.seats()[0].join_url()).await.unwrap();
    let alice = RedisBackend::open(room.seats()[0].join_url(), "Redis").unwrap();
    let mut lock = LockService::connect(&alice, &desk.keys.run).await.unwrap();
    let mut a = con(&admin);
    let _: () = cmd(&["SCRIPT", "FLUSH"]).query(&mut a).unwrap();
    let err = lock.acquire("a", 1000, AcquireMode::Script, None).await.unwrap_err().to_string();
    assert!(err.starts_with("Redis no longer has fencelab's Lua scripts (NOSCRIPT"), "{err}");
    let acquire = scripts::ACQUIRE.get_hash();
    eventually("the instructor loads the scripts again", Duration::from_secs(20), || {
        cmd(&["SCRIPT", "EXISTS", acquire]).query::<Vec<i64>>(&mut a).unwrap() == [1]
    });
    let reply = lock.acquire("a", 1000, AcquireMode::Script, None).await.unwrap();
    assert!(format!("{reply:?}").contains("Granted"), "{reply:?}");
    drop((lock, desk));
    room.close().await.unwrap();
}

/// `fencelab class playground --students alice --headless --redis URL` with a room
/// lease of `lease_ms`, alice joined and the run under way; returns the instructor,
/// alice's `join`, the room id and alice's join URL, and the instructor's output
/// from then on (read as it comes).
fn class_under_way(admin: &str, lease_ms: u64) -> (Child, Child, String, String, Output) {
    class_with(admin, lease_ms, true, "playground")
}

/// The same, with or without the room's janitor (`class::janitor`): without, what a
/// room whose instructor vanished leaves to its lease and to the sweeps.
fn class_with(
    admin: &str,
    lease_ms: u64,
    janitor: bool,
    scenario: &str,
) -> (Child, Child, String, String, Output) {
    use std::io::{BufRead, BufReader};
    let mut instructor = support::bin()
        .args(["class", scenario, "--students", "alice", "--headless", "--redis", admin])
        .env(LEASE_VAR, lease_ms.to_string())
        .env("FENCELAB_ROOM_JANITOR", if janitor { "on" } else { "off" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(instructor.stdout.take().unwrap());
    let mut seen = String::new();
    let mut read_until = |needle: &str, seen: &mut String| loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the class ended early:\n{seen}");
        seen.push_str(&line);
        if line.contains(needle) {
            return line;
        }
    };
    let opened = read_until("class room ", &mut seen);
    let id = opened.split_whitespace().nth(2).unwrap().to_string();
    let line = read_until("fencelab join '", &mut seen);
    let url = line.trim().trim_start_matches("fencelab join '").trim_end_matches('\'').to_string();
    let join = support::bin()
        .args(["join", &url, "--headless"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    read_until("alice: got lock", &mut seen);
    // The rest of the output is drained as it comes: a full pipe must not block it.
    let rest = Output::default();
    let kept = rest.clone();
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { return };
            kept.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    (instructor, join, id, url, rest)
}

/// SIGKILL the instructor; within `within` its room's users and keys are gone, and
/// the student's URL logs in no more.
fn kill_and_see_the_room_go(
    instructor: &mut Child,
    a: &mut redis::Connection,
    id: &str,
    student_url: &str,
    within: Duration,
) {
    instructor.kill().unwrap();
    instructor.wait().unwrap();
    eventually("the killed room's users are removed", within, || {
        !users(a).iter().any(|u| u.starts_with(&format!("fencelab-{id}-")))
    });
    eventually("the killed room's keys are gone", within, || room_keys(a, id).is_empty());
    assert!(redis::Client::open(student_url).unwrap().get_connection().is_err());
}

/// What a child printed so far.
type Output = std::sync::Arc<std::sync::Mutex<String>>;

#[test]
fn a_sigkilled_instructors_room_keys_expire_and_a_live_class_removes_its_users() {
    let (_server, admin) = server(&[]);
    let mut a = con(&admin);
    // Another class live on the same Redis (its keeper sweeps each renewal).
    let rt = tokio::runtime::Runtime::new().unwrap();
    let lease = Duration::from_millis(2000);
    let other = rt.block_on(Room::open_leased(&admin, "other", &names(&["bob"]), lease)).unwrap();
    let (mut instructor, mut join, id, alice, _) = class_with(&admin, 2000, false, "playground");
    assert!(!room_keys(&mut a, &id).is_empty());
    kill_and_see_the_room_go(&mut instructor, &mut a, &id, &alice, Duration::from_secs(30));
    // The live class keeps its own.
    assert!(users(&mut a).contains(&"fencelab-other-bob".to_string()));
    let _ = join.kill();
    join.wait().unwrap();
    rt.block_on(other.close()).unwrap();
}

#[test]
fn an_instructor_interrupted_on_a_stopped_redis_exits_130_at_once_and_says_what_is_left() {
    let (server, admin) = server(&[]);
    let (mut instructor, mut join, id, _, _) = class_under_way(&admin, 60_000);
    let redis_pid = server.pid() as i32;
    // SAFETY: signals to processes this test started.
    unsafe { libc::kill(redis_pid, libc::SIGSTOP) };
    let asked = Instant::now();
    unsafe { libc::kill(instructor.id() as i32, libc::SIGTERM) };
    let status = instructor.wait().unwrap();
    let took = asked.elapsed();
    unsafe { libc::kill(redis_pid, libc::SIGCONT) };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut instructor.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    // Well under a second on an idle machine; the bound is generous for a loaded one.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    eprintln!("SIGTERM to exit on a stopped Redis: {took:?}");
    assert!(err.contains(&format!("room {id} is left")), "{err}");
    assert!(err.contains("its keys expire in about a minute"), "{err}");
    let _ = join.kill();
    join.wait().unwrap();
}

#[tokio::test]
async fn a_room_refused_acl_setuser_leaves_no_key_behind() {
    let (_server, admin) = server(&[]);
    let mut a = con(&admin);
    let _: () = cmd(&["ACL", "SETUSER", "managed", "on", ">pw", "~*", "+@all", "-acl"])
        .query(&mut a)
        .unwrap();
    let url = admin.replace(&format!(":{PASSWORD}@"), "managed:pw@");
    let refused = Room::open(&url, "r1", &names(&["alice"])).await;
    assert!(matches!(refused, Err(ClassError::AclRefused { .. })), "{:?}", refused.err());
    assert_eq!(room_keys(&mut a, "r1"), Vec::<String>::new());
}

/// A process's resident memory at its peak, in KiB (`VmHWM`, Linux's /proc).
/// None once it has exited.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The highest "(N refused so far)" the instructor has printed.
fn refused_so_far(output: &Output) -> u64 {
    let text = output.lock().unwrap();
    let counts = text.lines().filter_map(|l| {
        let (_, tail) = l.rsplit_once(" (")?;
        tail.strip_suffix(" refused so far)")?.parse::<u64>().ok()
    });
    counts.max().unwrap_or(0)
}

/// A student appends what its ACL lets it (`XADD` to its own stream, of any size): a
/// 10 MB entry and a flood of 100,000. The instructor reads them bounded
/// (`room_read.lua`: the big one as its size), so its peak memory grows by far less
/// than the entry, and every one of them is refused and counted on its screen.
#[test]
fn a_10_mb_entry_and_a_flood_are_refused_and_counted_with_the_instructors_memory_bounded() {
    const FLOOD: u64 = 100_000;
    let (_server, admin) = server(&[]);
    // Alice's run goes on past the flood however slowly a loaded machine posts it: the
    // roll stops reading her stream when her run ends, and the flood's entries come
    // after her `finished` in it.
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.toml");
    let playground = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scenarios/playground.toml");
    let playground = std::fs::read_to_string(playground).unwrap();
    std::fs::write(&long, playground.replace("ms = 2500", "ms = 600000")).unwrap();
    let (mut instructor, mut join, id, alice, output) =
        class_with(&admin, 60_000, true, &long.display().to_string());
    let stream = RoomKeys::new(&id).stream("alice");
    let mut c = con(&alice);
    let before = peak_rss_kib(instructor.id()).expect("the instructor runs");
    let mut peak = before;
    let huge = "x".repeat(10 << 20);
    let mut post = cmd(&["XADD", &stream, "*", "seq", "1000000", "sender", "alice", "event"]);
    let _: String = post.arg(&huge).query(&mut c).unwrap();
    drop(huge);
    let event = r#"{"type":"worker","worker":"alice","what":{"kind":"finished"}}"#;
    for chunk in 0..FLOOD / 1000 {
        let mut flood = redis::pipe();
        for i in 0..1000 {
            let seq = (chunk * 1000 + i + 2_000_000).to_string();
            flood.cmd("XADD").arg(&stream).arg("*").arg("seq").arg(seq);
            flood.arg("sender").arg("alice").arg("event").arg(event).ignore();
        }
        let () = flood.query(&mut c).unwrap();
    }
    // A flood's refusals are printed a line a second: the last line, a second after
    // the one before, counts them all, though nothing more comes.
    eventually("every entry refused and counted", Duration::from_secs(180), || {
        peak = peak_rss_kib(instructor.id()).unwrap_or(peak);
        refused_so_far(&output) > FLOOD
    });
    let grew_kib = peak - before;
    eprintln!(
        "instructor peak RSS {before} KiB before, grew {grew_kib} KiB reading a 10 MB entry and {FLOOD} more"
    );
    let text = output.lock().unwrap().clone();
    assert!(text.contains("is 10485"), "the big entry is not named by its size:\n{text}");
    // The entry alone is 10,240 KiB: read whole, it would be in memory at least once.
    assert!(grew_kib < 6 * 1024, "the instructor's peak memory grew {grew_kib} KiB");
    let _ = instructor.kill();
    instructor.wait().unwrap();
    let _ = join.kill();
    join.wait().unwrap();
}

/// A SIGKILLed instructor with a 2 s room lease and no other class on its Redis: the
/// room's keys expire with the lease by themselves. Its student is still a user (Redis
/// cannot expire one) but finds the room gone: `join` says so, the desk's post makes
/// nothing (`NOMKSTREAM`), every read of the room finds nothing, nothing outside the
/// room is reachable. The next fencelab with admin rights there (`doctor --redis`)
/// removes the user, and no room key remains.
#[test]
fn a_sigkilled_instructors_student_finds_nothing_after_the_lease_and_doctor_removes_the_user() {
    let (_server, admin) = server(&[]);
    let mut a = con(&admin);
    let _: () = cmd(&["SET", "not:the:room", "kept"]).query(&mut a).unwrap();
    let (mut instructor, mut join, id, alice, _) = class_with(&admin, 2000, false, "playground");
    instructor.kill().unwrap();
    instructor.wait().unwrap();
    let _ = join.kill();
    join.wait().unwrap();
    eventually("the room's keys expire with its lease", Duration::from_secs(30), || {
        room_keys(&mut a, &id).is_empty()
    });
    let user = format!("fencelab-{id}-alice");
    assert!(users(&mut a).contains(&user), "the user went before doctor: nothing to test");

    let rejoin = support::bin().args(["join", &alice, "--headless"]).output().unwrap();
    let said = String::from_utf8_lossy(&rejoin.stderr);
    assert_eq!(rejoin.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("room {id} is closed")), "{said}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let desk = rt.block_on(Desk::join(&alice));
    assert!(matches!(desk, Err(ClassError::RoomGone(_))), "{:?}", desk.err());

    let keys = RoomKeys::new(&id);
    let mut c = con(&alice);
    let stream = keys.stream("alice");
    let posted: Option<String> =
        cmd(&["XADD", &stream, "NOMKSTREAM", "*", "seq", "1"]).query(&mut c).unwrap();
    assert_eq!(posted, None);
    let empty: Vec<redis::Value> =
        cmd(&["XRANGE", &keys.controls(), "-", "+"]).query(&mut c).unwrap();
    assert!(empty.is_empty());
    let read: Option<redis::Value> =
        cmd(&["XREAD", "STREAMS", &keys.room(), &stream, "0", "0"]).query(&mut c).unwrap();
    assert_eq!(read, None);
    let lock: Option<String> = cmd(&["GET", &keys.run.lock]).query(&mut c).unwrap();
    assert_eq!(lock, None);
    let storage: Vec<String> =
        cmd(&["LRANGE", &keys.run.storage, "0", "-1"]).query(&mut c).unwrap();
    assert!(storage.is_empty());
    for words in [
        &["GET", "not:the:room"][..],
        &["EVAL", "return 1", "0"],
        &["KEYS", "*"],
        &["FLUSHALL"],
        &["ACL", "DELUSER", "default"],
        &["CONFIG", "SET", "maxmemory", "1"],
    ] {
        assert!(refused(&mut c, &cmd(words)), "{words:?} was not refused");
    }
    assert!(room_keys(&mut a, &id).is_empty());

    let doctor = support::bin().args(["doctor", "--redis", &admin]).output().unwrap();
    let out = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.status.success(), "{out}{}", String::from_utf8_lossy(&doctor.stderr));
    assert!(out.contains("removed 1 student user(s) of class rooms"), "{out}");
    // What a class on this Redis leaves open, said plainly (N6).
    assert!(
        out.contains("As a class's Redis: on a Redis you name, students connect to it directly"),
        "{out}"
    );
    assert!(!out.contains(PASSWORD), "{out}");
    assert_eq!(users(&mut a), ["default"]);
    assert!(redis::Client::open(alice.as_str()).unwrap().get_connection().is_err());
    assert!(room_keys(&mut a, &id).is_empty());
    let kept: Option<String> = cmd(&["GET", "not:the:room"]).query(&mut a).unwrap();
    assert_eq!(kept.as_deref(), Some("kept"));
}

/// An answer of a megabyte is read as its size (`room_read.lua`), refused and named;
/// the student's valid answer still counts.
#[tokio::test]
async fn a_huge_answer_is_refused_by_its_size_and_the_valid_one_counts() {
    use fencelab::class::quiz::Quizmaster;
    let (_server, admin) = server(&[]);
    let room = Room::open(&admin, "r1", &names(&["alice"])).await.unwrap();
    let mut desk = Desk::join(room.seats()[0].join_url()).await.unwrap();
    desk.answer(1, 2).await.unwrap();
    let mut c = con(room.seats()[0].join_url());
    let huge = "3".repeat(1 << 20);
    let answers = room.keys.answers("alice");
    let mut post = cmd(&["XADD", &answers, "*", "question", "1", "sender", "alice", "choice"]);
    let id: String = post.arg(&huge).query(&mut c).unwrap();
    let tally = Quizmaster::of(&room, &names(&["alice"])).tally(1, 3).await.unwrap();
    assert_eq!(tally.counts, [0, 1, 0], "{tally:?}");
    let said = format!("answer {id} of alice is 1048602 bytes: not read");
    assert!(tally.refused.contains(&said), "{tally:?}");
    room.close().await.unwrap();
}

/// The room's janitor: a SIGKILLed instructor's room (a minute's lease, no other class
/// on the Redis to sweep it) loses its users and keys within seconds, a foreign key
/// stays, and the janitor itself is gone too.
#[test]
fn a_sigkilled_instructors_janitor_removes_its_users_and_keys_within_seconds() {
    let (_server, admin) = server(&[]);
    let mut a = con(&admin);
    let _: () = cmd(&["SET", "not:the:room", "kept"]).query(&mut a).unwrap();
    let (mut instructor, mut join, id, alice, _) = class_under_way(&admin, 60_000);
    assert!(users(&mut a).contains(&format!("fencelab-{id}-alice")));
    let janitor = std::fs::read_to_string(format!("/proc/{}/task/{0}/children", instructor.id()))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.contains("room-janitor"))
        })
        .expect("the instructor runs a janitor");
    kill_and_see_the_room_go(&mut instructor, &mut a, &id, &alice, Duration::from_secs(10));
    let kept: Option<String> = cmd(&["GET", "not:the:room"]).query(&mut a).unwrap();
    assert_eq!(kept.as_deref(), Some("kept"));
    eventually("the janitor has left", Duration::from_secs(10), || {
        !std::path::Path::new(&format!("/proc/{janitor}")).exists()
            || std::fs::read_to_string(format!("/proc/{janitor}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    });
    let _ = join.kill();
    join.wait().unwrap();
}

/// N6: on the private class Redis, the instructor and its janitor both killed (here
/// the janitor never started): the server dies with the instructor, so the students'
/// users go with it and their join URLs reach nothing, with no class or `doctor` to
/// come after.
#[test]
fn a_private_class_redis_dies_with_its_killed_instructor_and_its_users_with_it() {
    use std::io::{BufRead, BufReader};
    let mut instructor = support::bin()
        .args(["class", "playground", "--students", "alice", "--headless"])
        .args(["--listen", "127.0.0.1", "--host", "127.0.0.1"])
        .env("FENCELAB_ROOM_JANITOR", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(instructor.stdout.take().unwrap());
    let url = loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the class ended early");
        if let Some(url) = line.trim().strip_prefix("fencelab join '") {
            break url.trim_end_matches('\'').to_string();
        }
    };
    assert!(redis::Client::open(url.as_str()).unwrap().get_connection().is_ok());
    // The class's own server: the redis-server the instructor started.
    let children = |parent: u32| -> Vec<u32> {
        let stats = std::fs::read_dir("/proc").unwrap().flatten();
        let stat = |e: std::fs::DirEntry| std::fs::read_to_string(e.path().join("stat")).ok();
        stats
            .filter_map(stat)
            .filter(|stat| stat.contains("(redis-server)"))
            .filter_map(|stat| {
                let after = &stat[stat.rfind(')')? + 2..];
                let ppid: u32 = after.split(' ').nth(1)?.parse().ok()?;
                (ppid == parent).then(|| stat.split(' ').next()?.parse().ok()).flatten()
            })
            .collect()
    };
    let server = children(instructor.id());
    assert_eq!(server.len(), 1, "the class's redis-server");
    instructor.kill().unwrap();
    instructor.wait().unwrap();
    eventually("the student's URL reaches nothing", Duration::from_secs(5), || {
        redis::Client::open(url.as_str()).unwrap().get_connection().is_err()
    });
    eventually("the private redis-server is gone", Duration::from_secs(5), || {
        !support::alive(server[0])
    });
}
