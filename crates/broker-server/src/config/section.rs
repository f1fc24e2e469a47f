//! The broker's own settings (`BrokerSection`): names, ports, listeners,
//! thread counts, limits, and the checks of their values.

use std::{fmt::Display, net::IpAddr, path::Path};

use remoting_net::{ClientAuth, ClientTls, TlsMode};
use serde::{Deserialize, Serialize};

use super::{invalid, ConfigError};

/// The broker's own settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct BrokerSection {
    /// Broker name. Default `broker-a`.
    pub broker_name: String,
    /// Cluster name. Default `DefaultCluster`.
    pub broker_cluster_name: String,
    /// Broker id; 0 is the master. Default 0.
    pub broker_id: i64,
    /// Address registered in routes and message ids. Default `127.0.0.1`.
    #[serde(rename = "brokerIP1")]
    pub broker_ip1: String,
    /// Remoting port; 0 picks a free one. Default 10911.
    pub listen_port: u16,
    /// Address every listener (remoting, embedded name server, gRPC,
    /// metrics) binds to; distinct from `brokerIP1`, the address clients
    /// are told. Default `0.0.0.0` (all interfaces).
    pub bind_address: String,
    /// Name servers, `host:port` separated by `;`. Default: the embedded one.
    pub namesrv_addr: Option<String>,
    /// Run a name server inside the broker. Default true.
    pub embedded_namesrv: bool,
    /// Port of the embedded name server; 0 picks a free one. Default 9876.
    pub namesrv_listen_port: u16,
    /// Prometheus `/metrics` port; 0 turns it off. Default 5557.
    pub metrics_listen_port: u16,
    /// Address the metrics endpoint binds to, so that it can stay on an
    /// internal interface (it has no authentication). Sluice's. Default:
    /// `bindAddress`.
    pub metrics_bind_address: Option<String>,
    /// Port of the RocketMQ 5 gRPC endpoint (plain HTTP/2); 0 turns it off. Default 8081.
    pub grpc_listen_port: u16,
    /// Create a topic on its first send. Default true.
    pub auto_create_topic_enable: bool,
    /// Create a consumer group's settings (subscription group) with
    /// RocketMQ's defaults the first time the group heartbeats, pulls or
    /// sends a message back. Default true.
    pub auto_create_subscription_group: bool,
    /// Tell a consumer group's members at once when its membership changes
    /// (`NOTIFY_CONSUMER_IDS_CHANGED`), so they rebalance without waiting
    /// for their periodic check. Default true.
    pub notify_consumer_ids_changed_enable: bool,
    /// Accept timer messages (`TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`,
    /// `TIMER_DELAY_MS`, gRPC `delivery_timestamp`); when false they are
    /// refused. Default true.
    pub timer_wheel_enable: bool,
    /// Longest timer delay in seconds; longer ones are refused
    /// (`MESSAGE_ILLEGAL`). Default 259200 (3 days); 1..=31536000.
    pub timer_max_delay_sec: u64,
    /// Most timer messages waiting at once; beyond it timer sends are
    /// refused until some are delivered (each waiting timer takes about
    /// 100 bytes of memory). Sluice's. Default 10000000; at least 1.
    pub timer_max_pending: usize,
    /// Write the timer wheel's progress (`timerProgress.json`) this often
    /// (ms). Default 1000; 100..=60000.
    pub timer_flush_interval_ms: u64,
    /// Most topics on the broker (its system topics aside); creating one
    /// more is refused with `SYSTEM_ERROR` naming the limit. Sluice's.
    /// Default 100000; at least 1.
    pub topic_max_count: usize,
    /// Queues of an auto-created topic (capped by the request's). Default 8; 1..=1024.
    pub default_topic_queue_nums: i32,
    /// Permission of the broker (6 = read and write). Default 6.
    pub broker_permission: i32,
    /// Send worker threads. Default min(cpus, 4); 1..=256.
    pub send_message_thread_pool_nums: usize,
    /// Pull worker threads. Default 16 + 2 × cpus; 1..=256.
    pub pull_message_thread_pool_nums: usize,
    /// Admin worker threads. Default 16; 1..=256.
    pub admin_broker_thread_pool_nums: usize,
    /// End-transaction worker threads. Default 8 + 2 x cpus (at most 256);
    /// 1..=256.
    pub end_transaction_thread_pool_nums: usize,
    /// Heartbeat worker threads. Default min(32, cpus); 1..=256.
    pub heartbeat_thread_pool_nums: usize,
    /// Consumer-management (offset) worker threads. Default 32; 1..=256.
    pub consumer_manage_thread_pool_nums: usize,
    /// Period of registration with the name servers (ms). Default 30000; 10000..=60000.
    pub register_name_server_period: u64,
    /// Close a connection idle this long (s); 0 never. Default 120.
    pub server_channel_max_idle_time_seconds: u64,
    /// Most client connections at once, on each listener (remoting, gRPC,
    /// metrics) separately. Default 10000.
    pub max_connections: usize,
    /// Most client connections at once from one IP address, on each
    /// listener (remoting, gRPC, metrics) separately; a further one is
    /// closed as soon as it is accepted. Sluice's. Default 1000; at least 1.
    pub max_connections_per_address: usize,
    /// Most bytes of answers queued for one connection and not yet written
    /// (RocketMQ's Netty `writeBufferHighWaterMark`); past it the broker
    /// reads no more of that connection's requests until the client has
    /// read enough. Default 67108864 (64 MiB); at least 65536.
    pub write_buffer_high_water_mark: usize,
    /// Close a connection when a write to it makes no progress for this
    /// long (ms): the client does not read its answers. Sluice's. Default
    /// 30000; 0 never.
    pub connection_write_timeout_millis: u64,
    /// TLS on the remoting port (RocketMQ's `tls.server.mode`):
    /// `disabled` (plain only), `permissive` (TLS and plain on the same
    /// port, told apart by each connection's first byte) or `enforcing`
    /// (TLS only). Default `disabled`.
    pub tls_server_mode: String,
    /// PEM file of the remoting port's certificate chain; needed unless
    /// `tlsServerMode` is `disabled`. Read again on SIGHUP. Default none.
    pub tls_server_cert_path: Option<String>,
    /// PEM file of that certificate's private key (PKCS#8, PKCS#1 or
    /// SEC1, not encrypted); needed unless `tlsServerMode` is `disabled`.
    /// Read again on SIGHUP. Default none.
    pub tls_server_key_path: Option<String>,
    /// Client certificates on the TLS ports (RocketMQ's
    /// `tls.server.need.client.auth`): `none`, `optional` (checked when
    /// shown) or `require`. Default `none`.
    pub tls_server_need_client_auth: String,
    /// PEM file of the roots that sign client certificates; needed with
    /// `optional` and `require`. Read again on SIGHUP. Default none.
    pub tls_server_trust_cert_path: Option<String>,
    /// The broker's own connections (its registrations with the name
    /// servers) use TLS (RocketMQ's `useTLS`). Default false; they use it
    /// anyway when `tlsServerMode` is `enforcing`, as in RocketMQ (the
    /// embedded name server then takes TLS only).
    #[serde(rename = "useTLS")]
    pub use_tls: bool,
    /// PEM file of the roots the broker trusts for its own TLS
    /// connections; none trusts any certificate, as RocketMQ's clients do
    /// by default. Default none.
    pub tls_client_trust_cert_path: Option<String>,
    /// PEM file of the certificate chain the broker shows servers that ask
    /// for one (with `tlsClientKeyPath`). Default none.
    pub tls_client_cert_path: Option<String>,
    /// PEM file of that certificate's private key. Default none.
    pub tls_client_key_path: Option<String>,
    /// Region reported in send responses. Default `DefaultRegion`.
    pub region_id: String,
    /// Trace switch reported in send responses. Default true.
    pub trace_on: bool,
    /// Flush consumer offsets to disk this often (ms). Default 5000.
    pub flush_consumer_offset_interval: u64,
    /// The committed offsets and POP state of a consumer group that has not
    /// been seen (no consumer online, no pull, pop, ack or offset commit or
    /// query) for this many hours are deleted, so that state files do not
    /// grow with groups that are gone. Sluice's. Default 720 (30 days); 0
    /// keeps them forever.
    pub group_state_expire_hours: u64,
    /// Fault injection: the housekeeping thread panics this long (ms) after
    /// start. For tests of the panic stop only. Default 0 (off).
    pub fault_panic_after_mills: u64,
    /// Write the delivery progress of delay levels (`delayOffset.json`)
    /// this often (ms). Default 10000; 100..=600000.
    pub flush_delay_offset_interval: u64,
    /// Hold a pull that finds nothing until messages arrive or its
    /// `suspendTimeoutMillis` (at most 60 s) passes. Default true.
    pub long_polling_enable: bool,
    /// Hold time of such a pull when long polling is off (ms). Default 1000.
    pub short_polling_time_mills: u64,
    /// Most messages one pull returns, whatever it asks for
    /// (`maxMsgNums` above it is cut). Default 32; 1..=1024.
    pub max_transfer_count_on_message_in_memory: usize,
    /// Most bytes of messages one pull returns, whatever it asks for (at
    /// least one message always). Default 262144 (256 KiB); 1024..=67108864.
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// Most messages one pull returns once it reaches messages no longer in
    /// memory (see `accessMessageInMemoryMaxRatio`). Default 8; 1..=1024.
    pub max_transfer_count_on_message_in_disk: usize,
    /// Most bytes one pull returns once it reaches messages no longer in
    /// memory (at least one message always). Default 65536 (64 KiB);
    /// 1024..=67108864.
    pub max_transfer_bytes_on_message_in_disk: usize,
    /// A message further behind the CommitLog's end than this percentage of
    /// the machine's physical memory counts as no longer in memory, and pulls
    /// that reach it use the on-disk caps. Default 40; 0..=100.
    pub access_message_in_memory_max_ratio: u64,
    /// Most pulls held at once; further ones are answered at once. Default 100000.
    pub pull_hold_max_requests: usize,
    /// Most pulls of one connection held at once; further ones are answered
    /// at once. Sluice's. Default 10000; at least 1.
    pub pull_hold_max_requests_per_connection: usize,
    /// Refuse transactional (half) messages with `NO_PERMISSION`. Default
    /// false.
    pub reject_transaction_message: bool,
    /// A commit or rollback that does not answer a check is refused
    /// (`ILLEGAL_OPERATION`) once the half message is older than its
    /// `CHECK_IMMUNITY_TIME_IN_SECONDS`, and never before this many ms.
    /// Default 6000.
    pub transaction_time_out: u64,
    /// How often half messages nobody ended are looked at (ms). Default
    /// 30000; 100..=3600000.
    pub transaction_check_interval: u64,
    /// Checks of one half message before it is moved to
    /// `TRANS_CHECK_MAX_TIME_TOPIC` and never delivered. Default 15;
    /// 1..=1000.
    pub transaction_check_max: u32,
    /// Most checks sent a second, over all producers. Sluice's. Default
    /// 1000; 1..=1000000.
    pub transaction_check_max_per_second: u64,
}

