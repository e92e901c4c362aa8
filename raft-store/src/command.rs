//! The commands replicated through Raft and applied by [`ClusterState`](crate::ClusterState).
//!
//! Names are imperative (`AssignOwner`), as for every command in capstan. Two kinds exist:
//!
//! - **control commands** (`CreatePipeline`, `UpdatePipelineConfig`, `DeletePipeline`,
//!   `SetDesiredState`, `AssignOwner`, `RestartPipeline`, `ResetOffsets`, `MovePipeline`,
//!   `RequestSnapshot`, `StopSnapshot`) come from the REST API or the scheduler;
//! - **owner writes** (`CommitCheckpoint`, `CommitSnapshotProgress`, `ReportStatus`,
//!   `ReleasePipeline`) come from the worker that owns a pipeline (its runner, or its
//!   supervisor for a release) and carry the owner's epoch, the fencing token. See
//!   [`cluster_state`](crate::cluster_state) for the fencing rules.
//!
//! Commands travel in Raft log entries that openraft may print at debug level, so every field
//! that could hold a secret (the pipeline definition) or a row value (primary-key cursors) is
//! wrapped in a type whose `Debug` shows only its size.

use std::fmt;

use capstan_core::position::{Position, ResumePoint};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::type_config::NodeId;

/// A pipeline ownership epoch: the fencing token every owner write carries.
pub type Epoch = u64;

/// The largest command, as serialized JSON, a node proposes (1 MiB: a pipeline definition or a
/// snapshot listing about 20,000 tables), so a peer can bound the body it accepts; a larger
/// command is refused before it reaches the log instead of wedging replication.
pub const MAX_COMMAND_BYTES: usize = 1 << 20;

/// The length of `value` as JSON, counted without keeping the text (`usize::MAX` if it does
/// not serialize).
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    /// Counts the bytes written instead of keeping them.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_or(usize::MAX, |()| count.0)
}

