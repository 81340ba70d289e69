//! Output that never lies: every printing subcommand on a full disk (`/dev/full`) is
//! an error, and on a closed pipe ends quietly; numeric flags out of range are one
//! clear error, never a panic; a saved log's absurdly long line is refused in bounded
//! memory; an interrupted run says what became of its keys; `export` stays linear; on a
//! real etcd, which tells what is left of a lease in whole seconds, a release is never
//! told as its lease's expiry, and an expiry is always told.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The printing subcommands, each made quick: everything `fencelab --help` lists that
/// writes to stdout (the TUI's commands refuse a stdout that is not a terminal, and
/// `class`/`join` are tested with the class).
fn printing_commands() -> Vec<Vec<&'static str>> {
    vec![
        vec!["scenarios"],
        vec!["lessons"],
        vec!["completions", "bash"],
        vec!["man"],
        vec!["--sim", "run", "gc-pause"],
        vec!["--sim", "run", "gc-pause", "--json"],
        vec!["--sim", "break", "gc-pause", "--faults", "pause", "--budget", "300", "--no-confirm"],
        vec!["--sim", "bench", "handover", "--runs", "1"],
        vec!["bench", "sim", "--runs", "20", "--engine-runs", "2"],
        vec!["bench", "servers", "--runs", "1"],
        vec!["bench", "class", "--students", "2", "--events", "2"],
    ]
}

fn fencelab(args: &[&str]) -> Command {
    let mut cmd = support::bin();
    cmd.args(args).env_remove("REDIS_URL").stdin(Stdio::null()).stderr(Stdio::piped());
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn no_panic(args: &[&str], out: &Output) {
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
}

#[test]
fn every_printing_subcommand_on_a_full_disk_says_so_and_fails() {
    for args in printing_commands() {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = fencelab(&args).stdout(full).output().unwrap();
        no_panic(&args, &out);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let said: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(said.len(), 1, "{args:?}: one error line expected: {err}");
        assert!(
            said[0].contains("cannot write to stdout") && said[0].contains("output is lost"),
            "{args:?}: {err}"
        );
        assert!(said[0].contains("No space left on device"), "{args:?}: {err}");
    }
}

#[test]
fn export_to_a_full_disk_says_so_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    std::fs::write(&log, support::long_log(10, 500.0)).unwrap();
    let args = ["export", log.to_str().unwrap(), "--svg", "/dev/full"];
    let out = fencelab(&args).stdout(Stdio::null()).output().unwrap();
    no_panic(&args, &out);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: cannot write /dev/full") && err.lines().count() == 1, "{err}");
}

