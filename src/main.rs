//! The `fencelab` binary: parse the command line, run the command, report errors in
//! one line. Everything else lives in the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = fencelab::cli::Cli::parse_checked();
    match fencelab::commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", fencelab::output::printable::printable(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}
