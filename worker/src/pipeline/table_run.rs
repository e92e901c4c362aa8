//! One snapshot table as the owner drives it, the progress writes it makes, and its keys:
//! the raw key as stored (Raft, the offsets record) and the gate's order-preserving encoding
//! (string keys through the server's collation weights, cached in a [`WeightCache`]).

use std::collections::{HashMap, HashSet};

use capstan_connectors::mysql::snapshot::{KeyKind, KeyPart, SnapshotReader, SnapshotTable};
use capstan_core::change::TableId;
use capstan_core::snapshot::{KeyComponent, SnapshotKey, TableStatus};
use capstan_kafka::exactly_once::TableProgress as KafkaTableProgress;
use capstan_raft_store::{KeyBytes, SnapshotTableStatus};

use super::weight_cache::{Column, WeightCache};

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
    /// An operator's ad-hoc snapshot (its records say `source.snapshot: "incremental"`).
    pub incremental: bool,
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
            incremental: false,
        }
    }

    /// The same table, read for an operator's ad-hoc (incremental) snapshot when `incremental`.
    pub fn incremental(self, incremental: bool) -> Self {
        TableRun {
            incremental,
            ..self
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

/// The order-preserving key of `parts` of `table`, using cached weights only.
pub(super) fn encode_cached(
    cache: &WeightCache,
    table: &TableId,
    parts: &[KeyPart],
) -> Option<SnapshotKey> {
    let components: Option<Vec<KeyComponent<'_>>> = parts
        .iter()
        .enumerate()
        .map(|(i, part)| match part {
            KeyPart::Int(v) => Some(KeyComponent::Int(*v)),
            KeyPart::UInt(v) => Some(KeyComponent::UInt(*v)),
            KeyPart::Bytes(b) => Some(KeyComponent::Bytes(b)),
            KeyPart::Text(bytes) => cache.get(table, i, bytes).map(KeyComponent::Bytes),
        })
        .collect();
    Some(SnapshotKey::encode(&components?))
}

/// The order-preserving key of `parts` of `table`, asking the server for missing weights.
pub(super) async fn encode(
    reader: &mut SnapshotReader,
    cache: &mut WeightCache,
    table: &TableId,
    run: &TableRun,
    parts: &[KeyPart],
) -> Result<SnapshotKey, Halt> {
    let mut needed: HashMap<Column, HashSet<Vec<u8>>> = HashMap::new();
    for (i, part) in parts.iter().enumerate() {
        if let KeyPart::Text(bytes) = part {
            needed
                .entry((table.clone(), i))
                .or_default()
                .insert(bytes.clone());
        }
    }
    for ((table, index), values) in cache.missing(needed) {
        let weights = fetch_weights(reader, run, index, &values).await?;
        cache.insert((table, index), values, weights);
    }
    encode_cached(cache, table, parts).ok_or("snapshot_pk_weight_failed")
}

/// The server's collation weights of `values` of `run`'s key column `index`, in order (one
/// round trip).
pub(super) async fn fetch_weights(
    reader: &mut SnapshotReader,
    run: &TableRun,
    index: usize,
    values: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>, Halt> {
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
    Ok(weights)
}
