//! Where each OS's packages put the servers fencelab starts, and the line that installs
//! one.
//!
//! A program is looked for on the `PATH` first, then where Homebrew puts it (both of
//! its prefixes, `/opt/homebrew` on Apple silicon and `/usr/local` on Intel Macs, and
//! Linuxbrew's), then where Debian puts what it keeps off the `PATH`. Homebrew's
//! `postgresql@NN` is keg-only (`PREFIX/opt/postgresql@NN/bin`, never on the `PATH`),
//! Debian's PostgreSQL lives in `/usr/lib/postgresql/NN/bin`; ZooKeeper is a Java
//! program, found by its jars (Debian's `/usr/share/java`, Homebrew's
//! `PREFIX/opt/zookeeper/libexec/lib`).
//!
//! `FENCELAB_SEARCH_ROOT=DIR` looks for Homebrew's and Debian's directories (and
//! `/etc/os-release`) under `DIR` instead of `/`: tests use it to hide what this
//! machine has installed, or to lay out a Homebrew of their own.

use std::path::{Path, PathBuf};

/// A program's package in each package manager (`dnf: None`: Fedora has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Package {
    pub apt: &'static str,
    pub dnf: Option<&'static str>,
    pub brew: &'static str,
}

/// The package manager of this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageManager {
    /// Debian, Ubuntu and their kin.
    Apt,
    /// Fedora, RHEL and their kin.
    Dnf,
    /// Homebrew, on macOS.
    Brew,
    /// Another Linux: Debian's package names are given as a hint.
    Unknown,
}

/// The package manager of this machine: Homebrew on macOS; on Linux the one
/// `/etc/os-release` names (its `ID` and `ID_LIKE`).
pub fn package_manager() -> PackageManager {
    if super::os::NAME == "macOS" {
        return PackageManager::Brew;
    }
    let release = std::fs::read_to_string(rooted("/etc/os-release")).unwrap_or_default();
    let ids: Vec<&str> = release
        .lines()
        .filter_map(|l| l.strip_prefix("ID=").or_else(|| l.strip_prefix("ID_LIKE=")))
        .flat_map(|v| v.trim_matches('"').split_whitespace())
        .collect();
    if ids.iter().any(|id| ["debian", "ubuntu"].contains(id)) {
        PackageManager::Apt
    } else if ids.iter().any(|id| ["fedora", "rhel", "centos"].contains(id)) {
        PackageManager::Dnf
    } else {
        PackageManager::Unknown
    }
}

/// The command that installs `packages` here, with a word for those this package
/// manager does not have ("apt-get install -y redis-server etcd-server"; as root, or
/// with sudo).
pub fn install_line(packages: &[Package]) -> String {
    let names = |f: fn(&Package) -> Option<&'static str>| {
        packages.iter().filter_map(f).collect::<Vec<_>>().join(" ")
    };
    match package_manager() {
        PackageManager::Apt => format!("apt-get install -y {}", names(|p| Some(p.apt))),
        PackageManager::Brew => format!("brew install {}", names(|p| Some(p.brew))),
        PackageManager::Unknown => {
            format!("your package manager's {} (Debian's names)", names(|p| Some(p.apt)))
        }
        PackageManager::Dnf => {
            let have = names(|p| p.dnf);
            let lacking = names(|p| p.dnf.is_none().then_some(p.apt));
            match (have.is_empty(), lacking.is_empty()) {
                (false, true) => format!("dnf install -y {have}"),
                (true, _) => format!("Fedora has no package for {lacking}: see its project's site"),
                (false, false) => format!(
                    "dnf install -y {have} (Fedora has no package for {lacking}: see its project's site)"
                ),
            }
        }
    }
}

/// The root Homebrew's and Debian's directories are looked for under: `/`, or
/// `FENCELAB_SEARCH_ROOT`.
pub fn search_root() -> PathBuf {
    std::env::var_os("FENCELAB_SEARCH_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

fn rooted(path: &str) -> PathBuf {
    search_root().join(path.trim_start_matches('/'))
}

/// Homebrew's prefixes: Apple silicon's, Intel's, Linuxbrew's.
fn homebrew_prefixes() -> Vec<PathBuf> {
    ["/opt/homebrew", "/usr/local", "/home/linuxbrew/.linuxbrew"].map(rooted).to_vec()
}

fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default()
}

/// Where `name` (a server program: `redis-server`, `etcd`, `tmux`) is: on the PATH,
/// else in a Homebrew prefix's `bin`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let brew = homebrew_prefixes().into_iter().map(|p| p.join("bin"));
    path_dirs().into_iter().chain(brew).map(|dir| dir.join(name)).find(|p| is_program(p))
}

