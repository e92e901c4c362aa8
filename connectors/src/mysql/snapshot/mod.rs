//! The initial snapshot's I/O half: [`SnapshotReader`] reads a table in key-ordered chunks,
//! each as of an exact position G, so the cursor gate (pure, elsewhere) can weave the chunks
//! into the running stream with no gap (ADR-0005).
//!
//! # Why G is a lower bound
//!
//! MySQL (and, by default, nothing on MariaDB) pairs a read view with a position under a brief
//! `LOCK TABLES t READ`: the lock waits for every in-flight writer of `t` to commit and keeps
//! new ones out, so the executed position read under it covers every change of `t` that has
//! committed, and each of those is visible to a read view opened afterwards. The read view is
//! opened by `START TRANSACTION WITH CONSISTENT SNAPSHOT`, which on both servers releases the
//! table lock *before* it takes the view: a writer of `t` may commit in between, so the view
//! can hold changes of `t` after G. That is harmless for the gate — such a change is both in
//! the chunk and, later, in the stream with a key at or below the cursor, a duplicate an
//! upsert-by-key sink absorbs — while the converse, a change of `t` in G missing from the
//! view, cannot happen. The lock is held from `LOCK TABLES` returning to `START TRANSACTION`
//! returning ([`Chunk::lock_held`]).
//!
//! MariaDB can pair them lock-free ([`PositionCapture::BinlogSnapshot`]): the consistent
//! snapshot records the binlog file and offset it corresponds to
//! (`binlog_snapshot_file`/`_position`), and `BINLOG_GTID_POS` turns that into a GTID
//! position for a reader's first chunk; later chunks' points are translated from the previous
//! one by the binlog events in between ([`GtidWalk`], ADR-0006 Revision 2026-12-05). The lock
//! path exists for MariaDB too, should that prove unsafe.
//!
//! # Values
//!
//! A chunk row's values equal what the binlog decoder produces for the same row (see
//! `row_value`); the key of a row ([`KeyShape::key_of`]) is what the gate compares.

mod canary;
mod chunk;
mod chunk_prefetch;
mod declared_type;
mod error;
mod gtid_walk;
mod key;
mod key_ranges;
mod pad_space;
mod parallel_reads;
mod reader;
mod row_value;
mod sql;
mod table;
mod weighing;

pub use chunk::{Chunk, PositionCapture, ReaderOptions};
pub use chunk_prefetch::{ChunkPrefetch, PrefetchBackoff};
pub use error::SnapshotError;
pub use gtid_walk::{BinlogPoint, EventRow, GtidWalk, WalkError, WalkStep};
pub use key::{KeyColumn, KeyKind, KeyPart, KeyShape};
pub use key_ranges::KeyRanges;
pub use parallel_reads::{ParallelReads, RangeOutcome, RangeRead};
pub use reader::{SnapshotReader, TranslationAnchor, TranslationStats};
pub use table::SnapshotTable;

use capstan_core::position::Flavor;

/// The query naming the server: MySQL `@@server_uuid`; MariaDB, which has none, its server
/// id, host name and port. Shared by the snapshot reader and the binlog source.
pub(crate) fn server_identity_sql(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mysql => "SELECT @@server_uuid",
        Flavor::Mariadb => {
            "SELECT CONCAT('server_id=', @@server_id, ',host=', @@hostname, ',port=', @@port)"
        }
    }
}

/// The executed position: MySQL `@@global.gtid_executed`, MariaDB `@@global.gtid_binlog_pos`.
pub(crate) fn executed_position_sql(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mysql => "SELECT @@global.gtid_executed",
        Flavor::Mariadb => "SELECT @@global.gtid_binlog_pos",
    }
}
