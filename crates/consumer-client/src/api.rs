//! Requests the consumers send: routes from the name servers; pulls,
//! offsets, heartbeats and group membership from the brokers.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use client_core::{route, CallError, Deadline, NameServers};
use message_model::flags::{PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    body::{self, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody, MessageQueueBody},
    header::{
        ConsumerSendMsgBackRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
        OffsetResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader,
        QueryConsumerOffsetRequestHeader, UnregisterClientRequestHeader,
        UpdateConsumerOffsetRequestHeader,
    },
    CommandHeader, RemotingCommand, RequestCode, ResponseCode,
};
use serde::Deserialize;

use crate::{
    message::decode_records,
    pull::{PullResult, PullStatus},
    ConsumerError, MessageQueue,
};

/// What one pull asks for.
#[derive(Debug, Clone)]
pub(crate) struct PullSpec<'a> {
    pub group: &'a str,
    pub offset: u64,
    pub max: u32,
    pub expression: &'a str,
    /// Long polling: how long the broker may hold the pull.
    pub suspend: Option<Duration>,
    /// Consumed offset to piggy-back (`COMMIT_OFFSET`).
    pub commit_offset: Option<u64>,
    pub timeout: Duration,
}

/// The transport, the name servers and the broker addresses learnt from routes.
#[derive(Debug)]
pub(crate) struct Api {
    client: RemotingClient,
    namesrv: NameServers,
    timeout: Duration,
    /// Broker name to master address.
    brokers: Mutex<HashMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerIdList {
    consumer_id_list: Vec<String>,
}

impl Api {
    /// The API of the name servers `namesrv`, each request allowed
    /// `timeout`, over a transport with `options` (what to do with the
    /// brokers' requests, the credentials that sign every request, the
    /// TLS every connection starts with).
    pub(crate) fn with_options(
        namesrv: Vec<String>,
        timeout: Duration,
        options: ClientOptions,
    ) -> Self {
        Self {
            client: RemotingClient::new(options),
            namesrv: NameServers::new(namesrv),
            timeout,
            brokers: Mutex::default(),
        }
    }

    /// The topic's readable queues on brokers that have a master, sorted;
    /// remembers the brokers' master addresses.
    pub(crate) async fn topic_queues(
        &self,
        topic: &str,
    ) -> Result<Vec<MessageQueue>, ConsumerError> {
        let deadline = Deadline::new(self.timeout);
        let no_route = || ConsumerError::NoRoute {
            topic: topic.to_owned(),
        };
        let route = route::query(&self.client, &self.namesrv, topic, self.timeout, &deadline)
            .await?
            .ok_or_else(no_route)?;
        self.brokers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(route::master_addrs(&route));
        let queues = route::readable_queues(topic, &route);
        if queues.is_empty() {
            return Err(no_route());
        }
        Ok(queues)
    }

    /// The master address of a broker name seen in a route.
    pub(crate) fn broker_addr(&self, broker_name: &str) -> Result<String, ConsumerError> {
        self.brokers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(broker_name)
            .cloned()
            .ok_or_else(|| ConsumerError::NoBroker {
                broker_name: broker_name.to_owned(),
            })
    }

    /// Every master address seen in a route.
    pub(crate) fn broker_addrs(&self) -> Vec<String> {
        let mut addrs: Vec<String> = self
            .brokers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }

    pub(crate) async fn pull(
        &self,
        mq: &MessageQueue,
        spec: &PullSpec<'_>,
    ) -> Result<PullResult, ConsumerError> {
        let addr = self.broker_addr(&mq.broker_name)?;
        let mut sys_flag = PULL_SUBSCRIPTION;
        if spec.suspend.is_some() {
            sys_flag |= PULL_SUSPEND;
        }
        if spec.commit_offset.is_some() {
            sys_flag |= PULL_COMMIT_OFFSET;
        }
        let header = PullMessageRequestHeader {
            consumer_group: spec.group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.wire_queue_id(),
            queue_offset: wire_offset(spec.offset),
            max_msg_nums: i32::try_from(spec.max).unwrap_or(i32::MAX),
            sys_flag,
            commit_offset: spec.commit_offset.map_or(0, wire_offset),
            suspend_timeout_millis: spec
                .suspend
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            subscription: Some(spec.expression.to_owned()),
            sub_version: 0,
            expression_type: Some("TAG".to_owned()),
            ..PullMessageRequestHeader::default()
        };
        let req = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header);
        let resp = self.send(&addr, req, spec.timeout).await?;
        let code = resp.response_code();
        let status = match code {
            ResponseCode::SUCCESS => PullStatus::Found,
            ResponseCode::PULL_NOT_FOUND => PullStatus::NoNewMsg,
            ResponseCode::PULL_RETRY_IMMEDIATELY => PullStatus::NoMatchedMsg,
            ResponseCode::PULL_OFFSET_MOVED => PullStatus::OffsetIllegal,
            _ => return Err(broker_error(&addr, &resp)),
        };
        let h: PullMessageResponseHeader = decode(&addr, &resp)?;
        let messages = if status == PullStatus::Found {
            decode_records(&addr, &resp.body)?
        } else {
            Vec::new()
        };
        Ok(PullResult {
            status,
            next_begin_offset: offset_of(h.next_begin_offset),
            min_offset: offset_of(h.min_offset),
            max_offset: offset_of(h.max_offset),
            messages,
        })
    }

