//! Portable by construction: nothing outside `src/platform/` names a Linux-only API or
//! path, and the portable way children die with fencelab (the guard of
//! `platform::tie_to_parent`) does it alone, with Linux's `PR_SET_PDEATHSIG` turned
//! off.

use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use support::{alive, bin, children, wait_for};

/// Names that exist on Linux only (or only in Debian's layout), and what to use instead.
const LINUX_ONLY: [(&str, &str); 14] = [
    ("prctl", "platform::tie_to_parent"),
    ("PDEATHSIG", "platform::tie_to_parent"),
    ("/proc/", "platform::process_exists"),
    ("\"/proc", "platform::process_exists"),
    ("/dev/shm", "platform::memory_dir"),
    ("/usr/lib/postgresql", "platform::postgres_bin_dir"),
    ("/usr/share/java", "platform::zookeeper"),
    ("/etc/os-release", "platform::package_manager"),
    ("CLOCK_MONOTONIC", "platform::monotonic_ns"),
    ("epoll", "tokio"),
    ("inotify", "a portable crate"),
    ("signalfd", "tokio::signal"),
    ("eventfd", "a pipe"),
    // Every call into the C library goes through the platform module.
    ("libc::", "a function of src/platform/"),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each use of a Linux-only name in `files` outside `platform`, as `file:line: name`.
fn linux_only_names(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let platform = src.join("platform");
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&platform)) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (name, instead) in LINUX_ONLY {
                if line.contains(name) {
                    let shown = file.strip_prefix(src.parent().unwrap()).unwrap_or(file);
                    found.push(format!("{}:{}: {name} (use {instead})", shown.display(), n + 1));
                }
            }
        }
    }
    found
}

#[test]
fn nothing_outside_the_platform_module_names_a_linux_only_api_or_path() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = linux_only_names(&src);
    assert!(found.is_empty(), "Linux-only names outside src/platform/:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_a_linux_only_name_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("platform")).unwrap();
    std::fs::create_dir_all(src.join("engine")).unwrap();
    std::fs::write(src.join("platform/linux.rs"), "libc::prctl(libc::PR_SET_PDEATHSIG, 9);\n")
        .unwrap();
    std::fs::write(src.join("engine/run.rs"), "fn a() {}\nlet s = read(\"/proc/self/stat\");\n")
        .unwrap();
    assert_eq!(
        linux_only_names(&src),
        [
            "src/engine/run.rs:2: /proc/ (use platform::process_exists)",
            "src/engine/run.rs:2: \"/proc (use platform::process_exists)"
        ]
    );
}

/// `fencelab` itself from the command line (not its library): what a user would see.
fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split('\0').map(String::from).collect())
        .unwrap_or_default()
}

/// Every descendant of `pid` (children, their children...).
fn descendants(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for child in children(p) {
            all.push(child);
            next.push(child);
        }
    }
    all
}

/// Start `args` with PDEATHSIG off, wait until `ready` holds for its descendants (its
/// guards left out), SIGKILL it, and wait for every process it started to end: only
/// the guards can have ended them.
fn killed_leaves_nothing(args: &[&str], ready: impl Fn(&[Vec<String>]) -> bool) {
    let mut parent = bin()
        .args(args)
        .env("FENCELAB_PDEATHSIG", "off")
        .env_remove("REDIS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = wait_for("the run's processes", || {
        let pids = descendants(parent.id());
        let lines: Vec<Vec<String>> = pids.iter().map(|p| cmdline(*p)).collect();
        ready(&lines).then_some(pids)
    });
    std::thread::sleep(Duration::from_millis(300));
    parent.kill().unwrap();
    parent.wait().unwrap();
    for pid in started {
        let what = cmdline(pid).join(" ");
        wait_for(&format!("{pid} ({what}) to end"), || (!alive(pid)).then_some(()));
    }
}

/// Whether a process runs `program` (redis-server rewrites its title into one string:
/// `/usr/bin/redis-server unix:/tmp/...`).
fn is(line: &[String], program: &str) -> bool {
    line.first().and_then(|p| p.split(' ').next()).is_some_and(|p| p.ends_with(program))
}

#[test]
fn a_sigkilled_fencelab_leaves_no_worker_process_without_pdeathsig() {
    killed_leaves_nothing(&["run", "gc-pause", "--processes", "--fencing", "off"], |lines| {
        let workers = lines.iter().filter(|l| l.get(1).is_some_and(|a| a == "worker")).count();
        workers == 2 && lines.iter().any(|l| is(l, "redis-server"))
    });
}

#[test]
fn a_sigkilled_fencelab_leaves_no_server_without_pdeathsig() {
    // Five Redlock nodes, their storage: six redis-servers.
    killed_leaves_nothing(&["run", "redlock-pause"], |lines| {
        lines.iter().filter(|l| is(l, "redis-server")).count() == 6
    });
    killed_leaves_nothing(&["run", "etcd-lease", "--fencing", "off"], |lines| {
        lines.iter().any(|l| is(l, "etcd"))
    });
    // PostgreSQL's postmaster (started after initdb), with its own children.
    killed_leaves_nothing(&["run", "postgres-fencing"], |lines| {
        lines.iter().any(|l| is(l, "postgres") && l.iter().any(|a| a == "listen_addresses="))
    });
}