/// The reader has gone before the first line: every write fails with EPIPE.
#[test]
fn every_printing_subcommand_ends_quietly_when_its_reader_has_gone() {
    for args in printing_commands() {
        let mut child = fencelab(&args).stdout(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        no_panic(&args, &out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        let noise: Vec<&str> = err.lines().filter(|l| !l.starts_with("backend:")).collect();
        assert!(noise.is_empty(), "{args:?}: nothing to say about a closed pipe: {err}");
    }
}

/// As `| head -1`: the reader takes one line and goes.
#[test]
fn every_printing_subcommand_ends_quietly_after_head_1() {
    for args in printing_commands() {
        let mut child = fencelab(&args).stdout(Stdio::piped()).spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        let out = child.wait_with_output().unwrap();
        no_panic(&args, &out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
    }
}

/// Numeric flags out of range, and a design `bench break` cannot run, are refused
/// before anything starts.
#[test]
fn flags_out_of_range_are_one_clear_error() {
    for (args, code, needle) in [
        (&["break", "gc-pause", "--time", "1e20"][..], 1, "at most 86400"),
        (&["break", "gc-pause", "--time", "inf"][..], 1, "at most 86400"),
        (&["break", "gc-pause", "--time", "NaN"][..], 1, "above 0"),
        (&["break", "gc-pause", "--budget", "99999999999"][..], 2, "--budget <N>"),
        (&["break", "gc-pause", "--budget", "1e20"][..], 2, "--budget <N>"),
        (&["break", "gc-pause", "--seed", "-1"][..], 2, "--seed <SEED>"),
        (&["run", "gc-pause", "--speed", "1e20"][..], 2, "out of range"),
        (&["run", "gc-pause", "--speed", "NaN"][..], 2, "out of range"),
        (&["export", "x.jsonl", "--svg", "x.svg", "--run", "0"][..], 2, "--run <RUN>"),
        (
            &["export", "x.jsonl", "--svg", "x.svg", "--run", "99999999999999999999"][..],
            2,
            "--run <RUN>",
        ),
        (&["replay", "x.jsonl", "--run", "0"][..], 2, "--run <RUN>"),
        (&["replay", "x.jsonl", "--speed", "1e300"][..], 2, "out of range"),
        (&["bench", "handover", "--runs", "0"][..], 2, "--runs <RUNS>"),
        (&["bench", "sim", "--runs", "4294967296"][..], 2, "--runs <RUNS>"),
        (&["bench", "class", "--students", "100000"][..], 2, "--students <STUDENTS>"),
        (&["bench", "break", "--scenario", "no-such"][..], 1, "no scenario named \"no-such\""),
        (&["bench", "break", "--scenario", "failover"][..], 1, "names no program of its own"),
        (
            &["bench", "break", "--scenario", "failover", "--program", "python3 x.py"][..],
            1,
            "which a program cannot use",
        ),
    ] {
        let out = fencelab(args).stdout(Stdio::piped()).output().unwrap();
        no_panic(args, &out);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("error:") && first.contains(needle), "{args:?}: {err}");
    }
}

/// A log whose second line is 1 GiB long, streamed through a FIFO: the reader must
/// refuse it after reading a bounded part of it (so the writer is stopped long
/// before the end), naming the file and the line.
#[test]
fn a_1_gb_line_in_a_saved_log_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("huge.jsonl");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a path in our own temp dir.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let first = support::long_log(1, 100.0).lines().next().unwrap().to_string();
    let writer_path = fifo.clone();
    let writer = std::thread::spawn(move || {
        let mut file = std::fs::OpenOptions::new().write(true).open(writer_path).unwrap();
        let chunk = vec![b'x'; 1 << 16];
        let mut written: u64 = 0;
        let _ = writeln!(file, "{first}");
        let _ = file.write_all(b"{\"seq\":1,\"t_ms\":1.0,\"type\":\"worker\",\"worker\":\"");
        while written < 1 << 30 {
            if file.write_all(&chunk).is_err() {
                break; // the reader gave up: EPIPE
            }
            written += chunk.len() as u64;
        }
        written
    });
    let svg = dir.path().join("out.svg");
    let args = ["export", fifo.to_str().unwrap(), "--svg", svg.to_str().unwrap()];
    let out = fencelab(&args).stdout(Stdio::null()).output().unwrap();
    let written = writer.join().unwrap();
    no_panic(&args, &out);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}:2: the line is longer than", fifo.display())),
        "names the file and line: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // Bounded: the reader stopped within a few MB of its limit, not at 1 GiB.
    let limit = fencelab::output::load::MAX_LINE_BYTES as u64;
    assert!(written < limit + (16 << 20), "the reader took {written} bytes of the line");
}

/// How long `export` takes on a log of `text`, in the debug build these tests use.
fn export_time(text: &str) -> (Duration, Output) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    std::fs::write(&log, text).unwrap();
    let svg = dir.path().join("out.svg");
    let started = Instant::now();
    let out = fencelab(&["export", log.to_str().unwrap(), "--svg", svg.to_str().unwrap()])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    (started.elapsed(), out)
}