/// One replicated command.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Create a pipeline, desired state `stopped`, without an owner.
    CreatePipeline {
        /// Unique pipeline name.
        name: String,
        /// The pipeline definition (opaque here; validated before it is proposed).
        spec: SpecJson,
        /// A fresh id naming this life of the pipeline (chosen by the proposer), carried by
        /// every Kafka offsets record it writes, so records of an earlier pipeline of the same
        /// name (deleted, reset, or of another cluster on the same Kafka) are never resumed
        /// from. Absent in commands written before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incarnation: Option<String>,
    },
    /// Replace the definition of an existing pipeline; bumps its config generation.
    UpdatePipelineConfig {
        /// Pipeline name.
        name: String,
        /// The new definition.
        spec: SpecJson,
    },
    /// Remove a pipeline with its checkpoint, snapshot progress and status.
    DeletePipeline {
        /// Pipeline name.
        name: String,
    },
    /// Set what the operator wants the pipeline to do.
    SetDesiredState {
        /// Pipeline name.
        name: String,
        /// The wanted state.
        state: DesiredState,
    },
    /// Make `node` the owner of `pipeline`; `epoch` must exceed the pipeline's current epoch.
    AssignOwner {
        /// Pipeline name.
        pipeline: String,
        /// The new owner.
        node: NodeId,
        /// The new epoch, strictly greater than the current one.
        epoch: Epoch,
    },
    /// Restart the pipeline's runner on its current owner: the epoch grows by one, so the
    /// running incarnation is fenced and the owner starts a fresh one. Decided when applied
    /// (not from a possibly lagging replica's view), so it cannot race an ownership change;
    /// a pipeline without an owner is left as it is. Answers [`Response::Restarted`].
    ///
    /// [`Response::Restarted`]: crate::Response::Restarted
    RestartPipeline {
        /// Pipeline name.
        name: String,
    },
    /// Owner write: record the processed position.
    CommitCheckpoint {
        /// Pipeline name.
        pipeline: String,
        /// The writer's ownership epoch.
        epoch: Epoch,
        /// The checkpoint, where a restart resumes; must cover the previous checkpoint.
        position: Position,
        /// Everything delivered, when more than `position` covers (a MariaDB checkpoint held
        /// back before a pending XA prepare, ADR-0008); `None` means "the same as
        /// `position`" (always on MySQL, and in commands written before the field existed).
        /// Must cover `position` and the previous processed position.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        processed: Option<Position>,
    },
    /// Owner write: start (or restart) the initial snapshot: the checkpoint becomes
    /// `position` (the stream floor P0, read before the first chunk; it may be behind a
    /// previous checkpoint when a lost position forces a re-snapshot) and the snapshot
    /// progress becomes `tables`, each `pending`.
    BeginSnapshot {
        /// Pipeline name.
        pipeline: String,
        /// The writer's ownership epoch.
        epoch: Epoch,
        /// The stream floor P0.
        position: Position,
        /// Every table to snapshot (`schema.table`), with its estimated row count.
        tables: Vec<(String, u64)>,
    },
    /// Owner write: record the initial-snapshot progress of one table.
    CommitSnapshotProgress {
        /// Pipeline name.
        pipeline: String,
        /// The writer's ownership epoch.
        epoch: Epoch,
        /// Fully qualified table name (`schema.table`).
        table: String,
        /// Encoded primary key of the last row read, if any.
        pk_cursor: Option<KeyBytes>,
        /// Encoded primary key of the last row delivered, if any.
        delivered_pk: Option<KeyBytes>,
        /// Where the table's snapshot stands.
        status: SnapshotTableStatus,
        /// Rows published so far.
        #[serde(default)]
        rows_done: u64,
        /// The server's estimate of the table's row count.
        #[serde(default)]
        rows_estimated: u64,
    },
    /// Owner write: change the snapshot's table set without moving the checkpoint (a table
    /// added to or removed from a running pipeline's capture list). Each table of `snapshot`
    /// becomes `pending` (snapshotted from its first key, woven into the stream from the
    /// checkpoint on, as the initial snapshot is from P0); each of `forget` loses its progress.
    ReviseSnapshotTables {
        /// Pipeline name.
        pipeline: String,
        /// The writer's ownership epoch.
        epoch: Epoch,
        /// Tables to snapshot from the start (`schema.table`), with their estimated row count.
        snapshot: Vec<(String, u64)>,
        /// Tables no longer captured (`schema.table`).
        forget: Vec<String>,
    },
    /// An operator's ad-hoc (incremental) snapshot of tables the pipeline captures and has
    /// streamed (`POST /pipelines/{name}/snapshots`): each table becomes `pending` of kind
    /// `incremental` (snapshotted from its first key, woven into the stream from the
    /// checkpoint on, under the cursor gate), and, when the pipeline is owned, its epoch grows
    /// by one, as `RestartPipeline` does, so the running incarnation is fenced and the owner
    /// starts one that gates the tables. Decided when applied: refused as a whole with
    /// `SnapshotRunning` when a table's snapshot (initial or incremental) is pending or in
    /// progress, `NotStreamed` before the pipeline's first checkpoint. Answers
    /// [`Response::SnapshotRequested`].
    ///
    /// [`Response::SnapshotRequested`]: crate::Response::SnapshotRequested
    RequestSnapshot {
        /// Pipeline name.
        pipeline: String,
        /// Tables to snapshot (`schema.table`), with their estimated row count.
        tables: Vec<(String, u64)>,
    },
    /// An operator stops the pipeline's incremental snapshots (`DELETE
    /// /pipelines/{name}/snapshots`): every incremental table not complete becomes `stopped`
    /// (it streams ungated, as a complete one does) and, when owned, the epoch grows by one so
    /// the runner restarts without them. `NoSnapshotRunning` when there is none. Answers
    /// [`Response::SnapshotStopped`].
    ///
    /// [`Response::SnapshotStopped`]: crate::Response::SnapshotStopped
    StopSnapshot {
        /// Pipeline name.
        pipeline: String,
    },
    /// Owner write: report what the runner is doing.
    ReportStatus {
        /// Pipeline name.
        pipeline: String,
        /// The writer's ownership epoch.
        epoch: Epoch,
        /// The runner's state.
        state: RunnerState,
        /// Why, for failures and pauses: a stable code (never a row value or a secret).
        reason: Option<String>,
        /// What a user needs beside the code, value-free (the Kafka error name, the topic,
        /// the table, sizes); absent in entries written before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// Forget the checkpoint and the snapshot progress; only while the desired state is
    /// `stopped`. Revokes the owner, so a straggling write of the old owner is fenced.
    ResetOffsets {
        /// Pipeline name.
        pipeline: String,
        /// A fresh id naming the pipeline's life after the reset (chosen by the proposer), carried by
        /// every Kafka offsets record it writes, so records of an earlier pipeline of the same
        /// name (deleted, reset, or of another cluster on the same Kafka) are never resumed
        /// from. Absent in commands written before it existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incarnation: Option<String>,
    },
    /// An operator's move: the pipeline's owner stops its runner and gives the pipeline up
    /// (`ReleasePipeline`), then the scheduler assigns it to `to` with the next epoch. The old
    /// owner never publishes after the new one starts, because the release comes only once
    /// its runner has ended. `to` must be a worker that has renewed a lease (else
    /// [`Response::UnknownNode`]); a move to the current owner cancels a pending move. Answers
    /// [`Response::Moving`].
    ///
    /// [`Response::UnknownNode`]: crate::Response::UnknownNode
    /// [`Response::Moving`]: crate::Response::Moving
    MovePipeline {
        /// Pipeline name.
        pipeline: String,
        /// The worker that should own it.
        to: NodeId,
    },
    /// The owner gives up a pipeline that has a pending move, once its runner has ended: the
    /// pipeline is left without an owner (the epoch stays, so every later write of this
    /// owner is fenced as `Unowned`) until the scheduler assigns it. Applied only while
    /// `node` owns the pipeline at `epoch` and a move is pending (else `StaleEpoch`,
    /// `Unowned` or `NoMovePending`).
    ReleasePipeline {
        /// Pipeline name.
        pipeline: String,
        /// The releasing owner.
        node: NodeId,
        /// Its ownership epoch.
        epoch: Epoch,
    },
    /// A worker renews its liveness lease (see docs/adr/0004-worker-liveness.md). Committing
    /// it proves the worker reached a quorum; the leader watches the renewal counters.
    RenewLease {
        /// The renewing worker.
        node: NodeId,
    },
    /// A worker shutting down cleanly gives up its lease so its pipelines move at once.
    ReleaseLease {
        /// The departing worker.
        node: NodeId,
    },
}

