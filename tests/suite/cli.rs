//! Bad input and bad servers give a clear one-line error and a non-zero exit, never
//! a panic or a hang; passwords never appear in output or saved files.

use crate::support;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Output {
    support::bin().args(args).env_remove("REDIS_URL").output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_clean_error(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unreachable_redis_is_one_clear_line() {
    let out = run(&["run", "--redis", "redis://127.0.0.1:1"]);
    assert_clean_error(&out, 1, "cannot reach Redis at redis://127.0.0.1:1");
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn a_wrong_password_is_reported_without_showing_it() {
    let server =
        fencelab::backend::server::PrivateRedis::start_with(&["--requirepass", "right-secret"])
            .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("{}?pass=wrong-secret", server.url());
    let out = run(&["run", "--redis", &url]);
    assert_clean_error(&out, 1, "refused the credentials");
    assert!(!stderr(&out).contains("wrong-secret"));
}

#[test]
fn the_right_password_works_and_is_never_shown_or_saved() {
    let server =
        fencelab::backend::server::PrivateRedis::start_with(&["--requirepass", "right-secret"])
            .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("run.jsonl");
    let url = format!("{}?pass=right-secret", server.url());
    let out = support::bin()
        .args(["run", "--fencing", "on", "--save", saved.to_str().unwrap()])
        .env("REDIS_URL", &url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("pass=***"), "the backend line should show the redacted URL: {stdout}");
    let file = std::fs::read_to_string(&saved).unwrap();
    for text in [stdout.as_ref(), stderr(&out).as_str(), file.as_str()] {
        assert!(!text.contains("right-secret"), "password leaked: {text}");
    }
}

#[test]
fn bad_flags_are_usage_errors() {
    assert_clean_error(&run(&["run", "--fencing", "maybe"]), 2, "possible values: on, off, both");
    assert_clean_error(&run(&["run", "--speed", "0"]), 2, "out of range");
    assert_clean_error(&run(&["run", "--sim", "--redis", "redis://x"]), 2, "cannot be used with");
}

#[test]
fn an_unknown_scenario_lists_the_built_in_ones() {
    assert_clean_error(
        &run(&["run", "gc-pauze", "--sim"]),
        1,
        "no scenario named \"gc-pauze\"; built-in scenarios: playground, locks-expire",
    );
}

#[test]
fn a_malformed_scenario_file_names_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "name = \"x\"\ntitle = \"X\"\nttl_ms = 100\n[[workers]]\nname = \"A\"\nsteps = [{ do = \"jump\" }]\n")
        .unwrap();
    let out = run(&["run", path.to_str().unwrap(), "--sim"]);
    assert_clean_error(&out, 1, &format!("{}:6:", path.display()));
    assert!(stderr(&out).contains("jump"), "{}", stderr(&out));
}

#[test]
fn check_fails_when_the_outcome_differs_from_the_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrong.toml");
    let src = include_str!("../../lessons/03-gc-pause.toml")
        .replace("storage = [\"B:2\"]", "storage = [\"A:1\"]");
    std::fs::write(&path, src).unwrap();
    let out = run(&["run", path.to_str().unwrap(), "--sim", "--check"]);
    assert_clean_error(
        &out,
        1,
        "check FAILED (fencing tokens: on): storage holds [B:2], expected [A:1]",
    );
    assert!(stderr(&out).contains("check passed (fencing tokens: off)"));
}

