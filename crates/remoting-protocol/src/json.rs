//! RocketMQ's JSON header (serialization type 0).
//!
//! The header is a JSON object with the keys `code`, `extFields`, `flag`,
//! `language` (by name), `opaque`, `remark`, `serializeTypeCurrentRPC` and
//! `version`. Encoding writes them in that (alphabetical) order, as RocketMQ's
//! Java components do, and omits `remark` and an empty `extFields`. Decoding
//! ignores unknown keys, accepts numbers and booleans as ext-field values, and
//! accepts the language as a name or a number.

use std::fmt;

use bytes::{BufMut, BytesMut};
use compact_str::ToCompactString;
use serde::{
    de::{self, MapAccess, Visitor},
    Deserialize, Deserializer, Serialize,
};

use crate::{
    code::{LanguageCode, SerializeType},
    command::{ExtFields, ExtString, RemotingCommand},
    error::DecodeError,
};

/// Appends the JSON header of `cmd` to `dst`.
pub(crate) fn encode_header(cmd: &RemotingCommand, dst: &mut BytesMut) {
    let header = HeaderOut {
        code: cmd.code,
        ext_fields: &cmd.ext_fields,
        flag: cmd.flag,
        language: cmd.language.name(),
        opaque: cmd.opaque,
        remark: cmd.remark.as_deref(),
        serialize_type: SerializeType::Json.name(),
        version: cmd.version,
    };
    // Serializing plain strings and integers into memory cannot fail.
    let _ = serde_json::to_writer(dst.writer(), &header);
}

/// Parses a JSON header into a command without a body.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let h: HeaderIn =
        serde_json::from_slice(bytes).map_err(|source| DecodeError::Json { source })?;
    Ok(RemotingCommand {
        code: h.code,
        language: h.language,
        version: h.version,
        opaque: h.opaque,
        flag: h.flag,
        remark: h.remark,
        ext_fields: h.ext_fields.0,
        body: bytes::Bytes::new(),
        serialize_type: SerializeType::Json,
    })
}

#[derive(Serialize)]
struct HeaderOut<'a> {
    code: i32,
    #[serde(rename = "extFields", skip_serializing_if = "ExtFields::is_empty")]
    ext_fields: &'a ExtFields,
    flag: i32,
    language: &'static str,
    opaque: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    remark: Option<&'a str>,
    #[serde(rename = "serializeTypeCurrentRPC")]
    serialize_type: &'static str,
    version: i32,
}

#[derive(Deserialize)]
struct HeaderIn {
    #[serde(default)]
    code: i32,
    #[serde(default = "java", deserialize_with = "language")]
    language: LanguageCode,
    #[serde(default)]
    version: i32,
    #[serde(default)]
    opaque: i32,
    #[serde(default)]
    flag: i32,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default, rename = "extFields")]
    ext_fields: LenientExtFields,
}

fn java() -> LanguageCode {
    LanguageCode::Java
}

fn language<'de, D: Deserializer<'de>>(d: D) -> Result<LanguageCode, D::Error> {
    struct LanguageVisitor;
    impl Visitor<'_> for LanguageVisitor {
        type Value = LanguageCode;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a language name or code")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<LanguageCode, E> {
            Ok(LanguageCode::from_name(v).unwrap_or(LanguageCode::Other))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<LanguageCode, E> {
            u8::try_from(v)
                .map(LanguageCode::from_code)
                .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<LanguageCode, E> {
            u8::try_from(v)
                .map(LanguageCode::from_code)
                .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
        }
        fn visit_unit<E: de::Error>(self) -> Result<LanguageCode, E> {
            Ok(LanguageCode::Java)
        }
    }
    d.deserialize_any(LanguageVisitor)
}

/// Ext fields that accept strings, numbers and booleans as values and skip nulls.
#[derive(Default)]
struct LenientExtFields(ExtFields);

impl<'de> Deserialize<'de> for LenientExtFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = LenientExtFields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of header fields")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LenientExtFields::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = ExtFields::with_capacity_and_hasher(
                    map.size_hint().unwrap_or(8),
                    Default::default(),
                );
                while let Some(key) = map.next_key::<ExtString>()? {
                    if let Some(ScalarString(value)) = map.next_value::<Option<ScalarString>>()? {
                        out.insert(key, value);
                    }
                }
                Ok(LenientExtFields(out))
            }
        }
        d.deserialize_any(MapVisitor)
    }
}

/// A JSON scalar rendered as the string Java's `toString()` would give.
struct ScalarString(ExtString);

impl<'de> Deserialize<'de> for ScalarString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl Visitor<'_> for ScalarVisitor {
            type Value = ScalarString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ScalarString, E> {
                Ok(ScalarString(ExtString::from(v)))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<ScalarString, E> {
                Ok(ScalarString(ExtString::from(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScalarString, E> {
                Ok(ScalarString(v.to_compact_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScalarString, E> {
                Ok(ScalarString(v.to_compact_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ScalarString, E> {
                Ok(ScalarString(ExtString::from(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ScalarString, E> {
                Ok(ScalarString(ExtString::const_new(if v {
                    "true"
                } else {
                    "false"
                })))
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_keys_in_rocketmq_order() {
        let mut cmd = RemotingCommand {
            code: 105,
            language: LanguageCode::Java,
            version: 479,
            opaque: 1,
            ..RemotingCommand::default()
        };
        cmd.set_ext("topic", "T");
        let mut out = BytesMut::new();
        encode_header(&cmd, &mut out);
        assert_eq!(
            &out[..],
            br#"{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}"#
        );
        assert_eq!(out.len(), 123);
    }

    #[test]
    fn decode_is_lenient_about_what_peers_emit() {
        let text = br#"{"code":10,"language":3,"extFields":{"a":"x","b":7,"c":true,"d":null},"unknown":[1],"remark":null}"#;
        let cmd = decode_header(text).unwrap();
        assert_eq!(cmd.language, LanguageCode::Python);
        assert_eq!(cmd.ext("b"), Some("7"));
        assert_eq!(cmd.ext("c"), Some("true"));
        assert_eq!(cmd.ext("d"), None);
        assert_eq!(cmd.remark, None);
    }

    #[test]
    fn unknown_language_name_decodes_as_other() {
        let cmd = decode_header(br#"{"code":1,"language":"COBOL"}"#).unwrap();
        assert_eq!(cmd.language, LanguageCode::Other);
    }

    #[test]
    fn malformed_json_is_an_error() {
        assert!(matches!(
            decode_header(b"{\"code\":"),
            Err(DecodeError::Json { .. })
        ));
        assert!(matches!(
            decode_header(br#"{"code":"ten"}"#),
            Err(DecodeError::Json { .. })
        ));
        assert!(matches!(
            decode_header(br#"{"extFields":{"a":[1]}}"#),
            Err(DecodeError::Json { .. })
        ));
    }
}
