//! TLS on remoting connections, with RocketMQ's three server modes.
//!
//! A server with a [`ServerTls`] looks at the first byte each connection
//! sends: `0x16` opens a TLS handshake, anything else is a plain frame's
//! length. [`TlsMode::Disabled`] closes a connection that starts a
//! handshake, [`TlsMode::Enforcing`] one that does not, and
//! [`TlsMode::Permissive`] takes both on the same port. The certificate
//! and key come from PEM files and can be read again while the server runs
//! ([`ServerTls::reload`]): connections already open keep their session.
//!
//! A server may ask clients for certificates ([`ClientAuth`], RocketMQ's
//! `tls.server.need.client.auth`) and check them against its trusted
//! roots.
//!
//! A client with a [`ClientTls`] starts every connection with a handshake;
//! it trusts either the roots of a PEM file or, as RocketMQ's clients do by
//! default, any certificate, and may show a certificate of its own.

mod client;

pub use client::ClientTls;

use std::{
    fmt, io,
    path::{Path, PathBuf},
    str::FromStr,
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use rustls::{
    crypto::{ring, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::WebPkiClientVerifier,
};
use tokio::net::TcpStream;
use tokio_rustls::{server, TlsAcceptor};

/// The first byte of a TLS record that opens a handshake.
const TLS_HANDSHAKE: u8 = 0x16;

/// What a server port accepts (RocketMQ's `tls.server.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Plain connections only.
    #[default]
    Disabled,
    /// TLS and plain connections on the same port.
    Permissive,
    /// TLS connections only.
    Enforcing,
}

impl TlsMode {
    /// The mode's name as configured: `disabled`, `permissive` or
    /// `enforcing`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Permissive => "permissive",
            Self::Enforcing => "enforcing",
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TlsMode {
    type Err = String;

    /// Parses a mode name, ignoring case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Disabled, Self::Permissive, Self::Enforcing]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!("unknown TLS mode {s:?}: expected disabled, permissive or enforcing")
            })
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("cannot read the {what} {}: {reason}", path.display())]
    Pem {
        /// What the file should hold: `certificate chain`, `private key`
        /// or `trusted certificates`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// rustls refused the certificate, the key or the settings.
    #[error("TLS settings refused: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The TLS side of a server port: its mode and its certificate.
pub struct ServerTls {
    mode: TlsMode,
    cert: PathBuf,
    key: PathBuf,
    alpn: Vec<Vec<u8>>,
    client_auth: ClientAuth,
    acceptor: RwLock<TlsAcceptor>,
}

/// Whether a server asks its clients for certificates (RocketMQ's
/// `tls.server.need.client.auth`), and the roots it checks them with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// Clients show no certificate.
    #[default]
    None,
    /// A client may show one, which must then be signed by these roots
    /// (PEM file); clients without one are served too.
    Optional(PathBuf),
    /// A client must show one signed by these roots (PEM file).
    Require(PathBuf),
}

impl ClientAuth {
    /// Reads RocketMQ's `need.client.auth` value (`none`, `optional` or
    /// `require`, any case) with the roots file the last two need.
    ///
    /// # Errors
    /// What is wrong: an unknown value, or no roots for `optional` or
    /// `require`.
    pub fn from_settings(need: &str, roots: Option<&Path>) -> Result<Self, String> {
        let need = need.trim();
        let roots = || {
            roots.map(Path::to_path_buf).ok_or_else(|| {
                format!("client certificates ({need}) need the roots that sign them")
            })
        };
        if need.eq_ignore_ascii_case("none") || need.is_empty() {
            Ok(ClientAuth::None)
        } else if need.eq_ignore_ascii_case("optional") {
            Ok(ClientAuth::Optional(roots()?))
        } else if need.eq_ignore_ascii_case("require") {
            Ok(ClientAuth::Require(roots()?))
        } else {
            Err(format!("unknown value {need:?}: none, optional or require"))
        }
    }
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("mode", &self.mode)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// A server side in `mode` with the certificate chain in `cert` and its
    /// private key in `key` (PEM files), read now.
    ///
    /// # Errors
    /// [`TlsError`] naming the file that cannot be read or the setting that
    /// rustls refuses.
    pub fn from_pem_files(mode: TlsMode, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Self::with_alpn(mode, cert, key, Vec::new())
    }

