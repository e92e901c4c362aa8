//! capstan's replicated control plane: the openraft type configuration, the commands and the
//! pure [`ClusterState`] they are applied to, and the RocksDB-backed Raft log and state
//! machine stores.

pub mod cluster_state;
pub mod command;
pub mod error;
pub mod log_store;
pub mod pipeline_record;
pub mod renewal_receipts;
pub mod response;
pub mod shared_cluster_state;
pub mod snapshot_builder;
mod snapshot_file;
pub mod state_machine;
pub mod store;
pub mod type_config;
mod wal_syncer;

pub use cluster_state::ClusterState;
pub use command::{
    json_len, Command, DesiredState, Epoch, KeyBytes, RunnerState, SnapshotKind,
    SnapshotTableStatus, SpecJson, MAX_COMMAND_BYTES,
};
pub use error::RaftStoreError;
pub use log_store::LogStore;
pub use pipeline_record::{Ownership, PipelineRecord, ReportedStatus, TableProgress};
pub use response::Response;
pub use shared_cluster_state::SharedClusterState;
pub use snapshot_builder::ClusterSnapshotBuilder;
pub use state_machine::StateMachineStore;
pub use store::Store;
pub use type_config::{NodeId, NodeInfo, TypeConfig};
