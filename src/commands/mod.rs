//! The subcommands: each turns parsed arguments into a run and prints a view of it.

/// `out!("...", args)`: one line on stdout through `output::stdout`, returning from
/// the command when stdout has gone (closed: quietly; failed: with the error).
macro_rules! out {
    ($($arg:tt)*) => {
        crate::output::stdout::line(&format!($($arg)*))?
    };
}

pub mod bench;
mod bench_break;
mod bench_class;
mod bench_class_ssh;
mod bench_sim;
pub mod class;
mod class_quiz;
mod course;
pub mod doctor;
mod exercise;
pub mod run;
pub mod scenario_ref;
pub mod search;
mod stats;

use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::{
    BackendArgs, Cli, Command, ExportArgs, Keep, LessonArgs, PictureTheme, PlayArgs, ReplayArgs,
};
use crate::output::printable::printable;
use crate::runtime::Shutdown;
use crate::scenario::builtin_names;

/// Run what the command line asks for; a closed or failed stdout is judged once, here
/// (`output::stdout`), for every command.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    crate::output::stdout::finish(command(cli))
}

fn command(cli: Cli) -> anyhow::Result<ExitCode> {
    if matches!(
        cli.command,
        None | Some(
            Command::Run(_)
                | Command::Play(_)
                | Command::Lesson(_)
                | Command::Bench(_)
                | Command::Break(_)
                | Command::Check(_)
        )
    ) {
        // These start private servers: an earlier one killed outright left its dirs.
        crate::backend::server::sweep_orphaned_dirs();
    }
    match cli.command {
        Some(Command::Run(args)) => run::run(&args, &cli.backend),
        Some(Command::Scenarios) => {
            let mut out = String::new();
            for name in builtin_names() {
                if let Some(Ok(s)) = crate::scenario::builtin(&name) {
                    out.push_str(&format!("{name:<26} {}\n", s.summary));
                }
            }
            to_stdout(printable(&out).as_bytes())
        }
        Some(Command::Lessons(args)) => course::list(&args, &cli.backend),
        Some(Command::Completions { shell }) => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "fencelab", &mut out);
            to_stdout(&out)
        }
        Some(Command::Man) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut out)?;
            to_stdout(&out)
        }
        Some(Command::Bench(args)) => bench::bench(&args, &cli.backend),
        Some(Command::Break(args)) => search::run(&args, &cli.backend),
        Some(Command::Exercises { copy: None }) => Ok(exercise::list()),
        Some(Command::Exercises { copy: Some(copy) }) => exercise::copy(&copy[0], &copy[1]),
        Some(Command::Check(args)) => exercise::check(&args, &cli.backend),
        Some(Command::Worker) => worker(),
        Some(Command::RoomJanitor) => class::janitor(),
        Some(Command::Class(args)) => class::class(&args, &cli.backend),
        Some(Command::Join { url, headless, program }) => {
            class::join(&url, headless, program.as_deref())
        }
        Some(Command::Doctor) => doctor::run(&cli.backend.targets()),
        Some(Command::Replay(args)) => replay(&args),
        Some(Command::Export(args)) => export(&args),
        // The screens' one shutdown, for the playground and every lesson opened from it.
        Some(Command::Play(args)) => play(&args, &cli.backend, &Shutdown::on_signals()?),
        Some(Command::Lesson(args)) => course::open(&args, &cli.backend, &Shutdown::on_signals()?),
        None => {
            let args = PlayArgs { options: cli.play, ..PlayArgs::default() };
            play(&args, &cli.backend, &Shutdown::on_signals()?)
        }
    }
}

/// Write a command's whole output to stdout (see `output::stdout` for a reader that
/// has gone and a full disk).
fn to_stdout(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    crate::output::stdout::bytes(bytes)?;
    Ok(ExitCode::SUCCESS)
}