impl Command {
    /// The owner write that commits `point` as the checkpoint of `pipeline` (the processed
    /// position travels only when it says more than the checkpoint).
    pub fn commit_checkpoint(pipeline: &str, epoch: Epoch, point: &ResumePoint) -> Command {
        Command::CommitCheckpoint {
            pipeline: pipeline.to_string(),
            epoch,
            position: point.checkpoint().clone(),
            processed: point.processed_beyond().cloned(),
        }
    }

    /// The size of the command as serialized JSON, as it travels in a Raft entry.
    pub fn encoded_len(&self) -> usize {
        json_len(self)
    }

    /// The pipeline the command is about; `None` for worker lease commands.
    pub fn pipeline(&self) -> Option<&str> {
        Some(match self {
            Command::CreatePipeline { name, .. }
            | Command::UpdatePipelineConfig { name, .. }
            | Command::DeletePipeline { name }
            | Command::SetDesiredState { name, .. }
            | Command::RestartPipeline { name } => name,
            Command::RequestSnapshot { pipeline, .. } | Command::StopSnapshot { pipeline } => {
                pipeline
            }
            Command::AssignOwner { pipeline, .. }
            | Command::CommitCheckpoint { pipeline, .. }
            | Command::BeginSnapshot { pipeline, .. }
            | Command::CommitSnapshotProgress { pipeline, .. }
            | Command::ReviseSnapshotTables { pipeline, .. }
            | Command::ReportStatus { pipeline, .. }
            | Command::ResetOffsets { pipeline, .. }
            | Command::MovePipeline { pipeline, .. }
            | Command::ReleasePipeline { pipeline, .. } => pipeline,
            Command::RenewLease { .. } | Command::ReleaseLease { .. } => return None,
        })
    }

