//! The access-key settings every client shares (RocketMQ's `accessKey`,
//! `secretKey` and `securityToken`): checked together and turned into the
//! [`Credentials`] that sign each request the client sends.

use remoting_protocol::acl::Credentials;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A secret setting (a secret key or a session token): read and written as
/// the plain string, shown as `<hidden>` by `Debug`, so that printing a
/// configuration does not print it.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hidden>")
    }
}

/// Access-key settings that do not go together; the fields are those of
/// the clients' `Config` errors.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{key} = {value:?}; allowed: {allowed}")]
pub struct CredentialsError {
    /// The key at fault (RocketMQ's name).
    pub key: &'static str,
    /// Its value; a secret is never repeated here.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

/// The credentials of the settings `accessKey`, `secretKey` and
/// `securityToken`; `None` when neither key is given (requests go
/// unsigned). A blank value counts as not given; others are taken as
/// they are.
///
/// # Errors
/// [`CredentialsError`] when only one of `accessKey` and `secretKey` is
/// given (naming both), or a `securityToken` comes without them.
pub fn credentials(
    access_key: Option<&str>,
    secret_key: Option<&Secret>,
    security_token: Option<&Secret>,
) -> Result<Option<Credentials>, CredentialsError> {
    fn given(v: Option<&str>) -> Option<&str> {
        v.filter(|v| !v.trim().is_empty())
    }
    let access_key = given(access_key);
    let secret_key = given(secret_key.map(Secret::expose));
    let security_token = given(security_token.map(Secret::expose));
    let together = "accessKey and secretKey are given together or not at all";
    match (access_key, secret_key) {
        (Some(ak), Some(sk)) => Ok(Some(Credentials {
            access_key: ak.to_owned(),
            secret_key: sk.to_owned(),
            security_token: security_token.map(str::to_owned),
        })),
        (Some(_), None) => Err(CredentialsError {
            key: "secretKey",
            value: String::new(),
            allowed: format!("the secret key of accessKey ({together})"),
        }),
        (None, Some(_)) => Err(CredentialsError {
            key: "accessKey",
            value: String::new(),
            allowed: format!("the access key that secretKey belongs to ({together})"),
        }),
        (None, None) if security_token.is_some() => Err(CredentialsError {
            key: "securityToken",
            value: "<hidden>".to_owned(),
            allowed: "none without accessKey and secretKey".to_owned(),
        }),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_keys_give_credentials_and_neither_gives_none() {
        let sk = Secret::from("sk");
        let token = Secret::from("tok");
        let c = credentials(Some("ak"), Some(&sk), Some(&token))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no credentials"));
        assert_eq!(c.access_key, "ak");
        assert_eq!(c.secret_key, "sk");
        assert_eq!(c.security_token.as_deref(), Some("tok"));
        assert_eq!(credentials(None, None, None), Ok(None));
        let blank = Secret::from(" ");
        assert_eq!(credentials(Some(""), Some(&blank), None), Ok(None));
    }

    #[test]
    fn one_key_without_the_other_names_both() {
        let sk = Secret::from("sk");
        for err in [
            credentials(Some("ak"), None, None).unwrap_err(),
            credentials(None, Some(&sk), None).unwrap_err(),
            credentials(Some("ak"), Some(&Secret::from("")), None).unwrap_err(),
        ] {
            let text = err.to_string();
            assert!(
                text.contains("accessKey") && text.contains("secretKey"),
                "{text}"
            );
            assert!(!text.contains("\"sk\""), "{text}");
        }
        let token = Secret::from("tok");
        let err = credentials(None, None, Some(&token)).unwrap_err();
        assert_eq!(err.key, "securityToken");
        assert!(!err.to_string().contains("tok"), "{err}");
    }

    #[test]
    fn secrets_read_as_strings_and_print_hidden() {
        let s: Secret = serde_json::from_str("\"pw\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.expose(), "pw");
        assert_eq!(format!("{s:?}"), "<hidden>");
        assert_eq!(
            serde_json::to_string(&s).unwrap_or_else(|e| panic!("{e}")),
            "\"pw\""
        );
    }
}
