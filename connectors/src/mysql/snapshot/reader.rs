//! [`SnapshotReader`]: the I/O half of the initial snapshot, on one persistent query
//! connection of the source's own protocol client (`QueryConn`: the stream's TLS, so
//! `verify_ca` checks the chain and not the host name; prepared statements, so values come
//! back typed; several statements per round trip).
//!
//! Session: REPEATABLE READ (a consistent snapshot needs it), `time_zone = '+00:00'`
//! (TIMESTAMPs read as UTC), `character_set_results = NULL` (character data arrives as
//! stored), and a bounded `lock_wait_timeout`.
//!
//! A chunk's position G is captured per [`PositionCapture`]; see the module documentation of
//! `snapshot` for why G is a lower bound of the chunk's read view.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_core::change::{Row, TableId};
use capstan_core::position::{Flavor, Position};
use mysql_common::params::Params;

use super::canary::canary_values;
use super::chunk::{Chunk, PositionCapture, ReaderOptions};
use super::error::{server_code, SnapshotError};
use super::key::{KeyColumn, KeyKind, KeyPart};
use super::row_value::{convert, wire_type_fits};
use super::sql::{
    canary_select, chunk_params, chunk_select, hex_param, quote_table, space_weights_select,
    weights_select,
};
use super::table::{describe_from, ColumnRow, IndexRow, SnapshotTable, TableLayout};
use super::weighing::Weighing;
use super::{executed_position_sql, server_identity_sql};
use crate::mysql::connect::detect_flavor;
use crate::mysql::query_conn::QueryConn;
use crate::mysql::query_packets::BinaryRow;
use crate::mysql::replica_conn::ServerOrIo;
use crate::mysql::source_config::{FlavorChoice, ValidSourceConfig};
use crate::mysql::source_error::SourceError;
use crate::mysql::table_filter::TableFilter;

/// At most this many rows are reserved up front for a chunk.
const CAPACITY_CAP: usize = 1 << 16;

/// Opens a chunk's transaction: its read view, and on MariaDB its binlog point.
const START_SNAPSHOT: &str = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";

/// MariaDB: G, the GTID position of the open transaction's binlog point (`BINLOG_GTID_POS`
/// of `binlog_snapshot_file`/`_position`, fixed for the transaction: ADR-0006), then the
/// transaction's end, in one round trip.
const BINLOG_SNAPSHOT_GTID_AND_COMMIT: &str = "SELECT BINLOG_GTID_POS(\
     MAX(IF(VARIABLE_NAME = 'BINLOG_SNAPSHOT_FILE', VARIABLE_VALUE, NULL)), \
     MAX(IF(VARIABLE_NAME = 'BINLOG_SNAPSHOT_POSITION', VARIABLE_VALUE, NULL))) \
     FROM information_schema.SESSION_STATUS \
     WHERE VARIABLE_NAME IN ('BINLOG_SNAPSHOT_FILE', 'BINLOG_SNAPSHOT_POSITION'); COMMIT";

/// Values per `WEIGHT_STRING` statement.
const WEIGHT_BATCH: usize = 500;

/// The snapshot reader. See the module documentation.
#[derive(Debug)]
pub struct SnapshotReader {
    conn: QueryConn,
    flavor: Flavor,
    capture: PositionCapture,
    layouts: HashMap<TableId, Arc<TableLayout>>,
    /// How each character key kind seen so far is weighed (asked once per kind).
    weighings: HashMap<KeyKind, Weighing>,
}

fn connect_err(e: &ServerOrIo) -> SnapshotError {
    match e {
        // a refused certificate or handshake: definite, like the stream's
        ServerOrIo::Source(SourceError::TlsFailed { reason }) => {
            SnapshotError::TlsFailed { reason }
        }
        e => SnapshotError::ConnectFailed {
            code: server_code(e),
        },
    }
}

