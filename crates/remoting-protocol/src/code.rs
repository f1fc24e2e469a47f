//! Request, response and language codes, and the header serialization type.
//!
//! Codes are open sets: a peer may send a code this crate has no name for, so
//! each code type is a newtype over the wire value with named constants, and
//! an unknown value is kept as it is rather than refused.

use std::fmt;

macro_rules! open_code {
    (
        $(#[$meta:meta])*
        $ty:ident { $( $name:ident = $value:literal, )* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $ty(pub i32);

        impl $ty {
            $(
                #[doc = concat!("`", stringify!($name), "` (", stringify!($value), ").")]
                pub const $name: $ty = $ty($value);
            )*

            /// RocketMQ's name for this code, if it has one.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $value => Some(stringify!($name)), )*
                    _ => None,
                }
            }

            /// Every named code, in declaration order.
            pub const ALL: &'static [$ty] = &[$( $ty($value), )*];
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => write!(f, "{}({})", name, self.0),
                    None => write!(f, "{}({})", stringify!($ty), self.0),
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }

        impl From<i32> for $ty {
            fn from(v: i32) -> Self {
                $ty(v)
            }
        }

        impl From<$ty> for i32 {
            fn from(c: $ty) -> i32 {
                c.0
            }
        }
    };
}

open_code! {
    /// A request code: which operation a request asks for.
    RequestCode {
        SEND_MESSAGE = 10,
        PULL_MESSAGE = 11,
        QUERY_MESSAGE = 12,
        QUERY_BROKER_OFFSET = 13,
        QUERY_CONSUMER_OFFSET = 14,
        UPDATE_CONSUMER_OFFSET = 15,
        UPDATE_AND_CREATE_TOPIC = 17,
        UPDATE_AND_CREATE_TOPIC_LIST = 18,
        GET_ALL_TOPIC_CONFIG = 21,
        GET_TOPIC_CONFIG_LIST = 22,
        GET_TOPIC_NAME_LIST = 23,
        UPDATE_BROKER_CONFIG = 25,
        GET_BROKER_CONFIG = 26,
        TRIGGER_DELETE_FILES = 27,
        GET_BROKER_RUNTIME_INFO = 28,
        SEARCH_OFFSET_BY_TIMESTAMP = 29,
        GET_MAX_OFFSET = 30,
        GET_MIN_OFFSET = 31,
        GET_EARLIEST_MSG_STORETIME = 32,
        VIEW_MESSAGE_BY_ID = 33,
        HEART_BEAT = 34,
        UNREGISTER_CLIENT = 35,
        CONSUMER_SEND_MSG_BACK = 36,
        END_TRANSACTION = 37,
        GET_CONSUMER_LIST_BY_GROUP = 38,
        CHECK_TRANSACTION_STATE = 39,
        NOTIFY_CONSUMER_IDS_CHANGED = 40,
        LOCK_BATCH_MQ = 41,
        UNLOCK_BATCH_MQ = 42,
        GET_ALL_CONSUMER_OFFSET = 43,
        GET_ALL_DELAY_OFFSET = 45,
        CHECK_CLIENT_CONFIG = 46,
        GET_CLIENT_CONFIG = 47,
        GET_TIMER_CHECK_POINT = 60,
        PUT_KV_CONFIG = 100,
        GET_KV_CONFIG = 101,
        DELETE_KV_CONFIG = 102,
        REGISTER_BROKER = 103,
        UNREGISTER_BROKER = 104,
        GET_ROUTEINFO_BY_TOPIC = 105,
        GET_BROKER_CLUSTER_INFO = 106,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
        GET_TOPIC_STATS_INFO = 202,
        GET_CONSUMER_CONNECTION_LIST = 203,
        GET_PRODUCER_CONNECTION_LIST = 204,
        WIPE_WRITE_PERM_OF_BROKER = 205,
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
        DELETE_SUBSCRIPTIONGROUP = 207,
        GET_CONSUME_STATS = 208,
        DELETE_TOPIC_IN_BROKER = 215,
        DELETE_TOPIC_IN_NAMESRV = 216,
        REGISTER_TOPIC_IN_NAMESRV = 217,
        GET_KVLIST_BY_NAMESPACE = 219,
        INVOKE_BROKER_TO_RESET_OFFSET = 222,
        GET_TOPICS_BY_CLUSTER = 224,
        QUERY_TOPIC_CONSUME_BY_WHO = 300,
        GET_CONSUMER_RUNNING_INFO = 307,
        CONSUME_MESSAGE_DIRECTLY = 309,
        SEND_MESSAGE_V2 = 310,
        VIEW_BROKER_STATS_DATA = 315,
        UPDATE_NAMESRV_CONFIG = 318,
        GET_NAMESRV_CONFIG = 319,
        SEND_BATCH_MESSAGE = 320,
        QUERY_CONSUME_QUEUE = 321,
        QUERY_DATA_VERSION = 322,
        SEND_REPLY_MESSAGE = 324,
        SEND_REPLY_MESSAGE_V2 = 325,
        ADD_WRITE_PERM_OF_BROKER = 327,
        GET_ALL_PRODUCER_INFO = 328,
        DELETE_EXPIRED_COMMITLOG = 329,
        GET_TOPIC_CONFIG = 351,
        LITE_PULL_MESSAGE = 361,
        RECALL_MESSAGE = 370,
        QUERY_ASSIGNMENT = 400,
        SET_MESSAGE_REQUEST_MODE = 401,
        BROKER_HEARTBEAT = 904,
        CONTROLLER_ALTER_SYNC_STATE_SET = 1001,
        CONTROLLER_ELECT_MASTER = 1002,
        CONTROLLER_REGISTER_BROKER = 1003,
        CONTROLLER_GET_REPLICA_INFO = 1004,
        CONTROLLER_GET_METADATA_INFO = 1005,
        CONTROLLER_GET_SYNC_STATE_DATA = 1006,
        GET_BROKER_EPOCH_CACHE = 1007,
        NOTIFY_BROKER_ROLE_CHANGED = 1008,
        UPDATE_CONTROLLER_CONFIG = 1009,
        GET_CONTROLLER_CONFIG = 1010,
        CLEAN_BROKER_DATA = 1011,
        CONTROLLER_GET_NEXT_BROKER_ID = 1012,
        CONTROLLER_APPLY_BROKER_ID = 1013,
        BROKER_CLOSE_CHANNEL_REQUEST = 1014,
        CHECK_NOT_ACTIVE_BROKER_REQUEST = 1015,
        GET_BROKER_LIVE_INFO_REQUEST = 1016,
        GET_SYNC_STATE_DATA_REQUEST = 1017,
        RAFT_BROKER_HEART_BEAT_EVENT_REQUEST = 1018,
        UPDATE_COLD_DATA_FLOW_CTR_CONFIG = 2001,
        REMOVE_COLD_DATA_FLOW_CTR_CONFIG = 2002,
        GET_COLD_DATA_FLOW_CTR_INFO = 2003,
        SET_COMMITLOG_READ_MODE = 2004,
        AUTH_CREATE_USER = 3001,
        AUTH_UPDATE_USER = 3002,
        AUTH_DELETE_USER = 3003,
        AUTH_GET_USER = 3004,
        AUTH_LIST_USER = 3005,
        AUTH_CREATE_ACL = 3006,
        AUTH_UPDATE_ACL = 3007,
        AUTH_DELETE_ACL = 3008,
        AUTH_GET_ACL = 3009,
        AUTH_LIST_ACL = 3010,
        POP_MESSAGE = 200050,
        ACK_MESSAGE = 200051,
        PEEK_MESSAGE = 200052,
        CHANGE_MESSAGE_INVISIBLETIME = 200053,
        NOTIFICATION = 200054,
        POLLING_INFO = 200055,
        POP_ROLLBACK = 200056,
        BATCH_ACK_MESSAGE = 200151,
    }
}

