//! The `transaction-check` thread: asks producers what became of half
//! messages nobody ended.
//!
//! Every `transactionCheckInterval` it walks the half queue from the oldest
//! half not known to have ended. A half stored less than
//! `transactionTimeOut` ago (or its `CHECK_IMMUNITY_TIME_IN_SECONDS`), by
//! the broker's clock, waits; one checked
//! `transactionCheckMax` times already is moved to
//! `TRANS_CHECK_MAX_TIME_TOPIC` and counts as ended; any other is checked:
//! `CHECK_TRANSACTION_STATE` (39, oneway) goes to a live connection of its
//! producer group, naming the half's own offsets, with the message (in its
//! real topic and queue) as the body. The producer answers with
//! `END_TRANSACTION`, `fromTransactionCheck=true`. A gRPC producer's half
//! (its group is its topic) is checked with `RecoverOrphanedTransactionCommand`
//! on the telemetry stream of a producer publishing to the topic, which
//! answers with `EndTransaction` from `SOURCE_SERVER_CHECK`.
//!
//! Checks are paced to `transactionCheckMaxPerSecond`, so a backlog of
//! halves cannot flood producers, nor the put lock with discards. How often
//! each half was checked is kept in memory: after a restart every pending
//! half may be checked `transactionCheckMax` times again.

use std::time::{Duration, Instant};

use message_model::{
    properties::{keys, Properties},
    record::{self, Record, StoredMessage},
    MessageId,
};
use remoting_protocol::{header::CheckTransactionStateRequestHeader, RemotingCommand, RequestCode};

use crate::{
    grpc,
    processor::ensure_system_topic,
    schedule::restored,
    state::BrokerState,
    transaction::{op_record, CHECK_IMMUNITY, DISCARD, HALF_TOPIC, QUEUE_ID},
};

/// Where halves checked too often go.
pub const CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Groups named in the pass's line about checks that reached no producer.
const UNREACHED_NAMED: usize = 5;
/// How many live connections of a group a check tries.
const CONNECTION_TRIES: usize = 3;

/// Runs check passes until the broker stops.
pub fn run(state: &BrokerState) {
    let mut cursor = state.transactions.lock().watermark();
    let service = &state.transactions.service;
    service.run(
        Duration::from_millis(state.config().broker.transaction_check_interval),
        Duration::MAX,
        |now_ms| {
            pass(state, &mut cursor, now_ms);
            if let Err(e) = state.transactions.advance(&state.store, cursor) {
                tracing::warn!(cause = %e, "the transaction checkpoint was not saved: a restart reads more op records");
            }
            let every = state.config().broker.transaction_check_interval;
            Some(now_ms + i64::try_from(every).unwrap_or(i64::MAX))
        },
        || {},
    );
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassFigures {
    /// Checks sent.
    pub checked: u64,
    /// Checks with no live producer connection to go to.
    pub no_producer: u64,
    /// Halves moved to [`CHECK_MAX_TIME_TOPIC`].
    pub discarded: u64,
}

/// One pass over the half queue, from `cursor` (every half before it has
/// ended); moves `cursor` past the halves that ended. Stops early when the
/// broker stops.
pub fn pass(state: &BrokerState, cursor: &mut i64, started_ms: i64) -> PassFigures {
    let cfg = state.config();
    let b = &cfg.broker;
    let store = &state.store;
    let mut figures = PassFigures::default();
    let end = store.max_offset_in_queue(HALF_TOPIC, QUEUE_ID);
    *cursor = (*cursor).max(store.min_offset_in_queue(HALF_TOPIC, QUEUE_ID));
    let spacing = Duration::from_secs_f64(1.0 / b.transaction_check_max_per_second.max(1) as f64);
    let mut next_slot = Instant::now();
    let mut all_ended_so_far = true;
    // Groups whose checks found no producer (the first few), for one log
    // line per pass rather than one per half.
    let mut unreached: Vec<String> = Vec::new();
    let mut offset = *cursor;
    while offset < end {
        let here = offset;
        offset += 1;
        if state.transactions.lock().contains(here) {
            if all_ended_so_far {
                *cursor = offset;
            }
            continue;
        }
        let got = store.get_messages(HALF_TOPIC, QUEUE_ID, here, 1, usize::MAX, None);
        let Some(stored) = got.messages.first() else {
            // Gone with retention, or not there: nothing to check.
            continue;
        };
        let Record::Message(half) = record::check(stored, false) else {
            continue;
        };
        if half.queue_offset != here {
            // The read moved on past a gap; the next offsets come in turn.
            continue;
        }
        if half.store_timestamp > started_ms {
            break;
        }
        let props = Properties::decode(half.properties);
        let immunity_s = props
            .get(CHECK_IMMUNITY)
            .and_then(|v| v.parse::<i64>().ok());
        let immunity_ms = immunity_s
            .unwrap_or(0)
            .saturating_mul(1000)
            .max(i64::try_from(b.transaction_time_out).unwrap_or(i64::MAX));
        // Aged by the broker's clock: a producer's clock ahead of it must
        // not hold every check after its halves back.
        if message_model::now_ms() - half.store_timestamp < immunity_ms {
            if immunity_s.is_some() {
                // Its own, longer immunity: the ones after it may be due.
                all_ended_so_far = false;
                continue;
            }
            // Halves are stored in queue order: the rest are younger.
            break;
        }
        let now = Instant::now();
        if next_slot > now && state.transactions.service.pause(next_slot - now) {
            break;
        }
        next_slot = next_slot.max(Instant::now()) + spacing;
        let mut ended = state.transactions.lock();
        if ended.contains(here) {
            drop(ended);
            if all_ended_so_far {
                *cursor = offset;
            }
            continue;
        }
        let times = state.transactions.checked(here);
        if times >= b.transaction_check_max {
            if discard(state, &half) {
                ended.insert(here);
                state.transactions.forget_checks(here);
                figures.discarded += 1;
                count_check("discarded");
                if all_ended_so_far {
                    *cursor = offset;
                }
                continue;
            }
        } else {
            drop(ended);
            state.transactions.record_check(here);
            if send_check(state, &half, &props) {
                figures.checked += 1;
                count_check("sent");
            } else {
                figures.no_producer += 1;
                count_check("no_producer");
                if unreached.len() < UNREACHED_NAMED {
                    let group = props.get(keys::PRODUCER_GROUP).unwrap_or("").to_owned();
                    if !unreached.contains(&group) {
                        unreached.push(group);
                    }
                }
            }
        }
        all_ended_so_far = false;
    }
    if figures.no_producer > 0 {
        tracing::warn!(
            halves = figures.no_producer,
            producer_groups = ?unreached,
            "no producer of these groups is connected: their half messages are checked again \
             next pass"
        );
    }
    figures
}

/// Counts one check (or discard) as it happens: a pass over a backlog can
/// last minutes.
fn count_check(outcome: &'static str) {
    metrics::counter!("sluice_transaction_checks_total", "outcome" => outcome).increment(1);
}

/// Moves a half checked too often to [`CHECK_MAX_TIME_TOPIC`] and records
/// its end; false (and logged) when the store refused.
fn discard(state: &BrokerState, half: &StoredMessage<'_>) -> bool {
    if let Err(refusal) = ensure_system_topic(state, CHECK_MAX_TIME_TOPIC) {
        tracing::error!(remark = %refusal.remark, "cannot make {CHECK_MAX_TIME_TOPIC}");
        return false;
    }
    // As stored in the half topic, properties and all, in a topic of its own.
    let kept = restored(
        half,
        CHECK_MAX_TIME_TOPIC.to_owned(),
        0,
        half.properties.to_owned(),
    );
    let props = Properties::decode(half.properties);
    tracing::warn!(
        producer_group = props.get(keys::PRODUCER_GROUP).unwrap_or(""),
        msg_id = props.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).unwrap_or(""),
        half_offset = half.queue_offset,
        "half message checked transactionCheckMax times without an answer: \
         moved to {CHECK_MAX_TIME_TOPIC}, never delivered"
    );
    let op = op_record(half.queue_offset, DISCARD, state.store_host);
    state.store.put_message(&kept).is_ok() && state.store.put_message(&op).is_ok()
}

