//! The owner-side half of the initial snapshot (ADR-0005): reads chunks through the snapshot
//! reader, turns keys into the gate's order-preserving encoding (string keys by the server's
//! collation weights), gates the stream's transactions, and says when a chunk is due and when
//! it may be published. The decisions themselves are pure: which chunk, and when it may be
//! published, are the [`SnapshotSession`]/[`CursorGate`](capstan_core::snapshot::CursorGate)
//! of the core crate's; when a chunk is read, read ahead or read again, the [`ChunkPacer`]'s.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use capstan_connectors::mysql::snapshot::{
    BinlogPoint, Chunk, ChunkPrefetch, KeyPart, SnapshotReader, SnapshotTable,
};
use capstan_connectors::mysql::{AssemblerOutput, ValidSourceConfig};
use capstan_core::change::{Change, Op, Row, SchemaChange, TableId, Transaction};
use capstan_core::position::Position;
use capstan_core::snapshot::{
    ChunkSizer, ReadyChunk, RowKeys, SessionError, SnapshotKey, SnapshotSession, TableStatus,
};
use capstan_kafka::exactly_once::SnapshotProgress;
use capstan_raft_store::SnapshotTableStatus;

use super::engine::chunk_pacer::{AfterFailure, ChunkPacer};
pub use super::prepared_snapshot::PreparedSnapshot;
use super::snapshot_plan::ad_hoc_verdict;
use super::table_run::{
    encode, encode_cached, fetch_weights, kafka_table, key_bytes, Halt, ProgressWrite, TableRun,
};
use super::weight_cache::{Column, WeightCache};

/// The rows of a chunk read and not yet published.
#[derive(Debug)]
pub struct ChunkRows {
    /// The rows, in key order.
    pub rows: Vec<Row>,
    /// The raw key of the last row.
    pub raw_end: Option<Vec<KeyPart>>,
    /// The binlog point of the chunk's position, when the reader has one (the records'
    /// `source.file` and `pos`).
    pub point: Option<BinlogPoint>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct SnapshotDriver {
    reader: SnapshotReader,
    source: Option<(ValidSourceConfig, String)>,
    session: SnapshotSession<ChunkRows>,
    tables: HashMap<TableId, TableRun>,
    /// Tables complete before this run started: their last cursor, for the offsets record.
    complete: HashMap<TableId, Option<Vec<KeyPart>>>,
    chunk_size: Option<u32>,
    /// Each table's chunk size (fixed, or adapting to its read rate and row width).
    sizers: HashMap<TableId, ChunkSizer>,
    /// The next chunk, read ahead on a second connection while one is published.
    prefetch: ChunkPrefetch,
    /// When the next chunk is due, whether one is read ahead, what a failed read leads to.
    pacer: ChunkPacer,
    /// The collation weights of string key values, under a byte budget.
    weights: WeightCache,
    kafka_chunks: u64,
    /// Streamed row changes suppressed by the gate so far.
    pub suppressed: u64,
    /// Lock hold times of the chunks read (MySQL), for the status log.
    pub lock_holds: Vec<Duration>,
}

impl SnapshotDriver {
    /// A driver from a prepared snapshot; table cursors are encoded here, which for string
    /// keys asks the server for weights.
    pub async fn new(prepared: PreparedSnapshot) -> Result<Self, Halt> {
        let PreparedSnapshot {
            mut reader,
            order,
            tables,
            complete,
            status,
            chunk_size,
            max_rows_per_second,
        } = prepared;
        let mut gate = capstan_core::snapshot::CursorGate::new();
        let mut weights = WeightCache::default();
        for id in &order {
            if complete.contains_key(id) {
                // forwards every change; no cursor needed (nor encoded: no weights asked)
                gate.track(
                    id.clone(),
                    capstan_core::snapshot::TableCursor {
                        status: TableStatus::Complete,
                        pk_cursor: None,
                        delivered_pk: None,
                    },
                );
                continue;
            }
            let run = tables.get(id).ok_or("snapshot_table_not_found")?;
            let pk_cursor = match &run.raw_cursor {
                Some(raw) => Some(encode(&mut reader, &mut weights, id, run, raw).await?),
                None => None,
            };
            let delivered_pk = match &run.raw_delivered {
                Some(raw) => Some(encode(&mut reader, &mut weights, id, run, raw).await?),
                None => None,
            };
            let status = status.get(id).copied().unwrap_or(TableStatus::Pending);
            gate.track(
                id.clone(),
                capstan_core::snapshot::TableCursor {
                    status,
                    pk_cursor,
                    delivered_pk,
                },
            );
        }
        Ok(SnapshotDriver {
            reader,
            source: None,
            session: SnapshotSession::new(order, gate),
            tables,
            complete,
            chunk_size,
            sizers: HashMap::new(),
            prefetch: ChunkPrefetch::new(),
            pacer: ChunkPacer::new(max_rows_per_second, Instant::now()),
            weights,
            kafka_chunks: 0,
            suppressed: 0,
            lock_holds: Vec::new(),
        })
    }

