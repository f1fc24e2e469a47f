//! `REGISTER_BROKER` (103) and `UNREGISTER_BROKER` (104).

use std::time::Instant;

use remoting_protocol::{
    body::{from_json, to_json, RegisterBrokerBody},
    header::{
        RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
    },
    RemotingCommand, ResponseCode,
};

use super::bad_header;
use crate::{
    kv_config::{KvConfig, NAMESPACE_ORDER_TOPIC_CONFIG},
    registry::RouteRegistry,
};

/// Registers or renews the broker; answers with its master's addresses and
/// the order-topic configuration (KV namespace `ORDER_TOPIC_CONFIG`, an
/// empty table when it was never set).
pub(super) fn register(
    registry: &RouteRegistry,
    kv_config: &KvConfig,
    req: &RemotingCommand,
    now: Instant,
    conn: Option<u64>,
) -> RemotingCommand {
    let header: RegisterBrokerRequestHeader = match req.decode_header() {
        Ok(header) => header,
        Err(err) => return bad_header(req, "REGISTER_BROKER", &err),
    };
    if let Some(expected) = header.body_crc32.filter(|&crc| crc != 0) {
        let actual = masked_crc32(&req.body);
        if actual != expected {
            tracing::warn!(
                broker_addr = %header.broker_addr,
                expected,
                actual,
                "register broker body crc32 mismatch"
            );
            return req.response_to(ResponseCode::SYSTEM_ERROR, Some("crc32 not match".into()));
        }
    }
    if header.compressed == Some(true) {
        // Java brokers never compress registrations (`compressedRegister`
        // defaults to false and the header always says false).
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("compressed RegisterBrokerBody is not supported".into()),
        );
    }
    // An empty body is Java's null body: a broker without topics.
    let body = if req.body.is_empty() {
        RegisterBrokerBody::default()
    } else {
        match from_json::<RegisterBrokerBody>(&req.body) {
            Ok(body) => body,
            Err(err) => {
                return req.response_to(
                    ResponseCode::SYSTEM_ERROR,
                    Some(format!("failed to decode RegisterBrokerBody: {err}")),
                )
            }
        }
    };
    let result = registry.register_broker(&header, &body, now, conn);
    let response_header = RegisterBrokerResponseHeader {
        ha_server_addr: result.ha_server_addr,
        master_addr: result.master_addr,
    };
    // RocketMQ sends no body when the namespace was never set; an empty
    // table reads the same on the broker.
    let order_topics = kv_config
        .namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        .unwrap_or_default();
    req.response_to(ResponseCode::SUCCESS, None)
        .with_header(&response_header)
        .with_body(to_json(&order_topics))
}

/// Removes the broker address.
pub(super) fn unregister(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<UnregisterBrokerRequestHeader>() {
        Ok(header) => {
            registry.unregister_broker(&header);
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(err) => bad_header(req, "UNREGISTER_BROKER", &err),
    }
}

/// RocketMQ's body checksum: CRC32 with the sign bit cleared.
pub(crate) fn masked_crc32(bytes: &[u8]) -> i32 {
    // The mask keeps the value within i32's positive range.
    i32::try_from(crc32fast::hash(bytes) & 0x7FFF_FFFF).unwrap_or(i32::MAX)
}
