//! Certificates for TLS tests, made with rcgen: a CA, worker certificates it signs, and the
//! `[tls]` tables that point a worker at them.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA able to sign worker certificates.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub pem: String,
}

impl std::fmt::Debug for TestCa {
    // the issuer holds the CA's private key
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

impl TestCa {
    /// A self-signed CA named `name`.
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// (certificate PEM, key PEM) for a worker reachable as 127.0.0.1 or localhost, usable as
    /// a TLS server and client.
    pub fn worker_cert(&self, name: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Writes the CA and one certificate per worker id into `dir`; returns the `[tls]` table of
/// each worker.
pub fn write_certs(dir: &Path, ca: &TestCa, ids: &[u64]) -> Vec<(u64, String)> {
    std::fs::write(dir.join("ca.pem"), &ca.pem).unwrap();
    ids.iter()
        .map(|&id| {
            let (cert, key) = ca.worker_cert(&format!("worker-{id}"));
            std::fs::write(dir.join(format!("w{id}.pem")), cert).unwrap();
            std::fs::write(dir.join(format!("w{id}.key")), key).unwrap();
            (id, tls_table(dir, &format!("w{id}")))
        })
        .collect()
}

/// The `[tls]` table of the certificate `name.pem` and key `name.key` in `dir`, trusting
/// `dir/ca.pem`.
pub fn tls_table(dir: &Path, name: &str) -> String {
    format!(
        "\n[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\nca_file = \"{}\"\n",
        dir.join(format!("{name}.pem")).display(),
        dir.join(format!("{name}.key")).display(),
        dir.join("ca.pem").display(),
    )
}