    /// [`ServerTls::from_pem_files`] offering the application protocols
    /// `alpn` in the handshake (`h2` for gRPC).
    ///
    /// # Errors
    /// As [`ServerTls::from_pem_files`].
    pub fn with_alpn(
        mode: TlsMode,
        cert: &Path,
        key: &Path,
        alpn: Vec<Vec<u8>>,
    ) -> Result<Self, TlsError> {
        let acceptor = acceptor(cert, key, &alpn, &ClientAuth::None)?;
        Ok(Self {
            mode,
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            alpn,
            client_auth: ClientAuth::None,
            acceptor: RwLock::new(acceptor),
        })
    }

    /// This server side asking clients for certificates as `auth` says;
    /// its roots are read now and again on each [`ServerTls::reload`].
    ///
    /// # Errors
    /// [`TlsError`] naming the roots file that cannot be read, or what
    /// rustls refuses.
    pub fn with_client_auth(mut self, auth: ClientAuth) -> Result<Self, TlsError> {
        let fresh = acceptor(&self.cert, &self.key, &self.alpn, &auth)?;
        self.client_auth = auth;
        self.acceptor = RwLock::new(fresh);
        Ok(self)
    }

    /// The port's mode.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// Reads the certificate and key files again; connections accepted
    /// from now on use them. On error the ones in use stay.
    ///
    /// # Errors
    /// As [`ServerTls::from_pem_files`].
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = acceptor(&self.cert, &self.key, &self.alpn, &self.client_auth)?;
        *self
            .acceptor
            .write()
            .unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }

    /// Reads the files again on each SIGHUP (see [`ServerTls::reload`])
    /// for as long as `tls` lives, logging what happened; `port` names
    /// the port in the log. Call it on a tokio runtime.
    pub fn reload_on_sighup(tls: &Arc<ServerTls>, port: &'static str) {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(port, cause = %e, "cannot watch SIGHUP; TLS files are read at start only");
                return;
            }
        };
        let tls = Arc::downgrade(tls);
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let Some(tls) = tls.upgrade() else { return };
                match tls.reload() {
                    Ok(()) => tracing::info!(port, "SIGHUP: TLS certificate and key read again"),
                    Err(e) => tracing::error!(port, cause = %e,
                        "SIGHUP: cannot read the TLS files again; the ones in use stay"),
                }
            }
        });
    }

    fn acceptor(&self) -> TlsAcceptor {
        self.acceptor
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

fn acceptor(
    cert: &Path,
    key: &Path,
    alpn: &[Vec<u8>],
    client_auth: &ClientAuth,
) -> Result<TlsAcceptor, TlsError> {
    let chain = certificates(cert, "certificate chain")?;
    let key = private_key(key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Optional(roots) | ClientAuth::Require(roots) => {
            let mut store = rustls::RootCertStore::empty();
            for cert in certificates(roots, "trusted client certificates")? {
                store.add(cert)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider());
            let verifier = if matches!(client_auth, ClientAuth::Optional(_)) {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_string())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = alpn.to_vec();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The private key of a PEM file.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Pem {
        what: "private key",
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Every certificate of a PEM file; at least one.
fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let error = |reason: String| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(e.to_string()))?;
    if certs.is_empty() {
        return Err(error("no certificate in it".into()));
    }
    Ok(certs)
}

/// What a port in some mode makes of a connection's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// A plain remoting frame, served as it is.
    Plain,
    /// A TLS handshake, served after it completes.
    Tls,
    /// A TLS handshake on a port where TLS is disabled: closed.
    RefusedTls,
    /// A plain frame on a port where TLS is enforced: closed.
    RefusedPlain,
}

/// Tells a TLS handshake (first byte `0x16`) from a plain frame and says
/// what a port in `mode` does with it.
pub fn sniff(mode: TlsMode, first: u8) -> Sniffed {
    match (mode, first == TLS_HANDSHAKE) {
        (TlsMode::Disabled, true) => Sniffed::RefusedTls,
        (TlsMode::Enforcing, false) => Sniffed::RefusedPlain,
        (_, false) => Sniffed::Plain,
        (_, true) => Sniffed::Tls,
    }
}

/// A server's side of a TLS connection.
pub type TlsServerStream = server::TlsStream<TcpStream>;

/// An accepted connection after the first byte was looked at.
#[derive(Debug)]
pub enum Accepted {
    /// It speaks plain.
    Plain(TcpStream),
    /// It completed a TLS handshake.
    Tls(Box<TlsServerStream>),
}

/// Why an accepted connection was closed before its first frame.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// A handshake on a port where TLS is disabled.
    #[error("it started a TLS handshake, and TLS is disabled on this port")]
    TlsDisabled,
    /// No handshake on a port where TLS is enforced.
    #[error("it did not start a TLS handshake, and TLS is enforced on this port")]
    TlsEnforced,
    /// Nothing arrived within the limit.
    #[error("it sent nothing within {0:?}")]
    Silent(Duration),
    /// The peer closed first.
    #[error("it closed before sending anything")]
    Closed,
    /// The handshake failed.
    #[error("the TLS handshake failed: {0}")]
    Handshake(io::Error),
    /// The handshake took too long.
    #[error("the TLS handshake did not finish within {0:?}")]
    HandshakeTimeout(Duration),
    /// Reading failed.
    #[error("reading its first byte failed: {0}")]
    Io(io::Error),
}

/// Looks at the first byte `stream` sends (waiting up to `silence`, or
/// without end when `None`, as for a plain connection's idle limit) and,
/// as `tls`'s mode allows, hands it back plain or after a TLS handshake
/// that must finish within `handshake`.
///
/// # Errors
/// [`Refused`]: why the connection is to be closed.
pub async fn negotiate(
    tls: &ServerTls,
    stream: TcpStream,
    silence: Option<Duration>,
    handshake: Duration,
) -> Result<Accepted, Refused> {
    let mut first = [0u8; 1];
    let peeked = match silence {
        Some(limit) => tokio::time::timeout(limit, stream.peek(&mut first))
            .await
            .map_err(|_| Refused::Silent(limit))?,
        None => stream.peek(&mut first).await,
    }
    .map_err(Refused::Io)?;
    if peeked == 0 {
        return Err(Refused::Closed);
    }
    match sniff(tls.mode, first[0]) {
        Sniffed::RefusedTls => Err(Refused::TlsDisabled),
        Sniffed::RefusedPlain => Err(Refused::TlsEnforced),
        Sniffed::Plain => Ok(Accepted::Plain(stream)),
        Sniffed::Tls => {
            let session = tokio::time::timeout(handshake, tls.acceptor().accept(stream))
                .await
                .map_err(|_| Refused::HandshakeTimeout(handshake))?
                .map_err(Refused::Handshake)?;
            Ok(Accepted::Tls(Box::new(session)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_byte_and_the_mode_decide() {
        use Sniffed::{Plain, RefusedPlain, RefusedTls, Tls};
        for (mode, handshake, other) in [
            (TlsMode::Disabled, RefusedTls, Plain),
            (TlsMode::Permissive, Tls, Plain),
            (TlsMode::Enforcing, Tls, RefusedPlain),
        ] {
            assert_eq!(sniff(mode, 0x16), handshake, "{mode}");
            // A plain frame starts with its length's high byte: 0 for any
            // frame under 16 MiB.
            for first in [0x00, 0x15, 0x17, 0xff] {
                assert_eq!(sniff(mode, first), other, "{mode} {first:#x}");
            }
        }
    }

    #[test]
    fn modes_parse_by_name_ignoring_case_and_name_the_choices_otherwise() {
        assert_eq!("Permissive".parse::<TlsMode>(), Ok(TlsMode::Permissive));
        assert_eq!(" enforcing ".parse::<TlsMode>(), Ok(TlsMode::Enforcing));
        assert_eq!("disabled".parse::<TlsMode>(), Ok(TlsMode::Disabled));
        let err = "on".parse::<TlsMode>().unwrap_err();
        assert!(err.contains("disabled, permissive or enforcing"), "{err}");
        assert_eq!(TlsMode::default(), TlsMode::Disabled);
    }

    #[test]
    fn a_missing_or_empty_pem_file_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.pem");
        let err = ServerTls::from_pem_files(TlsMode::Permissive, &missing, &missing).unwrap_err();
        assert!(err.to_string().contains("none.pem"), "{err}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let err = ClientTls::trust_roots(&empty).unwrap_err();
        assert!(err.to_string().contains("no certificate"), "{err}");
    }
}
