//! The subcommands: each turns parsed arguments into a run and prints a view of it.

pub mod bench;
pub mod run;
pub mod scenario_ref;

use std::process::ExitCode;

use crate::cli::{BackendArgs, Cli, Command, ExportArgs, PictureTheme, PlayArgs, ReplayArgs};
use crate::scenario::builtin_names;

/// Run what the command line asks for.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Run(args)) => run::run(&args, &cli.backend),
        Some(Command::Scenarios) => {
            for name in builtin_names() {
                if let Some(Ok(s)) = crate::scenario::builtin(&name) {
                    println!("{name:<26} {}", s.summary);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Lessons) => {
            println!(
                "The course: each lesson runs on real servers (Redis, etcd, PostgreSQL). Open one with `fencelab lesson NAME`.\n"
            );
            for (i, l) in crate::lesson::course()?.iter().enumerate() {
                let title = &l.scenario.title;
                // Titles carry their number for the TUI header; the list numbers itself.
                let title = title
                    .split_once(". ")
                    .filter(|(n, _)| n.parse::<u32>().is_ok())
                    .map_or(title.as_str(), |(_, t)| t);
                println!("{:>2}. {:<26} {title}", i + 1, l.scenario.name);
                println!("    {:<26} {}", "", l.scenario.summary);
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench(args)) => bench::bench(&args, &cli.backend),
        Some(Command::Replay(args)) => replay(&args),
        Some(Command::Export(args)) => export(&args),
        Some(Command::Play(args)) => play(&args, &cli.backend),
        Some(Command::Lesson(args)) => play(&PlayArgs::from(&args), &cli.backend),
        None => play(&PlayArgs::default(), &cli.backend),
    }
}

fn play(args: &PlayArgs, backend: &BackendArgs) -> anyhow::Result<ExitCode> {
    let lesson = scenario_ref::load(&args.scenario)?;
    let options = crate::tui::Options {
        speed: if args.speed == 1.0 { lesson.scenario.speed.unwrap_or(1.0) } else { args.speed },
        lesson,
        fencing: args.fencing,
        presenter: args.presenter,
        save: args.keep.save.clone(),
        record: args.keep.record.clone(),
    };
    crate::tui::play(options, &backend.targets())
}

/// Run `number` (from 1) of a saved file.
fn saved_run(
    file: &std::path::Path,
    number: u64,
) -> anyhow::Result<Vec<crate::engine::log::Event>> {
    let mut runs = crate::output::load::load_runs(file)?;
    let count = runs.len();
    let index = usize::try_from(number - 1).unwrap_or(usize::MAX);
    if index >= count {
        anyhow::bail!("{} holds {count} run(s); there is no run {number}", file.display());
    }
    Ok(runs.swap_remove(index))
}

fn export(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    use crate::output::picture::{Palette, timeline_svg};
    let events = saved_run(&args.file, args.run)?;
    let palette = match args.theme {
        PictureTheme::Light => Palette::Light,
        PictureTheme::Dark => Palette::Dark,
    };
    std::fs::write(&args.svg, timeline_svg(&events, palette))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.svg.display()))?;
    eprintln!("wrote {}", args.svg.display());
    Ok(ExitCode::SUCCESS)
}

fn replay(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let events = saved_run(&args.file, args.run)?;
    let options = crate::tui::ReplayOptions {
        file: args.file.display().to_string(),
        speed: args.speed,
        presenter: args.presenter,
        record: args.record.clone(),
    };
    crate::tui::replay(events, options)
}