open_code! {
    /// A response code: how a request ended.
    ResponseCode {
        SUCCESS = 0,
        SYSTEM_ERROR = 1,
        SYSTEM_BUSY = 2,
        REQUEST_CODE_NOT_SUPPORTED = 3,
        TRANSACTION_FAILED = 4,
        FLUSH_DISK_TIMEOUT = 10,
        SLAVE_NOT_AVAILABLE = 11,
        FLUSH_SLAVE_TIMEOUT = 12,
        MESSAGE_ILLEGAL = 13,
        SERVICE_NOT_AVAILABLE = 14,
        VERSION_NOT_SUPPORTED = 15,
        NO_PERMISSION = 16,
        TOPIC_NOT_EXIST = 17,
        TOPIC_EXIST_ALREADY = 18,
        PULL_NOT_FOUND = 19,
        PULL_RETRY_IMMEDIATELY = 20,
        PULL_OFFSET_MOVED = 21,
        QUERY_NOT_FOUND = 22,
        SUBSCRIPTION_PARSE_FAILED = 23,
        SUBSCRIPTION_NOT_EXIST = 24,
        SUBSCRIPTION_NOT_LATEST = 25,
        SUBSCRIPTION_GROUP_NOT_EXIST = 26,
        FILTER_DATA_NOT_EXIST = 27,
        FILTER_DATA_NOT_LATEST = 28,
        INVALID_PARAMETER = 29,
        TRANSACTION_SHOULD_COMMIT = 200,
        TRANSACTION_SHOULD_ROLLBACK = 201,
        TRANSACTION_STATE_UNKNOW = 202,
        TRANSACTION_STATE_GROUP_WRONG = 203,
        NO_BUYER_ID = 204,
        NOT_IN_CURRENT_UNIT = 205,
        CONSUMER_NOT_ONLINE = 206,
        CONSUME_MSG_TIMEOUT = 207,
        NO_MESSAGE = 208,
        POLLING_FULL = 209,
        POLLING_TIMEOUT = 210,
        BROKER_NOT_EXIST = 211,
        BROKER_DISPATCH_NOT_COMPLETE = 212,
        BROADCAST_CONSUMPTION = 213,
        FLOW_CONTROL = 215,
        NOT_LEADER_FOR_QUEUE = 501,
        ILLEGAL_OPERATION = 604,
        GO_AWAY = 1500,
        CONTROLLER_FENCED_MASTER_EPOCH = 2000,
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001,
        CONTROLLER_INVALID_MASTER = 2002,
        CONTROLLER_INVALID_REPLICAS = 2003,
        CONTROLLER_MASTER_NOT_AVAILABLE = 2004,
        CONTROLLER_INVALID_REQUEST = 2005,
        CONTROLLER_BROKER_NOT_ALIVE = 2006,
        CONTROLLER_NOT_LEADER = 2007,
        CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008,
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009,
        CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010,
        CONTROLLER_MASTER_STILL_EXIST = 2011,
        CONTROLLER_ELECT_MASTER_FAILED = 2012,
        CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013,
        CONTROLLER_BROKER_ID_INVALID = 2014,
        CONTROLLER_JRAFT_INTERNAL_ERROR = 2015,
        CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016,
        USER_NOT_EXIST = 3001,
        POLICY_NOT_EXIST = 3002,
        RPC_UNKNOWN = -1000,
        RPC_ADDR_IS_NULL = -1002,
        RPC_SEND_TO_CHANNEL_FAILED = -1004,
        RPC_TIME_OUT = -1006,
    }
}

