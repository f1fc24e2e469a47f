//! The name server over TCP: requests are answered on the connection's
//! reader task (route lookups are in-memory and quick), and brokers that
//! stop registering are dropped by a periodic scan.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use controller::{is_controller_code, Controller};
use remoting_net::{serve, CancellationToken, Connection, Handler, ServerOptions, ServerTls};
use remoting_protocol::RemotingCommand;
use tokio::net::TcpListener;

use crate::{
    kv_config::{KvConfig, KvConfigError},
    NameServerProcessor, NamesrvConfig, RouteRegistry,
};

struct NamesrvHandler {
    processor: NameServerProcessor,
    controller: Option<Arc<Controller>>,
}

impl Handler for NamesrvHandler {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        // Controller requests on the name server's port too, as RocketMQ
        // serves them with the controller embedded.
        if let Some(controller) = self
            .controller
            .as_ref()
            .filter(|_| is_controller_code(request.request_code()))
        {
            let controller = Arc::clone(controller);
            let conn = Arc::clone(conn);
            tokio::spawn(async move {
                if let Some(response) = controller.handle(&request, None).await {
                    conn.send(response);
                }
            });
            return;
        }
        if let Some(response) = self
            .processor
            .handle(&request, Instant::now(), Some(conn.id()))
        {
            conn.send(response);
        }
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        for addr in self.processor.registry().connection_closed(conn.id()) {
            tracing::info!(broker = %addr, "broker connection closed; routes removed");
        }
    }
}

/// Loads the key-value configuration `config` names (`kvConfigPath`), or
/// an empty in-memory one.
///
/// # Errors
/// [`KvConfigError`] when the file exists but cannot be read or parsed.
pub fn open_kv_config(config: &NamesrvConfig) -> Result<Arc<KvConfig>, KvConfigError> {
    Ok(Arc::new(match &config.kv_config_path {
        Some(path) => KvConfig::open(path.clone())?,
        None => KvConfig::new(),
    }))
}

/// Serves the name server on `listener`, with `kv_config` (see
/// [`open_kv_config`]) and `tls` (see [`NamesrvConfig::server_tls`]), until
/// `shutdown` fires, scanning for silent brokers every
/// `scanNotActiveBrokerInterval`.
pub async fn run(
    listener: TcpListener,
    config: NamesrvConfig,
    kv_config: Arc<KvConfig>,
    tls: Option<Arc<ServerTls>>,
    shutdown: CancellationToken,
) {
    run_with_controller(listener, config, kv_config, tls, None, shutdown).await;
}

/// [`run`], with the controller requests that come to the name server's
/// port answered by `controller`.
pub async fn run_with_controller(
    listener: TcpListener,
    config: NamesrvConfig,
    kv_config: Arc<KvConfig>,
    tls: Option<Arc<ServerTls>>,
    controller: Option<Arc<Controller>>,
    shutdown: CancellationToken,
) {
    // Checked by `validate` before start; serving unguarded instead of
    // with credentials that do not parse would open the name server.
    let guard = match config.cluster_credentials() {
        Ok(guard) => guard,
        Err(e) => {
            tracing::error!(cause = %e, "name server not started");
            return;
        }
    };
    let registry = Arc::new(RouteRegistry::from_config(&config));
    let handler = Arc::new(NamesrvHandler {
        processor: NameServerProcessor::with_kv_config(Arc::clone(&registry), kv_config)
            .with_guard(guard),
        controller,
    });
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "name server listening");
    }
    let scan = config.scan_interval();
    let scanner = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(scan) => {}
                }
                for addr in registry.scan_expired(Instant::now()) {
                    tracing::warn!(broker = %addr, "broker expired: no registration within its timeout");
                }
            }
        })
    };
    let options = ServerOptions {
        tls,
        idle_timeout: Some(Duration::from_secs(120)),
        max_connections: config.max_connections,
        max_connections_per_address: config.max_connections_per_address,
        ..ServerOptions::default()
    };
    serve(listener, handler, options, shutdown).await;
    let _ = scanner.await;
}
