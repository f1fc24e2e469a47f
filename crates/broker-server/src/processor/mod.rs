//! The request table and the processors it names, one file per group of
//! request codes.
//!
//! [`TABLE`] says, for every request code the broker serves, which family's
//! queue and workers serve it, which function answers it, and whether it is
//! an admin code. A code without an entry is answered
//! `REQUEST_CODE_NOT_SUPPORTED` when it arrives, without being queued.
//! Adding a code is one entry here plus its handler.

mod admin;
mod auth_admin;
mod client_manage;

pub(crate) use client_manage::notify_ids_changed;
mod consumer_offset;
pub(crate) mod end_transaction;
mod groups;
mod orderly;
mod pull_message;
mod query_message;
mod send_back;
mod send_message;
mod topic_admin;

use std::sync::LazyLock;

use remoting_protocol::{HeaderError, RemotingCommand, RequestCode, ResponseCode};

use crate::{
    request::{Family, Job},
    state::BrokerState,
};

/// How the broker serves one request code.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// The request code.
    pub code: RequestCode,
    /// The family whose queue and workers serve it.
    pub family: Family,
    /// The function that answers it.
    pub serve: Serve,
    /// An operator's request: it changes or reveals the broker's
    /// configuration and state rather than carrying a client's traffic.
    /// Admin codes are always served by [`Family::Admin`].
    pub admin: bool,
}

/// A processor function.
#[derive(Debug, Clone, Copy)]
pub enum Serve {
    /// Answers at once from the request alone.
    Now(fn(&BrokerState, &RemotingCommand) -> RemotingCommand),
    /// Needs the job's reply target: answers now (`Some`), or later itself
    /// (`None`: a parked pull, a send waiting for its flush).
    Job(fn(&BrokerState, &Job) -> Option<RemotingCommand>),
}

const fn now(
    code: RequestCode,
    family: Family,
    serve: fn(&BrokerState, &RemotingCommand) -> RemotingCommand,
) -> Route {
    Route {
        code,
        family,
        serve: Serve::Now(serve),
        admin: false,
    }
}

const fn job(
    code: RequestCode,
    family: Family,
    serve: fn(&BrokerState, &Job) -> Option<RemotingCommand>,
) -> Route {
    Route {
        code,
        family,
        serve: Serve::Job(serve),
        admin: false,
    }
}

const fn admin(
    code: RequestCode,
    serve: fn(&BrokerState, &RemotingCommand) -> RemotingCommand,
) -> Route {
    Route {
        code,
        family: Family::Admin,
        serve: Serve::Now(serve),
        admin: true,
    }
}

