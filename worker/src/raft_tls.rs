//! Mutual TLS for the Raft RPC port: the rustls server and client configurations built from the
//! `[tls]` table of `worker.toml` (see [`crate::worker_config::TlsConfig`]).
//!
//! Both sides use the ring provider explicitly (no process-wide default is installed) and trust
//! only the configured CA: the server requires a client certificate chained to it, the client
//! checks the peer's server certificate against it and presents this worker's certificate.
//!
//! The PEM files are read here, when the node starts; every error names the config field and
//! the file, and none carries file contents (the key file holds a secret).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::worker_config::TlsConfig;

/// Why the `[tls]` files could not be turned into a TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A file could not be read.
    #[error("cannot read {field} {}: {reason}", file.display())]
    Read {
        /// The config field naming the file.
        field: &'static str,
        /// The file.
        file: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// A file was read but does not hold what it should (no PEM item of the right kind, or
    /// malformed PEM).
    #[error("{field} {}: {reason}", file.display())]
    Pem {
        /// The config field naming the file.
        field: &'static str,
        /// The file.
        file: PathBuf,
        /// What is wrong, without the file's contents.
        reason: &'static str,
    },
    /// rustls refused the material (a CA certificate it cannot parse, a key that does not
    /// match the certificate, an unsupported key type).
    #[error("tls setup failed for {what}: {reason}")]
    Rejected {
        /// Which part: the CA file, or the certificate and key.
        what: String,
        /// rustls' reason.
        reason: String,
    },
}

impl TlsSetupError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            TlsSetupError::Read { .. } => "tls_file_unreadable",
            TlsSetupError::Pem { .. } => "tls_file_invalid",
            TlsSetupError::Rejected { .. } => "tls_setup_failed",
        }
    }
}

/// The Raft port's TLS: a server configuration requiring client certificates, and a client
/// configuration presenting this worker's certificate.
#[derive(Clone)]
pub struct RaftTls {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for RaftTls {
    // the configurations hold the private key: show nothing of them
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftTls").finish_non_exhaustive()
    }
}

