//! Authentication and authorization settings (`AuthSection`), with
//! RocketMQ 5.3's key names.

use serde::{Deserialize, Serialize};

use super::{invalid, ConfigError};

/// Keys whose values are secrets, masked wherever the configuration is
/// shown.
pub const SECRET_KEYS: &[&str] = &[
    "initAuthenticationUser",
    "innerClientAuthenticationCredentials",
];

/// Authentication and authorization settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct AuthSection {
    /// Every request must be signed by an enabled user (access key and
    /// HMAC-SHA1 signature); others are refused with `NO_PERMISSION`.
    /// Default false.
    pub authentication_enabled: bool,
    /// Every request must be allowed by its user's policies (super users
    /// pass); needs `authenticationEnabled`. Default false.
    pub authorization_enabled: bool,
    /// A super user created at start when missing, as JSON
    /// `{"username":"...","password":"..."}`. Default none.
    pub init_authentication_user: String,
    /// The credentials the broker signs its own requests with (its
    /// registrations with the name servers), as JSON
    /// `{"accessKey":"...","secretKey":"..."}`; created as a super user at
    /// start when missing. Name servers with authentication on accept only
    /// registrations signed with them. Default none.
    pub inner_client_authentication_credentials: String,
    /// Request codes (comma-separated numbers) served without
    /// authentication. Default none.
    pub authentication_whitelist: String,
    /// Request codes (comma-separated numbers) served without
    /// authorization. Default none.
    pub authorization_whitelist: String,
}

/// A user name and password from `initAuthenticationUser`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct InitUser {
    username: String,
    password: String,
}

impl AuthSection {
    /// The initial super user's name and password, if one is set.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] when the value is not the JSON expected.
    pub fn init_user(&self) -> Result<Option<(String, String)>, ConfigError> {
        let text = self.init_authentication_user.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let user: InitUser = serde_json::from_str(text)
            .ok()
            .filter(|u: &InitUser| !u.username.is_empty() && !u.password.is_empty())
            .ok_or_else(|| {
                invalid(
                    "initAuthenticationUser",
                    "(hidden)".into(),
                    r#"JSON {"username":"...","password":"..."} with both set"#.into(),
                )
            })?;
        Ok(Some((user.username, user.password)))
    }

    /// The broker's own credentials, if set.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] when the value is not the JSON expected.
    pub fn inner_credentials(
        &self,
    ) -> Result<Option<remoting_protocol::acl::Credentials>, ConfigError> {
        let text = self.inner_client_authentication_credentials.trim();
        if text.is_empty() {
            return Ok(None);
        }
        remoting_protocol::acl::Credentials::from_json(text)
            .map(Some)
            .ok_or_else(|| {
                invalid(
                    "innerClientAuthenticationCredentials",
                    "(hidden)".into(),
                    r#"JSON {"accessKey":"...","secretKey":"..."} with both set"#.into(),
                )
            })
    }

    /// The request codes of a whitelist key.
    fn codes(key: &str, text: &str) -> Result<Vec<i32>, ConfigError> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<i32>().map_err(|_| {
                    invalid(
                        key,
                        text.to_owned(),
                        "request codes, comma-separated numbers such as 34,46".into(),
                    )
                })
            })
            .collect()
    }

    /// The codes served without authentication.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a value that is not a list of numbers.
    pub fn authentication_whitelist(&self) -> Result<Vec<i32>, ConfigError> {
        Self::codes("authenticationWhitelist", &self.authentication_whitelist)
    }

    /// The codes served without authorization.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a value that is not a list of numbers.
    pub fn authorization_whitelist(&self) -> Result<Vec<i32>, ConfigError> {
        Self::codes("authorizationWhitelist", &self.authorization_whitelist)
    }

    /// Checks every value and the rules between them.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.authorization_enabled && !self.authentication_enabled {
            return Err(invalid(
                "authorizationEnabled",
                "true".into(),
                "true only with authenticationEnabled=true: without authentication a request's user is not known".into(),
            ));
        }
        self.init_user()?;
        self.inner_credentials()?;
        self.authentication_whitelist()?;
        self.authorization_whitelist()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_and_secrets_are_not_echoed() {
        let ok = AuthSection {
            authentication_enabled: true,
            authorization_enabled: true,
            init_authentication_user: r#"{"username":"admin","password":"pw"}"#.into(),
            inner_client_authentication_credentials: r#"{"accessKey":"b","secretKey":"s"}"#.into(),
            authentication_whitelist: "34, 46".into(),
            authorization_whitelist: String::new(),
        };
        ok.validate().unwrap();
        assert_eq!(ok.init_user().unwrap(), Some(("admin".into(), "pw".into())));
        assert_eq!(ok.inner_credentials().unwrap().unwrap().access_key, "b");
        assert_eq!(ok.authentication_whitelist().unwrap(), [34, 46]);
        for (bad, key) in [
            (
                AuthSection {
                    authentication_enabled: false,
                    ..ok.clone()
                },
                "authorizationEnabled",
            ),
            (
                AuthSection {
                    init_authentication_user: r#"{"username":"admin","password":""}"#.into(),
                    ..ok.clone()
                },
                "initAuthenticationUser",
            ),
            (
                AuthSection {
                    inner_client_authentication_credentials: "secret-text".into(),
                    ..ok.clone()
                },
                "innerClientAuthenticationCredentials",
            ),
            (
                AuthSection {
                    authorization_whitelist: "34,x".into(),
                    ..ok.clone()
                },
                "authorizationWhitelist",
            ),
        ] {
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
            assert!(!err.contains("secret-text"), "{err}");
        }
    }
}
