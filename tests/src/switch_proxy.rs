//! [`SwitchProxy`]: a loopback TCP proxy whose upstream can be switched — a stand-in for a
//! virtual IP or a DNS name that starts pointing at another server. Connections already open
//! stay with the server they reached; new ones go to the current target.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

/// See the module documentation.
#[derive(Debug)]
pub struct SwitchProxy {
    /// The local port clients connect to.
    pub port: u16,
    target: Arc<AtomicU16>,
    upstreams: Arc<Mutex<BTreeMap<u16, u16>>>,
}

impl SwitchProxy {
    /// Listens on an ephemeral loopback port and forwards to `127.0.0.1:target`. Must be
    /// called on a tokio runtime.
    pub async fn start(target: u16) -> SwitchProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind an ephemeral port");
        let port = listener.local_addr().expect("local addr").port();
        let target = Arc::new(AtomicU16::new(target));
        let upstreams = Arc::new(Mutex::new(BTreeMap::new()));
        let (t, u) = (target.clone(), upstreams.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let to = t.load(Ordering::SeqCst);
                let Ok(mut server) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await else {
                    continue;
                };
                if let Ok(local) = server.local_addr() {
                    u.lock().expect("upstreams").insert(local.port(), to);
                }
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        SwitchProxy {
            port,
            target,
            upstreams,
        }
    }

    /// New connections go to `127.0.0.1:target` from now on.
    pub fn switch_to(&self, target: u16) {
        self.target.store(target, Ordering::SeqCst);
    }

    /// The local ports of the proxy's upstream connections to `target` (as the server's
    /// process list shows them, `127.0.0.1:<port>`).
    pub fn upstream_ports(&self, target: u16) -> Vec<u16> {
        self.upstreams
            .lock()
            .expect("upstreams")
            .iter()
            .filter(|(_, t)| **t == target)
            .map(|(p, _)| *p)
            .collect()
    }
}