/// Text of an `information_schema` value.
fn opt_str(v: Option<&mysql_common::Value>) -> Option<String> {
    match v? {
        mysql_common::Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        mysql_common::Value::Int(i) => Some(i.to_string()),
        mysql_common::Value::UInt(u) => Some(u.to_string()),
        _ => None,
    }
}

fn opt_u64(v: Option<&mysql_common::Value>) -> Option<u64> {
    match v? {
        mysql_common::Value::Int(i) => u64::try_from(*i).ok(),
        mysql_common::Value::UInt(u) => Some(*u),
        mysql_common::Value::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
        _ => None,
    }
}

fn parse_position(flavor: Flavor, text: &str) -> Option<Position> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    Position::parse(flavor, &compact).ok()
}

impl SnapshotReader {
    /// Connects with the stream's TLS choice and the default [`ReaderOptions`].
    pub async fn open(config: &ValidSourceConfig) -> Result<Self, SnapshotError> {
        Self::open_with(config, ReaderOptions::default()).await
    }

    /// Connects with the stream's TLS choice (`verify_ca`: chain against `ca_file`, no host
    /// name check; `verify_none`; `disabled`), detects the flavour and sets the session up.
    pub async fn open_with(
        config: &ValidSourceConfig,
        options: ReaderOptions,
    ) -> Result<Self, SnapshotError> {
        let mut conn = tokio::time::timeout(config.stream_timeout, QueryConn::connect(config))
            .await
            .map_err(|_| SnapshotError::ConnectFailed { code: 0 })?
            .map_err(|e| connect_err(&e))?;
        let version: String = conn
            .query_first("SELECT VERSION()")
            .await
            .map_err(|e| connect_err(&e))?
            .ok_or(SnapshotError::ConnectFailed { code: 0 })?;
        let flavor = detect_flavor(&version);
        let configured = match config.flavor {
            FlavorChoice::Detect => flavor,
            FlavorChoice::Mysql => Flavor::Mysql,
            FlavorChoice::Mariadb => Flavor::Mariadb,
        };
        if configured != flavor {
            return Err(SnapshotError::ConnectFailed { code: 0 });
        }
        let capture = options
            .capture
            .unwrap_or(PositionCapture::default_for(flavor));
        if capture == PositionCapture::BinlogSnapshot && flavor == Flavor::Mysql {
            return Err(SnapshotError::CaptureUnsupported {
                flavor: flavor.as_str(),
            });
        }
        let setup = [
            "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ".to_string(),
            "SET SESSION time_zone = '+00:00'".to_string(),
            "SET SESSION character_set_results = NULL".to_string(),
            format!(
                "SET SESSION lock_wait_timeout = {}",
                options.lock_wait_timeout_s.max(1)
            ),
        ];
        // one round trip
        conn.query_drop(setup.join("; "))
            .await
            .map_err(|e| connect_err(&e))?;
        Ok(SnapshotReader {
            conn,
            flavor,
            capture,
            layouts: HashMap::new(),
            weighings: HashMap::new(),
        })
    }

    /// The server flavour.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The position capture in use.
    pub fn capture(&self) -> PositionCapture {
        self.capture
    }

    /// The server's identity: MySQL `@@server_uuid`; MariaDB (which has no server uuid)
    /// `server_id=<@@server_id>,host=<@@hostname>,port=<@@port>`. The binlog source reads
    /// the same at every connect.
    pub async fn server_identity(&mut self) -> Result<String, SnapshotError> {
        self.conn
            .query_first::<String, _>(server_identity_sql(self.flavor))
            .await
            .map_err(|e| SnapshotError::QueryFailed {
                site: "server identity",
                code: server_code(&e),
            })?
            .filter(|s| !s.is_empty())
            .ok_or(SnapshotError::QueryFailed {
                site: "server identity",
                code: 0,
            })
    }

