//! The name server over TCP: requests are answered on the connection's
//! reader task (route lookups are in-memory and quick), and brokers that
//! stop registering are dropped by a periodic scan.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use remoting_net::{serve, CancellationToken, Connection, Handler, ServerOptions};
use remoting_protocol::RemotingCommand;
use tokio::net::TcpListener;

use crate::{NameServerProcessor, NamesrvConfig, RouteRegistry};

struct NamesrvHandler {
    processor: NameServerProcessor,
}

impl Handler for NamesrvHandler {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
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

/// Serves the name server on `listener` until `shutdown` fires, scanning for
/// silent brokers every `scanNotActiveBrokerInterval`.
pub async fn run(listener: TcpListener, config: NamesrvConfig, shutdown: CancellationToken) {
    let registry = Arc::new(RouteRegistry::from_config(&config));
    let handler = Arc::new(NamesrvHandler {
        processor: NameServerProcessor::new(Arc::clone(&registry)),
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
        idle_timeout: Some(Duration::from_secs(120)),
        max_connections: config.max_connections,
        max_connections_per_address: config.max_connections_per_address,
        ..ServerOptions::default()
    };
    serve(listener, handler, options, shutdown).await;
    let _ = scanner.await;
}
