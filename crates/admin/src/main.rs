//! `sluice-admin`: parses the command line, runs the command on a tokio
//! runtime and prints its output; a failure goes to stderr with a non-zero
//! exit code.

use std::{io::Write as _, process::ExitCode};

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
    let print = |out: String| {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    };
    match runtime.block_on(admin::run_each(&cli, print)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-admin: {e}");
            ExitCode::FAILURE
        }
    }
}
