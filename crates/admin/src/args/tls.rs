//! The TLS flags of `sluice-admin`: `--tls`, `--tls-trust`, `--tls-cert`
//! and `--tls-key`, for every connection the tool makes.

use std::path::PathBuf;

use clap::Args;
use client_core::{
    TlsSettings, TLS_CLIENT_CERT_PATH, TLS_CLIENT_KEY_PATH, TLS_CLIENT_TRUST_CERT_PATH, USE_TLS,
};
use remoting_net::ClientTls;

use crate::error::AdminError;

/// TLS of every connection, to name servers and brokers alike (RocketMQ's
/// `useTLS` and its client's certificate settings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct TlsArgs {
    /// Make every connection over TLS, for servers whose TLS mode is
    /// enforcing or permissive. Any server certificate is trusted (the
    /// connection is encrypted, the server not authenticated) unless
    /// --tls-trust names the certificates to trust.
    #[arg(long, global = true)]
    pub tls: bool,
    /// PEM file of the certificates to trust instead of any: a server's
    /// certificate must be one of them or signed by one. Needs --tls.
    #[arg(long, global = true, value_name = "PEM")]
    pub tls_trust: Option<PathBuf>,
    /// PEM file of the certificate chain shown to servers that ask for
    /// one. Needs --tls and --tls-key.
    #[arg(long, global = true, value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// PEM file of the private key of --tls-cert. Needs --tls and
    /// --tls-cert.
    #[arg(long, global = true, value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
}

/// The flag of each TLS setting, by its configuration key.
const FLAGS: [(&str, &str); 4] = [
    (USE_TLS, "--tls"),
    (TLS_CLIENT_TRUST_CERT_PATH, "--tls-trust"),
    (TLS_CLIENT_CERT_PATH, "--tls-cert"),
    (TLS_CLIENT_KEY_PATH, "--tls-key"),
];

impl TlsArgs {
    /// The TLS every connection starts with; `None` without `--tls`. The
    /// files are read now.
    ///
    /// # Errors
    /// [`AdminError::Tls`] naming the flag at fault: a path flag without
    /// `--tls`, `--tls-cert` without `--tls-key` or the reverse, or a file
    /// that cannot be read or holds nothing usable.
    pub fn client_tls(&self) -> Result<Option<ClientTls>, AdminError> {
        // Checked here rather than by the parser, which does not see a
        // global flag given before the subcommand when checking one given
        // after it.
        let paths = [
            ("--tls-trust", &self.tls_trust),
            ("--tls-cert", &self.tls_cert),
            ("--tls-key", &self.tls_key),
        ];
        let refused = |flag: &'static str, path: &PathBuf, allowed: &str| AdminError::Tls {
            flag,
            value: path.display().to_string(),
            allowed: allowed.to_owned(),
        };
        if let Some((flag, Some(path))) = paths.iter().find(|(_, p)| p.is_some()) {
            if !self.tls {
                return Err(refused(flag, path, "only with --tls"));
            }
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), None) => {
                return Err(refused(
                    "--tls-cert",
                    cert,
                    "only with --tls-key, the certificate's private key",
                ))
            }
            (None, Some(key)) => {
                return Err(refused(
                    "--tls-key",
                    key,
                    "only with --tls-cert, the certificate it is the private key of",
                ))
            }
            _ => {}
        }
        let flag_of = |key: &str| {
            FLAGS
                .iter()
                .find(|(k, _)| *k == key)
                .map_or("--tls", |(_, flag)| flag)
        };
        client_core::client_tls(TlsSettings {
            use_tls: self.tls,
            trust_cert_path: self.tls_trust.as_deref(),
            cert_path: self.tls_cert.as_deref(),
            key_path: self.tls_key.as_deref(),
        })
        .map_err(|e| {
            let mut allowed = e.allowed;
            for (key, flag) in FLAGS {
                allowed = allowed.replace(key, flag);
            }
            AdminError::Tls {
                flag: flag_of(e.key),
                value: e.value,
                allowed,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::Cli;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("sluice-admin").chain(args.iter().copied()))
    }

    #[test]
    fn tls_is_off_by_default_and_the_flags_go_anywhere() {
        let cli = parse(&["cluster"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cli.tls, super::TlsArgs::default());
        assert!(matches!(cli.tls.client_tls(), Ok(None)));
        let cli = parse(&[
            "--tls",
            "topic",
            "list",
            "--tls-trust",
            "/ca.pem",
            "--tls-cert",
            "/c.pem",
            "--tls-key",
            "/k.pem",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(cli.tls.tls);
        assert_eq!(cli.tls.tls_trust, Some("/ca.pem".into()));
        assert_eq!(cli.tls.tls_cert, Some("/c.pem".into()));
        assert_eq!(cli.tls.tls_key, Some("/k.pem".into()));
        let any = parse(&["cluster", "--tls"]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(any.tls.client_tls(), Ok(Some(_))));
    }

    #[test]
    fn path_flags_need_tls_and_the_certificate_and_key_need_each_other() {
        for (args, flag, needs) in [
            (
                &["cluster", "--tls-trust", "/ca.pem"][..],
                "--tls-trust",
                "--tls",
            ),
            (
                &["--tls-cert", "/c", "cluster", "--tls-key", "/k"],
                "--tls-cert",
                "--tls",
            ),
            (
                &["--tls", "cluster", "--tls-cert", "/c"],
                "--tls-cert",
                "--tls-key",
            ),
            (
                &["cluster", "--tls", "--tls-key", "/k"],
                "--tls-key",
                "--tls-cert",
            ),
        ] {
            let cli = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let err = cli.tls.client_tls().map(|_| ()).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(flag) && text.contains(&format!("only with {needs}")),
                "{args:?}: {text}"
            );
        }
    }

    #[test]
    fn a_file_that_cannot_be_read_names_its_flag_and_the_file() {
        let missing = std::env::temp_dir().join("sluice-no-such-dir/ca.pem");
        let cli = parse(&[
            "cluster",
            "--tls",
            "--tls-trust",
            &missing.to_string_lossy(),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let text = cli.tls.client_tls().map(|_| ()).unwrap_err().to_string();
        assert!(text.starts_with("--tls-trust"), "{text}");
        assert!(text.contains(&*missing.to_string_lossy()), "{text}");
    }
}
