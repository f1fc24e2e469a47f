//! `--tls` makes every connection of `sluice-admin`, to the name server and
//! the brokers alike, over TLS: one fake server plays both parts on a port
//! whose TLS mode is `enforcing`, which closes plain connections before
//! they are served. It names itself as the only master broker and lists no
//! users. `--tls-trust` names the certificates to trust instead of any, and
//! `--tls-cert` with `--tls-key` the certificate shown to a server
//! requiring one.
#![allow(clippy::unwrap_used)]

use client_core::testing::{served, start_fake, Pems};
use std::{sync::Arc, time::Duration};

use admin::{AdminError, Cli};
use clap::Parser;
use remoting_net::{CancellationToken, ServerTls};
use remoting_protocol::RequestCode;
use tokio::sync::mpsc;

/// The fake, running.
struct Running {
    addr: String,
    seen: mpsc::UnboundedReceiver<RequestCode>,
    stop: CancellationToken,
}

impl Running {
    async fn start(tls: Arc<ServerTls>) -> Self {
        let (addr, seen, stop) = start_fake(tls).await;
        Self { addr, seen, stop }
    }

    /// Runs `sluice-admin <flags> user list` against this name server.
    async fn users(&self, flags: &[&str]) -> Result<String, AdminError> {
        let argv: Vec<&str> = ["sluice-admin", "--namesrv", self.addr.as_str()]
            .into_iter()
            .chain(flags.iter().copied())
            .chain(["user", "list"])
            .collect();
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        tokio::time::timeout(Duration::from_secs(20), admin::run(&cli))
            .await
            .expect("the command did not end")
    }

    /// The codes of the requests served since the last call.
    fn served(&mut self) -> Vec<RequestCode> {
        served(&mut self.seen)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_the_name_server_and_the_broker_are_asked_over_tls() {
    let pems = Pems::new("admin");
    let mut fake = Running::start(pems.enforcing(false)).await;
    assert_eq!(fake.users(&["--tls"]).await.unwrap(), "no users\n");
    assert_eq!(
        fake.served(),
        [
            RequestCode::GET_BROKER_CLUSTER_INFO,
            RequestCode::AUTH_LIST_USER
        ]
    );

    let plain = fake.users(&[]).await.unwrap_err();
    assert!(matches!(plain, AdminError::Connection { .. }), "{plain:?}");
    assert_eq!(fake.served(), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_roots_and_a_client_certificate_reach_a_server_requiring_one() {
    let pems = Pems::new("admin");
    let mut fake = Running::start(pems.enforcing(true)).await;
    let trust = pems.server_crt.to_string_lossy().into_owned();
    let cert = pems.client_crt.to_string_lossy().into_owned();
    let key = pems.client_key.to_string_lossy().into_owned();
    let identified = [
        "--tls",
        "--tls-trust",
        &trust,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ];
    assert_eq!(fake.users(&identified).await.unwrap(), "no users\n");
    assert_eq!(
        fake.served(),
        [
            RequestCode::GET_BROKER_CLUSTER_INFO,
            RequestCode::AUTH_LIST_USER
        ]
    );

    // Without the certificate the server refuses the handshake.
    let anonymous = fake.users(&["--tls", "--tls-trust", &trust]).await;
    assert!(
        matches!(anonymous, Err(AdminError::Connection { .. })),
        "{anonymous:?}"
    );
    // Roots that did not sign the server's certificate refuse the server.
    let ca = pems.ca.to_string_lossy().into_owned();
    let distrusting = [
        "--tls",
        "--tls-trust",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ];
    let refused = fake.users(&distrusting).await;
    assert!(
        matches!(refused, Err(AdminError::Connection { .. })),
        "{refused:?}"
    );
    assert_eq!(fake.served(), []);
}
