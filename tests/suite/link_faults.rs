//! A worker's link, for real: the proxy between a client and a private redis-server
//! delays what the server sends by the link's delay (measured on the wire), a cut
//! connection's writes never reach the server (checked on the server), and closing a
//! run's links leaves no listener or connection behind. The simulator's model of the
//! same faults is checked against these by the differential test (lessons 21, 22).

use crate::support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fencelab::backend::link::Links;
use fencelab::backend::proxy::Upstream;
use fencelab::backend::server::PrivateRedis;
use fencelab::scenario::{Fault, FaultKind};
use redis::Commands;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Long enough that a loaded machine's scheduling (tens of ms, at worst hundreds) never
/// reads as the delay, nor hides it.
const DELAY: Duration = Duration::from_millis(1000);

/// The links of a run whose worker A's link is delayed by [`DELAY`] at some point.
fn links() -> Links {
    let fault = Fault {
        at_ms: 0,
        node: None,
        worker: Some("A".into()),
        ms: Some(DELAY.as_millis() as u64),
        kind: FaultKind::Delay,
        on: None,
    };
    Links::new(&[fault], Duration::from_millis, &CancellationToken::new())
}

/// A private server, A's links, the address of A's proxy to the server, and a
/// connection through that proxy which has answered a `PING`.
async fn proxied() -> (PrivateRedis, Links, SocketAddr, TcpStream) {
    let server = support::redis();
    let links = links();
    let upstream = Upstream::Unix(PathBuf::from(server.url().trim_start_matches("unix://")));
    let addr = links.of("A").unwrap().dial(upstream).await.unwrap();
    let mut con = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ask(&mut con, "PING").await.0, "+PONG");
    (server, links, addr, con)
}

/// Send an inline command and read one reply line; returns it and how long it took.
async fn ask(con: &mut TcpStream, command: &str) -> (String, Duration) {
    let started = Instant::now();
    con.write_all(format!("{command}\r\n").as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), con.read(&mut byte))
            .await
            .expect("a reply within 5 s")
            .unwrap();
        assert!(n == 1, "the connection closed before the reply");
        reply.push(byte[0]);
    }
    (String::from_utf8(reply).unwrap().trim_end().to_string(), started.elapsed())
}

#[tokio::test]
async fn replies_arrive_the_links_delay_late_and_requests_on_time() {
    let (server, links, _, mut con) = proxied().await;
    let (reply, clear) = ask(&mut con, "PING").await;
    assert_eq!(reply, "+PONG");
    assert!(clear < DELAY / 2, "a clear link took {clear:?}");

    links.apply("A", FaultKind::Delay, DELAY);
    let reply = tokio::spawn(async move {
        let answer = ask(&mut con, "SET fencelab:link-test:delay 1").await;
        (answer, con)
    });
    // The request goes through at once: the key is set while the reply is still held.
    let mut direct = support::sync_con(&server);
    support::wait_for_async_within("the request to reach the server", 2 * DELAY, async || {
        direct.get::<_, Option<i64>>("fencelab:link-test:delay").unwrap()
    })
    .await;
    assert!(!reply.is_finished(), "the reply came before the request was seen on the server");
    let ((reply, late), mut con) = reply.await.unwrap();
    assert_eq!(reply, "+OK");
    assert!(late >= DELAY, "the reply came after {late:?}, before the {DELAY:?} delay");
    assert!(late < 2 * DELAY, "the reply came after {late:?}");

    links.apply("A", FaultKind::Heal, Duration::ZERO);
    let (_, healed) = ask(&mut con, "PING").await;
    assert!(healed < DELAY / 2, "a healed link took {healed:?}");
    links.close().await;
}

#[tokio::test]
async fn a_cut_connections_writes_never_reach_redis() {
    let (server, links, addr, mut cut) = proxied().await;

    links.apply("A", FaultKind::Partition, Duration::ZERO);
    // The open connection is closed by the proxy; what it still sends goes nowhere.
    let _ = cut.write_all(b"SET fencelab:link-test:cut 1\r\n").await;
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(2), cut.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the cut connection was not closed");
    // A connection opened during the partition carries nothing either, even after the heal.
    let mut during = TcpStream::connect(addr).await.unwrap();
    during.write_all(b"SET fencelab:link-test:during 1\r\n").await.unwrap();
    // A moment for the proxy to take the connection in while the link is cut: healed
    // before that, it would carry the connection as a clear one. Nothing outside the
    // proxy marks that moment (the kernel completes the handshake either way), so
    // this sleep stays.
    tokio::time::sleep(Duration::from_millis(100)).await;

    links.apply("A", FaultKind::Heal, Duration::ZERO);
    let mut after = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ask(&mut after, "SET fencelab:link-test:after 1").await.0, "+OK");
    assert_eq!(
        ask(&mut during, "PING").await.0,
        "+PONG",
        "the held connection works after the heal"
    );
    let mut direct = support::sync_con(&server);
    let get = |con: &mut redis::Connection, key: &str| con.get::<_, Option<i64>>(key).unwrap();
    assert_eq!(
        get(&mut direct, "fencelab:link-test:after"),
        Some(1),
        "the healed link carries writes"
    );
    assert_eq!(
        get(&mut direct, "fencelab:link-test:cut"),
        None,
        "a write on a cut connection arrived"
    );
    assert_eq!(
        get(&mut direct, "fencelab:link-test:during"),
        None,
        "a write sent during the partition arrived"
    );
    links.close().await;
}