impl RaftTls {
    /// Reads the certificate, key and CA files and builds both configurations.
    pub fn load(config: &TlsConfig) -> Result<RaftTls, TlsSetupError> {
        let Material {
            certs,
            key,
            roots,
            ca_what,
            pair_what,
        } = Material::load(config, ["tls.cert_file", "tls.key_file", "tls.ca_file"])?;
        let rejected = |what: String| {
            move |e: rustls::Error| TlsSetupError::Rejected {
                what,
                reason: rustls_reason(&e),
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());

        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| TlsSetupError::Rejected {
                what: ca_what.clone(),
                reason: e.to_string(),
            })?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(rejected(pair_what.clone()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(rejected(pair_what.clone()))?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(rejected(pair_what.clone()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(rejected(pair_what.clone()))?;
        Ok(RaftTls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// The server side, for the Raft RPC listener.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }
}

/// A certificate chain, its key and the trusted CAs, read from a `[tls]`-shaped table whose
/// fields are named `fields` (cert, key, CA) in errors.
pub(crate) struct Material {
    /// This worker's certificate chain.
    pub certs: Vec<CertificateDer<'static>>,
    /// Its private key.
    pub key: PrivateKeyDer<'static>,
    /// The CA certificates, the only roots trusted.
    pub roots: Arc<RootCertStore>,
    /// How errors name the CA file.
    pub ca_what: String,
    /// How errors name the certificate and key pair.
    pub pair_what: String,
}

impl Material {
    /// Reads the three files (the only I/O of the TLS setup).
    pub fn load(config: &TlsConfig, fields: [&'static str; 3]) -> Result<Self, TlsSetupError> {
        let [cert_field, key_field, ca_field] = fields;
        let certs = read_certs(cert_field, &config.cert_file)?;
        let roots = read_roots(ca_field, &config.ca_file)?;
        let key_pem = read(key_field, &config.key_file)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsSetupError::Pem {
            field: key_field,
            file: config.key_file.clone(),
            reason: pem_reason(&e, "holds no private key"),
        })?;
        let ca_what = format!("{ca_field} {}", config.ca_file.display());
        let pair_what = format!(
            "{cert_field} {} with {key_field} {}",
            config.cert_file.display(),
            config.key_file.display()
        );
        Ok(Material {
            certs,
            key,
            roots,
            ca_what,
            pair_what,
        })
    }
}

/// `https` when the Raft port speaks TLS, `http` otherwise.
pub fn scheme(tls: Option<&RaftTls>) -> &'static str {
    if tls.is_some() {
        "https"
    } else {
        "http"
    }
}

/// `builder` set up to call peers' Raft ports: with this worker's client certificate and the
/// cluster CA as the only root when TLS is on; unchanged otherwise.
pub fn client_builder(
    tls: Option<&RaftTls>,
    builder: reqwest::ClientBuilder,
) -> reqwest::ClientBuilder {
    match tls {
        Some(t) => builder.use_preconfigured_tls(ClientConfig::clone(&t.client)),
        None => builder,
    }
}

fn read(field: &'static str, file: &Path) -> Result<Vec<u8>, TlsSetupError> {
    std::fs::read(file).map_err(|e| TlsSetupError::Read {
        field,
        file: file.to_path_buf(),
        reason: e.to_string(),
    })
}

fn read_certs(
    field: &'static str,
    file: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let bytes = read(field, file)?;
    let invalid = |reason| TlsSetupError::Pem {
        field,
        file: file.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(pem_reason(&e, "holds no certificate")))?;
    if certs.is_empty() {
        return Err(invalid("holds no certificate"));
    }
    Ok(certs)
}

/// The CA certificates of `file` (named `field` in errors) as the only roots to trust.
pub(crate) fn read_roots(
    field: &'static str,
    file: &Path,
) -> Result<Arc<RootCertStore>, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    for ca in read_certs(field, file)? {
        roots.add(ca).map_err(|e| TlsSetupError::Rejected {
            what: format!("{field} {}", file.display()),
            reason: rustls_reason(&e),
        })?;
    }
    Ok(Arc::new(roots))
}

/// rustls' reason, in plain words where rustls' own is terse.
pub(crate) fn rustls_reason(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the private key does not belong to the certificate".into()
        }
        other => other.to_string(),
    }
}

/// A reason that never quotes the file (the PEM errors can carry a line of it).
fn pem_reason(e: &pem::Error, none_found: &'static str) -> &'static str {
    match e {
        pem::Error::NoItemsFound => none_found,
        _ => "is not valid PEM",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path) -> TlsConfig {
        TlsConfig {
            cert_file: dir.join("node.pem"),
            key_file: dir.join("node.key"),
            ca_file: dir.join("ca.pem"),
        }
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "capstan-raft-tls-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_missing_file_is_named_with_its_field() {
        let dir = tempdir();
        let e = RaftTls::load(&config(&dir.join("absent"))).unwrap_err();
        assert_eq!(e.code(), "tls_file_unreadable");
        let msg = e.to_string();
        assert!(msg.contains("tls.cert_file"), "{msg}");
        assert!(msg.contains("node.pem"), "{msg}");
    }

    #[test]
    fn files_without_pem_items_are_named_and_not_quoted() {
        let dir = tempdir();
        let c = config(&dir);
        std::fs::write(&c.cert_file, "not a certificate at all\n").unwrap();
        let e = RaftTls::load(&c).unwrap_err();
        assert_eq!(e.code(), "tls_file_invalid");
        assert!(e.to_string().contains("tls.cert_file"), "{e}");
        assert!(e.to_string().contains("holds no certificate"), "{e}");

        // a malformed block: the error does not quote the file
        std::fs::write(
            &c.cert_file,
            "-----BEGIN CERTIFICATE-----\nc2VjcmV0!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = RaftTls::load(&c).unwrap_err();
        assert!(e.to_string().contains("is not valid PEM"), "{e}");
        assert!(!e.to_string().contains("c2VjcmV0"), "{e}");
    }

    #[test]
    fn the_scheme_follows_the_tls_setting() {
        assert_eq!(scheme(None), "http");
    }
}
