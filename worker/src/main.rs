//! `capstan`: the worker node and its command line.

mod api_tls;
mod cli;
mod cli_client;
mod cli_cluster;
mod cli_definition;
mod cli_error;
mod cli_pipeline;
mod cli_status_view;
mod cli_wait;
mod cli_watch;
mod control_plane_replies;
mod fault_point;
mod http_server;
mod leader_contact;
mod lease_quorum;
mod lease_renewal;
mod lease_service;
mod lease_tracker;
mod log_format;
mod membership_guard;
mod metrics;
mod node;
mod node_control_plane;
mod operator_moves;
mod owner_lease;
mod pipeline;
mod raft_network;
mod raft_service;
mod raft_tls;
mod rebalance;
mod scheduler;
mod snapshot_chunk;
mod snapshot_requests;
mod verify;
mod worker_config;

/// The allocator: glibc's malloc/free were a fifth of row decode (docs/performance.md,
/// binlog source); mimalloc takes about 20% off it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capstan: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(cli::run(args));
    // a task blocked in a read (a binlog socket, a RocksDB call) must not keep the process
    // alive once the command is done
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("capstan: {message}");
            ExitCode::FAILURE
        }
    }
}