    /// The epoch of an owner write; `None` for control commands.
    pub fn owner_epoch(&self) -> Option<Epoch> {
        match self {
            Command::CommitCheckpoint { epoch, .. }
            | Command::BeginSnapshot { epoch, .. }
            | Command::CommitSnapshotProgress { epoch, .. }
            | Command::ReviseSnapshotTables { epoch, .. }
            | Command::ReportStatus { epoch, .. }
            | Command::ReleasePipeline { epoch, .. } => Some(*epoch),
            _ => None,
        }
    }

    /// The command's name as logs and metrics show it.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::CreatePipeline { .. } => "create_pipeline",
            Command::UpdatePipelineConfig { .. } => "update_pipeline_config",
            Command::DeletePipeline { .. } => "delete_pipeline",
            Command::SetDesiredState { .. } => "set_desired_state",
            Command::AssignOwner { .. } => "assign_owner",
            Command::RestartPipeline { .. } => "restart_pipeline",
            Command::CommitCheckpoint { .. } => "commit_checkpoint",
            Command::BeginSnapshot { .. } => "begin_snapshot",
            Command::CommitSnapshotProgress { .. } => "commit_snapshot_progress",
            Command::ReviseSnapshotTables { .. } => "revise_snapshot_tables",
            Command::RequestSnapshot { .. } => "request_snapshot",
            Command::StopSnapshot { .. } => "stop_snapshot",
            Command::ReportStatus { .. } => "report_status",
            Command::ResetOffsets { .. } => "reset_offsets",
            Command::MovePipeline { .. } => "move_pipeline",
            Command::ReleasePipeline { .. } => "release_pipeline",
            Command::RenewLease { .. } => "renew_lease",
            Command::ReleaseLease { .. } => "release_lease",
        }
    }
}

/// What the operator wants a pipeline to do.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DesiredState {
    /// Capture and publish.
    Running,
    /// Keep the owner and position, publish nothing.
    Paused,
    /// Run nothing; the only state in which offsets may be reset.
    #[default]
    Stopped,
}

impl DesiredState {
    /// True when the pipeline needs an owner (`running` or `paused`): the scheduler places it
    /// and it counts on its owner's load.
    pub fn wants_owner(self) -> bool {
        matches!(self, DesiredState::Running | DesiredState::Paused)
    }

    /// The state's name as users write it.
    pub fn as_str(self) -> &'static str {
        match self {
            DesiredState::Running => "running",
            DesiredState::Paused => "paused",
            DesiredState::Stopped => "stopped",
        }
    }
}

impl fmt::Display for DesiredState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a pipeline's runner reports it is doing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerState {
    /// Connecting and checking preconditions.
    Starting,
    /// Reading the initial snapshot (and streaming alongside it).
    Snapshotting,
    /// Streaming the binlog.
    Streaming,
    /// Paused on request.
    Paused,
    /// Stopped on request or after losing ownership.
    Stopped,
    /// Stopped by an error; `reason` says which.
    Failed,
    /// Stopped by a transient fault (broker or server unreachable, a timeout): started again
    /// after a backoff, by itself; `reason` and `detail` say what it waits for.
    Retrying,
}

impl RunnerState {
    /// The state's name as the REST API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerState::Starting => "starting",
            RunnerState::Snapshotting => "snapshotting",
            RunnerState::Streaming => "streaming",
            RunnerState::Paused => "paused",
            RunnerState::Stopped => "stopped",
            RunnerState::Failed => "failed",
            RunnerState::Retrying => "retrying",
        }
    }
}

