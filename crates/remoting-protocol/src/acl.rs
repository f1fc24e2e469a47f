//! Request signatures of RocketMQ's access control, as its clients make
//! them: the access key travels in the ext field `AccessKey` (and a session
//! token, when there is one, in `SecurityToken`); `Signature` is the Base64
//! HMAC-SHA1, keyed with the secret key, of the values of all other ext
//! fields in key order, followed by the body.
//!
//! Keys are ordered as Java orders strings (by UTF-16 code unit), so a key
//! outside the Basic Multilingual Plane sorts as it does for a Java client.
//! Requests older than version 400 (V4_9_3 and before) leave the ext field
//! `_UNIQUE_KEY_QUERY` out of the signed content.

use base64::{engine::general_purpose::STANDARD, Engine as _};
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::command::{ExtFields, RemotingCommand};

/// The ext field that names the signer.
pub const ACCESS_KEY: &str = "AccessKey";
/// The ext field that carries the signature.
pub const SIGNATURE: &str = "Signature";
/// The ext field that carries a session token.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// The ext field that requests before version 400 leave unsigned.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";
/// The last request version whose signature leaves out [`UNIQUE_KEY_QUERY`].
const LAST_VERSION_WITHOUT_UNIQUE_KEY_QUERY: i32 = 399;

type HmacSha1 = Hmac<Sha1>;

/// An access key and its secret, with an optional session token: what a
/// client signs its requests with (RocketMQ's `SessionCredentials`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key (the user name).
    pub access_key: String,
    /// The secret key (the user's password).
    pub secret_key: String,
    /// A session token sent along, unsigned by the secret; `None` for none.
    pub security_token: Option<String>,
}

impl Credentials {
    /// Credentials of `access_key` with `secret_key` and no session token.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        }
    }
}

impl Credentials {
    /// Reads RocketMQ's JSON form `{"accessKey":"...","secretKey":"..."}`
    /// (`innerClientAuthenticationCredentials`); `None` unless both are
    /// there and not empty.
    pub fn from_json(text: &str) -> Option<Self> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Keys {
            access_key: String,
            secret_key: String,
        }
        serde_json::from_str::<Keys>(text.trim())
            .ok()
            .filter(|k| !k.access_key.is_empty() && !k.secret_key.is_empty())
            .map(|k| Self::new(k.access_key, k.secret_key))
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<hidden>")
            .field(
                "security_token",
                &self.security_token.as_ref().map(|_| "<hidden>"),
            )
            .finish()
    }
}

/// Adds `AccessKey`, `SecurityToken` (if any) and `Signature` to `request`,
/// replacing any it had. Call it last: a field added after signing breaks
/// the signature.
pub fn sign(request: &mut RemotingCommand, credentials: &Credentials) {
    let fields = &mut request.ext_fields;
    fields.shift_remove(SIGNATURE);
    fields.insert(ACCESS_KEY.into(), credentials.access_key.as_str().into());
    match &credentials.security_token {
        Some(token) => {
            fields.insert(SECURITY_TOKEN.into(), token.as_str().into());
        }
        None => {
            fields.shift_remove(SECURITY_TOKEN);
        }
    }
    let mac = mac_of(
        credentials.secret_key.as_bytes(),
        &request.ext_fields,
        &request.body,
        request.version,
    );
    let signature = STANDARD.encode(mac.finalize().into_bytes());
    request
        .ext_fields
        .insert(SIGNATURE.into(), signature.as_str().into());
}

/// The access key a request was signed by: its `AccessKey` ext field, or
/// `None` for an anonymous request.
pub fn access_key(request: &RemotingCommand) -> Option<&str> {
    request
        .ext_fields
        .get(ACCESS_KEY)
        .map(crate::command::ExtString::as_str)
}

/// Whether `request` carries a signature that `secret` made over its ext
/// fields and body. Compared in constant time; a missing or malformed
/// signature does not verify.
pub fn verify(request: &RemotingCommand, secret: &[u8]) -> bool {
    let Some(given) = request.ext_fields.get(SIGNATURE) else {
        return false;
    };
    let Ok(given) = STANDARD.decode(given.as_str().trim()) else {
        return false;
    };
    mac_of(secret, &request.ext_fields, &request.body, request.version)
        .verify_slice(&given)
        .is_ok()
}

