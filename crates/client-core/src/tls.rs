//! The TLS settings every client shares (RocketMQ's `useTLS`,
//! `tlsClientTrustCertPath`, `tlsClientCertPath` and `tlsClientKeyPath`):
//! checked together and turned into the [`ClientTls`] that every
//! connection of the client, to brokers and name servers alike, starts
//! with.

use std::path::Path;

use remoting_net::{ClientTls, TlsError};
use thiserror::Error;

/// The key that turns TLS on.
pub const USE_TLS: &str = "useTLS";
/// The key of the PEM file of the certificates a client trusts.
pub const TLS_CLIENT_TRUST_CERT_PATH: &str = "tlsClientTrustCertPath";
/// The key of the PEM file of the certificate chain a client shows.
pub const TLS_CLIENT_CERT_PATH: &str = "tlsClientCertPath";
/// The key of the PEM file of the private key of the certificate a client
/// shows.
pub const TLS_CLIENT_KEY_PATH: &str = "tlsClientKeyPath";

/// A client's TLS settings, as its configuration gives them. A path that is
/// empty or blank counts as not given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TlsSettings<'a> {
    /// `useTLS`: every connection starts with a TLS handshake.
    pub use_tls: bool,
    /// `tlsClientTrustCertPath`: the PEM file of the certificates the
    /// client trusts (and what they signed); without one, any server
    /// certificate is taken.
    pub trust_cert_path: Option<&'a Path>,
    /// `tlsClientCertPath`: the PEM file of the certificate chain the client
    /// shows servers that ask for one.
    pub cert_path: Option<&'a Path>,
    /// `tlsClientKeyPath`: the PEM file of that certificate's private key.
    pub key_path: Option<&'a Path>,
}

/// TLS settings that do not go together, or a file they name that cannot
/// be used; the fields are those of the clients' `Config` errors.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{key} = {value:?}; allowed: {allowed}")]
pub struct TlsSettingsError {
    /// The key at fault (RocketMQ's name).
    pub key: &'static str,
    /// Its value: the file, for a file that cannot be used.
    pub value: String,
    /// What is allowed, and for a file what is wrong with it.
    pub allowed: String,
}