/// 100k events: quadratic (each label elided a character at a time), this took
/// 165 s in a debug build; linear, under a second. The bound is generous for a
/// loaded machine and far below the quadratic cost.
#[test]
fn export_of_100k_events_is_linear_enough() {
    let log = support::repeated_gc_pause(3800);
    assert!(log.lines().count() > 100_000);
    let (took, out) = export_time(&log);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn export_of_a_100k_character_worker_name_is_linear() {
    let name = "W".repeat(100_000);
    let log = support::repeated_gc_pause(10)
        .replace("\"worker\":\"A\"", &format!("\"worker\":\"{name}\""));
    let (took, out) = export_time(&log);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

/// `fencelab run` of a long pause on a private redis-server; once A is paused, the
/// server is stopped (SIGSTOP) when `stop_redis`, and the program gets SIGINT.
/// Returns stderr and the run's keys left on the server, with their TTLs.
fn interrupt_a_run(stop_redis: bool) -> (String, Vec<(String, i64)>) {
    let server = support::redis();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long-pause.toml");
    std::fs::write(
        &file,
        "name = \"long-pause\"\ntitle = \"L\"\nttl_ms = 60000\n[[workers]]\nname = \"A\"\n\
         steps = [{ do = \"acquire\" }, { do = \"write\", value = \"a\" }, { do = \"pause\", ms = 20000 }, \
         { do = \"write\", value = \"b\" }]\n",
    )
    .unwrap();
    let mut child =
        fencelab(&["run", file.to_str().unwrap(), "--redis", &server.url(), "--fencing", "on"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    assert!(lines.by_ref().any(|l| l.contains("paused")), "A never paused");
    if stop_redis {
        // SAFETY: kill(2) on the private server this test started; it is not reaped yet.
        unsafe { libc::kill(server.pid() as libc::pid_t, libc::SIGSTOP) };
        support::wait_for("the server stopped", || {
            (support::state(server.pid()) == "T").then_some(())
        });
    }
    // SAFETY: kill(2) on our own child, not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    lines.for_each(drop);
    let out = child.wait_with_output().unwrap();
    // SAFETY: as above; the server must run again to answer and to be killed on drop.
    unsafe { libc::kill(server.pid() as libc::pid_t, libc::SIGCONT) };
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let mut con = support::sync_con(&server);
    let keys: Vec<String> = redis::Commands::scan_match::<_, String>(&mut con, "fencelab:*")
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let keys = keys
        .into_iter()
        .map(|k| {
            let ttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut con).unwrap();
            (k, ttl)
        })
        .collect();
    (text(&out.stderr), keys)
}

#[test]
fn an_interrupted_run_says_what_became_of_its_keys() {
    // Redis answers: the keys are deleted, and the message says so.
    let (err, keys) = interrupt_a_run(false);
    assert!(err.contains("the run was stopped and its keys deleted"), "{err}");
    assert!(keys.is_empty(), "{keys:?}");
    // Redis stopped: nothing could be deleted, so nothing says it was; the keys are
    // there, each expiring (within about an hour and a minute).
    let (err, keys) = interrupt_a_run(true);
    assert!(!err.contains("keys deleted"), "{err}");
    assert!(
        err.contains("its keys were not deleted: they expire by themselves in about an hour"),
        "{err}"
    );
    assert!(keys.iter().any(|(k, _)| k.ends_with(":fence")), "the fence key stays: {keys:?}");
    for (key, ttl) in &keys {
        assert!((1..=3_700_000 + 120_000).contains(ttl), "{key} expires in {ttl} ms");
    }
}

/// `bench break` stopped by SIGTERM once its first row is out (the stepper's): it ends
/// at once with 130, and each path on the real server says that none of its searches
/// ran to its end, not "0/1 broke" as if one had and found nothing.
#[test]
fn bench_break_stopped_by_a_signal_says_which_searches_ran() {
    let mut child = fencelab(&["bench", "break", "--searches", "1"])
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let first = lines.by_ref().find(|l| l.starts_with("fencelab's workers, "));
    assert!(first.as_deref().is_some_and(|l| l.ends_with("1/1")), "the stepper's row: {first:?}");
    let stopped_at = Instant::now();
    // SAFETY: kill(2) on our own child, not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let rest: Vec<String> = lines.collect();
    let out = child.wait_with_output().unwrap();
    assert!(stopped_at.elapsed() < Duration::from_secs(5), "took {:?}", stopped_at.elapsed());
    assert_eq!(out.status.code(), Some(130), "{rest:?} {}", text(&out.stderr));
    let rows: Vec<_> = rest.iter().filter(|l| l.contains(", real ")).collect();
    assert_eq!(rows.len(), 3, "{rest:#?}");
    for row in rows {
        assert!(row.ends_with("0/0"), "{row}");
    }
    let stopped = rest.iter().filter(|l| l.contains("(stopped: 0 of 1 searches ran to their end)"));
    assert_eq!(stopped.count(), 3, "{rest:#?}");
}

/// Lesson 27 with its pause made 0.1 s of work (the design `break` searches): A
/// finishes the queue's only job, and B waits for a job that never comes. The
/// message names the real lease, 2000, not a lock without one.
#[test]
fn a_run_that_never_ends_is_told_in_its_own_values() {
    let lesson = std::fs::read_to_string("lessons/27-queue.toml").unwrap();
    let design = lesson.replace("{ do = \"pause\", ms = 2500 }", "{ do = \"work\", ms = 100 }");
    let design = &design[..design.find("[[variants]]").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queue-design.toml");
    std::fs::write(&file, design).unwrap();
    let args = ["--sim", "run", file.to_str().unwrap(), "--fencing", "off"];
    let out = fencelab(&args).stdout(Stdio::null()).output().unwrap();
    no_panic(&args, &out);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("(ttl_ms = 2000)") && !err.contains("ttl_ms = 0"), "{err}");
    assert!(err.contains("a worker waits for a job and none is left"), "{err}");
}

/// A transcript on a private etcd: each worker whose lease is named as expired, with
/// `fencelab run ARGS --fencing off`.
fn etcd_expiries(args: &[&str]) -> Vec<String> {
    let out = support::bin().arg("run").args(args).args(["--fencing", "off"]).output().unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{args:?}: {said}{}", text(&out.stderr));
    assert!(
        said.contains(" on private etcd "),
        "etcd is missing (apt-get install etcd-server): {said}"
    );
    let expired = said.lines().filter(|l| l.starts_with("~ ") && l.contains("'s lease expired"));
    expired.map(|l| l.split(": ").nth(1).unwrap().split('\'').next().unwrap().to_string()).collect()
}

/// etcd says "1" for a lease with 1.0-1.99 s left, and "0" for one in its last second
/// or already over; fencelab's truth lane used to take the key going away then for
/// the lease's end. Each run below on a private etcd, side by side:
/// - link-delay-etcd: A releases in its renewed lease's last second, and no lease ends;
/// - lesson 15 at speed 4: B takes the lock on a 1 s lease and releases it at once;
/// - lesson 15: A's lease runs out while it is paused (the lesson's moment), and
///   etcd drops the lease a moment before its key.
#[test]
fn on_etcd_a_release_is_never_told_as_an_expiry_and_an_expiry_always_is() {
    // (file, speed, whose expiry it must tell, whose it may tell or not)
    let runs = [
        ("tests/scenarios/link-delay-etcd.toml", None, vec![], None),
        // At speed 4, A's release and its lease's end come together: either is true.
        ("lessons/15-etcd-lease.toml", Some("4"), vec![], Some("A")),
        ("lessons/15-etcd-lease.toml", None, vec!["A"], None),
    ];
    std::thread::scope(|scope| {
        let told: Vec<_> = runs
            .iter()
            .map(|(file, speed, _, _)| {
                scope.spawn(move || {
                    let mut args = vec![*file];
                    args.extend(speed.iter().flat_map(|s| ["--speed", s]));
                    etcd_expiries(&args)
                })
            })
            .collect();
        for ((file, speed, expected, either), told) in runs.iter().zip(told) {
            let mut told = told.join().unwrap();
            told.retain(|w| Some(w.as_str()) != *either);
            assert_eq!(
                told, *expected,
                "{file} at speed {speed:?}: whose lease was told as expired"
            );
        }
    });
}

/// stderr on a full disk (`2>/dev/full`): the error line, the notices and the progress
/// lines are lost, never a panic, and the exit status is the one a writable stderr gets.
#[test]
fn a_full_stderr_loses_the_notices_but_never_panics_or_changes_the_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "--no-such-flag"],
        vec!["export", missing.to_str().unwrap(), "--svg", "x.svg"],
        vec!["--sim", "run", "no-such-scenario"],
        vec!["--sim", "break", "gc-pause", "--time", "1e20"],
        vec!["--sim", "break", "no-such-scenario"],
    ];
    for args in cases {
        let writable = fencelab(&args).stdout(Stdio::null()).output().unwrap();
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let lost = fencelab(&args).stdout(Stdio::null()).stderr(full).output().unwrap();
        let told = text(&writable.stderr);
        assert!(!told.is_empty(), "{args:?}: this case is meant to write to stderr");
        assert_ne!(lost.status.code(), Some(101), "{args:?} panicked on a full stderr");
        assert!(lost.status.code().is_some(), "{args:?} died of a signal: {:?}", lost.status);
        assert_eq!(lost.status.code(), writable.status.code(), "{args:?}: {told}");
    }
}
