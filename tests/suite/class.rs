//! A class on a private redis-server on TCP loopback with a password, as a classroom
//! would run it: students' ACL users, their streams, the roll's checks, closing.

use crate::support;

use std::time::Duration;

use fencelab::backend::server::{PrivateRedis, REDIS, free_port};
use fencelab::class::desk::Desk;
use fencelab::class::quiz::Quizmaster;
use fencelab::class::roll::{Arrival, Roll};
use fencelab::class::room::Room;
use fencelab::class::{ClassError, Control, RoomKeys};
use fencelab::engine::log::{EventKind, WorkerEvent};
use fencelab::scenario::builtin;

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

/// An entry written straight into a stream, as a student's credentials allow.
fn raw_post(con: &mut redis::Connection, stream: &str, seq: u64, sender: &str, event: &str) {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(stream)
        .arg("MAXLEN")
        .arg("~")
        .arg(5000)
        .arg("*")
        .arg("seq")
        .arg(seq)
        .arg("sender")
        .arg(sender)
        .arg("event")
        .arg(event);
    let _: String = cmd.query(con).unwrap();
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

/// A screen that reads the room a while after the run's end was posted (a loaded
/// laptop, busy with the events before it) still gets that end: the room stays open a
/// moment after the mirror has posted it, and the instructor closes it only then.
/// (Closing at once had left a late joiner's screen without the run's end.)
/// A student who leaves before the run starts (a screen over SSH quit in the lobby,
/// in a process that goes on) is gone from the room at once: nothing of theirs, no
/// reader left behind, keeps a connection that says they are in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_student_who_leaves_before_the_start_is_no_longer_in_the_room() {
    use fencelab::class::attend::attend;
    use tokio_util::sync::CancellationToken;

    let (_server, admin) = server();
    let students = names(&["alice"]);
    let mut room = Room::open(&admin, "r9", &students).await.unwrap();
    let url = room.seats()[0].join_url().to_string();
    let program = std::path::PathBuf::from(env!("CARGO_BIN_EXE_fencelab"));
    let quit = CancellationToken::new();
    let leaving = quit.clone();
    let joined =
        tokio::spawn(async move { attend(&url, (&program, None), leaving, |_, _| {}).await });
    support::wait_for_async("alice in the room", async || {
        (room.present().await.unwrap() == students).then_some(())
    })
    .await;
    quit.cancel();
    let left = tokio::time::timeout(std::time::Duration::from_secs(2), joined).await;
    assert!(matches!(left, Ok(Ok(Ok(())))), "her attendance ends when she leaves: {left:?}");
    support::wait_for_async("alice gone from the room", async || {
        room.present().await.unwrap().is_empty().then_some(())
    })
    .await;
    room.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_screen_still_reads_the_runs_end_before_the_room_closes() {
    use fencelab::engine::log::{EventLog, RunClock, RunOutcome};
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice"])).await.unwrap();
    let log = std::sync::Arc::new(EventLog::new(RunClock::start_now(1.0)));
    log.append(event("alice", 1));
    log.append(EventKind::RunEnded { storage: Vec::new(), outcome: RunOutcome::Completed });
    let mut eyes = Desk::join(room.seats()[0].join_url()).await.unwrap();
    let slow = tokio::spawn(async move {
        // The screen's slowness is what the test is about: it reads 250 ms late,
        // whatever has happened meanwhile. (Waiting for the end to be posted instead
        // would read it at once, inside any grace however short.)
        tokio::time::sleep(Duration::from_millis(250)).await;
        eyes.room("0", Duration::from_millis(100)).await
    });
    fencelab::class::host::mirror(log, room.controller()).await;
    room.close().await.unwrap();
    let (_, seen) = slow.await.unwrap().expect("the room closed before the screen read it");
    let ended = seen.iter().any(|e| matches!(e.kind, EventKind::RunEnded { .. }));
    assert!(ended, "{seen:?}");
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
    let stream = room.keys.stream("alice");
    raw_post(&mut c, &stream, 2, "bob", &bobs);
    raw_post(&mut c, &stream, 2, "alice", &bobs);
    let arrived = roll.read(Duration::from_millis(100)).await.unwrap();
    assert_eq!(arrived.len(), 3, "{arrived:?}");
    assert_eq!(
        arrived[0],
        Arrival::Event { student: "alice".into(), seq: 1, kind: event("alice", 1), at_ms: None }
    );
    for forged in &arrived[1..] {
        let Arrival::Refused { student, why } = forged else { panic!("{forged:?} accepted") };
        assert_eq!(student, "alice");
        assert!(why.contains("forged") && why.contains("bob"), "{why}");
    }
    room.close().await.unwrap();
}

/// A student's fencelab rings the room's doorbell after each event, and the roll reads
/// that student's stream then; an event that rang no bell (written straight into a
/// stream) is still found by the roll's own look, and a ring naming nobody of the roll
/// is harmless.
#[tokio::test]
async fn the_roll_reads_on_the_doorbell_and_still_finds_an_event_that_rang_none() {
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice", "bob"])).await.unwrap();
    let mut roll =
        Roll::connect(&admin, room.keys.clone(), &names(&["alice", "bob"])).await.unwrap();
    assert!(roll.read(Duration::from_millis(20)).await.unwrap().is_empty());
    let mut desk = Desk::join(room.seats()[0].join_url()).await.unwrap();
    // Dated by the student's clock: the class dates it so, not by its arrival.
    desk.post_at(&event("alice", 1), Some(12.5)).await.unwrap();
    let rung = roll.read(Duration::from_secs(5)).await.unwrap();
    let dated = Arrival::Event {
        student: "alice".into(),
        seq: 1,
        kind: event("alice", 1),
        at_ms: Some(12.5),
    };
    assert_eq!(rung, [dated]);
    let mut bob = con(room.seats()[1].join_url());
    let json = serde_json::to_string(&event("bob", 1)).unwrap();
    raw_post(&mut bob, &room.keys.stream("bob"), 1, "bob", &json);
    let looked = roll.read(Duration::from_secs(5)).await.unwrap();
    let undated =
        Arrival::Event { student: "bob".into(), seq: 1, kind: event("bob", 1), at_ms: None };
    assert_eq!(looked, [undated]);
    let _: i64 =
        redis::cmd("PUBLISH").arg(room.keys.posted()).arg("mallory").query(&mut bob).unwrap();
    assert!(roll.read(Duration::from_millis(100)).await.unwrap().is_empty());
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
    let stream = room.keys.stream("alice");
    let post = |seq: u64, c: &mut redis::Connection| raw_post(c, &stream, seq, "alice", &again);
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
    // A jump is said, not hidden, and does not swallow the real events after it.
    post(56, &mut c);
    let jump = roll.read(Duration::from_millis(100)).await.unwrap();
    assert!(
        matches!(&jump[..], [Arrival::Refused { why, .. }] if why.contains("numbered 56 where 6 was next")),
        "{jump:?}"
    );
    desk.post(&event("alice", 6)).await.unwrap();
    let after = roll.read(Duration::from_millis(100)).await.unwrap();
    assert!(matches!(&after[..], [Arrival::Event { seq: 6, .. }]), "{after:?}");
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
async fn the_class_answers_a_question_and_the_tally_counts_the_latest_answer_of_each() {
    let (_server, admin) = server();
    let students = names(&["alice", "bob", "carol"]);
    let room = Room::open(&admin, "r1", &students).await.unwrap();
    let asked = &builtin("gc-pause").unwrap().unwrap().checkpoints[0];
    let mut quiz = Quizmaster::of(&room, &students);
    quiz.ask(1, asked).await.unwrap();
    let ask = Control::Ask {
        number: 1,
        at_ms: asked.at_ms,
        question: asked.question.clone(),
        choices: asked.choices.clone(),
    };
    let mut desks = Vec::new();
    for seat in room.seats() {
        desks.push(Desk::join(seat.join_url()).await.unwrap());
    }
    // Joined after the question: a student finds it in the room's history.
    assert!(desks[0].history().await.unwrap().contains(&ask));
    let before = quiz.tally(1, 3).await.unwrap();
    assert_eq!(before.counts, [0, 0, 0]);
    assert_eq!(before.missing, students);
    // Alice first answers wrong, then right: her latest answer counts.
    desks[0].answer(1, 2).await.unwrap();
    desks[0].answer(1, 1).await.unwrap();
    desks[1].answer(1, 1).await.unwrap();
    desks[2].answer(1, 2).await.unwrap();
    // An answer to another question is not this one's.
    desks[2].answer(2, 1).await.unwrap();
    let tally = quiz.tally(1, 3).await.unwrap();
    assert_eq!(tally.counts, [2, 1, 0]);
    assert!(tally.missing.is_empty(), "{tally:?}");
    assert!(tally.refused.is_empty(), "{tally:?}");
    assert_eq!(
        tally.chosen,
        [("alice".to_string(), 1), ("bob".to_string(), 1), ("carol".to_string(), 2)]
    );
    // The reveal reaches every student, after the question.
    quiz.reveal(1, asked).await.unwrap();
    let reveal =
        Control::Reveal { number: 1, answer: asked.answer, explain: asked.explain.clone() };
    assert!(desks[1].history().await.unwrap().ends_with(&[ask, reveal]));
    room.close().await.unwrap();
}

#[tokio::test]
async fn a_forged_answer_is_refused_and_named() {
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice", "bob"])).await.unwrap();
    let mut c = con(room.seats()[0].join_url());
    // Alice cannot write Bob's answers at all...
    let bobs = room.keys.answers("bob");
    let mut into_bobs = redis::cmd("XADD");
    into_bobs.arg(&bobs).arg("*").arg("question").arg(1).arg("sender").arg("bob");
    assert!(refused(&mut c, into_bobs.arg("choice").arg(3)));
    // ...and an answer in her own stream that claims to be Bob's is refused.
    let mut as_bob = redis::cmd("XADD");
    as_bob.arg(room.keys.answers("alice")).arg("*").arg("question").arg(1);
    let _: String = as_bob.arg("sender").arg("bob").arg("choice").arg(3).query(&mut c).unwrap();
    // So is a choice the question does not have.
    let mut no_such = redis::cmd("XADD");
    no_such.arg(room.keys.answers("alice")).arg("*").arg("question").arg(1);
    let _: String = no_such.arg("sender").arg("alice").arg("choice").arg(9).query(&mut c).unwrap();
    let tally = Quizmaster::of(&room, &names(&["alice", "bob"])).tally(1, 3).await.unwrap();
    assert_eq!(tally.counts, [0, 0, 0]);
    assert_eq!(tally.missing, names(&["alice", "bob"]));
    assert_eq!(tally.refused.len(), 2, "{tally:?}");
    assert!(tally.refused[0].contains("forged") && tally.refused[0].contains("bob"));
    assert!(tally.refused[1].contains("not a choice"));
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

/// A class on loopback played by the real binaries: `fencelab class` with the
/// students' names, one `fencelab join` per student. `script` gets the instructor's
/// stdin (typed controls) once the run has started and the students' pids; returns the
/// instructor's output and each student's.
/// The students' `fencelab join` processes while a class plays, and their URLs.
struct Joined<'a> {
    students: &'a mut Vec<std::process::Child>,
    urls: &'a [String],
    /// What the instructor has printed since the run started, as it comes.
    projector: &'a Printed,
    /// What each student's `fencelab join` (the first ones) has printed, as it comes.
    screens: &'a [Printed],
}

/// What a process prints, as it comes: a thread reads it into this.
type Printed = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

/// Read `from` into a `Printed` on a thread of its own, until its end.
fn printing(
    mut from: impl std::io::Read + Send + 'static,
) -> (Printed, std::thread::JoinHandle<()>) {
    let printed = Printed::default();
    let into = printed.clone();
    let reading = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    (printed, reading)
}

fn text_of(printed: &Printed) -> String {
    String::from_utf8_lossy(&printed.lock().unwrap()).into_owned()
}

/// Wait until `printed` has a line with `needle`: the moment in the run it marks.
/// Returns the text printed so far.
fn wait_for_line(whose: &str, printed: &Printed, needle: &str) -> String {
    support::wait_until(
        Duration::from_secs(30),
        || Some(text_of(printed)).filter(|text| text.contains(needle)),
        || format!("{whose} never printed {needle:?}:\n{}", text_of(printed)),
    )
}

impl Joined<'_> {
    /// Wait until the instructor prints `needle` (from the run's start on).
    fn projector_says(&self, needle: &str) -> String {
        wait_for_line("the instructor", self.projector, needle)
    }

    /// Wait until student `i`'s first `fencelab join` prints `needle`.
    fn screen_says(&self, i: usize, needle: &str) -> String {
        wait_for_line(&format!("student {i}'s join"), &self.screens[i], needle)
    }
}

fn play_class(
    students: &[&str],
    fencing: bool,
    script: impl FnOnce(&mut std::process::ChildStdin, &mut Joined),
) -> (String, Vec<String>) {
    play_class_without(students, 0, fencing, script)
}

/// `play_class`, the last `absent` students never joining: the instructor starts
/// without them once the others are in. `Joined` has every student's URL.
fn play_class_without(
    students: &[&str],
    absent: usize,
    fencing: bool,
    script: impl FnOnce(&mut std::process::ChildStdin, &mut Joined),
) -> (String, Vec<String>) {
    play_class_with(students, (absent, &[]), &class_scenario(300), fencing, script)
}

/// `play_class_without` on a Redis the instructor names (`REDIS_URL`): the students
/// connect to it directly, with no gate between.
fn play_class_on_shared_redis(
    students: &[&str],
    absent: usize,
    script: impl FnOnce(&mut std::process::ChildStdin, &mut Joined),
) -> (String, Vec<String>) {
    let (_server, admin) = server();
    SHARED_REDIS.with(|shared| *shared.borrow_mut() = Some(admin));
    let played = play_class_without(students, absent, false, script);
    SHARED_REDIS.with(|shared| *shared.borrow_mut() = None);
    played
}

thread_local! {
    /// The Redis `play_class_with` names to the instructor, when a test set one.
    static SHARED_REDIS: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The playground with a third part that starts later: alice alone takes the lock at
/// 0; the second part starts at `b_start_ms`.
fn class_scenario(b_start_ms: u64) -> String {
    let playground = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scenarios/playground.toml");
    let playground = std::fs::read_to_string(playground).unwrap();
    let third = "\n[[workers]]\nname = \"C\"\nstart_ms = 600\nsteps = [{ do = \"acquire\" }, { do = \"write\", value = \"C\" }, { do = \"release\" }]\n";
    playground.replace("start_ms = 300", &format!("start_ms = {b_start_ms}")) + third
}

/// `play_class_without`, the students named in `own` joining with `--program` (their
/// own program as their worker).
fn play_class_with(
    students: &[&str],
    (absent, own): (usize, &[(&str, &str)]),
    scenario_toml: &str,
    fencing: bool,
    script: impl FnOnce(&mut std::process::ChildStdin, &mut Joined),
) -> (String, Vec<String>) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("class.toml");
    std::fs::write(&scenario, scenario_toml).unwrap();
    let path = scenario.display().to_string();
    let mut args = vec!["class", path.as_str(), "--students"];
    let list = students.join(",");
    args.push(&list);
    let shared = SHARED_REDIS.with(|shared| shared.borrow().clone());
    if shared.is_none() {
        args.extend(["--listen", "127.0.0.1", "--host", "127.0.0.1"]);
    }
    if fencing {
        args.push("--fencing");
    }
    let mut instructor = support::bin();
    if let Some(url) = &shared {
        instructor.env("REDIS_URL", url);
    }
    let mut instructor = instructor
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(instructor.stdout.take().unwrap());
    let mut seen = String::new();
    let mut urls = Vec::new();
    while urls.len() < students.len() {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the class ended early:\n{seen}");
        if let Some(url) = line.trim().strip_prefix("fencelab join '") {
            urls.push(url.trim_end_matches('\'').to_string());
        }
        seen.push_str(&line);
    }
    let coming = students.len() - absent;
    let mut joined: Vec<_> = urls[..coming]
        .iter()
        .zip(students)
        .map(|(url, name)| {
            let mut join = support::bin();
            // Piped: a student types their answers to the lesson's questions.
            join.args(["join", url]).stdin(Stdio::piped()).stdout(Stdio::piped());
            if let Some((_, program)) = own.iter().find(|(who, _)| who == name) {
                join.args(["--program", program]).current_dir(env!("CARGO_MANIFEST_DIR"));
            }
            join.spawn().unwrap()
        })
        .collect();
    let (screens, reading_screens): (Vec<_>, Vec<_>) =
        joined.iter_mut().map(|j| printing(j.stdout.take().unwrap())).unzip();
    let mut stdin = instructor.stdin.take().unwrap();
    let mut came = 0;
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the class ended early:\n{seen}");
        seen.push_str(&line);
        if line.trim().ends_with(" joined") {
            came += 1;
            if came == coming && absent > 0 {
                use std::io::Write;
                writeln!(stdin).unwrap();
            }
        }
        if line.starts_with("=== class") {
            break;
        }
    }
    let (projector, rest) = printing(out);
    let mut playing =
        Joined { students: &mut joined, urls: &urls, projector: &projector, screens: &screens };
    script(&mut stdin, &mut playing);
    drop(stdin);
    let status = instructor.wait().unwrap();
    rest.join().unwrap();
    seen.push_str(&String::from_utf8(projector.lock().unwrap().clone()).unwrap());
    assert!(status.success(), "{seen}");
    // Each student's screen: their join's, or that of the join the script started in
    // its place (whose stdout is still here to read).
    let screens = joined
        .into_iter()
        .zip(screens.iter().zip(reading_screens))
        .map(|(j, (first, reading))| {
            let replaced = j.stdout.is_some();
            let out = j.wait_with_output().unwrap();
            reading.join().unwrap();
            match replaced {
                true => String::from_utf8_lossy(&out.stdout).into_owned(),
                false => text_of(first),
            }
        })
        .collect();
    (seen, screens)
}

