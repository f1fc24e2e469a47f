//! The remoting command: one request or response on the wire.

use std::sync::atomic::{AtomicI32, Ordering};

use bytes::Bytes;
use indexmap::IndexMap;

use crate::{
    code::{LanguageCode, RequestCode, ResponseCode, SerializeType},
    header::{CommandHeader, HeaderError},
};

/// One ext-field name or value: a string kept inline up to 24 bytes, so
/// most fields of a header cost no allocation.
pub type ExtString = compact_str::CompactString;

/// Custom header fields of a command: names to string values, in the order
/// they were added or received. Hashed with a fast, randomly seeded hasher:
/// keys come from peers, so the seed keeps collisions out of their hands.
pub type ExtFields = IndexMap<ExtString, ExtString, foldhash::fast::RandomState>;

/// Flag bit set on responses.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit set on oneway requests (no response expected).
pub const FLAG_ONEWAY: i32 = 0x2;

/// The `version` Sluice declares: the ordinal of RocketMQ 5.3.3, the release
/// whose protocol this crate follows. Name servers answer route queries with
/// standard JSON for versions of 401 (4.9.4) and above.
pub const CURRENT_VERSION: i32 = 479;

static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(0);

/// Returns a fresh request id for this process.
pub fn next_opaque() -> i32 {
    NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed)
}

/// One remoting command: a request, a oneway request or a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code of a request, response code of a response.
    pub code: i32,
    /// Language the sender declares.
    pub language: LanguageCode,
    /// Protocol version the sender declares.
    pub version: i32,
    /// Request id; a response carries its request's.
    pub opaque: i32,
    /// Bit field: [`FLAG_RESPONSE`], [`FLAG_ONEWAY`].
    pub flag: i32,
    /// Free text, mostly the reason of a failed response.
    pub remark: Option<String>,
    /// Custom header fields.
    pub ext_fields: ExtFields,
    /// Opaque payload.
    pub body: Bytes,
    /// Header encoding the command arrived in, or will be sent in.
    pub serialize_type: SerializeType,
}

impl Default for RemotingCommand {
    fn default() -> Self {
        Self {
            code: 0,
            language: LanguageCode::default(),
            version: CURRENT_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::default(),
            body: Bytes::new(),
            serialize_type: SerializeType::default(),
        }
    }
}

impl RemotingCommand {
    /// Creates a request with a fresh opaque and no header fields.
    pub fn request(code: RequestCode) -> Self {
        Self {
            code: code.0,
            opaque: next_opaque(),
            ..Self::default()
        }
    }

    /// Creates a request with a fresh opaque whose ext fields hold `header`.
    pub fn request_with_header(code: RequestCode, header: &impl CommandHeader) -> Self {
        let mut cmd = Self::request(code);
        header.write_ext_fields(&mut cmd.ext_fields);
        cmd
    }

    /// Creates a oneway request: the peer sends no response.
    pub fn oneway(code: RequestCode) -> Self {
        let mut cmd = Self::request(code);
        cmd.mark_oneway();
        cmd
    }

    /// Creates a response that is not tied to a request yet; see
    /// [`RemotingCommand::response_to`] for the usual case.
    pub fn response(code: ResponseCode, remark: Option<String>) -> Self {
        Self {
            code: code.0,
            flag: FLAG_RESPONSE,
            remark,
            ..Self::default()
        }
    }

    /// Creates the response to this request: same opaque, same header
    /// encoding, the response flag set.
    pub fn response_to(&self, code: ResponseCode, remark: Option<String>) -> Self {
        Self {
            code: code.0,
            opaque: self.opaque,
            flag: FLAG_RESPONSE,
            remark,
            serialize_type: self.serialize_type,
            ..Self::default()
        }
    }

    /// Sets the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the remark.
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Sets the header encoding.
    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Writes a typed header's fields into the ext fields.
    pub fn with_header(mut self, header: &impl CommandHeader) -> Self {
        header.write_ext_fields(&mut self.ext_fields);
        self
    }

    /// Reads a typed header from the ext fields.
    ///
    /// # Errors
    /// [`HeaderError`] naming the missing or malformed field.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        H::from_ext_fields(&self.ext_fields)
    }

    /// The code read as a request code.
    pub fn request_code(&self) -> RequestCode {
        RequestCode(self.code)
    }

    /// The code read as a response code.
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode(self.code)
    }

    /// Reports whether this is a response.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Reports whether this is a oneway request.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Marks this command as a response.
    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    /// Marks this command as a oneway request.
    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// Returns one ext field.
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.get(key).map(ExtString::as_str)
    }

    /// Sets one ext field.
    pub fn set_ext(&mut self, key: impl Into<ExtString>, value: impl Into<ExtString>) {
        self.ext_fields.insert(key.into(), value.into());
    }

    /// About how many bytes the command takes, encoded or held in memory:
    /// its body, remark and ext fields, plus a fixed share for the rest of
    /// the header.
    pub fn size_estimate(&self) -> usize {
        let ext: usize = self
            .ext_fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum();
        self.body.len() + self.remark.as_ref().map_or(0, String::len) + ext + 128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_get_distinct_opaques() {
        let a = RemotingCommand::request(RequestCode::HEART_BEAT);
        let b = RemotingCommand::request(RequestCode::HEART_BEAT);
        assert_ne!(a.opaque, b.opaque);
        assert!(!a.is_response() && !a.is_oneway());
    }

    #[test]
    fn response_to_copies_opaque_and_encoding() {
        let req = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
            .with_serialize_type(SerializeType::RocketMq);
        let resp = req.response_to(ResponseCode::SYSTEM_BUSY, Some("busy".into()));
        assert_eq!(resp.opaque, req.opaque);
        assert_eq!(resp.serialize_type, SerializeType::RocketMq);
        assert!(resp.is_response());
        assert_eq!(resp.response_code(), ResponseCode::SYSTEM_BUSY);
    }

    #[test]
    fn oneway_sets_only_the_oneway_bit() {
        let cmd = RemotingCommand::oneway(RequestCode::UPDATE_CONSUMER_OFFSET);
        assert_eq!(cmd.flag, FLAG_ONEWAY);
        assert!(cmd.is_oneway() && !cmd.is_response());
    }
}
