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

use capstan_core::change::TableId;
use capstan_core::position::{Flavor, Position};

use super::chunk::{PositionCapture, ReaderOptions};
use super::error::{server_code, SnapshotError};
use super::key::KeyKind;
use super::table::{describe_from, ColumnRow, IndexRow, SnapshotTable, TableLayout};
use super::weighing::Weighing;
use super::{executed_position_sql, server_identity_sql};
use crate::mysql::column_controls::ColumnControls;
use crate::mysql::column_plan::ColumnPlan;
use crate::mysql::connect::detect_flavor;
use crate::mysql::query_conn::QueryConn;
use crate::mysql::replica_conn::ServerOrIo;
use crate::mysql::source_config::{FlavorChoice, ValidSourceConfig};
use crate::mysql::source_error::SourceError;
use crate::mysql::table_filter::TableFilter;

mod binlog_point;
mod chunk_read;
mod collation;

pub use binlog_point::{TranslationAnchor, TranslationStats};

/// The snapshot reader. See the module documentation.
#[derive(Debug)]
pub struct SnapshotReader {
    conn: QueryConn,
    flavor: Flavor,
    capture: PositionCapture,
    layouts: HashMap<TableId, Arc<TableLayout>>,
    /// How each character key kind seen so far is weighed (asked once per kind).
    weighings: HashMap<KeyKind, Weighing>,
    /// The source's column controls, applied to every chunk row.
    columns: ColumnControls,
    /// MariaDB: how chunk binlog points become positions.
    translator: binlog_point::Translator,
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
            columns: config.columns.clone(),
            translator: binlog_point::Translator::new(options.walk_binlog),
        })
    }

    /// An extra connection of a snapshot (a read ahead, a round's): `idle` when there is one,
    /// else a new one opened with `options` and checked to reach the server named
    /// `identity`; its position translation seeded with `anchor`
    /// ([`SnapshotReader::seed_translation`]).
    pub async fn reuse_or_open(
        idle: Option<SnapshotReader>,
        config: &ValidSourceConfig,
        options: ReaderOptions,
        identity: &str,
        anchor: Option<TranslationAnchor>,
    ) -> Result<SnapshotReader, SnapshotError> {
        let mut reader = match idle {
            Some(r) => r,
            None => {
                let mut r = SnapshotReader::open_with(config, options).await?;
                r.check_identity(identity).await?;
                r
            }
        };
        reader.seed_translation(anchor);
        Ok(reader)
    }

    /// The server flavour.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The position capture in use.
    pub fn capture(&self) -> PositionCapture {
        self.capture
    }

    /// True when chunks may be read ahead ([`ChunkPrefetch`](super::ChunkPrefetch)): only
    /// with the lock-free capture. With `LOCK TABLES` a chunk read ahead on a second
    /// connection competes with the next chunk's lock for the server and the client, and the
    /// lock's hold, sub-millisecond otherwise, grew to p99 ≈ 4 ms in the benchmark
    /// (docs/performance.md), for no gain in rows/s on MySQL, where the server is the limit.
    pub fn reads_ahead(&self) -> bool {
        self.capture == PositionCapture::BinlogSnapshot
    }

    /// Refuses a connection that reached another server than the one named `identity` (the
    /// stream's, as [`SnapshotReader::server_identity`] reads it): `SourceMismatch`.
    pub async fn check_identity(&mut self, identity: &str) -> Result<(), SnapshotError> {
        if self.server_identity().await? != identity {
            return Err(SnapshotError::SourceMismatch);
        }
        Ok(())
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

    /// The table's columns, key, row estimate and fingerprint, as its chunk rows show them:
    /// after the column controls (excluded columns absent, masked and hashed ones text, key
    /// positions in the rows that remain).
    pub async fn describe(&mut self, table: &TableId) -> Result<SnapshotTable, SnapshotError> {
        let layout = self.describe_layout(table).await?;
        let (out, _) = self.view(&layout.table)?;
        self.layouts.insert(table.clone(), Arc::new(layout));
        Ok(out)
    }

    /// `raw` (the table as stored) as the column controls show it, and their plan (`None`
    /// when they touch no column of it). Refuses a control on a key column.
    fn view(
        &self,
        raw: &SnapshotTable,
    ) -> Result<(SnapshotTable, Option<Arc<ColumnPlan>>), SnapshotError> {
        let key: Vec<usize> = raw.key.columns.iter().map(|c| c.position).collect();
        let plan = self
            .columns
            .plan(&raw.id, &raw.columns, Some(&raw.types), &key)
            .map_err(|e| SnapshotError::ColumnControlOnKey {
                table: raw.id.clone(),
                column: e.column,
            })?;
        let Some(plan) = plan else {
            return Ok((raw.clone(), None));
        };
        let mut view = raw.clone();
        view.columns = Arc::clone(plan.columns());
        if let Some(types) = plan.types() {
            view.types = Arc::clone(types);
        }
        for (col, position) in view.key.columns.iter_mut().zip(plan.key().iter()) {
            col.position = *position;
        }
        Ok((view, Some(plan)))
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
            if l.table.fingerprint == table.fingerprint && self.view(&l.table)?.0.key == table.key {
                return Ok(Arc::clone(l));
            }
        }
        let fresh = Arc::new(self.describe_layout(&table.id).await?);
        self.layouts.insert(table.id.clone(), Arc::clone(&fresh));
        if fresh.table.fingerprint != table.fingerprint
            || self.view(&fresh.table)?.0.key != table.key
        {
            return Err(SnapshotError::SchemaDrifted {
                table: table.id.clone(),
                reason: "fingerprint",
            });
        }
        Ok(fresh)
    }
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
    use super::collation::rank_matches_weights;
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
