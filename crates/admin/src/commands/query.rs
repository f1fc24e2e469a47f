//! `message get --key` and `message get --id <unique key>`: the messages of
//! a topic indexed under a key, found with `QUERY_MESSAGE` sent to one
//! address (the master) of each broker of the topic's route at once. The
//! brokers compare only key hashes, so their answers are filtered here:
//! a query by key keeps the messages of the topic whose `KEYS` hold the key,
//! a query by unique key those whose `UNIQ_KEY` is the key.

use std::{
    future::Future,
    pin::Pin,
    task::Poll,
    time::{SystemTime, UNIX_EPOCH},
};

use remoting_protocol::{
    body::TopicRouteData,
    header::{QueryMessageRequestHeader, UNIQUE_KEY_QUERY},
    RemotingCommand, RequestCode, ResponseCode,
};

use super::{decode_records, MessageReport, MessageView};
use crate::{
    call::Admin,
    error::{response_name, AdminError, NoMessage, Peer},
};

/// How many messages a query by key asks each broker for unless told
/// (`mqadmin queryMsgByKey`).
pub const KEY_QUERY_MAX_NUM: i32 = 64;
/// How many messages a query by unique key asks each broker for.
pub const UNIQUE_KEY_QUERY_MAX_NUM: i32 = 32;
/// How far back a query by unique key looks: 3 days, in ms.
pub const UNIQUE_KEY_WINDOW_MS: i64 = 3 * 24 * 60 * 60 * 1000;
/// The separator of the keys in a message's `KEYS`.
pub const KEY_SEPARATOR: char = ' ';

/// One `QUERY_MESSAGE` lookup: what is asked of every broker of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyQuery {
    /// The topic.
    pub topic: String,
    /// A key of the messages' `KEYS`, or a unique key.
    pub key: String,
    /// Whether `key` is a unique key (`UNIQ_KEY`) rather than one of `KEYS`.
    pub unique: bool,
    /// Most messages asked of each broker.
    pub max_num: i32,
    /// Earliest store time, ms since the epoch.
    pub begin_ms: i64,
    /// Latest store time, ms since the epoch.
    pub end_ms: i64,
}

impl KeyQuery {
    /// A query by a key of `KEYS`: at most `max` (64) messages of each
    /// broker stored within `begin` (0) ..= `end` (`i64::MAX`).
    pub fn by_key(
        topic: &str,
        key: &str,
        max: Option<i32>,
        begin: Option<i64>,
        end: Option<i64>,
    ) -> Self {
        Self {
            topic: topic.to_owned(),
            key: key.to_owned(),
            unique: false,
            max_num: max.unwrap_or(KEY_QUERY_MAX_NUM),
            begin_ms: begin.unwrap_or(0),
            end_ms: end.unwrap_or(i64::MAX),
        }
    }

    /// A query by unique key at `now_ms`: at most 32 messages of each broker
    /// stored in the last 3 days (or later).
    pub fn by_unique_key(topic: &str, key: &str, now_ms: i64) -> Self {
        Self {
            topic: topic.to_owned(),
            key: key.to_owned(),
            unique: true,
            max_num: UNIQUE_KEY_QUERY_MAX_NUM,
            begin_ms: now_ms.saturating_sub(UNIQUE_KEY_WINDOW_MS),
            end_ms: i64::MAX,
        }
    }

    /// `key` or `unique key`, as errors name it.
    pub fn kind(&self) -> &'static str {
        if self.unique {
            "unique key"
        } else {
            "key"
        }
    }

    /// The `QUERY_MESSAGE` request, with `_UNIQUE_KEY_QUERY` saying which
    /// kind of key it is.
    pub fn request(&self) -> RemotingCommand {
        let header = QueryMessageRequestHeader {
            topic: self.topic.clone(),
            key: self.key.clone(),
            max_num: self.max_num,
            begin_timestamp: self.begin_ms,
            end_timestamp: self.end_ms,
            broker_name: None,
        };
        let mut request = RemotingCommand::request_with_header(RequestCode::QUERY_MESSAGE, &header);
        request.set_ext(UNIQUE_KEY_QUERY, if self.unique { "true" } else { "false" });
        request
    }

    /// Whether `m` is really a message of this query and not one whose key
    /// only has the same hash: by key, a message of the topic with the key
    /// among its `KEYS`; by unique key, one whose `UNIQ_KEY` (else offset
    /// message id) is the key.
    pub fn matches(&self, m: &MessageView) -> bool {
        if self.unique {
            m.unique_key.as_deref().unwrap_or(&m.msg_id) == self.key
        } else {
            m.topic == self.topic
                && m.keys
                    .as_deref()
                    .is_some_and(|keys| keys.split(KEY_SEPARATOR).any(|k| k == self.key))
        }
    }
}

