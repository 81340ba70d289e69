//! A private PostgreSQL cluster: `initdb` into a temp dir, then `postgres` listening
//! only on a unix socket in that dir (no TCP), with durability switched off since
//! nothing here needs to survive the run.
//!
//! PostgreSQL refuses to run as root. When fencelab runs as root (CI, containers), the
//! cluster runs as the `postgres` user that Debian's package creates (or `nobody`),
//! owning its temp dir.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{
    POSTGRES, START_TIMEOUT, ServerError, ServerProcess, only_needed_env, spawn, stop, temp_dir,
    wait_until_ready,
};
use crate::platform::Signal;

pub struct PrivatePostgres {
    child: ServerProcess,
    dir: tempfile::TempDir,
}

/// The directory holding `postgres` and `initdb` (see `platform::postgres_bin_dir`).
fn bin_dir() -> Result<PathBuf, ServerError> {
    crate::platform::postgres_bin_dir().ok_or(ServerError::NotInstalled(POSTGRES))
}

/// The uid and gid to run as: ours, unless we are root.
fn run_as() -> Result<Option<(u32, u32)>, ServerError> {
    if !crate::platform::running_as_root() {
        return Ok(None);
    }
    ["postgres", "nobody"].into_iter().find_map(crate::platform::user_ids).map(Some).ok_or_else(
        || {
            ServerError::setup(
                POSTGRES,
                "running as root, and there is no `postgres` or `nobody` user to run PostgreSQL as",
            )
        },
    )
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
        let mut initdb = Command::new(bin.join("initdb"));
        as_user(only_needed_env(&mut initdb), user).arg("-D").arg(&data).args([
            "-U",
            "fencelab",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]);
        // A second or two: it must not outlive us either.
        let _tether = crate::platform::tie_to_parent(&mut initdb)
            .map_err(|e| ServerError::setup(POSTGRES, e))?;
        let init = initdb.output().map_err(|e| ServerError::setup(POSTGRES, e))?;
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
        stop(&mut self.child, Signal::Quit);
    }
}
