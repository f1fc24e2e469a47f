//! The Sluice broker: the remoting server, request processors with their
//! own bounded queues and worker threads, RocketMQ's flow control (and
//! Sluice's additions), topic and offset management, registration with the
//! name servers, and an embedded name server.
//!
//! [`Broker::start`] brings everything up on the configured ports (0 picks
//! a free one) and [`Broker::shutdown`] takes it down in order: stop
//! accepting, answer what is queued, stop the workers, unregister, persist,
//! close the store cleanly.
//!
//! A request travels through [`request`] types: [`executor::admit`] looks
//! its code up in the request table ([`processor::TABLE`]) and queues it for
//! its family's workers (or answers it at once), a worker runs its
//! processor against the shared [`state::BrokerState`].
#![deny(clippy::unwrap_used)]

pub mod access;
pub mod clients;
pub mod config;
pub mod controlled;
pub mod executor;
pub mod grpc;
pub mod ha;
pub mod long_polling;
pub mod metrics;
pub mod offsets;
mod persist;
pub mod pop;
pub mod processor;
pub mod rebalance_lock;
pub mod registration;
pub mod request;
pub mod retention_watch;
pub mod schedule;
pub mod service_loop;
pub mod slave_sync;
pub mod state;
pub mod stats;
pub mod subscriptions;
pub mod testing;
mod throttle;
pub mod timer;
pub mod topics;
pub mod transaction;
pub mod transaction_check;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use remoting_net::{
    serve, CancellationToken, ClientOptions, ConnectionLimits, RemotingClient, ServerOptions,
    ServerTls, TlsMode,
};
use thiserror::Error;
use tokio::net::TcpListener;

pub use crate::{config::BrokerConfig, state::BrokerState};

/// Why the broker could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The configuration was refused.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// A port could not be bound.
    #[error("cannot listen on {addr} ({key}): {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The configuration key of the port.
        key: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Another start-up step failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A port's TLS (`tlsServerMode` and its files), read now, offering the
/// application protocols `alpn`; `None` when disabled. With it, SIGHUP
/// reads the files again. `port` names the port in errors and logs.
fn server_tls(
    b: &config::BrokerSection,
    port: &'static str,
    alpn: Vec<Vec<u8>>,
) -> Result<Option<Arc<ServerTls>>, BrokerError> {
    let mode = b.tls_mode()?;
    if mode == TlsMode::Disabled {
        return Ok(None);
    }
    // Both are there in any other mode: the configuration's checks.
    let (Some(cert), Some(key)) = (&b.tls_server_cert_path, &b.tls_server_key_path) else {
        return Ok(None);
    };
    let client_auth = b.client_auth()?;
    let tls = ServerTls::with_alpn(mode, Path::new(cert), Path::new(key), alpn)
        .and_then(|tls| tls.with_client_auth(client_auth))
        .map_err(|e| BrokerError::Io {
            what: format!(
                "set up TLS on the {port} port (tlsServerCertPath, tlsServerKeyPath, tlsServerTrustCertPath)"
            ),
            source: std::io::Error::other(e),
        })?;
    let tls = Arc::new(tls);
    ServerTls::reload_on_sighup(&tls, port);
    tracing::info!(mode = %mode, cert, key, port, "TLS on");
    Ok(Some(tls))
}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BrokerError {
    let what = what.into();
    move |source| BrokerError::Io { what, source }
}

/// A running broker.
#[derive(Debug)]
pub struct Broker {
    state: Arc<BrokerState>,
    remoting_addr: SocketAddr,
    grpc_addr: Option<SocketAddr>,
    grpc_task: Option<tokio::task::JoinHandle<()>>,
    namesrv_addr: Option<SocketAddr>,
    shutdown: CancellationToken,
    namesrv_shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Replication (the HA port, or following the master).
    ha_tasks: Vec<tokio::task::JoinHandle<()>>,
    threads: Vec<JoinHandle<()>>,
    housekeeping_stop: Arc<AtomicBool>,
}

