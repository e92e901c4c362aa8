//! [`TransactionAssembler`]: events in, transactions out, no I/O.
//!
//! # The state machine
//!
//! ```text
//! Idle --GTID--> AfterGtid --BEGIN / XA START--> Open --rows...--> Open --XID / COMMIT--> Idle
//!                AfterGtid --DDL--> Idle                      (SchemaChange, completes)
//!                AfterGtid --CREATE … START TRANSACTION--> Open (SchemaChange, then rows)
//!                AfterGtid --other statement--> Idle          (PositionAdvanced)
//! Idle --MariaDB GTID (not standalone)--> Open                (MariaDB writes no BEGIN)
//! Idle --MariaDB GTID (standalone)--> AfterGtid
//! ```
//!
//! Everything else is a desync and halts: rows or a table map outside a transaction, BEGIN
//! without a GTID, a GTID inside an open transaction, a commit with nothing open. The
//! assembler never guesses where a transaction starts or ends.
//!
//! # Filtering
//!
//! The table allowlist is applied when a TABLE_MAP arrives: rows of a filtered table are
//! never decoded. A committed transaction with no delivered change (all filtered, or empty)
//! still yields [`AssemblerOutput::PositionAdvanced`]: the processed position covers it.
//!
//! # XA
//!
//! Only `XaMode::Refuse` exists so far: a two-phase XA PREPARE (or an XA COMMIT/ROLLBACK
//! resolving one) halts `unsupported_transaction_shape` and its rows are discarded. A
//! one-phase `XA COMMIT … ONE PHASE` is an ordinary atomic commit and is delivered. The
//! `track` mode (pooling prepared transactions until their resolution) is not built yet.
//!
//! # Halts are sticky
//!
//! After a halt every further [`TransactionAssembler::push`] returns the same halt until
//! [`TransactionAssembler::reset`]: a caller that ignores an error cannot keep streaming.

use std::collections::HashMap;
use std::sync::Arc;

use capstan_core::change::{Change, Op, Row, SchemaChange, Transaction, TransactionGtid, Value};

use super::decode::{decode_full_rows, DecodeOptions};
use super::event::{Event, MariadbGtidEvent, RowsEvent, RowsKind};
use super::halt::Halt;
use super::statement::{classify_statement, StatementClass};
use super::table_filter::TableFilter;
use super::table_schema::TableSchema;

/// What to do with two-phase XA transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XaMode {
    /// Halt `unsupported_transaction_shape` at an XA PREPARE (the default).
    #[default]
    Refuse,
}

/// Assembler settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssemblerConfig {
    /// Which tables to capture; applied before row decode.
    pub filter: TableFilter,
    /// Two-phase XA handling.
    pub xa: XaMode,
    /// Keep DDL statement text in [`SchemaChange::statement`] (default: redacted).
    pub keep_ddl_statement: bool,
    /// Halt on a captured table's TABLE_MAP without column names or signedness
    /// (`binlog_row_metadata` not FULL). On by default; fixture suites turn it off.
    pub require_full_metadata: bool,
    /// Row decoder switches.
    pub decode: DecodeOptions,
}

impl Default for AssemblerConfig {
    fn default() -> Self {
        AssemblerConfig {
            filter: TableFilter::All,
            xa: XaMode::Refuse,
            keep_ddl_statement: false,
            require_full_metadata: true,
            decode: DecodeOptions::default(),
        }
    }
}

/// What the assembler emits.
#[derive(Clone, Debug, PartialEq)]
pub enum AssemblerOutput {
    /// A committed transaction with at least one delivered change; processing it covers
    /// `transaction.gtid`.
    Transaction(Transaction),
    /// A DDL statement of transaction `gtid`. When `completes_transaction` the transaction
    /// is done with this statement; otherwise (MySQL's atomic `CREATE TABLE … SELECT`) its
    /// rows follow and a later output completes it.
    SchemaChange {
        /// The statement, structured (text redacted unless configured).
        change: SchemaChange,
        /// The transaction the statement belongs to.
        gtid: TransactionGtid,
        /// True if `gtid` is fully processed with this output.
        completes_transaction: bool,
    },
    /// A committed transaction with nothing to deliver (every change filtered, or no row
    /// change at all): the position advances over `gtid`.
    PositionAdvanced {
        /// The processed transaction.
        gtid: TransactionGtid,
    },
}

#[derive(Debug)]
enum Mapped {
    Captured(Arc<TableSchema>),
    Filtered,
}

#[derive(Debug)]
struct Open {
    gtid: TransactionGtid,
    committed_at_micros: u64,
    changes: Vec<Change>,
    tables: HashMap<u64, Mapped>,
    filtered: bool,
    xa: bool,
}

#[derive(Debug)]
enum State {
    Idle,
    AfterGtid {
        gtid: TransactionGtid,
        committed_at_micros: u64,
    },
    Open(Box<Open>),
}

/// Assembles binlog events into transactions. See the module documentation.
#[derive(Debug)]
pub struct TransactionAssembler {
    config: AssemblerConfig,
    state: State,
    halted: Option<Halt>,
}

