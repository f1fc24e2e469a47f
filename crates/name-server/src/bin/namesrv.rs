//! The `namesrv` binary: a standalone name server.

use anyhow::Context;
use clap::Parser;
use name_server::NamesrvConfig;
use remoting_net::CancellationToken;

/// Sluice name server: brokers register here, clients look up topic routes.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Port to listen on (RocketMQ's default 9876).
    #[arg(short = 'p', long, default_value_t = 9876)]
    listen_port: u16,
    /// Address to bind.
    #[arg(long, default_value = "0.0.0.0")]
    bind: String,
    /// How often silent brokers are dropped (ms).
    #[arg(long, default_value_t = 5000)]
    scan_not_active_broker_interval: u64,
    /// File that keeps the key-value configuration across restarts
    /// (RocketMQ's default `~/namesrv/kvConfig.json`).
    #[arg(long)]
    kv_config_path: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let config = NamesrvConfig {
        listen_port: args.listen_port,
        scan_not_active_broker_interval: args.scan_not_active_broker_interval,
        kv_config_path: args.kv_config_path.or_else(|| {
            std::env::var_os("HOME")
                .map(|home| std::path::PathBuf::from(home).join("namesrv/kvConfig.json"))
        }),
        ..NamesrvConfig::default()
    };
    config
        .validate()
        .context("invalid name server configuration")?;
    let kv_config = name_server::open_kv_config(&config)?;
    let addr = format!("{}:{}", args.bind, config.listen_port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("bind name server to {addr}"))?;
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        stop.cancel();
    });
    name_server::run(listener, config, kv_config, shutdown).await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = ctrl_c.await;
            return;
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}
