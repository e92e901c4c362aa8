//! [`Chunk`]: one page of a table read as of an exact position, and [`PositionCapture`]: how
//! that position is captured.

use std::time::Duration;

use capstan_core::change::Row;
use capstan_core::position::{Flavor, Position};

use super::gtid_walk::BinlogPoint;
use super::key::KeyPart;

/// One page of a table, in key order.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    /// G: every change of the table committed before G is in the rows (a lower bound — the
    /// read view may also hold changes of the table committed after G; they are duplicates a
    /// later streamed change repeats, never a loss).
    pub position: Position,
    /// At most `chunk_size` rows after the cursor, in key order.
    pub rows: Vec<Row>,
    /// True if no row of the table follows the last one returned (also for an empty chunk).
    /// Never for a range read with an upper bound.
    pub last: bool,
    /// For a range read with an upper bound that returned every row up to it: that bound,
    /// where the chunk's range ends (no row of the table lies between its last row and the
    /// bound as of G). `None`: the range ends at the last row.
    pub covers_to: Option<Vec<KeyPart>>,
    /// The bytes of the rows' values as the server sent them (every row read, the look-ahead
    /// row too): what sizes the next chunk, with the read time.
    pub bytes: u64,
    /// With [`PositionCapture::LockTables`]: how long the table lock was held, from
    /// `LOCK TABLES` returning to `START TRANSACTION` returning. `None` lock-free.
    pub lock_held: Option<Duration>,
    /// The binlog point of `position`: with [`PositionCapture::BinlogSnapshot`] the read
    /// view's (its GTID position is `position`); with the lock on MySQL the point `SHOW BINARY
    /// LOG STATUS` reported with G (at or just after G's end). `None` with the lock on MariaDB.
    pub binlog_point: Option<BinlogPoint>,
}

/// How a chunk's exact position G is paired with its read view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PositionCapture {
    /// `LOCK TABLES t READ` → executed position (MySQL `@@global.gtid_executed`, MariaDB
    /// `@@global.gtid_binlog_pos`) → `START TRANSACTION WITH CONSISTENT SNAPSHOT` (which
    /// releases the lock) → `UNLOCK TABLES`. Needs the `LOCK TABLES` privilege.
    LockTables,
    /// MariaDB only, lock-free: `START TRANSACTION WITH CONSISTENT SNAPSHOT` →
    /// `binlog_snapshot_file`/`binlog_snapshot_position` (the binlog point of the read view)
    /// → its GTID position: `BINLOG_GTID_POS(file, pos)` for a reader's first chunk, then
    /// translated from the chunk before by the binlog events between the two points
    /// (ADR-0006, Revision 2026-12-05).
    BinlogSnapshot,
}

impl PositionCapture {
    /// The default per flavour: MySQL locks (it has no lock-free pairing), MariaDB reads its
    /// binlog snapshot point.
    pub fn default_for(flavor: Flavor) -> Self {
        match flavor {
            Flavor::Mysql => PositionCapture::LockTables,
            Flavor::Mariadb => PositionCapture::BinlogSnapshot,
        }
    }
}

/// Reader settings beyond the source configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    /// `SET SESSION lock_wait_timeout`, in seconds: how long `LOCK TABLES` may wait.
    pub lock_wait_timeout_s: u32,
    /// The position capture; `None` for [`PositionCapture::default_for`] the flavour.
    pub capture: Option<PositionCapture>,
    /// With [`PositionCapture::BinlogSnapshot`]: translate each chunk's binlog point from the
    /// previous chunk's by the binlog events in between (true, the default), or ask
    /// `BINLOG_GTID_POS` for every chunk (false: the cost grows with the offset into the
    /// binlog file; kept for comparison and as a switch).
    pub walk_binlog: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            lock_wait_timeout_s: 10,
            capture: None,
            walk_binlog: true,
        }
    }
}