    /// True when every table is complete.
    pub fn is_complete(&self) -> bool {
        self.session.is_complete()
    }

    /// The tables in reading order.
    pub fn tables(&self) -> &[TableId] {
        self.session.tables()
    }

    /// Checks that the chunk connection reached the server the stream reads (`identity`)
    /// and remembers both, so a reconnect after a transient failure is checked again.
    pub async fn bind_source(
        &mut self,
        config: ValidSourceConfig,
        identity: &str,
    ) -> Result<(), Halt> {
        self.reader
            .check_identity(identity)
            .await
            .map_err(|e| e.code())?;
        self.source = Some((config, identity.to_string()));
        Ok(())
    }

    /// A chunk of the table's next size: the one read ahead if it is usable at `processed`,
    /// else read now, retried on a fresh connection (identity checked again) after a
    /// transient failure. Its size and read time go to the table's sizer.
    async fn read_with_retry(&mut self, id: &TableId, processed: &Position) -> Result<Chunk, Halt> {
        let (chunk_size, ceiling) = (self.chunk_size, self.pacer.throttle());
        let sizer = *self
            .sizers
            .entry(id.clone())
            .or_insert_with(|| ChunkSizer::for_config(chunk_size).with_ceiling(ceiling));
        let asked = sizer.next_size();
        let after = self
            .tables
            .get(id)
            .ok_or("snapshot_table_not_found")?
            .raw_cursor
            .clone();
        if let Some((chunk, elapsed)) = self
            .prefetch
            .take(id, after.as_deref(), asked, processed)
            .await
        {
            self.observe(id, asked, &chunk, elapsed, true);
            return Ok(chunk);
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let run = self.tables.get(id).ok_or("snapshot_table_not_found")?;
            let started = Instant::now();
            let result = self
                .reader
                .read_chunk(&run.table, run.raw_cursor.as_deref(), asked)
                .await;
            let err = match result {
                Ok(chunk) => {
                    self.observe(id, asked, &chunk, started.elapsed(), false);
                    return Ok(chunk);
                }
                Err(e) => e,
            };
            let Some((config, identity)) = self.source.clone() else {
                return Err(err.code());
            };
            let pause = match ChunkPacer::after_failure(attempt, err.is_transient()) {
                AfterFailure::Retry(pause) => pause,
                AfterFailure::Halt => return Err(err.code()),
            };
            tracing::warn!(
                code = err.code(),
                attempt,
                "snapshot chunk read failed; retrying"
            );
            tokio::time::sleep(pause).await;
            if let Ok(mut reader) = SnapshotReader::open(&config).await {
                reader
                    .check_identity(&identity)
                    .await
                    .map_err(|e| e.code())?;
                self.reader = reader;
            }
        }
    }

    /// Reports a chunk's size and read time to its table's sizer.
    fn observe(&mut self, id: &TableId, asked: u32, chunk: &Chunk, elapsed: Duration, ahead: bool) {
        if let Some(sizer) = self.sizers.get_mut(id) {
            sizer.observe(asked, chunk.rows.len(), chunk.bytes, elapsed);
            tracing::debug!(
                table = %id,
                asked,
                rows = chunk.rows.len(),
                bytes = chunk.bytes,
                elapsed_ms = elapsed.as_secs_f64() * 1000.0,
                read_ahead = ahead,
                next = sizer.next_size(),
                "snapshot chunk read"
            );
        }
    }