/// The time now, ms since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One address of each broker of `route`, by broker name: its master, else
/// its replica with the lowest id.
pub fn query_addrs(route: &TopicRouteData) -> Vec<String> {
    let mut brokers: Vec<_> = route.broker_datas.iter().collect();
    brokers.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    brokers
        .into_iter()
        .filter_map(|b| {
            b.master_addr()
                .or_else(|| b.broker_addrs.values().next().map(String::as_str))
                .map(str::to_owned)
        })
        .collect()
}

/// What one broker answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerAnswer {
    /// `SUCCESS` with these records (before the collision filter).
    Found(Vec<MessageView>),
    /// `QUERY_NOT_FOUND`, with the broker's remark.
    NotFound(String),
}

/// The messages of the answers (in the order of the brokers) that `query`
/// really asked for; when there are none, the [`AdminError::NoMessage`]
/// that says what each broker answered.
///
/// # Errors
/// [`AdminError::NoMessage`] when no message is left.
pub fn filter_answers(
    query: &KeyQuery,
    answers: Vec<(String, BrokerAnswer)>,
) -> Result<Vec<MessageView>, AdminError> {
    let mut kept = Vec::new();
    let mut said = Vec::new();
    for (addr, answer) in answers {
        match answer {
            BrokerAnswer::Found(messages) => {
                let total = messages.len();
                let before = kept.len();
                kept.extend(messages.into_iter().filter(|m| query.matches(m)));
                let dropped = total - (kept.len() - before);
                said.push(if dropped == 0 {
                    format!("{addr}: {total} found")
                } else {
                    format!(
                        "{addr}: {total} found, {dropped} of them under another key of the same hash"
                    )
                });
            }
            BrokerAnswer::NotFound(remark) => said.push(format!(
                "{addr}: {}{}",
                response_name(ResponseCode::QUERY_NOT_FOUND),
                if remark.is_empty() {
                    String::new()
                } else {
                    format!(" {remark}")
                }
            )),
        }
    }
    if kept.is_empty() {
        return Err(AdminError::NoMessage(Box::new(NoMessage {
            topic: query.topic.clone(),
            kind: query.kind(),
            key: query.key.clone(),
            begin_ms: query.begin_ms,
            end_ms: query.end_ms,
            answers: said,
            tried: None,
        })));
    }
    Ok(kept)
}

/// Sends `query` to one address of each broker of its topic's route at
/// once and returns the messages it asked for.
///
/// # Errors
/// No route of the topic, a broker that fails otherwise than with
/// `QUERY_NOT_FOUND` (the first, in broker-name order), a body that is not
/// records, or [`AdminError::NoMessage`].
pub async fn query_messages(
    admin: &Admin,
    query: &KeyQuery,
    full: bool,
) -> Result<MessageReport, AdminError> {
    let route = admin
        .route(&query.topic)
        .await?
        .ok_or_else(|| AdminError::NoRoute {
            namesrv: admin.namesrv_text(),
            topic: query.topic.clone(),
        })?;
    let addrs = query_addrs(&route);
    if addrs.is_empty() {
        return Err(AdminError::NoRoute {
            namesrv: admin.namesrv_text(),
            topic: query.topic.clone(),
        });
    }
    let calls = addrs.iter().map(|addr| ask(admin, addr, query, full));
    let mut answers = Vec::with_capacity(addrs.len());
    for (addr, answer) in addrs.iter().zip(join_all(calls.collect()).await) {
        answers.push((addr.clone(), answer?));
    }
    Ok(MessageReport {
        messages: filter_answers(query, answers)?,
    })
}

/// `query` asked of the broker at `addr`.
async fn ask(
    admin: &Admin,
    addr: &str,
    query: &KeyQuery,
    full: bool,
) -> Result<BrokerAnswer, AdminError> {
    let answer = admin
        .call_accepting(
            Peer::Broker,
            addr,
            query.request(),
            &[ResponseCode::QUERY_NOT_FOUND],
        )
        .await?;
    if answer.response_code() == ResponseCode::QUERY_NOT_FOUND {
        return Ok(BrokerAnswer::NotFound(answer.remark.unwrap_or_default()));
    }
    decode_records(addr, &answer.body, full)
        .map(BrokerAnswer::Found)
        .map_err(|reason| AdminError::BadAnswer {
            peer: Peer::Broker,
            addr: addr.to_owned(),
            request: RequestCode::QUERY_MESSAGE,
            reason: format!(
                "topic {}, {} {}: {reason}",
                query.topic,
                query.kind(),
                query.key
            ),
        })
}

/// Runs `futures` concurrently; their outputs in the same order.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *output = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