/// The pid of a student's worker process, from the `SIGSTOP` line on its screen.
fn worker_pid(line: &str) -> Option<u32> {
    line.split("to process ").nth(1)?.split(':').next()?.parse().ok()
}

fn pause_alice_then_resume(stdin: &mut std::process::ChildStdin, joined: &mut Joined) {
    use std::io::Write;
    // The playground: alice takes the lock at 0 and works 2.5 s in a 3 s lease.
    joined.projector_says("alice: working for");
    writeln!(stdin, "pause alice").unwrap();
    // Her lease runs out while she is frozen: the next holder (bob or carol) takes the
    // lock with token 2 and writes; she wakes after that write.
    let granted = joined.projector_says("got lock, fencing token 2");
    let line = granted.lines().find(|l| l.contains("got lock, fencing token 2")).unwrap();
    let next = line.split(": got lock").next().unwrap().rsplit(' ').next().unwrap();
    joined.projector_says(&format!("{next}: write "));
    writeln!(stdin, "resume alice").unwrap();
}

#[test]
fn a_class_of_three_sees_the_frozen_students_stale_write_then_its_rejection() {
    for fencing in [false, true] {
        let (projector, screens) =
            play_class(&["alice", "bob", "carol"], fencing, pause_alice_then_resume);
        assert!(projector.contains("alice: SIGSTOP to process"), "{projector}");
        let verdict =
            if fencing { "REJECTED (stale token 1)" } else { "ACCEPTED; still own lock? no" };
        assert!(projector.contains(&format!("alice: write {verdict}")), "{projector}");
        // Alice's own screen shows the same, from her own machine's view.
        assert!(screens[0].contains(&format!("alice: write {verdict}")), "{}", screens[0]);
        // Bob and carol both wait for alice's lease; either may win it.
        assert!(projector.contains("got lock, fencing token 2"), "{projector}");
        assert!(screens[1].contains("bob: lock is taken (alice holds it)"), "{}", screens[1]);
        // Bob's screen follows the room: the truth and the others' doings too.
        assert!(screens[1].contains("alice's lease expired"), "{}", screens[1]);
        assert!(screens[1].contains(&format!("alice: write {verdict}")), "{}", screens[1]);
    }
}