fn is_program(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `DIR/prefixNN/...` for each entry of `dir` named `prefix` then a number, newest
/// (highest number) first: Debian's `/usr/lib/postgresql/15`, Homebrew's
/// `opt/postgresql@17`.
fn versioned(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.to_string();
                    let version = name.strip_prefix(prefix)?.parse::<u32>().ok()?;
                    Some((version, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    found.into_iter().map(|(_, p)| p).collect()
}

/// The directory holding PostgreSQL's `postgres` and `initdb`: on the PATH, in a
/// Homebrew prefix (its `bin`, or keg-only `opt/postgresql@NN/bin`, newest first), or
/// Debian's `/usr/lib/postgresql/NN/bin` (newest first).
pub fn postgres_bin_dir() -> Option<PathBuf> {
    let mut dirs = path_dirs();
    for prefix in homebrew_prefixes() {
        dirs.push(prefix.join("bin"));
        let opt = prefix.join("opt");
        dirs.extend(versioned(&opt, "postgresql@").into_iter().map(|p| p.join("bin")));
        dirs.push(opt.join("postgresql/bin"));
    }
    let debian = rooted("/usr/lib/postgresql");
    dirs.extend(versioned(&debian, "").into_iter().map(|p| p.join("bin")));
    dirs.into_iter().find(|d| is_program(&d.join("postgres")) && is_program(&d.join("initdb")))
}

/// A ZooKeeper server's jars, as the JVM is to be given them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZooKeeperInstall {
    /// The `-cp` argument.
    pub classpath: String,
    /// Where it was found, to show.
    pub location: PathBuf,
    /// From a jar's name (`zookeeper-3.8.0.jar`), when one carries it.
    pub version: Option<String>,
    /// More JVM options it needs (a logging configuration).
    pub jvm_args: Vec<String>,
}

/// ZooKeeper's server jars: Debian's (`/usr/share/java/zookeeper.jar`, whose manifest
/// names the jars it needs, and a logger so a failed start has output to quote), or
/// Homebrew's (every jar in `PREFIX/opt/zookeeper/libexec/lib`, logging configured by
/// `PREFIX/etc/zookeeper/logback.xml`).
pub fn zookeeper() -> Option<ZooKeeperInstall> {
    let debian = rooted("/usr/share/java");
    let jars = [debian.join("zookeeper.jar"), debian.join("slf4j-simple.jar")];
    if jars.iter().all(|j| j.is_file()) {
        return Some(ZooKeeperInstall {
            classpath: std::env::join_paths(&jars).ok()?.to_string_lossy().into_owned(),
            version: jar_version(&debian),
            location: jars[0].clone(),
            jvm_args: vec!["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn".into()],
        });
    }
    homebrew_prefixes().into_iter().find_map(|prefix| {
        let lib = prefix.join("opt/zookeeper/libexec/lib");
        let version = jar_version(&lib)?;
        let logback = prefix.join("etc/zookeeper/logback.xml");
        let jvm_args = logback
            .is_file()
            .then(|| format!("-Dlogback.configurationFile={}", logback.display()))
            .into_iter()
            .collect();
        Some(ZooKeeperInstall {
            classpath: lib.join("*").to_string_lossy().into_owned(),
            location: lib,
            version: Some(version),
            jvm_args,
        })
    })
}

/// The version in the name of the server's jar in `dir` (`zookeeper-3.8.0.jar`).
fn jar_version(dir: &Path) -> Option<String> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let name = e.file_name().to_str()?.to_string();
        let version = name.strip_prefix("zookeeper-")?.strip_suffix(".jar")?;
        version.starts_with(|c: char| c.is_ascii_digit()).then(|| version.to_string())
    })
}

/// The `java` to run ZooKeeper with: `JAVA_HOME`'s, Homebrew's `openjdk` (keg-only,
/// what its `zookeeper` depends on), or the PATH's.
pub fn java() -> Option<PathBuf> {
    let home = std::env::var_os("JAVA_HOME").map(|h| PathBuf::from(h).join("bin/java"));
    let brew = homebrew_prefixes().into_iter().map(|p| p.join("opt/openjdk/bin/java"));
    home.into_iter().chain(brew).find(|p| is_program(p)).or_else(|| find_program("java"))
}
