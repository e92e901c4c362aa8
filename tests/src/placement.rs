//! [`Placement`]: where one worker process of a [`crate::cluster::Cluster`] runs — the address
//! it listens on, its ports, and the command that starts it (nothing for the test's own network
//! namespace; `ip netns exec <ns>` for one of [`crate::net_lab::NetLab`]'s).

use crate::cluster::free_port;

/// See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The IP address the worker's Raft port and API listen on (and the other workers reach).
    pub host: String,
    /// Raft port.
    pub raft_port: u16,
    /// API port.
    pub api_port: u16,
    /// A command prefix the `capstan worker` command is run under (empty: run it directly).
    pub launcher: Vec<String>,
}

impl Placement {
    /// On 127.0.0.1 in the test's namespace, on ports that were free a moment ago.
    pub fn loopback() -> Placement {
        Placement {
            host: "127.0.0.1".into(),
            raft_port: free_port(),
            api_port: free_port(),
            launcher: Vec::new(),
        }
    }
}