/// The implementation language a peer declares in its commands.
///
/// JSON headers carry the name, binary headers the byte. A byte or name this
/// crate does not know is kept as [`LanguageCode::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LanguageCode {
    /// Java (0).
    Java,
    /// C++ (1).
    Cpp,
    /// .NET (2).
    Dotnet,
    /// Python (3).
    Python,
    /// Delphi (4).
    Delphi,
    /// Erlang (5).
    Erlang,
    /// Ruby (6).
    Ruby,
    /// Any other language (7).
    Other,
    /// HTTP (8).
    Http,
    /// Go (9).
    Go,
    /// PHP (10).
    Php,
    /// OMS (11).
    Oms,
    /// Rust (12); what Sluice itself declares.
    #[default]
    Rust,
    /// Node.js (13).
    NodeJs,
    /// A byte with no known name.
    Unknown(u8),
}

const LANGUAGES: [(LanguageCode, &str); 14] = [
    (LanguageCode::Java, "JAVA"),
    (LanguageCode::Cpp, "CPP"),
    (LanguageCode::Dotnet, "DOTNET"),
    (LanguageCode::Python, "PYTHON"),
    (LanguageCode::Delphi, "DELPHI"),
    (LanguageCode::Erlang, "ERLANG"),
    (LanguageCode::Ruby, "RUBY"),
    (LanguageCode::Other, "OTHER"),
    (LanguageCode::Http, "HTTP"),
    (LanguageCode::Go, "GO"),
    (LanguageCode::Php, "PHP"),
    (LanguageCode::Oms, "OMS"),
    (LanguageCode::Rust, "RUST"),
    (LanguageCode::NodeJs, "NODE_JS"),
];

