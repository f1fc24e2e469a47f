//! End-to-end scenarios run by `cargo xtask e2e` against real name server and
//! broker processes on loopback.
//!
//! `cargo xtask e2e` starts one name server and two brokers and passes their
//! addresses in environment variables; [`E2eEnv::from_env`] reads them. Run
//! without them (as `cargo test --workspace` does), every scenario prints a
//! line and returns, so the suite passes vacuously.
//!
//! - `SLUICE_E2E_NAMESRV`: the name server, `127.0.0.1:port`.
//! - `SLUICE_E2E_BROKER_A`, `SLUICE_E2E_BROKER_B`: the brokers' remoting
//!   addresses (broker names `broker-a` and `broker-b`).
//! - `SLUICE_E2E_GRPC_A`: broker-a's gRPC endpoint (`127.0.0.1:port`).
//! - `SLUICE_E2E_BROKER_A_BIN`: the broker binary, for scenarios that start
//!   their own broker.
//! - `SLUICE_E2E_DIR`: the run's temporary directory.
//! - `SLUICE_E2E_QUICK=1`: smaller message counts.
//! - `SLUICE_E2E_CPP_PYTHON`: the python of the venv holding Apache's
//!   RocketMQ C++ client (`scripts/install-cpp-client.sh`), which runs
//!   `tests/cpp-client/driver.py`; its scenarios skip without it.

use std::{
    future::Future,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, ensure, Context, Result};
use consumer_client::{ConsumerConfig, PullConsumer};
use proc_harness::loopback;
pub use proc_harness::{free_port, Launch, Proc};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{
        CreateTopicRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
        TopicFilterType,
    },
    RemotingCommand, RequestCode, ResponseCode, AUTO_CREATE_TOPIC,
};

/// The processes started by `cargo xtask e2e`.
#[derive(Debug, Clone)]
pub struct E2eEnv {
    /// Name server address.
    pub namesrv: String,
    /// Remoting addresses of `broker-a` and `broker-b`.
    pub brokers: [String; 2],
    /// broker-a's gRPC endpoint.
    pub grpc: Option<String>,
    /// Path of the broker binary.
    pub broker_bin: Option<PathBuf>,
    /// The run's temporary directory.
    pub dir: Option<PathBuf>,
    /// Whether to use small message counts.
    pub quick: bool,
    /// The python that drives the RocketMQ C++ client.
    pub cpp_python: Option<PathBuf>,
}

impl E2eEnv {
    /// Reads the environment; `None` (after printing why) when the suite
    /// runs without processes, in which case the caller returns at once.
    pub fn from_env(scenario: &str) -> Option<Self> {
        let Ok(namesrv) = std::env::var("SLUICE_E2E_NAMESRV") else {
            println!("skipping {scenario}: SLUICE_E2E_NAMESRV not set (run `cargo xtask e2e`)");
            return None;
        };
        let var = |name: &str| std::env::var(name).ok();
        Some(Self {
            namesrv,
            brokers: [
                var("SLUICE_E2E_BROKER_A").unwrap_or_default(),
                var("SLUICE_E2E_BROKER_B").unwrap_or_default(),
            ],
            grpc: var("SLUICE_E2E_GRPC_A"),
            broker_bin: var("SLUICE_E2E_BROKER_A_BIN").map(PathBuf::from),
            dir: var("SLUICE_E2E_DIR").map(PathBuf::from),
            quick: var("SLUICE_E2E_QUICK").is_some_and(|v| v == "1"),
            cpp_python: var("SLUICE_E2E_CPP_PYTHON").map(PathBuf::from),
        })
    }