impl Broker {
    /// Starts a broker (and, if configured, its embedded name server).
    ///
    /// # Errors
    /// [`BrokerError`] naming what failed.
    pub async fn start(config: BrokerConfig) -> Result<Self, BrokerError> {
        Self::start_with_grpc_listener(config, None).await
    }

    /// Starts a broker whose gRPC endpoint serves on `grpc_listener` when
    /// one is given (whatever `grpcListenPort` says), else on
    /// `grpcListenPort` (0: no gRPC endpoint). Tests use it to run the
    /// endpoint on a port the system picked.
    ///
    /// # Errors
    /// [`BrokerError`] naming what failed.
    pub async fn start_with_grpc_listener(
        mut config: BrokerConfig,
        grpc_listener: Option<TcpListener>,
    ) -> Result<Self, BrokerError> {
        config.validate()?;
        config.store.store_path_root_dir = expand_home(&config.store.store_path_root_dir);
        let b = config.broker.clone();
        // The TLS files are read first: a bad one stops the start before
        // anything is opened.
        let tls = server_tls(&b, "remoting", Vec::new())?;
        // gRPC over TLS negotiates HTTP/2 by ALPN.
        let grpc_tls = server_tls(&b, "gRPC", vec![b"h2".to_vec()])?;
        let client_tls = b.client_tls()?;
        // Validated with the configuration.
        let bind: std::net::IpAddr = b
            .bind_address
            .parse()
            .unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]));
        let bind_to = |port: u16| SocketAddr::new(bind, port);

        let shutdown = CancellationToken::new();
        let ready: metrics::ReadyCheck = Arc::default();
        if b.metrics_listen_port != 0 {
            let addr = match b.metrics_bind_address.as_deref().map(str::parse) {
                // Validated with the configuration.
                Some(Ok(ip)) => SocketAddr::new(ip, b.metrics_listen_port),
                _ => bind_to(b.metrics_listen_port),
            };
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    let limits =
                        ConnectionLimits::new(b.max_connections, b.max_connections_per_address);
                    metrics::install_exporter(
                        listener,
                        limits,
                        shutdown.clone(),
                        Arc::clone(&ready),
                    );
                }
                Err(e) => tracing::error!(%addr, cause = %e,
                    "cannot start the metrics endpoint (metricsListenPort); the broker runs without it"),
            }
        }
        let namesrv_shutdown = CancellationToken::new();
        let mut tasks = Vec::new();
        let mut namesrv_addr = None;
        if b.embedded_namesrv {
            let addr = bind_to(b.namesrv_listen_port).to_string();
            let listener = TcpListener::bind(&addr)
                .await
                .map_err(|source| BrokerError::Bind {
                    addr: addr.clone(),
                    key: "namesrvListenPort",
                    source,
                })?;
            let local = listener
                .local_addr()
                .map_err(io_error("read name server address"))?;
            namesrv_addr = Some(local);
            if config.broker.namesrv_addr.is_none() {
                let reach = if bind.is_unspecified() {
                    std::net::IpAddr::from([127, 0, 0, 1])
                } else {
                    bind
                };
                config.broker.namesrv_addr = Some(SocketAddr::new(reach, local.port()).to_string());
            }
            if config.auth.authentication_enabled
                && config
                    .auth
                    .inner_client_authentication_credentials
                    .is_empty()
            {
                tracing::warn!(
                    "authentication is on but innerClientAuthenticationCredentials is not set: \
                     the embedded name server accepts registrations and changes from anyone"
                );
            }
            let ns_config = name_server::NamesrvConfig {
                listen_port: local.port(),
                max_connections: b.max_connections,
                max_connections_per_address: b.max_connections_per_address,
                kv_config_path: Some(
                    config
                        .store
                        .store_path_root_dir
                        .join("namesrv")
                        .join("kvConfig.json"),
                ),
                // Registrations need the cluster's credentials when the
                // broker authenticates and has them.
                authentication_enabled: config.auth.authentication_enabled
                    && !config
                        .auth
                        .inner_client_authentication_credentials
                        .is_empty(),
                inner_client_authentication_credentials: config
                    .auth
                    .inner_client_authentication_credentials
                    .clone(),
                ..name_server::NamesrvConfig::default()
            };
            // The embedded name server's port takes the broker's TLS.
            let namesrv_tls = server_tls(&b, "embedded name server", Vec::new())?;
            let kv_config =
                name_server::open_kv_config(&ns_config).map_err(|e| BrokerError::Io {
                    what: "load the embedded name server's kv config".into(),
                    source: std::io::Error::other(e),
                })?;
            tasks.push(tokio::spawn(name_server::run(
                listener,
                ns_config,
                kv_config,
                namesrv_tls,
                namesrv_shutdown.clone(),
            )));
        }

        let addr = bind_to(b.listen_port).to_string();
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| BrokerError::Bind {
                addr: addr.clone(),
                key: "listenPort",
                source,
            })?;
        let remoting_addr = listener
            .local_addr()
            .map_err(io_error("read broker address"))?;
        let grpc_listener = match grpc_listener {
            Some(l) => Some(l),
            None if b.grpc_listen_port != 0 => {
                let addr = bind_to(b.grpc_listen_port).to_string();
                Some(
                    TcpListener::bind(&addr)
                        .await
                        .map_err(|source| BrokerError::Bind {
                            addr: addr.clone(),
                            key: "grpcListenPort",
                            source,
                        })?,
                )
            }
            None => None,
        };
        let grpc_addr = match &grpc_listener {
            Some(l) => Some(l.local_addr().map_err(io_error("read gRPC address"))?),
            None => None,
        };
        if let Some(a) = grpc_addr {
            config.broker.grpc_listen_port = a.port();
        }
        config.broker.listen_port = remoting_addr.port();
        let store_host: SocketAddr = format!("{}:{}", b.broker_ip1, remoting_addr.port())
            .parse()
            .map_err(|_| config::ConfigError::Invalid {
                key: "brokerIP1".into(),
                value: b.broker_ip1.clone(),
                allowed: "an IP address".into(),
            })?;

        let root = config.store.store_path_root_dir.clone();
        let store_config = store::StoreConfig {
            replicated: config.ha.replicated_store(),
            ..config.store.clone()
        };
        let store = tokio::task::spawn_blocking(move || store::MessageStore::open(store_config))
            .await
            .map_err(|e| io_error("open store")(std::io::Error::other(e.to_string())))??;
        let store = Arc::new(store);
        let (ha, ha_tasks) =
            ha::Ha::start(&config, &store, bind_to(b.listen_port), store_host).await?;
        if let Some(port) = ha.ha_port() {
            // What GET_BROKER_CONFIG reports: slaves in controller mode
            // learn their new master's HA port from it.
            config.ha.ha_listen_port = port;
        }

        let config_dir = root.join("config");
        let topics = topics::TopicManager::load(
            &config_dir,
            b.auto_create_topic_enable,
            b.default_topic_queue_nums,
        )
        .map_err(io_error("load topics"))?
        .with_limit(b.topic_max_count);
        let offsets =
            offsets::OffsetManager::load(&config_dir).map_err(io_error("load consumer offsets"))?;
        let pop = pop::PopService::load(&config_dir, pop::PopLimits::default())
            .map_err(io_error("load POP state"))?;
        let subscriptions = subscriptions::SubscriptionGroupManager::load(&config_dir)
            .map_err(io_error("load subscription groups"))?;
        // Validated with the store's configuration.
        let delays = config.store.delay_levels_ms().unwrap_or_default();
        topics
            .ensure_schedule_topic(delays.len() as i32)
            .map_err(io_error("create the schedule topic"))?;
        let schedule = schedule::ScheduleService::load(&config_dir, delays)
            .map_err(io_error("load delay offsets"))?;
        if b.timer_wheel_enable {
            topics
                .ensure_group_topic(message_model::flags::TIMER_TOPIC, 1)
                .map_err(io_error("create the timer topic"))?;
        }
        let timers = timer::TimerWheel::load(&config_dir, b.timer_max_pending)
            .map_err(io_error("load the timer progress"))?;
        let transactions = transaction::Transactions::load(&store, &config_dir)
            .map_err(io_error("load the transaction checkpoint"))?;
        let access = access::Access::load(&config_dir, &config.auth, &b.broker_cluster_name)
            .map_err(io_error("load users and ACLs"))?;

        let state = Arc::new(BrokerState::new(
            config.clone(),
            state::Loaded {
                store,
                topics,
                offsets,
                subscriptions,
                pop,
                schedule,
                timers,
                transactions,
                access,
                ha,
            },
            store_host,
        ));
        let weak = Arc::downgrade(&state);
        state.store.set_arrival_listener(Arc::new(
            move |topic: &str, queue_id: i32, max_offset: i64| {
                if let Some(state) = weak.upgrade() {
                    for job in state.pull_hold.arrived(topic, queue_id, max_offset) {
                        state.resume(job);
                    }
                    state.pop.arrived(topic);
                    if topic == message_model::flags::TIMER_TOPIC {
                        state.timers.poke();
                    }
                }
            },
        ));
        state
            .store
            .set_retention_listener(retention_watch::listener(Arc::downgrade(&state)));
        processor::end_transaction::repair_last_end(&state);
        let threads = executor::start(&state).map_err(io_error("start worker threads"))?;
        let housekeeping_stop = Arc::new(AtomicBool::new(false));
        let mut threads = threads;
        threads.push(spawn_housekeeping(
            Arc::clone(&state),
            Arc::clone(&housekeeping_stop),
        )?);
        // A slave writes nothing of its own: its master delivers delayed and
        // timer messages and checks transactions. In controller mode they
        // start when the broker first becomes master.
        if state.ha.role() != config::BrokerRole::Slave && !state.ha.controlled() {
            start_writer_threads(&state);
        }

        let options = ServerOptions {
            tls,
            max_connections: b.max_connections,
            max_connections_per_address: b.max_connections_per_address,
            idle_timeout: (b.server_channel_max_idle_time_seconds > 0)
                .then(|| Duration::from_secs(b.server_channel_max_idle_time_seconds)),
            write_queue_bytes: b.write_buffer_high_water_mark,
            write_timeout: (b.connection_write_timeout_millis > 0)
                .then(|| Duration::from_millis(b.connection_write_timeout_millis)),
            ..ServerOptions::default()
        };
        tasks.push(tokio::spawn(serve(
            listener,
            Arc::new(executor::RemotingHandler(Arc::clone(&state))),
            options,
            shutdown.clone(),
        )));
        let grpc_task = grpc_listener.map(|l| {
            let limits = ConnectionLimits::new(b.max_connections, b.max_connections_per_address);
            tokio::spawn(grpc::serve(
                l,
                limits,
                grpc_tls,
                Arc::clone(&state),
                shutdown.clone(),
            ))
        });
        // The broker signs its registrations with its own credentials.
        let client = Arc::new(RemotingClient::new(ClientOptions {
            credentials: config.auth.inner_credentials()?,
            tls: client_tls,
            ..ClientOptions::default()
        }));
        let broker_addr = store_host.to_string();
        registration::register_all(&state, &client, &broker_addr).await;
        let weak = Arc::downgrade(&state);
        let _ = ready.set(Box::new(move || match weak.upgrade() {
            Some(state) => state.readiness(),
            None => Err("shutting down".to_owned()),
        }));
        if state.ha.controlled() {
            tasks.push(tokio::spawn(controlled::run(
                Arc::clone(&state),
                Arc::clone(&client),
                broker_addr.clone(),
                shutdown.clone(),
            )));
        }
        if state.ha.role() == config::BrokerRole::Slave {
            tasks.push(tokio::spawn(slave_sync::run(
                Arc::clone(&state),
                Arc::clone(&client),
                shutdown.clone(),
            )));
        }
        tasks.push(tokio::spawn(registration::run(
            Arc::clone(&state),
            client,
            broker_addr,
            shutdown.clone(),
        )));
        tracing::info!(
            broker = %b.broker_name,
            cluster = %b.broker_cluster_name,
            remoting = %remoting_addr,
            grpc = ?grpc_addr,
            namesrv = ?namesrv_addr,
            store = %root.display(),
            "broker started"
        );
        Ok(Self {
            state,
            remoting_addr,
            grpc_addr,
            grpc_task,
            namesrv_addr,
            shutdown,
            namesrv_shutdown,
            tasks,
            ha_tasks,
            threads,
            housekeeping_stop,
        })
    }

    /// Address of the remoting port.
    pub fn remoting_addr(&self) -> SocketAddr {
        self.remoting_addr
    }

    /// Address of the gRPC endpoint, if it runs.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc_addr
    }

    /// Address of the embedded name server, if it runs.
    pub fn namesrv_addr(&self) -> Option<SocketAddr> {
        self.namesrv_addr
    }

    /// The broker's shared state (for tests and tools).
    pub fn state(&self) -> &Arc<BrokerState> {
        &self.state
    }

    /// Stops in order: answer queued and new requests busy (`[SHUTDOWN]`),
    /// let the workers finish, persist offsets and the POP state, close the
    /// store (its last flush answers the SYNC_FLUSH sends still waiting),
    /// then stop the servers and unregister.
    pub async fn shutdown(self) {
        tracing::info!("broker shutting down");
        // Replication stops first: nothing is appended for a master, nor
        // sent to a slave, once the store begins to close.
        for task in &self.ha_tasks {
            task.abort();
        }
        for task in self.ha_tasks {
            let _ = task.await;
        }
        self.state.ha.stop_role().await;
        executor::close_queues(&self.state);
        // Workers finish what they hold; then the store's last flush answers
        // the SYNC_FLUSH sends still waiting for it, while their connections
        // are still open. Only then do the servers stop.
        let state = Arc::clone(&self.state);
        self.housekeeping_stop.store(true, Ordering::Release);
        self.state.schedule.stop();
        self.state.timers.stop();
        self.state.transactions.service.stop();
        let mut threads = self.threads;
        threads.extend(
            self.state
                .writer_threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
                .unwrap_or_default(),
        );
        let joined = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
            if let Err(e) = state.offsets.persist() {
                tracing::error!(cause = %e, "cannot persist consumer offsets");
            }
            if let Err(e) = state.pop.persist() {
                tracing::error!(cause = %e, "cannot persist the POP state");
            }
            state.store.shutdown();
        });
        let _ = joined.await;
        self.shutdown.cancel();
        if let Some(mut task) = self.grpc_task {
            // Streams end on the cancellation; a client that keeps a call
            // open longer does not hold up the shutdown.
            if tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
            {
                tracing::warn!("gRPC connections still open after 5 s; closing them");
                task.abort();
            }
        }
        self.namesrv_shutdown.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        tracing::info!("broker stopped");
    }
}