#[test]
fn a_paused_student_is_stopped_by_its_own_kernel() {
    let mut stopped = Vec::new();
    let (projector, screens) = play_class(&["alice", "bob"], false, |stdin, joined| {
        use std::io::Write;
        joined.projector_says("alice: working for");
        writeln!(stdin, "pause alice").unwrap();
        // The join process runs the worker: find it among the fencelab workers that
        // are stopped now.
        joined.projector_says("alice: SIGSTOP to process");
        stopped = support::wait_for("a worker process in state T", || {
            let stopped: Vec<u32> = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
                .filter(|pid| {
                    let cmd =
                        std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    let stat =
                        std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                    cmd.contains("fencelab\0worker")
                        && stat.rsplit(')').next().is_some_and(|s| s.starts_with(" T"))
                })
                .collect();
            Some(stopped).filter(|s| !s.is_empty())
        });
        assert!(!stopped.is_empty(), "a worker process in state T");
        writeln!(stdin, "resume alice").unwrap();
    });
    let pid = screens[0].lines().find_map(worker_pid);
    assert!(pid.is_some_and(|pid| stopped.contains(&pid)), "{pid:?} in {stopped:?}\n{projector}");
}

/// The value at the room's lock key, read with a student's join URL (the student's
/// user may read the run's keys).
fn room_lock(url: &str) -> Option<String> {
    let (room, _) = fencelab::class::seat_of(url).unwrap();
    let key = RoomKeys::new(&room).run.lock;
    redis::cmd("GET").arg(key).query(&mut con(url)).unwrap()
}

#[test]
fn a_students_own_program_is_stopped_on_their_machine_and_its_stale_write_judged() {
    let program = "python3 tests/programs/plain_lock.py";
    let mut stopped = None;
    let own = [("alice", program)];
    // bob's part starts at 2 s: alice's program (an interpreter starting up) takes the
    // lock first, and her pause is under way when he comes.
    let scenario = class_scenario(2000);
    let (projector, screens) =
        play_class_with(&["alice", "bob"], (0, &own), &scenario, false, |stdin, joined| {
            use std::io::Write;
            // alice's program takes the lock (its value a UUID, not fencelab's `alice:…`).
            support::wait_for("alice's program to hold the lock", || {
                room_lock(&joined.urls[1]).filter(|v| !v.starts_with("bob:"))
            });
            let pid = support::wait_for("alice's program", || {
                support::program_of("alice", "plain_lock.py")
            });
            writeln!(stdin, "pause alice").unwrap();
            support::wait_for("alice's program stopped", || {
                (support::state(pid) == "T").then_some(())
            });
            stopped = Some(pid);
            // Her lease runs out while she is frozen: bob takes the lock.
            support::wait_for("bob to hold the lock", || {
                room_lock(&joined.urls[1]).filter(|v| v.starts_with("bob:"))
            });
            assert_eq!(support::state(pid), "T", "still stopped while bob holds the lock");
            writeln!(stdin, "resume alice").unwrap();
        });
    let pid = stopped.expect("the script ran");
    assert!(projector.contains(&format!("alice: SIGSTOP to process {pid}")), "{projector}");
    // Her write, done by fencelab on the room's storage at her request, landed stale.
    assert!(projector.contains("alice: write ACCEPTED; still own lock? no"), "{projector}");
    assert!(screens[0].contains("alice: write ACCEPTED; still own lock? no"), "{}", screens[0]);
    assert!(projector.contains("from alice (no token) while bob held the lock"), "{projector}");
    // The room names her program's lock value (a UUID) by her: its claim came with
    // her events.
    assert!(projector.contains("alice's lease expired"), "{projector}");
    assert!(projector.contains("bob: lock is taken (alice holds it)"), "{projector}");
    assert!(!projector.contains("room: refused"), "{projector}");
    // Her join killed its program as it ended; on a loaded machine the kernel may not
    // have finished it off the instant the join's own exit was seen.
    support::wait_for_within("her program to be gone", Duration::from_secs(5), || {
        support::program_of("alice", "plain_lock.py").is_none().then_some(())
    });
}

#[test]
fn a_student_killed_mid_lease_shows_crashed_and_the_lease_expires() {
    let (projector, _) = play_class(&["alice", "bob"], false, |stdin, joined| {
        use std::io::Write;
        joined.projector_says("alice: working for");
        writeln!(stdin, "crash alice").unwrap();
    });
    assert!(projector.contains("alice: SIGKILL to process"), "{projector}");
    assert!(projector.contains("alice's lease expired"), "{projector}");
    assert!(projector.contains("bob: got lock, fencing token 2"), "{projector}");
    assert!(!projector.contains("alice: write"), "{projector}");
}