/// The TLS of `settings` for every connection of a client: `None` when
/// `useTLS` is false (connections are plain). The files are read now.
///
/// # Errors
/// [`TlsSettingsError`] when only one of `tlsClientCertPath` and
/// `tlsClientKeyPath` is given (naming both), when a path is given without
/// `useTLS` (naming `useTLS`), or when a file cannot be read or holds
/// nothing usable (naming its key and the file).
pub fn client_tls(settings: TlsSettings<'_>) -> Result<Option<ClientTls>, TlsSettingsError> {
    fn given(path: Option<&Path>) -> Option<&Path> {
        path.filter(|p| !p.to_string_lossy().trim().is_empty())
    }
    let trust = given(settings.trust_cert_path);
    let cert = given(settings.cert_path);
    let key = given(settings.key_path);
    let together = format!(
        "{TLS_CLIENT_CERT_PATH} and {TLS_CLIENT_KEY_PATH} are given together or not at all"
    );
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (Some(_), None) => {
            return Err(TlsSettingsError {
                key: TLS_CLIENT_KEY_PATH,
                value: String::new(),
                allowed: format!(
                    "the PEM file of the private key of {TLS_CLIENT_CERT_PATH} ({together})"
                ),
            })
        }
        (None, Some(_)) => {
            return Err(TlsSettingsError {
                key: TLS_CLIENT_CERT_PATH,
                value: String::new(),
                allowed: format!(
                    "the PEM file of the certificate chain whose private key is \
                     {TLS_CLIENT_KEY_PATH} ({together})"
                ),
            })
        }
        (None, None) => None,
    };
    if !settings.use_tls {
        let paths: Vec<&str> = [
            (TLS_CLIENT_TRUST_CERT_PATH, trust.is_some()),
            (TLS_CLIENT_CERT_PATH, cert.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect();
        if paths.is_empty() {
            return Ok(None);
        }
        return Err(TlsSettingsError {
            key: USE_TLS,
            value: "false".to_owned(),
            allowed: format!(
                "true when {} is given (the paths are TLS settings)",
                paths.join(" and ")
            ),
        });
    }
    ClientTls::new(trust, identity)
        .map(Some)
        .map_err(|e| blame(e, trust, identity))
}

/// The key at fault for `error`, raised building TLS from the roots
/// `trust` and the certificate and key of `identity`.
fn blame(
    error: TlsError,
    trust: Option<&Path>,
    identity: Option<(&Path, &Path)>,
) -> TlsSettingsError {
    match error {
        // The roots are read first, then the certificate chain, then the key.
        TlsError::Pem { what, path, reason } => {
            let key = if Some(path.as_path()) == trust {
                TLS_CLIENT_TRUST_CERT_PATH
            } else if Some(path.as_path()) == identity.map(|(cert, _)| cert) {
                TLS_CLIENT_CERT_PATH
            } else if Some(path.as_path()) == identity.map(|(_, key)| key) {
                TLS_CLIENT_KEY_PATH
            } else {
                USE_TLS
            };
            TlsSettingsError {
                key,
                value: path.display().to_string(),
                allowed: format!("a readable PEM file of the {what}; this one: {reason}"),
            }
        }
        other => {
            // Refused by rustls: a root of its own, or else the certificate
            // with its key.
            let roots_refused = trust.is_some_and(|t| ClientTls::new(Some(t), None).is_err());
            match (trust, identity) {
                (Some(trust), _) if roots_refused => TlsSettingsError {
                    key: TLS_CLIENT_TRUST_CERT_PATH,
                    value: trust.display().to_string(),
                    allowed: format!("certificates TLS accepts as roots; these: {other}"),
                },
                (_, Some((cert, key))) => TlsSettingsError {
                    key: TLS_CLIENT_CERT_PATH,
                    value: cert.display().to_string(),
                    allowed: format!(
                        "a certificate chain TLS accepts, whose private key is \
                         {TLS_CLIENT_KEY_PATH} ({}); these: {other}",
                        key.display()
                    ),
                },
                _ => TlsSettingsError {
                    key: USE_TLS,
                    value: "true".to_owned(),
                    allowed: format!("false here: TLS cannot be set up ({other})"),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// Writes a self-signed certificate and its key into `dir`.
    fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        let (crt, key) = (dir.join("client.crt"), dir.join("client.key"));
        std::fs::write(&crt, cert.cert.pem()).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap_or_else(|e| panic!("{e}"));
        (crt, key)
    }

    fn tempdir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn without_use_tls_connections_are_plain_and_with_it_any_server_is_trusted() {
        assert!(matches!(client_tls(TlsSettings::default()), Ok(None)));
        let blank = Path::new(" ");
        let blanks = TlsSettings {
            trust_cert_path: Some(blank),
            cert_path: Some(Path::new("")),
            key_path: Some(blank),
            ..TlsSettings::default()
        };
        assert!(matches!(client_tls(blanks), Ok(None)));
        let tls = client_tls(TlsSettings {
            use_tls: true,
            ..TlsSettings::default()
        })
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no TLS"));
        assert!(format!("{tls:?}").contains("any certificate"), "{tls:?}");
    }

    #[test]
    fn readable_roots_and_identity_are_taken() {
        let dir = tempdir();
        let (crt, key) = certificate(dir.path());
        let tls = client_tls(TlsSettings {
            use_tls: true,
            trust_cert_path: Some(&crt),
            cert_path: Some(&crt),
            key_path: Some(&key),
        })
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no TLS"));
        let shown = format!("{tls:?}");
        assert!(
            shown.contains("client.crt") && !shown.contains("any certificate"),
            "{shown}"
        );
    }

    #[test]
    fn a_certificate_without_its_key_or_the_reverse_names_both() {
        let path = Path::new("client.pem");
        for settings in [
            TlsSettings {
                use_tls: true,
                cert_path: Some(path),
                ..TlsSettings::default()
            },
            TlsSettings {
                use_tls: true,
                key_path: Some(path),
                ..TlsSettings::default()
            },
        ] {
            let err = client_tls(settings).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(TLS_CLIENT_CERT_PATH) && text.contains(TLS_CLIENT_KEY_PATH),
                "{text}"
            );
        }
    }

    #[test]
    fn a_path_without_use_tls_names_use_tls() {
        let dir = tempdir();
        let (crt, key) = certificate(dir.path());
        let trust_only = TlsSettings {
            trust_cert_path: Some(&crt),
            ..TlsSettings::default()
        };
        let err = client_tls(trust_only).unwrap_err();
        assert_eq!(err.key, USE_TLS);
        assert!(err.allowed.contains(TLS_CLIENT_TRUST_CERT_PATH), "{err}");
        let identity_only = TlsSettings {
            cert_path: Some(&crt),
            key_path: Some(&key),
            ..TlsSettings::default()
        };
        let err = client_tls(identity_only).unwrap_err();
        assert_eq!(err.key, USE_TLS);
        assert!(err.allowed.contains(TLS_CLIENT_CERT_PATH), "{err}");
    }

    #[test]
    fn a_file_that_cannot_be_used_names_its_key_and_the_file() {
        let dir = tempdir();
        let (crt, key) = certificate(dir.path());
        let missing = dir.path().join("missing.pem");
        let not_pem = dir.path().join("not.pem");
        std::fs::write(&not_pem, "not a certificate").unwrap_or_else(|e| panic!("{e}"));
        let cases = [
            (
                Some(missing.as_path()),
                None,
                TLS_CLIENT_TRUST_CERT_PATH,
                &missing,
            ),
            (
                Some(not_pem.as_path()),
                None,
                TLS_CLIENT_TRUST_CERT_PATH,
                &not_pem,
            ),
            (
                None,
                Some((missing.as_path(), key.as_path())),
                TLS_CLIENT_CERT_PATH,
                &missing,
            ),
            (
                None,
                Some((crt.as_path(), not_pem.as_path())),
                TLS_CLIENT_KEY_PATH,
                &not_pem,
            ),
        ];
        for (trust, identity, at_fault, file) in cases {
            let err = client_tls(TlsSettings {
                use_tls: true,
                trust_cert_path: trust,
                cert_path: identity.map(|(c, _)| c),
                key_path: identity.map(|(_, k)| k),
            })
            .unwrap_err();
            assert_eq!(err.key, at_fault, "{err}");
            assert_eq!(err.value, file.display().to_string(), "{err}");
        }
    }

    #[test]
    fn what_tls_refuses_is_blamed_on_the_roots_or_on_the_certificate_and_its_key() {
        let dir = tempdir();
        let (crt, _) = certificate(dir.path());
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap_or_else(|e| panic!("{e}"));
        let (_, other_key) = certificate(&other);
        let err = client_tls(TlsSettings {
            use_tls: true,
            trust_cert_path: Some(&crt),
            cert_path: Some(&crt),
            key_path: Some(&other_key),
        })
        .unwrap_err();
        assert_eq!(err.key, TLS_CLIENT_CERT_PATH, "{err}");
        assert_eq!(err.value, crt.display().to_string(), "{err}");
        assert!(err.allowed.contains(TLS_CLIENT_KEY_PATH), "{err}");

        // A PEM block that is no certificate is refused as a root.
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let err = client_tls(TlsSettings {
            use_tls: true,
            trust_cert_path: Some(&garbage),
            cert_path: Some(&crt),
            key_path: Some(&other_key),
        })
        .unwrap_err();
        assert_eq!(err.key, TLS_CLIENT_TRUST_CERT_PATH, "{err}");
        assert_eq!(err.value, garbage.display().to_string(), "{err}");
    }
}
