//! [`SnapshotReader::read_chunk`]: one chunk and its position G, per [`PositionCapture`]
//! (ADR-0006): MySQL's `LOCK TABLES` capture before the view, MariaDB's view opened with the
//! chunk's `SELECT` in one round trip and its binlog point read after the rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_core::change::{Row, TableId};
use capstan_core::position::{Flavor, Position};

use super::super::chunk::{Chunk, PositionCapture};
use super::super::error::{server_code, SnapshotError};
use super::super::executed_position_sql;
use super::super::gtid_walk::BinlogPoint;
use super::super::key::KeyKind;
use super::super::key::KeyPart;
use super::super::row_value::{convert, wire_type_fits};
use super::super::sql::{chunk_params, chunk_select, quote_ident, quote_table, range_bound};
use super::super::table::{SnapshotTable, TableLayout};
use super::{chunk_err, parse_position, SnapshotReader};
use crate::mysql::query_conn::QueryConn;
use crate::mysql::query_packets::BinaryRow;
use crate::mysql::replica_conn::ServerOrIo;

/// At most this many rows are reserved up front for a chunk.
const CAPACITY_CAP: usize = 1 << 16;

/// Opens a chunk's transaction: its read view, and on MariaDB its binlog point.
const START_SNAPSHOT: &str = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";

/// MySQL: the executed GTID set with the binlog point (`File`, `Position`, `Binlog_Do_DB`,
/// `Binlog_Ignore_DB`, `Executed_Gtid_Set`); the capstan account's `REPLICATION CLIENT`
/// allows it.
const BINARY_LOG_STATUS: &str = "SHOW BINARY LOG STATUS";

/// MariaDB: the open transaction's binlog point (`binlog_snapshot_file`/`_position`, fixed
/// for the transaction: ADR-0006).
const BINLOG_SNAPSHOT_POINT: &str = "SELECT \
     MAX(IF(VARIABLE_NAME = 'BINLOG_SNAPSHOT_FILE', VARIABLE_VALUE, NULL)) AS f, \
     MAX(IF(VARIABLE_NAME = 'BINLOG_SNAPSHOT_POSITION', VARIABLE_VALUE, NULL)) AS p \
     FROM information_schema.SESSION_STATUS \
     WHERE VARIABLE_NAME IN ('BINLOG_SNAPSHOT_FILE', 'BINLOG_SNAPSHOT_POSITION')";

/// The point and its `BINLOG_GTID_POS` (a reader's first chunk), then the transaction's end,
/// in one round trip.
fn point_and_commit(with_server_gtid: bool) -> String {
    let g = if with_server_gtid {
        "BINLOG_GTID_POS(s.f, s.p)"
    } else {
        "NULL"
    };
    format!("SELECT s.f, s.p, {g} FROM ({BINLOG_SNAPSHOT_POINT}) s; COMMIT")
}

impl SnapshotReader {
    /// Up to `chunk_size` rows with key > `after` (from the start when `None`), in key order,
    /// read as of an exact position G; `last` when no row follows.
    pub async fn read_chunk(
        &mut self,
        table: &SnapshotTable,
        after: Option<&[KeyPart]>,
        chunk_size: u32,
    ) -> Result<Chunk, SnapshotError> {
        self.read_range(table, after, None, chunk_size).await
    }

