//! The subcommands: each turns parsed arguments into a run and prints a view of it.

pub mod bench;
pub mod run;
pub mod runtime;
pub mod scenario_ref;

use std::process::ExitCode;

use crate::cli::{BackendArgs, Cli, Command, PlayArgs};
use crate::scenario::builtin_names;

/// Run what the command line asks for.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Run(args)) => run::run(&args, &cli.backend),
        Some(Command::Scenarios) => {
            for name in builtin_names() {
                if let Some(Ok(s)) = crate::scenario::builtin(name) {
                    println!("{name:<12} {}", s.summary);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench(args)) => bench::bench(&args, &cli.backend),
        Some(Command::Play(args)) => play(&args, &cli.backend),
        None => play(&PlayArgs::default(), &cli.backend),
    }
}

fn play(args: &PlayArgs, backend: &BackendArgs) -> anyhow::Result<ExitCode> {
    let options = crate::tui::Options {
        scenario: scenario_ref::load(&args.scenario)?,
        fencing: args.fencing,
        speed: args.speed,
        presenter: args.presenter,
    };
    crate::tui::play(options, backend.redis.as_deref(), backend.sim)
}
