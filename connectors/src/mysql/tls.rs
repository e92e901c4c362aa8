//! TLS for the dump connection: a rustls client configuration per [`TlsChoice`].
//!
//! `verify_ca` checks the certificate chain against the configured CA file and nothing else:
//! MySQL's auto-generated certificates name no host (VERIFY_CA in MySQL's terms). It reuses
//! rustls' WebPKI verifier and forgives only the name mismatch, which that verifier reports
//! after the chain, validity period and signature checks have passed. `verify_none` accepts
//! any certificate but still checks the handshake signatures.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{Error as TlsError, SignatureScheme};

use super::source_config::TlsChoice;
use super::source_error::SourceError;

/// Builds the rustls client configuration for `choice` (`None` for `Disabled`). Reads the
/// CA file.
pub(crate) fn client_config(choice: &TlsChoice) -> Result<Option<Arc<ClientConfig>>, SourceError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|_| SourceError::TlsFailed {
            reason: "protocol versions",
        })?;
    let verifier: Arc<dyn ServerCertVerifier> = match choice {
        TlsChoice::Disabled => return Ok(None),
        TlsChoice::VerifyNone => Arc::new(AcceptAnyCertificate { provider }),
        TlsChoice::VerifyCa(path) => {
            let mut roots = RootCertStore::empty();
            let certs =
                CertificateDer::pem_file_iter(path).map_err(|_| SourceError::TlsFailed {
                    reason: "ca_file unreadable",
                })?;
            for cert in certs {
                let cert = cert.map_err(|_| SourceError::TlsFailed {
                    reason: "ca_file malformed",
                })?;
                roots.add(cert).map_err(|_| SourceError::TlsFailed {
                    reason: "ca_file certificate rejected",
                })?;
            }
            if roots.is_empty() {
                return Err(SourceError::TlsFailed {
                    reason: "ca_file has no certificate",
                });
            }
            let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|_| SourceError::TlsFailed {
                    reason: "ca verifier",
                })?;
            Arc::new(ChainOnlyVerifier { inner })
        }
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Some(Arc::new(config)))
}

/// The server name handed to rustls (the host as configured; never checked by our
/// verifiers).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, SourceError> {
    ServerName::try_from(host.to_string()).map_err(|_| SourceError::ConfigInvalid {
        field: "host",
        reason: "not a valid host name or address",
    })
}

/// VERIFY_CA: the WebPKI chain check without the host-name check.
#[derive(Debug)]
struct ChainOnlyVerifier {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// VERIFY_NONE, chosen explicitly: any certificate, signatures still checked.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