    /// Creates `topic` with `queues` read and write queues on both brokers
    /// and waits (up to 15 s) until the name server routes all of them.
    ///
    /// # Errors
    /// When a broker refuses or the route does not appear in time.
    pub async fn create_topic(&self, topic: &str, queues: i32) -> Result<()> {
        let client = RemotingClient::new(ClientOptions::default());
        for addr in &self.brokers {
            let req = create_topic_request(topic, queues);
            let resp = client
                .invoke(addr, req, Duration::from_secs(5))
                .await
                .with_context(|| format!("create topic {topic} on {addr}"))?;
            ensure!(
                resp.response_code() == ResponseCode::SUCCESS,
                "create topic {topic} on {addr}: {:?} {:?}",
                resp.response_code(),
                resp.remark
            );
        }
        client.close_all().await;
        let want = usize::try_from(queues)? * self.brokers.len();
        let probe =
            PullConsumer::start(ConsumerConfig::new(&self.namesrv, "e2e-route-probe")).await?;
        wait_for(Duration::from_secs(15), || async {
            probe
                .fetch_queues(topic)
                .await
                .is_ok_and(|q| q.len() == want)
        })
        .await
        .with_context(|| format!("route of {topic} with {want} queues"))
    }
}

impl E2eEnv {
    /// Creates (or replaces) a subscription group on both brokers with
    /// `consumeMessageOrderly` set, so that its gRPC consumers get FIFO
    /// delivery.
    ///
    /// # Errors
    /// When a broker refuses.
    pub async fn create_orderly_group(&self, group: &str) -> Result<()> {
        let client = RemotingClient::new(ClientOptions::default());
        for addr in &self.brokers {
            let body = format!(r#"{{"groupName":"{group}","consumeMessageOrderly":true}}"#);
            let req = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
                .with_body(body.into_bytes());
            let resp = client
                .invoke(addr, req, Duration::from_secs(5))
                .await
                .with_context(|| format!("create group {group} on {addr}"))?;
            ensure!(
                resp.response_code() == ResponseCode::SUCCESS,
                "create group {group} on {addr}: {:?} {:?}",
                resp.response_code(),
                resp.remark
            );
        }
        client.close_all().await;
        Ok(())
    }
}

/// A name unique to this run: `prefix` plus the time in ms.
pub fn unique(prefix: &str) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}{ms}")
}