/// Sends the check of `half` to a live connection of its producer group;
/// false when there is none.
fn send_check(state: &BrokerState, half: &StoredMessage<'_>, props: &Properties) -> bool {
    let group = props.get(keys::PRODUCER_GROUP).unwrap_or("");
    let unique_key = props
        .get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        .map(str::to_owned);
    let Some(body) = check_body(half, props) else {
        return false;
    };
    let header = CheckTransactionStateRequestHeader {
        tran_state_table_offset: half.queue_offset,
        commit_log_offset: half.physical_offset,
        offset_msg_id: Some(MessageId::new(state.store_host, half.physical_offset).encode()),
        msg_id: unique_key.clone(),
        transaction_id: props
            .get(keys::TRANSACTION_ID)
            .map(str::to_owned)
            .or(unique_key),
        topic: Some(HALF_TOPIC.to_owned()),
        broker_name: Some(state.config().broker.broker_name.clone()),
    };
    let connections = state.clients.producer_connections(group);
    // A gRPC producer's halves are of the group named like their topic.
    let streams = match props.get(keys::REAL_TOPIC) {
        Some(topic) if topic == group => state.grpc_producers.streams_of(topic),
        _ => Vec::new(),
    };
    if connections.is_empty() && streams.is_empty() {
        return false;
    }
    let start = state.transactions.next_connection();
    if !connections.is_empty() {
        for i in 0..connections.len().min(CONNECTION_TRIES) {
            let conn = &connections[(start + i) % connections.len()];
            let mut check =
                RemotingCommand::request_with_header(RequestCode::CHECK_TRANSACTION_STATE, &header)
                    .with_body(body.clone());
            check.mark_oneway();
            if conn.send(check) {
                return true;
            }
        }
    }
    grpc::transaction::send_check(state.store_host, half, &streams, start, CONNECTION_TRIES)
}

/// The check's body: the half as a whole record in its real topic and
/// queue, with its offsets and store time.
fn check_body(half: &StoredMessage<'_>, props: &Properties) -> Option<Vec<u8>> {
    let real = restored(
        half,
        props.get(keys::REAL_TOPIC)?.to_owned(),
        props.get(keys::REAL_QUEUE_ID)?.parse().ok()?,
        half.properties.to_owned(),
    );
    let mut out = Vec::new();
    record::encode(&real, usize::MAX, &mut out).ok()?;
    record::patch(
        &mut out,
        half.queue_offset,
        half.physical_offset,
        half.store_timestamp,
    );
    Some(out)
}