#[test]
fn bench_class_loses_no_event() {
    let out = support::bin()
        .args(["bench", "class", "--students", "30", "--events", "5"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("through the class gate: received 150 of 150 events"), "{text}");
    assert!(text.contains("straight to Redis (--redis): received 150 of 150 events"), "{text}");
    assert!(text.contains("no event lost"), "{text}");
}

#[test]
fn bench_class_over_ssh_draws_every_students_screen_beside_join() {
    let out =
        support::bin().args(["bench", "class", "--students", "3", "--ssh", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    // Every student received frames (the bench fails otherwise), and the worst of them
    // several a second: the screen follows the live run.
    let worst: f64 = text
        .split("worst ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no worst frame rate: {text}"));
    assert!(worst >= 5.0, "{text}");
    assert!(text.contains("with fencelab join:"), "{text}");
    assert_eq!(text.matches("the projector (160x48").count(), 2, "{text}");
}

#[test]
fn a_student_whose_join_dies_rejoins_the_run_and_the_roll_sees_no_gap() {
    let (projector, screens) = play_class(&["alice", "bob"], false, |_, joined| {
        // alice holds the lock; her laptop's fencelab dies (its worker with it), and
        // once it is gone she joins again.
        joined.projector_says("alice: working for");
        joined.students[0].kill().unwrap();
        joined.students[0].wait().unwrap();
        let again = support::bin()
            .args(["join", &joined.urls[0]])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        joined.students[0] = again;
    });
    assert!(!projector.contains("refused"), "{projector}");
    // Her new worker joins the run under way: it waits for her old lease to expire.
    assert!(projector.contains("alice: lock is taken (alice holds it)"), "{projector}");
    assert!(screens[0].contains("alice: got lock"), "{}", screens[0]);
    let grants = projector.matches("alice: got lock").count();
    assert_eq!(grants, 2, "{projector}");
}

/// One class screen driven as the event loop drives it: its log (when it has one)
/// and clock in, its questions' steps out to the room, the room's news in.
struct Screen {
    app: fencelab::tui::app::App,
    link: fencelab::service::quiz::QuizLink,
}

impl Screen {
    /// Feed `events` (those not yet seen) and time up to `reached_ms`, carry out the
    /// app's steps, take in the room's news.
    fn tick(&mut self, events: &[fencelab::engine::log::Event], reached_ms: f64) {
        use fencelab::tui::app::Msg;
        let new = events[self.app.log().len().min(events.len())..].to_vec();
        if !new.is_empty() {
            self.app.update(Msg::Logged(new));
        }
        let effects = self.app.update(Msg::Clock { reached_ms, real_ms: 20.0 });
        self.carry_out(effects);
        while let Ok(news) = self.link.news.try_recv() {
            let effects = self.app.update(Msg::Quiz(news));
            self.carry_out(effects);
        }
    }

    fn key(&mut self, action: fencelab::tui::keys::Action) {
        let effects = self.app.update(fencelab::tui::app::Msg::Key(action));
        self.carry_out(effects);
    }

    fn carry_out(&self, effects: Vec<fencelab::tui::app::Effect>) {
        for effect in effects {
            if let fencelab::tui::app::Effect::Quiz(step) = effect {
                self.link.steps.send(step).unwrap();
            }
        }
    }

    fn text(&self, width: u16, height: u16) -> String {
        let backend = ratatui::backend::TestBackend::new(width, height);
        let mut terminal = ratatui::Terminal::new(backend).unwrap();
        terminal.draw(|f| fencelab::tui::render::draw(f, &self.app)).unwrap();
        let buf = terminal.backend().buffer().clone();
        (0..height)
            .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
            .collect()
    }
}

/// Tick `screens` every 20 ms until `done` holds of them (at most 15 s).
async fn until(
    screens: &mut [&mut Screen],
    events: impl Fn(usize) -> (Vec<fencelab::engine::log::Event>, f64),
    done: impl Fn(&[&mut Screen]) -> bool,
    what: &str,
) {
    support::wait_for_async_within(what, Duration::from_secs(15), async || {
        if done(screens) {
            return Some(());
        }
        for (i, screen) in screens.iter_mut().enumerate() {
            let (log, reached) = events(i);
            screen.tick(&log, reached);
        }
        None
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_class_answers_gc_pauses_question_and_sees_the_tally_then_the_reveal() {
    use fencelab::class::attend::{Seen, attend};
    use fencelab::class::for_students;
    use fencelab::class::host::{mirror, prepare_class};
    use fencelab::lesson::Narration;
    use fencelab::service::quiz::QuizLink;
    use fencelab::tui::app::lesson_state::LessonState;
    use fencelab::tui::app::{App, ClassSeat};
    use fencelab::tui::keys::Action;
    use fencelab::tui::theme::Theme;
    use std::sync::{Arc, Mutex};
    use tokio_util::sync::CancellationToken;

    let (_server, admin) = server();
    let students = names(&["alice", "bob", "carol"]);
    let mut room = Room::open(&admin, "r1", &students).await.unwrap();
    let lesson = builtin("gc-pause").unwrap().unwrap();
    let scenario = for_students(&lesson, &students);
    let program = std::path::PathBuf::from(env!("CARGO_BIN_EXE_fencelab"));
    // Each student: the real `join` code (its worker a process of its own), the room's
    // log copied for the screen, and the screen's line to the room's questions.
    let mut seen = Vec::new();
    let mut joined = Vec::new();
    let mut desks = Vec::new();
    for seat in room.seats() {
        let copy = Arc::new(Mutex::new(Vec::new()));
        let (url, program, into) = (seat.join_url().to_string(), program.clone(), copy.clone());
        joined.push(tokio::spawn(async move {
            attend(&url, (&program, None), CancellationToken::new(), |from, event| {
                if let Seen::Room { .. } = from {
                    into.lock().unwrap().push(event.clone());
                }
            })
            .await
        }));
        seen.push(copy);
        let label = format!("you are {}", seat.name);
        let mut app = App::new(scenario.clone(), false, 1.0, false, label, Theme::DEFAULT)
            .in_class(ClassSeat::Student(seat.name.clone()));
        app.update(fencelab::tui::app::Msg::RunStarting);
        desks.push(Screen { app, link: QuizLink::student(seat.join_url().to_string()) });
    }
    support::wait_for_async("every student in the room", async || {
        (room.present().await.unwrap().len() >= students.len()).then_some(())
    })
    .await;
    // The instructor: the class's run, its log mirrored to the room, the projector's
    // app holding at the lesson's checkpoints.
    let cancel = CancellationToken::new();
    let prepared = prepare_class(&room, &admin, &scenario, false, &cancel).await.unwrap();
    let (log, control) = (prepared.log(), prepared.control());
    let run = tokio::spawn(prepared.execute());
    let mirrored = tokio::spawn(mirror(log.clone(), room.controller()));
    let mut app = App::new(scenario.clone(), false, 1.0, false, "class".into(), Theme::DEFAULT)
        .in_class(ClassSeat::Instructor);
    let label = app.run_label();
    let checkpoints = lesson.checkpoints.clone();
    app = app.with_lesson(LessonState::new(Narration::default(), &label, checkpoints, vec![]));
    app.update(fencelab::tui::app::Msg::RunStarting);
    let mut projector = Screen {
        app,
        link: QuizLink::instructor(Quizmaster::of(&room, &students), lesson.checkpoints.clone()),
    };
    let instructor = |_: usize| (log.snapshot(), log.clock().now_ms());
    let student = |i: usize| {
        let events = seen[i].lock().unwrap().clone();
        let reached = events.last().map_or(0.0, |e| e.t_ms);
        (events, reached)
    };

    // The run reaches the question: the projector holds there and poses it.
    until(&mut [&mut projector], instructor, |s| s[0].app.posed().is_some(), "posed").await;
    assert_eq!(projector.app.view_ms(), 2100.0);
    {
        let mut screens: Vec<&mut Screen> = desks.iter_mut().collect();
        let asked = |s: &[&mut Screen]| s.iter().all(|s| s.app.posed().is_some());
        until(&mut screens, student, asked, "every student is asked").await;
    }
    for desk in &desks {
        assert!(desk.app.view_ms() <= 2100.0, "a student sees past the question");
    }
    // alice and bob answer 1 (right), carol 2 (wrong).
    desks[0].key(Action::PauseWorker(0));
    desks[1].key(Action::PauseWorker(0));
    desks[2].key(Action::PauseWorker(1));
    let counted = |s: &[&mut Screen]| s[0].app.posed().is_some_and(|p| p.tally.counts == [2, 1, 0]);
    until(&mut [&mut projector], instructor, counted, "the tally counts 2/1/0").await;
    let screen = projector.text(100, 30);
    assert!(screen.contains("Question 1 · 3 of 3 answered · Enter reveals"), "{screen}");
    assert!(screen.contains("everyone has answered"), "{screen}");
    assert!(!screen.contains("STALE"), "the projector shows past the question:\n{screen}");

    // Enter reveals; each student's screen says right or wrong.
    projector.key(Action::Continue);
    let revealed = projector.text(100, 30);
    assert!(revealed.contains("✔ The answer is 1: A's"), "{revealed}");
    {
        let mut screens: Vec<&mut Screen> = desks.iter_mut().collect();
        let told =
            |s: &[&mut Screen]| s.iter().all(|s| s.app.posed().is_some_and(|p| !p.is_open()));
        until(&mut screens, student, told, "every student is told").await;
    }
    for (desk, verdict) in desks.iter().zip(["✔ Right: 1.", "✔ Right: 1.", "✘ Not 2."]) {
        let screen = desk.text(100, 30);
        assert!(screen.contains(verdict), "{screen}");
    }
    assert!(desks[2].text(100, 30).contains("✔ The answer is 1: A's"));
    // The students' screens go on; the projector's next Enter does too.
    assert!(desks.iter().all(|d| !d.app.held()));
    projector.key(Action::Continue);
    assert!(!projector.app.held() && projector.app.posed().is_none());

    control.stop();
    cancel.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), run).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), mirrored).await;
    for join in joined {
        let _ = tokio::time::timeout(Duration::from_secs(10), join).await;
    }
    drop(desks);
    drop(projector);
    room.close().await.unwrap();
}

#[test]
fn an_absent_student_does_not_hold_up_the_class_the_instructor_starts_without_them() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let args = ["class", "playground", "--students", "alice,bob", "--headless"];
    let mut instructor = support::bin()
        .args(args)
        .args(["--listen", "127.0.0.1", "--host", "127.0.0.1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
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
    let alice = read_until("fencelab join '", &mut seen);
    let url = alice.trim().trim_start_matches("fencelab join '").trim_end_matches('\'');
    read_until("press Enter to start without those missing", &mut seen);
    let joined = support::bin().args(["join", url]).stdout(Stdio::piped()).spawn().unwrap();
    read_until("alice joined", &mut seen);
    // bob never comes: Enter starts the run with alice alone, and it ends.
    let mut stdin = instructor.stdin.take().unwrap();
    writeln!(stdin).unwrap();
    read_until("starting without bob", &mut seen);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    seen.push_str(&rest);
    drop(stdin);
    assert!(instructor.wait().unwrap().success(), "{seen}");
    assert!(seen.contains("alice: got lock, fencing token 1"), "{seen}");
    let run = seen.split("the run starts").nth(1).unwrap_or_default();
    assert!(!run.contains("bob"), "bob sits this run out:\n{seen}");
    let screen = joined.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&screen.stdout).contains("alice: got lock"));
}

