//! `sluice-bench`: parses the flags, starts a tokio runtime and runs the load
//! described in the `bench` library; the report goes to stdout, progress to
//! stderr.

use anyhow::{Context, Result};
use bench::args::Args;
use clap::Parser;

fn main() -> Result<()> {
    let args = Args::parse();
    let (config, mode) = args.to_run()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-worker")
        .build()
        .context("start the tokio runtime")?;
    let report = runtime.block_on(bench::run::run(&config, mode))?;
    if args.json {
        println!("{}", report.to_json()?);
    } else {
        print!("{report}");
    }
    Ok(())
}
