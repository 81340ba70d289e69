//! The private ZooKeeper (its clean stop and a taken port are in `servers.rs`): it stops
//! with its owner even when that is killed outright, names its package when Java is
//! missing, and its sessions really expire when their client stops heartbeating, which
//! is what the lock recipe's lease rests on.
//!
//! Some cases need a second process (one to kill, one to pause, one with no `java` on its
//! PATH): the test binary runs itself again with `ROLE` set, and [`child_role`] plays it.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fencelab::backend::server::PrivateZooKeeper;
use support::{alive, wait_for};
use zookeeper_client as zk;

const ROLE: &str = "FENCELAB_ZK_TEST_ROLE";
const ADDRESS: &str = "FENCELAB_ZK_TEST_ADDRESS";
const LOCK_PATH: &str = "/fencelab-test-lock";
/// A client call's deadline: a local server answers in milliseconds.
const CALL: Duration = Duration::from_secs(5);

fn zookeeper() -> PrivateZooKeeper {
    PrivateZooKeeper::start().unwrap_or_else(|e| panic!("this test needs ZooKeeper: {e}"))
}

/// This test binary again, running only [`child_role`] as `role`; its stdout is piped,
/// and so is its stdin, which it may hold on to (see [`held_until_let_go`]).
fn spawn_role(role: &str, env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    // The test's name in this binary: its module's path, the crate's name left out.
    let name = format!("{}::child_role", module_path!().split_once("::").map_or("", |(_, m)| m));
    cmd.args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.spawn().unwrap()
}

/// What follows `tag` on the first line the child prints with it (libtest prints the
/// test's name before the child's first words, on the same line).
fn read_tagged(child: &mut Child, tag: &str) -> String {
    let stdout = BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(at) = line.find(tag) {
            return line[at + tag.len()..].trim().to_string();
        }
    }
    panic!("the child ended without printing {tag}");
}

/// Not a test of its own: the part a child process plays (nothing without `ROLE`).
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else { return };
    match role.as_str() {
        "hold-server" => {
            let server = zookeeper();
            println!("SERVER: {} {}", server.pid(), server.dir().display());
            held_until_let_go();
        }
        "start" => match PrivateZooKeeper::start() {
            Ok(_) => println!("RESULT: started"),
            Err(e) => println!("RESULT: {e}"),
        },
        "hold-lock" => {
            let address = std::env::var(ADDRESS).unwrap();
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                let client = connect(&address, Duration::from_millis(600)).await;
                let (seq, czxid) = enqueue(&client).await;
                println!("NODE: {seq} {czxid}");
                tokio::task::spawn_blocking(held_until_let_go).await.unwrap();
            });
        }
        other => panic!("unknown role {other}"),
    }
}

/// A child's part holds what it has (a server, a session) until the test lets go of
/// it: kills it, or drops it, closing its stdin (so no child outlives its test, even
/// one that failed before killing it).
fn held_until_let_go() {
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
}

async fn connect(address: &str, session: Duration) -> zk::Client {
    let connect = zk::Client::connector().with_session_timeout(session).connect(address);
    tokio::time::timeout(CALL, connect).await.expect("connect in time").expect("connect")
}

/// Join the lock's queue: an ephemeral sequential znode. Its name and creation zxid.
async fn enqueue(client: &zk::Client) -> (String, i64) {
    let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let prefix = format!("{LOCK_PATH}/lock-");
    let create = client.create(&prefix, b"", &options);
    let (stat, seq) = tokio::time::timeout(CALL, create).await.expect("in time").expect("create");
    (format!("lock-{seq}"), stat.czxid)
}

async fn queue(client: &zk::Client) -> Vec<String> {
    let list = client.list_children(LOCK_PATH);
    let mut children = tokio::time::timeout(CALL, list).await.expect("in time").expect("list");
    children.sort();
    children
}

#[test]
fn the_jvm_dies_when_its_owner_is_killed_outright() {
    let mut owner = spawn_role("hold-server", &[]);
    let line = read_tagged(&mut owner, "SERVER:");
    let (pid, dir) = line.split_once(' ').unwrap();
    let (pid, dir): (u32, PathBuf) = (pid.parse().unwrap(), dir.into());
    assert!(alive(pid));
    owner.kill().unwrap(); // SIGKILL: no unwinding, no Drop; the kernel must stop the JVM.
    owner.wait().unwrap();
    wait_for("the JVM to die with its owner", || (!alive(pid)).then_some(()));
    // The killed owner could not remove its dir; the next start sweeps it away. That start
    // may be another test's, running beside this one (its sweep is the same), so the dir
    // may be gone already: what must hold is that it is gone once a start has run.
    drop(zookeeper());
    assert!(!dir.exists(), "{} outlived the next start", dir.display());
}

#[test]
fn a_missing_java_names_the_debian_package() {
    let empty = tempfile::tempdir().unwrap();
    let mut child = spawn_role("start", &[("PATH", &empty.path().to_string_lossy())]);
    let result = read_tagged(&mut child, "RESULT:");
    child.wait().unwrap();
    assert_eq!(
        result,
        "zookeeper is not installed (install it with: apt-get install -y zookeeper)"
    );
}

/// The recipe's lease on the real server: a holder paused with SIGSTOP stops sending
/// heartbeats, its session expires, its znode goes, and the next in line is lowest,
/// with a larger creation zxid (the fencing token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_loses_its_session_and_the_next_in_line_holds_the_lock() {
    let server = zookeeper();
    let me = connect(&server.address(), Duration::from_secs(2)).await;
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let create = me.create(LOCK_PATH, b"", &options);
    tokio::time::timeout(CALL, create).await.unwrap().unwrap();

    let mut holder = spawn_role("hold-lock", &[(ADDRESS, &server.address())]);
    let line = read_tagged(&mut holder, "NODE:");
    let (held, held_czxid) = line.split_once(' ').unwrap();
    let held_czxid: i64 = held_czxid.parse().unwrap();
    let (mine, my_czxid) = enqueue(&me).await;
    assert_eq!(queue(&me).await, vec![held.to_string(), mine.clone()], "the holder is lowest");
    assert!(my_czxid > held_czxid);

    // Still held after more than a session timeout: heartbeats keep it alive. (This
    // sleep is what the test checks, time passing with nothing to show for it: no event
    // marks a session that has *not* expired.)
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(queue(&me).await[0], held);

    let paused = Instant::now();
    unsafe { libc::kill(holder.id() as libc::pid_t, libc::SIGSTOP) };
    support::wait_for_async("the paused holder's session to expire", async || {
        (queue(&me).await[0] != held).then_some(())
    })
    .await;
    eprintln!("the paused holder's znode went {:?} after SIGSTOP", paused.elapsed());
    // The session lasts 600 ms from the last heartbeat, and the client sends one every
    // third of that: the last may have left up to 200 ms before the pause.
    assert!(paused.elapsed() >= Duration::from_millis(400), "before its session timeout");
    assert_eq!(queue(&me).await, vec![mine]);
    unsafe { libc::kill(holder.id() as libc::pid_t, libc::SIGKILL) };
    holder.wait().unwrap();
}