    /// P0: MySQL `@@global.gtid_executed`, MariaDB `@@global.gtid_binlog_pos`.
    pub async fn executed_position(&mut self) -> Result<Position, SnapshotError> {
        let text: String = self
            .conn
            .query_first(executed_position_sql(self.flavor))
            .await
            .map_err(|e| SnapshotError::PositionReadFailed {
                code: server_code(&e),
            })?
            .unwrap_or_default();
        parse_position(self.flavor, &text).ok_or(SnapshotError::PositionReadFailed { code: 0 })
    }

    /// Every base table outside the system schemas the filter admits, sorted.
    pub async fn resolve_all_tables(
        &mut self,
        filter: &TableFilter,
    ) -> Result<Vec<TableId>, SnapshotError> {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = self
            .conn
            .exec(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
                 WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN \
                 ('mysql', 'information_schema', 'performance_schema', 'sys')",
                (),
            )
            .await
            .map_err(|e| SnapshotError::QueryFailed {
                site: "list tables",
                code: server_code(&e),
            })?;
        let mut tables: Vec<TableId> = rows
            .into_iter()
            .map(|(s, t)| {
                TableId::new(
                    String::from_utf8_lossy(&s).into_owned(),
                    String::from_utf8_lossy(&t).into_owned(),
                )
            })
            .filter(|t| filter.admits(t))
            .collect();
        tables.sort();
        tables.dedup();
        if tables.is_empty() {
            return Err(SnapshotError::NoBaseTables);
        }
        Ok(tables)
    }

    /// The table's columns, key, row estimate and fingerprint.
    pub async fn describe(&mut self, table: &TableId) -> Result<SnapshotTable, SnapshotError> {
        let layout = self.describe_layout(table).await?;
        let out = layout.table.clone();
        self.layouts.insert(table.clone(), Arc::new(layout));
        Ok(out)
    }