#[tokio::test]
async fn per_student_limits_refuse_and_count() {
    use fencelab::class::quiz::MAX_ANSWERS_READ;
    use fencelab::class::roll::{MAX_ENTRY_BYTES, MAX_EVENTS_PER_SECOND};
    let (_server, admin) = server();
    let room = Room::open(&admin, "r1", &names(&["alice"])).await.unwrap();
    let url = room.seats()[0].join_url().to_string();
    let mut roll = Roll::connect(&admin, room.keys.clone(), &names(&["alice"])).await.unwrap();
    let mut c = con(&url);
    let stream = room.keys.stream("alice");
    // An entry larger than any worker's event.
    let huge = format!("\"{}\"", "x".repeat(MAX_ENTRY_BYTES + 1));
    raw_post(&mut c, &stream, 1, "alice", &huge);
    // A flood: more events in a second than a worker makes, posted in one go.
    let json = serde_json::to_string(&event("alice", 1)).unwrap();
    let mut flood = redis::pipe();
    let extra = 30;
    for seq in 1..=(MAX_EVENTS_PER_SECOND + extra) as u64 {
        flood.cmd("XADD").arg(&stream).arg("*").arg("seq").arg(seq);
        flood.arg("sender").arg("alice").arg("event").arg(&json).ignore();
    }
    let () = flood.query(&mut c).unwrap();
    let mut arrived = Vec::new();
    loop {
        let batch = roll.read(Duration::from_millis(100)).await.unwrap();
        if batch.is_empty() {
            break;
        }
        arrived.extend(batch);
    }
    let accepted = arrived.iter().filter(|a| matches!(a, Arrival::Event { .. })).count();
    let whys: Vec<&str> = arrived
        .iter()
        .filter_map(|a| match a {
            Arrival::Refused { why, .. } => Some(why.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(accepted, MAX_EVENTS_PER_SECOND, "{whys:?}");
    assert!(whys[0].contains("bytes, over"), "{whys:?}");
    let fast = whys.iter().filter(|w| w.contains("events a second")).count();
    assert_eq!(fast, extra, "{whys:?}");

    // Answers: only the latest are read, the rest counted.
    let mut answers = redis::pipe();
    let posted = MAX_ANSWERS_READ + 50;
    for _ in 0..posted {
        answers.cmd("XADD").arg(room.keys.answers("alice")).arg("*").arg("question").arg(1);
        answers.arg("sender").arg("alice").arg("choice").arg(2).ignore();
    }
    let () = answers.query(&mut c).unwrap();
    let tally = Quizmaster::of(&room, &names(&["alice"])).tally(1, 3).await.unwrap();
    assert_eq!(tally.counts, [0, 1, 0]);
    assert!(tally.refused.iter().any(|r| r.contains("50 answers of alice not read")), "{tally:?}");
    room.close().await.unwrap();
}

/// The last event number in a student's stream, read with their own credentials.
fn last_seq(url: &str) -> u64 {
    let (id, name) = fencelab::class::seat_of(url).unwrap();
    let mut c = con(url);
    let last: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
        .arg(RoomKeys::new(&id).stream(&name))
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let seq = last.first().and_then(|(_, f)| f.iter().find(|(k, _)| k == "seq").cloned());
    seq.map_or(0, |(_, v)| v.parse().unwrap())
}

#[test]
fn a_skipped_sequence_number_is_shown_and_the_run_still_ends_with_the_right_verdict() {
    let (projector, _) = play_class(&["alice", "bob"], false, |_, joined| {
        // alice holds the lock and works: one entry of hers jumps her numbering by 50.
        joined.projector_says("alice: working for");
        let url = &joined.urls[0];
        let (id, _) = fencelab::class::seat_of(url).unwrap();
        let jumped = last_seq(url) + 50;
        let kind = serde_json::to_string(&event("alice", 7)).unwrap();
        raw_post(&mut con(url), &RoomKeys::new(&id).stream("alice"), jumped, "alice", &kind);
    });
    assert!(projector.contains("refused from alice: event numbered"), "{projector}");
    assert!(!projector.contains("fencing token 7"), "{projector}");
    // Her real events after it still count: her write, her release, and bob's turn.
    assert!(projector.contains("alice: write ACCEPTED"), "{projector}");
    assert!(projector.contains("bob: write ACCEPTED"), "{projector}");
    assert!(projector.contains("storage writes: ['alice(token 1)', 'bob(token 2)'"), "{projector}");
}

#[test]
fn a_student_quitting_mid_run_ends_their_part_and_the_run_goes_on_to_its_verdict() {
    let (projector, _) = play_class(&["alice", "bob"], false, |_, joined| {
        // alice holds the lock; she quits (her fencelab ends, her worker with it).
        joined.projector_says("alice: working for");
        joined.students[0].kill().unwrap();
        joined.students[0].wait().unwrap();
    });
    assert!(projector.contains("room: alice left the class"), "{projector}");
    // Her lease expires as a crash's would, and bob goes on to the end.
    assert!(projector.contains("alice's lease expired"), "{projector}");
    assert!(projector.contains("bob: write ACCEPTED"), "{projector}");
    assert!(projector.contains("storage writes: ['bob(token 2)'"), "{projector}");
    // The verdict names her too, beside the checker's lines: killed, she said
    // nothing, so the room's roll call found her gone (and says since when).
    assert!(projector.contains("room: alice was gone by"), "{projector}");
    assert!(projector.contains("s; gone since "), "{projector}");
}

#[test]
fn a_forged_write_from_a_student_who_sat_out_is_not_in_the_verdict() {
    let (projector, _) = play_class_without(&["alice", "carol"], 1, false, |_, joined| {
        // carol never joined the run; with her credentials she writes the storage
        // while it goes on.
        joined.projector_says("alice: got lock");
        let url = &joined.urls[1];
        let (id, _) = fencelab::class::seat_of(url).unwrap();
        let forged = r#"{"worker":"carol","token":999,"value":"carol"}"#;
        let storage = fencelab::backend::Keys::for_run(&id).storage;
        let _: i64 = redis::cmd("RPUSH").arg(storage).arg(forged).query(&mut con(url)).unwrap();
    });
    assert!(
        projector.contains("refused from carol: the storage holds carol(token 999)"),
        "{projector}"
    );
    let verdict = projector.split("storage writes:").nth(1).unwrap_or_default();
    assert!(!verdict.contains("999"), "{projector}");
    assert!(verdict.contains("alice(token 1)"), "{projector}");
}

#[test]
fn the_gate_refuses_junk_in_the_storage_and_on_a_shared_redis_it_is_left_out_and_counted() {
    // Through the gate of a private class: carol's junk never reaches the storage.
    let (projector, _) = play_class_without(&["alice", "carol"], 1, false, |_, joined| {
        joined.projector_says("alice: got lock");
        let url = &joined.urls[1];
        let (id, _) = fencelab::class::seat_of(url).unwrap();
        let storage = fencelab::backend::Keys::for_run(&id).storage;
        let pushed: redis::RedisResult<i64> =
            redis::cmd("RPUSH").arg(storage).arg("not json {").query(&mut con(url));
        let refusal = pushed.unwrap_err().to_string();
        assert!(refusal.contains("class gate: the storage takes only carol's own"), "{refusal}");
    });
    assert!(!projector.contains("not json {"), "{projector}");
    let verdict = projector.split("storage writes:").nth(1).unwrap_or_default();
    assert!(verdict.contains("alice(token 1)"), "{projector}");
    // On a Redis the instructor names, with no gate: 20,000 junk entries are left out
    // of the verdict in a few lines that count them, not a line each.
    let (projector, _) = play_class_on_shared_redis(&["alice", "carol"], 1, |_, joined| {
        joined.projector_says("alice: got lock");
        let url = &joined.urls[1];
        let (id, _) = fencelab::class::seat_of(url).unwrap();
        let storage = fencelab::backend::Keys::for_run(&id).storage;
        let mut c = con(url);
        for _ in 0..20 {
            let mut push = redis::cmd("RPUSH");
            push.arg(&storage);
            for i in 0..1000 {
                push.arg(format!("not json {i}"));
            }
            let _: i64 = push.query(&mut c).unwrap();
        }
    });
    assert!(projector.contains("entries that are not writes"), "{projector}");
    assert!(projector.contains("20000"), "{projector}");
    let lines = projector.lines().filter(|l| l.contains("not json")).count();
    assert!(lines <= 25, "{lines} lines name the junk:\n{projector}");
    let verdict = projector.split("storage writes:").nth(1).unwrap_or_default();
    assert!(verdict.contains("alice(token 1)"), "{projector}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_students_screen_never_shows_past_the_projectors_cursor() {
    use fencelab::class::attend::{Seen, attend};
    use fencelab::class::for_students;
    use fencelab::class::host::{mirror, prepare_class};
    use fencelab::service::quiz::QuizLink;
    use fencelab::tui::app::lesson_state::LessonState;
    use fencelab::tui::app::{App, ClassSeat};
    use fencelab::tui::keys::Action;
    use fencelab::tui::theme::Theme;
    use std::sync::{Arc, Mutex};
    use tokio_util::sync::CancellationToken;

    let (_server, admin) = server();
    let students = names(&["alice", "bob"]);
    let mut room = Room::open(&admin, "r1", &students).await.unwrap();
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let scenario = for_students(&lesson.scenario, &students);
    let program = std::path::PathBuf::from(env!("CARGO_BIN_EXE_fencelab"));
    let mut seen = Vec::new();
    let mut joined = Vec::new();
    let mut desks = Vec::new();
    for seat in room.seats() {
        let copy = Arc::new(Mutex::new(Vec::new()));
        let (url, program, into) = (seat.join_url().to_string(), program.clone(), copy.clone());
        joined.push(tokio::spawn(async move {
            attend(&url, (&program, None), CancellationToken::new(), |from, event| {
                if let Seen::Room { .. } = from {
                    into.lock().unwrap().push(event.clone());
                }
            })
            .await
        }));
        seen.push(copy);
        let mut app = App::new(scenario.clone(), false, 1.0, false, "you".into(), Theme::DEFAULT)
            .in_class(ClassSeat::Student(seat.name.clone()));
        app.update(fencelab::tui::app::Msg::RunStarting);
        desks.push(Screen { app, link: QuizLink::student(seat.join_url().to_string()) });
    }
    support::wait_for_async("every student in the room", async || {
        (room.present().await.unwrap().len() >= students.len()).then_some(())
    })
    .await;
    let cancel = CancellationToken::new();
    let prepared = prepare_class(&room, &admin, &scenario, false, &cancel).await.unwrap();
    let (log, control) = (prepared.log(), prepared.control());
    let run = tokio::spawn(prepared.execute());
    let mirrored = tokio::spawn(mirror(log.clone(), room.controller()));
    // The projector as `class` makes it: the lesson's narration and its questions.
    let mut app = App::new(scenario.clone(), false, 1.0, false, "class".into(), Theme::DEFAULT)
        .in_class(ClassSeat::Instructor);
    let label = app.run_label();
    let checkpoints = lesson.scenario.checkpoints.clone();
    let narration = lesson.narration.clone();
    app = app.with_lesson(LessonState::new(narration, &label, checkpoints.clone(), vec![]));
    app.update(fencelab::tui::app::Msg::RunStarting);
    let mut projector =
        Screen { app, link: QuizLink::instructor(Quizmaster::of(&room, &students), checkpoints) };
    let instructor = |_: usize| (log.snapshot(), log.clock().now_ms());
    let student = |i: usize| {
        let events = seen[i].lock().unwrap().clone();
        let reached = events.last().map_or(0.0, |e| e.t_ms);
        (events, reached)
    };
    // Every hold of the projector, the introduction's first: the students' screens,
    // given the room's events well past it, stay at or before its cursor.
    use fencelab::engine::log::EventKind;
    let over =
        |app: &App| app.log().last().is_some_and(|e| matches!(e.kind, EventKind::RunEnded { .. }));
    let mut holds = 0;
    let mut ahead_at = Vec::new();
    for _ in 0..20 {
        let stop = |s: &[&mut Screen]| {
            s[0].app.held()
                || (over(&s[0].app) && s[0].app.cursor_ms() >= s[0].app.log().last().unwrap().t_ms)
        };
        until(&mut [&mut projector], instructor, stop, "a hold or the end").await;
        if !projector.app.held() {
            break;
        }
        let cursor = projector.app.cursor_ms();
        let mut screens: Vec<&mut Screen> = desks.iter_mut().collect();
        let caught_up = |s: &[&mut Screen]| {
            s.iter().all(|s| {
                over(&s.app) || s.app.log().last().is_some_and(|e| e.t_ms > cursor + 300.0)
            })
        };
        until(&mut screens, student, caught_up, "the room past the cursor").await;
        // And not behind it either: a question's premise (the write it asks about, a
        // few ms past the last cursor told) is on the students' screens too.
        let at_cursor = |s: &[&mut Screen]| s.iter().all(|s| s.app.view_ms() >= cursor - 0.5);
        until(&mut screens, student, at_cursor, "the students at the projector's cursor").await;
        for desk in &desks {
            assert!(desk.app.view_ms() <= cursor, "{} > {cursor}", desk.app.view_ms());
            if desk.app.log().iter().any(|e| e.t_ms > cursor) {
                ahead_at.push(cursor);
            }
            // gc-pause: A's stale write lands at 3 s.
            let text = desk.text(100, 30);
            assert!(cursor >= 3000.0 || !text.contains("STALE"), "at {cursor}:\n{text}");
        }
        holds += 1;
        // On: a step is read; a question is revealed, then closed.
        let question = projector.app.posed().is_some();
        projector.key(Action::Continue);
        if question {
            projector.key(Action::Continue);
            projector.key(Action::Continue);
        }
    }
    // The introduction is held near the start with the room's log already past it.
    assert!(ahead_at.first().is_some_and(|c| *c < 1000.0), "{ahead_at:?}");
    assert!(holds >= 2, "the introduction and the question at least: {holds}");
    control.stop();
    cancel.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), run).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), mirrored).await;
    for join in joined {
        let _ = tokio::time::timeout(Duration::from_secs(10), join).await;
    }
    drop(desks);
    drop(projector);
    room.close().await.unwrap();
}