    /// Chunks read ahead so far: used, stale, wasted.
    pub fn read_ahead_counts(&self) -> [u64; 3] {
        [
            self.prefetch.used,
            self.prefetch.stale,
            self.prefetch.wasted,
        ]
    }

    /// How long until the next chunk should be read: `Some(ZERO)` now, `None` when no chunk
    /// is wanted (one waits for its position, or the snapshot is complete).
    pub fn chunk_due_in(&self, backlog: bool) -> Option<Duration> {
        self.session.next_table()?;
        Some(self.pacer.due_in(backlog, Instant::now()))
    }

    /// Reads the next chunk (the caller has paused the stream at `processed`, so
    /// `processed` ⊆ G; a chunk read ahead is used only if that holds for it) and returns it
    /// if it may be published at once. Unless the stream has a `backlog`, a throttle is set
    /// or the capture locks (`SnapshotReader::reads_ahead`), the chunk after it is read
    /// ahead meanwhile.
    pub async fn read_chunk(
        &mut self,
        processed: &Position,
        backlog: bool,
    ) -> Result<Option<ReadyChunk<ChunkRows>>, Halt> {
        let Some(id) = self.session.next_table().cloned() else {
            return Ok(None);
        };
        let chunk = self.read_with_retry(&id, processed).await?;
        let run = self.tables.get(&id).ok_or("snapshot_table_not_found")?;
        let raw_end = match chunk.rows.last() {
            Some(row) => Some(run.table.key.key_of(row).map_err(|e| e.code())?),
            None => None,
        };
        let end = match &raw_end {
            Some(raw) => Some(encode(&mut self.reader, &mut self.weights, &id, run, raw).await?),
            None => None,
        };
        self.pacer.read(chunk.rows.len(), Instant::now());
        if let Some(held) = chunk.lock_held {
            self.lock_holds.push(held);
        }
        if self
            .pacer
            .reads_ahead(chunk.last, backlog, self.reader.reads_ahead())
        {
            if let (Some((config, identity)), Some(raw_end)) = (&self.source, &raw_end) {
                let asked = self.sizers.get(&id).map_or(1, ChunkSizer::next_size);
                self.prefetch
                    .start(config, identity, &run.table, raw_end.clone(), asked);
            }
        }
        let rows = ChunkRows {
            rows: chunk.rows,
            raw_end,
            point: chunk.binlog_point,
        };
        self.session
            .chunk_read(id, chunk.position, end, chunk.last, rows)
            .map_err(|e| match e {
                SessionError::CursorNotAdvanced => "snapshot_cursor_not_advanced",
                SessionError::ChunkPending | SessionError::NotNextTable => "snapshot_internal",
            })?;
        Ok(self.session.take_ready(processed))
    }

    /// The waiting chunk, if `next` (the stream output about to be gated) is a transaction
    /// its position G does not cover (see [`SnapshotSession::take_before`]).
    pub fn take_before(&mut self, next: &AssemblerOutput) -> Option<ReadyChunk<ChunkRows>> {
        let gtid = match next {
            AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx) => &tx.gtid,
            AssemblerOutput::SchemaChange { gtid, .. }
            | AssemblerOutput::PositionAdvanced { gtid, .. } => gtid,
        };
        self.session.take_before(gtid)
    }

    /// The waiting chunk, if `processed` covers its position.
    pub fn take_ready(&mut self, processed: &Position) -> Option<ReadyChunk<ChunkRows>> {
        self.session.take_ready(processed)
    }

