//! The `authorization` header of RocketMQ 5's gRPC clients:
//! `MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time,
//! Signature=<hex>`, where the signature is the HMAC-SHA1, keyed with the
//! secret, of the exact `x-mq-date-time` header value. Clients differ in
//! the hex digits' case and the date's format, so both are taken as sent.

use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::AuthError;

/// The header that carries the signature.
pub const AUTHORIZATION: &str = "authorization";
/// The header whose value is signed.
pub const DATE_TIME: &str = "x-mq-date-time";
/// The scheme clients write before the parameters.
pub const SCHEME: &str = "MQv2-HMAC-SHA1";

type HmacSha1 = Hmac<Sha1>;

/// A parsed `authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The access key (the credential up to its first `/`).
    pub access_key: String,
    signature: Vec<u8>,
}

impl Authorization {
    /// Reads a header value. An empty access key (some clients always
    /// send the header) reads as `None`: the request is anonymous.
    ///
    /// # Errors
    /// A credential without a signature, or a signature that is not hex.
    pub fn parse(value: &str) -> Result<Option<Self>, AuthError> {
        let params = value.trim().split_once(' ').map_or("", |(_, rest)| rest);
        let mut credential = None;
        let mut signature = None;
        for part in params.split(',') {
            let Some((key, val)) = part.split_once('=') else {
                continue;
            };
            match key.trim() {
                "Credential" => credential = Some(val.trim()),
                "Signature" => signature = Some(val.trim()),
                _ => {}
            }
        }
        let access_key = credential
            .map(|c| c.split('/').next().unwrap_or(c))
            .unwrap_or("");
        if access_key.is_empty() {
            return Ok(None);
        }
        let signature = signature.filter(|s| !s.is_empty()).ok_or_else(|| {
            AuthError::Unauthenticated(format!(
                "the authorization header of User:{access_key} has no Signature"
            ))
        })?;
        let signature = hex::decode(signature).map_err(|_| {
            AuthError::Unauthenticated(format!(
                "the authorization header of User:{access_key} has a Signature that is not hex"
            ))
        })?;
        Ok(Some(Self {
            access_key: access_key.to_owned(),
            signature,
        }))
    }

    /// Whether the signature is `secret`'s over `date_time`, compared in
    /// constant time.
    pub fn verify(&self, secret: &[u8], date_time: &str) -> bool {
        mac(secret, date_time).verify_slice(&self.signature).is_ok()
    }
}

/// The header value a client with `access_key` and `secret` sends with
/// `date_time` (lower-case hex).
pub fn sign(access_key: &str, secret: &[u8], date_time: &str) -> String {
    let signature = hex::encode(mac(secret, date_time).finalize().into_bytes());
    format!("{SCHEME} Credential={access_key}, SignedHeaders={DATE_TIME}, Signature={signature}")
}

fn mac(secret: &[u8], date_time: &str) -> HmacSha1 {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = <HmacSha1 as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    mac.update(date_time.as_bytes());
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_of_each_client_verify_whatever_the_hex_case() {
        let lower = sign("alice", b"sk", "20261205T031500Z");
        let a = Authorization::parse(&lower).unwrap().unwrap();
        assert_eq!(a.access_key, "alice");
        assert!(a.verify(b"sk", "20261205T031500Z"));
        assert!(!a.verify(b"sk", "20261205T031501Z"));
        assert!(!a.verify(b"sk2", "20261205T031500Z"));
        let (head, sig) = lower.rsplit_once('=').unwrap();
        let upper = format!("{head}={}", sig.to_uppercase());
        let b = Authorization::parse(&upper).unwrap().unwrap();
        assert!(b.verify(b"sk", "20261205T031500Z"));
        // A credential with a scope after '/', extra spaces, other order.
        let scoped = format!(
            "{SCHEME}  Signature={sig} ,Credential=alice/20261205/rocketmq , SignedHeaders=x-mq-date-time"
        );
        let c = Authorization::parse(&scoped).unwrap().unwrap();
        assert_eq!(c.access_key, "alice");
        assert!(c.verify(b"sk", "20261205T031500Z"));
    }

    #[test]
    fn an_empty_credential_is_anonymous_and_a_bad_signature_is_named() {
        let empty = format!("{SCHEME} Credential=, SignedHeaders={DATE_TIME}, Signature=");
        assert_eq!(Authorization::parse(&empty).unwrap(), None);
        assert_eq!(Authorization::parse("").unwrap(), None);
        let none = format!("{SCHEME} Credential=bob, SignedHeaders={DATE_TIME}");
        let err = Authorization::parse(&none).unwrap_err().to_string();
        assert!(
            err.contains("User:bob") && err.contains("no Signature"),
            "{err}"
        );
        let bad = format!("{SCHEME} Credential=bob, Signature=zz");
        let err = Authorization::parse(&bad).unwrap_err().to_string();
        assert!(err.contains("not hex"), "{err}");
    }
}
