//! capstan's replicated control plane: the openraft type configuration, the commands and the
//! pure [`ClusterState`] they are applied to, and the RocksDB-backed Raft log and state
//! machine stores.

pub mod cluster_state;
pub mod command;
pub mod error;
pub mod pipeline_record;
pub mod response;
pub mod type_config;

pub use cluster_state::ClusterState;
pub use command::{
    Command, DesiredState, Epoch, KeyBytes, RunnerState, SnapshotTableStatus, SpecJson,
};
pub use error::RaftStoreError;
pub use pipeline_record::{Ownership, PipelineRecord, ReportedStatus, TableProgress};
pub use response::Response;
pub use type_config::{NodeId, NodeInfo, TypeConfig};