    async fn describe_layout(&mut self, table: &TableId) -> Result<TableLayout, SnapshotError> {
        let q = |site: &'static str| {
            move |e: ServerOrIo| SnapshotError::QueryFailed {
                site,
                code: server_code(&e),
            }
        };
        let ids = (table.schema.as_str(), table.table.as_str());
        let info: Option<mysql_common::Row> = self
            .conn
            .exec_first(
                "SELECT TABLE_TYPE, TABLE_ROWS FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                ids,
            )
            .await
            .map_err(q("describe table"))?;
        let Some(info) = info else {
            return Err(SnapshotError::TableNotFound {
                table: table.clone(),
            });
        };
        let info = info.unwrap_raw();
        let kind = opt_str(info.first().and_then(Option::as_ref));
        if kind.as_deref() != Some("BASE TABLE") {
            return Err(SnapshotError::TableNotFound {
                table: table.clone(),
            });
        }
        let estimated_rows = opt_u64(info.get(1).and_then(Option::as_ref)).unwrap_or(0);
        // MariaDB's COLLATIONS has no PAD_ATTRIBUTE: the collation name tells (`pads_space`)
        let pad_attribute = match self.flavor {
            Flavor::Mysql => "co.PAD_ATTRIBUTE",
            Flavor::Mariadb => "NULL",
        };
        let rows: Vec<mysql_common::Row> = self
            .conn
            .exec(
                format!(
                    "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.IS_NULLABLE, \
                     c.CHARACTER_SET_NAME, c.COLLATION_NAME, co.ID, c.NUMERIC_PRECISION, \
                     c.DATETIME_PRECISION, c.CHARACTER_OCTET_LENGTH, \
                     c.CHARACTER_MAXIMUM_LENGTH, {pad_attribute} \
                     FROM information_schema.COLUMNS c \
                     LEFT JOIN information_schema.COLLATIONS co \
                     ON co.COLLATION_NAME = c.COLLATION_NAME \
                     WHERE c.TABLE_SCHEMA = ? AND c.TABLE_NAME = ? ORDER BY c.ORDINAL_POSITION"
                ),
                ids,
            )
            .await
            .map_err(q("describe columns"))?;
        let columns: Vec<ColumnRow> = rows
            .into_iter()
            .map(|r| {
                let v = r.unwrap_raw();
                let at = |i: usize| v.get(i).and_then(Option::as_ref);
                ColumnRow {
                    name: opt_str(at(0)).unwrap_or_default(),
                    data_type: opt_str(at(1)).unwrap_or_default(),
                    column_type: opt_str(at(2)).unwrap_or_default(),
                    nullable: opt_str(at(3)).as_deref() != Some("NO"),
                    charset: opt_str(at(4)),
                    collation: opt_str(at(5)),
                    collation_id: opt_u64(at(6)).and_then(|id| u16::try_from(id).ok()),
                    numeric_precision: opt_u64(at(7)),
                    datetime_precision: opt_u64(at(8)),
                    octet_length: opt_u64(at(9)),
                    char_length: opt_u64(at(10)),
                    pad_attribute: opt_str(at(11)),
                }
            })
            .collect();
        let rows: Vec<mysql_common::Row> = self
            .conn
            .exec(
                "SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART \
                 FROM information_schema.STATISTICS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0",
                ids,
            )
            .await
            .map_err(q("describe keys"))?;
        let indexes: Vec<IndexRow> = rows
            .into_iter()
            .map(|r| {
                let v = r.unwrap_raw();
                let at = |i: usize| v.get(i).and_then(Option::as_ref);
                IndexRow {
                    index: opt_str(at(0)).unwrap_or_default(),
                    seq: opt_u64(at(1)).unwrap_or(0),
                    column: opt_str(at(2)),
                    sub_part: opt_u64(at(3)),
                }
            })
            .collect();
        describe_from(table, columns, &indexes, estimated_rows)
    }

    /// The layout `read_chunk` converts with: the one `describe` saw for this table, or a
    /// fresh one; a fingerprint other than `table`'s is schema drift.
    async fn layout(&mut self, table: &SnapshotTable) -> Result<Arc<TableLayout>, SnapshotError> {
        if let Some(l) = self.layouts.get(&table.id) {
            if l.table.fingerprint == table.fingerprint && l.table.key == table.key {
                return Ok(Arc::clone(l));
            }
        }
        let fresh = Arc::new(self.describe_layout(&table.id).await?);
        self.layouts.insert(table.id.clone(), Arc::clone(&fresh));
        if fresh.table.fingerprint != table.fingerprint || fresh.table.key != table.key {
            return Err(SnapshotError::SchemaDrifted {
                table: table.id.clone(),
                reason: "fingerprint",
            });
        }
        Ok(fresh)
    }

    /// Up to `chunk_size` rows with key > `after` (from the start when `None`), in key order,
    /// read as of an exact position G; `last` when no row follows.
    pub async fn read_chunk(
        &mut self,
        table: &SnapshotTable,
        after: Option<&[KeyPart]>,
        chunk_size: u32,
    ) -> Result<Chunk, SnapshotError> {
        let layout = self.layout(table).await?;
        let mut params = match after {
            None => Vec::new(),
            Some(after) => {
                chunk_params(&layout, after).ok_or_else(|| SnapshotError::CursorShapeMismatch {
                    table: table.id.clone(),
                })?
            }
        };
        let limit = u64::from(chunk_size.max(1)) + 1;
        params.push(mysql_common::Value::UInt(limit));
        let sql = chunk_select(&layout, after.is_some());
        let capacity = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .min(CAPACITY_CAP);
        let (position, lock_held, rows) = match self.capture {
            PositionCapture::LockTables => {
                let (position, held) = self.lock_tables_position(&table.id).await?;
                let lock_held = Some(held);
                let read = self
                    .select_rows(&layout, &sql, params, capacity, None)
                    .await;
                let rows = match read {
                    Ok(rows) => rows,
                    Err(e) => {
                        let _ = self.conn.query_drop("ROLLBACK").await;
                        return Err(e);
                    }
                };
                self.conn
                    .query_drop("COMMIT")
                    .await
                    .map_err(|e| chunk_err(&table.id, "commit", &e))?;
                (position, lock_held, rows)
            }
            // ADR-0006, MariaDB: the view's binlog point is fixed when its transaction starts,
            // so the transaction start goes with the chunk's SELECT in one round trip, and G is
            // read after the rows, with the COMMIT
            PositionCapture::BinlogSnapshot => {
                let prelude = Some((START_SNAPSHOT, "start transaction"));
                let read = self
                    .select_rows(&layout, &sql, params, capacity, prelude)
                    .await;
                let rows = match read {
                    Ok(rows) => rows,
                    Err(e) => {
                        let _ = self.conn.query_drop("ROLLBACK").await;
                        return Err(e);
                    }
                };
                let position = self.binlog_snapshot_position_and_commit(&table.id).await?;
                (position, None, rows)
            }
        };
        let mut rows = rows;
        let last = rows.len() < usize::try_from(limit).unwrap_or(usize::MAX);
        rows.truncate(usize::try_from(chunk_size.max(1)).unwrap_or(usize::MAX));
        Ok(Chunk {
            position,
            rows,
            last,
            lock_held,
        })
    }

    /// MySQL (ADR-0006): opens the chunk's transaction and returns G and the lock hold time.
    ///
    /// The statements go in their order, two to a round trip where the second needs nothing
    /// from the first's reply: `LOCK TABLES …; SELECT <executed position>` and
    /// `START TRANSACTION …; UNLOCK TABLES`. A failed statement ends its batch: the server
    /// runs nothing after it.
    async fn lock_tables_position(
        &mut self,
        table: &TableId,
    ) -> Result<(Position, Duration), SnapshotError> {
        let lock_and_read = format!(
            "LOCK TABLES {} READ; {}",
            quote_table(table),
            executed_position_sql(self.flavor)
        );
        start_batch(&mut self.conn, &lock_and_read)
            .await
            .map_err(|e| SnapshotError::LockUnavailable {
                table: table.clone(),
                code: server_code(&e),
            })?;
        // LOCK TABLES has returned: the lock is held
        let locked = Instant::now();
        let g = second_result_text(&mut self.conn).await;
        let g = match g {
            Ok(Some(text)) => parse_position(self.flavor, &text),
            Ok(None) => None,
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
        Ok((g, held))
    }

    /// MariaDB: G from the open transaction's binlog point (`binlog_snapshot_file` and
    /// `_position`, fixed for the transaction), and the transaction's COMMIT, in one round
    /// trip. On any failure the transaction is rolled back.
    async fn binlog_snapshot_position_and_commit(
        &mut self,
        table: &TableId,
    ) -> Result<Position, SnapshotError> {
        let unreadable = || SnapshotError::ChunkReadFailed {
            table: table.clone(),
            site: "binlog snapshot",
            code: 0,
        };
        let read = async {
            self.conn.query(BINLOG_SNAPSHOT_GTID_AND_COMMIT).await?;
            let g: Vec<(Option<String>,)> = self.conn.next_result().await?.unwrap_or_default();
            // the COMMIT's answer (its error, if it failed)
            self.conn.drop_result().await?;
            Ok(g)
        };
        let g = match read.await {
            Ok(g) => g,
            Err(e) => {
                let _ = self.conn.query_drop("ROLLBACK").await;
                return Err(chunk_err(table, "binlog gtid pos", &e));
            }
        };
        g.into_iter()
            .next()
            .and_then(|(text,)| text)
            .and_then(|t| parse_position(self.flavor, &t))
            .ok_or_else(unreadable)
    }

    /// The chunk's rows; with `prelude`, that statement goes in the same round trip, before
    /// the chunk's `SELECT` (it failing is a failure at `site`).
    async fn select_rows(
        &mut self,
        layout: &TableLayout,
        sql: &str,
        params: Vec<mysql_common::Value>,
        capacity: usize,
        prelude: Option<(&str, &'static str)>,
    ) -> Result<Vec<Row>, SnapshotError> {
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
        loop {
            let raw = match self.conn.next_row().await {
                Ok(Some(raw)) => raw,
                Ok(None) => break,
                Err(e) => return Err(chunk_err(id, "select", &e)),
            };
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
        Ok(rows)
    }

    /// How `kind`'s values are weighed ([`Weighing`]): NO PAD bare; PAD SPACE as the server's
    /// weights of one and two spaces under the collation tell, asked once per kind.
    async fn weighing(&mut self, kind: &KeyKind) -> Result<Weighing, SnapshotError> {
        if let Some(w) = self.weighings.get(kind) {
            return Ok(w.clone());
        }
        let spaces = if Weighing::needs_spaces(kind) {
            let sql = space_weights_select(kind).ok_or(SnapshotError::WeightFailed { code: 0 })?;
            let row: Option<(Vec<u8>, Vec<u8>)> =
                self.conn
                    .query_first(sql)
                    .await
                    .map_err(|e| SnapshotError::WeightFailed {
                        code: server_code(&e),
                    })?;
            Some(row.ok_or(SnapshotError::WeightFailed { code: 0 })?)
        } else {
            None
        };
        let weighing = Weighing::of(kind, spaces.as_ref().map(|(a, b)| (&a[..], &b[..])))
            .ok_or(SnapshotError::WeightFailed { code: 0 })?;
        self.weighings.insert(kind.clone(), weighing.clone());
        Ok(weighing)
    }

    /// The comparable weight of each raw value under the column's character set and
    /// collation, in order: the server's `WEIGHT_STRING`, taken and encoded per [`Weighing`]
    /// (PAD SPACE: as if padded with spaces forever, as the server compares); one round trip
    /// per [`WEIGHT_BATCH`] values.
    pub async fn weights(
        &mut self,
        column: &KeyColumn,
        values: &[&[u8]],
    ) -> Result<Vec<Vec<u8>>, SnapshotError> {
        if !matches!(column.kind, KeyKind::Text { .. }) {
            return Err(SnapshotError::KeyValueInvalid {
                column: column.name.clone(),
                expected: "text",
                got: column.kind.name(),
            });
        }
        let weighing = self.weighing(&column.kind).await?;
        let mut out = Vec::with_capacity(values.len());
        for batch in values.chunks(WEIGHT_BATCH) {
            let sql = weights_select(&column.kind, &weighing, batch.len());
            let params: Vec<mysql_common::Value> = batch.iter().map(|v| hex_param(v)).collect();
            let row: Option<mysql_common::Row> = self
                .conn
                .exec_first(sql, Params::Positional(params))
                .await
                .map_err(|e| SnapshotError::WeightFailed {
                    code: server_code(&e),
                })?;
            let row = row.ok_or(SnapshotError::WeightFailed { code: 0 })?;
            for v in row.unwrap_raw() {
                match v {
                    Some(mysql_common::Value::Bytes(w)) => out.push(
                        weighing
                            .finish(w)
                            .ok_or(SnapshotError::WeightFailed { code: 0 })?,
                    ),
                    _ => return Err(SnapshotError::WeightFailed { code: 0 }),
                }
            }
        }
        if out.len() != values.len() {
            return Err(SnapshotError::WeightFailed { code: 0 });
        }
        Ok(out)
    }

    /// The order-contract canary: fixed values ([`canary_values`]) ranked by the column's
    /// collation (`<`, as the index compares) must order (and tie) exactly as their weights
    /// do, taken exactly as [`Self::weights`] takes them.
    pub async fn check_collation_order(&mut self, column: &KeyColumn) -> Result<(), SnapshotError> {
        let KeyKind::Text { collation, .. } = &column.kind else {
            return Ok(());
        };
        let violated = || SnapshotError::CollationContractViolated {
            collation: collation.clone(),
        };
        let weighing = self.weighing(&column.kind).await?;
        let canary = canary_values(&column.kind);
        let sql = canary_select(&column.kind, &weighing, canary.len());
        let params: Vec<mysql_common::Value> = canary.iter().map(|v| hex_param(v)).collect();
        let rows: Vec<(u64, u64, Vec<u8>)> = self
            .conn
            .exec(sql, Params::Positional(params))
            .await
            .map_err(|e| SnapshotError::WeightFailed {
                code: server_code(&e),
            })?;
        if rows.len() != canary.len() {
            return Err(violated());
        }
        let rows = rows
            .into_iter()
            .map(|(i, r, w)| weighing.finish(w).map(|w| (i, r, w)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(violated)?;
        if !rank_matches_weights(&rows) {
            return Err(violated());
        }
        Ok(())
    }
}

/// True if, for every pair, `ORDER BY` rank and weight bytes order (and tie) alike.
fn rank_matches_weights(rows: &[(u64, u64, Vec<u8>)]) -> bool {
    let mut sorted: Vec<&(u64, u64, Vec<u8>)> = rows.iter().collect();
    sorted.sort_by_key(|r| r.1);
    sorted
        .windows(2)
        .all(|w| w[0].1.cmp(&w[1].1) == w[0].2.cmp(&w[1].2))
}

/// Sends a batch of statements and reads the first one's result (it returns no rows): an
/// error here is the first statement's, and the server ran nothing after it. The caller reads
/// the rest ([`QueryConn::next_result`]).
async fn start_batch(conn: &mut QueryConn, sql: &str) -> Result<(), ServerOrIo> {
    conn.query(sql).await?;
    conn.next_result::<mysql_common::Row>().await?;
    Ok(())
}

/// The first column of the first row of a two-statement batch's second result (the first
/// was read by [`start_batch`]); the rest of the batch is read and dropped.
async fn second_result_text(conn: &mut QueryConn) -> Result<Option<String>, ServerOrIo> {
    let rows = conn
        .next_result::<mysql_common::Row>()
        .await?
        .unwrap_or_default();
    conn.drop_result().await?;
    Ok(rows
        .first()
        .and_then(|r| r.get_opt::<String, _>(0))
        .and_then(Result::ok))
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

fn chunk_err(table: &TableId, site: &'static str, e: &ServerOrIo) -> SnapshotError {
    SnapshotError::ChunkReadFailed {
        table: table.clone(),
        site,
        code: server_code(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_check_compares_rank_and_weight_order() {
        let ok = [
            (0, 1, vec![1]),
            (1, 2, vec![2]),
            (2, 2, vec![2]),
            (3, 3, vec![2, 0]),
        ];
        assert!(rank_matches_weights(&ok));
        let tie_differs = [(0, 1, vec![1]), (1, 1, vec![2])];
        assert!(!rank_matches_weights(&tie_differs));
        let order_differs = [(0, 1, vec![2]), (1, 2, vec![1])];
        assert!(!rank_matches_weights(&order_differs));
        let split_tie = [(0, 1, vec![1]), (1, 2, vec![1])];
        assert!(!rank_matches_weights(&split_tie));
    }

    #[test]
    fn positions_parse_without_whitespace() {
        let p = parse_position(
            Flavor::Mysql,
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n4e11fa47-71ca-11e1-9e33-c80aa9429562:1",
        );
        assert!(p.is_some());
        assert!(parse_position(Flavor::Mariadb, "0-1-5").is_some());
        assert_eq!(
            parse_position(Flavor::Mysql, ""),
            Some(Position::empty(Flavor::Mysql))
        );
    }
}
