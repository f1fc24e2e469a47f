//! The gate every gRPC call passes first: the client id it must name, and,
//! with authentication on, the user whose signature it carries and what
//! that user may do (`Pub` on the topics it sends to, `Sub` on the topic
//! and group it receives from, and so on, as for remoting requests).

use std::net::IpAddr;

use auth::{Action, Requirement, Resource as Named};
use grpc_protocol::v2::{
    AckMessageRequest, ChangeInvisibleDurationRequest, ClientType, Code, EndTransactionRequest,
    ForwardMessageToDeadLetterQueueRequest, HeartbeatRequest, QueryAssignmentRequest,
    QueryRouteRequest, ReceiveMessageRequest, Resource, SendMessageRequest, Status,
};
use tonic::metadata::MetadataMap;

use crate::{
    grpc::{
        service::{client_id, client_id_required},
        status::status,
    },
    state::BrokerState,
};

const PUB: &[Action] = &[Action::Pub];
const SUB: &[Action] = &[Action::Sub];
const ROUTE: &[Action] = &[Action::Pub, Action::Sub, Action::Get];

/// The client id of a call that may go ahead, or the status that refuses
/// it: `CLIENT_ID_REQUIRED` without one, `UNAUTHORIZED` when access
/// control refuses it.
pub(crate) fn gate(
    state: &BrokerState,
    rpc: &'static str,
    metadata: &MetadataMap,
    peer: IpAddr,
    needs: impl FnOnce() -> Vec<Requirement>,
) -> Result<String, Status> {
    let client = client_id(metadata).ok_or_else(client_id_required)?;
    let header = |name: &str| metadata.get(name).and_then(|v| v.to_str().ok());
    state
        .access
        .check_grpc(
            header(auth::grpc::AUTHORIZATION),
            header(auth::grpc::DATE_TIME),
            peer,
            needs,
        )
        .map_err(|e| {
            state.access.note_refusal("grpc", peer, rpc, &e);
            status(Code::Unauthorized, e.to_string())
        })?;
    Ok(client)
}

fn topic(r: Option<&Resource>, actions: &'static [Action]) -> Option<Requirement> {
    r.filter(|r| !r.name.is_empty())
        .map(|r| Requirement::new(Named::topic(&r.name), actions))
}

fn group(r: Option<&Resource>) -> Option<Requirement> {
    r.filter(|r| !r.name.is_empty())
        .map(|r| Requirement::new(Named::group(&r.name), SUB))
}

/// `Sub` on the topic and the group a consumer's call names.
fn consume(t: Option<&Resource>, g: Option<&Resource>) -> Vec<Requirement> {
    [topic(t, SUB), group(g)].into_iter().flatten().collect()
}

/// What each request needs, by its type.
pub(crate) trait Needs {
    /// The checks the request needs.
    fn needs(&self) -> Vec<Requirement>;
}

impl Needs for QueryRouteRequest {
    fn needs(&self) -> Vec<Requirement> {
        topic(self.topic.as_ref(), ROUTE).into_iter().collect()
    }
}

impl Needs for HeartbeatRequest {
    fn needs(&self) -> Vec<Requirement> {
        let consumer = self.client_type == ClientType::PushConsumer as i32
            || self.client_type == ClientType::SimpleConsumer as i32
            || self.client_type == ClientType::PullConsumer as i32;
        group(self.group.as_ref())
            .filter(|_| consumer)
            .into_iter()
            .collect()
    }
}

impl Needs for SendMessageRequest {
    fn needs(&self) -> Vec<Requirement> {
        let mut topics: Vec<&str> = self
            .messages
            .iter()
            .filter_map(|m| m.topic.as_ref().map(|t| t.name.as_str()))
            .collect();
        topics.sort_unstable();
        topics.dedup();
        topics
            .into_iter()
            .map(|t| Requirement::new(Named::topic(t), PUB))
            .collect()
    }
}

impl Needs for QueryAssignmentRequest {
    fn needs(&self) -> Vec<Requirement> {
        consume(self.topic.as_ref(), self.group.as_ref())
    }
}

impl Needs for ReceiveMessageRequest {
    fn needs(&self) -> Vec<Requirement> {
        let queue_topic = self.message_queue.as_ref().and_then(|q| q.topic.as_ref());
        consume(queue_topic, self.group.as_ref())
    }
}

impl Needs for AckMessageRequest {
    fn needs(&self) -> Vec<Requirement> {
        consume(self.topic.as_ref(), self.group.as_ref())
    }
}

impl Needs for ForwardMessageToDeadLetterQueueRequest {
    fn needs(&self) -> Vec<Requirement> {
        consume(self.topic.as_ref(), self.group.as_ref())
    }
}

impl Needs for ChangeInvisibleDurationRequest {
    fn needs(&self) -> Vec<Requirement> {
        consume(self.topic.as_ref(), self.group.as_ref())
    }
}

impl Needs for EndTransactionRequest {
    fn needs(&self) -> Vec<Requirement> {
        topic(self.topic.as_ref(), PUB).into_iter().collect()
    }
}