#[test]
fn redis_dying_mid_run_ends_the_run_with_an_error_not_a_hang() {
    let server = support::redis();
    let mut child = support::bin()
        .args(["run", "gc-pause", "--fencing", "off", "--redis", &server.url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run: A holds the lock (its key is on the server), paused, and B waits.
    let mut con = support::sync_con(&server);
    support::wait_for("A's lock on the server", || {
        (redis::cmd("DBSIZE").query::<u64>(&mut con).unwrap() > 0).then_some(())
    });
    drop(server);
    support::wait_for_within(
        "the program to end after Redis died",
        Duration::from_secs(20),
        || child.try_wait().unwrap(),
    );
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The observer notices first and names the server (tests/server_lost.rs).
    assert!(err.contains("error: Redis unix://") && err.contains("went away"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unreachable_etcd_is_one_clear_line() {
    let out = run(&["run", "etcd-lease", "--etcd", "http://127.0.0.1:1"]);
    assert_clean_error(&out, 1, "cannot reach etcd at http://127.0.0.1:1: ");
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn an_etcd_url_with_a_password_is_refused_without_showing_it() {
    let out = run(&["run", "etcd-lease", "--etcd", "http://root:hunter2@127.0.0.1:1"]);
    assert_clean_error(&out, 1, "fencelab does not log in to etcd");
    assert!(!stderr(&out).contains("hunter2"), "{}", stderr(&out));
}

/// A server that accepts connections (the kernel completes the handshake for a
/// listening socket) but never answers: every etcd call has a deadline.
#[test]
fn an_etcd_that_never_answers_is_a_clear_error_not_a_hang() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let mut child = support::bin()
        .args(["run", "etcd-lease", "--etcd", &url])
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    support::wait_for_within(
        "the program to give up on an etcd that never answers",
        Duration::from_secs(20).saturating_sub(started.elapsed()),
        || child.try_wait().unwrap(),
    );
    let took = started.elapsed();
    let out = child.wait_with_output().unwrap();
    assert_clean_error(&out, 1, &format!("cannot reach etcd at {url}: no answer to /v3/"));
    assert!(took < Duration::from_secs(10), "took {took:?} to give up");
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn without_a_terminal_the_playground_points_to_the_headless_command() {
    for args in [&["--sim"][..], &["--sim", "--presenter", "--speed", "0.5", "--record", "x.cast"]]
    {
        let out = run(args);
        assert_clean_error(&out, 1, "stdout is not a terminal");
        assert!(stderr(&out).contains("fencelab run gc-pause"), "{}", stderr(&out));
    }
}

#[test]
fn the_playgrounds_options_work_without_the_play_command() {
    use fencelab::cli::{Cli, Command};
    let parse = |args: &[&str]| {
        Cli::try_parse_checked_from(std::iter::once("fencelab").chain(args.iter().copied()))
    };
    let bare = parse(&[
        "--record",
        "demo.cast",
        "--presenter",
        "--speed",
        "0.5",
        "--save",
        "run.jsonl",
        "--fencing",
        "--sim",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(bare.command.is_none());
    assert_eq!(bare.play.keep.record.as_deref(), Some(std::path::Path::new("demo.cast")));
    assert_eq!(bare.play.keep.save.as_deref(), Some(std::path::Path::new("run.jsonl")));
    assert!(bare.play.presenter && bare.play.fencing && bare.backend.sim);
    assert_eq!(bare.play.speed, 0.5);

    let play = parse(&["play", "gc-pause", "--record", "demo.cast", "--speed", "2"]).unwrap();
    let Some(Command::Play(args)) = play.command else { panic!("{play:?}") };
    assert_eq!((args.scenario.as_str(), args.options.speed), ("gc-pause", 2.0));
    assert_eq!(args.options.keep.record.as_deref(), Some(std::path::Path::new("demo.cast")));

    // Backend options may still come before any command; the playground's may not.
    assert!(matches!(parse(&["--sim", "run"]).unwrap().command, Some(Command::Run(_))));
    let err = parse(&["--presenter", "run"]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("'--presenter' is an option of the playground"), "{err}");
    assert_eq!(parse(&["--speed", "0"]).unwrap_err().exit_code(), 2);
}

#[test]
fn control_characters_from_a_scenario_file_never_reach_the_terminal_or_the_picture() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("evil.toml");
    std::fs::write(
        &file,
        r#"name = "evil"
title = "T\u001b[2J\u0007x"
summary = "s\u001b]0;pwned\u0007"
ttl_ms = 500

[[workers]]
name = "A"
steps = [{ do = "acquire" }, { do = "write", value = "v\u001b[31m" }, { do = "release" }]
"#,
    )
    .unwrap();
    let saved = dir.path().join("evil.jsonl");
    let out = run(&["run", file.to_str().unwrap(), "--sim", "--save", saved.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("T\\x1b[2J\\x07x"), "the title is shown, escaped: {text}");
    for bytes in [&out.stdout, &out.stderr] {
        assert!(!bytes.iter().any(|b| matches!(b, 0x1b | 0x07)), "{text}");
    }

    let svg = dir.path().join("evil.svg");
    let out = run(&["export", saved.to_str().unwrap(), "--svg", svg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not well-formed XML: {e}"));
    assert!(svg.contains("T\\x1b[2J\\x07x"), "{svg}");

    // A parse error quoting the file's text escapes it too.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"bad\"\n\"\u{1b}]0;pwned\u{7}\" = 1\n").unwrap();
    let out = run(&["run", bad.to_str().unwrap(), "--sim"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    for bytes in [&out.stdout, &out.stderr] {
        assert!(!bytes.iter().any(|b| matches!(b, 0x1b | 0x07)), "{}", stderr(&out));
    }
}

#[test]
fn a_server_that_is_not_redis_is_named_as_such() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.read(&mut [0u8; 1024]);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    let out = run(&["run", "--redis", &url]);
    assert_clean_error(
        &out,
        1,
        &format!("Redis at {url} did not answer like a Redis server (is it Redis?)"),
    );
    assert!(!stderr(&out).contains("Parse error"), "{}", stderr(&out));
}

#[test]
fn the_readmes_minimal_acl_is_enough_for_a_shared_redis() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let acl = readme
        .lines()
        .find(|l| l.starts_with("ACL SETUSER fencelab"))
        .expect("the README gives the ACL line");
    let server = support::redis();
    let mut con = support::sync_con(&server);
    let mut cmd = redis::cmd("ACL");
    for word in acl.split_whitespace().skip(1) {
        cmd.arg(if word == ">PASSWORD" { ">acl-secret" } else { word });
    }
    let () = cmd.query(&mut con).unwrap_or_else(|e| panic!("{acl}: {e}"));
    let url = format!("{}?user=fencelab&pass=acl-secret", server.url());
    // Script and two-step acquires, fenced and idempotent writes, renewals, releases,
    // and a queue's stream commands. The runs go side by side (each run's keys carry its
    // own run id): one after another they were half a minute of waiting on leases.
    let scenarios = ["gc-pause", "unsafe-release", "stalled-renewal", "payment-gateway", "queue"];
    let runs: Vec<(&str, Output)> = std::thread::scope(|scope| {
        let started: Vec<_> = scenarios
            .iter()
            .map(|&scenario| {
                let url = &url;
                (scenario, scope.spawn(move || run(&["run", scenario, "--redis", url])))
            })
            .collect();
        started.into_iter().map(|(scenario, run)| (scenario, run.join().unwrap())).collect()
    });
    for (scenario, out) in runs {
        assert!(out.status.success(), "{scenario}: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("FAILED") && !text.contains("NOPERM"), "{scenario}: {text}");
    }
    let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut con).unwrap();
    assert!(stats.contains("cmdstat_evalsha"), "{stats}");
    let refused = stats.lines().filter(|l| l.starts_with("cmdstat_"));
    assert!(refused.clone().all(|l| l.contains("rejected_calls=0")), "{stats}");
}
