//! The client side of TLS: which servers a client trusts, and the
//! certificate it shows a server that asks for one.

use std::{fmt, io, path::Path, sync::Arc};

use rustls::{
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::CryptoProvider,
    pki_types::{CertificateDer, ServerName, UnixTime},
    DigitallySignedStruct, SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::{client, TlsConnector};

use super::{certificates, private_key, provider, TlsError};

/// The TLS side of a client: which servers it trusts, and the
/// certificate it shows.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
    trusts: String,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("trusts", &self.trusts)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Trusts any server certificate (RocketMQ's clients' default, without
    /// `tls.client.authServer`): the connection is encrypted, but the
    /// server is not authenticated.
    ///
    /// # Errors
    /// [`TlsError::Rustls`] if the crypto provider lacks the default
    /// protocol versions.
    pub fn trust_any() -> Result<Self, TlsError> {
        Self::new(None, None)
    }

    /// Trusts the certificates of the PEM file `roots` (and what they
    /// signed).
    ///
    /// # Errors
    /// [`TlsError`] naming the file that cannot be read or a certificate
    /// rustls refuses.
    pub fn trust_roots(roots: &Path) -> Result<Self, TlsError> {
        Self::new(Some(roots), None)
    }

    /// A client trusting the certificates of `roots` (any server
    /// certificate when `None`) and showing the certificate chain and key
    /// of `identity` (PEM files) to servers that ask for one.
    ///
    /// # Errors
    /// [`TlsError`] naming the file that cannot be read, or what rustls
    /// refuses.
    pub fn new(roots: Option<&Path>, identity: Option<(&Path, &Path)>) -> Result<Self, TlsError> {
        let provider = provider();
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()?;
        let (builder, mut trusts) = match roots {
            None => (
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyServer(provider))),
                "any certificate".to_owned(),
            ),
            Some(roots) => {
                let mut store = rustls::RootCertStore::empty();
                for cert in certificates(roots, "trusted certificates")? {
                    store.add(cert)?;
                }
                (
                    builder.with_root_certificates(store),
                    format!("the certificates of {}", roots.display()),
                )
            }
        };
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                trusts.push_str(&format!(", showing {}", cert.display()));
                builder.with_client_auth_cert(
                    certificates(cert, "certificate chain")?,
                    private_key(key)?,
                )?
            }
        };
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            trusts,
        })
    }

    /// Runs the handshake on `stream`, to the server named by `addr`'s host
    /// part (`host:port`).
    pub(crate) async fn connect(
        &self,
        addr: &str,
        stream: TcpStream,
    ) -> io::Result<client::TlsStream<TcpStream>> {
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.connector.connect(name, stream).await
    }
}

/// Accepts any server certificate, still checking that the handshake is
/// signed by its key.
#[derive(Debug)]
struct AnyServer(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
