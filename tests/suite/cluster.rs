//! fencelab on a real Redis Cluster: a test starts three private masters, joins them
//! into a cluster, and runs gc-pause through `fencelab run` pointed at one node. Every
//! key of a run shares a hash tag, so the multi-key scripts never meet CROSSSLOT, and
//! the cluster client follows MOVED to whichever master owns the run's slot.

use crate::support;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Three redis-servers in cluster mode, killed (and their dirs removed) on drop.
struct Cluster {
    nodes: Vec<Child>,
    ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

/// A loopback port that is free, and whose cluster bus port (+10000) is free too.
fn free_port_pair(taken: &[u16]) -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if port < 55_000
            && !taken.contains(&port)
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
        {
            return port;
        }
    }
}

fn cli(port: u16, args: &[&str]) -> String {
    let out =
        Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn start_cluster(dir: tempfile::TempDir) -> Cluster {
    let mut ports = Vec::new();
    for _ in 0..3 {
        ports.push(free_port_pair(&ports));
    }
    let nodes = ports
        .iter()
        .map(|port| {
            let node_dir = dir.path().join(port.to_string());
            std::fs::create_dir(&node_dir).unwrap();
            Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&node_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("this test needs a real redis-server: {e}"))
        })
        .collect();
    let cluster = Cluster { nodes, ports, _dir: dir };
    for port in &cluster.ports {
        support::wait_for("the node to answer", || {
            (cli(*port, &["PING"]).trim() == "PONG").then_some(())
        });
    }
    let addresses: Vec<String> = cluster.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addresses)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stdout));
    for port in &cluster.ports {
        support::wait_for("the cluster to be ok on every node", || {
            cli(*port, &["CLUSTER", "INFO"]).contains("cluster_state:ok").then_some(())
        });
    }
    cluster
}

fn keys_on(port: u16) -> String {
    cli(port, &["--scan", "--pattern", "*"])
}

/// gc-pause, both with and without fencing, on a three-master cluster reached through
/// one node: the run behaves exactly as on a single Redis (`--check` compares it with
/// what the scenario expects), no CROSSSLOT, no MOVED error, and no key left behind.
#[test]
fn gc_pause_runs_on_a_redis_cluster_reached_through_any_node() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Path::new(dir.path()).is_dir());
    let cluster = start_cluster(dir);
    // Each run gets a fresh run id, hence a fresh slot: several runs land on
    // different masters, and the one named in the URL is not always the owner.
    for (i, port) in cluster.ports.iter().enumerate() {
        let url = format!("redis://127.0.0.1:{port}");
        let started = Instant::now();
        let out = support::bin()
            .args(["run", "gc-pause", "--redis", &url, "--check", "--speed", "4"])
            .env_remove("REDIS_URL")
            .output()
            .unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let all = format!("{stdout}\n{stderr}");
        assert!(out.status.success(), "run {i} through {url} failed:\n{all}");
        assert!(!all.contains("CROSSSLOT") && !all.contains("MOVED"), "{all}");
        // Fencing off: A's stale write is accepted; on: it is rejected.
        assert!(
            stdout.contains("checker: 1 stale write accepted (A token 1 after B token 2)"),
            "{stdout}"
        );
        assert!(stdout.contains("A: write REJECTED (stale token 1)"), "{stdout}");
        assert!(stdout.contains("checker: no stale write accepted"), "{stdout}");
        assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    }
    let mut slot_reads = 0;
    for port in &cluster.ports {
        assert_eq!(keys_on(*port).trim(), "", "a run left keys on node {port}");
        let stats = cli(*port, &["INFO", "commandstats"]);
        slot_reads += stats.lines().filter(|l| l.starts_with("cmdstat_cluster|slots:")).count();
    }
    // Six runs, six slots: at least one was not on the node its URL named (a 1 in 729
    // chance otherwise), so the cluster client read the slot map and followed MOVED.
    assert!(slot_reads > 0, "no run went through the cluster client");
}
