//! fastjson's default ("legacy") JSON output, which Java name servers send
//! to old clients and for cluster info.
//!
//! fastjson writes the keys of a map whose key type is not `String` without
//! quotes: a `Map<Long, String>` becomes `{0:"10.0.0.1:10911"}`. That is not
//! standard JSON, but every RocketMQ client parses it, and
//! [`remoting_protocol::body::from_json`] reads it back.
//!
//! # Invariants worth naming
//! - Only keys that are integers in the Rust type are unquoted; a string key
//!   that happens to look like a number (a topic named `"123"`) stays quoted,
//!   as in fastjson.
//! - Everything else is byte for byte what `serde_json` writes.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

/// Renders a body as fastjson's default output: standard JSON except that
/// integer map keys are written without quotes.
pub fn to_legacy_json<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, LegacyFormatter::default());
    // The body types hold only strings, numbers, maps with string or integer
    // keys, and lists, all of which serialize without error; writing to a
    // Vec cannot fail either.
    if value.serialize(&mut ser).is_err() {
        out.clear();
    }
    out
}

/// A compact formatter that holds back the opening quote of an object key
/// until it knows whether the key is text (quote it) or an integer (do not).
#[derive(Debug, Default)]
struct LegacyFormatter {
    /// Between `begin_object_key` and `end_object_key`.
    in_key: bool,
    /// A key's opening quote was held back and nothing was written since.
    quote_pending: bool,
    /// The current key was written as a bare integer.
    bare_key: bool,
}

impl LegacyFormatter {
    fn flush_quote<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if self.quote_pending {
            self.quote_pending = false;
            writer.write_all(b"\"")?;
        }
        Ok(())
    }

    /// Writes an integer key bare, or an integer value as usual.
    fn integer<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        write: impl FnOnce(&mut CompactFormatter, &mut W) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.quote_pending {
            self.quote_pending = false;
            self.bare_key = true;
        }
        write(&mut CompactFormatter, writer)
    }
}

macro_rules! integer_writers {
    ($($name:ident: $ty:ty),* $(,)?) => {$(
        fn $name<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: $ty) -> io::Result<()> {
            self.integer(writer, |f, w| f.$name(w, value))
        }
    )*};
}

impl Formatter for LegacyFormatter {
    integer_writers!(
        write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64, write_i128: i128,
        write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64, write_u128: u128,
    );

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.in_key = true;
        CompactFormatter.begin_object_key(writer, first)
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.in_key = false;
        CompactFormatter.end_object_key(writer)
    }

    fn begin_string<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if self.in_key {
            self.quote_pending = true;
            self.bare_key = false;
            Ok(())
        } else {
            CompactFormatter.begin_string(writer)
        }
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if self.in_key && self.bare_key {
            self.bare_key = false;
            return Ok(());
        }
        // An empty key wrote nothing between the quotes.
        self.flush_quote(writer)?;
        CompactFormatter.end_string(writer)
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.flush_quote(writer)?;
        CompactFormatter.write_string_fragment(writer, fragment)
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        self.flush_quote(writer)?;
        CompactFormatter.write_char_escape(writer, char_escape)
    }

    // serde_json writes boolean and float keys between quotes as well; keep
    // them quoted, since no RocketMQ body has such keys.
    fn write_bool<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: bool) -> io::Result<()> {
        self.flush_quote(writer)?;
        CompactFormatter.write_bool(writer, value)
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.flush_quote(writer)?;
        CompactFormatter.write_f32(writer, value)
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        self.flush_quote(writer)?;
        CompactFormatter.write_f64(writer, value)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use remoting_protocol::body::{from_json, BrokerData, ClusterInfo, QueueData, TopicRouteData};

    use super::*;

    fn route() -> TopicRouteData {
        TopicRouteData {
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_sys_flag: 0,
            }],
            broker_datas: vec![BrokerData {
                cluster: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_addrs: BTreeMap::from([
                    (0, "10.0.0.1:10911".to_owned()),
                    (1, "10.0.0.2:10911".to_owned()),
                ]),
                zone_name: None,
                enable_acting_master: false,
            }],
            ..TopicRouteData::default()
        }
    }

    #[test]
    fn legacy_route_has_bare_broker_ids_and_reads_back() {
        let route = route();
        let text = String::from_utf8(to_legacy_json(&route)).unwrap();
        assert!(
            text.contains(r#""brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}"#),
            "{text}"
        );
        assert!(text.contains(r#""brokerName":"broker-a""#), "{text}");
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_err());
        assert_eq!(from_json::<TopicRouteData>(text.as_bytes()).unwrap(), route);
    }

    #[test]
    fn string_keys_stay_quoted_even_when_numeric_empty_or_escaped() {
        let map = BTreeMap::from([
            ("123".to_owned(), 1),
            (String::new(), 2),
            ("a\"b\n".to_owned(), 3),
        ]);
        let text = String::from_utf8(to_legacy_json(&map)).unwrap();
        assert_eq!(
            text,
            String::from_utf8(serde_json::to_vec(&map).unwrap()).unwrap()
        );
        assert_eq!(text, r#"{"":2,"123":1,"a\"b\n":3}"#);
    }

    #[test]
    fn integer_values_and_negative_keys_are_written_as_fastjson_does() {
        let map = BTreeMap::from([(-1_i64, 7_i64), (5, -9)]);
        assert_eq!(to_legacy_json(&map), b"{-1:7,5:-9}");
        let nested = BTreeMap::from([("k".to_owned(), BTreeMap::from([(2_u32, "v")]))]);
        assert_eq!(to_legacy_json(&nested), br#"{"k":{2:"v"}}"#);
    }

    #[test]
    fn boolean_keys_stay_quoted() {
        let map = BTreeMap::from([(false, 0), (true, 1)]);
        assert_eq!(to_legacy_json(&map), br#"{"false":0,"true":1}"#);
    }

    #[test]
    fn legacy_cluster_info_reads_back() {
        let info = ClusterInfo {
            broker_addr_table: BTreeMap::from([(
                "broker-a".to_owned(),
                route().broker_datas[0].clone(),
            )]),
            cluster_addr_table: BTreeMap::from([(
                "DefaultCluster".to_owned(),
                ["broker-a".to_owned()].into(),
            )]),
        };
        let bytes = to_legacy_json(&info);
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.contains(r#""brokerAddrs":{0:"#), "{text}");
        assert_eq!(from_json::<ClusterInfo>(&bytes).unwrap(), info);
    }
}
