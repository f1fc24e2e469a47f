//! Drives both loops against a fake broker inside the test: every request is
//! answered `SUCCESS`, except every third, which is answered `SYSTEM_BUSY`
//! with a `[TIMEOUT_CLEAN_QUEUE]` remark reporting 250 ms in queue. Proves
//! that the loops send, stop by themselves, and count busy responses by tag
//! with the reported period. A broker that takes only signed sends proves
//! that `--access-key` and `--secret-key` sign every send.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use anyhow::{Context, Result};
use bench::{report::Table, run, Config, Report};
use remoting_net::{
    serve, CancellationToken, Connection, Handler, ServerOptions, ServerTls, TlsMode,
};
use remoting_protocol::{
    acl::{self, Credentials},
    header::SendMessageResponseHeader,
    RemotingCommand, ResponseCode,
};
use tokio::{net::TcpListener, task::JoinHandle};

const BUSY_REMARK: &str = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, \
                           period in queue: 250ms, size of queue: 3";

/// Answers every request at once; every third one busy.
#[derive(Default)]
struct FakeBroker {
    requests: AtomicU64,
}

impl Handler for FakeBroker {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let response = if n.is_multiple_of(3) {
            request.response_to(ResponseCode::SYSTEM_BUSY, Some(BUSY_REMARK.into()))
        } else {
            request
                .response_to(ResponseCode::SUCCESS, None)
                .with_header(&SendMessageResponseHeader {
                    msg_id: format!("{n:032X}"),
                    queue_id: 0,
                    queue_offset: i64::try_from(n).unwrap_or(i64::MAX),
                    ..SendMessageResponseHeader::default()
                })
        };
        conn.send(response);
    }
}

/// Stores every send signed by `alice` with her secret; refuses any other
/// with `NO_PERMISSION`.
struct SigningBroker;

const ACCESS_KEY: &str = "alice";
const SECRET: &str = "alice-secret";

impl Handler for SigningBroker {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let signed = acl::access_key(&request) == Some(ACCESS_KEY)
            && acl::verify(&request, SECRET.as_bytes());
        let response = if signed {
            request
                .response_to(ResponseCode::SUCCESS, None)
                .with_header(&SendMessageResponseHeader {
                    msg_id: "0A000001000000000000000000000001".into(),
                    ..SendMessageResponseHeader::default()
                })
        } else {
            request.response_to(ResponseCode::NO_PERMISSION, Some("not signed".into()))
        };
        conn.send(response);
    }
}

struct Running {
    addr: String,
    shutdown: CancellationToken,
    server: JoinHandle<()>,
}

impl Running {
    async fn start() -> Result<Self> {
        Self::start_with(ServerOptions::default()).await
    }

    async fn start_with(options: ServerOptions) -> Result<Self> {
        Self::serve(Arc::new(FakeBroker::default()), options).await
    }

    async fn serve(handler: Arc<impl Handler>, options: ServerOptions) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(listener, handler, options, shutdown.clone()));
        Ok(Self {
            addr,
            shutdown,
            server,
        })
    }

    async fn stop(self) -> Result<()> {
        self.shutdown.cancel();
        self.server.await.context("fake broker task")
    }
}

fn short_config(addr: &str) -> Config {
    let mut config = Config::new(addr);
    config.warmup = Duration::from_millis(50);
    config.duration = Duration::from_millis(300);
    config.connections = 2;
    config.queues = 4;
    config.body_bytes = 128;
    config.timeout = Duration::from_secs(1);
    config.progress = false;
    config
}

