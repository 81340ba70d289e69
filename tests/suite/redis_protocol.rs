//! Each step of the lock protocol, against a private real redis-server.

use crate::support;

use std::time::Duration;

use fencelab::backend::redis::RedisBackend;
use fencelab::backend::{
    AcquireReply, Keys, LockClient, LockService, Storage, StorageClient, StoredWrite, WriteCheck,
};
use fencelab::scenario::{AcquireMode, FenceCompare, ReleaseMode, RenewMode};

/// `n` lock clients and one storage client, on the same server and run keys.
async fn clients(
    server: &fencelab::backend::server::PrivateRedis,
    n: usize,
) -> (Vec<Box<dyn LockClient>>, Box<dyn StorageClient>) {
    let backend = RedisBackend::open(&server.url(), "test").unwrap();
    let keys = Keys::for_run("proto");
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(LockService::connect(&backend, &keys).await.unwrap());
    }
    (out, Storage::connect(&backend, &keys).await.unwrap())
}

fn write(worker: &str, token: u64) -> StoredWrite {
    StoredWrite { worker: worker.into(), token: Some(token), value: format!("from {worker}") }
}

#[tokio::test]
async fn nx_refuses_a_second_holder_and_tells_it_the_remaining_lease() {
    let server = support::redis();
    let (mut c, _) = clients(&server, 2).await;
    for mode in [AcquireMode::Script, AcquireMode::TwoStep] {
        c[0].cleanup().await.unwrap();
        assert_eq!(
            c[0].acquire("A:1", 5000, mode, None).await.unwrap(),
            AcquireReply::Granted { token: 1 }
        );
        match c[1].acquire("B:1", 5000, mode, None).await.unwrap() {
            AcquireReply::Busy { pttl_ms: Some(ms) } => {
                assert!(ms > 4000 && ms <= 5000, "pttl {ms}")
            }
            other => panic!("{mode:?}: a second holder must be refused, got {other:?}"),
        }
        assert_eq!(c[1].holder().await.unwrap().as_deref(), Some("A:1"));
    }
}

#[tokio::test]
async fn a_lock_without_ttl_reports_no_expiry_to_waiters() {
    let server = support::redis();
    let (mut c, _) = clients(&server, 2).await;
    assert_eq!(
        c[0].acquire("A:1", 0, AcquireMode::Script, None).await.unwrap(),
        AcquireReply::Granted { token: 1 }
    );
    assert_eq!(
        c[1].acquire("B:1", 0, AcquireMode::Script, None).await.unwrap(),
        AcquireReply::Busy { pttl_ms: None }
    );
}

#[tokio::test]
async fn compare_and_delete_refuses_a_non_owner_but_plain_del_does_not() {
    let server = support::redis();
    let (mut c, _) = clients(&server, 2).await;
    c[0].acquire("A:1", 5000, AcquireMode::Script, None).await.unwrap();
    assert!(!c[1].release("B:1", ReleaseMode::CompareAndDelete).await.unwrap());
    assert_eq!(c[1].holder().await.unwrap().as_deref(), Some("A:1"), "A's lock must survive");
    assert!(
        c[1].release("B:1", ReleaseMode::Del).await.unwrap(),
        "plain DEL deletes anyone's lock"
    );
    assert_eq!(c[1].holder().await.unwrap(), None);
    c[0].acquire("A:2", 5000, AcquireMode::Script, None).await.unwrap();
    assert!(
        c[0].release("A:2", ReleaseMode::CompareAndDelete).await.unwrap(),
        "the owner may release"
    );
}

#[tokio::test]
async fn px_expiry_frees_the_lock_for_the_next_holder() {
    let server = support::redis();
    let (mut c, _) = clients(&server, 2).await;
    let started = std::time::Instant::now();
    c[0].acquire("A:1", 100, AcquireMode::Script, None).await.unwrap();
    // B asks until Redis itself has let the 100 ms lease go; each refusal says how
    // long is left, and B is granted the next token once it is gone.
    let token = support::wait_for_async("A's lease to expire", async || {
        match c[1].acquire("B:1", 100, AcquireMode::Script, None).await.unwrap() {
            AcquireReply::Granted { token } => Some(token),
            AcquireReply::Busy { pttl_ms } => {
                assert!(pttl_ms.is_some_and(|ms| ms <= 100), "{pttl_ms:?}");
                None
            }
        }
    })
    .await;
    assert_eq!(token, 2);
    assert!(started.elapsed() >= Duration::from_millis(90), "granted before the lease ran out");
}

