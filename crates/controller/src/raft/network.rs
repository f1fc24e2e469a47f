//! Raft messages between controllers over Sluice's remoting protocol, on the
//! controller port: one request code per message kind, the message as JSON
//! in the body, and the peer's `Result` as JSON in the response body.

use std::{error::Error, sync::Arc, time::Duration};

use openraft::{
    error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable},
    network::{RPCOption, RaftNetwork, RaftNetworkFactory},
    raft::{
        AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest,
        InstallSnapshotResponse, VoteRequest, VoteResponse,
    },
    BasicNode,
};
use remoting_net::{ClientError, RemotingClient};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};
use serde::{de::DeserializeOwned, Serialize};

use super::{NodeId, Raft, TypeConfig};

/// `RAFT_VOTE`: a candidate asks for a vote (Sluice's own code).
pub const RAFT_VOTE: RequestCode = RequestCode(1050);
/// `RAFT_APPEND_ENTRIES`: the leader replicates entries or beats its heart.
pub const RAFT_APPEND_ENTRIES: RequestCode = RequestCode(1051);
/// `RAFT_INSTALL_SNAPSHOT`: the leader sends a snapshot chunk.
pub const RAFT_INSTALL_SNAPSHOT: RequestCode = RequestCode(1052);

/// Makes connections to the other controllers.
#[derive(Clone, Debug)]
pub struct Network {
    client: Arc<RemotingClient>,
}

impl Network {
    /// Peers reached through `client`.
    #[must_use]
    pub fn new(client: Arc<RemotingClient>) -> Self {
        Self { client }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer {
            client: Arc::clone(&self.client),
            target,
            addr: node.addr.clone(),
        }
    }
}

/// One other controller.
#[derive(Debug)]
pub struct Peer {
    client: Arc<RemotingClient>,
    target: NodeId,
    addr: String,
}

type Rpc<E> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl Peer {
    async fn call<Req, Resp, E>(
        &self,
        code: RequestCode,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, Rpc<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: Error + DeserializeOwned,
    {
        let body =
            serde_json::to_vec(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let command = RemotingCommand::request(code).with_body(body);
        let response = self
            .client
            .invoke(&self.addr, command, timeout)
            .await
            .map_err(|e| match e {
                ClientError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&e)),
                _ => RPCError::Network(NetworkError::new(&e)),
            })?;
        if response.response_code() != ResponseCode::SUCCESS {
            let e = std::io::Error::other(format!(
                "controller {} answered {}: {}",
                self.addr,
                response.response_code(),
                response.remark.as_deref().unwrap_or("")
            ));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let result: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&response.body)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, Rpc<openraft::error::Infallible>> {
        self.call(RAFT_APPEND_ENTRIES, &request, option.hard_ttl())
            .await
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, Rpc<InstallSnapshotError>> {
        self.call(RAFT_INSTALL_SNAPSHOT, &request, option.hard_ttl())
            .await
    }

    async fn vote(
        &mut self,
        request: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, Rpc<openraft::error::Infallible>> {
        self.call(RAFT_VOTE, &request, option.hard_ttl()).await
    }
}

/// Whether `code` is one of the Raft message codes.
#[must_use]
pub fn is_raft_code(code: RequestCode) -> bool {
    [RAFT_VOTE, RAFT_APPEND_ENTRIES, RAFT_INSTALL_SNAPSHOT].contains(&code)
}

/// Hands a Raft message to the local node and returns the response to send.
pub async fn serve_raft(raft: &Raft, request: &RemotingCommand) -> RemotingCommand {
    let code = request.request_code();
    let body = match code {
        RAFT_VOTE => answer(&request.body, |r| raft.vote(r)).await,
        RAFT_APPEND_ENTRIES => answer(&request.body, |r| raft.append_entries(r)).await,
        RAFT_INSTALL_SNAPSHOT => answer(&request.body, |r| raft.install_snapshot(r)).await,
        _ => Err(format!("request code {code} is not a Raft message")),
    };
    match body {
        Ok(body) => request
            .response_to(ResponseCode::SUCCESS, None)
            .with_body(body),
        Err(remark) => request.response_to(ResponseCode::CONTROLLER_INVALID_REQUEST, Some(remark)),
    }
}

async fn answer<Req, Resp, F>(body: &[u8], handle: impl FnOnce(Req) -> F) -> Result<Vec<u8>, String>
where
    Req: DeserializeOwned,
    Resp: Serialize,
    F: std::future::Future<Output = Resp>,
{
    let request: Req =
        serde_json::from_slice(body).map_err(|e| format!("malformed Raft message: {e}"))?;
    let response = handle(request).await;
    serde_json::to_vec(&response).map_err(|e| format!("cannot encode the Raft answer: {e}"))
}
