//! The owner-side half of the initial snapshot (ADR-0005): reads chunks through the snapshot
//! reader, turns keys into the gate's order-preserving encoding (string keys by the server's
//! collation weights), gates the stream's transactions, and says when a chunk is due and when
//! it may be published. The decisions themselves are pure: which chunk, and when it may be
//! published, are the [`SnapshotSession`]/[`CursorGate`](capstan_core::snapshot::CursorGate)
//! of the core crate's; when a chunk is read, read ahead or read again, the [`ChunkPacer`]'s.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use capstan_connectors::mysql::snapshot::{
    BinlogPoint, Chunk, ChunkPrefetch, KeyPart, KeyRanges, ParallelReads, PrefetchBackoff,
    SnapshotReader, SnapshotTable,
};
use capstan_connectors::mysql::{AssemblerOutput, ValidSourceConfig};
use capstan_core::change::{Row, TableId};
use capstan_core::position::Position;
use capstan_core::snapshot::{
    ChunkSizer, ReadyChunk, SessionError, SnapshotKey, SnapshotSession, TableStatus,
};

use super::engine::chunk_pacer::{AfterFailure, ChunkPacer};
pub use super::prepared_snapshot::PreparedSnapshot;
use super::table_run::{encode, Halt, TableRun};
use super::weight_cache::WeightCache;

