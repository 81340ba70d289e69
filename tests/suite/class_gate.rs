//! A hostile student on a private class Redis, through the class gate as `fencelab
//! class` opens it: commands she is allowed cannot freeze the Redis the class shares
//! (N1), nor swell it (N2). Each attack ran straight at Redis before the gate, where
//! an admin PING waited seconds and memory grew by GBs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use fencelab::class::RoomKeys;
use fencelab::class::gate::{self, Gate};
use fencelab::class::room::Room;
use fencelab::class::server::private_redis;

/// A room of `mallory` and `alice` on a private class Redis behind its gate: the
/// server (kept alive), its gate, the admin URL, mallory's join URL, the room's keys.
async fn room() -> (impl Drop, Gate, String, url::Url, RoomKeys, Room) {
    let (server, admin, upstream) = private_redis(2).expect("a real redis-server");
    let id = fencelab::class::new_room_id().unwrap();
    let keys = RoomKeys::new(&id);
    let names = ["mallory".to_string(), "alice".to_string()];
    let gate = gate::open("127.0.0.1", &upstream, &keys, &names).await.unwrap();
    let students_url = format!("redis://127.0.0.1:{}", gate.addr.port());
    let room = Room::open_behind(&admin, &students_url, &id, &names).await.unwrap();
    let mallory = url::Url::parse(room.seats()[0].join_url()).unwrap();
    (server, gate, admin, mallory, keys, room)
}

use fencelab::backend::resp::encode as resp;

/// Mallory's raw connection to the gate, authenticated (her AUTH's `+OK` read).
fn mallory_raw(url: &url::Url) -> TcpStream {
    let mut raw = TcpStream::connect((url.host_str().unwrap(), url.port().unwrap())).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let auth = resp(&[b"AUTH", url.username().as_bytes(), url.password().unwrap().as_bytes()]);
    raw.write_all(&auth).unwrap();
    let mut ok = [0u8; 5];
    raw.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    raw
}