/// How often the state of groups that are gone is looked for.
const GROUP_EXPIRY_CHECK: Duration = Duration::from_secs(60);

/// Deletes the offsets and POP state of groups not seen for
/// `groupStateExpireHours`.
fn expire_group_state(state: &BrokerState) {
    let hours = state.config().broker.group_state_expire_hours;
    if hours == 0 {
        return;
    }
    let ttl = Duration::from_secs(hours.saturating_mul(3600));
    let online = |group: &str| !state.clients.consumers_of(group).is_empty();
    for (group, topics) in state.offsets.expire(Instant::now(), ttl, online) {
        tracing::info!(
            group,
            topics,
            hours,
            "consumer offsets deleted: group not seen for groupStateExpireHours"
        );
    }
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    for (group, topic) in state.pop.expire(message_model::now_ms(), ttl_ms, online) {
        tracing::info!(
            group,
            topic,
            hours,
            "POP state deleted: group not seen for groupStateExpireHours"
        );
    }
}

/// How often consumer lag is computed.
const LAG_REFRESH: Duration = Duration::from_secs(5);

/// Offsets and the POP state to disk every `flushConsumerOffsetInterval`; silent clients
/// forgotten after two minutes; metric gauges refreshed and statistics
/// snapshotted every second, consumer lag every five; the
/// state of groups gone for `groupStateExpireHours` deleted every minute.
fn spawn_housekeeping(
    state: Arc<BrokerState>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, BrokerError> {
    std::thread::Builder::new()
        .name("broker-housekeeping".into())
        .spawn(move || {
            let mut last_flush = Instant::now();
            let mut last_refresh = Instant::now();
            let mut last_expiry = Instant::now();
            let mut last_lag = Instant::now();
            let started = Instant::now();
            let panic_after = state.config().broker.fault_panic_after_mills;
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
                if panic_after > 0 && started.elapsed() >= Duration::from_millis(panic_after) {
                    panic!("faultPanicAfterMills={panic_after}: injected panic");
                }
                if last_refresh.elapsed() >= Duration::from_secs(1) {
                    last_refresh = Instant::now();
                    state.refresh_metrics();
                }
                if last_lag.elapsed() >= LAG_REFRESH {
                    last_lag = Instant::now();
                    state.refresh_lag();
                }
                let interval =
                    Duration::from_millis(state.config().broker.flush_consumer_offset_interval);
                if last_flush.elapsed() >= interval {
                    last_flush = Instant::now();
                    if let Err(e) = state.offsets.persist() {
                        tracing::error!(cause = %e, "cannot persist consumer offsets");
                    }
                    if let Err(e) = state.pop.persist() {
                        tracing::error!(cause = %e, "cannot persist the POP state");
                    }
                    for id in state
                        .clients
                        .expire(Instant::now(), Duration::from_secs(120))
                    {
                        tracing::info!(client = %id, "client expired: no heartbeat for 120 s");
                    }
                }
                if last_expiry.elapsed() >= GROUP_EXPIRY_CHECK {
                    last_expiry = Instant::now();
                    expire_group_state(&state);
                }
            }
        })
        .map_err(io_error("start housekeeping thread"))
}

