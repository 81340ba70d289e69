//! A private PostgreSQL cluster: `initdb` into a temp dir, then `postgres` listening
//! only on a unix socket in that dir (no TCP), with durability switched off since
//! nothing here needs to survive the run.
//!
//! PostgreSQL refuses to run as root. When fencelab runs as root (CI, containers), the
//! cluster runs as the `postgres` user that Debian's package creates (or `nobody`),
//! owning its temp dir.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use super::{
    POSTGRES, START_TIMEOUT, ServerError, only_needed_env, spawn, stop, temp_dir, wait_until_ready,
};

pub struct PrivatePostgres {
    child: Child,
    dir: tempfile::TempDir,
}

/// The directory holding `postgres` and `initdb`: on the PATH, or where Debian puts
/// them (`/usr/lib/postgresql/<version>/bin`, the newest version).
fn bin_dir() -> Result<PathBuf, ServerError> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    debian.sort_by_key(|p| {
        p.parent().and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok()).unwrap_or(0)
    });
    on_path
        .into_iter()
        .chain(debian.into_iter().rev())
        .find(|dir| dir.join("postgres").is_file() && dir.join("initdb").is_file())
        .ok_or(ServerError::NotInstalled(POSTGRES))
}

/// The uid and gid to run as: ours, unless we are root.
fn run_as() -> Result<Option<(u32, u32)>, ServerError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    for name in ["postgres", "nobody"] {
        let c_name = CString::new(name).map_err(|e| ServerError::setup(POSTGRES, e))?;
        // SAFETY: getpwnam returns a pointer into static storage or null; we copy the
        // two ids out at once, before any other call could overwrite it.
        let entry = unsafe { libc::getpwnam(c_name.as_ptr()) };
        if !entry.is_null() {
            // SAFETY: non-null, so it points at a valid passwd record.
            return Ok(Some(unsafe { ((*entry).pw_uid, (*entry).pw_gid) }));
        }
    }
    Err(ServerError::setup(
        POSTGRES,
        "running as root, and there is no `postgres` or `nobody` user to run PostgreSQL as",
    ))
}

fn as_user(cmd: &mut Command, user: Option<(u32, u32)>) -> &mut Command {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

impl PrivatePostgres {
    pub fn start() -> Result<Self, ServerError> {
        Self::start_within(START_TIMEOUT)
    }

    pub fn start_within(within: Duration) -> Result<Self, ServerError> {
        let bin = bin_dir()?;
        let user = run_as()?;
        let dir = temp_dir(POSTGRES)?;
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(|e| ServerError::setup(POSTGRES, e))?;
        }
        let data = dir.path().join("data");
        let init = as_user(only_needed_env(&mut Command::new(bin.join("initdb"))), user)
            .arg("-D")
            .arg(&data)
            .args(["-U", "fencelab", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
            .output()
            .map_err(|e| ServerError::setup(POSTGRES, e))?;
        if !init.status.success() {
            let output = String::from_utf8_lossy(&init.stderr).into_owned();
            return Err(ServerError::Died {
                program: "initdb",
                status: init.status.to_string(),
                output,
            });
        }
        let log = dir.path().join("postgres.log");
        let mut cmd = Command::new(bin.join("postgres"));
        as_user(&mut cmd, user)
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(dir.path())
            .args(["-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"]);
        let mut child = spawn(POSTGRES, cmd, Some(&log))?;
        let ready = || {
            std::fs::read_to_string(&log)
                .is_ok_and(|l| l.contains("database system is ready to accept connections"))
        };
        wait_until_ready(POSTGRES, &mut child, &log, None, within, ready)?;
        Ok(PrivatePostgres { child, dir })
    }

    /// A connection string for `tokio_postgres`: the socket dir, the `fencelab` superuser.
    pub fn url(&self) -> String {
        format!("host={} user=fencelab dbname=postgres", self.dir.path().display())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        // SIGQUIT: immediate shutdown; the backends go with the postmaster.
        stop(&mut self.child, libc::SIGQUIT);
    }
}
