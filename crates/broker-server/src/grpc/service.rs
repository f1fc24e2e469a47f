//! The `MessagingService` implementation: route, assignment, heartbeat,
//! termination, telemetry, send, transaction ends, and POP
//! receive/ack/change-invisible; the RPCs the broker does not serve
//! (offset-based pull and offsets) answer the business status
//! `NOT_IMPLEMENTED`.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Instant,
};

use grpc_protocol::{
    v2::{
        receive_message_response, AckMessageRequest, AckMessageResponse, Address, AddressScheme,
        Assignment, Broker, ChangeInvisibleDurationRequest, ChangeInvisibleDurationResponse, Code,
        EndTransactionRequest, EndTransactionResponse, Endpoints,
        ForwardMessageToDeadLetterQueueRequest, ForwardMessageToDeadLetterQueueResponse,
        GetOffsetRequest, GetOffsetResponse, HeartbeatRequest, HeartbeatResponse, MessageQueue,
        MessageType, NotifyClientTerminationRequest, NotifyClientTerminationResponse, Permission,
        PullMessageRequest, PullMessageResponse, QueryAssignmentRequest, QueryAssignmentResponse,
        QueryOffsetRequest, QueryOffsetResponse, QueryRouteRequest, QueryRouteResponse,
        ReceiveMessageRequest, ReceiveMessageResponse, Resource, SendMessageRequest,
        SendMessageResponse, Status, TelemetryCommand, UpdateOffsetRequest, UpdateOffsetResponse,
    },
    MessagingService,
};
use message_model::flags::{is_readable, is_writeable};
use remoting_net::CancellationToken;
use remoting_protocol::{body::TopicConfig, AUTO_CREATE_TOPIC};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{metadata::MetadataMap, Request, Response, Streaming};

use crate::{
    grpc::{
        access::{self, Needs},
        receive, send,
        status::{ok, status, RETRY_AFTER_METADATA},
        telemetry, transaction,
    },
    state::BrokerState,
    topics::validate_topic_name,
};

/// Header naming the client; the only one the endpoint requires.
pub const CLIENT_ID_HEADER: &str = "x-mq-client-id";

/// A stream of answers, fed by a task through a bounded channel.
pub type AnswerStream<T> = ReceiverStream<Result<T, tonic::Status>>;

/// The gRPC service, sharing the broker's state.
#[derive(Debug, Clone)]
pub struct GrpcService {
    pub(crate) state: Arc<BrokerState>,
    port: u16,
    pub(crate) shutdown: CancellationToken,
}

impl GrpcService {
    /// A service for the broker `state`, reachable on `port`, whose streams
    /// end when `shutdown` is cancelled.
    pub fn new(state: Arc<BrokerState>, port: u16, shutdown: CancellationToken) -> Self {
        Self {
            state,
            port,
            shutdown,
        }
    }

    /// The endpoints clients should use for this broker: the access point
    /// the client named when it is usable, else `brokerIP1` and the gRPC port.
    fn endpoints(&self, requested: Option<&Endpoints>) -> Endpoints {
        if let Some(ep) = requested {
            if let Some(addr) = ep.addresses.iter().find(|a| usable(a)) {
                let scheme = if ep.scheme == AddressScheme::Unspecified as i32 {
                    scheme_of(&addr.host) as i32
                } else {
                    ep.scheme
                };
                return Endpoints {
                    scheme,
                    addresses: vec![addr.clone()],
                };
            }
        }
        let host = self.state.config().broker.broker_ip1.clone();
        Endpoints {
            scheme: scheme_of(&host) as i32,
            addresses: vec![Address {
                host,
                port: i32::from(self.port),
            }],
        }
    }

    /// [`access::gate`] for `request`, with the checks `needs` makes of
    /// its message.
    fn gate<T>(
        &self,
        rpc: &'static str,
        request: &Request<T>,
        needs: impl FnOnce(&T) -> Vec<auth::Requirement>,
    ) -> Result<String, Status> {
        access::gate(
            &self.state,
            rpc,
            request.metadata(),
            peer(request).ip(),
            || needs(request.get_ref()),
        )
    }

    /// The queues `0..count` of a topic on this broker.
    fn queues(
        &self,
        topic: &Resource,
        config: &TopicConfig,
        count: i32,
        endpoints: &Endpoints,
    ) -> Vec<MessageQueue> {
        let cfg = self.state.config();
        let perm = config.perm & cfg.broker.broker_permission;
        let permission = match (is_readable(perm), is_writeable(perm)) {
            (true, true) => Permission::ReadWrite,
            (true, false) => Permission::Read,
            (false, true) => Permission::Write,
            (false, false) => Permission::None,
        };
        (0..count)
            .map(|id| MessageQueue {
                topic: Some(topic.clone()),
                id,
                permission: permission as i32,
                broker: Some(Broker {
                    name: cfg.broker.broker_name.clone(),
                    id: 0,
                    endpoints: Some(endpoints.clone()),
                }),
                accept_message_types: vec![
                    MessageType::Normal as i32,
                    MessageType::Fifo as i32,
                    MessageType::Delay as i32,
                    MessageType::Transaction as i32,
                ],
            })
            .collect()
    }
}