/// The `schedule-delivery` thread: delay-level messages into their real
/// topics once due (see [`schedule`]).
fn spawn_schedule_delivery(state: Arc<BrokerState>) -> Result<JoinHandle<()>, BrokerError> {
    std::thread::Builder::new()
        .name("schedule-delivery".into())
        .spawn(move || {
            let every = Duration::from_millis(state.config().broker.flush_delay_offset_interval);
            state.schedule.run(&state.store, every);
        })
        .map_err(io_error("start schedule delivery thread"))
}

/// Starts the threads that write on the master's behalf (delay, timer and
/// transaction-check delivery), once; a thread that cannot start is logged.
pub(crate) fn start_writer_threads(state: &Arc<BrokerState>) {
    let mut started = state
        .writer_threads
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if started.is_some() {
        return;
    }
    let mut threads = Vec::new();
    let mut spawned = vec![
        spawn_schedule_delivery(Arc::clone(state)),
        spawn_transaction_check(Arc::clone(state)),
    ];
    if state.config().broker.timer_wheel_enable {
        spawned.push(spawn_timer_wheel(Arc::clone(state)));
    }
    for thread in spawned {
        match thread {
            Ok(t) => threads.push(t),
            Err(e) => tracing::error!(cause = %e, "cannot start a delivery thread"),
        }
    }
    *started = Some(threads);
}

/// The `transaction-check` thread: checks of half messages nobody ended
/// (see [`transaction_check`]).
fn spawn_transaction_check(state: Arc<BrokerState>) -> Result<JoinHandle<()>, BrokerError> {
    std::thread::Builder::new()
        .name("transaction-check".into())
        .spawn(move || transaction_check::run(&state))
        .map_err(io_error("start transaction check thread"))
}

/// The `timer-wheel` thread: timer messages into their real topics once
/// due (see [`timer`]).
fn spawn_timer_wheel(state: Arc<BrokerState>) -> Result<JoinHandle<()>, BrokerError> {
    std::thread::Builder::new()
        .name("timer-wheel".into())
        .spawn(move || {
            let every = Duration::from_millis(state.config().broker.timer_flush_interval_ms);
            state.timers.run(&state.store, every);
        })
        .map_err(io_error("start timer wheel thread"))
}

/// Replaces a leading `~` with `$HOME`.
fn expand_home(path: &std::path::Path) -> PathBuf {
    match path.to_str().and_then(|p| p.strip_prefix('~')) {
        Some(rest) => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(rest.trim_start_matches('/')),
            None => path.to_path_buf(),
        },
        None => path.to_path_buf(),
    }
}
