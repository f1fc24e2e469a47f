//! `PUT_KV_CONFIG` (100), `GET_KV_CONFIG` (101), `DELETE_KV_CONFIG` (102)
//! and `GET_KVLIST_BY_NAMESPACE` (219).

use remoting_protocol::{
    body::to_fastjson,
    header::{
        DeleteKvConfigRequestHeader, GetKvConfigRequestHeader, GetKvConfigResponseHeader,
        GetKvListByNamespaceRequestHeader, PutKvConfigRequestHeader,
    },
    RemotingCommand, ResponseCode,
};

use super::bad_header;
use crate::kv_config::{KvConfig, KvConfigError};

/// Sets the item.
pub(super) fn put(kv: &KvConfig, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<PutKvConfigRequestHeader>() {
        Ok(header) => match kv.put(&header.namespace, &header.key, &header.value) {
            Ok(_) => req.response_to(ResponseCode::SUCCESS, None),
            Err(e) => not_saved(req, &e),
        },
        Err(err) => bad_header(req, "PUT_KV_CONFIG", &err),
    }
}

/// `SYSTEM_ERROR` naming the file that could not be written.
fn not_saved(req: &RemotingCommand, err: &KvConfigError) -> RemotingCommand {
    tracing::error!(error = %err, "kv config change refused");
    req.response_to(ResponseCode::SYSTEM_ERROR, Some(err.to_string()))
}

/// Answers with the item's value in the response header, or
/// `QUERY_NOT_FOUND` with RocketMQ's remark.
pub(super) fn get(kv: &KvConfig, req: &RemotingCommand) -> RemotingCommand {
    let header: GetKvConfigRequestHeader = match req.decode_header() {
        Ok(header) => header,
        Err(err) => return bad_header(req, "GET_KV_CONFIG", &err),
    };
    match kv.get(&header.namespace, &header.key) {
        Some(value) => req
            .response_to(ResponseCode::SUCCESS, None)
            .with_header(&GetKvConfigResponseHeader { value: Some(value) }),
        None => req.response_to(
            ResponseCode::QUERY_NOT_FOUND,
            Some(format!(
                "No config item, Namespace: {} Key: {}",
                header.namespace, header.key
            )),
        ),
    }
}

/// Removes the item; answers success whether or not it existed.
pub(super) fn delete(kv: &KvConfig, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<DeleteKvConfigRequestHeader>() {
        Ok(header) => match kv.delete(&header.namespace, &header.key) {
            Ok(_) => req.response_to(ResponseCode::SUCCESS, None),
            Err(e) => not_saved(req, &e),
        },
        Err(err) => bad_header(req, "DELETE_KV_CONFIG", &err),
    }
}

/// Answers with the namespace's items as a `KVTable`, or `QUERY_NOT_FOUND`
/// with RocketMQ's remark when the namespace was never set.
pub(super) fn namespace(kv: &KvConfig, req: &RemotingCommand) -> RemotingCommand {
    let header: GetKvListByNamespaceRequestHeader = match req.decode_header() {
        Ok(header) => header,
        Err(err) => return bad_header(req, "GET_KVLIST_BY_NAMESPACE", &err),
    };
    match kv.namespace(&header.namespace) {
        Some(table) => req
            .response_to(ResponseCode::SUCCESS, None)
            .with_body(to_fastjson(&table)),
        None => req.response_to(
            ResponseCode::QUERY_NOT_FOUND,
            Some(format!("No config item, Namespace: {}", header.namespace)),
        ),
    }
}
