//! What the playground is told about where its runs happen: the servers asked for on
//! the command line (opaque to the TUI), what a deployment turned out to be, and
//! which servers this machine has installed.

use crate::backend::deployment::{Deployment, Targets};
use crate::backend::server::{ETCD, POSTGRES, REDIS, installed};

/// The servers the command line names (`--redis`, `--etcd`, `--postgres`, `--sim`),
/// for the runner to deploy on: the command builds it, the TUI only passes it on.
pub struct Servers<'a> {
    targets: Targets<'a>,
}

impl<'a> Servers<'a> {
    pub fn new(targets: Targets<'a>) -> Self {
        Servers { targets }
    }

    pub(super) fn targets(&self) -> &Targets<'a> {
        &self.targets
    }
}

/// What a deployment is, for the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    /// One line for the header: the lock service, and the storage when it lives apart
    /// (passwords redacted).
    pub label: String,
    /// The simulator (a paused clock, fixed seeds), not servers.
    pub simulated: bool,
    /// Said when the simulator stands in for a server that is not installed.
    pub notice: Option<String>,
}

impl Deployed {
    pub(super) fn of(deployment: &Deployment) -> Deployed {
        Deployed {
            label: deployment.describe(),
            simulated: deployment.simulated(),
            notice: deployment.fallback_notice(),
        }
    }
}

/// What `l` and `w` can move to, each marked installed (✓: on real servers) or not
/// (✗: on the simulator): "Redis ✓ Redlock ✓ etcd ✗ PostgreSQL ✓".
pub fn installed_services() -> String {
    let mark = |program| if installed(program) { "✓" } else { "✗" };
    let redis = mark(REDIS);
    format!("Redis {redis} Redlock {redis} etcd {} PostgreSQL {}", mark(ETCD), mark(POSTGRES))
}