impl fmt::Display for RunnerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the initial snapshot of one table stands.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotTableStatus {
    /// Not started.
    Pending,
    /// Chunks are being read and delivered.
    InProgress,
    /// Every row delivered; final (only a reset of offsets starts the table again).
    Complete,
    /// The binlog the snapshot needed was purged while it ran: the table must be snapshotted
    /// again from a new position (automatically with `when_needed`, else after a reset).
    NeedsResnapshot,
    /// An incremental snapshot an operator stopped before it completed: the table streams
    /// ungated, as a complete one does; a new request snapshots it again from its first key.
    Stopped,
}

impl SnapshotTableStatus {
    /// The status's name as the REST API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotTableStatus::Pending => "pending",
            SnapshotTableStatus::InProgress => "in_progress",
            SnapshotTableStatus::Complete => "complete",
            SnapshotTableStatus::NeedsResnapshot => "needs_resnapshot",
            SnapshotTableStatus::Stopped => "stopped",
        }
    }

    /// True when nothing is read or gated for the table any more: `complete` or `stopped`.
    pub fn is_done(self) -> bool {
        matches!(
            self,
            SnapshotTableStatus::Complete | SnapshotTableStatus::Stopped
        )
    }

    /// True while a snapshot of the table is to be read: `pending` or `in_progress`.
    pub fn is_running(self) -> bool {
        matches!(
            self,
            SnapshotTableStatus::Pending | SnapshotTableStatus::InProgress
        )
    }
}

/// Why a table is snapshotted: the pipeline's own snapshot (its first start, a table added
/// to the capture list, a lost position) or an operator's ad-hoc request.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotKind {
    /// The pipeline's own snapshot; its records say `source.snapshot: "true"`.
    #[default]
    Initial,
    /// An operator's ad-hoc snapshot (`POST /pipelines/{name}/snapshots`); its records say
    /// `source.snapshot: "incremental"`, as Debezium's incremental snapshots do.
    Incremental,
}

impl SnapshotKind {
    /// The kind's name as the REST API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotKind::Initial => "initial",
            SnapshotKind::Incremental => "incremental",
        }
    }

    /// True for the default kind (left out of the serialized progress).
    pub fn is_initial(&self) -> bool {
        *self == SnapshotKind::Initial
    }
}

impl fmt::Display for SnapshotTableStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An encoded primary key (a snapshot cursor). Opaque to the control plane, and treated as a
/// row value: `Debug` shows only its length. Serialized as a lowercase hex string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct KeyBytes(Vec<u8>);

impl KeyBytes {
    /// Wraps encoded key bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        KeyBytes(bytes)
    }

    /// The encoded key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The encoded key, by value.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl From<Vec<u8>> for KeyBytes {
    fn from(bytes: Vec<u8>) -> Self {
        KeyBytes(bytes)
    }
}

impl fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyBytes(<{} bytes>)", self.0.len())
    }
}

impl Serialize for KeyBytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(self.0.len() * 2);
        for byte in &self.0 {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for KeyBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let text = String::deserialize(d)?;
        if text.len() % 2 != 0 {
            return Err(D::Error::custom("key bytes: odd number of hex digits"));
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(D::Error::custom("key bytes: not a hex digit")),
        };
        text.as_bytes()
            .chunks_exact(2)
            .map(|pair| Ok((nibble(pair[0])? << 4) | nibble(pair[1])?))
            .collect::<Result<Vec<u8>, D::Error>>()
            .map(KeyBytes)
    }
}

/// A pipeline definition as JSON, opaque to the control plane. It may hold credentials, so
/// `Debug` shows only its size; serialized transparently as the JSON value.
///
/// Kept as its JSON text: the cluster state holds every definition (hundreds of them listing
/// thousands of tables), and a snapshot, a clone of the state or a log entry then copies text
/// instead of walking a tree of values. Read back with [`SpecJson::to_json`].
#[derive(Clone)]
pub struct SpecJson(Box<RawValue>);

impl SpecJson {
    /// Wraps a definition.
    pub fn new(value: serde_json::Value) -> Self {
        SpecJson::from_value(&value)
    }