/// The newest entries of a student's stream (at most 200), read with her credentials.
fn stream_of(url: &str) -> Vec<(String, Vec<(String, String)>)> {
    let (id, name) = fencelab::class::seat_of(url).unwrap();
    let stream = RoomKeys::new(&id).stream(&name);
    redis::cmd("XREVRANGE")
        .arg(stream)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(200)
        .query(&mut con(url))
        .unwrap()
}

/// N3: during her worker's own scripted pause, alice posts the next 40 numbers as
/// `checked` events; they are refused without using the numbers up, so her real
/// events after the pause count, and the verdict names her stale write.
#[test]
fn forged_events_during_a_scripted_pause_cannot_hide_the_stale_write() {
    let scenario = r#"
name = "scripted-pause"
title = "A pauses itself"
summary = "A holds the lock, pauses past its lease; B takes it and writes; A writes, stale."
ttl_ms = 1000

[[workers]]
name = "A"
steps = [{ do = "acquire" }, { do = "pause", ms = 2500 }, { do = "write", value = "A" }, { do = "release" }]

[[workers]]
name = "B"
start_ms = 300
steps = [{ do = "acquire" }, { do = "write", value = "B" }, { do = "release" }]
"#;
    let (projector, _) =
        play_class_with(&["alice", "bob"], (0, &[]), scenario, false, |_, joined| {
            let url = joined.urls[0].clone();
            support::wait_for("alice's pause to be posted", || {
                let posted = stream_of(&url);
                posted
                    .iter()
                    .any(|(_, f)| f.iter().any(|(_, v)| v.contains("\"paused\"")))
                    .then_some(())
            });
            let (id, _) = fencelab::class::seat_of(&url).unwrap();
            let stream = RoomKeys::new(&id).stream("alice");
            let checked = EventKind::Worker {
                worker: "alice".into(),
                what: WorkerEvent::Checked { still_owner: true },
            };
            let json = serde_json::to_string(&checked).unwrap();
            let next = last_seq(&url) + 1;
            let mut c = con(&url);
            for seq in next..next + 40 {
                raw_post(&mut c, &stream, seq, "alice", &json);
            }
        });
    assert!(
        projector
            .contains("refused from alice: a 'checked' event during the worker's scripted pause"),
        "{projector}"
    );
    assert!(projector.contains("alice: write ACCEPTED"), "{projector}");
    assert!(projector.contains("checker: 1 stale write accepted"), "{projector}");
}

