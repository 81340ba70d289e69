//! A run touches only its own keys, leaves none behind, and leaves no process.

use crate::support;

use std::process::{Child, Stdio};

use support::{alive, children, wait_for};

#[test]
fn a_run_leaves_other_keys_untouched_and_its_own_keys_deleted() {
    let server = support::redis();
    let mut con = support::sync_con(&server);
    let _: () = redis::cmd("SET").arg("user:precious").arg("keep me").query(&mut con).unwrap();
    let _: () =
        redis::cmd("RPUSH").arg("fencelabish").arg("not ours either").query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut con).unwrap();

    let out = support::bin().args(["run", "gc-pause", "--redis", &server.url()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let value: String = redis::cmd("GET").arg("user:precious").query(&mut con).unwrap();
    assert_eq!(value, "keep me");
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.sort();
    assert_eq!(
        keys,
        ["fencelabish", "user:precious"],
        "the run left keys behind or removed others"
    );
    let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut con).unwrap();
    for forbidden in ["cmdstat_flushdb", "cmdstat_flushall", "cmdstat_keys", "cmdstat_scan"] {
        // This test called KEYS once itself, after the run; the program never may.
        if forbidden == "cmdstat_keys" {
            let calls =
                stats.lines().find(|l| l.starts_with("cmdstat_keys:")).map(calls_of).unwrap_or(0);
            assert_eq!(calls, 1, "only this test may call KEYS: {stats}");
        } else {
            assert!(!stats.contains(forbidden), "the program called {forbidden}: {stats}");
        }
    }
}

fn calls_of(line: &str) -> u64 {
    line.split("calls=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A private server's temp dir (not just any dir under the temp dir: the test itself
/// may run in one, and a server starts out in its parent's working dir).
fn is_server_dir(dir: &std::path::Path) -> bool {
    dir.starts_with(std::env::temp_dir())
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("fencelab-redis-server-"))
}

fn start_run() -> (Child, u32) {
    let child = support::bin()
        .args(["run", "gc-pause", "--fencing", "off"])
        .env_remove("REDIS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The program has another child, its guard (a shell), which `children` leaves out by
    // its command line; caught in the middle of its exec it has none yet, so the server
    // is found by its own.
    let server = wait_for("the private redis-server", || {
        children(pid).into_iter().find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/cmdline"))
                .is_ok_and(|line| line.contains("redis-server"))
        })
    });
    (child, server)
}

#[test]
fn the_private_server_stops_when_the_program_is_interrupted_or_terminated() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 130)] {
        let (mut child, server) = start_run();
        // redis-server rewrites its title, but it runs inside its temp dir (`--dir`).
        let dir = wait_for("redis-server to enter its dir", || {
            std::fs::read_link(format!("/proc/{server}/cwd")).ok().filter(|d| is_server_dir(d))
        });
        wait_for("the program's signal handler", || {
            support::catches(child.id(), signal).then_some(())
        });
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = wait_for("the program to exit", || child.try_wait().unwrap());
        assert_eq!(status.code(), Some(code), "signal {signal}");
        assert!(!alive(server), "redis-server {server} outlived the program (signal {signal})");
        assert!(!dir.exists(), "temp dir {} left behind", dir.display());
    }
}

#[test]
fn the_private_server_dies_even_when_the_program_is_killed() {
    let (mut child, server) = start_run();
    let dir = wait_for("redis-server to enter its dir", || {
        std::fs::read_link(format!("/proc/{server}/cwd")).ok().filter(|d| is_server_dir(d))
    });
    child.kill().unwrap(); // SIGKILL: no unwinding, no Drop; the kernel must do it.
    child.wait().unwrap();
    wait_for("redis-server to die with its parent", || (!alive(server)).then_some(()));
    // Its temp dir could not be removed by the killed program; the next server start
    // sweeps it away.
    assert!(dir.exists());
    drop(support::redis());
    assert!(!dir.exists(), "{} outlived the next start", dir.display());
}

#[test]
fn a_finished_run_leaves_no_process() {
    let (mut child, server) = start_run();
    let status = wait_for("the run to finish", || child.try_wait().unwrap());
    assert!(status.success());
    assert!(!alive(server));
}

#[test]
fn tests_own_private_servers_stop_on_drop() {
    let server = support::redis();
    let (pid, dir) = (server.pid(), server.dir().to_path_buf());
    assert!(alive(pid));
    drop(server);
    assert!(!alive(pid));
    assert!(!dir.exists());
}

#[test]
fn a_redlock_run_stops_every_node_it_started() {
    let child = support::bin()
        .args(["run", "redlock-node-dies"])
        .env_remove("REDIS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Five lock nodes and the storage's server.
    let servers = wait_for("six private redis-servers", || {
        let c = children(pid);
        (c.len() == 6).then_some(c)
    });
    let mut child = child;
    let status = wait_for("the run to finish", || child.try_wait().unwrap());
    assert!(status.success());
    for s in servers {
        assert!(!alive(s), "redis-server {s} outlived the Redlock run");
    }
}

#[test]
fn a_redlock_scenario_keeps_its_storage_on_the_given_redis_and_names_it_when_unreachable() {
    let out = support::bin()
        .args(["run", "redlock-pause", "--redis", "redis://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Redis") && err.contains("127.0.0.1:1"), "{err}");
    assert!(!err.contains("run without --redis"), "{err}");
}