/// A host clients can connect to (not a wildcard, with a port).
fn usable(a: &Address) -> bool {
    let host = a.host.trim();
    a.port > 0
        && !host.is_empty()
        && host
            .parse::<IpAddr>()
            .map_or(true, |ip| !ip.is_unspecified())
}

fn scheme_of(host: &str) -> AddressScheme {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => AddressScheme::IPv4,
        Ok(IpAddr::V6(_)) => AddressScheme::IPv6,
        Err(_) => AddressScheme::DomainName,
    }
}

/// The client id header, when present and not blank.
pub fn client_id(metadata: &MetadataMap) -> Option<String> {
    metadata
        .get(CLIENT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

pub(crate) fn client_id_required() -> Status {
    status(
        Code::ClientIdRequired,
        format!("the {CLIENT_ID_HEADER} header is required"),
    )
}

fn not_implemented(rpc: &str) -> Status {
    status(
        Code::NotImplemented,
        format!("{rpc} is not served by this broker"),
    )
}

/// The peer address of a request (unspecified when the transport has none).
pub(crate) fn peer<T>(request: &Request<T>) -> SocketAddr {
    request
        .remote_addr()
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// Records the call's metrics and wraps the answer.
pub(crate) fn answer<T>(
    rpc: &'static str,
    started: Instant,
    code: i32,
    body: T,
) -> Result<Response<T>, tonic::Status> {
    crate::metrics::grpc_call(rpc, code, started.elapsed().as_secs_f64());
    Ok(Response::new(body))
}

/// A stream holding one status item (errors of streaming RPCs).
pub(crate) fn single<T: Send + 'static>(item: T) -> AnswerStream<T> {
    let (tx, rx) = mpsc::channel(1);
    // A fresh channel of capacity 1 always takes the first item.
    let _ = tx.try_send(Ok(item));
    ReceiverStream::new(rx)
}

fn code_of(s: Option<&Status>) -> i32 {
    s.map_or(Code::Ok as i32, |s| s.code)
}

#[tonic::async_trait]
impl MessagingService for GrpcService {
    async fn query_route(
        &self,
        request: Request<QueryRouteRequest>,
    ) -> Result<Response<QueryRouteResponse>, tonic::Status> {
        let started = Instant::now();
        let reply = |st: Status, queues| QueryRouteResponse {
            status: Some(st),
            message_queues: queues,
        };
        if let Err(st) = self.gate("QueryRoute", &request, |r| r.needs()) {
            return answer("QueryRoute", started, st.code, reply(st, Vec::new()));
        }
        let req = request.into_inner();
        let topic = req.topic.unwrap_or_default();
        if let Err(why) = validate_topic_name(&topic.name) {
            let st = status(Code::IllegalTopic, why);
            return answer("QueryRoute", started, st.code, reply(st, Vec::new()));
        }
        let found = match self.state.topics.get(&topic.name) {
            Some(config) => Ok(Some((config, false))),
            None => {
                // Creating a topic writes the topic table: off the async threads.
                let state = Arc::clone(&self.state);
                let name = topic.name.clone();
                tokio::task::spawn_blocking(move || {
                    let cfg = state.config();
                    state.topics.get_or_create_for_send(
                        &name,
                        AUTO_CREATE_TOPIC,
                        cfg.broker.default_topic_queue_nums,
                        cfg.broker.auto_create_topic_enable,
                    )
                })
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
            }
        };
        let config = match found {
            Ok(Some((config, created))) => {
                if created {
                    self.state.topics_changed.notify_one();
                }
                config
            }
            Ok(None) => {
                let st = status(
                    Code::TopicNotFound,
                    format!("topic {} does not exist", topic.name),
                );
                return answer("QueryRoute", started, st.code, reply(st, Vec::new()));
            }
            Err(e) => {
                tracing::error!(topic = %topic.name, cause = %e, "cannot create topic");
                let st = status(
                    Code::InternalServerError,
                    format!("topic {} cannot be created: {e}", topic.name),
                );
                return answer("QueryRoute", started, st.code, reply(st, Vec::new()));
            }
        };
        let endpoints = self.endpoints(req.endpoints.as_ref());
        let queues = self.queues(&topic, &config, config.write_queue_nums, &endpoints);
        answer("QueryRoute", started, Code::Ok as i32, reply(ok(), queues))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, tonic::Status> {
        let started = Instant::now();
        let st = match self.gate("Heartbeat", &request, |r| r.needs()) {
            Ok(_) => ok(),
            Err(st) => st,
        };
        answer(
            "Heartbeat",
            started,
            st.code,
            HeartbeatResponse { status: Some(st) },
        )
    }

    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, tonic::Status> {
        let started = Instant::now();
        let client = match self.gate("SendMessage", &request, |r| r.needs()) {
            Ok(client) => client,
            Err(st) => {
                return answer(
                    "SendMessage",
                    started,
                    st.code,
                    SendMessageResponse {
                        status: Some(st),
                        entries: Vec::new(),
                    },
                )
            }
        };
        let from = peer(&request);
        let (body, hint) = send::send(&self.state, from, &client, request.into_inner()).await;
        let code = code_of(body.status.as_ref());
        crate::metrics::grpc_call("SendMessage", code, started.elapsed().as_secs_f64());
        let mut response = Response::new(body);
        if let Some(ms) = hint {
            if let Ok(v) = ms.to_string().parse() {
                response.metadata_mut().insert(RETRY_AFTER_METADATA, v);
            }
        }
        Ok(response)
    }

    async fn query_assignment(
        &self,
        request: Request<QueryAssignmentRequest>,
    ) -> Result<Response<QueryAssignmentResponse>, tonic::Status> {
        let started = Instant::now();
        let reply = |st: Status, assignments| QueryAssignmentResponse {
            status: Some(st),
            assignments,
        };
        if let Err(st) = self.gate("QueryAssignment", &request, |r| r.needs()) {
            return answer("QueryAssignment", started, st.code, reply(st, Vec::new()));
        }
        let req = request.into_inner();
        let topic = req.topic.unwrap_or_default();
        let Some(config) = self.state.topics.get(&topic.name) else {
            let st = status(
                Code::TopicNotFound,
                format!("topic {} does not exist", topic.name),
            );
            return answer("QueryAssignment", started, st.code, reply(st, Vec::new()));
        };
        let endpoints = self.endpoints(req.endpoints.as_ref());
        let queues = self.queues(&topic, &config, config.read_queue_nums, &endpoints);
        if queues.iter().all(|q| {
            q.permission == Permission::None as i32 || q.permission == Permission::Write as i32
        }) {
            let st = status(
                Code::Forbidden,
                format!(
                    "no queue of topic {} is readable on this broker",
                    topic.name
                ),
            );
            return answer("QueryAssignment", started, st.code, reply(st, Vec::new()));
        }
        let assignments = queues
            .into_iter()
            .map(|q| Assignment {
                message_queue: Some(q),
            })
            .collect();
        answer(
            "QueryAssignment",
            started,
            Code::Ok as i32,
            reply(ok(), assignments),
        )
    }

    type ReceiveMessageStream = AnswerStream<ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        request: Request<ReceiveMessageRequest>,
    ) -> Result<Response<Self::ReceiveMessageStream>, tonic::Status> {
        let started = Instant::now();
        if let Err(st) = self.gate("ReceiveMessage", &request, |r| r.needs()) {
            crate::metrics::grpc_call("ReceiveMessage", st.code, started.elapsed().as_secs_f64());
            return Ok(Response::new(single(ReceiveMessageResponse {
                content: Some(receive_message_response::Content::Status(st)),
            })));
        }
        let call_timeout = receive::grpc_timeout(request.metadata());
        let (tx, rx) = mpsc::channel(receive::STREAM_CAPACITY);
        let state = Arc::clone(&self.state);
        let shutdown = self.shutdown.clone();
        let from = peer(&request);
        let req = request.into_inner();
        tokio::spawn(async move {
            let code = receive::receive(state, from, req, call_timeout, shutdown, tx).await;
            crate::metrics::grpc_call("ReceiveMessage", code, started.elapsed().as_secs_f64());
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn ack_message(
        &self,
        request: Request<AckMessageRequest>,
    ) -> Result<Response<AckMessageResponse>, tonic::Status> {
        let started = Instant::now();
        let body = if let Err(st) = self.gate("AckMessage", &request, |r| r.needs()) {
            AckMessageResponse {
                status: Some(st),
                entries: Vec::new(),
            }
        } else {
            receive::ack(&self.state, request.get_ref())
        };
        let code = code_of(body.status.as_ref());
        answer("AckMessage", started, code, body)
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: Request<ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<Response<ForwardMessageToDeadLetterQueueResponse>, tonic::Status> {
        let started = Instant::now();
        let body = if let Err(st) =
            self.gate("ForwardMessageToDeadLetterQueue", &request, |r| r.needs())
        {
            ForwardMessageToDeadLetterQueueResponse { status: Some(st) }
        } else {
            receive::forward_to_dead_letter(&self.state, peer(&request), request.get_ref()).await
        };
        let code = code_of(body.status.as_ref());
        answer("ForwardMessageToDeadLetterQueue", started, code, body)
    }

    type PullMessageStream = AnswerStream<PullMessageResponse>;

    async fn pull_message(
        &self,
        _request: Request<PullMessageRequest>,
    ) -> Result<Response<Self::PullMessageStream>, tonic::Status> {
        let started = Instant::now();
        let st = not_implemented("PullMessage");
        crate::metrics::grpc_call("PullMessage", st.code, started.elapsed().as_secs_f64());
        Ok(Response::new(single(PullMessageResponse {
            content: Some(grpc_protocol::v2::pull_message_response::Content::Status(
                st,
            )),
        })))
    }

    async fn update_offset(
        &self,
        _request: Request<UpdateOffsetRequest>,
    ) -> Result<Response<UpdateOffsetResponse>, tonic::Status> {
        let st = not_implemented("UpdateOffset");
        answer(
            "UpdateOffset",
            Instant::now(),
            st.code,
            UpdateOffsetResponse { status: Some(st) },
        )
    }

    async fn get_offset(
        &self,
        _request: Request<GetOffsetRequest>,
    ) -> Result<Response<GetOffsetResponse>, tonic::Status> {
        let st = not_implemented("GetOffset");
        answer(
            "GetOffset",
            Instant::now(),
            st.code,
            GetOffsetResponse {
                status: Some(st),
                offset: 0,
            },
        )
    }

    async fn query_offset(
        &self,
        _request: Request<QueryOffsetRequest>,
    ) -> Result<Response<QueryOffsetResponse>, tonic::Status> {
        let st = not_implemented("QueryOffset");
        answer(
            "QueryOffset",
            Instant::now(),
            st.code,
            QueryOffsetResponse {
                status: Some(st),
                offset: 0,
            },
        )
    }

    async fn end_transaction(
        &self,
        request: Request<EndTransactionRequest>,
    ) -> Result<Response<EndTransactionResponse>, tonic::Status> {
        let started = Instant::now();
        let body = if let Err(st) = self.gate("EndTransaction", &request, |r| r.needs()) {
            EndTransactionResponse { status: Some(st) }
        } else {
            let from = peer(&request);
            transaction::end(&self.state, from, request.get_ref()).await
        };
        let code = code_of(body.status.as_ref());
        answer("EndTransaction", started, code, body)
    }

    type TelemetryStream = AnswerStream<TelemetryCommand>;

    async fn telemetry(
        &self,
        request: Request<Streaming<TelemetryCommand>>,
    ) -> Result<Response<Self::TelemetryStream>, tonic::Status> {
        let started = Instant::now();
        let client = match self.gate("Telemetry", &request, |_| Vec::new()) {
            Ok(client) => client,
            Err(st) => {
                crate::metrics::grpc_call("Telemetry", st.code, started.elapsed().as_secs_f64());
                return Ok(Response::new(single(TelemetryCommand {
                    status: Some(st),
                    command: None,
                })));
            }
        };
        crate::metrics::grpc_call(
            "Telemetry",
            Code::Ok as i32,
            started.elapsed().as_secs_f64(),
        );
        let (tx, rx) = mpsc::channel(telemetry::STREAM_CHANNEL_CAPACITY);
        tokio::spawn(telemetry::serve_stream(
            request.into_inner(),
            tx,
            client,
            Arc::clone(&self.state),
            self.shutdown.clone(),
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn notify_client_termination(
        &self,
        request: Request<NotifyClientTerminationRequest>,
    ) -> Result<Response<NotifyClientTerminationResponse>, tonic::Status> {
        let started = Instant::now();
        let st = match self.gate("NotifyClientTermination", &request, |_| Vec::new()) {
            Ok(client) => {
                tracing::debug!(%client, "gRPC client terminated");
                ok()
            }
            Err(st) => st,
        };
        answer(
            "NotifyClientTermination",
            started,
            st.code,
            NotifyClientTerminationResponse { status: Some(st) },
        )
    }

    async fn change_invisible_duration(
        &self,
        request: Request<ChangeInvisibleDurationRequest>,
    ) -> Result<Response<ChangeInvisibleDurationResponse>, tonic::Status> {
        let started = Instant::now();
        let body = if let Err(st) = self.gate("ChangeInvisibleDuration", &request, |r| r.needs()) {
            ChangeInvisibleDurationResponse {
                status: Some(st),
                receipt_handle: String::new(),
            }
        } else {
            receive::change_invisible(&self.state, request.get_ref())
        };
        let code = code_of(body.status.as_ref());
        answer("ChangeInvisibleDuration", started, code, body)
    }
}
