//! The exercises without a repository beside the binary (a `cargo install`): the list
//! names no repository path, and `fencelab exercises --copy NAME DIR` writes the
//! starters and the protocol's page out of the binary, leaving a learner's files be.

use crate::support;

fn fencelab(args: &[&str]) -> (std::process::Output, String) {
    let out = support::bin().args(args).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out, text)
}

#[test]
fn the_list_tells_how_to_get_the_starters_and_names_no_repository_path() {
    let (out, text) = fencelab(&["exercises"]);
    assert!(out.status.success(), "{text}");
    for name in ["safe-release", "fencing-token", "idempotency-key"] {
        assert!(text.contains(&format!("fencelab exercises --copy {name} DIR")), "{text}");
    }
    assert!(!text.contains("examples/") && !text.contains("docs/"), "{text}");
}

#[test]
fn copy_writes_the_starters_out_of_the_binary_and_keeps_a_learners_files() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("mine");
    let (out, text) = fencelab(&["exercises", "--copy", "fencing-token", into.to_str().unwrap()]);
    assert!(out.status.success(), "{text}");
    for (file, original) in [
        ("starter.py", "examples/exercises/starter.py"),
        ("starter.js", "examples/exercises/starter.js"),
        ("worker-protocol.md", "docs/worker-protocol.md"),
    ] {
        let copied = std::fs::read_to_string(into.join(file)).unwrap();
        assert_eq!(copied, std::fs::read_to_string(original).unwrap(), "{file}");
    }
    assert!(text.contains("fencelab check fencing-token --program"), "{text}");
    // Work in progress is never overwritten.
    std::fs::write(into.join("starter.py"), "# my fix\n").unwrap();
    let (out, text) = fencelab(&["exercises", "--copy", "fencing-token", into.to_str().unwrap()]);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("kept"), "{text}");
    assert_eq!(std::fs::read_to_string(into.join("starter.py")).unwrap(), "# my fix\n");
    let (out, text) = fencelab(&["exercises", "--copy", "no-such", into.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("no exercise \"no-such\": there are safe-release"), "{text}");
}

#[test]
fn the_end_of_a_lesson_points_to_the_next_one() {
    let next = fencelab::lesson::next_after("gc-pause").unwrap();
    assert!(next.contains("4. ") && next.contains("fencelab lesson check-then-write"), "{next}");
    let last = fencelab::lesson::next_after("advisory-lock").unwrap();
    assert!(last.contains("fencelab exercises"), "{last}");
    assert_eq!(fencelab::lesson::next_after("playground"), None);
}

/// A lock kind a program cannot use is refused before any server starts, naming the
/// kinds it can use: on the command line (`--program`) and in a scenario file alike.
#[test]
fn a_program_on_a_lock_it_cannot_use_is_refused_before_any_server_starts() {
    let started = std::time::Instant::now();
    let (out, text) = fencelab(&["run", "failover", "--program", "python3 my_lock.py"]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for named in ["a primary with a replica", "one Redis", "etcd", "ZooKeeper", "advisory"] {
        assert!(text.contains(named), "{named:?} in: {text}");
    }
    // No server was started for it (a private Redis pair takes longer than this).
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lease.toml");
    std::fs::write(
        &file,
        "name = \"x\"\ntitle = \"x\"\nttl_ms = 1000\nlock = \"k8s-lease\"\nprogram = [\"python3\", \"p.py\"]\n\
         [[workers]]\nname = \"A\"\nsteps = [{ do = \"acquire\" }]\n",
    )
    .unwrap();
    let (out, text) = fencelab(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("cannot take its lock on a Kubernetes-style Lease on etcd"), "{text}");
    assert!(text.contains("ZooKeeper (lock = \"zookeeper\")"), "{text}");
    assert!(text.contains("pg-boss's job queue (lock = \"pg-boss\")"), "{text}");
}

/// pg-boss's queue is taken only by a program's own pg-boss: a built-in worker on it
/// is refused at its line, before any server starts, saying what to give it.
#[test]
fn a_built_in_worker_on_pg_boss_is_refused_before_any_server_starts() {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queue.toml");
    std::fs::write(
        &file,
        "name = \"x\"\ntitle = \"x\"\nttl_ms = 1000\nlock = \"pg-boss\"\nstorage = \"postgres\"\n\
         [[workers]]\nname = \"A\"\nsteps = [{ do = \"acquire\" }]\n",
    )
    .unwrap();
    let (out, text) = fencelab(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("queue.toml:7:"), "file and line: {text}");
    assert!(text.contains("worker \"A\" has no program"), "{text}");
    assert!(text.contains("program = [...] or --program"), "{text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
}
