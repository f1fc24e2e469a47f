//! The producer: topic routes, queue selection, synchronous, asynchronous and
//! oneway sends, timeouts, retries, failover and client-side limits, speaking
//! RocketMQ's remoting protocol to Sluice or RocketMQ brokers.
//!
//! ```no_run
//! use producer_client::{Message, Producer, ProducerConfig};
//!
//! # async fn demo() -> Result<(), producer_client::ProducerError> {
//! let producer = Producer::start(ProducerConfig::with_namesrv("127.0.0.1:9876")).await?;
//! let sent = producer
//!     .send(Message::new("Orders", "hello").with_tags("TagA").with_key("order-1"))
//!     .await?;
//! println!("{} at {:?} offset {}", sent.msg_id, sent.message_queue, sent.queue_offset);
//! producer.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # The path of one send
//! 1. Validate the message (topic name, body size against
//!    `maxMessageSize`, properties), give it a `UNIQ_KEY` and zlib-compress
//!    a body over `compressMsgBodyOverHowmuch` (sysFlag `0x1 | 0x300`; see
//!    [`decompress_body`]).
//! 2. Take an in-flight permit within the send timeout, else
//!    [`ProducerError::TooManyRequests`].
//! 3. Find the topic's queues: cached, else `GET_ROUTEINFO_BY_TOPIC` from the
//!    name servers, else the `TBW102` route so that the broker auto-creates
//!    the topic.
//! 4. Pick a queue (round robin, away from the broker that just failed and,
//!    with `sendLatencyFaultEnable`, from brokers in a fault window) and send
//!    `SEND_MESSAGE_V2` with the rest of the budget as its timeout.
//! 5. On a retryable failure try another broker; on `SYSTEM_BUSY` follow
//!    the [`BusyPolicy`].
//!
//! Ordered sends ([`Producer::send_with_selector`]) replace steps 4 and 5
//! with the caller's [`MessageQueueSelector`] and a single attempt.
//!
//! # Registration
//! Every producer sends `HEART_BEAT` with its client id (`ip@pid#n`) and
//! producer group to the master of every broker in its cached routes:
//! soon after a send has looked a route up (the send does not wait for it)
//! and every `heartbeatBrokerInterval`. Brokers list it among the group's
//! producers until its connection closes, which [`Producer::shutdown`]
//! does.
//!
//! # Transactions
//! [`TransactionProducer::send_in_transaction`] stores a half message, runs
//! the caller's local transaction and commits or rolls the half back with
//! `END_TRANSACTION`. A half left without an outcome is settled later by
//! the broker's `CHECK_TRANSACTION_STATE`, which any producer of the group
//! answers through its [`TransactionListener`]; for that the producer also
//! registers its group at start with the brokers of the topics it names,
//! and with a broker before ending a half sent to it.
//!
//! # Access control
//! With `accessKey` and `secretKey` (and optionally `securityToken`) in the
//! [`ProducerConfig`], every request the producer sends, to name servers
//! and brokers alike, is signed as RocketMQ's access control expects;
//! without them requests go unsigned.
//!
//! # TLS
//! With `useTLS` in the [`ProducerConfig`], every connection the producer makes,
//! to name servers and brokers alike, starts with a TLS handshake. It
//! trusts any server certificate unless `tlsClientTrustCertPath` names the
//! PEM file of the certificates to trust, and shows the certificate of
//! `tlsClientCertPath` and `tlsClientKeyPath` to servers that ask for one.
//!
//! # Invariants worth naming
//! - No send outlives its budget (`sendMsgTimeout`): permit wait, route
//!   lookup, attempts and back-off pauses all come out of it.
//! - Busy retries never exceed the retry budget: at most 10 tokens plus
//!   `budget_ratio` per send, so retries cannot multiply an overload.
//! - Every permit is returned when its send ends, whatever the outcome.
#![deny(clippy::unwrap_used)]

mod budget;
mod check;
mod config;
mod error;
mod fault;
mod heartbeat;
mod message;
mod ordered;
mod producer;
mod selector;
mod send;
mod stats;
mod transaction;
mod wire;

pub use budget::RETRY_BUDGET_CAP_TOKENS;
pub use client_core::{split_addrs, MessageQueue};
pub use config::{BusyPolicy, ProducerConfig};
pub use error::ProducerError;
pub use message::{Message, SendResult, SendStatus, TOPIC_MAX_LEN};
pub use ordered::{select_by_key, MessageQueueSelector};
pub use producer::{Producer, SendHandle};
pub use remoting_protocol::message::compression::{
    decompress_body, DecompressError, COMPRESS_LEVEL,
};
pub use remoting_protocol::RETRY_AFTER_MS;
pub use send::RETRYABLE_CODES;
pub use stats::ProducerStats;
pub use transaction::{
    CheckedMessage, EndTransactionStatus, LocalTransactionState, TransactionConfig,
    TransactionListener, TransactionProducer, TransactionSendResult,
};