impl Default for BrokerSection {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            broker_name: "broker-a".into(),
            broker_cluster_name: "DefaultCluster".into(),
            broker_id: 0,
            broker_ip1: "127.0.0.1".into(),
            listen_port: 10911,
            bind_address: "0.0.0.0".into(),
            metrics_bind_address: None,
            namesrv_addr: None,
            embedded_namesrv: true,
            namesrv_listen_port: 9876,
            metrics_listen_port: 5557,
            grpc_listen_port: 8081,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            notify_consumer_ids_changed_enable: true,
            topic_max_count: 100_000,
            timer_wheel_enable: true,
            timer_max_delay_sec: 259_200,
            timer_max_pending: 10_000_000,
            timer_flush_interval_ms: 1000,
            default_topic_queue_nums: 8,
            broker_permission: 6,
            send_message_thread_pool_nums: cpus.min(4),
            pull_message_thread_pool_nums: 16 + 2 * cpus,
            admin_broker_thread_pool_nums: 16,
            end_transaction_thread_pool_nums: (8 + 2 * cpus).min(256),
            heartbeat_thread_pool_nums: cpus.min(32),
            consumer_manage_thread_pool_nums: 32,
            register_name_server_period: 30_000,
            server_channel_max_idle_time_seconds: 120,
            max_connections: 10_000,
            max_connections_per_address: 1_000,
            write_buffer_high_water_mark: 64 * 1024 * 1024,
            connection_write_timeout_millis: 30_000,
            tls_server_mode: "disabled".to_owned(),
            tls_server_cert_path: None,
            tls_server_key_path: None,
            tls_server_need_client_auth: "none".to_owned(),
            tls_server_trust_cert_path: None,
            use_tls: false,
            tls_client_trust_cert_path: None,
            tls_client_cert_path: None,
            tls_client_key_path: None,
            region_id: "DefaultRegion".into(),
            trace_on: true,
            flush_consumer_offset_interval: 5000,
            group_state_expire_hours: 720,
            fault_panic_after_mills: 0,
            flush_delay_offset_interval: 10_000,
            long_polling_enable: true,
            short_polling_time_mills: 1000,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_disk: 8,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            access_message_in_memory_max_ratio: 40,
            pull_hold_max_requests: 100_000,
            pull_hold_max_requests_per_connection: 10_000,
            reject_transaction_message: false,
            transaction_time_out: 6000,
            transaction_check_interval: 30_000,
            transaction_check_max: 15,
            transaction_check_max_per_second: 1000,
        }
    }
}

