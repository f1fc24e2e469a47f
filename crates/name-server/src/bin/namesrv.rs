//! The `namesrv` binary: a standalone name server.

use std::{path::PathBuf, sync::Arc};

use anyhow::{bail, Context};
use clap::Parser;
use name_server::NamesrvConfig;
use remoting_net::{CancellationToken, ServerTls};

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
    kv_config_path: Option<PathBuf>,
    /// A TOML file of settings (camelCase keys, as `--set` takes them),
    /// applied before `--set`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// One setting, `key=value`, such as `authenticationEnabled=true`;
    /// repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Run a replication controller too (`enableControllerInNamesrv=true`);
    /// `controllerDLegerPeers` and `controllerDLegerSelfId` name the
    /// controllers and this one.
    #[arg(long)]
    controller: bool,
    /// Run only the replication controller: a standalone controller, with
    /// no name server port.
    #[arg(long, conflicts_with = "controller")]
    controller_only: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
        )
        .init();
    let args = Args::parse();
    let base = NamesrvConfig {
        listen_port: args.listen_port,
        scan_not_active_broker_interval: args.scan_not_active_broker_interval,
        kv_config_path: args.kv_config_path.clone().or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join("namesrv/kvConfig.json"))
        }),
        ..NamesrvConfig::default()
    };
    let mut config = settings(base, args.config.as_deref(), &args.sets)?;
    if args.controller || args.controller_only {
        config.enable_controller_in_namesrv = true;
    }
    config
        .validate()
        .context("invalid name server configuration")?;
    let shutdown = CancellationToken::new();
    let controller = start_controller(&config, &args.bind, shutdown.clone()).await?;
    if args.controller_only {
        shutdown_signal().await;
        tracing::info!("shutting down");
        if let Some(controller) = controller {
            controller.shutdown().await;
        }
        return Ok(());
    }
    let tls = config
        .server_tls()
        .context("invalid name server configuration")?
        .map(Arc::new);
    if let Some(tls) = &tls {
        tracing::info!(mode = %tls.mode(), "TLS on the name server port");
        ServerTls::reload_on_sighup(tls, "name server");
    }
    let kv_config = name_server::open_kv_config(&config)?;
    let addr = format!("{}:{}", args.bind, config.listen_port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("bind name server to {addr}"))?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        stop.cancel();
    });
    name_server::run_with_controller(
        listener,
        config,
        kv_config,
        tls,
        controller.clone(),
        shutdown,
    )
    .await;
    if let Some(controller) = controller {
        controller.shutdown().await;
    }
    Ok(())
}

/// Starts the controller the settings ask for, its port bound on `bind`
/// at the port its own `controllerDLegerPeers` entry names.
async fn start_controller(
    config: &NamesrvConfig,
    bind: &str,
    shutdown: CancellationToken,
) -> anyhow::Result<Option<Arc<controller::Controller>>> {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let Some(controller_config) = config
        .controller_config(&home.join("controller"))
        .context("invalid controller configuration")?
    else {
        return Ok(None);
    };
    let me = controller_config.me().clone();
    let port = me
        .addr
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .context("controllerDLegerPeers: the address has no port")?;
    let addr = format!("{bind}:{port}");
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("bind controller {} to {addr}", me.name))?;
    let controller = controller::Controller::start(controller_config, listener, shutdown)
        .await
        .context("controller did not start")?;
    Ok(Some(controller))
}

/// `base` with the settings of `file` and then `sets` applied; a key the
/// name server does not know is refused by name.
fn settings(
    base: NamesrvConfig,
    file: Option<&std::path::Path>,
    sets: &[String],
) -> anyhow::Result<NamesrvConfig> {
    let mut value = serde_json::to_value(&base)?;
    let Some(map) = value.as_object_mut() else {
        bail!("the name server's settings are not a map");
    };
    let known: Vec<String> = map.keys().cloned().collect();
    let mut apply = |key: &str, new: serde_json::Value| -> anyhow::Result<()> {
        match map.get_mut(key) {
            Some(slot) => {
                *slot = new;
                Ok(())
            }
            None => bail!(
                "unknown name server setting `{key}`; known: {}",
                known.join(", ")
            ),
        }
    };
    if let Some(path) = file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        for (key, v) in table {
            apply(&key, serde_json::to_value(v)?)?;
        }
    }
    for set in sets {
        let Some((key, text)) = set.split_once('=') else {
            bail!("--set {set:?}: expected key=value");
        };
        let text = text.trim();
        let v = text
            .parse::<bool>()
            .map(serde_json::Value::from)
            .or_else(|_| text.parse::<u64>().map(serde_json::Value::from))
            .unwrap_or_else(|_| serde_json::Value::from(text));
        apply(key.trim(), v)?;
    }
    serde_json::from_value(value).context("invalid name server configuration")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_file_then_each_set_and_unknown_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namesrv.toml");
        std::fs::write(&file, "authenticationEnabled = true\nlistenPort = 9999\n").unwrap();
        let sets = [
            r#"innerClientAuthenticationCredentials={"accessKey":"c","secretKey":"s"}"#.to_owned(),
            "listenPort=9877".to_owned(),
        ];
        let c = settings(NamesrvConfig::default(), Some(&file), &sets).unwrap();
        assert!(c.authentication_enabled);
        assert_eq!(c.listen_port, 9877, "--set wins over the file");
        assert_eq!(c.cluster_credentials().unwrap().unwrap().access_key, "c");
        let err = settings(NamesrvConfig::default(), None, &["listenPrt=1".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown name server setting `listenPrt`"),
            "{err}"
        );
        let err =
            settings(NamesrvConfig::default(), None, &["listenPort=x".to_owned()]).unwrap_err();
        assert!(format!("{err:#}").contains("expected u16"), "{err:#}");
    }
}