/// Every request code the broker serves.
pub static TABLE: &[Route] = {
    use Family::{ConsumerManage, Heartbeat, Pull, Send};
    use RequestCode as C;
    &[
        job(C::SEND_MESSAGE, Send, send_message::send),
        job(C::SEND_MESSAGE_V2, Send, send_message::send),
        job(C::SEND_BATCH_MESSAGE, Send, send_message::send),
        job(C::CONSUMER_SEND_MSG_BACK, Send, send_back::send_back),
        now(
            C::END_TRANSACTION,
            Family::Transaction,
            end_transaction::end,
        ),
        job(C::PULL_MESSAGE, Pull, pull_message::pull),
        job(C::LITE_PULL_MESSAGE, Pull, pull_message::pull),
        now(
            C::QUERY_CONSUMER_OFFSET,
            ConsumerManage,
            consumer_offset::query,
        ),
        now(
            C::UPDATE_CONSUMER_OFFSET,
            ConsumerManage,
            consumer_offset::update,
        ),
        now(
            C::GET_CONSUMER_LIST_BY_GROUP,
            ConsumerManage,
            client_manage::consumer_list,
        ),
        job(C::HEART_BEAT, Heartbeat, client_manage::heartbeat),
        now(C::UNREGISTER_CLIENT, Heartbeat, client_manage::unregister),
        now(
            C::CHECK_CLIENT_CONFIG,
            Heartbeat,
            client_manage::check_client_config,
        ),
        now(
            C::GET_MAX_OFFSET,
            Family::Admin,
            consumer_offset::max_offset,
        ),
        now(
            C::GET_MIN_OFFSET,
            Family::Admin,
            consumer_offset::min_offset,
        ),
        now(
            C::SEARCH_OFFSET_BY_TIMESTAMP,
            Family::Admin,
            consumer_offset::search_by_time,
        ),
        now(
            C::GET_EARLIEST_MSG_STORETIME,
            Family::Admin,
            topic_admin::earliest_store_time,
        ),
        now(C::VIEW_MESSAGE_BY_ID, Family::Admin, admin::view_message),
        now(C::QUERY_MESSAGE, Family::Admin, query_message::query),
        now(C::LOCK_BATCH_MQ, Family::Admin, orderly::lock_batch),
        now(C::UNLOCK_BATCH_MQ, Family::Admin, orderly::unlock_batch),
        admin(C::UPDATE_AND_CREATE_TOPIC, admin::create_topic),
        admin(C::GET_BROKER_CONFIG, admin::get_config),
        now(
            C::NOTIFY_BROKER_ROLE_CHANGED,
            Family::Admin,
            admin::role_changed,
        ),
        admin(C::UPDATE_BROKER_CONFIG, admin::update_config),
        admin(C::GET_BROKER_RUNTIME_INFO, admin::runtime_info),
        admin(C::VIEW_BROKER_STATS_DATA, admin::view_stats),
        admin(
            C::DELETE_EXPIRED_COMMITLOG,
            admin::delete_expired_commit_log,
        ),
        admin(
            C::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            groups::update_and_create,
        ),
        admin(C::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, groups::get_all),
        admin(C::DELETE_SUBSCRIPTIONGROUP, groups::delete),
        admin(C::GET_ALL_DELAY_OFFSET, groups::delay_offsets),
        admin(C::GET_TIMER_CHECK_POINT, groups::timer_checkpoint),
        admin(C::GET_ALL_TOPIC_CONFIG, topic_admin::all_topic_config),
        admin(C::GET_TOPIC_CONFIG, topic_admin::topic_config),
        admin(C::GET_TOPIC_STATS_INFO, topic_admin::topic_stats),
        admin(C::GET_CONSUME_STATS, topic_admin::consume_stats),
        admin(C::QUERY_TOPIC_CONSUME_BY_WHO, topic_admin::consumed_by_who),
        admin(
            C::GET_CONSUMER_CONNECTION_LIST,
            topic_admin::consumer_connections,
        ),
        admin(
            C::GET_PRODUCER_CONNECTION_LIST,
            topic_admin::producer_connections,
        ),
        admin(
            C::GET_ALL_CONSUMER_OFFSET,
            topic_admin::all_consumer_offsets,
        ),
        admin(C::DELETE_TOPIC_IN_BROKER, topic_admin::delete_topic),
        admin(C::GET_ALL_PRODUCER_INFO, topic_admin::all_producer_info),
        admin(C::INVOKE_BROKER_TO_RESET_OFFSET, topic_admin::reset_offset),
        admin(C::AUTH_CREATE_USER, auth_admin::create_user),
        admin(C::AUTH_UPDATE_USER, auth_admin::update_user),
        admin(C::AUTH_DELETE_USER, auth_admin::delete_user),
        admin(C::AUTH_GET_USER, auth_admin::get_user),
        admin(C::AUTH_LIST_USER, auth_admin::list_user),
        admin(C::AUTH_CREATE_ACL, auth_admin::put_acl),
        admin(C::AUTH_UPDATE_ACL, auth_admin::put_acl),
        admin(C::AUTH_DELETE_ACL, auth_admin::delete_acl),
        admin(C::AUTH_GET_ACL, auth_admin::get_acl),
        admin(C::AUTH_LIST_ACL, auth_admin::list_acl),
    ]
};

/// The route of a request code; `None` for a code the broker does not serve.
pub fn route(code: RequestCode) -> Option<&'static Route> {
    // Indexed by the code itself: request codes are small non-negative
    // numbers, so a lookup is a bounds check and a load (it runs twice per
    // request, at admission and at the worker).
    static INDEX: LazyLock<Vec<Option<&'static Route>>> = LazyLock::new(|| {
        let len = TABLE
            .iter()
            .filter_map(|r| usize::try_from(r.code.0).ok())
            .max()
            .map_or(0, |max| max + 1);
        let mut index = vec![None; len];
        for r in TABLE {
            if let Some(slot) = usize::try_from(r.code.0)
                .ok()
                .and_then(|i| index.get_mut(i))
            {
                *slot = Some(r);
            }
        }
        index
    });
    let slot = usize::try_from(code.0).ok()?;
    INDEX.get(slot).copied().flatten()
}

