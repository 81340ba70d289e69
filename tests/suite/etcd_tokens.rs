//! etcd's revisions as tokens, counted per run from the moment the run begins
//! (`LockClient::begin`), not from when its clients connected: a search makes its next
//! trial ready while the one before still runs on the same etcd, and that one's grants
//! in between are none of the next run's. Both locks over etcd, on a real etcd and on
//! the simulator's model.

use fencelab::backend::etcd::RealEtcd;
use fencelab::backend::lock::etcd::EtcdBackend;
use fencelab::backend::lock::k8s_lease::K8sLeaseBackend;
use fencelab::backend::server::PrivateEtcd;
use fencelab::backend::sim::SimEtcd;
use fencelab::backend::{AcquireReply, Keys, LockClient, LockService};
use fencelab::scenario::{AcquireMode, ReleaseMode};

async fn granted(client: &mut Box<dyn LockClient>, value: &str) -> u64 {
    match client.acquire(value, 2000, AcquireMode::Script, None).await.unwrap() {
        AcquireReply::Granted { token } => token,
        other => panic!("{value} finds the lock free: {other:?}"),
    }
}

/// The first run takes and gives back the lock twice while the second is made ready;
/// the second's first grant is still its token 1, and its other clients (the
/// observer's) count alike.
async fn a_run_ready_early_counts_its_tokens_from_its_beginning(lock: impl LockService, run: &str) {
    lock.reset().await.unwrap();
    let (first, second) = (Keys::for_run(&format!("{run}-1")), Keys::for_run(&format!("{run}-2")));
    let mut running = lock.connect(&first).await.unwrap();
    running.begin().await.unwrap();
    // The next run is made ready (its clients connected) while the first one runs.
    let (mut ready, mut observer) =
        (lock.connect(&second).await.unwrap(), lock.connect(&second).await.unwrap());
    let mut tokens = Vec::new();
    for value in ["A:1", "A:2"] {
        tokens.push(granted(&mut running, value).await);
        assert!(running.release(value, ReleaseMode::CompareAndDelete).await.unwrap());
    }
    assert_eq!(tokens[0], 1, "the first run's first grant");
    assert!(tokens[1] > tokens[0], "{tokens:?}");
    ready.begin().await.unwrap();
    assert_eq!(granted(&mut ready, "B:1").await, 1, "the second run's first grant");
    assert_eq!(observer.observe().await.unwrap().counter, Some(1), "every client of the run");
    running.cleanup().await.unwrap();
    ready.cleanup().await.unwrap();
}

fn etcd() -> PrivateEtcd {
    PrivateEtcd::start().unwrap_or_else(|e| panic!("this test needs etcd: {e}"))
}

#[tokio::test]
async fn etcd_tokens_count_from_a_runs_beginning_on_a_real_etcd() {
    let server = etcd();
    let real = || RealEtcd::new(&server.url(), "etcd");
    a_run_ready_early_counts_its_tokens_from_its_beginning(EtcdBackend::new(real()), "e").await;
    a_run_ready_early_counts_its_tokens_from_its_beginning(K8sLeaseBackend::new(real()), "k").await;
}

#[tokio::test]
async fn etcd_tokens_count_from_a_runs_beginning_on_the_model() {
    let model = SimEtcd::default;
    a_run_ready_early_counts_its_tokens_from_its_beginning(EtcdBackend::new(model()), "e").await;
    a_run_ready_early_counts_its_tokens_from_its_beginning(K8sLeaseBackend::new(model()), "k")
        .await;
}