impl BrokerSection {
    /// The remoting port's TLS mode (`tlsServerMode`).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a name other than the three modes.
    pub fn tls_mode(&self) -> Result<TlsMode, ConfigError> {
        self.tls_server_mode.parse().map_err(|_| {
            invalid(
                "tlsServerMode",
                self.tls_server_mode.clone(),
                "disabled, permissive or enforcing".into(),
            )
        })
    }

    /// Whether and how the TLS ports ask clients for certificates
    /// (`tlsServerNeedClientAuth`, `tlsServerTrustCertPath`).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    pub fn client_auth(&self) -> Result<ClientAuth, ConfigError> {
        ClientAuth::from_settings(
            &self.tls_server_need_client_auth,
            self.tls_server_trust_cert_path.as_deref().map(Path::new),
        )
        .map_err(|allowed| {
            invalid(
                "tlsServerNeedClientAuth",
                self.tls_server_need_client_auth.clone(),
                format!("{allowed} (tlsServerTrustCertPath)"),
            )
        })
    }

    /// The TLS of the broker's own connections (`useTLS` and the
    /// `tlsClient*` files), read now; `None` without `useTLS` unless
    /// `tlsServerMode` is `enforcing`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key whose value or file is at
    /// fault.
    pub fn client_tls(&self) -> Result<Option<ClientTls>, ConfigError> {
        let identity = match (&self.tls_client_cert_path, &self.tls_client_key_path) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((Path::new(cert), Path::new(key))),
            _ => {
                return Err(invalid(
                    "tlsClientCertPath",
                    String::new(),
                    "tlsClientCertPath and tlsClientKeyPath together, or neither".into(),
                ))
            }
        };
        if !self.use_tls && self.tls_mode()? != TlsMode::Enforcing {
            return Ok(None);
        }
        let roots = self.tls_client_trust_cert_path.as_deref().map(Path::new);
        ClientTls::new(roots, identity).map(Some).map_err(|e| {
            invalid(
                "useTLS",
                "true".into(),
                format!("readable tlsClientTrustCertPath, tlsClientCertPath and tlsClientKeyPath files: {e}"),
            )
        })
    }

    /// Checks every value and the rules between them.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let b = self;
        let mode = b.tls_mode()?;
        b.client_auth()?;
        if mode != TlsMode::Disabled {
            for (key, path) in [
                ("tlsServerCertPath", &b.tls_server_cert_path),
                ("tlsServerKeyPath", &b.tls_server_key_path),
            ] {
                if path.as_deref().is_none_or(str::is_empty) {
                    return Err(invalid(
                        key,
                        String::new(),
                        format!("a PEM file, needed with tlsServerMode={mode}"),
                    ));
                }
            }
        }
        for (key, v) in [
            ("sendMessageThreadPoolNums", b.send_message_thread_pool_nums),
            ("pullMessageThreadPoolNums", b.pull_message_thread_pool_nums),
            ("adminBrokerThreadPoolNums", b.admin_broker_thread_pool_nums),
            (
                "endTransactionThreadPoolNums",
                b.end_transaction_thread_pool_nums,
            ),
            ("heartbeatThreadPoolNums", b.heartbeat_thread_pool_nums),
            (
                "consumerManageThreadPoolNums",
                b.consumer_manage_thread_pool_nums,
            ),
        ] {
            range(key, v, 1, 256, "")?;
        }
        range(
            "defaultTopicQueueNums",
            b.default_topic_queue_nums,
            1,
            1024,
            "",
        )?;
        range(
            "transactionCheckInterval",
            b.transaction_check_interval,
            100,
            3_600_000,
            " (ms)",
        )?;
        range("transactionCheckMax", b.transaction_check_max, 1, 1000, "")?;
        range(
            "transactionCheckMaxPerSecond",
            b.transaction_check_max_per_second,
            1,
            1_000_000,
            "",
        )?;
        range(
            "registerNameServerPeriod",
            b.register_name_server_period,
            10_000,
            60_000,
            " (ms)",
        )?;
        let metrics_bind = b.metrics_bind_address.as_ref().unwrap_or(&b.bind_address);
        for (key, text) in [
            ("bindAddress", &b.bind_address),
            ("metricsBindAddress", metrics_bind),
            ("brokerIP1", &b.broker_ip1),
        ] {
            if text.parse::<IpAddr>().is_err() {
                return Err(invalid(
                    key,
                    text.clone(),
                    "an IP address, such as 0.0.0.0 or 127.0.0.1".into(),
                ));
            }
        }
        for (key, v) in [
            ("maxConnections", b.max_connections),
            ("maxConnectionsPerAddress", b.max_connections_per_address),
            ("topicMaxCount", b.topic_max_count),
            (
                "pullHoldMaxRequestsPerConnection",
                b.pull_hold_max_requests_per_connection,
            ),
            ("timerMaxPending", b.timer_max_pending),
        ] {
            at_least(key, v, 1, "")?;
        }
        range(
            "maxTransferCountOnMessageInMemory",
            b.max_transfer_count_on_message_in_memory,
            1,
            1024,
            "",
        )?;
        range(
            "maxTransferBytesOnMessageInMemory",
            b.max_transfer_bytes_on_message_in_memory,
            1024,
            64 * 1024 * 1024,
            " (bytes)",
        )?;
        range(
            "maxTransferCountOnMessageInDisk",
            b.max_transfer_count_on_message_in_disk,
            1,
            1024,
            "",
        )?;
        range(
            "maxTransferBytesOnMessageInDisk",
            b.max_transfer_bytes_on_message_in_disk,
            1024,
            64 * 1024 * 1024,
            " (bytes)",
        )?;
        range(
            "accessMessageInMemoryMaxRatio",
            b.access_message_in_memory_max_ratio,
            0,
            100,
            " (percent)",
        )?;
        at_least(
            "writeBufferHighWaterMark",
            b.write_buffer_high_water_mark,
            65_536,
            " (bytes)",
        )?;
        range(
            "groupStateExpireHours",
            b.group_state_expire_hours,
            0,
            87_600,
            " (hours)",
        )?;
        range(
            "timerMaxDelaySec",
            b.timer_max_delay_sec,
            1,
            31_536_000,
            " (s)",
        )?;
        range(
            "timerFlushIntervalMs",
            b.timer_flush_interval_ms,
            100,
            60_000,
            " (ms)",
        )?;
        range(
            "flushDelayOffsetInterval",
            b.flush_delay_offset_interval,
            100,
            600_000,
            " (ms)",
        )?;
        if b.embedded_namesrv && b.listen_port != 0 && b.namesrv_listen_port == b.listen_port {
            return Err(invalid(
                "namesrvListenPort",
                b.namesrv_listen_port.to_string(),
                "a port other than listenPort".into(),
            ));
        }
        if b.grpc_listen_port != 0 {
            let namesrv = if b.embedded_namesrv {
                b.namesrv_listen_port
            } else {
                0
            };
            let taken = [
                ("listenPort", b.listen_port),
                ("metricsListenPort", b.metrics_listen_port),
                ("namesrvListenPort", namesrv),
            ];
            if let Some((other, _)) = taken.iter().find(|(_, p)| *p == b.grpc_listen_port) {
                return Err(invalid(
                    "grpcListenPort",
                    b.grpc_listen_port.to_string(),
                    format!("0 (off) or a port other than {other}"),
                ));
            }
        }
        Ok(())
    }
}

/// `value` within `min..=max`, else the refusal naming `key` (`unit` is
/// appended to the allowed range, e.g. `" (ms)"`).
fn range<T: PartialOrd + Display>(
    key: &str,
    value: T,
    min: T,
    max: T,
    unit: &str,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(invalid(
            key,
            value.to_string(),
            format!("{min}..={max}{unit}"),
        ));
    }
    Ok(())
}

/// `value` at least `min`, else the refusal naming `key`.
fn at_least<T: PartialOrd + Display>(
    key: &str,
    value: T,
    min: T,
    unit: &str,
) -> Result<(), ConfigError> {
    if value < min {
        return Err(invalid(
            key,
            value.to_string(),
            format!("at least {min}{unit}"),
        ));
    }
    Ok(())
}