/// N4: alice claims bob's lock value as her grant: refused, and the verdict's holders
/// are whom the server's values name.
#[test]
fn a_claim_of_another_students_lock_value_is_refused() {
    let (projector, _) = play_class(&["alice", "bob"], false, |_, joined| {
        joined.projector_says("alice: got lock");
        let url = &joined.urls[0];
        let (id, _) = fencelab::class::seat_of(url).unwrap();
        let claim =
            EventKind::Claimed { worker: "alice".into(), value: "bob:0123456789abcdef".into() };
        let json = serde_json::to_string(&claim).unwrap();
        raw_post(
            &mut con(url),
            &RoomKeys::new(&id).stream("alice"),
            last_seq(url) + 1,
            "alice",
            &json,
        );
    });
    assert!(
        projector
            .contains("refused from alice: a claim of the lock value \"bob:0123456789abcdef\""),
        "{projector}"
    );
    assert!(projector.contains("bob: write ACCEPTED"), "{projector}");
}

#[test]
fn a_frozen_students_forged_write_is_refused() {
    let (projector, _) = play_class(&["alice", "bob"], false, |stdin, joined| {
        use std::io::Write;
        joined.projector_says("alice: working for");
        writeln!(stdin, "pause alice").unwrap();
        // Her worker is stopped by her kernel; her stream then claims it wrote.
        let url = joined.urls[0].clone();
        let (id, _) = fencelab::class::seat_of(&url).unwrap();
        let stream = RoomKeys::new(&id).stream("alice");
        support::wait_for("alice's SIGSTOP to be posted", || {
            let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                .arg(&stream)
                .arg("-")
                .arg("+")
                .arg("COUNT")
                .arg(200)
                .query(&mut con(&url))
                .unwrap();
            let stopped = entries.iter().any(|(_, f)| f.iter().any(|(_, v)| v.contains("SIGSTOP")));
            stopped.then_some(())
        });
        let wrote = EventKind::Worker {
            worker: "alice".into(),
            what: WorkerEvent::Wrote {
                value: "alice".into(),
                token: Some(1),
                accepted: true,
                redis_holder: Some("alice".into()),
                order: None,
                refused: None,
                own: false,
            },
        };
        let json = serde_json::to_string(&wrote).unwrap();
        raw_post(&mut con(&url), &stream, last_seq(&url) + 1, "alice", &json);
        // She wakes once the room has judged the claim.
        joined.projector_says("refused from alice: a 'wrote' event while frozen");
        writeln!(stdin, "resume alice").unwrap();
    });
    assert!(projector.contains("refused from alice: a 'wrote' event while frozen"), "{projector}");
    assert!(projector.contains("bob: write ACCEPTED"), "{projector}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_student_who_quits_is_named_and_the_narration_claims_nothing_of_their_part() {
    use fencelab::class::attend::attend;
    use fencelab::class::for_students;
    use fencelab::class::host::{mirror, prepare_class};
    use fencelab::service::quiz::QuizLink;
    use fencelab::tui::app::{App, ClassSeat};
    use fencelab::tui::keys::Action;
    use fencelab::tui::theme::Theme;
    use tokio_util::sync::CancellationToken;

    let (_server, admin) = server();
    let students = names(&["alice", "bob"]);
    let mut room = Room::open(&admin, "r1", &students).await.unwrap();
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let scenario = for_students(&lesson.scenario, &students);
    let program = std::path::PathBuf::from(env!("CARGO_BIN_EXE_fencelab"));
    let mut joined = Vec::new();
    let mut leave = Vec::new();
    for seat in room.seats() {
        let (url, program, quit) =
            (seat.join_url().to_string(), program.clone(), CancellationToken::new());
        leave.push(quit.clone());
        joined.push(tokio::spawn(
            async move { attend(&url, (&program, None), quit, |_, _| {}).await },
        ));
    }
    support::wait_for_async("every student in the room", async || {
        (room.present().await.unwrap().len() >= students.len()).then_some(())
    })
    .await;
    let cancel = CancellationToken::new();
    let prepared = prepare_class(&room, &admin, &scenario, false, &cancel).await.unwrap();
    let (log, control) = (prepared.log(), prepared.control());
    let run = tokio::spawn(prepared.execute());
    let mirrored = tokio::spawn(mirror(log.clone(), room.controller()));
    // The projector as `class` makes it: bob plays B, the lesson's narration names B.
    let mut app = App::new(scenario.clone(), false, 1.0, false, "class".into(), Theme::DEFAULT)
        .in_class(ClassSeat::Instructor);
    let told = fencelab::tui::class::class_lesson(&lesson, &students, &app.run_label());
    app = app.with_lesson(told);
    app.update(fencelab::tui::app::Msg::RunStarting);
    let checkpoints = lesson.scenario.checkpoints.clone();
    let mut projector =
        Screen { app, link: QuizLink::instructor(Quizmaster::of(&room, &students), checkpoints) };
    let instructor = |_: usize| (log.snapshot(), log.clock().now_ms());
    let over =
        |app: &App| app.log().last().is_some_and(|e| matches!(e.kind, EventKind::RunEnded { .. }));
    let mut screens = Vec::new();
    for hold in 0..20 {
        let stop = |s: &[&mut Screen]| {
            s[0].app.held()
                || (over(&s[0].app) && s[0].app.cursor_ms() >= s[0].app.log().last().unwrap().t_ms)
        };
        until(&mut [&mut projector], instructor, stop, "a hold or the end").await;
        if hold == 0 {
            // At the introduction bob quits his fencelab join (q): B never writes.
            leave[1].cancel();
            let gone = |_: &[&mut Screen]| {
                log.snapshot()
                    .iter()
                    .any(|e| matches!(&e.kind, EventKind::Left { student, .. } if student == "bob"))
            };
            until(&mut [&mut projector], instructor, gone, "the room hears bob left").await;
        }
        screens.push((projector.app.cursor_ms(), projector.text(100, 30)));
        if !projector.app.held() {
            break;
        }
        let question = projector.app.posed().is_some();
        projector.key(Action::Continue);
        if question {
            projector.key(Action::Continue);
            projector.key(Action::Continue);
        }
    }
    // The run went on to its end without him.
    let (_, end) = screens.last().unwrap();
    assert!(over(&projector.app), "the run never ended:\n{end}");
    let events = log.snapshot();
    let wrote = |e: &fencelab::engine::log::Event| matches!(&e.kind, EventKind::Worker { worker, what: WorkerEvent::Wrote { .. } } if worker == "bob");
    assert!(!events.iter().any(wrote), "bob quit before B's write");
    // No screen claims B wrote: the step at B's write says bob left and it did not happen.
    let step = |s: &String| s.contains("B has written") && !s.contains("Question 1");
    let written = screens.iter().map(|(_, s)| s).find(|s| step(s));
    let written = written.expect("the projector reached the step 'B has written'");
    assert!(written.contains("had bob stayed"), "{written}");
    assert!(written.contains("did not happen"), "{written}");
    assert!(screens.iter().all(|(_, s)| !s.contains("bob  token")), "bob's write on screen");
    // The projector names him, and so does the verdict.
    assert!(end.contains("bob left"), "{end}");
    let verdict = fencelab::output::transcript::who_left(&events).join("\n");
    // Said by his fencelab as it quit, or found by the room's roll call (a loaded
    // machine: his quit came before his start reached him, and he said nothing).
    let named = ["bob left the class at", "bob was gone by"];
    assert!(named.iter().any(|n| verdict.contains(n)), "{verdict}");
    control.stop();
    cancel.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), run).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), mirrored).await;
    for join in joined {
        let _ = tokio::time::timeout(Duration::from_secs(10), join).await;
    }
    drop(projector);
    room.close().await.unwrap();
}

/// The playground with a question at 1.5 s, while alice holds the lock and before
/// she writes (at 2.5 s).
fn class_with_a_question() -> String {
    class_scenario(300)
        + "\n[[checkpoints]]\nat_ms = 1500\nquestion = \"Who holds the lock now?\"\n\
           choices = [\"alice's part, A\", \"bob's part, B\"]\nanswer = 1\n\
           explain = \"A took it at 0 and works 2.5 s.\"\n"
}

