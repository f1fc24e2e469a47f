//! The `broker` binary.

use std::path::PathBuf;

use anyhow::Context;
use broker_server::{Broker, BrokerConfig};
use clap::Parser;

/// Sluice broker: speaks RocketMQ's protocols, stores messages in
/// RocketMQ's CommitLog layout, and says "busy" early and precisely.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// A TOML file of top-level keys with RocketMQ's names (`listenPort = 10911`).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Print the effective configuration and exit.
    #[arg(long)]
    print_config: bool,
    /// Remoting port (`listenPort`).
    #[arg(short = 'p', long)]
    listen_port: Option<u16>,
    /// Name servers, `host:port;host:port` (`namesrvAddr`).
    #[arg(short = 'n', long)]
    namesrv_addr: Option<String>,
    /// Store root directory (`storePathRootDir`).
    #[arg(long)]
    store_dir: Option<PathBuf>,
    /// Any key, `key=value`; may repeat.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    stop_on_panic();
    let args = Args::parse();
    let mut overrides = Vec::new();
    for item in &args.set {
        let (k, v) = item
            .split_once('=')
            .with_context(|| format!("--set {item:?}: expected KEY=VALUE"))?;
        overrides.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    if let Some(p) = args.listen_port {
        overrides.push(("listenPort".into(), p.to_string()));
    }
    if let Some(n) = &args.namesrv_addr {
        overrides.push(("namesrvAddr".into(), n.clone()));
    }
    if let Some(d) = &args.store_dir {
        overrides.push(("storePathRootDir".into(), d.display().to_string()));
    }
    let config = BrokerConfig::load(args.config.as_deref(), std::env::vars(), &overrides)
        .context("invalid configuration")?;
    if args.print_config {
        print!("{}", config.to_toml()?);
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("broker-io")
        .build()
        .context("start the async runtime")?;
    runtime.block_on(async {
        let broker = Broker::start(config)
            .await
            .context("broker failed to start")?;
        shutdown_signal().await;
        broker.shutdown().await;
        anyhow::Ok(())
    })
}

/// Exit code of a broker stopped by a panic (`EX_SOFTWARE`).
const PANIC_EXIT_CODE: i32 = 70;

/// A panic on any thread (a worker, a store service, an async task) stops
/// the process with [`PANIC_EXIT_CODE`], so that a supervisor restarts it,
/// rather than leaving a broker that accepts writes some dead thread would
/// have flushed, dispatched or answered. Recovery then runs as after a crash.
fn stop_on_panic() {
    let print = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        print(info);
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_owned();
        tracing::error!(
            thread,
            panic = %info,
            exit_code = PANIC_EXIT_CODE,
            "a broker thread panicked; stopping so that the broker is restarted and recovers"
        );
        std::process::exit(PANIC_EXIT_CODE);
    }));
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