    fn from_value(value: &serde_json::Value) -> Self {
        // a Value always serializes (its map keys are strings)
        SpecJson(
            serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()),
        )
    }

    /// The definition, parsed.
    pub fn to_json(&self) -> serde_json::Value {
        // the text was validated as JSON when it was made or read
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }

    /// Reads a definition as its text, without building its values: for a field outside an
    /// internally tagged enum (the cluster state's records, read from a snapshot of tens of MB).
    pub fn deserialize_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(SpecJson)
    }

    /// The length of the definition's JSON text in bytes.
    pub fn json_bytes(&self) -> usize {
        self.0.get().len()
    }
}

impl Default for SpecJson {
    fn default() -> Self {
        SpecJson(RawValue::NULL.to_owned())
    }
}

impl PartialEq for SpecJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for SpecJson {}

impl From<serde_json::Value> for SpecJson {
    fn from(value: serde_json::Value) -> Self {
        SpecJson::new(value)
    }
}

impl Serialize for SpecJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SpecJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // read as a value: a command is an internally tagged enum, whose fields serde buffers,
        // and a raw value cannot be read from that buffer
        serde_json::Value::deserialize(deserializer).map(|value| SpecJson::from_value(&value))
    }
}

impl fmt::Debug for SpecJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpecJson(<{} bytes>)", self.json_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bytes_round_trip_as_hex_and_hide_in_debug() {
        let key = KeyBytes::new(vec![0x00, 0xab, 0x7f, 0xff]);
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(json, "\"00ab7fff\"");
        assert_eq!(serde_json::from_str::<KeyBytes>(&json).unwrap(), key);
        assert_eq!(
            serde_json::from_str::<KeyBytes>("\"00AB7FFF\"").unwrap(),
            key
        );
        assert!(serde_json::from_str::<KeyBytes>("\"abc\"").is_err());
        assert!(serde_json::from_str::<KeyBytes>("\"zz\"").is_err());
        assert_eq!(format!("{key:?}"), "KeyBytes(<4 bytes>)");
    }

    #[test]
    fn encoded_len_is_the_length_of_the_json() {
        let command = Command::CreatePipeline {
            name: "p".into(),
            spec: SpecJson::new(serde_json::json!({"tables": {"include": ["db.t1", "db.t2"]}})),
            incarnation: Some("i".into()),
        };
        assert_eq!(
            command.encoded_len(),
            serde_json::to_vec(&command).unwrap().len()
        );
    }

    #[test]
    fn a_definition_survives_a_command_and_a_record_as_the_same_text() {
        let spec = SpecJson::new(serde_json::json!({"tables": {"include": ["db.t1"]}, "n": 1.5}));
        let command = Command::CreatePipeline {
            name: "p".into(),
            spec: spec.clone(),
            incarnation: None,
        };
        let read: Command = serde_json::from_slice(&serde_json::to_vec(&command).unwrap()).unwrap();
        assert_eq!(read, command);
        let record = crate::PipelineRecord::new(spec.clone(), Epoch::default(), None);
        let read: crate::PipelineRecord =
            serde_json::from_slice(&serde_json::to_vec(&record).unwrap()).unwrap();
        assert_eq!(read.spec(), &spec);
        assert_eq!(
            read.spec().to_json(),
            serde_json::json!({"tables": {"include": ["db.t1"]}, "n": 1.5})
        );
        assert_eq!(
            format!("{spec:?}"),
            format!("SpecJson(<{} bytes>)", spec.json_bytes())
        );
    }

    #[test]
    fn spec_debug_hides_contents() {
        let spec = SpecJson::new(serde_json::json!({"source": {"password": "hunter2"}}));
        let shown = format!(
            "{:?}",
            Command::CreatePipeline {
                name: "p".into(),
                spec,
                incarnation: None,
            }
        );
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn commands_serialize_with_snake_case_tags() {
        let command = Command::SetDesiredState {
            name: "orders".into(),
            state: DesiredState::Running,
        };
        let json = serde_json::to_value(&command).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"command": "set_desired_state", "name": "orders", "state": "running"})
        );
        assert_eq!(serde_json::from_value::<Command>(json).unwrap(), command);
    }
}