mod gating;
mod parallel_round;
mod progress;

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
    /// Read beside another chunk of its round, not first ([`SnapshotDriver::read_round`]).
    pub beside: bool,
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
    /// Chunk reads at once (1: one at a time).
    parallel_reads: usize,
    /// The extra connections of parallel reads.
    parallel: ParallelReads,
    /// Per table keyed by one integer column: the key ranges its next chunks are read in.
    ranges: HashMap<TableId, KeyRanges>,
    /// Rounds of parallel reads so far, and their chunks not offered because one before them
    /// in the same table was cut short.
    pub rounds: u64,
    round_wasted: u64,
    /// After a failed round, the next chunks are read one at a time for a while.
    round_backoff: PrefetchBackoff,
    /// Chunks read beside another of their round and published.
    round_used: u64,
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
            parallel_reads,
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
            parallel_reads: usize::try_from(parallel_reads).unwrap_or(1).max(1),
            parallel: ParallelReads::default(),
            ranges: HashMap::new(),
            rounds: 0,
            round_wasted: 0,
            round_backoff: PrefetchBackoff::default(),
            round_used: 0,
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
        let asked = self.next_size(id);
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
            self.reconnect(&config, &identity).await?;
        }
    }

    /// A fresh main connection after a failed read, checked to reach the stream's server
    /// (`identity`; another server halts). One that does not open leaves the old one, and
    /// the next attempt finds out.
    async fn reconnect(&mut self, config: &ValidSourceConfig, identity: &str) -> Result<(), Halt> {
        if let Ok(mut reader) = SnapshotReader::open(config).await {
            reader
                .check_identity(identity)
                .await
                .map_err(|e| e.code())?;
            self.reader = reader;
        }
        Ok(())
    }

    /// The table's next chunk size.
    fn next_size(&mut self, id: &TableId) -> u32 {
        let (chunk_size, ceiling) = (self.chunk_size, self.pacer.throttle());
        self.sizers
            .entry(id.clone())
            .or_insert_with(|| ChunkSizer::for_config(chunk_size).with_ceiling(ceiling))
            .next_size()
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

    /// Chunks read ahead (or in parallel) so far: used; stale (dropped because the stream
    /// passed their position before they could be published); wasted (a different chunk was
    /// wanted, the read failed, one before it was cut short).
    pub fn read_ahead_counts(&self) -> [u64; 3] {
        [
            self.prefetch.used + self.round_used,
            self.prefetch.stale + self.session.dropped(),
            self.prefetch.wasted + self.round_wasted,
        ]
    }

    /// How long until [`Self::read_chunk`] should be called: `Some(ZERO)` now (a chunk read
    /// is waiting and `processed` covers its position, or the next chunks are due), `None`
    /// when no chunk is wanted (those read wait for their positions, or the snapshot is
    /// complete).
    pub fn chunk_due_in(&self, backlog: bool, processed: &Position) -> Option<Duration> {
        if self.session.has_pending() {
            return self.session.has_ready(processed).then_some(Duration::ZERO);
        }
        self.session.next_table()?;
        Some(self.pacer.due_in(backlog, Instant::now()))
    }

    /// The next chunk to publish (the caller has paused the stream at `processed`, so
    /// `processed` ⊆ G of every chunk read now): a chunk read before whose position
    /// `processed` covers; else, when none waits, the next chunks are read — a round of
    /// parallel reads when it may ([`Self::read_round`]), else one chunk, the chunk after it
    /// read ahead meanwhile unless the stream has a `backlog`, a throttle is set or the
    /// capture locks (`SnapshotReader::reads_ahead`) — and the first of them that may be
    /// published at once. Call again while it returns one.
    pub async fn read_chunk(
        &mut self,
        processed: &Position,
        backlog: bool,
    ) -> Result<Option<ReadyChunk<ChunkRows>>, Halt> {
        if self.session.has_pending() {
            return Ok(self.session.take_ready(processed));
        }
        let Some(id) = self.session.next_table().cloned() else {
            return Ok(None);
        };
        if self.read_round(backlog).await? {
            return Ok(self.session.take_ready(processed));
        }
        let chunk = self.read_with_retry(&id, processed).await?;
        let last = chunk.last;
        let after = self.cursor_key(&id);
        let (raw_end, _) = self.offer(&id, after, chunk, false).await?;
        if self
            .pacer
            .reads_ahead(last, backlog, self.reader.reads_ahead())
        {
            let run = self.tables.get(&id).ok_or("snapshot_table_not_found")?;
            if let (Some((config, identity)), Some(raw_end)) = (&self.source, &raw_end) {
                let asked = self.sizers.get(&id).map_or(1, ChunkSizer::next_size);
                self.prefetch.seed(self.reader.translation_anchor());
                self.prefetch
                    .start(config, identity, &run.table, raw_end.clone(), asked);
            }
        }
        Ok(self.session.take_ready(processed))
    }

    /// The gate's cursor of `id`: where its next chunk starts when none waits.
    fn cursor_key(&self, id: &TableId) -> Option<SnapshotKey> {
        self.session
            .gate()
            .cursor(id)
            .and_then(|c| c.pk_cursor.clone())
    }

    /// Offers a chunk of `id` whose range starts after `after` (encoded) to the session: its
    /// range's raw end (the bound of a range read whole, else its last row's key) and its
    /// encoded end. Its key span teaches the table's [`KeyRanges`].
    async fn offer(
        &mut self,
        id: &TableId,
        after: Option<SnapshotKey>,
        chunk: Chunk,
        beside: bool,
    ) -> Result<(Option<Vec<KeyPart>>, Option<SnapshotKey>), Halt> {
        let run = self.tables.get(id).ok_or("snapshot_table_not_found")?;
        let key_of = |row: Option<&Row>| -> Result<Option<Vec<KeyPart>>, Halt> {
            row.map(|r| run.table.key.key_of(r).map_err(|e| e.code()))
                .transpose()
        };
        let last_key = key_of(chunk.rows.last())?;
        if KeyRanges::splits(&run.table.key) {
            if let (Some(first), Some(last)) = (key_of(chunk.rows.first())?, &last_key) {
                self.ranges
                    .entry(id.clone())
                    .or_default()
                    .observe(&first, last, chunk.rows.len());
            }
        }
        let raw_end = chunk.covers_to.clone().or(last_key);
        let end = match &raw_end {
            Some(raw) => Some(encode(&mut self.reader, &mut self.weights, id, run, raw).await?),
            None => None,
        };
        self.pacer.read(chunk.rows.len(), Instant::now());
        if let Some(held) = chunk.lock_held {
            self.lock_holds.push(held);
        }
        let rows = ChunkRows {
            rows: chunk.rows,
            raw_end: raw_end.clone(),
            point: chunk.binlog_point,
            beside,
        };
        self.session
            .chunk_read(
                id.clone(),
                after.as_ref(),
                chunk.position,
                end.clone(),
                chunk.last,
                rows,
            )
            .map_err(|e| match e {
                SessionError::CursorNotAdvanced => "snapshot_cursor_not_advanced",
                SessionError::NotContiguous | SessionError::NotNextTable => "snapshot_internal",
            })?;
        Ok((raw_end, end))
    }

    /// The waiting chunk that must be published before `next` (the stream output about to
    /// be gated) when `release` — the caller can publish one now —, see
    /// [`SnapshotSession::take_before`]; chunks that cannot wait are dropped.
    pub fn take_before(
        &mut self,
        next: &AssemblerOutput,
        release: bool,
    ) -> Option<ReadyChunk<ChunkRows>> {
        let gtid = match next {
            AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx) => &tx.gtid,
            AssemblerOutput::SchemaChange { gtid, .. }
            | AssemblerOutput::PositionAdvanced { gtid, .. } => gtid,
        };
        self.session.take_before(gtid, release)
    }

    /// A waiting chunk whose position `processed` covers.
    pub fn take_ready(&mut self, processed: &Position) -> Option<ReadyChunk<ChunkRows>> {
        self.session.take_ready(processed)
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
}
