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

/// `window`'s text once it shows `needle` (within 20 s; a look costs a process).
fn until(socket: &str, window: &str, needle: &str) -> String {
    support::wait_until_every(
        Duration::from_millis(50),
        Duration::from_secs(20),
        || Some(screen(socket, window)).filter(|text| text.contains(needle)),
        || {
            // The projector steers every screen: a student's stuck screen needs it too.
            let teacher = (window != "teacher").then(|| screen(socket, "teacher"));
            let teacher = teacher.map_or(String::new(), |t| format!("\nteacher's screen:\n{t}"));
            format!("{window} never showed {needle:?}:\n{}{teacher}", screen(socket, window))
        },
    )
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
fn classroom(name: &str, size: (&str, &str), flags: &str) -> (String, Server) {
    classroom_of(name, size, flags, "alice,bob")
}

/// [`classroom`] for the comma-separated `students`.
fn classroom_of(
    name: &str,
    (width, height): (&str, &str),
    flags: &str,
    students: &str,
) -> (String, Server) {
    let socket = format!("fencelab-class-{name}-{}", std::process::id());
    let server = Server(socket.clone());
    let mut new = vec!["new-session", "-d", "-s", "class", "-n", "teacher", "-x", width];
    new.extend(["-y", height]);
    new.extend(SHELL);
    assert!(tmux(&socket, &new).status.success());
    let students = format!("--students {students} --listen 127.0.0.1 --host 127.0.0.1");
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
    let urls = support::wait_for("two join commands on the teacher's screen", || {
        let urls: Vec<String> = screen(&socket, "teacher")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("fencelab join '"))
            .map(|u| u.trim_end_matches('\'').to_string())
            .collect();
        (urls.len() == 2).then_some(urls)
    });
    students_join(&socket, &urls, "--headless");
    until(&socket, "teacher", "=== class");
    // The playground: alice holds a 3 s lease and works 2.5 s; freeze her while she
    // holds it.
    until(&socket, "teacher", "alice: got lock");
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

/// The processes `window`'s shell runs (its `fencelab class` or `join`).
fn programs_in(socket: &str, window: &str) -> Vec<u32> {
    let pane = tmux(socket, &["display", "-p", "-t", window, "#{pane_pid}"]).stdout;
    children(String::from_utf8_lossy(&pane).trim().parse().unwrap())
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
    key(&socket, "teacher", "Space");
    until(&socket, "alice", "you are frozen; you still hold the lock (token 1)");
    // alice's worker is a child of her `fencelab join`, a child of her shell.
    let join = programs_in(&socket, "alice");
    let workers: Vec<u32> = join.iter().flat_map(|p| children(*p)).collect();
    assert_eq!(workers.len(), 1, "one worker under alice's join: {join:?} -> {workers:?}");
    support::wait_until(
        Duration::from_secs(5),
        || (state(workers[0]) == "T").then_some(()),
        || format!("alice's worker is {}, not T", state(workers[0])),
    );
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

/// How a student reaches the room over SSH: the real OpenSSH client, told to trust
/// this room's new host key (the projector shows its fingerprint) and to keep it
/// nowhere, offering only the password it is asked for.
const SSH_OPTIONS: &str = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
                           -o PubkeyAuthentication=no -o PreferredAuthentications=password";

/// A window `name` of `width` x `height` in which `ssh EXTRA user@127.0.0.1 -p PORT`
/// runs and is given `password` when it asks.
fn ssh_in(socket: &str, name: &str, (width, height): (&str, &str), command: &str, password: &str) {
    let mut window = vec!["new-window", "-d", "-t", "class", "-n", name];
    window.extend(SHELL);
    assert!(tmux(socket, &window).status.success());
    assert!(
        tmux(socket, &["resize-window", "-t", name, "-x", width, "-y", height]).status.success()
    );
    which_ssh();
    type_line(socket, name, command);
    until(socket, name, "password:");
    type_line(socket, name, password);
}

/// The OpenSSH client, or a failure that says how to install it.
fn which_ssh() {
    let found = Command::new("ssh").arg("-V").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "this test needs OpenSSH's client (apt-get install -y openssh-client)"
    );
}

#[test]
fn students_join_over_ssh_with_nothing_installed_answer_and_are_stopped_by_the_instructor() {
    let (socket, _server) =
        classroom_of("ssh", ("160", "48"), "gc-pause --ssh 0", "alice,bob,carol");
    // The start screen: each student's ssh command, their password, the room's host key.
    let mut seats = Vec::new();
    for name in ["alice", "bob", "carol"] {
        let text = until(&socket, "teacher", &format!(" {name}@127.0.0.1"));
        let command = text.lines().find(|l| l.trim_start().starts_with("ssh -p ")).unwrap();
        let port: u16 = command.split_whitespace().nth(2).and_then(|p| p.parse().ok()).unwrap();
        let password = text.split("then the password ").nth(1).unwrap();
        let password = password.split_whitespace().next().unwrap().to_string();
        assert!(text.contains("host key: SHA256:"), "{text}");
        seats.push((name, port, password));
        key(&socket, "teacher", "Down");
    }
    let port = seats[0].1;
    let ssh =
        |user: &str, extra: &str| format!("ssh -p {port} {SSH_OPTIONS} {extra} {user}@127.0.0.1");
    // carol guesses: refused, and not at once.
    let mut window = vec!["new-window", "-d", "-t", "class", "-n", "guess"];
    window.extend(SHELL);
    assert!(tmux(&socket, &window).status.success());
    which_ssh();
    type_line(&socket, "guess", &ssh("carol", ""));
    until(&socket, "guess", "password:");
    let guessed = Instant::now();
    type_line(&socket, "guess", "not-her-password");
    until(&socket, "guess", "Permission denied");
    assert!(
        guessed.elapsed() >= Duration::from_millis(900),
        "refused after {:?}",
        guessed.elapsed()
    );
    // carol, with her password, asks for a tunnel to the room's port and no screen
    // (`-N -L`): a connection through it is refused, and nothing comes back.
    let tunnel = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let forward = format!("-N -L {tunnel}:127.0.0.1:{port}");
    ssh_in(&socket, "tunnel", ("100", "30"), &ssh("carol", &forward), &seats[2].2);
    let mut through = support::wait_for("ssh's end of the tunnel", || {
        std::net::TcpStream::connect(("127.0.0.1", tunnel)).ok()
    });
    through.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let read = std::io::Read::read_to_end(&mut through, &mut got);
    assert!(read.is_ok() && got.is_empty(), "nothing comes through the tunnel: {read:?} {got:?}");
    until(&socket, "tunnel", "administratively prohibited");
    // alice at 80x24 and bob at 100x30, with nothing but ssh.
    ssh_in(&socket, "alice", ("80", "24"), &ssh("alice", ""), &seats[0].2);
    ssh_in(&socket, "bob", ("100", "30"), &ssh("bob", ""), &seats[1].2);
    until(&socket, "alice", "you are alice. Waiting for the instructor");
    // Her password again, from another connection, while her screen is up: told.
    ssh_in(&socket, "twice", ("80", "24"), &ssh("alice", ""), &seats[0].2);
    until(&socket, "twice", "alice is in the class already, from another connection");
    until(&socket, "teacher", "2 of 3 students joined");
    key(&socket, "teacher", "Enter");
    // The lesson's pause, sent by the instructor's fencelab: alice's worker, a process
    // on the instructor's machine (a child of the class), is stopped by the kernel.
    // The intro holds the run ~0.1 s in, where on a loaded machine alice's worker may
    // not have the lock yet: the instructor goes on to the next hold, at 1 s.
    until(&socket, "teacher", "In this class alice plays A");
    until(&socket, "teacher", "Timeline · held for the lesson · Enter goes on");
    key(&socket, "teacher", "Enter");
    until(&socket, "teacher", "The lease drains");
    until(&socket, "alice", "you are frozen; you still hold the lock (token 1)");
    let class = programs_in(&socket, "teacher");
    let stopped = support::wait_for("a stopped worker under the class", || {
        let workers = class.iter().flat_map(|p| children(*p));
        workers.filter(|w| state(*w) == "T").find(|w| {
            let line = std::fs::read(format!("/proc/{w}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&line).contains("worker")
        })
    });
    assert!(stopped > 0);
    // The instructor steps through the lesson to its question, which both answer.
    go_on_until(&socket, || screen(&socket, "teacher").contains("Question 1 · 0 of 2 answered"));
    until(&socket, "alice", "Answer: press 1 to 3");
    key(&socket, "alice", "1");
    key(&socket, "bob", "2");
    until(&socket, "teacher", "Question 1 · 2 of 2 answered");
    until(&socket, "bob", "← yours");
    key(&socket, "teacher", "Enter");
    until(&socket, "alice", "← yours, right");
    // The lesson goes on: alice wakes at 3 s and writes, stale.
    go_on_until(&socket, || screen(&socket, "alice").contains("alice token 1 ✔ ⚠ STALE"));
    // Quitting ends the class: the verdict names alice's stale write, and the students'
    // sessions are told and closed.
    key(&socket, "teacher", "q");
    until(&socket, "teacher", "checker: 1 stale write accepted (alice token 1 after bob token 2)");
    until(&socket, "alice", "fencelab: the class is over");
    // The goodbye arrives whole, then the client hangs up itself.
    until(&socket, "bob", "Connection to 127.0.0.1 closed.");
}

/// The instructor presses Enter at each of the lesson's holds (a step, a revealed
/// question) until `done`.
fn go_on_until(socket: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        let text = screen(socket, "teacher");
        assert!(Instant::now() < deadline, "the lesson never got there:\n{text}");
        if text.contains("Enter goes on") || text.contains("Enter: close") {
            key(socket, "teacher", "Enter");
            // The next hold, or the run going on, changes the screen.
            support::wait_for("the lesson to go on", || {
                (screen(socket, "teacher") != text).then_some(())
            });
        }
    }
}
