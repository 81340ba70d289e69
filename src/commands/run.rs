//! `fencelab run`: run a scenario headless, print the transcript (or JSON lines) as it
//! happens, then the storage contents and the checker's verdict.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

use super::scenario_ref;
use crate::backend::deployment::{Deployment, Shape, deploy};
use crate::check::{check, compare, lock_of};
use crate::cli::{BackendArgs, Fencing, RunArgs};
use crate::engine::log::{EventLog, RunOutcome};
use crate::engine::{PreparedRun, RunOptions, prepare};
use crate::lesson::sweep;
use crate::output::jsonl;
use crate::output::printable::printable;
use crate::output::transcript::{Transcript, verdict_after};
use crate::runtime::{self, Shutdown};
use crate::scenario::{PlannedRun, Scenario, Sweep};

/// Exit code after Ctrl-C / SIGTERM, as shells expect for an interrupted program.
pub(super) const EXIT_INTERRUPTED: u8 = 130;

pub fn run(args: &RunArgs, backend_args: &BackendArgs) -> anyhow::Result<ExitCode> {
    let scenario = scenario_ref::load(&args.scenario)?.scenario;
    let scenario = scenario_ref::with_program(scenario, args.program.as_deref())?;
    if args.fencing.is_some() && !scenario.variants.is_empty() {
        bail!(
            "{:?} defines its own runs ({}); --fencing does not apply to it",
            scenario.name,
            scenario.variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    let modes = args.fencing.map_or_else(|| scenario.expect.modes(), Fencing::modes);
    let runs = scenario.planned_runs(&modes);
    if args.check
        && let Some(run) = runs.iter().find(|r| r.expect.is_none())
    {
        bail!(
            "{:?} states no expected outcome for the run {:?}; add one to use --check",
            scenario.name,
            run.label
        );
    }
    let mut save = match &args.save {
        Some(path) => Some(BufWriter::new(
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    // Started here, on the main thread, so the private server lives exactly as long as
    // this function (see PrivateRedis::start).
    let deployment = deploy(&backend_args.targets(), Shape::of(&scenario))?;
    if let Some(notice) = deployment.fallback_notice() {
        tell(&notice.to_string());
    }
    if args.json {
        note!("backend: {}", deployment.describe());
    }
    let runtime = runtime::build(deployment.simulated())?;
    let shutdown = Shutdown::on_signals()?;
    let cancel = shutdown.token().clone();
    let result = (|| {
        let mut report = runtime.block_on(run_all(&deployment, &runs, args, &mut save, &cancel))?;
        if let Some(mut file) = save {
            file.flush()?;
        }
        if let Some(sweep) = &scenario.sweep
            && !report.interrupted
            && !report.failed
        {
            let sweep = sweep_report(&deployment, &scenario, sweep, args.check, &cancel);
            match runtime.block_on(sweep)? {
                Some(ok) => report.check_failed |= !ok,
                None => {
                    report.interrupted = true;
                    note!("interrupted: the sweep was stopped");
                }
            }
        }
        Ok(report.exit_code())
    })();
    // Whatever still waits on a server that does not answer is dropped, not awaited.
    runtime.shutdown_timeout(ABANDON_AFTER);
    result
}

/// How long a run stopped by a signal has to finish and delete its keys before it is
/// abandoned (a server that does not answer, or is stopped): its keys then expire by
/// themselves.
const ABANDON_AFTER: Duration = Duration::from_secs(1);

/// What the runs of one command amounted to.
#[derive(Default)]
struct Report {
    interrupted: bool,
    failed: bool,
    check_failed: bool,
}

impl Report {
    fn exit_code(&self) -> ExitCode {
        if self.interrupted {
            ExitCode::from(EXIT_INTERRUPTED)
        } else if self.failed || self.check_failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

async fn run_all(
    deployment: &Deployment,
    runs: &[PlannedRun],
    args: &RunArgs,
    save: &mut Option<BufWriter<File>>,
    cancel: &CancellationToken,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for (i, planned) in runs.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        if i > 0 && !args.json {
            say("");
        }
        let asked = args.speed.map_or(planned.scenario.time_scale.unwrap_or(1.0), |x| 1.0 / x);
        let time_scale = match deployment.simulated() {
            true => asked,
            false => {
                let (fitted, why) = crate::search::real::time_scale_for(&planned.scenario, asked);
                if let Some(why) = why {
                    note!("{why}");
                }
                fitted
            }
        };
        let options = RunOptions {
            seed: deployment.simulated().then_some(planned.scenario.seed_or_default()),
            time_scale,
            label: planned.label.clone(),
            processes: match (args.processes, deployment.simulated()) {
                (true, simulated) => Some(crate::engine::process::worker_program(simulated)?),
                (false, true) => None,
                (false, false) => crate::engine::process::for_scenario(None, &planned.scenario),
            },
            ..RunOptions::new(planned.fencing)
        };
        let (lock, storage) = (deployment.lock().as_ref(), deployment.storage().as_ref());
        let prepared = tokio::select! {
            prepared = prepare(lock, storage, &planned.scenario, options, cancel) => prepared?,
            () = cancel.cancelled() => {
                report.interrupted = true;
                note!("interrupted before the run started");
                break;
            }
        };
        let log = prepared.log();
        let printer = tokio::spawn(print_live(log.clone(), args.json));
        let stuck = deployment.simulated().then(|| stop_when_stuck(&prepared, &planned.scenario));
        let execute = prepared.execute();
        tokio::pin!(execute);
        let abandon = async {
            cancel.cancelled().await;
            tokio::time::sleep(ABANDON_AFTER).await;
        };
        let outcome = tokio::select! {
            outcome = &mut execute => outcome,
            () = abandon => {
                printer.abort();
                report.interrupted = true;
                note!(
                    "interrupted: a server did not answer within {} s, so the run was abandoned; \
                     its keys were not deleted: they expire {KEYS_EXPIRE}",
                    ABANDON_AFTER.as_secs()
                );
                break;
            }
        };
        // The printer stops by itself at the run's last event.
        let _ = printer.await;
        if let Some((watchdog, stuck)) = stuck {
            watchdog.abort();
            if stuck.load(Ordering::SeqCst) {
                report.failed = true;
                tell(&format!(
                    "error: the run had not ended an hour (scenario time) after it could have: {}",
                    stuck_because(&planned.scenario)
                ));
                break;
            }
        }

        let events = log.snapshot();
        if let Some(file) = save.as_mut() {
            jsonl::write_all(&events, file)?;
        }
        let violations = check(&events);
        if !args.json {
            for line in verdict_after(&outcome, &violations, lock_of(&events)) {
                say(&line);
            }
        }
        match outcome {
            RunOutcome::Completed => {}
            RunOutcome::Interrupted => {
                report.interrupted = true;
                tell(&interrupted(&events));
                break;
            }
            RunOutcome::Failed { error } => {
                report.failed = true;
                tell(&format!("error: {error}"));
                break;
            }
        }
        if args.check
            && let Some(expected) = &planned.expect
        {
            let diffs = compare(expected, &events, &violations);
            if diffs.is_empty() {
                tell(&format!("check passed ({})", planned.label));
            } else {
                report.check_failed = true;
                tell(&format!("check FAILED ({}): {}", planned.label, diffs.join("; ")));
            }
        }
    }
    Ok(report)
}

/// When the keys of a run that could not delete them go (`Keys::expiring_after`: an
/// hour after the run's longest possible end).
const KEYS_EXPIRE: &str = "by themselves in about an hour";

/// What an interrupted run did with its keys, as its log tells: a server the
/// observer lost was not asked to delete anything (`engine::execute`).
fn interrupted(events: &[crate::engine::log::Event]) -> String {
    let lost = events.iter().find_map(|e| match &e.kind {
        crate::engine::log::EventKind::ServerLost { server, .. } => Some(server.as_str()),
        _ => None,
    });
    match lost {
        Some(server) => format!(
            "interrupted: the run was stopped; {server} did not answer, so its keys were not \
             deleted: they expire {KEYS_EXPIRE}"
        ),
        None => "interrupted: the run was stopped and its keys deleted".to_string(),
    }
}

/// Why a simulated run never ended, in the scenario's own values.
fn stuck_because(scenario: &Scenario) -> String {
    match (scenario.lock.spec().queue, scenario.ttl_ms) {
        (_, 0) => "a worker waits for a lock that never expires (ttl_ms = 0) and that nobody \
                   will release; give it give_up_ms, or the lock a lease"
            .to_string(),
        (true, ttl) => format!(
            "a worker waits for a job and none is left: the queue's jobs were all handed out, \
             and a consumer claims one only once it has been pending {ttl} ms (ttl_ms = {ttl}); \
             give the waiter give_up_ms"
        ),
        (_, ttl) => format!(
            "a worker still waits for the lock, though its lease is {ttl} ms (ttl_ms = {ttl}); \
             give it give_up_ms"
        ),
    }
}

/// On the simulator, stop a run still going an hour of scenario time after it could
/// have ended (a waiter on a lock without a lease that nobody releases would poll
/// forever, at full speed on the virtual clock). The flag says whether it had to.
fn stop_when_stuck(
    prepared: &PreparedRun,
    scenario: &Scenario,
) -> (tokio::task::JoinHandle<()>, Arc<AtomicBool>) {
    let control = prepared.control();
    let limit_ms = scenario.longest_run_ms().saturating_add(3_600_000);
    let limit = prepared.log().clock().real(limit_ms as f64);
    let stuck = Arc::new(AtomicBool::new(false));
    let flag = stuck.clone();
    let watchdog = tokio::spawn(async move {
        tokio::time::sleep(limit).await;
        flag.store(true, Ordering::SeqCst);
        control.stop();
    });
    (watchdog, stuck)
}

/// The lesson's sweep: many simulated runs per lease length, a sample of them on the
/// real backend. Returns false when `check` finds the lesson's claim not shown, None
/// when a signal stopped it.
async fn sweep_report(
    deployment: &Deployment,
    scenario: &Scenario,
    sweep: &Sweep,
    check: bool,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<bool>> {
    let (s, sw, stop) = (scenario.clone(), sweep.clone(), cancel.clone());
    let rows =
        tokio::task::spawn_blocking(move || sweep::on_simulator_until(&s, &sw, &stop)).await??;
    if cancel.is_cancelled() {
        return Ok(None);
    }
    say("");
    say(&format!(
        "=== {} runs per lease length on the simulator, pauses up to {:.1} s ===",
        sweep.runs,
        sweep.max_pause_ms as f64 / 1000.0
    ));
    for line in sweep::table(&rows) {
        say(&line);
    }
    let mut problems = sweep::rarer_never_zero(&rows);
    if !deployment.simulated() && sweep.redis_sample > 0 {
        let (lock, storage) = (deployment.lock(), deployment.storage());
        let sample = sweep::sample(lock, storage, scenario, sweep, cancel).await?;
        let (s, runs, stop) = (scenario.clone(), sample.clone(), cancel.clone());
        let predicted =
            tokio::task::spawn_blocking(move || sweep::on_simulator_for(&s, &runs, &stop))
                .await??;
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let agree =
            sample.iter().zip(&predicted).filter(|((_, _, real), sim)| real == *sim).count();
        say(&format!(
            "sample on {}: {} runs, {agree} with the same outcome as on the simulator",
            deployment.describe(),
            sample.len()
        ));
        if agree != sample.len() {
            problems.push(format!(
                "{} of {} sample runs differ from the simulator",
                sample.len() - agree,
                sample.len()
            ));
        }
    }
    if !check {
        return Ok(Some(true));
    }
    if problems.is_empty() {
        note!("check passed (sweep: rarer with longer leases, never zero)");
    } else {
        note!("check FAILED (sweep): {}", problems.join("; "));
    }
    Ok(Some(problems.is_empty()))
}

/// Print each event as it is appended: a transcript line, or a JSON line.
pub(super) async fn print_live(log: Arc<EventLog>, json: bool) {
    let mut transcript = Transcript::default();
    log.follow(|event| {
        if json {
            say(&jsonl::to_line(event));
        } else {
            for line in transcript.lines(event) {
                say(&line);
            }
        }
    })
    .await;
}

/// Print a line to stdout. A closed pipe (`fencelab run | head`) or a full disk does
/// not stop a run: it still finishes and deletes its keys, and `output::stdout`
/// makes the failed write the command's exit.
pub(super) fn say(line: &str) {
    let _ = crate::output::stdout::line(line);
}

/// Print a line to stderr, with control characters made visible.
fn tell(line: &str) {
    note!("{}", printable(line));
}