impl LanguageCode {
    /// The byte used in binary headers.
    pub fn code(self) -> u8 {
        match self {
            LanguageCode::Unknown(b) => b,
            known => LANGUAGES
                .iter()
                .position(|(l, _)| *l == known)
                .map_or(7, |p| p as u8),
        }
    }

    /// The language for a binary-header byte.
    pub fn from_code(code: u8) -> Self {
        LANGUAGES
            .get(usize::from(code))
            .map_or(LanguageCode::Unknown(code), |(l, _)| *l)
    }

    /// The name used in JSON headers; an unknown language is named `OTHER`.
    pub fn name(self) -> &'static str {
        match self {
            LanguageCode::Unknown(_) => "OTHER",
            known => LANGUAGES
                .iter()
                .find(|(l, _)| *l == known)
                .map_or("OTHER", |(_, n)| n),
        }
    }

    /// The language for a JSON-header name, if the name is known.
    pub fn from_name(name: &str) -> Option<Self> {
        LANGUAGES.iter().find(|(_, n)| *n == name).map(|(l, _)| *l)
    }
}

/// How a frame's header is serialized: the high byte of the header-length word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// RocketMQ's JSON header (0), the default of every RocketMQ component.
    #[default]
    Json,
    /// RocketMQ's compact binary header (1).
    RocketMq,
}

impl SerializeType {
    /// The byte stored in the high byte of the header-length word.
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The type for a header-length high byte, if known.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// The name RocketMQ uses (`JSON` or `ROCKETMQ`).
    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_codes_are_kept_and_printed_with_their_value() {
        let code = RequestCode(4242);
        assert_eq!(code.name(), None);
        assert_eq!(format!("{code}"), "RequestCode(4242)");
        assert_eq!(format!("{}", ResponseCode::SYSTEM_BUSY), "SYSTEM_BUSY(2)");
    }

    #[test]
    fn named_codes_have_the_spec_values() {
        assert_eq!(RequestCode::SEND_MESSAGE_V2.0, 310);
        assert_eq!(RequestCode::POP_MESSAGE.0, 200_050);
        assert_eq!(ResponseCode::RPC_TIME_OUT.0, -1006);
        assert_eq!(ResponseCode::GO_AWAY.name(), Some("GO_AWAY"));
    }

    #[test]
    fn code_tables_have_no_duplicate_values() {
        for table in [
            RequestCode::ALL.iter().map(|c| c.0).collect::<Vec<_>>(),
            ResponseCode::ALL.iter().map(|c| c.0).collect::<Vec<_>>(),
        ] {
            let mut sorted = table.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), table.len());
        }
    }

    #[test]
    fn language_bytes_and_names_round_trip() {
        for code in 0..=255u8 {
            let lang = LanguageCode::from_code(code);
            assert_eq!(lang.code(), code);
            if code < 14 {
                assert_eq!(LanguageCode::from_name(lang.name()), Some(lang));
            } else {
                assert_eq!(lang, LanguageCode::Unknown(code));
            }
        }
        assert_eq!(LanguageCode::Java.code(), 0);
        assert_eq!(LanguageCode::Rust.code(), 12);
        assert_eq!(LanguageCode::NodeJs.name(), "NODE_JS");
    }
}
