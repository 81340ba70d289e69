//! `fencelab doctor`: which servers this machine has (where, which version), what is
//! missing and the line that installs it here, then the course: which lessons run on
//! real servers here and which fall back to the simulator. `fencelab lessons` marks
//! the same fallbacks.

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::backend::deployment::{Shape, Targets, programs_needed};
use crate::backend::server::{ETCD, POSTGRES, Program, REDIS, ZOOKEEPER, installed};
use crate::lesson::Lesson;
use crate::platform::{self, Package};

/// Not a server: fencelab's own end-to-end tests drive the TUI in it.
const TMUX: Program =
    Program { name: "tmux", package: Package { apt: "tmux", dnf: Some("tmux"), brew: "tmux" } };

/// How long a program may take to say its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// One line of the survey: a program, where it is, its version.
struct Row {
    program: Program,
    shown: &'static str,
    /// Where it was found, or None when missing.
    at: Option<String>,
    version: Option<String>,
}

fn survey() -> Vec<Row> {
    let find = |program: Program, shown, args: &[&str]| {
        let path = platform::find_program(program.name);
        let version = path.as_deref().and_then(|p| version(p, args));
        Row { program, shown, at: path.map(|p| p.display().to_string()), version }
    };
    let postgres = platform::postgres_bin_dir();
    let postgres = Row {
        program: POSTGRES,
        shown: "PostgreSQL",
        version: postgres.as_deref().and_then(|d| version(&d.join("postgres"), &["--version"])),
        at: postgres.map(|d| d.display().to_string()),
    };
    vec![
        find(REDIS, "redis-server", &["--version"]),
        find(ETCD, "etcd", &["--version"]),
        postgres,
        zookeeper(),
        find(TMUX, "tmux", &["-V"]),
    ]
}

/// ZooKeeper's jars and the Java that runs them: both, or it is missing.
fn zookeeper() -> Row {
    let (jars, java) = (platform::zookeeper(), platform::java());
    let at = match (&jars, &java) {
        (Some(jars), Some(java)) => {
            let java_version = version(java, &["-version"]).unwrap_or_else(|| "?".into());
            Some(format!("{} (Java {java_version}: {})", jars.location.display(), java.display()))
        }
        _ => None,
    };
    let note = match (&jars, &java) {
        (Some(jars), None) => Some(format!("jars in {}, but no Java", jars.location.display())),
        _ => None,
    };
    Row {
        program: ZOOKEEPER,
        shown: "ZooKeeper",
        version: if at.is_some() { jars.and_then(|j| j.version) } else { note },
        at,
    }
}

/// The first word that looks like a version in what `program args` prints
/// (`Redis server v=7.0.15 ...`, `etcd Version: 3.5.9`, `openjdk version "17.0.13"`).
fn version(program: &Path, args: &[&str]) -> Option<String> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let _tether = platform::tie_to_parent(&mut cmd).ok()?;
    let mut child = cmd.spawn().ok()?;
    let deadline = Instant::now() + VERSION_TIMEOUT;
    while child.try_wait().ok()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().ok()?;
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let first = text.lines().next()?;
    first
        .split_whitespace()
        .map(|w| w.trim_start_matches("v=").trim_matches('"').trim_end_matches(','))
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string)
}

/// The programs `lesson` would need here and that are missing: empty when it runs on
/// real servers.
pub fn missing_for(lesson: &Lesson, targets: &Targets) -> Vec<Program> {
    programs_needed(targets, Shape::of(&lesson.scenario))
        .into_iter()
        .filter(|p| !installed(*p))
        .collect()
}

fn names(programs: &[Program]) -> String {
    programs.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// `fencelab doctor`.
pub fn doctor(targets: &Targets) -> anyhow::Result<String> {
    let manager = match platform::package_manager() {
        platform::PackageManager::Apt => "apt",
        platform::PackageManager::Dnf => "dnf",
        platform::PackageManager::Brew => "Homebrew",
        platform::PackageManager::Unknown => "an unknown package manager",
    };
    let mut out = format!(
        "fencelab doctor: the servers fencelab can start here ({}, {manager})\n\n",
        platform::OS_NAME
    );
    let rows = survey();
    for row in &rows {
        match &row.at {
            Some(at) => out.push_str(&format!(
                "  ✓ {:<13} {:<9} {at}\n",
                row.shown,
                row.version.as_deref().unwrap_or("?")
            )),
            None => out.push_str(&format!(
                "  ✗ {:<13} missing{}: {}\n",
                row.shown,
                row.version.as_deref().map(|n| format!(" ({n})")).unwrap_or_default(),
                row.program.install_line()
            )),
        }
    }
    out.push_str("  (tmux is only for fencelab's own end-to-end tests)\n");
    let missing: Vec<Package> =
        rows.iter().filter(|r| r.at.is_none()).map(|r| r.program.package).collect();
    if missing.is_empty() {
        out.push_str("\nEverything is installed.\n");
    } else {
        out.push_str(&format!("\nInstall what is missing: {}\n", platform::install_line(&missing)));
    }
    if let Some(redis) = targets.redis {
        let shown = crate::backend::redis::redact_url(redis);
        out.push_str(&format!(
            "\nGiven Redis (--redis / REDIS_URL): {shown}: it holds one-Redis locks and every Redis storage.\n"
        ));
        out.push_str(&lapsed_rooms(redis));
        out.push_str(&format!(
            "  As a class's Redis: {}.\n",
            crate::class::server::SHARED_LEAVES_OPEN
        ));
    }
    out.push_str("\nThe course here:\n");
    let course = crate::lesson::course()?;
    let mut simulated = 0;
    for (i, lesson) in course.iter().enumerate() {
        let missing = missing_for(lesson, targets);
        let needs = programs_needed(targets, Shape::of(&lesson.scenario));
        let verdict = if targets.sim {
            "SIMULATOR (--sim)".to_string()
        } else if missing.is_empty() {
            match needs.is_empty() {
                true => "real servers (yours)".to_string(),
                false => format!("real servers ({})", names(&needs)),
            }
        } else {
            simulated += 1;
            format!("SIMULATOR ({} missing)", names(&missing))
        };
        out.push_str(&format!("  {:>2}. {:<26} {verdict}\n", i + 1, lesson.scenario.name));
    }
    let real = course.len() - simulated;
    out.push_str(&format!(
        "\n{real} of {} lessons run on real servers here, {simulated} on the simulator.\n",
        course.len()
    ));
    Ok(out)
}

/// `fencelab doctor`, printed.
/// Sweep the given Redis of the class rooms whose instructor's fencelab has gone
/// (killed: its lease lapsed, its student users left, since Redis cannot expire a
/// user), when doctor may (admin rights there); said when it removed any.
fn lapsed_rooms(url: &str) -> String {
    let swept = crate::runtime::build(false).map_err(|e| e.to_string()).and_then(|rt| {
        rt.block_on(crate::class::lease::sweep_lapsed(url)).map_err(|e| e.to_string())
    });
    match swept {
        Ok(0) => String::new(),
        Ok(users) => format!(
            "  removed {users} student user(s) of class rooms whose lease had lapsed (their instructor's fencelab gone), with those rooms' keys\n"
        ),
        // Not an admin there: the rooms are that Redis's admin's to sweep.
        Err(e) if e.contains("NOPERM") => String::new(),
        Err(e) => format!("  could not look for lapsed class rooms: {e}\n"),
    }
}

pub fn run(targets: &Targets) -> anyhow::Result<ExitCode> {
    super::to_stdout(crate::output::printable::printable(&doctor(targets)?).as_bytes())
}