/// The playground or a lesson, and then whatever the learner opens from the course's
/// menu (`L`), until they quit. `--save` and `--record` keep the first screen only
/// (one file, one session), and say so when the learner moves on.
fn play(play: &PlayArgs, backend: &BackendArgs, shutdown: &Shutdown) -> anyhow::Result<ExitCode> {
    let mut play = play.clone();
    loop {
        if play_once(&play, backend, shutdown)? == crate::tui::Ended::Quit {
            return Ok(ExitCode::SUCCESS);
        }
        let kept = [&play.options.keep.save, &play.options.keep.record];
        for file in kept.into_iter().flatten() {
            note!("({} holds the screen you left; what follows is not kept)", file.display());
        }
        let presenter = play.options.presenter;
        let program = play.options.program.take();
        match course::choose(presenter, shutdown)? {
            Some(name) => {
                let lesson = LessonArgs { lesson: None, presenter, program, keep: Keep::default() };
                play = lesson.play(&name);
            }
            None => return Ok(ExitCode::SUCCESS),
        }
    }
}

fn play_once(
    play: &PlayArgs,
    backend: &BackendArgs,
    shutdown: &Shutdown,
) -> anyhow::Result<crate::tui::Ended> {
    let (args, mut lesson) = (&play.options, scenario_ref::load(&play.scenario)?);
    lesson.scenario = scenario_ref::with_program(lesson.scenario, args.program.as_deref())?;
    let options = crate::tui::Options {
        speed: if args.speed == 1.0 { lesson.scenario.speed.unwrap_or(1.0) } else { args.speed },
        lesson,
        fencing: args.fencing,
        presenter: args.presenter,
        save: args.keep.save.clone(),
        record: args.keep.record.clone(),
        processes: args.processes,
        remember: true,
    };
    let servers = crate::service::playground::Servers::new(backend.targets());
    crate::tui::play(options, &servers, shutdown)
}

/// `fencelab worker`: serve one worker process for a parent run (see `engine::process`).
fn worker() -> anyhow::Result<ExitCode> {
    let runtime = crate::runtime::build(false)?;
    let served = crate::engine::process::child::serve(tokio::io::stdin(), tokio::io::stdout());
    let served = runtime.block_on(served);
    // The read of stdin blocks a thread that nothing can wake: do not wait for it.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `numbers` (from 1) of a saved file, in that order.
fn saved_runs(
    file: &std::path::Path,
    numbers: &[u64],
) -> anyhow::Result<Vec<Vec<crate::engine::log::Event>>> {
    let mut runs = crate::output::load::load_runs(file)?;
    let count = runs.len();
    numbers
        .iter()
        .map(|&number| {
            let index = usize::try_from(number - 1).unwrap_or(usize::MAX);
            match runs.get_mut(index) {
                // One run: moved out, not copied (a replay of a million events).
                Some(run) if numbers.len() == 1 => Ok(std::mem::take(run)),
                Some(run) => Ok(run.clone()),
                None => anyhow::bail!(
                    "{} holds {count} run(s); there is no run {number}",
                    file.display()
                ),
            }
        })
        .collect()
}

fn export(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    use crate::output::picture::{Palette, picture};
    let wanted: Vec<u64> = std::iter::once(args.run).chain(args.compare).collect();
    let runs = saved_runs(&args.file, &wanted)?;
    let palette = match args.theme {
        PictureTheme::Light => Palette::Light,
        PictureTheme::Dark => Palette::Dark,
    };
    let runs: Vec<crate::view_model::RunModel> =
        runs.into_iter().map(crate::view_model::RunModel::from_log).collect();
    std::fs::write(&args.svg, picture(&runs, palette).svg)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.svg.display()))?;
    note!("wrote {}", args.svg.display());
    Ok(ExitCode::SUCCESS)
}

fn replay(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let options = crate::tui::ReplayOptions {
        file: args.file.display().to_string(),
        speed: args.speed,
        presenter: args.presenter,
        record: args.record.clone(),
    };
    // A missing file is said before the screen is taken; the rest loads behind it.
    std::fs::metadata(&args.file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.file.display()))?;
    let (file, run) = (args.file.clone(), args.run);
    let shutdown = Shutdown::on_signals()?;
    crate::tui::replay(move || Ok(saved_runs(&file, &[run])?.remove(0)), options, &shutdown)
}