/// Polls `check` every 100 ms until it holds.
///
/// # Errors
/// When it still does not hold after `limit`.
pub async fn wait_for<F, Fut>(limit: Duration, check: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        if start.elapsed() >= limit {
            bail!("condition not met within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Broker settings that make queued sends expire: one send worker, an
/// 80 ms put-lock fault, a 50 ms wait limit, early and adaptive admission
/// off.
pub const SLOW_SENDS: [&str; 5] = [
    "sendMessageThreadPoolNums=1",
    "faultPutLockDelayMills=80",
    "waitTimeMillsInSendQueue=50",
    "earlyAdmissionEnable=false",
    "adaptiveAdmissionEnable=false",
];

/// How long a scenario's broker may take to open its port.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);
/// What a broker logs once started and registered with its name servers.
const STARTED_LINE: &str = "broker started";
/// Lines of a scenario broker's log printed when the scenario panics.
const LOG_TAIL_LINES: usize = 40;

/// Starts the broker binary as a child process with its own embedded name
/// server: remoting on `port`, name server on `ns_port`, store and log
/// (`broker.log`, appended to, so that a restart keeps one log) under `dir`,
/// metrics and gRPC on no fixed port, 64 MiB CommitLog files, then `sets`
/// (`key=value`), with the environment variables `envs` set (after the
/// `SLUICE_*` ones were removed). Waits (up to 20 s) until the port accepts connections.
/// The suite's own `SLUICE_*` variables are removed from the broker's
/// environment, since the broker refuses keys it does not know. The
/// process is killed when the returned [`Proc`] is dropped, and the tail of
/// its log is printed if that happens because the scenario panicked.
///
/// # Errors
/// When the process cannot start, exits, or its port does not open in time.
pub fn spawn_broker(
    bin: &Path,
    dir: &Path,
    port: u16,
    ns_port: u16,
    sets: &[String],
    envs: &[(String, String)],
) -> Result<Proc> {
    spawn_broker_at(bin, dir, port, ns_port, sets, envs, None)
}

/// Where a process runs when not on this host's loopback: a network
/// namespace (`ip netns`) and the address it has there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The namespace's name.
    pub netns: String,
    /// The process's IPv4 address in it.
    pub ip: String,
}

impl Place {
    /// A launch of `bin` inside this namespace (through `ip netns exec`,
    /// which keeps the process id).
    pub fn launch(&self, name: &str, bin: &Path, log: PathBuf) -> Launch {
        Launch::new(name, "ip", log)
            .args(["netns", "exec", &self.netns])
            .arg(bin)
    }

    /// `ip:port`.
    pub fn addr(&self, port: u16) -> String {
        format!("{}:{port}", self.ip)
    }
}

/// [`spawn_broker`], in the network namespace `place` when given: the
/// broker registers that address (`brokerIP1`) and is waited for there.
///
/// # Errors
/// When the process cannot start, exits, or its port does not open in time.
pub fn spawn_broker_at(
    bin: &Path,
    dir: &Path,
    port: u16,
    ns_port: u16,
    sets: &[String],
    envs: &[(String, String)],
    place: Option<&Place>,
) -> Result<Proc> {
    let log = dir.join("broker.log");
    // The log is appended to across restarts: this start is done when one
    // more "broker started" line is there.
    let starts_before = log_lines(&log, STARTED_LINE).len();
    let mut launch = match place {
        Some(place) => place
            .launch("broker", bin, log.clone())
            .set(format!("brokerIP1={}", place.ip)),
        None => Launch::new("broker", bin, log.clone()),
    }
    .env_remove_prefixed("SLUICE_");
    for (key, value) in envs {
        launch = launch.env(key, value);
    }
    let mut broker = launch
        .append_log()
        .tail_on_panic(LOG_TAIL_LINES)
        .args(["-p", &port.to_string(), "--store-dir"])
        .arg(dir.join("store"))
        .settings([
            format!("namesrvListenPort={ns_port}"),
            "metricsListenPort=0".to_owned(),
            "grpcListenPort=0".to_owned(),
            "mappedFileSizeCommitLog=67108864".to_owned(),
            // IndexFiles of about 4.4 MB instead of 420 MB.
            "maxHashSlotNum=100000".to_owned(),
            "maxIndexNum=200000".to_owned(),
        ])
        .settings(sets)
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    let addr = place.map_or_else(|| loopback(port), |p| p.addr(port));
    broker.wait_listening(&addr, STARTUP_LIMIT)?;
    // The port opens before the broker's first registration with its name
    // servers is answered, and until then its topics have no route; the
    // broker logs "broker started" once it was.
    let deadline = std::time::Instant::now() + STARTUP_LIMIT;
    while log_lines(&log, STARTED_LINE).len() <= starts_before {
        ensure!(
            std::time::Instant::now() < deadline,
            "the broker did not log {STARTED_LINE:?} within {STARTUP_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(broker)
}

/// A broker process of one scenario, with its own embedded name server and
/// store under the run's directory; killed when dropped, printing the tail
/// of its log when the scenario panicked.
#[derive(Debug)]
pub struct OwnBroker {
    proc: Proc,
    bin: PathBuf,
    port: u16,
    ns_port: u16,
    sets: Vec<String>,
    envs: Vec<(String, String)>,
    place: Option<Place>,
    /// Remoting address, `127.0.0.1:port` (`ip:port` in a namespace).
    pub addr: String,
    /// Its embedded name server, `127.0.0.1:port` (`ip:port`).
    pub namesrv: String,
    /// Its directory (store and `broker.log`).
    pub dir: PathBuf,
}

impl OwnBroker {
    /// Starts the e2e broker binary with `sets` (`key=value`) in a fresh
    /// directory named after `name`.
    ///
    /// # Errors
    /// When the suite runs without the binary or the broker does not start.
    pub fn start(env: &E2eEnv, name: &str, sets: &[&str]) -> Result<Self> {
        let dir = env
            .dir
            .clone()
            .context("SLUICE_E2E_DIR not set")?
            .join(unique(&format!("{name}-")));
        Self::start_at(env, dir, sets)
    }

    /// Starts the e2e broker binary with `sets` in `dir` (its store and log).
    ///
    /// # Errors
    /// When the suite runs without the binary or the broker does not start.
    pub fn start_at(env: &E2eEnv, dir: PathBuf, sets: &[&str]) -> Result<Self> {
        Self::start_with_env(env, dir, sets, &[])
    }

    /// Starts the e2e broker binary with `sets` in `dir`, with the
    /// environment variables `envs` set (also on every restart).
    ///
    /// # Errors
    /// When the suite runs without the binary or the broker does not start.
    pub fn start_with_env(
        env: &E2eEnv,
        dir: PathBuf,
        sets: &[&str],
        envs: &[(&str, &str)],
    ) -> Result<Self> {
        Self::start_in(env, dir, sets, envs, None)
    }

    /// Starts the e2e broker binary with `sets` and `envs` in `dir`, in the
    /// network namespace `place` when given (also on every restart).
    ///
    /// # Errors
    /// When the suite runs without the binary or the broker does not start.
    pub fn start_in(
        env: &E2eEnv,
        dir: PathBuf,
        sets: &[&str],
        envs: &[(&str, &str)],
        place: Option<Place>,
    ) -> Result<Self> {
        let bin = env
            .broker_bin
            .clone()
            .context("SLUICE_E2E_BROKER_A_BIN not set")?;
        let (port, ns_port) = (free_port()?, free_port()?);
        let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
        let envs: Vec<(String, String)> = envs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let proc = spawn_broker_at(&bin, &dir, port, ns_port, &sets, &envs, place.as_ref())?;
        let at = |port| {
            place
                .as_ref()
                .map_or_else(|| loopback(port), |p| p.addr(port))
        };
        Ok(Self {
            proc,
            bin,
            port,
            ns_port,
            sets,
            envs,
            addr: at(port),
            namesrv: at(ns_port),
            place,
            dir,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// Whether the process is still running (a crash shows here).
    pub fn is_running(&mut self) -> bool {
        self.proc.is_running()
    }

    /// Waits (up to `limit`) for the process to exit by itself; its exit
    /// status, or `None` when it still runs.
    ///
    /// # Errors
    /// When the process's state cannot be read.
    pub async fn wait_exit(&mut self, limit: Duration) -> Result<Option<std::process::ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.proc.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM and waits up to `limit` for the exit: its status, or
    /// `None` when the process still runs.
    ///
    /// # Errors
    /// When the signal cannot be sent or the state cannot be read.
    pub async fn terminate(&mut self, limit: Duration) -> Result<Option<std::process::ExitStatus>> {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.proc.id().to_string()])
            .status()
            .context("run kill -TERM")?;
        ensure!(sent.success(), "kill -TERM {} failed", self.proc.id());
        self.wait_exit(limit).await
    }

    /// Starts the broker again on the same store, ports and settings, after
    /// it exited.
    ///
    /// # Errors
    /// When it does not start again.
    pub fn restart(&mut self) -> Result<()> {
        self.proc = spawn_broker_at(
            &self.bin,
            &self.dir,
            self.port,
            self.ns_port,
            &self.sets,
            &self.envs,
            self.place.as_ref(),
        )?;
        Ok(())
    }

    /// Kills the broker with SIGKILL and waits until it is gone; start it
    /// again with [`OwnBroker::restart`].
    ///
    /// # Errors
    /// When the process cannot be killed.
    pub fn kill(&mut self) -> Result<()> {
        self.proc.kill().context("kill -9 the broker")
    }

    /// Kills the broker with SIGKILL and starts it again on the same store,
    /// ports and settings.
    ///
    /// # Errors
    /// When the process cannot be killed or does not start again.
    pub fn kill_and_restart(&mut self) -> Result<()> {
        self.kill()?;
        self.restart()
    }
}

/// An `UPDATE_AND_CREATE_TOPIC` request for `topic` with `queues` read and
/// write queues, readable and writable, created from `TBW102`.
pub fn create_topic_request(topic: &str, queues: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &CreateTopicRequestHeader {
            topic: topic.into(),
            default_topic: AUTO_CREATE_TOPIC.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            topic_filter_type: TopicFilterType::SingleTag,
            order: false,
            ..CreateTopicRequestHeader::default()
        },
    )
}

/// A `SEND_MESSAGE_V2` request for queue 0 of `topic` (created from
/// `TBW102` if missing) with the body `"busy {i}"`.
pub fn send_request(topic: &str, i: usize) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "e2e-busy".into(),
        topic: topic.into(),
        default_topic: AUTO_CREATE_TOPIC.into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        born_timestamp: 1_700_000_000_000,
        ..SendMessageRequestHeader::default()
    });
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(format!("busy {i}").into_bytes())
}

/// Sends `n` requests of [`send_request`] at once; returns (code, remark)
/// of each answer, in request order.
///
/// # Errors
/// When a request gets no answer within 10 s.
pub async fn burst(
    client: &Arc<RemotingClient>,
    addr: &str,
    topic: &str,
    n: usize,
) -> Result<Vec<(ResponseCode, String)>> {
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let (client, addr, topic) = (Arc::clone(client), addr.to_owned(), topic.to_owned());
            tokio::spawn(async move {
                client
                    .invoke(&addr, send_request(&topic, i), Duration::from_secs(10))
                    .await
                    .map(|r| (r.response_code(), r.remark.unwrap_or_default()))
            })
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for c in calls {
        out.push(c.await.context("send task")?.context("send request")?);
    }
    Ok(out)
}

/// The number after `label` in a busy remark (`period in queue: 73ms`).
pub fn figure(remark: &str, label: &str) -> Option<u64> {
    remark
        .split(label)
        .nth(1)?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

/// One figure of the broker's `GET_BROKER_RUNTIME_INFO` table (for
/// example `pageCacheLockTimeMills`).
///
/// # Errors
/// When the broker does not answer, or the figure is missing or not a
/// number.
pub async fn runtime_figure(client: &RemotingClient, addr: &str, key: &str) -> Result<i64> {
    let resp = client
        .invoke(
            addr,
            RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO),
            Duration::from_secs(5),
        )
        .await
        .context("GET_BROKER_RUNTIME_INFO")?;
    let table: remoting_protocol::body::KvTable =
        remoting_protocol::body::from_json(&resp.body).context("runtime info body")?;
    table
        .table
        .get(key)
        .with_context(|| format!("runtime info has no {key}"))?
        .parse()
        .with_context(|| format!("runtime info {key} is not a number"))
}

/// The lines of the log file `path` that contain `part`, without their
/// terminal colour sequences (`ESC [ ... m`, which the broker's log has
/// around field names); none when the file cannot be read.
pub fn log_lines(path: &Path, part: &str) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .lines()
        .filter(|l| l.contains(part))
        .map(str::to_owned)
        .collect()
}

