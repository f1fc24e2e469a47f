//! `sluice-admin`: parses the command line, runs the command on a tokio
//! runtime and prints its output; a failure goes to stderr with a non-zero
//! exit code.

use std::process::ExitCode;

use admin::Cli;
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice-admin: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(admin::run(&cli)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice-admin: {e}");
            ExitCode::FAILURE
        }
    }
}
