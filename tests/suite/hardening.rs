//! Misbehaving servers and signals: every call has a deadline, and SIGINT, SIGTERM
//! and SIGHUP end `fencelab run` promptly whatever it waits on.

use crate::support;

use std::net::TcpListener;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str]) -> Child {
    support::bin()
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("FENCELAB_POSTGRES_URL")
        .env_remove("FENCELAB_ETCD_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for `child` to end, failing the test (and killing it) after `limit`. How long
/// it took is measured when its end is heard, not at the next look.
fn finish_within(child: Child, limit: Duration, what: &str) -> (Output, Duration) {
    let started = Instant::now();
    let pid = child.id() as libc::pid_t;
    let (ended, end) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let out = child.wait_with_output().unwrap();
        let _ = ended.send((out, started.elapsed()));
    });
    match end.recv_timeout(limit) {
        Ok(finished) => finished,
        Err(_) => {
            // SAFETY: kill(2) on our own child, not reaped yet: its waiter is still
            // waiting for it.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let (out, _) = end.recv().unwrap();
            panic!("{what}: still running after {limit:?}; stderr: {}", stderr(&out));
        }
    }
}

/// What `child` prints on stdout, as it comes: a thread reads it to its end.
fn printed(child: &mut Child) -> std::sync::Arc<std::sync::Mutex<String>> {
    use std::io::BufRead;
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (stdout, into) = (child.stdout.take().unwrap(), text.clone());
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let mut text = into.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

/// A PostgreSQL that accepts connections (the kernel completes the handshake for a
/// listening socket) and never answers: the run fails within the deadline, naming
/// PostgreSQL and the URL without its password.
#[test]
fn a_postgres_that_never_answers_is_a_clear_error_not_a_hang() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("postgresql://u:hunter2@127.0.0.1:{port}/db");
    let child = spawn(&["run", "postgres-fencing", "--postgres", &url]);
    let (out, took) = finish_within(child, Duration::from_secs(20), "silent PostgreSQL");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let shown = format!("cannot reach PostgreSQL at postgresql://u:***@127.0.0.1:{port}/db");
    assert!(err.contains(&shown), "{err}");
    assert!(err.contains("no answer to the connection within 5 s"), "{err}");
    assert!(!err.contains("hunter2") && !err.contains("PostgreSQL at PostgreSQL"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?} to give up");
}

/// While it waits on that silent PostgreSQL, each of SIGINT, SIGTERM and SIGHUP ends
/// the program within a second or two, with the documented exit code for an
/// interruption.
#[test]
fn a_signal_ends_a_run_stuck_on_a_silent_postgres() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    silent.set_nonblocking(true).unwrap();
    let url = format!("postgresql://u@{}/db", silent.local_addr().unwrap());
    // The connections taken in, held open unanswered.
    let mut held = Vec::new();
    for (sig, name) in
        [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")]
    {
        let child = spawn(&["run", "postgres-fencing", "--postgres", &url]);
        // It waits on the silent server once it has connected there, with its handler
        // for the signal installed.
        let (connection, _) =
            support::wait_for("a connection to the silent PostgreSQL", || silent.accept().ok());
        held.push(connection);
        support::wait_for(&format!("fencelab to catch {name}"), || {
            support::catches(child.id(), sig).then_some(())
        });
        signal(&child, sig);
        let (out, took) = finish_within(child, Duration::from_secs(10), name);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(130), "{name}: {err}");
        assert!(err.contains("interrupted"), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(took < Duration::from_millis(2500), "{name}: took {took:?} to stop");
    }
}

/// Every process under `pid`, depth first.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for child in support::children(pid) {
        out.push(child);
        out.extend(descendants(child));
    }
    out
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

/// The private PostgreSQL is stopped (SIGSTOP: every one of its processes) in the
/// middle of a run: SIGTERM still ends fencelab within a few seconds, and the stopped
/// server goes with it.
#[test]
fn a_signal_ends_a_run_whose_private_postgres_is_stopped() {
    use std::io::BufRead;
    let mut child = spawn(&["run", "postgres-fencing", "--speed", "0.25"]);
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        let line = line.expect("the run should start on a private PostgreSQL");
        if line.contains("got lock") {
            break;
        }
    }
    let postgres: Vec<u32> = support::children(child.id())
        .into_iter()
        .filter(|&p| comm(p) == "postgres")
        .flat_map(|p| std::iter::once(p).chain(descendants(p)))
        .collect();
    assert!(!postgres.is_empty(), "no private PostgreSQL under fencelab");
    for &p in &postgres {
        // SAFETY: kill(2) on processes of the server this test's child started.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGSTOP) };
    }
    support::wait_for("every process of the private PostgreSQL stopped (T)", || {
        postgres.iter().all(|&p| support::state(p) == "T" || !support::alive(p)).then_some(())
    });
    signal(&child, libc::SIGTERM);
    let result = finish_within(child, Duration::from_secs(15), "stopped PostgreSQL");
    for &p in &postgres {
        // SAFETY: as above; whatever is left of the server is let go and killed.
        unsafe {
            libc::kill(p as libc::pid_t, libc::SIGKILL);
            libc::kill(p as libc::pid_t, libc::SIGCONT);
        }
    }
    let (out, took) = result;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(took < Duration::from_secs(4), "took {took:?} to stop");
}