#[tokio::test]
async fn closing_a_runs_links_ends_every_listener_and_connection() {
    let (_server, links, addr, mut open) = proxied().await;

    tokio::time::timeout(Duration::from_secs(2), links.close()).await.expect("the proxies stop");
    let mut rest = Vec::new();
    assert_eq!(open.read_to_end(&mut rest).await.unwrap_or(0), 0, "the connection is closed");
    // The port is free again. (Not "a connection to it is refused": a connect to a free
    // loopback port can be given that very port as its own and connect to itself.)
    let freed = tokio::net::TcpListener::bind(addr).await;
    assert!(freed.is_ok(), "the listener outlived the run's links: {freed:?}");
}

/// A worker's link reaches every server of the run, not only a single Redis: Redlock's
/// nodes, etcd (its JSON gateway, HTTP through the proxy) and a PostgreSQL storage (its
/// unix socket). On a private server of each, through one worker's link: a call goes
/// through while the link is clear, fails at once while it is cut (and what it would
/// have done never happens), goes through again after the heal, and arrives the delay
/// late while the link is slow.
mod every_server {
    use crate::support;
    use std::time::{Duration, Instant};

    use fencelab::backend::deployment::{Deployment, Shape, Targets, deploy};
    use fencelab::backend::{AcquireReply, BackendError, Keys, StoredWrite, WriteCheck};
    use fencelab::scenario::{
        AcquireMode, FaultKind, LockShape, ReleaseMode, RenewMode, StorageKind,
    };

    use super::{DELAY, links};

    /// What a call on a cut link must take at most: no waiting for a deadline.
    const AT_ONCE: Duration = Duration::from_millis(300);

    fn deployed(lock: LockShape, storage: StorageKind) -> Deployment {
        let shape = Shape { lock, storage };
        deploy(&Targets::PRIVATE, shape).unwrap_or_else(|e| panic!("this test needs servers: {e}"))
    }

    /// A run's keys (the PostgreSQL schema is named after the hex run id).
    fn keys() -> Keys {
        Keys::for_run(&format!("{:08x}", fastrand::u32(..)))
    }

