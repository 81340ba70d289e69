//! The `fencelab` binary: parse the command line, run the command, report errors in
//! one line. Everything else lives in the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = fencelab::cli::Cli::parse_checked();
    match fencelab::commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let error = format!("{e:#}");
            let error = fencelab::output::printable::printable(&error);
            fencelab::output::stderr::line(&format!("error: {error}"));
            ExitCode::FAILURE
        }
    }
}