/// A super user's client for the access-control set-up of a scenario broker
/// with authentication on: every request it sends is signed with the
/// credentials given.
#[derive(Debug)]
pub struct SignedAdmin {
    client: RemotingClient,
    /// The TLS of its connections (also to the name server), if any.
    tls: Option<remoting_net::ClientTls>,
    /// The broker's remoting address.
    pub addr: String,
}

impl SignedAdmin {
    /// A plain client of the broker at `addr` signing as `access_key`.
    pub fn new(addr: &str, access_key: &str, secret_key: &str) -> Self {
        Self::with_tls(addr, access_key, secret_key, None)
    }

    /// A client of the broker at `addr` signing as `access_key`, over TLS
    /// trusting any certificate.
    ///
    /// # Errors
    /// When the TLS client cannot be set up.
    pub fn over_tls(addr: &str, access_key: &str, secret_key: &str) -> Result<Self> {
        let tls = remoting_net::ClientTls::trust_any().context("TLS client")?;
        Ok(Self::with_tls(addr, access_key, secret_key, Some(tls)))
    }

    fn with_tls(
        addr: &str,
        access_key: &str,
        secret_key: &str,
        tls: Option<remoting_net::ClientTls>,
    ) -> Self {
        Self {
            client: RemotingClient::new(ClientOptions {
                credentials: Some(remoting_protocol::acl::Credentials::new(
                    access_key, secret_key,
                )),
                tls: tls.clone(),
                ..ClientOptions::default()
            }),
            tls,
            addr: addr.to_owned(),
        }
    }