    /// As [`Self::read_chunk`], and with `upto` only rows with key ≤ `upto` (a key that needs
    /// not exist; single-column integer keys only, [`KeyRanges`](super::super::KeyRanges)).
    /// Such a chunk is never `last`; when it holds every row up to `upto` its
    /// [`Chunk::covers_to`] is `upto`.
    pub async fn read_range(
        &mut self,
        table: &SnapshotTable,
        after: Option<&[KeyPart]>,
        upto: Option<&[KeyPart]>,
        chunk_size: u32,
    ) -> Result<Chunk, SnapshotError> {
        let layout = self.layout(table).await?;
        let shape = || SnapshotError::CursorShapeMismatch {
            table: table.id.clone(),
        };
        let mut params = match after {
            None => Vec::new(),
            Some(after) => chunk_params(&layout, after).ok_or_else(shape)?,
        };
        let bound = match upto {
            None => None,
            Some(upto) => Some(range_bound(&layout, upto).ok_or_else(shape)?),
        };
        params.extend(bound);
        let limit = u64::from(chunk_size.max(1)) + 1;
        params.push(mysql_common::Value::UInt(limit));
        let sql = chunk_select(&layout, after.is_some(), upto.is_some());
        let capacity = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .min(CAPACITY_CAP);
        // MySQL: G and the lock hold before the view (ADR-0006). MariaDB: the view's binlog
        // point is fixed when its transaction starts, so the start goes with the chunk's
        // SELECT in one round trip, and G is read after the rows, with the COMMIT
        let (locked, prelude) = match self.capture {
            PositionCapture::LockTables => {
                (Some(self.lock_tables_position(&table.id).await?), None)
            }
            PositionCapture::BinlogSnapshot => (None, Some((START_SNAPSHOT, "start transaction"))),
        };
        let (mut rows, bytes) = match self
            .select_rows(&layout, &sql, params, capacity, prelude)
            .await
        {
            Ok(rows) => rows,
            Err(e) => {
                let _ = self.conn.query_drop("ROLLBACK").await;
                return Err(e);
            }
        };
        let (position, lock_held, binlog_point) = match locked {
            Some((position, held, point)) => {
                self.conn
                    .query_drop("COMMIT")
                    .await
                    .map_err(|e| chunk_err(&table.id, "commit", &e))?;
                (position, Some(held), point)
            }
            None => {
                let (point, server) = self.binlog_snapshot_point_and_commit(&table.id).await?;
                let position = self.position_at(&table.id, point.clone(), server).await?;
                (position, None, Some(point))
            }
        };
        let whole = rows.len() < usize::try_from(limit).unwrap_or(usize::MAX);
        let (last, covers_to) = match upto {
            None => (whole, None),
            Some(upto) => (false, whole.then(|| upto.to_vec())),
        };
        rows.truncate(usize::try_from(chunk_size.max(1)).unwrap_or(usize::MAX));
        // column controls apply here, so an excluded or masked value never leaves
        if let (_, Some(plan)) = self.view(&layout.table)? {
            rows = rows.into_iter().map(|r| plan.apply_row(r)).collect();
        }
        Ok(Chunk {
            position,
            rows,
            last,
            covers_to,
            bytes,
            lock_held,
            binlog_point,
        })
    }