/// A PATH holding only redis-server, and a search root with nothing of Homebrew's or
/// Debian's but an `/etc/os-release` saying `ID=debian`.
fn only_redis() -> (tempfile::TempDir, tempfile::TempDir) {
    let path = tempfile::tempdir().unwrap();
    let redis = fencelab::platform::find_program("redis-server").expect("redis-server installed");
    std::os::unix::fs::symlink(redis, path.path().join("redis-server")).unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/os-release"), "ID=debian\n").unwrap();
    (path, root)
}

fn fencelab_with(path: &Path, root: &Path, args: &[&str]) -> String {
    let out = bin()
        .args(args)
        .env("PATH", path)
        .env("FENCELAB_SEARCH_ROOT", root)
        .env_remove("JAVA_HOME")
        .env_remove("REDIS_URL")
        .env_remove("FENCELAB_ETCD_URL")
        .env_remove("FENCELAB_POSTGRES_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn line_with<'a>(text: &'a str, word: &str) -> &'a str {
    text.lines().find(|l| l.contains(word)).unwrap_or_else(|| panic!("no {word} in:\n{text}"))
}

#[test]
fn doctor_names_each_missing_server_its_install_line_and_the_lessons_that_fall_back() {
    let (path, root) = only_redis();
    let text = fencelab_with(path.path(), root.path(), &["doctor"]);
    assert!(line_with(&text, "redis-server").contains('✓'), "{text}");
    for (shown, package) in [
        ("etcd", "etcd-server"),
        ("PostgreSQL", "postgresql"),
        ("ZooKeeper", "zookeeper"),
        ("tmux", "tmux"),
    ] {
        let line = line_with(&text, &format!("✗ {shown}"));
        assert!(line.contains(&format!("apt-get install -y {package}")), "{line}");
    }
    let all = line_with(&text, "Install what is missing");
    assert!(all.ends_with("apt-get install -y etcd-server postgresql zookeeper tmux"), "{all}");
    for lesson in
        ["etcd-lease", "postgres-fencing", "kubernetes-lease", "zookeeper", "advisory-lock"]
    {
        assert!(line_with(&text, &format!(". {lesson} ")).contains("SIMULATOR"), "{text}");
    }
    for lesson in ["gc-pause", "redlock-pause", "failover", "queue"] {
        assert!(line_with(&text, &format!(". {lesson} ")).contains("real servers"), "{text}");
    }
    assert!(
        text.contains("20 of 29 lessons run on real servers here, 9 on the simulator"),
        "{text}"
    );

    // `fencelab lessons` marks the same ones; with everything installed, none.
    let lessons = fencelab_with(path.path(), root.path(), &["lessons"]);
    assert_eq!(lessons.matches("(SIMULATOR here").count(), 9, "{lessons}");
    assert!(lessons.contains("(SIMULATOR here: etcd missing)"), "{lessons}");
    let everything = bin().arg("lessons").env_remove("REDIS_URL").output().unwrap();
    assert!(!String::from_utf8_lossy(&everything.stdout).contains("SIMULATOR"));
}

#[test]
fn on_fedora_the_install_lines_are_dnf_and_zookeeper_is_named_as_unpackaged() {
    let (path, root) = only_redis();
    std::fs::write(root.path().join("etc/os-release"), "ID=fedora\n").unwrap();
    let text = fencelab_with(path.path(), root.path(), &["doctor"]);
    assert!(line_with(&text, "✗ PostgreSQL").contains("dnf install -y postgresql-server"));
    assert!(line_with(&text, "✗ ZooKeeper").contains("Fedora has no package for zookeeper"));
}

/// Homebrew's layout, under the search root: keg-only `postgresql@17` (the real
/// PostgreSQL's programs linked there), ZooKeeper's jars in `libexec/lib`, `openjdk`.
#[test]
fn homebrew_keg_only_postgresql_and_zookeeper_are_found_and_postgresql_runs_from_there() {
    let (path, root) = only_redis();
    let real = fencelab::platform::postgres_bin_dir().expect("PostgreSQL installed");
    let brew = root.path().join("opt/homebrew/opt");
    for (dir, links) in [
        ("postgresql@14/bin", vec![]),
        (
            "postgresql@17/bin",
            vec![("postgres", real.join("postgres")), ("initdb", real.join("initdb"))],
        ),
        ("zookeeper/libexec/lib", vec![("zookeeper-3.9.0.jar", "/dev/null".into())]),
        ("openjdk/bin", vec![("java", fencelab::platform::find_program("java").expect("java"))]),
    ] {
        std::fs::create_dir_all(brew.join(dir)).unwrap();
        for (name, target) in links {
            std::os::unix::fs::symlink(target, brew.join(dir).join(name)).unwrap();
        }
    }
    let text = fencelab_with(path.path(), root.path(), &["doctor"]);
    let postgres = line_with(&text, "PostgreSQL");
    assert!(postgres.contains('✓') && postgres.contains("opt/postgresql@17/bin"), "{text}");
    let zookeeper = line_with(&text, "ZooKeeper");
    assert!(zookeeper.contains("3.9.0") && zookeeper.contains("opt/openjdk/bin/java"), "{text}");
    // And a lesson on PostgreSQL really runs on the server found there.
    let run = fencelab_with(path.path(), root.path(), &["run", "postgres-fencing", "--check"]);
    assert!(run.contains("private PostgreSQL") && !run.contains("SIMULATOR"), "{run}");
}
