//! Serving a router on a bound listener, over plain HTTP or rustls, until told to stop: the
//! Raft port and the REST API both go through here.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::warn;

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long open connections may finish their requests once the server stops.
const DRAIN: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `stop` turns true: plain HTTP without `tls`, otherwise TLS
/// with `tls` (a refused handshake is logged with the peer's address and `port`, the name of
/// what is served).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut stop: watch::Receiver<bool>,
    port: &'static str,
) -> std::io::Result<()> {
    let Some(config) = tls else {
        let mut drained = stop.clone();
        let server = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .into_future();
        // graceful, but bounded like the TLS side: a request still open after DRAIN is cut
        return tokio::select! {
            served = server => served,
            () = async {
                let _ = drained.wait_for(|s| *s).await;
                tokio::time::sleep(DRAIN).await;
            } => Ok(()),
        };
    };
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        let _ = stop.wait_for(|s| *s).await;
        stopper.graceful_shutdown(Some(DRAIN));
    });
    let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(
        axum_server::tls_rustls::RustlsConfig::from_config(config),
    )
    .handshake_timeout(HANDSHAKE_TIMEOUT);
    axum_server::from_tcp(listener.into_std()?)?
        .acceptor(acceptor)
        .handle(handle)
        .accept_error_handler(move |peer, e| {
            warn!(port, peer = ?peer, error = %e, "connection dropped before a request (accept or tls handshake failed)");
        })
        .serve(app.into_make_service())
        .await
}