impl Route {
    /// Serves one request of this route's code: the response to send now,
    /// or `None` when there is none (a oneway request) or it goes later.
    pub fn run(&self, state: &BrokerState, job: &Job) -> Option<RemotingCommand> {
        let response = match self.serve {
            Serve::Now(serve) => serve(state, &job.request),
            Serve::Job(serve) => serve(state, job)?,
        };
        (!job.request.is_oneway()).then_some(response)
    }
}

/// The answer to a request whose code the broker does not serve.
pub fn not_supported(req: &RemotingCommand) -> RemotingCommand {
    req.response_to(
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
        Some(format!(" request type {} not supported", req.code)),
    )
}

/// Why a request is refused: the code and remark of its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub code: ResponseCode,
    pub remark: String,
}

impl Refusal {
    pub(crate) fn new(code: ResponseCode, remark: impl Into<String>) -> Self {
        Self {
            code,
            remark: remark.into(),
        }
    }

    /// The answer to `req`.
    pub(crate) fn answer(self, req: &RemotingCommand) -> RemotingCommand {
        req.response_to(self.code, Some(self.remark))
    }
}

/// Makes sure a system topic of one queue exists and may be written.
pub(crate) fn ensure_system_topic(state: &BrokerState, topic: &str) -> Result<(), Refusal> {
    send_message::ensure_topic(state, topic, 1)
}

/// The response to a request whose header could not be read.
pub(crate) fn bad_header(req: &RemotingCommand, e: &HeaderError) -> RemotingCommand {
    req.response_to(
        ResponseCode::SYSTEM_ERROR,
        Some(format!("bad {} request header: {e}", code_name(req))),
    )
}

fn code_name(req: &RemotingCommand) -> String {
    req.request_code()
        .name()
        .map_or_else(|| req.code.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_has_one_route() {
        let mut seen = HashSet::new();
        for r in TABLE {
            assert!(seen.insert(r.code), "{:?} is in the table twice", r.code);
            assert_eq!(route(r.code).map(|found| found.code), Some(r.code));
        }
        for unknown in [-7, 0, 9999, i32::MAX] {
            assert!(route(RequestCode(unknown)).is_none(), "{unknown}");
        }
    }

    #[test]
    fn admin_codes_are_served_by_the_admin_family() {
        let admin: Vec<RequestCode> = TABLE.iter().filter(|r| r.admin).map(|r| r.code).collect();
        assert!(admin.contains(&RequestCode::UPDATE_BROKER_CONFIG));
        assert!(!admin.contains(&RequestCode::SEND_MESSAGE_V2));
        for r in TABLE.iter().filter(|r| r.admin) {
            assert_eq!(r.family, Family::Admin, "{:?}", r.code);
        }
    }

    #[test]
    fn codes_without_a_processor_have_no_route() {
        // A broker-to-client code, and POP over remoting (the gRPC
        // endpoint's receives queue their own work): refused on arrival.
        for code in [
            RequestCode::CHECK_TRANSACTION_STATE,
            RequestCode::POP_MESSAGE,
        ] {
            assert!(route(code).is_none(), "{code:?}");
        }
        // Transaction ends have a queue of their own, as in RocketMQ: a
        // send flood does not shed them.
        let end = route(RequestCode::END_TRANSACTION).unwrap();
        assert_eq!(end.family, Family::Transaction);
    }

    #[test]
    fn unsupported_codes_are_answered_with_rocketmq_remark() {
        let req = RemotingCommand::request(RequestCode(999));
        let resp = not_supported(&req);
        assert_eq!(
            resp.response_code(),
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED
        );
        assert_eq!(
            resp.remark.as_deref(),
            Some(" request type 999 not supported")
        );
        assert_eq!(resp.opaque, req.opaque);
    }
}
