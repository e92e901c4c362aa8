//! Pipelines on a worker: their definitions, the runner that streams one on its owner, and
//! the supervisor that starts and stops runners as ownership and desired state change.

mod columns_spec;
mod data_plane;
mod engine;
mod pipeline_runner;
mod pipeline_spec;
mod prepared_snapshot;
mod record_encoder;
mod routes_spec;
mod runner_deliver;
mod runner_owner;
mod runner_sink;
mod runner_snapshot;
mod runner_start;
mod runner_supervisor;
mod schema_changes_spec;
mod sliced_transaction;
mod snapshot_driver;
mod snapshot_plan;
mod snapshot_revision;
mod snapshot_spec;
mod source_link_gauge;
mod source_task;
mod spec_secrets;
mod table_run;
mod tables_spec;
mod weight_cache;

pub use data_plane::DataPlane;
pub use pipeline_spec::{CheckedPipelineSpec, PipelineSpec};
pub use runner_supervisor::supervise;
pub(crate) use spec_secrets::{resolve_secrets, HostSecrets};