    fn write(token: u64, value: &str) -> StoredWrite {
        StoredWrite { worker: "A".into(), token: Some(token), value: value.into() }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redlock_nodes_are_all_cut_off_together_and_back_after_the_heal() {
        let deployment = deployed(LockShape::Redlock { nodes: 3 }, StorageKind::Redis);
        let (links, keys) = (links(), keys());
        let link = links.of("A").unwrap();
        let mut storage = deployment.storage().connect_via(&keys, link).await.unwrap();
        let mut a = deployment.lock().connect_via(&keys, link).await.unwrap();
        let mut direct = deployment.lock().connect(&keys).await.unwrap();
        let granted = a.acquire("A:1", 5000, AcquireMode::Script, Some(storage.as_mut())).await;
        assert_eq!(granted.unwrap(), AcquireReply::Granted { token: 1 });

        links.apply("A", FaultKind::Partition, Duration::ZERO);
        let asked = Instant::now();
        assert!(!a.renew("A:1", 5000, RenewMode::IfOwner).await.unwrap(), "no node voted");
        assert!(asked.elapsed() < AT_ONCE, "a cut renewal took {:?}", asked.elapsed());
        let released = a.release("A:1", ReleaseMode::CompareAndDelete).await;
        assert!(!released.unwrap(), "a release on a cut link deleted nothing");
        let truth = direct.observe().await.unwrap();
        assert_eq!(truth.nodes, vec![Some("A:1".to_string()); 3], "every node still holds A");
        assert!(matches!(storage.next_token().await, Err(BackendError::Lost { .. })));

        links.apply("A", FaultKind::Heal, Duration::ZERO);
        assert!(a.renew("A:1", 5000, RenewMode::IfOwner).await.unwrap(), "a majority voted");
        assert_eq!(storage.next_token().await.unwrap(), 2, "the storage is reached again");

        links.apply("A", FaultKind::Delay, DELAY);
        let asked = Instant::now();
        // Later than Redlock's node timeout: every node's answer comes too late to count.
        assert!(!a.renew("A:1", 5000, RenewMode::IfOwner).await.unwrap());
        assert!(asked.elapsed() < DELAY, "the node timeout did not apply");
        a.cleanup().await.unwrap_or_default();
        direct.cleanup().await.unwrap();
        links.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcd_calls_fail_at_once_while_cut_and_arrive_late_while_delayed() {
        let deployment = deployed(LockShape::Etcd, StorageKind::Redis);
        deployment.lock().reset().await.unwrap();
        let (links, keys) = (links(), keys());
        let link = links.of("A").unwrap();
        let mut a = deployment.lock().connect_via(&keys, link).await.unwrap();
        let mut direct = deployment.lock().connect(&keys).await.unwrap();
        let granted = a.acquire("A:1", 5000, AcquireMode::Script, None).await.unwrap();
        assert!(matches!(granted, AcquireReply::Granted { .. }), "{granted:?}");

        links.apply("A", FaultKind::Partition, Duration::ZERO);
        let asked = Instant::now();
        let cut = a.renew("A:1", 5000, RenewMode::IfOwner).await;
        assert!(matches!(cut, Err(BackendError::Lost { service: "etcd", .. })), "{cut:?}");
        assert!(asked.elapsed() < AT_ONCE, "a cut call took {:?}", asked.elapsed());
        let released = a.release("A:1", ReleaseMode::CompareAndDelete).await;
        assert!(released.is_err(), "a release on a cut link went through");
        assert_eq!(direct.holder().await.unwrap().as_deref(), Some("A:1"), "A still holds it");

        links.apply("A", FaultKind::Heal, Duration::ZERO);
        assert!(a.renew("A:1", 5000, RenewMode::IfOwner).await.unwrap(), "renewed after the heal");

        links.apply("A", FaultKind::Delay, DELAY);
        let asked = Instant::now();
        assert_eq!(a.holder().await.unwrap().as_deref(), Some("A:1"));
        let late = asked.elapsed();
        assert!(late >= DELAY && late < 2 * DELAY, "a delayed call took {late:?}");
        links.apply("A", FaultKind::Heal, Duration::ZERO);
        a.release("A:1", ReleaseMode::CompareAndDelete).await.unwrap();
        direct.cleanup().await.unwrap();
        links.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_postgres_storage_is_cut_with_the_link_and_reconnected_after_the_heal() {
        let deployment = deployed(LockShape::Redis, StorageKind::Postgres);
        let (links, keys) = (links(), keys());
        let link = links.of("A").unwrap();
        let mut a = deployment.storage().connect_via(&keys, link).await.unwrap();
        let mut direct = deployment.storage().connect(&keys).await.unwrap();
        let fenced = WriteCheck::Fencing(Default::default());
        assert!(a.write(&write(1, "before"), fenced).await.unwrap().is_some());

        links.apply("A", FaultKind::Partition, Duration::ZERO);
        let asked = Instant::now();
        let cut = a.write(&write(2, "during"), fenced).await;
        assert!(matches!(cut, Err(BackendError::Lost { service: "PostgreSQL", .. })), "{cut:?}");
        assert!(asked.elapsed() < AT_ONCE, "a cut write took {:?}", asked.elapsed());

        links.apply("A", FaultKind::Heal, Duration::ZERO);
        assert!(
            a.write(&write(3, "after"), fenced).await.unwrap().is_some(),
            "a write after the heal"
        );

        links.apply("A", FaultKind::Delay, DELAY);
        let asked = Instant::now();
        let late = tokio::spawn(async move {
            let accepted = a.write(&write(4, "late"), fenced).await.unwrap();
            (accepted, asked.elapsed(), a)
        });
        // The statement runs at once: the row is there while its answer is on its way.
        support::wait_for_async_within("the write to reach PostgreSQL", DELAY, async || {
            (direct.read_all().await.unwrap().len() >= 3).then_some(())
        })
        .await;
        assert!(!late.is_finished(), "the answer came before the row was in the table");
        let (accepted, took, _a) = late.await.unwrap();
        assert_eq!(accepted, Some(3), "the third accepted write, third in the storage's order");
        assert!(took >= DELAY && took < 2 * DELAY, "a delayed write took {took:?}");
        let values: Vec<String> =
            direct.read_all().await.unwrap().into_iter().map(|w| w.value).collect();
        assert_eq!(values, ["before", "after", "late"], "nothing sent during the cut arrived");
        direct.cleanup().await.unwrap();
        links.close().await;
    }
}
