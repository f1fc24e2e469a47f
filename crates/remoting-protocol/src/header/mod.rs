//! Typed command headers and their conversion to and from ext fields.
//!
//! Each header is a plain struct whose fields map one to one onto ext-field
//! keys (RocketMQ's Java field names). Required fields are plain types and
//! their absence is an error that names the key; optional fields are
//! `Option`s. Values travel as strings: integers in decimal, booleans as
//! `true`/`false`, enums by name.
//!
//! Reading follows Java's parsers, which is what RocketMQ's brokers apply:
//! integers as `Integer.parseInt`/`Long.parseLong` (an optional sign, then
//! decimal digits), booleans as `Boolean.parseBoolean` (a case-insensitive
//! `true` is true, anything else false, never an error) with one deliberate
//! difference: `1` is true too. The C++ client writes its booleans as
//! `0`/`1`; Java reads its `1` as false and so stores a C++ batch as one
//! message, Sluice reads it as the client meant it.

use thiserror::Error;

use compact_str::ToCompactString;

use crate::command::{ExtFields, ExtString};

mod admin;
mod client;
mod controller;
mod namesrv;
mod offset;
mod pull;
mod query;
mod send;
mod transaction;

pub use admin::DeleteTopicRequestHeader;
pub use admin::ResetOffsetRequestHeader;
pub use admin::{
    CreateTopicRequestHeader, GetBrokerConfigResponseHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader, GetProducerConnectionListRequestHeader,
    GetTopicConfigRequestHeader, GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader, TopicFilterType,
};
pub use client::{
    ConsumerSendMsgBackRequestHeader, DeleteSubscriptionGroupRequestHeader, HeartbeatRequestHeader,
    NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader,
};
pub use controller::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader, BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader, ElectMasterResponseHeader,
    GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
};
pub use namesrv::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
    DeleteKvConfigRequestHeader, DeleteTopicFromNamesrvRequestHeader, GetKvConfigRequestHeader,
    GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader, PutKvConfigRequestHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
pub use offset::{
    BoundaryType, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
pub use pull::{is_tag_type, PullMessageRequestHeader, PullMessageResponseHeader};
pub use query::{QueryMessageRequestHeader, QueryMessageResponseHeader, UNIQUE_KEY_QUERY};
pub use send::{SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
pub use transaction::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};

/// Why ext fields could not be read as a typed header.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// A required field was absent.
    #[error("required header field `{key}` is missing")]
    Missing {
        /// The ext-field key.
        key: &'static str,
    },
    /// A field's value did not parse as its type.
    #[error("header field `{key}` has value {value:?}, which is not a valid {expected}")]
    Invalid {
        /// The ext-field key.
        key: &'static str,
        /// The value received.
        value: String,
        /// What the field holds.
        expected: &'static str,
    },
    /// The command's code has no header of this kind.
    #[error("request code {code} does not carry a {header} header")]
    WrongCode {
        /// The request code.
        code: i32,
        /// The header that was asked for.
        header: &'static str,
    },
}

/// A typed header that converts to and from ext fields.
pub trait CommandHeader: Sized {
    /// Writes every present field into `ext`.
    fn write_ext_fields(&self, ext: &mut ExtFields);

    /// Reads the header from `ext`, ignoring keys it does not know.
    ///
    /// # Errors
    /// [`HeaderError`] naming the first missing or malformed field.
    fn from_ext_fields(ext: &ExtFields) -> Result<Self, HeaderError>;

    /// Returns the header as a fresh ext-field map.
    fn to_ext_fields(&self) -> ExtFields {
        let mut ext = ExtFields::default();
        self.write_ext_fields(&mut ext);
        ext
    }
}

/// A value that travels as one ext-field string.
pub trait ExtScalar: Sized {
    /// What the value is, for error messages.
    const EXPECTED: &'static str;
    /// Renders the value as Java's `toString()` would.
    fn to_ext(&self) -> ExtString;
    /// Parses the value, or returns `None` if the text is not one.
    fn parse_ext(text: &str) -> Option<Self>;
}