    /// The table's greatest key now (`None`: no rows), for a key of one integer column
    /// ([`KeyRanges`](super::super::KeyRanges)); `CursorShapeMismatch` for another key. Read
    /// outside any chunk's transaction: a hint for where ranges end, never a position.
    pub async fn last_key(
        &mut self,
        table: &SnapshotTable,
    ) -> Result<Option<Vec<KeyPart>>, SnapshotError> {
        let shape = || SnapshotError::CursorShapeMismatch {
            table: table.id.clone(),
        };
        let [column] = table.key.columns.as_slice() else {
            return Err(shape());
        };
        let key = quote_ident(&column.name);
        let sql = format!(
            "SELECT {key} FROM {} ORDER BY {key} DESC LIMIT 1",
            quote_table(&table.id)
        );
        let row: Option<mysql_common::Row> = self
            .conn
            .exec_first(sql, ())
            .await
            .map_err(|e| chunk_err(&table.id, "last key", &e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        match (row.unwrap_raw().into_iter().next().flatten(), &column.kind) {
            (Some(mysql_common::Value::Int(v)), KeyKind::Int) => Ok(Some(vec![KeyPart::Int(v)])),
            (Some(mysql_common::Value::UInt(v)), KeyKind::UInt) => Ok(Some(vec![KeyPart::UInt(v)])),
            (Some(mysql_common::Value::Int(v)), KeyKind::UInt) if v >= 0 => {
                Ok(Some(vec![KeyPart::UInt(v.unsigned_abs())]))
            }
            _ => Err(shape()),
        }
    }

    /// MySQL (ADR-0006): opens the chunk's transaction and returns G, the lock hold time and,
    /// on MySQL, the binlog point the server reported with G.
    ///
    /// The statements go in their order, two to a round trip where the second needs nothing
    /// from the first's reply: `LOCK TABLES …; <executed position>` and
    /// `START TRANSACTION …; UNLOCK TABLES`. A failed statement ends its batch: the server
    /// runs nothing after it. On MySQL the executed position is `SHOW BINARY LOG STATUS`:
    /// its `Executed_Gtid_Set` is `@@global.gtid_executed`, read the same way, and its
    /// `File`/`Position` (read just after it) give the chunk's records their `source.file`
    /// and `pos` (informational: G alone decides what the chunk holds).
    async fn lock_tables_position(
        &mut self,
        table: &TableId,
    ) -> Result<(Position, Duration, Option<BinlogPoint>), SnapshotError> {
        let status = self.flavor == Flavor::Mysql;
        let lock_and_read = format!(
            "LOCK TABLES {} READ; {}",
            quote_table(table),
            if status {
                BINARY_LOG_STATUS
            } else {
                executed_position_sql(self.flavor)
            }
        );
        start_batch(&mut self.conn, &lock_and_read)
            .await
            .map_err(|e| SnapshotError::LockUnavailable {
                table: table.clone(),
                code: server_code(&e),
            })?;
        // LOCK TABLES has returned: the lock is held
        let locked = Instant::now();
        let g = second_result_texts(&mut self.conn).await;
        let (g, point) = match g {
            Ok(Some(texts)) if status => match texts.as_slice() {
                [Some(file), Some(pos), _, _, Some(gtids), ..] => (
                    parse_position(self.flavor, gtids),
                    pos.parse()
                        .ok()
                        .map(|pos| BinlogPoint::new(file.as_str(), pos)),
                ),
                _ => (None, None),
            },
            Ok(Some(texts)) => (
                texts
                    .first()
                    .and_then(Option::as_deref)
                    .and_then(|text| parse_position(self.flavor, text)),
                None,
            ),
            Ok(None) => (None, None),
            Err(e) => {
                let _ = self.conn.query_drop("UNLOCK TABLES").await;
                return Err(chunk_err(table, "position", &e));
            }
        };
        let Some(g) = g else {
            let _ = self.conn.query_drop("UNLOCK TABLES").await;
            return Err(SnapshotError::ChunkReadFailed {
                table: table.clone(),
                site: "position",
                code: 0,
            });
        };
        // starting the transaction releases the table lock (after the lock is gone the view
        // is taken: it holds every change of the table up to G, maybe more)
        let started =
            start_batch(&mut self.conn, &format!("{START_SNAPSHOT}; UNLOCK TABLES")).await;
        let held = locked.elapsed();
        if let Err(e) = started {
            let _ = self.conn.query_drop("UNLOCK TABLES").await;
            return Err(chunk_err(table, "start transaction", &e));
        }
        self.conn
            .drop_result()
            .await
            .map_err(|e| chunk_err(table, "unlock", &e))?;
        Ok((g, held, point))
    }

    /// MariaDB: the open transaction's binlog point (fixed for the transaction), with its
    /// `BINLOG_GTID_POS` when the translator has no earlier point to walk from, and the
    /// transaction's COMMIT, in one round trip. On any failure the transaction is rolled back.
    async fn binlog_snapshot_point_and_commit(
        &mut self,
        table: &TableId,
    ) -> Result<(BinlogPoint, Option<Position>), SnapshotError> {
        let unreadable = || SnapshotError::ChunkReadFailed {
            table: table.clone(),
            site: "binlog snapshot",
            code: 0,
        };
        let with_server = self.translator.needs_server();
        let sql = point_and_commit(with_server);
        let read = async {
            self.conn.query(&sql).await?;
            let rows: Vec<(Option<String>, Option<u64>, Option<String>)> =
                self.conn.next_result().await?.unwrap_or_default();
            // the COMMIT's answer (its error, if it failed)
            self.conn.drop_result().await?;
            Ok(rows)
        };
        let rows = match read.await {
            Ok(rows) => rows,
            Err(e) => {
                let _ = self.conn.query_drop("ROLLBACK").await;
                return Err(chunk_err(table, "binlog gtid pos", &e));
            }
        };
        let Some((Some(file), Some(pos), g)) = rows.into_iter().next() else {
            return Err(unreadable());
        };
        let server = if with_server {
            // NULL: the file was purged or the point is not an event boundary (ADR-0006)
            Some(
                g.and_then(|t| parse_position(self.flavor, &t))
                    .ok_or_else(unreadable)?,
            )
        } else {
            None
        };
        Ok((BinlogPoint::new(file, pos), server))
    }

    /// The chunk's rows and the bytes of their values; with `prelude`, that statement goes in
    /// the same round trip, before the chunk's `SELECT` (it failing is a failure at `site`).
    async fn select_rows(
        &mut self,
        layout: &TableLayout,
        sql: &str,
        params: Vec<mysql_common::Value>,
        capacity: usize,
        prelude: Option<(&str, &'static str)>,
    ) -> Result<(Vec<Row>, u64), SnapshotError> {
        let id = &layout.table.id;
        let columns = match prelude {
            None => self.conn.exec_stream(sql, &params).await,
            Some((prelude, site)) => {
                match self.conn.exec_stream_after(prelude, sql, &params).await {
                    // the statement, not the prelude, may be what failed: the message cannot
                    // tell, the site names both
                    Err(e) => return Err(chunk_err(id, site, &e)),
                    ok => ok,
                }
            }
        }
        .map_err(|e| chunk_err(id, "select", &e))?;
        let drift = |reason| SnapshotError::SchemaDrifted {
            table: id.clone(),
            reason,
        };
        if columns.len() != layout.columns.len() {
            return Err(drift("column count"));
        }
        for (wire, info) in columns.iter().zip(&layout.columns) {
            if wire.name_ref() != info.name.as_bytes() {
                return Err(drift("column name"));
            }
            if !wire_type_fits(info.kind, wire) {
                return Err(drift("column type"));
            }
        }
        // each row is converted straight from its packet as it arrives, while the server
        // keeps sending the next ones
        let mut rows = Vec::with_capacity(capacity);
        let mut bytes = 0u64;
        loop {
            let raw = match self.conn.next_row().await {
                Ok(Some(raw)) => raw,
                Ok(None) => break,
                Err(e) => return Err(chunk_err(id, "select", &e)),
            };
            bytes = bytes.saturating_add(u64::try_from(raw.value_bytes()).unwrap_or(u64::MAX));
            let converted = convert_row(layout, &raw);
            drop(raw);
            match converted {
                Ok(row) => rows.push(row),
                Err(e) => {
                    let _ = self.conn.drop_result().await;
                    return Err(e);
                }
            }
        }
        Ok((rows, bytes))
    }
}

/// Sends a batch of statements and reads the first one's result (it returns no rows): an
/// error here is the first statement's, and the server ran nothing after it. The caller reads
/// the rest ([`QueryConn::next_result`]).
async fn start_batch(conn: &mut QueryConn, sql: &str) -> Result<(), ServerOrIo> {
    conn.query(sql).await?;
    conn.next_result::<mysql_common::Row>().await?;
    Ok(())
}

/// The columns of the first row of a two-statement batch's second result as text (the first
/// was read by [`start_batch`]); `None` without a row. The rest of the batch is read and
/// dropped.
async fn second_result_texts(
    conn: &mut QueryConn,
) -> Result<Option<Vec<Option<String>>>, ServerOrIo> {
    let rows = conn
        .next_result::<mysql_common::Row>()
        .await?
        .unwrap_or_default();
    conn.drop_result().await?;
    Ok(rows.first().map(|r| {
        (0..r.len())
            .map(|i| r.get_opt::<String, _>(i).and_then(Result::ok))
            .collect()
    }))
}

/// One chunk row, read from its packet: every value converted as the binlog decoder would
/// produce it.
fn convert_row(layout: &TableLayout, raw: &BinaryRow<'_>) -> Result<Row, SnapshotError> {
    let mut values = Vec::with_capacity(raw.len());
    for (v, info) in raw.values().zip(&layout.columns) {
        // a value overrunning its packet is a read failure (as a broken stream was)
        let v = v.map_err(|_| SnapshotError::ChunkReadFailed {
            table: layout.table.id.clone(),
            site: "select",
            code: 0,
        })?;
        let value = convert(info.kind, v).map_err(|reason| SnapshotError::ValueDecodeFailed {
            table: layout.table.id.clone(),
            column: info.name.clone(),
            reason,
        })?;
        values.push(value);
    }
    Row::new(Arc::clone(&layout.table.columns), values).map_err(|_| SnapshotError::SchemaDrifted {
        table: layout.table.id.clone(),
        reason: "row width",
    })
}