    /// Sends `request` and checks that it succeeded.
    ///
    /// # Errors
    /// When no answer comes within 10 s or the answer is not `SUCCESS`.
    pub async fn expect_success(&self, what: &str, request: RemotingCommand) -> Result<()> {
        let resp = self
            .client
            .invoke(&self.addr, request, Duration::from_secs(10))
            .await
            .with_context(|| format!("{what} on {}", self.addr))?;
        ensure!(
            resp.response_code() == ResponseCode::SUCCESS,
            "{what} on {}: {:?} {:?}",
            self.addr,
            resp.response_code(),
            resp.remark
        );
        Ok(())
    }

    /// Creates the user `name` (`user_type` `Super` or `Normal`).
    ///
    /// # Errors
    /// When the broker refuses.
    pub async fn create_user(&self, name: &str, password: &str, user_type: &str) -> Result<()> {
        let mut req = RemotingCommand::request(RequestCode::AUTH_CREATE_USER);
        req.ext_fields.insert("username".into(), name.into());
        let user = remoting_protocol::body::UserInfo {
            username: Some(name.into()),
            password: Some(password.into()),
            user_type: Some(user_type.into()),
            user_status: None,
        };
        let req = req.with_body(remoting_protocol::body::to_json(&user));
        self.expect_success(&format!("create user {name}"), req)
            .await
    }

