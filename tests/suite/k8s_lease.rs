//! The Kubernetes-style Lease (`lock/k8s_lease.rs`): its compare-and-swap on a real
//! etcd (a stale revision is refused) and on the simulator's model, and the protocol
//! over both: a contender whose clock runs fast takes over while the holder's lease
//! still runs by a true clock, and the holder's next renewal fails.

use std::time::Duration;

use fencelab::backend::etcd::{EtcdCluster, LeaseKv, RealEtcd};
use fencelab::backend::lock::k8s_lease::K8sLeaseBackend;
use fencelab::backend::server::PrivateEtcd;
use fencelab::backend::sim::SimEtcd;
use fencelab::backend::{AcquireReply, Keys, LockService};
use fencelab::scenario::{AcquireMode, ReleaseMode, RenewMode};

fn etcd() -> PrivateEtcd {
    PrivateEtcd::start().unwrap_or_else(|e| panic!("this test needs etcd: {e}"))
}

/// Create-if-absent, a swap at the current revision, and a refused swap at a stale
/// one; the key keeps the value of the last swap that was allowed.
async fn compare_and_swap_refuses_a_stale_revision(cluster: impl EtcdCluster) {
    let mut kv = cluster.connect(None).await.unwrap();
    let key = "fencelab:{cas-test}:lock";
    let first = kv.put_if(key, "a", 0, 0).await.unwrap().expect("an absent key is created");
    assert_eq!(kv.put_if(key, "b", 0, 0).await.unwrap(), None, "the key exists now");
    let second = kv.put_if(key, "c", 0, first).await.unwrap().expect("the current revision");
    assert!(second > first);
    assert_eq!(kv.put_if(key, "d", 0, first).await.unwrap(), None, "a stale revision");
    let now = kv.get(key).await.unwrap().unwrap();
    assert_eq!((now.value.as_str(), now.mod_revision), ("c", second));
    assert!(kv.delete(key, None).await.unwrap());
}

#[tokio::test]
async fn a_stale_revision_is_refused_on_a_real_etcd() {
    let server = etcd();
    compare_and_swap_refuses_a_stale_revision(RealEtcd::new(&server.url(), "etcd")).await;
}

#[tokio::test]
async fn a_stale_revision_is_refused_by_the_model() {
    compare_and_swap_refuses_a_stale_revision(SimEtcd::default()).await;
}

/// A holds a lease of `ttl_ms`; B's clock runs 4 times too fast, so it waits a quarter
/// of it, takes over with a higher token, and A's renewal then fails.
async fn a_fast_clock_takes_over_and_the_holder_steps_down(cluster: impl EtcdCluster, run: &str) {
    let ttl_ms = 400;
    let lease = K8sLeaseBackend::new(cluster);
    lease.reset().await.unwrap();
    let keys = Keys::for_run(run);
    let (mut a, mut b) = (lease.connect(&keys).await.unwrap(), lease.connect(&keys).await.unwrap());
    b.set_clock_rate(4.0);
    let AcquireReply::Granted { token: a_token } =
        a.acquire("A:1", ttl_ms, AcquireMode::Script, None).await.unwrap()
    else {
        panic!("A finds the lease free")
    };
    let reply = b.acquire("B:1", ttl_ms, AcquireMode::Script, None).await.unwrap();
    let AcquireReply::Busy { pttl_ms: Some(wait) } = reply else { panic!("{reply:?}") };
    assert!((90..=100).contains(&wait), "B waits a quarter of the lease by its clock: {wait}");
    tokio::time::sleep(Duration::from_millis(wait + 5)).await;
    let reply = b.acquire("B:1", ttl_ms, AcquireMode::Script, None).await.unwrap();
    let AcquireReply::Granted { token: b_token } = reply else { panic!("{reply:?}") };
    assert!(b_token > a_token, "the takeover's revision is the higher token");
    assert!(!a.renew("A:1", ttl_ms, RenewMode::IfOwner).await.unwrap(), "A's swap is stale");
    assert_eq!(a.holder().await.unwrap().as_deref(), Some("B:1"));
    // B gives it up: an empty holder, which the next contender takes at once.
    assert!(b.release("B:1", ReleaseMode::CompareAndDelete).await.unwrap());
    assert_eq!(a.holder().await.unwrap(), None);
    let reply = a.acquire("A:2", ttl_ms, AcquireMode::Script, None).await.unwrap();
    assert!(matches!(reply, AcquireReply::Granted { token } if token > b_token), "{reply:?}");
    a.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_fast_clock_takes_over_on_a_real_etcd() {
    let server = etcd();
    let real = RealEtcd::new(&server.url(), "etcd");
    a_fast_clock_takes_over_and_the_holder_steps_down(real, "k8s-real").await;
}

#[tokio::test(start_paused = true)]
async fn a_fast_clock_takes_over_on_the_model() {
    a_fast_clock_takes_over_and_the_holder_steps_down(SimEtcd::default(), "k8s-sim").await;
}

#[tokio::test]
async fn a_record_fencelab_did_not_write_is_a_clear_error() {
    let cluster = SimEtcd::default();
    let keys = Keys::for_run("k8s-garbage");
    cluster.connect(None).await.unwrap().put(&keys.lock, "not json", 0).await.unwrap();
    let lease = K8sLeaseBackend::new(cluster);
    let mut a = lease.connect(&keys).await.unwrap();
    let err = a.acquire("A:1", 1000, AcquireMode::Script, None).await.unwrap_err().to_string();
    assert!(err.contains("the Lease record is not one fencelab wrote"), "{err}");
}