/// A scenario whose sweep would take minutes (16 lease lengths × 10,000 runs).
const LONG_SWEEP: &str = r#"
name = "long-sweep"
title = "A sweep that takes minutes"
ttl_ms = 2000
[[workers]]
name = "A"
steps = [{ do = "acquire" }, { do = "pause", ms = 3000 }, { do = "write", value = "a" }, { do = "release" }]
[[workers]]
name = "B"
start_ms = 100
steps = [{ do = "acquire" }, { do = "write", value = "b" }, { do = "release" }]
[sweep]
lease_ms = [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200, 1300, 1400, 1500, 1600]
runs = 10000
max_pause_ms = 8000
seed = 7
"#;

/// A long sweep on the simulator stops within a second of SIGTERM or SIGINT.
#[test]
fn a_signal_stops_a_long_sweep_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long-sweep.toml");
    std::fs::write(&file, LONG_SWEEP).unwrap();
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let mut child = support::bin()
            .args(["run", file.to_str().unwrap(), "--sim"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The sweep is under way once both runs before it have printed their verdicts.
        let out = printed(&mut child);
        support::wait_for("the runs before the sweep to end", || {
            let text = out.lock().unwrap();
            let fenced = text.split("=== fencing tokens: on ===").nth(1)?;
            fenced.contains("checker:").then_some(())
        });
        support::wait_for(&format!("fencelab to catch {name}"), || {
            support::catches(child.id(), sig).then_some(())
        });
        assert!(child.id() > 0);
        signal(&child, sig);
        let (out, took) = finish_within(child, Duration::from_secs(10), name);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(130), "{name}: {err}");
        assert!(err.contains("interrupted: the sweep was stopped"), "{name}: {err}");
        assert!(took < Duration::from_millis(1500), "{name}: took {took:?} to stop");
    }
}

