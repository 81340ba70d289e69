//! Every kind of private server fencelab starts: it stops with its owner and leaves no
//! process and no temp dir behind; and a server that cannot start says why.

use crate::support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fencelab::backend::server::{PrivatePostgres, PrivateRedis, ServerError};
use support::{alive, wait_for};

/// Processes whose working directory or command line is inside `dir` (PostgreSQL's
/// backends run in its data dir, under names of their own).
fn processes_in(dir: &Path) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let in_cmdline = String::from_utf8_lossy(&cmdline).contains(&*dir.to_string_lossy());
        if (cwd.is_some_and(|c| c.starts_with(dir)) || in_cmdline) && alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// Start a server, check it runs in its dir, drop it, and check nothing is left.
fn leaves_nothing<S>(kind: &str, server: S, pid: impl Fn(&S) -> u32, dir: impl Fn(&S) -> PathBuf) {
    let (pid, dir) = (pid(&server), dir(&server));
    assert!(alive(pid), "{kind} is not running");
    assert!(dir.exists());
    assert!(processes_in(&dir).contains(&pid), "{kind} runs elsewhere");
    drop(server);
    wait_for(&format!("every {kind} process to stop"), || {
        processes_in(&dir).is_empty().then_some(())
    });
    assert!(!alive(pid), "{kind} {pid} outlived its owner");
    assert!(!dir.exists(), "{kind} left {} behind", dir.display());
}

#[test]
fn a_private_redis_server_leaves_nothing_behind() {
    leaves_nothing("redis-server", support::redis(), PrivateRedis::pid, |s| s.dir().to_path_buf());
}

#[test]
fn a_private_postgres_leaves_nothing_behind() {
    let server = PrivatePostgres::start()
        .unwrap_or_else(|e| panic!("this test needs PostgreSQL's server programs: {e}"));
    leaves_nothing("postgres", server, PrivatePostgres::pid, |s| s.dir().to_path_buf());
}

#[test]
fn a_private_etcd_leaves_nothing_behind() {
    use fencelab::backend::server::PrivateEtcd;
    let server = PrivateEtcd::start().unwrap_or_else(|e| panic!("this test needs etcd: {e}"));
    leaves_nothing("etcd", server, PrivateEtcd::pid, |s| s.dir().to_path_buf());
}

/// The JVM is fencelab's own child (not behind `zkServer.sh`), so it is the only
/// process in the dir, and SIGTERM stops it without the kill a second later.
#[test]
fn a_private_zookeeper_leaves_nothing_behind() {
    use fencelab::backend::server::PrivateZooKeeper;
    let started = std::time::Instant::now();
    let server =
        PrivateZooKeeper::start().unwrap_or_else(|e| panic!("this test needs ZooKeeper: {e}"));
    eprintln!("ZooKeeper answered after {:?}", started.elapsed());
    assert_eq!(processes_in(server.dir()), vec![server.pid()]);
    let stopping = std::time::Instant::now();
    leaves_nothing("zookeeper", server, PrivateZooKeeper::pid, |s| s.dir().to_path_buf());
    assert!(stopping.elapsed() < Duration::from_secs(1), "it needed the kill");
}

#[test]
fn a_taken_port_is_named_in_the_error() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let err = PrivateRedis::start_with(&["--port", &port, "--bind", "127.0.0.1"]).err().unwrap();
    assert!(matches!(err, ServerError::PortTaken { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "redis-server could not listen on 127.0.0.1:{port}: another program already uses that port"
        )
    );
}

#[test]
fn etcd_and_zookeeper_on_a_taken_port_say_so() {
    use fencelab::backend::server::PrivateEtcd;
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = PrivateEtcd::start_on(port, Duration::from_secs(15)).err().unwrap();
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}: another program already uses")),
        "{err}"
    );
    use fencelab::backend::server::{PrivateZooKeeper, START_TIMEOUT};
    let err = PrivateZooKeeper::start_on(port, START_TIMEOUT).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "zookeeper could not listen on 127.0.0.1:{port}: another program already uses that port"
        )
    );
}

#[test]
fn a_slow_start_gives_up_with_a_clear_error_and_stops_the_server() {
    let err = PrivatePostgres::start_within(Duration::ZERO).err().unwrap();
    let ServerError::Slow { program, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*program, "postgres");
    assert!(err.to_string().starts_with("postgres did not answer within 0ns"), "{err}");
}

/// A copy of PATH with only `redis-server` on it: every other server program is missing.
fn path_with_only_redis() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let redis = which("redis-server").expect("redis-server on the PATH");
    std::os::unix::fs::symlink(redis, dir.path().join("redis-server")).unwrap();
    dir
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

#[test]
fn a_missing_etcd_names_its_package_and_the_simulator_stands_in() {
    let path = path_with_only_redis();
    let out = support::bin()
        .args(["run", "etcd-lease", "--check"])
        .env("PATH", path.path())
        .env_remove("FENCELAB_ETCD_URL")
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let notice = "etcd is not installed (install it with: apt-get install -y etcd-server)";
    assert!(stderr.contains(notice), "{stderr}");
    assert!(stdout.contains("SIMULATOR (etcd lease lock"), "{stdout}");
}

/// A fault restarts a server from whatever thread the run's task is on (a tokio worker
/// in `block_in_place`, which may end later); the kernel's parent-death signal follows
/// the thread that spawned the child, so the server must not be spawned by that one.
#[test]
fn a_server_restarted_on_a_thread_that_ends_stays_up() {
    let mut server = support::redis();
    let server = std::thread::spawn(move || {
        server.restart().unwrap();
        server
    })
    .join()
    .unwrap();
    let pid = server.pid();
    // The thread that asked for the restart is gone; give a kill the time to land.
    let mut con = redis::Client::open(server.url()).unwrap();
    for _ in 0..20 {
        assert!(alive(pid), "the restarted server died with the thread that restarted it");
        let pong: String = redis::cmd("PING").query(&mut con).unwrap();
        assert_eq!(pong, "PONG");
        std::thread::sleep(Duration::from_millis(10));
    }
}