impl ExtScalar for String {
    const EXPECTED: &'static str = "string";
    fn to_ext(&self) -> ExtString {
        ExtString::from(self.as_str())
    }
    fn parse_ext(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}

macro_rules! int_scalar {
    ($($ty:ty => $what:literal),*) => {$(
        impl ExtScalar for $ty {
            const EXPECTED: &'static str = $what;
            fn to_ext(&self) -> ExtString {
                self.to_compact_string()
            }
            fn parse_ext(text: &str) -> Option<Self> {
                text.parse().ok()
            }
        }
    )*};
}
int_scalar!(i32 => "32-bit integer", i64 => "64-bit integer");

impl ExtScalar for bool {
    const EXPECTED: &'static str = "boolean";
    fn to_ext(&self) -> ExtString {
        ExtString::const_new(if *self { "true" } else { "false" })
    }
    fn parse_ext(text: &str) -> Option<Self> {
        Some(text.eq_ignore_ascii_case("true") || text == "1")
    }
}

/// A header field: required (a plain [`ExtScalar`]) or optional (`Option`).
pub trait ExtField: Sized {
    /// Writes the field under `key` if it is present.
    fn put(&self, key: &'static str, ext: &mut ExtFields);
    /// Reads the field from `key`.
    ///
    /// # Errors
    /// [`HeaderError`] when a required field is missing or a value is malformed.
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError>;
}

impl<T: ExtScalar> ExtField for T {
    fn put(&self, key: &'static str, ext: &mut ExtFields) {
        ext.insert(ExtString::const_new(key), self.to_ext());
    }
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        match ext.get(key) {
            Some(text) => parse(key, text),
            None => Err(HeaderError::Missing { key }),
        }
    }
}

impl<T: ExtScalar> ExtField for Option<T> {
    fn put(&self, key: &'static str, ext: &mut ExtFields) {
        if let Some(v) = self {
            ext.insert(ExtString::const_new(key), v.to_ext());
        }
    }
    fn get(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        ext.get(key).map(|text| parse(key, text)).transpose()
    }
}

fn parse<T: ExtScalar>(key: &'static str, text: &str) -> Result<T, HeaderError> {
    T::parse_ext(text).ok_or_else(|| HeaderError::Invalid {
        key,
        value: text.to_owned(),
        expected: T::EXPECTED,
    })
}

/// Declares a header struct whose fields map onto ext-field keys.
macro_rules! ext_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $key:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::header::CommandHeader for $name {
            fn write_ext_fields(&self, ext: &mut $crate::command::ExtFields) {
                ext.reserve(<[&str]>::len(&[$($key),*]));
                $( $crate::header::ExtField::put(&self.$field, $key, ext); )*
            }

            fn from_ext_fields(
                ext: &$crate::command::ExtFields,
            ) -> Result<Self, $crate::header::HeaderError> {
                Ok(Self {
                    $( $field: $crate::header::ExtField::get(ext, $key)?, )*
                })
            }
        }
    };
}
pub(crate) use ext_header;

/// Declares an enum that travels by its Java name.
macro_rules! ext_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $( $(#[$vmeta])* $variant, )* }

        impl $crate::header::ExtScalar for $name {
            const EXPECTED: &'static str = concat!("one of", $(" ", $text,)*);
            fn to_ext(&self) -> $crate::command::ExtString {
                match self { $( $name::$variant => $crate::command::ExtString::const_new($text), )* }
            }
            fn parse_ext(text: &str) -> Option<Self> {
                $( if text.eq_ignore_ascii_case($text) { return Some($name::$variant); } )*
                None
            }
        }
    };
}
pub(crate) use ext_enum;

#[cfg(test)]
mod tests {
    use super::*;

    ext_header! {
        /// A header for tests.
        pub struct Sample {
            name: String = "name",
            count: i32 = "count",
            big: Option<i64> = "big",
            on: Option<bool> = "on",
        }
    }

    #[test]
    fn required_and_optional_fields_round_trip() {
        let h = Sample {
            name: "x".into(),
            count: -3,
            big: Some(1 << 40),
            on: None,
        };
        let ext = h.to_ext_fields();
        assert_eq!(ext.get("count").map(ExtString::as_str), Some("-3"));
        assert!(!ext.contains_key("on"));
        assert_eq!(Sample::from_ext_fields(&ext).unwrap(), h);
    }

    #[test]
    fn errors_name_the_key() {
        let mut ext = ExtFields::default();
        ext.insert("name".into(), "x".into());
        assert_eq!(
            Sample::from_ext_fields(&ext),
            Err(HeaderError::Missing { key: "count" })
        );
        ext.insert("count".into(), "12x".into());
        let err = Sample::from_ext_fields(&ext).unwrap_err();
        assert_eq!(
            err.to_string(),
            "header field `count` has value \"12x\", which is not a valid 32-bit integer"
        );
        ext.insert("count".into(), "1".into());
        assert_eq!(Sample::from_ext_fields(&ext).unwrap().count, 1);
    }

    #[test]
    fn booleans_read_as_java_parse_boolean_and_accept_one() {
        let mut ext = ExtFields::default();
        ext.insert("name".into(), "x".into());
        ext.insert("count".into(), "+1".into());
        for (text, want) in [
            ("true", true),
            ("TRUE", true),
            ("True", true),
            ("1", true),
            ("false", false),
            ("0", false),
            ("yes", false),
            ("T", false),
            ("", false),
        ] {
            ext.insert("on".into(), text.into());
            assert_eq!(
                Sample::from_ext_fields(&ext).unwrap().on,
                Some(want),
                "{text:?}"
            );
        }
    }
}
