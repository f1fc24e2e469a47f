//! Pull and push consumers for Sluice and RocketMQ brokers: offsets, long
//! polling, clustering-mode rebalancing and consumer-side flow control.
//!
//! - [`PullConsumer`]: the application picks queues and offsets, pulls (with
//!   a tag expression and optional long polling) and commits offsets itself.
//! - [`PushConsumer`]: subscribes to topics with tag expressions, takes its
//!   share of each topic's queues among the group's members, long-polls them
//!   and hands messages to a [`MessageHandler`] on a bounded pool.
//!
//! ```no_run
//! # async fn run() -> Result<(), consumer_client::ConsumerError> {
//! use consumer_client::{ConsumeStatus, ConsumerConfig, FnHandler, PushConsumer};
//!
//! let config = ConsumerConfig::new("127.0.0.1:9876", "G").subscribe("TopicTest", "TagA || TagB");
//! let handler = FnHandler(|msgs: Vec<consumer_client::MessageExt>| async move {
//!     for m in &msgs {
//!         println!("{} {:?}", m.msg_id, m.body);
//!     }
//!     ConsumeStatus::Success
//! });
//! let consumer = PushConsumer::start(config, handler).await?;
//! // ...
//! consumer.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Delivery guarantee: at least once
//!
//! A push consumer commits, per queue, the offset of the *smallest message
//! still cached* (pulled but not yet accepted by the handler), or one past
//! the last cached message when none is left — RocketMQ's process-queue rule.
//! An offset is therefore committed only after the handler returned
//! [`ConsumeStatus::Success`] for every message below it, and a message is
//! only skipped by a later owner once its offset is committed. Nothing is
//! lost; a message can be handled more than once when:
//!
//! - the consumer crashes or is killed after the handler succeeded but before
//!   the offset reached the broker (offsets are sent every
//!   `persistConsumerOffsetInterval`, piggy-backed on pulls, when a rebalance
//!   releases a queue, and at [`PushConsumer::shutdown`]);
//! - a rebalance moves a queue before its old owner committed everything it
//!   handled (a handler still running when the queue is released keeps
//!   running, but its offset is no longer committed), or while a message
//!   is being retried;
//! - a message with a lower offset is slow or retried: messages above it
//!   stay uncommitted until it succeeds, and are handled again after a crash;
//! - the handler returns [`ConsumeStatus::RetryLater`]: the batch comes
//!   back later through the group's retry topic (see below).
//!
//! Handlers must therefore be idempotent (dedupe on [`MessageExt::msg_id`],
//! the producer's `UNIQ_KEY`).
//!
//! A failed batch is sent back to the broker, message by message
//! (`CONSUMER_SEND_MSG_BACK`): the broker stores a copy in the group's
//! `%RETRY%<group>` topic, delayed by delay level `3 + reconsumeTimes`
//! (10 s, 30 s, 1 min, ... with the default levels), and after
//! `maxReconsumeTimes` (16) deliveries in its `%DLQ%<group>` topic instead.
//! The original then counts as consumed, so one bad message never holds
//! its queue's offset back. Every member subscribes to the retry topic with
//! `*`, and a retried message is handed over under its first topic with its
//! [`MessageExt::reconsume_times`] raised. Only a message the broker would
//! not take back is retried in this process, after `retryBackoff`.
//!
//! A broker's `NOTIFY_CONSUMER_IDS_CHANGED` makes the consumer rebalance at
//! once. With `consumeOrderly`, each queue is locked on its broker before it
//! is pulled and handed to one handler call at a time, in order (see the
//! `orderly` module); with `messageModel=BROADCASTING` every member owns every
//! queue and keeps its offsets in a local file.
//!
//! # Access control
//! With `accessKey` and `secretKey` (and optionally `securityToken`) in the
//! [`ConsumerConfig`], every request either consumer sends, to name servers
//! and brokers alike, is signed as RocketMQ's access control expects;
//! without them requests go unsigned.
//!
//! # TLS
//! With `useTLS` in the [`ConsumerConfig`], every connection the consumer makes,
//! to name servers and brokers alike, starts with a TLS handshake. It
//! trusts any server certificate unless `tlsClientTrustCertPath` names the
//! PEM file of the certificates to trust, and shows the certificate of
//! `tlsClientCertPath` and `tlsClientKeyPath` to servers that ask for one.
//!
//! # Invariants worth naming
//! - A released queue's offset is committed once, after its pull task
//!   stopped, and no later handler result can move it again.
//! - At most `consumeThreadMax` handler calls run at once; a queue is not
//!   pulled while it caches more than `pullThresholdForQueue` messages or
//!   `pullThresholdSizeForQueue` MiB of bodies.
#![deny(clippy::unwrap_used)]

mod allocate;
mod api;
mod config;
mod consume_pool;
mod error;
mod handler;
mod local_offsets;
mod message;
mod orderly;
mod process_queue;
mod pull;
mod push;
mod queue_task;
mod stats;

pub use allocate::allocate_averagely;
pub use client_core::MessageQueue;
pub use config::{ConsumeFromWhere, ConsumerConfig, MessageModel};
pub use error::ConsumerError;
pub use handler::{ConsumeStatus, FnHandler, MessageHandler};
pub use message::{MessageExt, MAX_INFLATED_BODY_BYTES};
pub use pull::{PullConsumer, PullOptions, PullResult, PullStatus};
pub use push::PushConsumer;
pub use stats::ConsumerStats;