    /// Asks the server for the collation weights of every string key in `outputs` of a
    /// gated table that is not cached yet (one round trip per key column). Every one of them
    /// is cached afterwards, whatever the cache's budget: [`Self::gate`] then gates these
    /// outputs from the cache alone.
    pub async fn resolve_weights<'o>(
        &mut self,
        outputs: impl IntoIterator<Item = &'o AssemblerOutput>,
    ) -> Result<(), Halt> {
        let mut needed: HashMap<Column, HashSet<Vec<u8>>> = HashMap::new();
        for output in outputs {
            let (AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx)) = output else {
                continue;
            };
            for change in &tx.changes {
                if !self.session.gate().is_gated(&change.table) {
                    continue;
                }
                let Some(run) = self.tables.get(&*change.table) else {
                    continue;
                };
                for row in [&change.before, &change.after].into_iter().flatten() {
                    let parts = run.table.key.key_of(row).map_err(|e| e.code())?;
                    for (i, part) in parts.into_iter().enumerate() {
                        if let KeyPart::Text(bytes) = part {
                            needed
                                .entry(((*change.table).clone(), i))
                                .or_default()
                                .insert(bytes);
                        }
                    }
                }
            }
        }
        // room is made once, for the whole batch, before any of it is fetched
        for ((table, index), values) in self.weights.missing(needed) {
            let run = self.tables.get(&table).ok_or("snapshot_table_not_found")?;
            let weights = fetch_weights(&mut self.reader, run, index, &values).await?;
            self.weights.insert((table, index), values, weights);
        }
        Ok(())
    }

    /// Gates one stream output: suppressed changes are removed (the transaction still
    /// advances the position), key-changing updates may be cut to one half. A DDL statement
    /// on a table being snapshotted halts.
    pub fn gate(&mut self, output: AssemblerOutput) -> Result<AssemblerOutput, Halt> {
        match output {
            AssemblerOutput::Transaction(tx) => {
                self.gate_changes(tx).map(AssemblerOutput::Transaction)
            }
            // a slice is gated like a whole transaction: no chunk is read while one is open
            AssemblerOutput::Slice(tx) => self.gate_changes(tx).map(AssemblerOutput::Slice),
            AssemblerOutput::SchemaChange { ref change, .. } if self.touches_gated(change) => {
                Err("snapshot_schema_drifted")
            }
            other => Ok(other),
        }
    }

    /// Removes the suppressed changes of a transaction (or slice) and cuts key-changing
    /// updates where the gate says so.
    fn gate_changes(&mut self, mut tx: Transaction) -> Result<Transaction, Halt> {
        if !tx
            .changes
            .iter()
            .any(|c| self.session.gate().is_gated(&c.table))
        {
            return Ok(tx);
        }
        let changes = std::mem::take(&mut tx.changes);
        let mut kept = Vec::with_capacity(changes.len());
        for change in changes {
            if !self.session.gate().is_gated(&change.table) {
                kept.push(change);
                continue;
            }
            let verdict = self.verdict(&change)?;
            if verdict != capstan_core::snapshot::Verdict::Forward {
                self.suppressed += 1;
            }
            kept.extend(verdict.apply(change));
        }
        tx.changes = kept;
        Ok(tx)
    }

    fn touches_gated(&self, change: &SchemaChange) -> bool {
        let Some(schema) = change.schema.as_deref() else {
            return false;
        };
        self.session.tables().iter().any(|t| {
            self.session.gate().is_gated(t)
                && t.schema == schema
                && change.table.as_deref().is_none_or(|name| name == t.table)
        })
    }

    fn verdict(&self, change: &Change) -> Result<capstan_core::snapshot::Verdict, Halt> {
        let run = self
            .tables
            .get(&*change.table)
            .ok_or("snapshot_table_not_found")?;
        let key = |row: &Option<Row>| -> Result<SnapshotKey, Halt> {
            let row = row.as_ref().ok_or("snapshot_row_image_missing")?;
            let parts = run.table.key.key_of(row).map_err(|e| e.code())?;
            encode_cached(&self.weights, &change.table, &parts).ok_or("snapshot_pk_weight_failed")
        };
        let gate = self.session.gate();
        let (verdict, key_changed) = match change.op {
            Op::Insert => (
                gate.decide(&change.table, RowKeys::Insert(&key(&change.after)?)),
                false,
            ),
            Op::Delete => (
                gate.decide(&change.table, RowKeys::Delete(&key(&change.before)?)),
                false,
            ),
            Op::Update => {
                let (before, after) = (key(&change.before)?, key(&change.after)?);
                let verdict = gate.decide(
                    &change.table,
                    RowKeys::Update {
                        before: &before,
                        after: &after,
                    },
                );
                (verdict, before != after)
            }
        };
        Ok(if run.incremental {
            ad_hoc_verdict(verdict, change.op, key_changed)
        } else {
            verdict
        })
    }

    /// The table being published: its description.
    pub fn table(&self, id: &TableId) -> Option<&SnapshotTable> {
        self.tables.get(id).map(|r| &r.table)
    }

    /// True when `id` is read for an operator's ad-hoc (incremental) snapshot.
    pub fn is_incremental(&self, id: &TableId) -> bool {
        self.tables.get(id).is_some_and(|r| r.incremental)
    }

    /// True while `id` is read from its start (no chunk of it published yet): the next
    /// chunk's first row is the table's first; of the snapshot's first, when `id` is first.
    pub fn reads_from_start(&self, id: &TableId) -> (bool, bool) {
        let start = self.tables.get(id).is_some_and(|r| r.raw_cursor.is_none());
        (start, start && self.session.tables().first() == Some(id))
    }

    /// Rows published of `id` so far.
    pub fn rows_done(&self, id: &TableId) -> u64 {
        self.tables.get(id).map_or(0, |r| r.rows_done)
    }

    /// The Raft write made durable before `ready` is published: `delivered_pk` moves to the
    /// chunk's end, `pk_cursor` stays.
    pub fn progress_before(&self, ready: &ReadyChunk<ChunkRows>) -> Option<ProgressWrite> {
        let run = self.tables.get(&ready.table)?;
        let raw_end = ready.payload.raw_end.as_ref()?;
        Some(ProgressWrite {
            table: ready.table.to_string(),
            pk_cursor: run.raw_cursor.as_deref().and_then(key_bytes),
            delivered_pk: key_bytes(raw_end),
            status: SnapshotTableStatus::InProgress,
            rows_done: run.rows_done,
            rows_estimated: run.rows_estimated,
        })
    }

    /// Records that `ready` was published; returns the Raft write that follows the publish.
    pub fn published(&mut self, ready: &ReadyChunk<ChunkRows>) -> Option<ProgressWrite> {
        let run = self.tables.get_mut(&ready.table)?;
        if let Some(raw_end) = &ready.payload.raw_end {
            run.raw_cursor = Some(raw_end.clone());
            run.raw_delivered = Some(raw_end.clone());
        }
        run.rows_done += ready.payload.rows.len() as u64;
        self.kafka_chunks += 1;
        let status = if ready.last {
            TableStatus::Complete
        } else {
            TableStatus::InProgress
        };
        Some(run.progress(&ready.table, status))
    }

    /// The p50 and p99 table-lock hold of the chunks read so far (MySQL's lock path).
    pub fn lock_hold_percentiles(&self) -> Option<(Duration, Duration)> {
        let mut holds = self.lock_holds.clone();
        if holds.is_empty() {
            return None;
        }
        holds.sort_unstable();
        let at = |q: usize| holds[(holds.len() - 1) * q / 100];
        Some((at(50), at(99)))
    }

    /// Exactly-once: continue the offsets record's chunk counter from `chunks`.
    pub fn set_kafka_chunks(&mut self, chunks: u64) {
        self.kafka_chunks = chunks;
    }

    /// The snapshot progress as the exactly-once offsets record carries it, counting
    /// `pending` (a chunk about to be published in the same Kafka transaction).
    pub fn kafka_progress(&self, pending: Option<&ReadyChunk<ChunkRows>>) -> SnapshotProgress {
        let mut tables = std::collections::BTreeMap::new();
        for id in self.session.tables() {
            let Some(run) = self.tables.get(id) else {
                if let Some(cursor) = self.complete.get(id) {
                    tables.insert(id.to_string(), kafka_table(cursor.as_deref(), true));
                }
                continue;
            };
            let complete = self
                .session
                .gate()
                .cursor(id)
                .is_some_and(|c| c.status == TableStatus::Complete);
            let cursor = match pending.filter(|p| p.table == *id) {
                Some(p) => p.payload.raw_end.as_ref().or(run.raw_cursor.as_ref()),
                None => run.raw_cursor.as_ref(),
            };
            tables.insert(
                id.to_string(),
                kafka_table(cursor.map(Vec::as_slice), complete),
            );
        }
        SnapshotProgress {
            chunks_committed: self.kafka_chunks + u64::from(pending.is_some()),
            tables,
        }
    }
}