fn type_into(child: &mut std::process::Child, line: &str) {
    use std::io::Write;
    writeln!(child.stdin.as_mut().unwrap(), "{line}").unwrap();
}

/// `class --headless` and `join --headless` with a lesson's question: the instructor's
/// lines stop at its moment (alice's write at 2.5 s is not printed before the
/// reveal), the tally comes as the students type their answers (a bad line is told
/// and ignored), Enter reveals (after the run's end, here), and each student is told
/// right or wrong before their lines end.
#[test]
fn headless_the_class_is_asked_answers_by_typing_sees_the_tally_then_the_reveal() {
    let mut cursors = None;
    let (projector, screens) = play_class_with(
        &["alice", "bob"],
        (0, &[]),
        &class_with_a_question(),
        false,
        |stdin, joined| {
            use std::io::Write;
            cursors = Some(projectors_cursor(joined.urls[0].clone(), Duration::from_millis(2500)));
            // Each student answers once the question is on their screen.
            for i in 0..2 {
                joined.screen_says(i, "? Question 1: Who holds the lock now?");
            }
            type_into(&mut joined.students[0], "1");
            type_into(&mut joined.students[1], "7");
            type_into(&mut joined.students[1], "b");
            // The run ends at about 4.1 s: the question stays open until Enter.
            joined.projector_says("everyone has answered");
            joined.projector_says("The run has ended; question 1 is still open: Enter reveals it.");
            writeln!(stdin).unwrap();
        },
    );
    let asked = projector.find("? Question 1: Who holds the lock now?").expect(&projector);
    let revealed = projector.find("✔ The answer is 1: alice's part, A.").expect(&projector);
    let held = &projector[asked..revealed];
    assert!(held.contains("  1) alice's part, A\n  2) bob's part, B"), "{projector}");
    assert!(
        held.contains(
            "Question 1 · 2 of 2 answered · Enter reveals · 1) 1 · 2) 1 · everyone has answered"
        ),
        "{projector}"
    );
    assert!(!held.contains("alice: write"), "the lines went past the question:\n{projector}");
    assert!(
        held.contains("The run has ended; question 1 is still open: Enter reveals it."),
        "{projector}"
    );
    assert!(projector[revealed..].contains("alice: write"), "{projector}");
    assert!(projector[revealed..].contains("A took it at 0 and works 2.5 s."), "{projector}");
    let (alice, bob) = (&screens[0], &screens[1]);
    for screen in [alice, bob] {
        assert!(screen.contains("? Question 1: Who holds the lock now?"), "{screen}");
    }
    assert!(alice.contains("answer 1 sent: your latest answer counts"), "{alice}");
    assert!(alice.contains("Question 1, revealed: ✔ Right: 1."), "{alice}");
    assert!(bob.contains("answer 2 sent"), "{bob}");
    assert!(bob.contains("Question 1, revealed: ✘ Not 2."), "{bob}");
    assert!(bob.contains("✔ The answer is 1: alice's part, A."), "{bob}");
    // bob's lines hold at the question as his screen would: alice's write (the
    // room's, not his worker's) comes after the reveal.
    let asked = bob.find("? Question 1").unwrap();
    let revealed = bob.find("Question 1, revealed").unwrap();
    assert!(!bob[asked..revealed].contains("alice: write"), "{bob}");
    assert!(bob[revealed..].contains("alice: write ACCEPTED"), "{bob}");
    // A student's screen follows the printed projector: its cursor moves with the
    // run, then stops at the question's moment while it is open.
    let told = cursors.unwrap().join().unwrap();
    assert!(told.iter().any(|at| *at > 0.0 && *at < 1500.0), "{told:?}");
    assert_eq!(told.iter().copied().fold(0.0, f64::max), 1500.0, "{told:?}");
}

/// The projector's cursor as the room tells it to a student's screen (heard with
/// `url`) for `listening`.
fn projectors_cursor(url: String, listening: Duration) -> std::thread::JoinHandle<Vec<f64>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut link = fencelab::service::quiz::QuizLink::student(url);
            let until = tokio::time::Instant::now() + listening;
            let mut told = Vec::new();
            while let Ok(Some(news)) = tokio::time::timeout_at(until, link.news.recv()).await {
                if let fencelab::service::quiz::QuizNews::Cursor(at) = news {
                    told.push(at);
                }
            }
            told
        })
    })
}

/// A student who joins once the run has started without them is told so and watches
/// it to its end (no worker of theirs in it), instead of waiting for a start that
/// never comes.
#[test]
fn a_student_who_joins_after_the_run_started_is_told_and_watches_it_to_its_end() {
    let mut late = None;
    let (projector, _) = play_class_without(&["alice", "bob", "carol"], 1, false, |_, joined| {
        joined.projector_says("alice: got lock");
        let carol = support::bin()
            .args(["join", &joined.urls[2]])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        late = Some(carol);
    });
    let carol = late.unwrap();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || done_tx.send(carol.wait_with_output().unwrap()));
    let out = done.recv_timeout(Duration::from_secs(20)).expect("carol's join never ended");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(
        screen.contains("carol: the run started before you joined, without you. You watch it"),
        "{screen}"
    );
    assert!(screen.contains("alice: got lock"), "{screen}");
    assert!(screen.contains("storage writes: ["), "to its end: {screen}");
    let run = projector.split("the run starts").nth(1).unwrap_or_default();
    assert!(!run.contains("carol"), "carol plays no part:\n{projector}");
}

/// A student the roll call found gone (their quit came before their start reached
/// them, so they said nothing) is gone from the first roll call that missed them,
/// not from when the room gave up on them 3 s later: the projector's steps between
/// the two that name their part say it did not happen.
#[test]
fn a_student_the_roll_call_found_gone_is_gone_from_its_first_miss_in_the_narration() {
    use fencelab::engine::log::{Event, LOG_FORMAT_VERSION};
    use fencelab::tui::app::{App, ClassSeat, Msg};
    use fencelab::tui::keys::Action;
    use fencelab::tui::theme::Theme;

    let students = names(&["alice", "bob"]);
    let lesson = fencelab::lesson::find("gc-pause").unwrap().unwrap();
    let scenario = fencelab::class::for_students(&lesson.scenario, &students);
    let mut app = App::new(scenario.clone(), false, 1.0, false, "class".into(), Theme::DEFAULT)
        .in_class(ClassSeat::Instructor);
    let told = fencelab::tui::class::class_lesson(&lesson, &students, &app.run_label());
    app = app.with_lesson(told);
    app.update(Msg::RunStarting);
    // alice takes the lock and is frozen; bob never starts, and the room, missing him
    // at its roll call at 0.5 s, gives up on him at 3.5 s.
    let kinds = [
        (
            0.0,
            EventKind::RunStarted {
                version: LOG_FORMAT_VERSION,
                run_id: "0badcafe".into(),
                scenario: std::sync::Arc::new(scenario.clone()),
                fencing: false,
                label: app.run_label(),
                backend: "class".into(),
                time_scale: 1.0,
            },
        ),
        (1.0, EventKind::Worker { worker: "alice".into(), what: WorkerEvent::Started }),
        (
            2.0,
            EventKind::Worker { worker: "alice".into(), what: WorkerEvent::Acquired { token: 1 } },
        ),
        (
            3.0,
            EventKind::Worker {
                worker: "alice".into(),
                what: WorkerEvent::Paused { ms: Some(3000), by_user: false },
            },
        ),
        (
            3500.0,
            EventKind::Left {
                student: "bob".into(),
                why: "their fencelab join has not been connected for 3 s".into(),
                gone_since_ms: Some(500.0),
            },
        ),
    ];
    let events: Vec<Event> = (kinds.into_iter().enumerate())
        .map(|(seq, (t_ms, kind))| Event { seq: seq as u64, t_ms, kind, happened_ms: None })
        .collect();
    app.update(Msg::Logged(events));
    let mut written = None;
    for _ in 0..400 {
        app.update(Msg::Clock { reached_ms: 3600.0, real_ms: 20.0 });
        let screen = support::drawn(&app, 100, 30);
        if screen.contains("▶ B has written") {
            written = Some(screen);
            break;
        }
        // The question there first: asked, revealed, closed, each with Enter.
        if app.held() || app.posed().is_some() {
            app.update(Msg::Key(Action::Continue));
        }
    }
    let written = written.unwrap_or_else(|| {
        panic!("never at 'B has written' (2.1 s):\n{}", support::drawn(&app, 100, 30))
    });
    assert!(written.contains("had bob stayed"), "{written}");
    assert!(written.contains("bob left the class at 0.5 s"), "{written}");
    assert!(written.contains("did not happen"), "{written}");
}