#[tokio::test]
async fn every_grant_gets_a_higher_token() {
    let server = support::redis();
    let (mut c, _) = clients(&server, 1).await;
    let mut tokens = Vec::new();
    for i in 0..5 {
        let value = format!("A:{i}");
        let mode = if i % 2 == 0 { AcquireMode::Script } else { AcquireMode::TwoStep };
        match c[0].acquire(&value, 5000, mode, None).await.unwrap() {
            AcquireReply::Granted { token } => tokens.push(token),
            other => panic!("expected a grant, got {other:?}"),
        }
        assert!(c[0].release(&value, ReleaseMode::CompareAndDelete).await.unwrap());
    }
    assert_eq!(tokens, vec![1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn renew_extends_only_the_owners_lease() {
    let server = support::redis();
    let (mut c, _) = clients(&server, 2).await;
    c[0].acquire("A:1", 1000, AcquireMode::Script, None).await.unwrap();
    assert!(!c[1].renew("B:1", 60_000, RenewMode::IfOwner).await.unwrap());
    assert!(c[0].renew("A:1", 60_000, RenewMode::IfOwner).await.unwrap());
    let pttl = c[1].observe().await.unwrap().pttl_ms.unwrap();
    assert!(pttl > 50_000, "the owner's renewal must extend the lease, pttl {pttl}");
}

#[tokio::test]
async fn fenced_write_rejects_a_lower_token_and_accepts_an_equal_one() {
    let server = support::redis();
    let (_, mut s) = clients(&server, 1).await;
    let allow_equal = WriteCheck::Fencing(FenceCompare::AllowEqual);
    // Each accepted write's place in Redis's own order, counted by the script.
    assert_eq!(s.write(&write("B", 2), allow_equal).await.unwrap(), Some(1));
    assert_eq!(
        s.write(&write("B", 2), allow_equal).await.unwrap(),
        Some(2),
        "the current holder may write twice"
    );
    assert_eq!(s.write(&write("A", 1), allow_equal).await.unwrap(), None, "a lower token is stale");
    assert_eq!(s.write(&write("C", 3), allow_equal).await.unwrap(), Some(3));
    let shorts: Vec<String> = s.read_all().await.unwrap().iter().map(StoredWrite::short).collect();
    assert_eq!(shorts, ["B:2", "B:2", "C:3"]);
    assert_eq!(s.observe().await.unwrap().highest, 3);
}

#[tokio::test]
async fn a_strict_fenced_write_refuses_an_equal_token() {
    let server = support::redis();
    let (_, mut s) = clients(&server, 1).await;
    let strict = WriteCheck::Fencing(FenceCompare::Strict);
    assert_eq!(s.write(&write("B", 1), strict).await.unwrap(), Some(1));
    let equal = s.write(&write("A", 1), strict).await.unwrap();
    assert_eq!(equal, None, "an equal token is refused with <");
    assert_eq!(s.write(&write("C", 2), strict).await.unwrap(), Some(2));
    let shorts: Vec<String> = s.read_all().await.unwrap().iter().map(StoredWrite::short).collect();
    assert_eq!(shorts, ["B:1", "C:2"]);
}

#[tokio::test]
async fn unfenced_storage_accepts_any_token() {
    let server = support::redis();
    let (_, mut s) = clients(&server, 1).await;
    assert_eq!(s.write(&write("B", 2), WriteCheck::None).await.unwrap(), Some(1));
    assert_eq!(s.write(&write("A", 1), WriteCheck::None).await.unwrap(), Some(2));
    let shorts: Vec<String> = s.read_all().await.unwrap().iter().map(StoredWrite::short).collect();
    assert_eq!(shorts, ["B:2", "A:1"]);
}

#[tokio::test]
async fn the_lua_that_runs_is_the_file_in_assets() {
    let server = support::redis();
    let (mut c, _) = clients(&server, 1).await;
    c[0].acquire("A:1", 1000, AcquireMode::Script, None).await.unwrap();
    let on_disk =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/lua/acquire.lua"))
            .unwrap();
    let sha = redis::Script::new(&on_disk).get_hash().to_string();
    let mut con = support::sync_con(&server);
    let loaded: Vec<bool> = redis::cmd("SCRIPT").arg("EXISTS").arg(&sha).query(&mut con).unwrap();
    assert_eq!(loaded, [true], "Redis ran a script other than assets/lua/acquire.lua");
}
