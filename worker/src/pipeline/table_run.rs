//! One snapshot table as the owner drives it, the progress writes it makes, and its keys:
//! the raw key as stored (Raft, the offsets record) and the gate's order-preserving encoding
//! (string keys through the server's collation weights, cached).

use std::collections::HashMap;

use capstan_connectors::mysql::snapshot::{KeyKind, KeyPart, SnapshotReader, SnapshotTable};
use capstan_core::change::TableId;
use capstan_core::snapshot::{KeyComponent, SnapshotKey, TableStatus};
use capstan_kafka::exactly_once::TableProgress as KafkaTableProgress;
use capstan_raft_store::{KeyBytes, SnapshotTableStatus};

/// One table of the snapshot as this runner drives it.
#[derive(Debug)]
pub struct TableRun {
    /// What the reader described.
    pub table: SnapshotTable,
    /// Raw key of the last published row.
    pub raw_cursor: Option<Vec<KeyPart>>,
    /// Raw key of the last row that may have been published (ahead after a crash).
    pub raw_delivered: Option<Vec<KeyPart>>,
    /// Rows published so far.
    pub rows_done: u64,
    /// The server's estimate.
    pub rows_estimated: u64,
    /// Collation weights per key column index, for string keys.
    pub(super) weights: HashMap<usize, HashMap<Vec<u8>, Vec<u8>>>,
}

impl TableRun {
    /// A table at its stored progress.
    pub fn new(
        table: SnapshotTable,
        raw_cursor: Option<Vec<KeyPart>>,
        raw_delivered: Option<Vec<KeyPart>>,
        rows_done: u64,
        rows_estimated: u64,
    ) -> Self {
        TableRun {
            table,
            raw_cursor,
            raw_delivered,
            rows_done,
            rows_estimated,
            weights: HashMap::new(),
        }
    }

    /// The Raft write recording this table at its current cursors, in `status`.
    pub fn progress(&self, table: &TableId, status: TableStatus) -> ProgressWrite {
        ProgressWrite {
            table: table.to_string(),
            pk_cursor: self.raw_cursor.as_deref().and_then(key_bytes),
            delivered_pk: self.raw_delivered.as_deref().and_then(key_bytes),
            status: raft_status(status),
            rows_done: self.rows_done,
            rows_estimated: self.rows_estimated,
        }
    }
}

/// One table's entry in the exactly-once offsets record.
pub fn kafka_table(cursor: Option<&[KeyPart]>, complete: bool) -> KafkaTableProgress {
    KafkaTableProgress {
        cursor: cursor.and_then(|c| serde_json::to_value(c).ok()),
        complete,
    }
}

/// The replicated name of a gate status.
pub fn raft_status(status: TableStatus) -> SnapshotTableStatus {
    match status {
        TableStatus::Pending => SnapshotTableStatus::Pending,
        TableStatus::InProgress => SnapshotTableStatus::InProgress,
        TableStatus::Complete => SnapshotTableStatus::Complete,
    }
}

/// A progress write for Raft.
#[derive(Clone, Debug)]
pub struct ProgressWrite {
    /// `schema.table`.
    pub table: String,
    /// Encoded raw key of the last published row.
    pub pk_cursor: Option<KeyBytes>,
    /// Encoded raw key of the last row that may be published.
    pub delivered_pk: Option<KeyBytes>,
    /// The table's status.
    pub status: SnapshotTableStatus,
    /// Rows published.
    pub rows_done: u64,
    /// The estimate.
    pub rows_estimated: u64,
}

/// Why the snapshot halts (a value-free code).
pub type Halt = &'static str;

/// The raw key as stored in Raft and in the exactly-once offsets record.
pub fn key_bytes(parts: &[KeyPart]) -> Option<KeyBytes> {
    serde_json::to_vec(parts).ok().map(KeyBytes::new)
}

/// The raw key back from its stored form.
pub fn key_parts(bytes: &KeyBytes) -> Result<Vec<KeyPart>, Halt> {
    serde_json::from_slice(bytes.as_bytes()).map_err(|_| "snapshot_cursor_unreadable")
}

/// The order-preserving key of `parts`, using cached weights only.
pub(super) fn encode_cached(run: &TableRun, parts: &[KeyPart]) -> Option<SnapshotKey> {
    let mut weights: Vec<&[u8]> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if let KeyPart::Text(bytes) = part {
            weights.push(run.weights.get(&i)?.get(bytes)?.as_slice());
        }
    }
    let mut w = weights.into_iter();
    let components: Option<Vec<KeyComponent<'_>>> = parts
        .iter()
        .map(|part| match part {
            KeyPart::Int(v) => Some(KeyComponent::Int(*v)),
            KeyPart::UInt(v) => Some(KeyComponent::UInt(*v)),
            KeyPart::Bytes(b) => Some(KeyComponent::Bytes(b)),
            KeyPart::Text(_) => w.next().map(KeyComponent::Bytes),
        })
        .collect();
    Some(SnapshotKey::encode(&components?))
}

/// The order-preserving key of `parts`, asking the server for missing weights.
pub(super) async fn encode(
    reader: &mut SnapshotReader,
    run: &mut TableRun,
    parts: &[KeyPart],
) -> Result<SnapshotKey, Halt> {
    for (i, part) in parts.iter().enumerate() {
        if let KeyPart::Text(bytes) = part {
            if !run.weights.get(&i).is_some_and(|m| m.contains_key(bytes)) {
                fetch_weights(reader, run, i, vec![bytes.clone()]).await?;
            }
        }
    }
    encode_cached(run, parts).ok_or("snapshot_pk_weight_failed")
}

pub(super) async fn fetch_weights(
    reader: &mut SnapshotReader,
    run: &mut TableRun,
    index: usize,
    values: Vec<Vec<u8>>,
) -> Result<(), Halt> {
    let column = run
        .table
        .key
        .columns
        .get(index)
        .ok_or("snapshot_pk_weight_failed")?;
    if !matches!(column.kind, KeyKind::Text { .. }) {
        return Err("snapshot_pk_weight_failed");
    }
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let weights = reader
        .weights(column, &refs)
        .await
        .map_err(|_| "snapshot_pk_weight_failed")?;
    if weights.len() != values.len() {
        return Err("snapshot_pk_weight_failed");
    }
    let cache = run.weights.entry(index).or_default();
    for (value, weight) in values.into_iter().zip(weights) {
        cache.insert(value, weight);
    }
    Ok(())
}
