//! `LOCK_BATCH_MQ` and `UNLOCK_BATCH_MQ`: orderly consumers' queue locks
//! (see [`crate::rebalance_lock`]).

use std::time::Instant;

use remoting_protocol::{
    body::{self, LockBatchRequestBody, LockBatchResponseBody},
    RemotingCommand, ResponseCode,
};

use crate::{processor::Refusal, state::BrokerState};

fn request_body(req: &RemotingCommand) -> Result<LockBatchRequestBody, Refusal> {
    body::from_json(&req.body).map_err(|e| {
        Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!("bad lock batch body: {e}"),
        )
    })
}

/// Locks what it can for the client and answers with those queues.
pub(crate) fn lock_batch(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let body = match request_body(req) {
        Ok(b) => b,
        Err(refused) => return refused.answer(req),
    };
    let granted = state.locks.try_lock_batch(
        &body.consumer_group,
        &body.client_id,
        &body.mq_set,
        Instant::now(),
    );
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(body::to_json(&LockBatchResponseBody {
            lock_ok_mq_set: granted,
        }))
}

/// Releases the client's locks of the queues.
pub(crate) fn unlock_batch(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let body = match request_body(req) {
        Ok(b) => b,
        Err(refused) => return refused.answer(req),
    };
    state
        .locks
        .unlock_batch(&body.consumer_group, &body.client_id, &body.mq_set);
    req.response_to(ResponseCode::SUCCESS, None)
}