/// One simulated run as long as the bounds allow (26 workers, hours of scenario time
/// each): SIGTERM stops it within a second.
#[test]
fn a_signal_stops_a_long_simulation_within_a_second() {
    let steps =
        vec![r#"{ do = "acquire" }, { do = "work", ms = 3600000 }, { do = "release" }"#; 300]
            .join(", ");
    let mut src = "name = \"long\"\ntitle = \"L\"\nttl_ms = 3600000\n".to_string();
    for i in 0..26 {
        src.push_str(&format!("[[workers]]\nname = \"W{i}\"\nsteps = [{steps}]\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long.toml");
    std::fs::write(&file, src).unwrap();
    let mut child = support::bin()
        .args(["run", file.to_str().unwrap(), "--sim"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The simulation is under way once its first worker has the lock.
    let out = printed(&mut child);
    support::wait_for("the simulated run to start", || {
        out.lock().unwrap().contains("W0: got lock").then_some(())
    });
    support::wait_for("fencelab to catch SIGTERM", || {
        support::catches(child.id(), libc::SIGTERM).then_some(())
    });
    signal(&child, libc::SIGTERM);
    let (out, took) = finish_within(child, Duration::from_secs(10), "long simulation");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_millis(1500), "took {took:?} to stop");
}

/// A run killed with SIGKILL cannot delete its keys: the fence counter and the storage
/// keys then carry a TTL of the run's longest length plus an hour, so they go by
/// themselves, on a shared Redis too.
#[test]
fn keys_of_a_killed_run_expire_by_themselves() {
    use redis::Commands;
    use std::io::BufRead;
    let server = support::redis();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("killed.toml");
    for (check, writes) in [("on", "storage:highest"), ("off", "applied")] {
        let scenario = format!(
            "name = \"killed\"\ntitle = \"K\"\nttl_ms = 60000\nidempotency = {}\n[[workers]]\nname = \"A\"\n\
             steps = [{{ do = \"acquire\" }}, {{ do = \"write\", value = \"a\" }}, {{ do = \"pause\", ms = 600000 }}]\n",
            check == "off"
        );
        std::fs::write(&file, scenario).unwrap();
        let mut child = support::bin()
            .args(["run", file.to_str().unwrap(), "--redis", &server.url(), "--fencing", check])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines.map_while(Result::ok) {
            if line.contains("write ACCEPTED") {
                break;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let mut con = support::sync_con(&server);
        let keys: Vec<String> = con.keys("fencelab:*").unwrap();
        assert!(keys.iter().any(|k| k.ends_with(":fence")), "{keys:?}");
        assert!(keys.iter().any(|k| k.ends_with(":storage")), "{keys:?}");
        assert!(keys.iter().any(|k| k.ends_with(writes)), "{keys:?}");
        // Longest run: 60 s lease + 600 s pause + a lease per acquire; plus an hour.
        let most = 3_600_000 + 60_000 * 2 + 600_000;
        for key in &keys {
            let pttl: i64 = con.pttl(key).unwrap();
            // The lock's TTL is its lease.
            let expected = if key.ends_with(":lock") { 1..=60_000 } else { 3_600_001..=most };
            assert!(expected.contains(&pttl), "{key}: PTTL {pttl}");
        }
        let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    }
}

/// `--help` names the environment variables but never prints their values, which can
/// hold passwords.
#[test]
fn help_never_prints_a_secret_from_the_environment() {
    for args in [&["--help"][..], &["run", "--help"], &["play", "--help"], &["-h"]] {
        let out = support::bin()
            .args(args)
            .env("REDIS_URL", "redis://:hunter2@db.example:6379")
            .env("FENCELAB_ETCD_URL", "http://root:hunter2@etcd.example:2379")
            .env("FENCELAB_POSTGRES_URL", "postgres://u:hunter2@pg.example/db")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}");
        assert!(text.contains("FENCELAB_ETCD_URL"), "{args:?}: {text}");
        // The hosts of the URLs, not the word: the help names `examples/`.
        assert!(!text.contains("hunter2") && !text.contains(".example"), "{args:?}: {text}");
    }
}

/// The private PostgreSQL (and its `initdb`) get PATH and the locale, not our
/// environment: no REDIS_URL, no FENCELAB_* and no PG* settings.
#[test]
fn the_private_postgres_gets_only_the_environment_it_needs() {
    use std::io::BufRead;
    let redis = support::redis();
    let mut child = support::bin()
        .args(["run", "postgres-fencing", "--speed", "0.25"])
        .env("REDIS_URL", redis.url())
        .env("FENCELAB_TEST_SECRET", "hunter2")
        .env("PGPASSWORD", "hunter2")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines().map_while(Result::ok);
    assert!(lines.any(|l| l.contains("got lock")), "the run should start");
    let postgres: Vec<u32> =
        support::children(child.id()).into_iter().filter(|&p| comm(p) == "postgres").collect();
    let environ: Vec<String> = postgres
        .iter()
        .map(|p| std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default())
        .map(|e| String::from_utf8_lossy(&e).replace('\0', "\n"))
        .collect();
    signal(&child, libc::SIGTERM);
    let _ = finish_within(child, Duration::from_secs(15), "postgres-fencing");
    assert_eq!(environ.len(), 1, "one private PostgreSQL under fencelab");
    let environ = &environ[0];
    assert!(environ.lines().any(|l| l.starts_with("PATH=")), "{environ}");
    for secret in ["REDIS_URL", "FENCELAB_", "PGPASSWORD", "hunter2"] {
        assert!(!environ.contains(secret), "{secret} reached PostgreSQL: {environ}");
    }
}

/// A waiter on a lock that never expires and that nobody releases would poll forever;
/// on the simulator's virtual clock, at full speed. `run --sim` stops it an hour of
/// scenario time after the run could have ended, and says why.
#[test]
fn a_simulated_run_that_cannot_end_is_stopped_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("forever.toml");
    let src = "name = \"forever\"\ntitle = \"F\"\nttl_ms = 0\n[[workers]]\nname = \"A\"\n\
               steps = [{ do = \"acquire\" }]\n[[workers]]\nname = \"B\"\nsteps = [{ do = \"acquire\" }]\n";
    std::fs::write(&file, src).unwrap();
    let child = support::bin()
        .args(["run", file.to_str().unwrap(), "--sim", "--fencing", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, _) = finish_within(child, Duration::from_secs(30), "a run that cannot end");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("a lock that never expires (ttl_ms = 0)"), "{err}");
}
