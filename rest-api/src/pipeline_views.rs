//! What the API shows about pipelines. Nothing here carries a secret or a row value: the
//! definition comes with its secrets redacted, and snapshot progress without key cursors.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A pipeline as the API shows it. The definition never includes the source password.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct PipelineView {
    /// Pipeline name.
    pub name: String,
    /// The definition as stored, every secret (the source password, credentials among the
    /// producer overrides) replaced by `<redacted>`.
    #[schema(value_type = Object)]
    pub config: serde_json::Value,
}

/// A pipeline's status.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PipelineStatus {
    /// Pipeline name.
    pub name: String,
    /// What the operator asked for: `running`, `paused` or `stopped`.
    pub desired_state: String,
    /// The owner, if assigned.
    pub owner: Option<u64>,
    /// The ownership epoch (fencing token).
    pub epoch: u64,
    /// The worker an operator's move is taking the pipeline to, while the move is pending
    /// (`POST /pipelines/{name}/move`); `null` otherwise.
    #[serde(default)]
    pub move_to: Option<u64>,
    /// What the owner reports: `starting`, `snapshotting`, `streaming`, `paused`, `stopped`,
    /// `failed` (halted until restarted or reconfigured), `retrying` (a transient fault: it
    /// starts again by itself after a backoff); `unassigned` before any report.
    pub state: String,
    /// Why, for failures and retries: a stable code (value-free).
    pub reason: Option<String>,
    /// Beside the code, what a user needs to act, value-free: the Kafka error name, the
    /// topic, the table, sizes (`kafka delivery failed: MsgTimedOut`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The committed processed position, in the server's text form.
    pub position: Option<String>,
    /// Commit-to-acknowledgement lag of the newest published transaction, in milliseconds,
    /// as the owner measured it; absent when the owner is not streaming or cannot be asked.
    pub lag_ms: Option<u64>,
    /// Row changes the owner published for this pipeline since its worker process started
    /// (the owner's `capstan_pipeline_rows_total`): a counter, so the throughput is the
    /// difference of two answers over the time between them. It starts over when another
    /// worker becomes the owner or the owner restarts. Absent unless the owner is
    /// snapshotting or streaming, or when it cannot be asked.
    #[serde(default)]
    pub rows_total: Option<u64>,
    /// Snapshot progress per table, initial and ad-hoc (empty without a snapshot). Key
    /// cursors are row values and not shown.
    pub snapshot: Vec<TableOffset>,
}

/// The answer to a dry run (`POST /pipelines/validate`): the definition would be accepted.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PipelineValidation {
    /// Always true: an invalid definition is answered with the error a create would give.
    pub valid: bool,
    /// The definition's pipeline name.
    pub name: String,
}

/// The answer to a restart: the incarnation that will run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct RestartView {
    /// Pipeline name.
    pub name: String,
    /// The owner that restarts it, if the pipeline is owned.
    pub owner: Option<u64>,
    /// The epoch after the restart (bumped when owned, unchanged otherwise).
    pub epoch: u64,
}

/// A request to move a pipeline to another worker (`POST /pipelines/{name}/move`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveRequest {
    /// The worker (node id) that should own the pipeline: a live member. The current owner's
    /// id cancels a pending move.
    #[schema(minimum = 1)]
    pub to: u64,
}

/// The answer to a move: where the pipeline is and where it is going.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct MoveView {
    /// Pipeline name.
    pub name: String,
    /// The current owner (it keeps the pipeline until its runner has ended), if any.
    pub owner: Option<u64>,
    /// The worker the pipeline is moving to; `null` when nothing is pending (the pipeline is
    /// already there, or the move was cancelled).
    pub move_to: Option<u64>,
    /// The current epoch; the new owner runs it under a greater one.
    pub epoch: u64,
}

/// A pipeline's committed progress: where streaming resumes and how far the snapshot got.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PipelineOffsets {
    /// Pipeline name.
    pub name: String,
    /// The ownership epoch the progress was committed under (or the current one).
    pub epoch: u64,
    /// `mysql` or `mariadb`, once a position is committed.
    pub flavor: Option<String>,
    /// The committed processed position in the server's text form (a GTID set for MySQL, a
    /// GTID position for MariaDB); absent before the first checkpoint or after a reset.
    pub position: Option<String>,
    /// Everything delivered, when more than `position`: a MariaDB checkpoint held back before
    /// a pending XA prepare (ADR-0008); a restart resumes from `position` and skips what this
    /// covers. Absent when it equals `position` (always on MySQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processed: Option<String>,
    /// Snapshot progress per table (initial and ad-hoc), in table order.
    pub snapshot: Vec<TableOffset>,
}

/// The snapshot progress of one table. Key cursors are row values and not shown.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct TableOffset {
    /// `schema.table`.
    pub table: String,
    /// `initial` (the pipeline's own snapshot) or `incremental` (an operator's ad-hoc one,
    /// `POST /pipelines/{name}/snapshots`).
    #[serde(default = "initial_kind")]
    pub kind: String,
    /// `pending`, `in_progress`, `complete`, `needs_resnapshot` or (an ad-hoc snapshot an
    /// operator stopped) `stopped`.
    pub status: String,
    /// Rows published by the snapshot so far.
    #[serde(default)]
    pub rows_done: u64,
    /// The server's estimate of the table's row count when the snapshot began.
    #[serde(default)]
    pub rows_estimated: u64,
}

fn initial_kind() -> String {
    "initial".to_string()
}