    /// The group's committed offset, `None` when the broker has none.
    pub(crate) async fn query_offset(
        &self,
        group: &str,
        mq: &MessageQueue,
    ) -> Result<Option<u64>, ConsumerError> {
        let addr = self.broker_addr(&mq.broker_name)?;
        let req = RemotingCommand::request_with_header(
            RequestCode::QUERY_CONSUMER_OFFSET,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: group.to_owned(),
                topic: mq.topic.clone(),
                queue_id: mq.wire_queue_id(),
                set_zero_if_not_found: Some(false),
                broker_name: None,
            },
        );
        match self.call(&addr, req, self.timeout).await {
            Ok(resp) => Ok(Some(offset_of(
                decode::<OffsetResponseHeader>(&addr, &resp)?.offset,
            ))),
            Err(ConsumerError::Broker { code, .. }) if code == ResponseCode::QUERY_NOT_FOUND => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Stores the group's offset; oneway when `wait` is false.
    pub(crate) async fn update_offset(
        &self,
        group: &str,
        mq: &MessageQueue,
        offset: u64,
        wait: bool,
    ) -> Result<(), ConsumerError> {
        let addr = self.broker_addr(&mq.broker_name)?;
        let req = RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: group.to_owned(),
                topic: mq.topic.clone(),
                queue_id: mq.wire_queue_id(),
                commit_offset: wire_offset(offset),
                broker_name: None,
            },
        );
        if wait {
            self.call(&addr, req, self.timeout).await.map(drop)
        } else {
            self.client
                .invoke_oneway(&addr, req)
                .await
                .map_err(|source| {
                    CallError::from_client(&addr, source, millis(self.timeout)).into()
                })
        }
    }

    /// The queue's end offset (`max`) or first offset.
    pub(crate) async fn queue_offset(
        &self,
        mq: &MessageQueue,
        max: bool,
    ) -> Result<u64, ConsumerError> {
        let addr = self.broker_addr(&mq.broker_name)?;
        let req = if max {
            RemotingCommand::request_with_header(
                RequestCode::GET_MAX_OFFSET,
                &GetMaxOffsetRequestHeader {
                    topic: mq.topic.clone(),
                    queue_id: mq.wire_queue_id(),
                    committed: Some(true),
                    broker_name: None,
                },
            )
        } else {
            RemotingCommand::request_with_header(
                RequestCode::GET_MIN_OFFSET,
                &GetMinOffsetRequestHeader {
                    topic: mq.topic.clone(),
                    queue_id: mq.wire_queue_id(),
                    broker_name: None,
                },
            )
        };
        let resp = self.call(&addr, req, self.timeout).await?;
        Ok(offset_of(
            decode::<OffsetResponseHeader>(&addr, &resp)?.offset,
        ))
    }

    pub(crate) async fn heartbeat(
        &self,
        addr: &str,
        data: &HeartbeatData,
    ) -> Result<(), ConsumerError> {
        let req = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body::to_json(data));
        self.call(addr, req, self.timeout).await.map(drop)
    }

    /// The client ids of the group's consumers, as the broker knows them.
    pub(crate) async fn consumer_ids(
        &self,
        addr: &str,
        group: &str,
    ) -> Result<Vec<String>, ConsumerError> {
        let mut req = RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP);
        req.set_ext("consumerGroup", group);
        let resp = self.call(addr, req, self.timeout).await?;
        let list: ConsumerIdList =
            body::from_json(&resp.body).map_err(|e| ConsumerError::Protocol {
                addr: addr.to_owned(),
                reason: format!("consumer list body: {e}"),
            })?;
        Ok(list.consumer_id_list)
    }

    /// Hands a message the handler failed back to the broker that stored
    /// it, to come back later through the group's retry topic (delay level
    /// 0: the broker's choice) or go to its dead-letter topic (level -1, or
    /// once `max_reconsume_times` is reached).
    pub(crate) async fn send_back(
        &self,
        broker_name: &str,
        group: &str,
        msg: &crate::MessageExt,
        delay_level: i32,
        max_reconsume_times: i32,
    ) -> Result<(), ConsumerError> {
        let addr = self.broker_addr(broker_name)?;
        let req = RemotingCommand::request_with_header(
            RequestCode::CONSUMER_SEND_MSG_BACK,
            &ConsumerSendMsgBackRequestHeader {
                offset: msg.commit_log_offset,
                group: group.to_owned(),
                delay_level,
                origin_msg_id: Some(msg.msg_id.clone()),
                origin_topic: Some(msg.topic.clone()),
                unit_mode: Some(false),
                max_reconsume_times: Some(max_reconsume_times),
                broker_name: None,
            },
        );
        self.call(&addr, req, self.timeout).await.map(drop)
    }

    /// Asks the broker of `broker_name` to lock `queues` (all of that
    /// broker) for this client; returns the queues it holds now.
    pub(crate) async fn lock_batch(
        &self,
        broker_name: &str,
        group: &str,
        client_id: &str,
        queues: &[MessageQueue],
    ) -> Result<Vec<MessageQueue>, ConsumerError> {
        let addr = self.broker_addr(broker_name)?;
        let req = RemotingCommand::request(RequestCode::LOCK_BATCH_MQ)
            .with_body(body::to_json(&lock_body(group, client_id, queues)));
        let resp = self.call(&addr, req, self.timeout).await?;
        let granted: LockBatchResponseBody =
            body::from_json(&resp.body).map_err(|e| ConsumerError::Protocol {
                addr: addr.clone(),
                reason: format!("lock batch body: {e}"),
            })?;
        Ok(granted
            .lock_ok_mq_set
            .into_iter()
            .filter_map(|q| {
                Some(MessageQueue::new(
                    q.topic,
                    q.broker_name,
                    u32::try_from(q.queue_id).ok()?,
                ))
            })
            .collect())
    }

    /// Gives the locks of `queues` (all of one broker) back.
    pub(crate) async fn unlock_batch(
        &self,
        broker_name: &str,
        group: &str,
        client_id: &str,
        queues: &[MessageQueue],
    ) -> Result<(), ConsumerError> {
        let addr = self.broker_addr(broker_name)?;
        let req = RemotingCommand::request(RequestCode::UNLOCK_BATCH_MQ)
            .with_body(body::to_json(&lock_body(group, client_id, queues)));
        self.call(&addr, req, self.timeout).await.map(drop)
    }

    pub(crate) async fn unregister(
        &self,
        addr: &str,
        client_id: &str,
        group: &str,
    ) -> Result<(), ConsumerError> {
        let req = RemotingCommand::request_with_header(
            RequestCode::UNREGISTER_CLIENT,
            &UnregisterClientRequestHeader {
                client_id: client_id.to_owned(),
                producer_group: None,
                consumer_group: Some(group.to_owned()),
            },
        );
        self.call(addr, req, self.timeout).await.map(drop)
    }

    pub(crate) async fn close(&self) {
        self.client.close_all().await;
    }

    /// Sends a request; any response comes back, whatever its code.
    async fn send(
        &self,
        addr: &str,
        req: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ConsumerError> {
        self.client
            .invoke(addr, req, timeout)
            .await
            .map_err(|source| CallError::from_client(addr, source, millis(timeout)).into())
    }

    /// Sends a request; a code other than SUCCESS is an error.
    async fn call(
        &self,
        addr: &str,
        req: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ConsumerError> {
        let resp = self.send(addr, req, timeout).await?;
        if resp.response_code() == ResponseCode::SUCCESS {
            Ok(resp)
        } else {
            Err(broker_error(addr, &resp))
        }
    }
}

fn lock_body(group: &str, client_id: &str, queues: &[MessageQueue]) -> LockBatchRequestBody {
    LockBatchRequestBody {
        consumer_group: group.to_owned(),
        client_id: client_id.to_owned(),
        only_this_broker: false,
        mq_set: queues
            .iter()
            .map(|q| MessageQueueBody {
                topic: q.topic.clone(),
                broker_name: q.broker_name.clone(),
                queue_id: q.wire_queue_id(),
            })
            .collect(),
    }
}

fn broker_error(addr: &str, resp: &RemotingCommand) -> ConsumerError {
    CallError::refused(addr, resp).into()
}

fn decode<H: CommandHeader>(addr: &str, resp: &RemotingCommand) -> Result<H, ConsumerError> {
    resp.decode_header().map_err(|e| ConsumerError::Protocol {
        addr: addr.to_owned(),
        reason: format!("response header: {e}"),
    })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Java's `i64` offset; offsets above `i64::MAX` cannot exist.
fn wire_offset(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// A wire offset as `u64`; a negative one (never sent by a healthy broker) is 0.
fn offset_of(offset: i64) -> u64 {
    u64::try_from(offset).unwrap_or(0)
}