    /// Gives `User:<user>` one policy whose entries allow each resource
    /// (`Topic:t`, `Group:g`, ...) its actions (`Pub`, `Sub`, ...) from any
    /// address.
    ///
    /// # Errors
    /// When the broker refuses.
    pub async fn allow(&self, user: &str, entries: &[(&str, &[&str])]) -> Result<()> {
        use remoting_protocol::body::{AclInfo, PolicyEntryInfo, PolicyInfo};
        let subject = format!("User:{user}");
        let acl = AclInfo {
            subject: subject.clone(),
            policies: vec![PolicyInfo {
                policy_type: Some("Custom".into()),
                entries: entries
                    .iter()
                    .map(|(resource, actions)| PolicyEntryInfo {
                        resource: (*resource).into(),
                        actions: actions.iter().map(|a| (*a).to_owned()).collect(),
                        source_ips: vec![],
                        decision: Some("Allow".into()),
                    })
                    .collect(),
            }],
        };
        let mut req = RemotingCommand::request(RequestCode::AUTH_CREATE_ACL);
        req.ext_fields
            .insert("subject".into(), subject.clone().into());
        let req = req.with_body(remoting_protocol::body::to_json(&acl));
        self.expect_success(&format!("create the ACL of {subject}"), req)
            .await
    }

    /// Creates `topic` with `queues` queues and waits (up to 15 s) until the
    /// name server `namesrv` routes it.
    ///
    /// # Errors
    /// When the broker refuses or the route does not appear in time.
    pub async fn create_topic(&self, namesrv: &str, topic: &str, queues: i32) -> Result<()> {
        self.expect_success(
            &format!("create topic {topic}"),
            create_topic_request(topic, queues),
        )
        .await?;
        let reader = RemotingClient::new(ClientOptions {
            tls: self.tls.clone(),
            ..ClientOptions::default()
        });
        let routed = wait_for(Duration::from_secs(15), || async {
            let header = remoting_protocol::header::GetRouteInfoRequestHeader {
                topic: topic.into(),
                ..Default::default()
            };
            let req =
                RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
            reader
                .invoke(namesrv, req, Duration::from_secs(3))
                .await
                .is_ok_and(|r| r.response_code() == ResponseCode::SUCCESS)
        })
        .await
        .with_context(|| format!("route of {topic} on {namesrv}"));
        reader.close_all().await;
        routed
    }
}
