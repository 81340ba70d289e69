//! A class in real terminals (tmux): the instructor's `fencelab class` in one window,
//! two students' `fencelab join` in two others, on a private redis-server on loopback.
//! The instructor types a pause: the student's worker process is stopped by the
//! kernel (state `T`), and both the projector and the student's own screen show its
//! stale write when it resumes.

use crate::support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{children, state};

const BIN: &str = env!("CARGO_BIN_EXE_fencelab");

fn tmux(socket: &str, args: &[&str]) -> Output {
    Command::new("tmux")
        .args(["-L", socket])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("this test needs tmux (apt-get install -y tmux): {e}"))
}

/// A window's text, wrapped lines joined (a join URL is longer than a line).
fn screen(socket: &str, window: &str) -> String {
    String::from_utf8_lossy(&tmux(socket, &["capture-pane", "-J", "-p", "-t", window]).stdout)
        .into_owned()
}

fn until(socket: &str, window: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = screen(socket, window);
        if text.contains(needle) {
            return text;
        }
        assert!(Instant::now() < deadline, "{window} never showed {needle:?}:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn type_line(socket: &str, window: &str, line: &str) {
    assert!(tmux(socket, &["send-keys", "-t", window, "-l", line]).status.success());
    assert!(tmux(socket, &["send-keys", "-t", window, "Enter"]).status.success());
}

/// Ends the tmux server (and what runs in it) however the test ends.
struct Server(String);

impl Drop for Server {
    fn drop(&mut self) {
        tmux(&self.0, &["kill-server"]);
    }
}

const SHELL: [&str; 6] = ["env", "PS1=$ ", support::DATA_DIR_VAR, "bash", "--norc", "--noprofile"];
/// A tmux server of its own with the instructor's window (`width` x `height`)
/// running `fencelab class` for alice and bob on loopback, with `flags`.
fn classroom(name: &str, (width, height): (&str, &str), flags: &str) -> (String, Server) {
    let socket = format!("fencelab-class-{name}-{}", std::process::id());
    let server = Server(socket.clone());
    let mut new = vec!["new-session", "-d", "-s", "class", "-n", "teacher", "-x", width];
    new.extend(["-y", height]);
    new.extend(SHELL);
    assert!(tmux(&socket, &new).status.success());
    let students = "--students alice,bob --listen 127.0.0.1 --host 127.0.0.1";
    type_line(&socket, "teacher", &format!("{BIN} class {flags} {students}"));
    (socket, server)
}

/// alice and bob each run `fencelab join` with their URL in a window of their own.
fn students_join(socket: &str, urls: &[String], flags: &str) {
    for (name, url) in ["alice", "bob"].iter().zip(urls) {
        let mut window = vec!["new-window", "-d", "-t", "class", "-n", name];
        window.extend(SHELL);
        assert!(tmux(socket, &window).status.success());
        type_line(socket, name, &format!("{BIN} join {flags} '{url}'"));
    }
}

#[test]
fn an_instructors_pause_stops_a_students_process_and_both_screens_show_the_stale_write() {
    let (socket, _server) = classroom("e2e", ("200", "60"), "--headless");
    until(&socket, "teacher", "bob:");
    let deadline = Instant::now() + Duration::from_secs(10);
    let urls = loop {
        let urls: Vec<String> = screen(&socket, "teacher")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("fencelab join '"))
            .map(|u| u.trim_end_matches('\'').to_string())
            .collect();
        if urls.len() == 2 {
            break urls;
        }
        assert!(Instant::now() < deadline, "two join commands on the teacher's screen");
        std::thread::sleep(Duration::from_millis(50));
    };
    students_join(&socket, &urls, "--headless");
    until(&socket, "teacher", "=== class");
    // The playground: alice holds a 3 s lease and works 2.5 s; freeze her at ~1 s.
    std::thread::sleep(Duration::from_millis(1000));
    type_line(&socket, "teacher", "pause alice");
    let alice = until(&socket, "alice", "SIGSTOP to process");
    let pid: u32 = alice
        .split("SIGSTOP to process ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|pid| pid.parse().ok())
        .expect("the worker's pid on alice's screen");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    assert!(stat.rsplit(')').next().is_some_and(|s| s.starts_with(" T")), "{stat}");
    // Bob takes the lock when alice's lease expires at 3 s and writes at 4 s; then
    // alice wakes, and her write lands after his.
    until(&socket, "teacher", "bob: write ACCEPTED");
    type_line(&socket, "teacher", "resume alice");
    let stale = "alice: write ACCEPTED; still own lock? no";
    until(&socket, "teacher", stale);
    until(&socket, "alice", stale);
    until(&socket, "teacher", "checker: 1 stale write accepted");
}

fn key(socket: &str, window: &str, key: &str) {
    assert!(tmux(socket, &["send-keys", "-t", window, key]).status.success());
}

#[test]
fn in_the_tui_the_instructors_hold_key_stops_a_students_process_and_both_screens_show_it() {
    let (socket, _server) = classroom("tui", ("160", "48"), "");
    // The start screen shows the selected student's join command: alice's, then bob's.
    let mut urls = Vec::new();
    for name in ["alice", "bob"] {
        let text = until(&socket, "teacher", &format!("-{name}:"));
        let url = text
            .split("fencelab join '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .expect("a join command on the start screen");
        assert!(url.contains(&format!("-{name}:")), "{text}");
        urls.push(url.to_string());
        key(&socket, "teacher", "Down");
    }
    students_join(&socket, &urls, "");
    until(&socket, "alice", "you are alice. Waiting for the instructor");
    until(&socket, "teacher", "2 of 2 students joined");
    key(&socket, "teacher", "Enter");
    // The playground: alice holds a 3 s lease and works 2.5 s; hold her at ~1 s.
    until(&socket, "alice", "alice: you hold the lock (token 1)");
    std::thread::sleep(Duration::from_millis(800));
    key(&socket, "teacher", "Space");
    until(&socket, "alice", "you are frozen; you still hold the lock (token 1)");
    // alice's worker is a child of her `fencelab join`, a child of her shell.
    let pane: u32 = String::from_utf8_lossy(
        &tmux(&socket, &["display", "-p", "-t", "alice", "#{pane_pid}"]).stdout,
    )
    .trim()
    .parse()
    .unwrap();
    let join = children(pane);
    let workers: Vec<u32> = join.iter().flat_map(|p| children(*p)).collect();
    assert_eq!(workers.len(), 1, "one worker under alice's join: {join:?} -> {workers:?}");
    let stopped = Instant::now() + Duration::from_secs(5);
    while state(workers[0]) != "T" {
        assert!(Instant::now() < stopped, "alice's worker is {}, not T", state(workers[0]));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Bob takes the lock when alice's lease expires at 3 s and writes; then alice wakes.
    until(&socket, "alice", "⚠ alice: you are frozen, and you still hold the lock (token 1)");
    until(&socket, "teacher", "bob token 2   ✔ accepted");
    key(&socket, "teacher", "Space");
    let stale = "alice token 1   ✔ ACCEPTED ⚠ STALE";
    until(&socket, "teacher", stale);
    until(&socket, "alice", stale);
    until(&socket, "bob", stale);
    // Quitting gives the terminal back, with the verdict under it.
    key(&socket, "teacher", "q");
    until(&socket, "teacher", "checker: 1 stale write accepted");
}
