//! Project automation, run as `cargo xtask <command>`.
//!
//! - `ci`: everything CI checks: formatting, repository lints, clippy with
//!   warnings denied, that the fuzz target builds, the quick end-to-end
//!   suite against real processes, the quick overload experiment, the quick
//!   chaos suite, and the whole test suite.
//! - `lint`: the repository rules alone (see `lint.rs`).
//! - `fuzz-check`: builds the fuzz crate without running it.
//! - `e2e [--quick] [--include-ignored] [FILTER]`: the end-to-end suite
//!   against real name server and broker processes (see `e2e.rs`); with a
//!   filter, only the scenarios whose names contain it.
//! - `chaos [--quick] [--replication]`: the chaos suite against real broker processes (see
//!   `chaos.rs`).
//! - `image [--tag T] [--build-arg K=V] [--no-build]`: builds the
//!   container image and runs a replicated group from it (see `image.rs`).
//! - `bench overload|closed|protocols|transactions|peers [--quick]`: the
//!   overload experiment, the closed-loop throughput table, the
//!   remoting-versus-gRPC send comparison, transactional sends against a
//!   real broker, and Sluice beside NATS JetStream and Redis Streams (see
//!   `bench/mod.rs`).

mod bench;
mod chaos;
mod ci;
mod e2e;
mod image;
mod lint;
mod modgraph;

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

fn main() -> Result<()> {
    let args: Vec<String> = env::args().skip(1).collect();
    let root = project_root();
    match args.first().map(String::as_str) {
        Some("ci") => ci::all(&root),
        Some("lint") => lint::run(&root),
        Some("fuzz-check") => ci::fuzz_check(&root),
        Some("manifests") => ci::manifests(&root),
        Some("bench") => bench::main(&root, &args[1..]),
        Some("chaos") => chaos::main(&root, &args[1..]),
        Some("image") => image::main(&root, &args[1..]),
        Some("e2e") => {
            let mut options = e2e::Options::default();
            for arg in &args[1..] {
                match arg.as_str() {
                    "--quick" => options.quick = true,
                    "--include-ignored" => options.include_ignored = true,
                    filter if !filter.starts_with('-') && options.filter.is_none() => {
                        options.filter = Some(filter.to_owned());
                    }
                    other => bail!("e2e: unknown option {other:?}\n\n{USAGE}"),
                }
            }
            e2e::run_suite(&root, options)
        }
        Some(other) => bail!("unknown command {other:?}\n\n{USAGE}"),
        None => {
            println!("{USAGE}");
            Ok(())
        }
    }
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  ci           formatting, lints, clippy (-D warnings), fuzz build, e2e --quick,
               bench overload --quick, bench peers --quick, chaos --quick,
               all tests
  lint         repository rules: crate graph, unsafe confinement, module docs
  fuzz-check   build the fuzz targets without running them
  e2e          end-to-end tests against real namesrv and broker processes
               (--quick: fewer messages; --include-ignored: also the scenarios
               of features the broker lacks yet; a further word: only the
               scenarios whose names contain it)
  manifests    check deploy/k8s against Kubernetes' API schemas
               (scripts/install-k8s-validate.sh installs the checker)
  image        build the container image and run a replicated group from it
               (--tag T, default sluice:dev; --build-arg K=V; --no-build)
  chaos        cases that push the broker past its limits, one line each with
               its figure and PASS/FAIL (--quick: the short form CI runs;
               --replication: only the replicated-group cases)
  bench        overload: capacity, then 2x capacity with early admission on/off
               (table, overload.json, overload.png); closed: msgs/s and latency
               at 1/16/64 in flight, ASYNC_FLUSH and SYNC_FLUSH; protocols:
               remoting vs gRPC sends at 64 and 1 in flight, one broker;
               transactions: transactional vs plain sends; peers: Sluice,
               NATS JetStream and Redis Streams side by side
               (--quick: debug build, short phases; see `cargo xtask bench`)";

/// The workspace root: the parent of this crate's directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// A `cargo` command, using the cargo that runs us.
fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root);
    cmd
}

/// Runs a command to completion and fails if it does.
fn run(mut cmd: Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    eprintln!("$ {shown}");
    let status = cmd.status().with_context(|| format!("start {shown}"))?;
    if !status.success() {
        bail!("{shown} failed with {status}");
    }
    Ok(())
}
