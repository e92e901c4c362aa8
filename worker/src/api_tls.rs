//! TLS on the REST API, from the `[api_tls]` table of `worker.toml`: the server presents this
//! worker's certificate and asks clients for none (they authenticate with the bearer token);
//! when this worker calls another's API (a membership change forwarded to the leader, an
//! owner's lag) it trusts only `ca_file`. The files are read at start; errors name the field
//! and the file, never their contents.

use std::path::Path;
use std::sync::Arc;

use rustls::{ClientConfig, ServerConfig};

use crate::raft_tls::{read_roots, rustls_reason, Material, TlsSetupError};
use crate::worker_config::TlsConfig;

/// The API's TLS: the listener's server configuration and the client side for calls to peers.
#[derive(Clone)]
pub struct ApiTls {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for ApiTls {
    // the server configuration holds the private key: show nothing of it
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTls").finish_non_exhaustive()
    }
}

impl ApiTls {
    /// Reads the files of `config` and builds both sides.
    pub fn load(config: &TlsConfig) -> Result<ApiTls, TlsSetupError> {
        let m = Material::load(
            config,
            ["api_tls.cert_file", "api_tls.key_file", "api_tls.ca_file"],
        )?;
        let rejected = |what: &String| {
            let what = what.clone();
            move |e: rustls::Error| TlsSetupError::Rejected {
                what,
                reason: rustls_reason(&e),
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(rejected(&m.pair_what))?
            .with_no_client_auth()
            .with_single_cert(m.certs, m.key)
            .map_err(rejected(&m.pair_what))?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(rejected(&m.ca_what))?
            .with_root_certificates(m.roots)
            .with_no_client_auth();
        Ok(ApiTls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// The server side, for the API listener.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }
}

/// A client configuration trusting only the CA certificates of `ca_file` (named `field` in
/// errors) and presenting no certificate: the command line's `--ca-file`.
pub fn client_config_trusting(
    field: &'static str,
    ca_file: &Path,
) -> Result<ClientConfig, TlsSetupError> {
    let roots = read_roots(field, ca_file)?;
    Ok(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSetupError::Rejected {
                what: format!("{field} {}", ca_file.display()),
                reason: rustls_reason(&e),
            })?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// `https` when the API speaks TLS, `http` otherwise.
pub fn scheme(tls: Option<&ApiTls>) -> &'static str {
    if tls.is_some() {
        "https"
    } else {
        "http"
    }
}

/// `builder` set up to call peers' APIs: the API CA as the only root when TLS is on.
pub fn client_builder(
    tls: Option<&ApiTls>,
    builder: reqwest::ClientBuilder,
) -> reqwest::ClientBuilder {
    match tls {
        Some(t) => builder.use_preconfigured_tls(ClientConfig::clone(&t.client)),
        None => builder,
    }
}