fn assert_busy_counted(report: &Report) {
    assert!(report.ok > 0, "{}", Table(report));
    let busy = report.failed.busy.get("TIMEOUT_CLEAN_QUEUE").copied();
    assert!(busy.is_some_and(|n| n > 0), "{}", Table(report));
    assert_eq!(report.failed.busy.len(), 1, "{}", Table(report));
    assert_eq!(
        report.period_in_queue_ms.map(|p| p.max),
        Some(250),
        "{}",
        Table(report)
    );
    assert_eq!(
        report.time_to_busy_ms.map(|b| b.count),
        busy,
        "every busy response has a time to busy"
    );
    assert_eq!(report.latency_ms.map(|l| l.count), Some(report.ok));
    assert_eq!(
        report.ok + busy.unwrap_or(0),
        report.sent,
        "{}",
        Table(report)
    );
    assert_eq!(report.failed.timeout, 0, "{}", Table(report));
    assert_eq!(report.failed.connection_error, 0, "{}", Table(report));
    assert!(report.to_json().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_counts_successes_and_busy_by_tag() -> Result<()> {
    let broker = Running::start().await?;
    let report = tokio::time::timeout(
        Duration::from_secs(10),
        run::closed_loop(&short_config(&broker.addr), 4),
    )
    .await
    .context("the closed loop stops by itself")??;
    assert_eq!(report.mode, "closed");
    assert_busy_counted(&report);
    broker.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_the_loop_reaches_a_broker_that_enforces_it() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])?;
    let (crt, key) = (dir.path().join("b.crt"), dir.path().join("b.key"));
    std::fs::write(&crt, cert.cert.pem())?;
    std::fs::write(&key, cert.key_pair.serialize_pem())?;
    let tls = ServerTls::from_pem_files(TlsMode::Enforcing, &crt, &key)?;
    let broker = Running::start_with(ServerOptions {
        tls: Some(Arc::new(tls)),
        ..ServerOptions::default()
    })
    .await?;
    let mut config = short_config(&broker.addr);
    config.tls = true;
    let report = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert_busy_counted(&report);
    // Trusting the broker's own certificate reaches it too; trusting
    // another one refuses it at the handshake.
    config.tls_trust = Some(crt.clone());
    let report = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert_busy_counted(&report);
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])?;
    let other_crt = dir.path().join("other.crt");
    std::fs::write(&other_crt, other.cert.pem())?;
    config.tls_trust = Some(other_crt);
    let distrusted = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")?;
    assert!(distrusted.is_err() || distrusted.is_ok_and(|r| r.ok == 0));
    config.tls_trust = None;
    // Without TLS the enforcing port closes every connection unanswered.
    config.tls = false;
    let plain = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")?;
    assert!(plain.is_err() || plain.is_ok_and(|r| r.ok == 0));
    broker.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_access_key_every_send_is_signed_and_without_none_is_taken() -> Result<()> {
    let broker = Running::serve(Arc::new(SigningBroker), ServerOptions::default()).await?;
    let mut config = short_config(&broker.addr);
    config.credentials = Some(Credentials::new(ACCESS_KEY, SECRET));
    let report = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert!(report.ok > 0, "{}", Table(&report));
    assert_eq!(report.ok, report.sent, "{}", Table(&report));
    config.credentials = None;
    let unsigned = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert!(unsigned.sent > 0, "{}", Table(&unsigned));
    assert_eq!(unsigned.ok, 0, "{}", Table(&unsigned));
    broker.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_sends_at_the_offered_rate_and_counts_busy_by_tag() -> Result<()> {
    let broker = Running::start().await?;
    let config = short_config(&broker.addr);
    let report = tokio::time::timeout(
        Duration::from_secs(10),
        run::open_loop(&config, 2000.0, 1000),
    )
    .await
    .context("the open loop stops by itself")??;
    assert_eq!(report.mode, "open");
    assert_busy_counted(&report);
    // 2000/s over 300 ms is 600 requests; allow for the window's edges.
    assert!((590..=610).contains(&report.sent), "{}", Table(&report));
    assert_eq!(report.failed.client_backlog, 0, "{}", Table(&report));
    broker.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_skips_requests_beyond_the_outstanding_cap() -> Result<()> {
    // A listener that accepts but never answers keeps every request outstanding.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let silent = tokio::spawn(async move {
        if let Ok((_stream, _)) = listener.accept().await {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });
    let mut config = short_config(&addr);
    config.connections = 1;
    config.timeout = Duration::from_millis(200);
    let report = tokio::time::timeout(Duration::from_secs(10), run::open_loop(&config, 1000.0, 5))
        .await
        .context("the open loop stops by itself")??;
    assert_eq!(report.ok, 0, "{}", Table(&report));
    assert!(report.failed.client_backlog > 0, "{}", Table(&report));
    assert!(report.failed.timeout > 0, "{}", Table(&report));
    assert_eq!(report.sent, report.failed.timeout, "{}", Table(&report));
    silent.abort();
    Ok(())
}
