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

/// What a playground or a lesson opens with, made before its screen is: the runner on
/// its deployment (private servers started), what that deployment is, and what the
/// lesson's narration needs worked out first (its sweep's table, the runs it tells,
/// the lesson after it).
pub struct Opening {
    pub runner: super::runner::Runner,
    pub deployed: Deployed,
    /// The lesson's sweep, run on the simulator, as table lines (empty without one).
    pub table: Vec<String>,
    /// The runs the narration tells, on the simulator: a step the learner's own act
    /// made untrue is marked so.
    pub references: crate::lesson::told::References,
    /// The course's next lesson.
    pub next: Option<String>,
}

/// Open `lesson` on `servers` (`processes`: each worker a process of this program).
/// On the calling thread, so a private server lives exactly as long as the caller.
pub fn open(
    servers: &Servers,
    lesson: &crate::lesson::Lesson,
    processes: bool,
) -> anyhow::Result<Opening> {
    let scenario = &lesson.scenario;
    let (runner, deployed) = super::runner::Runner::deploy(servers, scenario, processes)?;
    let table = match &scenario.sweep {
        Some(sweep) => {
            let runs = sweep.runs as usize * sweep.lease_ms.len();
            note!("running the lesson's {runs} simulated runs first...");
            crate::lesson::sweep::table(&crate::lesson::sweep::on_simulator(scenario, sweep)?)
        }
        None => Vec::new(),
    };
    let narrated = !lesson.narration.runs.is_empty() || !scenario.checkpoints.is_empty();
    let references = match narrated {
        true => crate::lesson::told::References::of(scenario)?,
        false => Default::default(),
    };
    let next = crate::lesson::next_after(&scenario.name);
    Ok(Opening { runner, deployed, table, references, next })
}