/// The admin's PING round trips, in ms, sorted: `n` of them.
fn pings(admin: &mut redis::Connection, n: usize) -> Vec<f64> {
    let mut took: Vec<f64> = (0..n)
        .map(|_| {
            let start = Instant::now();
            let _: String = redis::cmd("PING").query(admin).unwrap();
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    took.sort_by(f64::total_cmp);
    took
}

fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

fn used_memory(admin: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(admin).unwrap();
    let line = info.lines().find(|l| l.starts_with("used_memory:")).unwrap();
    line["used_memory:".len()..].trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n1_unbounded_reads_and_a_pipeline_never_read_leave_the_admin_ping_under_50_ms() {
    let (_server, _gate, admin_url, mallory, keys, room) = room().await;
    let mut admin = connect(&admin_url);
    // The run's jobs stream, long (the instructor's; 200,000 entries of 100 bytes).
    for _ in 0..20 {
        let mut fill = redis::pipe();
        for i in 0..10_000 {
            fill.cmd("XADD")
                .arg(&keys.run.jobs)
                .arg("*")
                .arg("job")
                .arg(format!("{i:0>96}"))
                .ignore();
        }
        let () = fill.query(&mut admin).unwrap();
    }
    let mut raw = mallory_raw(&mallory);
    // Her own stream, and the run's: XADD without a cap, or not hers, is refused.
    let mut refused = resp(&[b"XADD", keys.run.jobs.as_bytes(), b"*", b"j", b"x"]);
    refused.extend(resp(&[b"XRANGE", keys.run.jobs.as_bytes(), b"-", b"+"]));
    raw.write_all(&refused).unwrap();
    let mut answer = vec![0u8; 400];
    let n = raw.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("-ERR fencelab's class gate: XADD only to your own"), "{answer}");
    // 1,000 pipelined whole-stream reads, never read back: each is cut to a COUNT
    // of 200 or refused, and the gate reads no more of hers while 8 are unread.
    let before = used_memory(&mut admin);
    let whole = resp(&[b"XRANGE", keys.run.jobs.as_bytes(), b"-", b"+"]);
    let counted = resp(&[b"XRANGE", keys.run.jobs.as_bytes(), b"-", b"+", b"COUNT", b"200"]);
    let mut flood = Vec::new();
    for i in 0..1000 {
        flood.extend_from_slice(if i % 2 == 0 { &whole } else { &counted });
    }
    raw.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
    let _ = raw.write_all(&flood);
    let (took, mut admin) =
        tokio::task::spawn_blocking(move || (pings(&mut admin, 40), admin)).await.unwrap();
    let p90 = took[took.len() * 9 / 10];
    eprintln!(
        "the admin's PING under attack: median {:.2} ms, p90 {p90:.2} ms",
        took[took.len() / 2]
    );
    assert!(p90 < 50.0, "the admin's PING under attack, ms: {took:?}");
    let grown = used_memory(&mut admin).saturating_sub(before);
    assert!(grown < 64 * 1024 * 1024, "Redis grew by {grown} bytes");
    drop(raw);
    room.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n2_a_400_mb_value_and_10_mb_entries_are_refused_before_they_reach_redis() {
    let (_server, _gate, admin_url, mallory, keys, room) = room().await;
    let mut admin = connect(&admin_url);
    let before = used_memory(&mut admin);
    // A 400 MB SET of the lock: refused on its header; its bytes are never read.
    let mut raw = mallory_raw(&mallory);
    let head = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{}\r\n$419430400\r\n",
        keys.run.lock.len(),
        keys.run.lock
    );
    raw.write_all(head.as_bytes()).unwrap();
    let _ = raw.write_all(&vec![b'x'; 1024 * 1024]);
    let mut answer = String::new();
    let _ = raw.read_to_string(&mut answer);
    assert!(answer.contains("an argument of 419430400 bytes"), "{answer}");
    // Ten 10 MB entries to her own stream: each refused, the connection closed.
    let own = keys.stream("mallory");
    for _ in 0..10 {
        let mut raw = mallory_raw(&mallory);
        let big = vec![b'y'; 10 * 1024 * 1024];
        let entry = resp(&[b"XADD", own.as_bytes(), b"MAXLEN", b"~", b"5000", b"*", b"f", &big]);
        let _ = raw.write_all(&entry);
        let mut answer = String::new();
        let _ = raw.read_to_string(&mut answer);
        assert!(answer.contains("(at most 16384)"), "{answer}");
    }
    let lock: Option<String> = redis::cmd("GET").arg(&keys.run.lock).query(&mut admin).unwrap();
    assert_eq!(lock, None);
    let len: u64 = redis::cmd("XLEN").arg(&own).query(&mut admin).unwrap();
    assert_eq!(len, 0);
    let grown = used_memory(&mut admin).saturating_sub(before);
    assert!(grown < 8 * 1024 * 1024, "Redis grew by {grown} bytes");
    room.close().await.unwrap();
}

/// Wrong passwords in another student's name use up none of her connections: the gate
/// seats a connection only once Redis took its password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passwords_in_alices_name_leave_her_connections_free() {
    let (_server, gate, _admin_url, _mallory, _keys, room) = room().await;
    let alice = url::Url::parse(room.seats()[1].join_url()).unwrap();
    let mut held = Vec::new();
    for _ in 0..2 * gate::MAX_CONNECTIONS {
        let mut raw = TcpStream::connect(("127.0.0.1", gate.addr.port())).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        raw.write_all(&resp(&[b"AUTH", alice.username().as_bytes(), b"guess"])).unwrap();
        let mut answer = [0u8; 10];
        let n = raw.read(&mut answer).unwrap();
        assert!(
            answer[..n].starts_with(b"-WRONGPASS"),
            "{:?}",
            String::from_utf8_lossy(&answer[..n])
        );
        held.push(raw);
    }
    let mut con = connect(alice.as_str());
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    drop(held);
    room.close().await.unwrap();
}
