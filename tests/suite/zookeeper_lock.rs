//! ZooKeeper's lock recipe (`lock/zookeeper.rs`) on a real ZooKeeper and on the
//! simulator's model: the first in the queue holds the lock, the next one waits on a
//! watch and hears nothing while the holder's heartbeats go on; pausing the holder
//! stops them, its session expires, and the next in line holds the lock with a higher
//! czxid, while the holder's znode is gone. Cleanup leaves no path of the run behind.
//! And fencelab killed outright in the middle of the lesson leaves no JVM behind.

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use fencelab::backend::deployment::{Shape, Targets, deploy};
use fencelab::backend::lock::zookeeper::ZooKeeperBackend;
use fencelab::backend::server::PrivateZooKeeper;
use fencelab::backend::sim::SimZooKeeper;
use fencelab::backend::zookeeper::{RealZooKeeper, ZkEnsemble};
use fencelab::backend::{AcquireReply, Keys, LockService};
use fencelab::scenario::{AcquireMode, ReleaseMode, RenewMode};
use support::{alive, children, wait_for};
use tokio::time::{Instant, timeout};
use zookeeper_client as zk;

const LEASE_MS: u64 = 400;

async fn a_paused_holder_loses_the_lock_to_the_next_in_line(zk: impl ZkEnsemble, run: &str) {
    let lock = ZooKeeperBackend::new(zk);
    let keys = Keys::for_run(run).with_lease(LEASE_MS);
    let (mut a, mut b) = (lock.connect(&keys).await.unwrap(), lock.connect(&keys).await.unwrap());
    let mode = AcquireMode::Script;
    let AcquireReply::Granted { token: a_token } =
        a.acquire("A:1", LEASE_MS, mode, None).await.unwrap()
    else {
        panic!("A finds the queue empty")
    };
    let reply = b.acquire("B:1", LEASE_MS, mode, None).await.unwrap();
    assert!(matches!(reply, AcquireReply::Busy { .. }), "{reply:?}");
    assert!(b.listen_for_releases().await.unwrap());

    // A's heartbeats keep its session well past one timeout: B's watch stays silent.
    let heard = timeout(Duration::from_millis(3 * LEASE_MS), b.next_release()).await;
    assert!(heard.is_err(), "B woke while A's session was alive");
    assert_eq!(b.holder().await.unwrap().as_deref(), Some("A:1"));

    a.set_paused(true);
    let paused = Instant::now();
    timeout(Duration::from_secs(5), b.next_release()).await.expect("A's session expires").unwrap();
    // The last heartbeat may have left a moment before the pause, never a timeout.
    assert!(paused.elapsed() >= Duration::from_millis(LEASE_MS / 2), "{:?}", paused.elapsed());
    let AcquireReply::Granted { token: b_token } =
        b.acquire("B:1", LEASE_MS, mode, None).await.unwrap()
    else {
        panic!("B is first once A's znode went")
    };
    assert!(b_token > a_token, "czxid {b_token} after {a_token}");

    // A wakes: its calls open a new session; its znode went with the old one.
    a.set_paused(false);
    assert!(!a.renew("A:1", LEASE_MS, RenewMode::IfOwner).await.unwrap());
    assert_eq!(a.holder().await.unwrap().as_deref(), Some("B:1"));
    assert!(!a.release("A:1", ReleaseMode::CompareAndDelete).await.unwrap());
    assert!(b.release("B:1", ReleaseMode::CompareAndDelete).await.unwrap());
    assert_eq!(b.holder().await.unwrap(), None);
    b.cleanup().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_loses_the_lock_on_a_real_zookeeper_and_cleanup_removes_the_run() {
    let server = PrivateZooKeeper::start().unwrap_or_else(|e| panic!("needs ZooKeeper: {e}"));
    let real = RealZooKeeper::new(&server.address(), "ZooKeeper");
    a_paused_holder_loses_the_lock_to_the_next_in_line(real, "zk-test").await;
    let client = zk::Client::connect(&server.address()).await.unwrap();
    assert_eq!(client.check_stat("/fencelab/zk-test").await.unwrap(), None);
    assert_eq!(client.check_stat("/fencelab").await.unwrap(), None, "no other run uses it");
}

#[tokio::test(start_paused = true)]
async fn a_paused_holder_loses_the_lock_in_the_model() {
    a_paused_holder_loses_the_lock_to_the_next_in_line(SimZooKeeper::default(), "zk-test").await;
}

#[tokio::test]
async fn a_lease_zookeeper_cannot_grant_is_refused_before_any_session() {
    let keys = Keys::for_run("zk-test").with_lease(2500);
    let err = ZooKeeperBackend::new(SimZooKeeper::default()).connect(&keys).await.err().unwrap();
    assert!(err.to_string().starts_with("ZooKeeper grants sessions of 200 to 2000 ms"), "{err}");
}

/// `kill -9` of fencelab while lesson 26 runs on its private ZooKeeper: the JVM dies
/// with it (the parent-death signal), so nothing keeps the port or the memory.
#[test]
fn no_jvm_outlives_fencelab_killed_during_the_lesson() {
    let mut fencelab = support::bin()
        .args(["run", "zookeeper"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let is = |name: &'static str| {
        move |pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
        }
    };
    let jvm = wait_for("the JVM", || children(fencelab.id()).into_iter().find(is("java")));
    // The storage's redis-server starts after ZooKeeper; then the run begins: kill it
    // while A sits in its pause.
    wait_for("the storage", || children(fencelab.id()).into_iter().find(is("redis-server")));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alive(jvm));
    fencelab.kill().unwrap();
    fencelab.wait().unwrap();
    wait_for("the JVM to die with fencelab", || (!alive(jvm)).then_some(()));
}

/// A run's tokens count the zxids after its lock path's, and every transaction of the
/// ensemble takes one: another run's sessions and znodes in between move the next
/// holder's token. So no two runs share a ZooKeeper at once (the differential test's
/// runs and `break`'s real trials, both asking the deployment of lesson 26's shape),
/// or each would show tokens the other made up.
#[tokio::test(start_paused = true)]
async fn another_runs_calls_move_a_runs_tokens_so_runs_do_not_share_a_zookeeper() {
    let lesson = fencelab::scenario::builtin("zookeeper").unwrap().unwrap();
    let deployment = deploy(&Targets::SIM, Shape::of(&lesson)).unwrap();
    assert!(!deployment.lock().shared_by_runs(), "two runs at once would mix their tokens");
    let mode = AcquireMode::Script;
    let second_token = |busy: bool| async move {
        let lock = ZooKeeperBackend::new(SimZooKeeper::default());
        let keys = Keys::for_run("zk-x").with_lease(LEASE_MS);
        let mut a = lock.connect(&keys).await.unwrap();
        a.acquire("A:1", LEASE_MS, mode, None).await.unwrap();
        if busy {
            let other = Keys::for_run("zk-y").with_lease(LEASE_MS);
            let mut c = lock.connect(&other).await.unwrap();
            c.acquire("C:1", LEASE_MS, mode, None).await.unwrap();
        }
        assert!(a.release("A:1", ReleaseMode::CompareAndDelete).await.unwrap());
        let mut b = lock.connect(&keys).await.unwrap();
        match b.acquire("B:1", LEASE_MS, mode, None).await.unwrap() {
            AcquireReply::Granted { token } => token,
            reply => panic!("B finds A's znode gone: {reply:?}"),
        }
    };
    let (alone, beside_another) = (second_token(false).await, second_token(true).await);
    assert!(beside_another > alone, "B's token {beside_another} beside another run, {alone} alone");
}
