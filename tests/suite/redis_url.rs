//! `REDIS_URL` never blocks a lesson: with it set to a Redis of the user's, every lesson
//! of the course passes `fencelab run NAME --check` (lessons that need servers of their
//! own start private ones and keep the storage on the given Redis), and none of that
//! Redis's other keys changes.

use crate::support;

use std::collections::BTreeMap;

/// A user's keys, each with its value as `DUMP` gives it, and whether it has a TTL.
fn foreign_keys(con: &mut redis::Connection) -> BTreeMap<String, (Vec<u8>, bool)> {
    let mut keys: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("COUNT")
        .arg(10_000)
        .clone()
        .iter(con)
        .unwrap()
        .map(|k: redis::RedisResult<String>| k.unwrap())
        .collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query(con).unwrap();
            let ttl: i64 = redis::cmd("PTTL").arg(&k).query(con).unwrap();
            (k, (dump, ttl > 0))
        })
        .collect()
}

#[test]
fn with_redis_url_every_lesson_passes_its_check_and_no_foreign_key_changes() {
    let server = support::redis();
    let mut con = support::sync_con(&server);
    redis::pipe()
        .cmd("SET")
        .arg("app:user:1")
        .arg("alice")
        .cmd("RPUSH")
        .arg("app:queue")
        .arg("job-1")
        .arg("job-2")
        .cmd("HSET")
        .arg("fencelab:notes")
        .arg("owner")
        .arg("someone else")
        .cmd("SET")
        .arg("fencelab-lock")
        .arg("not ours either")
        .cmd("SET")
        .arg("app:session")
        .arg("s")
        .arg("PX")
        .arg(3_600_000)
        .query::<()>(&mut con)
        .unwrap();
    let before = foreign_keys(&mut con);
    assert_eq!(before.len(), 5);

    let names: Vec<String> =
        fencelab::lesson::course().unwrap().into_iter().map(|l| l.scenario.name).collect();
    let url = server.url();
    // A few at a time (most of a lesson's time is its leases running out), not more:
    // a real run's outcome rests on its timing, and six at once on two cores once
    // made redlock-restart's node restart land late. That lesson, whose outcome turns
    // on when its restarted node is back, runs last with none of the others beside it
    // (at four at once it still came back after B asked it, in a fresh-clone CI run).
    let (alone, together): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|name| name == "redlock-restart");
    assert_eq!(alone.len(), 1, "the course has no lesson redlock-restart any more");
    let mut failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = together
            .chunks(together.len().div_ceil(4))
            .map(|chunk| s.spawn(|| failed_checks(chunk, &url)))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    failures.extend(failed_checks(&alone, &url));
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
    assert_eq!(foreign_keys(&mut con), before, "the user's keys changed, or fencelab's stayed");
}

/// `fencelab run NAME --check` on the Redis at `url` for each of `names`, one after
/// another: what each that failed (or ran on the simulator) said.
fn failed_checks(names: &[String], url: &str) -> Vec<String> {
    let mut failed = Vec::new();
    for name in names {
        let out = support::bin()
            .args(["run", name, "--check"])
            .env("REDIS_URL", url)
            .env_remove("FENCELAB_ETCD_URL")
            .env_remove("FENCELAB_POSTGRES_URL")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || err.contains("SIMULATOR") {
            failed.push(format!("{name}: {err}\n{text}"));
        }
    }
    failed
}