/// The HMAC of the signed content: the values of `fields` other than
/// `Signature` (and, before version 400, `_UNIQUE_KEY_QUERY`), in Java's
/// key order, then `body`.
fn mac_of(secret: &[u8], fields: &ExtFields, body: &[u8], version: i32) -> HmacSha1 {
    let skip_unique = version <= LAST_VERSION_WITHOUT_UNIQUE_KEY_QUERY;
    let mut signed: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .filter(|(k, _)| *k != SIGNATURE && !(skip_unique && *k == UNIQUE_KEY_QUERY))
        .collect();
    signed.sort_unstable_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = <HmacSha1 as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    for (_, value) in signed {
        mac.update(value.as_bytes());
    }
    mac.update(body);
    mac
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::RequestCode;

    fn request(fields: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE);
        cmd.version = 453;
        for (k, v) in fields {
            cmd.ext_fields.insert((*k).into(), (*v).into());
        }
        cmd.body = Bytes::copy_from_slice(body);
        cmd
    }

    #[test]
    fn the_signature_is_hmac_sha1_over_values_in_key_order_then_the_body() {
        let mut cmd = request(&[("topic", "T"), ("b", "2"), ("a", "1")], b"xyz");
        sign(&mut cmd, &Credentials::new("ak", "secret"));
        // Keys in order: AccessKey, a, b, topic.
        let mut mac = <HmacSha1 as Mac>::new_from_slice(b"secret").unwrap();
        mac.update(b"ak12Txyz");
        let expected = STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(cmd.ext_fields.get(SIGNATURE).unwrap().as_str(), expected);
        assert_eq!(access_key(&cmd), Some("ak"));
        assert!(verify(&cmd, b"secret"));
    }

    #[test]
    fn a_known_hmac_sha1_vector_verifies() {
        // HMAC-SHA1("key", "The quick brown fox jumps over the lazy dog") is
        // de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9 (Base64 below); the
        // content is AccessKey's value, then b's, then the body.
        let cmd = request(
            &[
                ("b", "jumps over the lazy "),
                (ACCESS_KEY, "The quick brown fox "),
                (SIGNATURE, "3nybhbi3iqa8ino29wqQcBydtNk="),
            ],
            b"dog",
        );
        assert!(verify(&cmd, b"key"));
        assert!(!verify(&cmd, b"kez"));
    }

    #[test]
    fn any_change_to_a_field_the_body_or_the_secret_breaks_the_signature() {
        let mut cmd = request(&[("topic", "T")], b"body");
        sign(&mut cmd, &Credentials::new("ak", "sk"));
        assert!(verify(&cmd, b"sk"));
        assert!(!verify(&cmd, b"sk2"));
        let mut changed = cmd.clone();
        changed.ext_fields.insert("topic".into(), "U".into());
        assert!(!verify(&changed, b"sk"));
        let mut added = cmd.clone();
        added.ext_fields.insert("extra".into(), "1".into());
        assert!(!verify(&added, b"sk"));
        let mut body = cmd.clone();
        body.body = Bytes::from_static(b"bodY");
        assert!(!verify(&body, b"sk"));
        let mut other_key = cmd.clone();
        other_key.ext_fields.insert(ACCESS_KEY.into(), "ak2".into());
        assert!(!verify(&other_key, b"sk"));
    }

    #[test]
    fn missing_or_malformed_signatures_do_not_verify() {
        let cmd = request(&[(ACCESS_KEY, "ak")], b"");
        assert!(!verify(&cmd, b"sk"));
        let cmd = request(&[(ACCESS_KEY, "ak"), (SIGNATURE, "not base64 !!")], b"");
        assert!(!verify(&cmd, b"sk"));
        let cmd = request(&[(ACCESS_KEY, "ak"), (SIGNATURE, "AAAA")], b"");
        assert!(!verify(&cmd, b"sk"));
    }

    #[test]
    fn old_requests_leave_the_unique_key_query_field_unsigned() {
        let mut old = request(&[("topic", "T"), (UNIQUE_KEY_QUERY, "true")], b"");
        old.version = 399;
        sign(&mut old, &Credentials::new("ak", "sk"));
        old.ext_fields
            .insert(UNIQUE_KEY_QUERY.into(), "false".into());
        assert!(
            verify(&old, b"sk"),
            "not part of an old request's signature"
        );
        let mut new = request(&[("topic", "T"), (UNIQUE_KEY_QUERY, "true")], b"");
        sign(&mut new, &Credentials::new("ak", "sk"));
        new.ext_fields
            .insert(UNIQUE_KEY_QUERY.into(), "false".into());
        assert!(!verify(&new, b"sk"), "signed from version 400 on");
    }

    #[test]
    fn keys_sort_by_utf16_code_units_as_java_sorts_them() {
        // U+FF21 (one UTF-16 unit 0xFF21) sorts after U+1F600 (surrogates
        // 0xD83D...) in Java, before it in UTF-8 byte order.
        let mut cmd = request(&[("\u{FF21}", "x"), ("\u{1F600}", "y")], b"");
        sign(&mut cmd, &Credentials::new("ak", "sk"));
        let mut mac = <HmacSha1 as Mac>::new_from_slice(b"sk").unwrap();
        mac.update(b"akyx");
        let expected = STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(cmd.ext_fields.get(SIGNATURE).unwrap().as_str(), expected);
    }

    #[test]
    fn credentials_are_read_from_rocketmq_json_with_both_keys() {
        let c = Credentials::from_json(r#" {"accessKey":"ak","secretKey":"sk"} "#).unwrap();
        assert_eq!((c.access_key.as_str(), c.secret_key.as_str()), ("ak", "sk"));
        for bad in [
            "",
            "sk",
            r#"{"accessKey":"ak"}"#,
            r#"{"accessKey":"","secretKey":"s"}"#,
        ] {
            assert!(Credentials::from_json(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn signing_again_replaces_the_old_signature_and_token() {
        let mut cmd = request(&[("topic", "T")], b"");
        let mut with_token = Credentials::new("ak", "sk");
        with_token.security_token = Some("tok".into());
        sign(&mut cmd, &with_token);
        assert_eq!(cmd.ext_fields.get(SECURITY_TOKEN).unwrap().as_str(), "tok");
        sign(&mut cmd, &Credentials::new("ak", "sk"));
        assert!(cmd.ext_fields.get(SECURITY_TOKEN).is_none());
        assert!(verify(&cmd, b"sk"));
        assert!(
            !format!("{with_token:?}").contains("sk\""),
            "{with_token:?}"
        );
    }
}