fn shape(reason: &'static str) -> Halt {
    Halt::UnsupportedTransactionShape { reason }
}

impl TransactionAssembler {
    /// A new assembler, idle.
    pub fn new(config: AssemblerConfig) -> Self {
        TransactionAssembler {
            config,
            state: State::Idle,
            halted: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AssemblerConfig {
        &self.config
    }

    /// Drops any partial transaction and a sticky halt: call when the stream restarts from
    /// the checkpoint (reconnect), which replays the partial transaction whole.
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.halted = None;
    }

    /// True between a GTID and its commit.
    pub fn in_transaction(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    /// Feeds one event; outputs are appended to `out`. A halt is sticky.
    pub fn push(&mut self, event: Event, out: &mut Vec<AssemblerOutput>) -> Result<(), Halt> {
        if let Some(h) = &self.halted {
            return Err(h.clone());
        }
        let result = self.handle(event, out);
        if let Err(h) = &result {
            self.state = State::Idle;
            self.halted = Some(h.clone());
        }
        result
    }

    fn handle(&mut self, event: Event, out: &mut Vec<AssemblerOutput>) -> Result<(), Halt> {
        match event {
            Event::Rotate { .. }
            | Event::Heartbeat
            | Event::Stop
            | Event::Ignored { .. }
            | Event::MariadbGtidList(_) => Ok(()),
            Event::FormatDescription { .. } => match self.state {
                State::Idle => Ok(()),
                _ => Err(shape("stream restarted inside a transaction")),
            },
            Event::Incident => Err(Halt::Incident),
            Event::Unsupported { halt, .. } => Err(halt),
            Event::AnonymousGtid => Err(Halt::AnonymousTransaction),
            Event::Gtid {
                gtid,
                committed_at_micros,
            } => self.begin_gtid(TransactionGtid::Mysql(gtid), committed_at_micros),
            Event::MariadbGtid(g) => self.mariadb_gtid(g),
            Event::Query(q) => self.query(&q.schema, &q.statement, out),
            Event::TableMap(schema) => self.table_map(schema),
            Event::Rows(rows) => self.rows(&rows),
            Event::Xid => self.commit(out),
            Event::XaPrepare { one_phase } => match &self.state {
                State::Open(open) if open.xa && one_phase => self.commit(out),
                State::Open(_) => Err(shape("xa_prepare")),
                _ => Err(Halt::CommitWithoutTransaction),
            },
            Event::TransactionPayload(inner) => {
                for e in inner {
                    self.handle(e, out)?;
                }
                Ok(())
            }
        }
    }

    fn begin_gtid(&mut self, gtid: TransactionGtid, committed_at_micros: u64) -> Result<(), Halt> {
        if !matches!(self.state, State::Idle) {
            return Err(Halt::GtidInsideTransaction);
        }
        self.state = State::AfterGtid {
            gtid,
            committed_at_micros,
        };
        Ok(())
    }

    fn mariadb_gtid(&mut self, g: MariadbGtidEvent) -> Result<(), Halt> {
        if g.flags & (MariadbGtidEvent::FL_PREPARED_XA | MariadbGtidEvent::FL_COMPLETED_XA) != 0 {
            return Err(shape("xa_two_phase"));
        }
        let gtid = TransactionGtid::Mariadb(g.gtid);
        let at = u64::from(g.timestamp) * 1_000_000;
        self.begin_gtid(gtid.clone(), at)?;
        if !g.is_standalone() {
            self.state = State::Open(Box::new(Open::new(gtid, at, false)));
        }
        Ok(())
    }

    fn open(&mut self, xa: bool) -> Result<(), Halt> {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::AfterGtid {
                gtid,
                committed_at_micros,
            } => {
                self.state = State::Open(Box::new(Open::new(gtid, committed_at_micros, xa)));
                Ok(())
            }
            State::Idle => Err(Halt::BeginWithoutGtid),
            State::Open(_) => Err(shape("begin inside a transaction")),
        }
    }

    fn query(
        &mut self,
        schema: &str,
        statement: &str,
        out: &mut Vec<AssemblerOutput>,
    ) -> Result<(), Halt> {
        let in_open = matches!(self.state, State::Open(_));
        match classify_statement(statement) {
            StatementClass::Begin => self.open(false),
            StatementClass::XaStart => match self.config.xa {
                XaMode::Refuse => self.open(true),
            },
            StatementClass::Commit => self.commit(out),
            StatementClass::XaCommit { one_phase: true } if self.open_is_xa() => self.commit(out),
            StatementClass::XaCommit { .. } => Err(shape("xa_commit")),
            StatementClass::XaRollback => Err(shape("xa_rollback")),
            StatementClass::XaPrepare => Err(shape("xa_prepare")),
            StatementClass::XaEnd if self.open_is_xa() => Ok(()),
            StatementClass::XaEnd => Err(shape("xa_end outside xa transaction")),
            StatementClass::Rollback => Err(shape("rolled_back_transaction")),
            StatementClass::RollbackToSavepoint => Err(shape("rollback_to_savepoint")),
            StatementClass::Savepoint if in_open => Ok(()),
            StatementClass::Savepoint => Err(shape("savepoint outside a transaction")),
            StatementClass::Dml => Err(Halt::StatementBasedChange),
            StatementClass::Ddl {
                kind,
                schema: named,
                table,
                starts_transaction,
            } => {
                let change = SchemaChange {
                    schema: named.or_else(|| (!schema.is_empty()).then(|| schema.to_string())),
                    table,
                    kind,
                    statement: self
                        .config
                        .keep_ddl_statement
                        .then(|| statement.to_string()),
                };
                let gtid = match &self.state {
                    State::Idle => return Err(Halt::StatementWithoutGtid),
                    State::AfterGtid { gtid, .. } => gtid.clone(),
                    State::Open(open) => open.gtid.clone(),
                };
                let completes =
                    matches!(self.state, State::AfterGtid { .. }) && !starts_transaction;
                out.push(AssemblerOutput::SchemaChange {
                    change,
                    gtid,
                    completes_transaction: completes,
                });
                match &self.state {
                    State::AfterGtid { .. } if starts_transaction => self.open(false),
                    State::AfterGtid { .. } => {
                        self.state = State::Idle;
                        Ok(())
                    }
                    _ => Ok(()),
                }
            }
            StatementClass::Other => match std::mem::replace(&mut self.state, State::Idle) {
                State::AfterGtid { gtid, .. } => {
                    out.push(AssemblerOutput::PositionAdvanced { gtid });
                    Ok(())
                }
                State::Idle => Err(Halt::StatementWithoutGtid),
                State::Open(_) => Err(shape("unrecognized statement inside a transaction")),
            },
        }
    }

    fn open_is_xa(&self) -> bool {
        matches!(&self.state, State::Open(o) if o.xa)
    }

    fn table_map(&mut self, schema: Arc<TableSchema>) -> Result<(), Halt> {
        let State::Open(open) = &mut self.state else {
            return Err(Halt::RowsWithoutTransaction);
        };
        let table_id = schema.table_id;
        let mapped = if self.config.filter.admits(&schema.table) {
            if self.config.require_full_metadata {
                if !schema.has_column_names {
                    return Err(Halt::TableMapMetadataMissing {
                        missing: "column_name",
                    });
                }
                if !schema.has_signedness {
                    return Err(Halt::TableMapMetadataMissing {
                        missing: "signedness",
                    });
                }
            }
            Mapped::Captured(schema)
        } else {
            Mapped::Filtered
        };
        open.tables.insert(table_id, mapped);
        Ok(())
    }

    fn rows(&mut self, rows: &RowsEvent) -> Result<(), Halt> {
        let State::Open(open) = &mut self.state else {
            return Err(Halt::RowsWithoutTransaction);
        };
        let schema = match open.tables.get(&rows.table_id) {
            None => {
                return Err(Halt::UnmappedTableId {
                    table_id: rows.table_id,
                })
            }
            Some(Mapped::Filtered) => {
                open.filtered = true;
                return Ok(());
            }
            Some(Mapped::Captured(s)) => Arc::clone(s),
        };
        let op = match rows.kind {
            RowsKind::Write => Op::Insert,
            RowsKind::Update => Op::Update,
            RowsKind::Delete => Op::Delete,
        };
        let changes = &mut open.changes;
        decode_full_rows(&schema, rows, &self.config.decode, |before, after| {
            changes.push(Change {
                table: Arc::clone(&schema.table),
                op,
                before: full_row(&schema, before)?,
                after: full_row(&schema, after)?,
                key: Arc::clone(&schema.key),
            });
            Ok(())
        })
    }

    fn commit(&mut self, out: &mut Vec<AssemblerOutput>) -> Result<(), Halt> {
        let State::Open(open) = std::mem::replace(&mut self.state, State::Idle) else {
            return Err(Halt::CommitWithoutTransaction);
        };
        let open = *open;
        if open.changes.is_empty() {
            out.push(AssemblerOutput::PositionAdvanced { gtid: open.gtid });
        } else {
            out.push(AssemblerOutput::Transaction(Transaction {
                gtid: open.gtid,
                committed_at_micros: open.committed_at_micros,
                changes: open.changes,
                partially_filtered: open.filtered,
            }));
        }
        Ok(())
    }
}

impl Open {
    fn new(gtid: TransactionGtid, committed_at_micros: u64, xa: bool) -> Self {
        Open {
            gtid,
            committed_at_micros,
            changes: Vec::new(),
            tables: HashMap::new(),
            filtered: false,
            xa,
        }
    }
}

fn full_row(schema: &TableSchema, values: Option<Vec<Value>>) -> Result<Option<Row>, Halt> {
    let Some(values) = values else {
        return Ok(None);
    };
    Row::new(Arc::clone(&schema.column_names), values)
        .map(Some)
        .map_err(|_| Halt::RowDecodeFailed {
            column: schema.columns.len(),
            reason: "row shape differs from table map",
        })
}

#[cfg(test)]
mod tests;
