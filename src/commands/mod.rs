//! The subcommands: each turns parsed arguments into a run and prints a view of it.

pub mod bench;
pub mod run;
mod runtime;
pub mod scenario_ref;

use std::process::ExitCode;

use crate::cli::{Cli, Command, Fencing, RunArgs};
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
        None => {
            let args = RunArgs {
                scenario: "gc-pause".into(),
                fencing: Fencing::Both,
                json: false,
                save: None,
                check: false,
                speed: 1.0,
            };
            run::run(&args, &cli.backend)
        }
    }
}
