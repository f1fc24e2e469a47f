//! The `broker` binary.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "sluice broker {}: the server is not built yet; this build provides the \
         remoting protocol library only (see README.md, \"Status\")",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::from(2)
}
