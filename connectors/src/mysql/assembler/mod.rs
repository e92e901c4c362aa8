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
//! Idle --MariaDB GTID (prepared XA)--> Open (XA) --rows, XA END--> XA_PREPARE event --> Idle
//! Idle --MariaDB GTID (completed XA)--> AfterGtid --XA COMMIT / XA ROLLBACK--> Idle
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
//! A one-phase `XA COMMIT … ONE PHASE` is an ordinary atomic commit and is delivered in both
//! modes (MySQL logs it as an XA transaction ended by a one-phase XA_PREPARE event, MariaDB as
//! an ordinary transaction). Two-phase XA, the same on both flavours once read:
//!
//! - MySQL: GTID, `XA START xid`, rows, `XA END xid`, XA_PREPARE event; later GTID,
//!   `XA COMMIT xid` / `XA ROLLBACK xid`.
//! - MariaDB (10.5+): GTID flagged FL_PREPARED_XA naming the XID (no `XA START` statement),
//!   rows, `XA END xid`, XA_PREPARE event; later a standalone GTID flagged FL_COMPLETED_XA
//!   naming the XID, then `XA COMMIT xid` / `XA ROLLBACK xid`. The XID of the GTID event must
//!   equal the statement's, and an XA_PREPARE event's XID the transaction's (else
//!   `unsupported_transaction_shape`).
//!
//! - `XaMode::Refuse` (default): an XA PREPARE (or an XA COMMIT/ROLLBACK resolving one)
//!   halts `unsupported_transaction_shape` and its rows are discarded.
//! - `XaMode::Track`: an XA PREPARE's changes are pooled under the sha256 of the XID
//!   ([`XidKey`]) and nothing is emitted, so the position never covers a prepare alone (a
//!   restart replays it). The XA COMMIT delivers the pooled changes once, as one
//!   [`Transaction`] of the commit's GTID whose `also_covers` names the prepare's GTID; an XA
//!   ROLLBACK emits [`AssemblerOutput::PositionAdvanced`] over both GTIDs. The pool is bounded
//!   (`max_prepared`): exhaustion halts `xa_prepared_pool_exhausted`, nothing is evicted. A
//!   resolution whose prepare is not pooled halts `xa_commit_without_prepare` /
//!   `xa_rollback_without_prepare`, unless the prepare predates the stream: the source
//!   passes the XIDs listed by `XA RECOVER` at connect
//!   ([`TransactionAssembler::set_recovered_xa`]), and those resolve row-lessly.
//!   [`TransactionAssembler::reset`] empties the pool (the reconnect replays held-out
//!   prepares). [`TransactionAssembler::take_pooled`] names each prepare as it is pooled, so
//!   that the source can hold a MariaDB checkpoint back before it (see `binlog_stream`).
//!
//! # Halts are sticky
//!
//! After a halt every further [`TransactionAssembler::push`] returns the same halt until
//! [`TransactionAssembler::reset`]: a caller that ignores an error cannot keep streaming.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use capstan_core::change::{
    BinlogOrigin, Change, Op, Row, SchemaChange, TableId, Transaction, TransactionGtid, Value,
};
use capstan_core::position::Position;

use super::column_controls::ColumnControls;
use super::column_plan::ColumnPlan;
use super::decode::{decode_full_rows, DecodeOptions};
use super::event::{Event, MariadbGtidEvent, RowsEvent, RowsKind};
use super::halt::Halt;
use super::statement::{classify_statement, StatementClass};
use super::table_filter::TableFilter;
use super::table_schema::TableSchema;
use super::table_structure::table_structure;
use super::xid::XidKey;
use last_table_maps::LastTableMaps;

mod last_table_maps;

/// What to do with two-phase XA transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XaMode {
    /// Halt `unsupported_transaction_shape` at an XA PREPARE (the default).
    #[default]
    Refuse,
    /// Pool prepared transactions (at most `max_prepared` unresolved at once) and deliver
    /// each once at its XA COMMIT, nothing at its XA ROLLBACK.
    Track {
        /// Bound of the prepared pool; exceeding it halts.
        max_prepared: usize,
    },
}

impl XaMode {
    /// The default bound of the prepared pool.
    pub const DEFAULT_MAX_PREPARED: usize = 10_000;

    /// `Track` with the default bound.
    pub fn track() -> XaMode {
        XaMode::Track {
            max_prepared: Self::DEFAULT_MAX_PREPARED,
        }
    }
}

/// Assembler settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssemblerConfig {
    /// Which tables to capture; applied before row decode.
    pub filter: TableFilter,
    /// What happens to columns of captured tables (excluded, masked, hashed) before a change
    /// is handed out.
    pub columns: ColumnControls,
    /// Two-phase XA handling.
    pub xa: XaMode,
    /// Keep DDL statement text in [`SchemaChange::statement`] (default: redacted).
    pub keep_ddl_statement: bool,
    /// Halt on a captured table's TABLE_MAP without column names or signedness
    /// (`binlog_row_metadata` not FULL). On by default; fixture suites turn it off.
    pub require_full_metadata: bool,
    /// Row decoder switches.
    pub decode: DecodeOptions,
    /// Hand out a transaction in slices of about this many bytes of decoded changes
    /// ([`AssemblerOutput::Slice`]) instead of holding it whole; `None` (the default) holds
    /// every transaction whole.
    pub slice_bytes: Option<usize>,
}

impl Default for AssemblerConfig {
    fn default() -> Self {
        AssemblerConfig {
            filter: TableFilter::All,
            columns: ColumnControls::default(),
            xa: XaMode::Refuse,
            keep_ddl_statement: false,
            require_full_metadata: true,
            decode: DecodeOptions::default(),
            slice_bytes: None,
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
        /// Where the statement's transaction starts in the binlog (its GTID event), as a
        /// transaction's [`Transaction::origin`]: the event's `source.server_id`/`file`/`pos`.
        origin: BinlogOrigin,
    },
    /// Changes of a transaction still open, handed out early because it holds more than
    /// [`AssemblerConfig::slice_bytes`]: they are committed (the server wrote the whole
    /// transaction before any of it reached the binlog) but processing them covers nothing.
    /// More slices may follow; the transaction's last changes come as a
    /// [`AssemblerOutput::Transaction`] whose `first_change` counts what went before. A
    /// restart before that replays the whole transaction. Never for an XA transaction.
    Slice(Transaction),
    /// A committed transaction with nothing to deliver (every change filtered, or no row
    /// change at all): the position advances over `gtid`.
    PositionAdvanced {
        /// The processed transaction.
        gtid: TransactionGtid,
        /// Further GTIDs covered with it: the XA PREPARE resolved by an XA ROLLBACK (or by an
        /// XA COMMIT whose changes were all filtered). Usually empty.
        also_covers: Vec<TransactionGtid>,
    },
}

#[derive(Debug)]
enum Mapped {
    Captured(Arc<TableSchema>, Option<Arc<ColumnPlan>>),
    Filtered,
}

#[derive(Debug)]
struct Open {
    gtid: TransactionGtid,
    committed_at_micros: u64,
    changes: Vec<Change>,
    /// What `changes` holds, by [`Change::approximate_bytes`].
    bytes: usize,
    /// Changes already handed out as slices.
    handed_out: u64,
    tables: HashMap<u64, Mapped>,
    filtered: bool,
    xa: bool,
    xid: Option<XidKey>,
}

/// A prepared, unresolved XA transaction (`XaMode::Track`).
#[derive(Debug)]
struct Prepared {
    gtid: TransactionGtid,
    changes: Vec<Change>,
    filtered: bool,
}

#[derive(Debug)]
enum State {
    Idle,
    AfterGtid {
        gtid: TransactionGtid,
        committed_at_micros: u64,
        /// MariaDB FL_COMPLETED_XA: the XID the GTID event names.
        xid: Option<XidKey>,
    },
    Open(Box<Open>),
}

/// Assembles binlog events into transactions. See the module documentation.
#[derive(Debug)]
pub struct TransactionAssembler {
    config: AssemblerConfig,
    state: State,
    halted: Option<Halt>,
    prepared: HashMap<XidKey, Prepared>,
    recovered: HashSet<XidKey>,
    pooled: Vec<TransactionGtid>,
    decoded_ahead: u64,
    /// What the source had already handed out when this stream started (see
    /// [`TransactionAssembler::set_replayed`]).
    replayed: Option<Position>,
    /// Column plans by table: the column names and key they were built for, and the plan.
    plans: HashMap<TableId, PlanEntry>,
    /// The newest table map of each captured table (for the structure of a dropped table).
    last_maps: LastTableMaps,
    /// The binlog file the stream is in (from the last ROTATE).
    file: Arc<str>,
    /// Where the newest GTID event was read: the origin of the transaction it starts.
    origin: BinlogOrigin,
}

/// A cached column plan: the column names and key it was built for, and the plan.
type PlanEntry = (Arc<[String]>, Arc<[usize]>, Option<Arc<ColumnPlan>>);

/// Column plans cached at most (a plan per captured table; cleared when full).
const MAX_CACHED_PLANS: usize = 4096;

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
            prepared: HashMap::new(),
            recovered: HashSet::new(),
            pooled: Vec::new(),
            decoded_ahead: 0,
            replayed: None,
            plans: HashMap::new(),
            last_maps: LastTableMaps::default(),
            file: Arc::from(""),
            origin: BinlogOrigin::default(),
        }
    }

    /// Replaces the XIDs of prepares that predate the stream (`XA RECOVER` at connect): their
    /// XA COMMIT / ROLLBACK resolves row-lessly instead of halting. Call at every connect.
    pub fn set_recovered_xa(&mut self, keys: impl IntoIterator<Item = XidKey>) {
        self.recovered = keys.into_iter().collect();
    }

    /// Prepared XA transactions pooled and not yet resolved.
    pub fn prepared_xa(&self) -> usize {
        self.prepared.len()
    }

    /// The GTIDs of the XA PREPAREs pooled since the last call (or [`reset`](Self::reset)),
    /// in stream order. The list grows by one per prepare until taken: a long-lived caller
    /// takes it after every push, as the live source does.
    pub fn take_pooled(&mut self) -> Vec<TransactionGtid> {
        std::mem::take(&mut self.pooled)
    }

    /// The configuration.
    pub fn config(&self) -> &AssemblerConfig {
        &self.config
    }

    /// What the source had already handed out when this stream started (its processed
    /// position). A stream that restarts from a held-back checkpoint replays transactions up
    /// to there; among them can be the XA resolution of a prepare that lies before the
    /// checkpoint (so it is not read again) and is no longer pending (so XA RECOVER does not
    /// list it): such a resolution, whose GTID `processed` covers, was delivered before and
    /// resolves row-lessly instead of halting `xa_commit_without_prepare` (the source skips it
    /// as already handed out either way).
    pub fn set_replayed(&mut self, processed: Position) {
        self.replayed = Some(processed);
    }

    /// Rows events whose rows came decoded ahead (by the stream's reader task) so far.
    pub fn decoded_ahead(&self) -> u64 {
        self.decoded_ahead
    }

    /// Drops any partial transaction and a sticky halt: call when the stream restarts from
    /// the checkpoint (reconnect), which replays the partial transaction whole.
    /// The pool of prepared XA transactions is emptied too: their GTIDs are never in the
    /// processed position, so the restarted stream replays them.
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.halted = None;
        self.prepared.clear();
        self.pooled.clear();
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
            Event::Rotate { file, .. } => {
                self.file = Arc::from(file);
                Ok(())
            }
            Event::Heartbeat | Event::Stop | Event::Ignored { .. } | Event::MariadbGtidList(_) => {
                Ok(())
            }
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
                server_id,
                position,
            } => {
                self.note_origin(server_id, position);
                self.begin_gtid(TransactionGtid::Mysql(gtid), committed_at_micros)
            }
            Event::MariadbGtid(g) => self.mariadb_gtid(g),
            Event::Query(q) => self.query(&q.schema, &q.statement, out),
            Event::TableMap(schema) => self.table_map(schema),
            Event::Rows(mut rows) => self.rows(&mut rows, out),
            Event::Xid => self.commit(out),
            Event::XaPrepare { one_phase, xid } => match &self.state {
                State::Open(open) if open.xid.is_some_and(|x| x != xid) => {
                    Err(shape("xa_prepare of another xid"))
                }
                State::Open(open) if open.xa && one_phase => self.commit(out),
                State::Open(open) if open.xa && self.tracks_xa() => self.prepare(),
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
            xid: None,
        };
        Ok(())
    }

    /// Where the GTID event that starts the next transaction was read.
    fn note_origin(&mut self, server_id: u32, pos: u64) {
        self.origin = BinlogOrigin {
            server_id,
            file: Arc::clone(&self.file),
            pos,
        };
    }

    fn mariadb_gtid(&mut self, g: MariadbGtidEvent) -> Result<(), Halt> {
        self.note_origin(g.gtid.server_id, g.position);
        let gtid = TransactionGtid::Mariadb(g.gtid);
        let at = u64::from(g.timestamp) * 1_000_000;
        self.begin_gtid(gtid.clone(), at)?;
        if g.is_prepared_xa() {
            // the XA START of MySQL's form: an XA transaction named by the GTID event
            let xid = g.xid.ok_or_else(|| shape("xa_prepare without xid"))?;
            self.state = State::Open(Box::new(Open::new(gtid, at, Some(Some(xid)))));
        } else if g.is_completed_xa() {
            let xid = g.xid.ok_or_else(|| shape("xa resolution without xid"))?;
            self.state = State::AfterGtid {
                gtid,
                committed_at_micros: at,
                xid: Some(xid),
            };
        } else if !g.is_standalone() {
            self.state = State::Open(Box::new(Open::new(gtid, at, None)));
        }
        Ok(())
    }

    fn open(&mut self, xa: Option<Option<XidKey>>) -> Result<(), Halt> {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::AfterGtid {
                gtid,
                committed_at_micros,
                xid: None,
            } => {
                self.state = State::Open(Box::new(Open::new(gtid, committed_at_micros, xa)));
                Ok(())
            }
            State::AfterGtid { xid: Some(_), .. } => Err(shape("xa resolution opens nothing")),
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
        let class = classify_statement(statement);
        // MariaDB's completed-XA group holds exactly its XA COMMIT / XA ROLLBACK
        if matches!(self.state, State::AfterGtid { xid: Some(_), .. })
            && !matches!(
                class,
                StatementClass::XaCommit { one_phase: false } | StatementClass::XaRollback
            )
        {
            return Err(shape("xa resolution group without its statement"));
        }
        match class {
            StatementClass::Begin => self.open(None),
            StatementClass::XaStart => match self.config.xa {
                XaMode::Refuse => self.open(Some(None)),
                XaMode::Track { .. } => {
                    let xid = XidKey::from_statement(statement)
                        .ok_or_else(|| shape("xa_xid_unparsable"))?;
                    self.open(Some(Some(xid)))
                }
            },
            StatementClass::Commit => self.commit(out),
            StatementClass::XaCommit { one_phase: true } if self.open_is_xa() => self.commit(out),
            StatementClass::XaCommit { one_phase: false } if self.tracks_xa() => {
                self.resolve(statement, true, out)
            }
            StatementClass::XaCommit { .. } => Err(shape("xa_commit")),
            StatementClass::XaRollback if self.tracks_xa() => self.resolve(statement, false, out),
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
                let schema = named.or_else(|| (!schema.is_empty()).then(|| schema.to_string()));
                let structure = self
                    .last_maps
                    .after_ddl(kind, schema.as_deref(), table.as_deref())
                    .and_then(|last| {
                        // excluded columns stay out; a table whose plan fails has none
                        let plan = self.plan(&last).ok()?;
                        Some(table_structure(&last, plan.as_deref()))
                    });
                let change = SchemaChange {
                    schema,
                    table,
                    kind,
                    statement: self
                        .config
                        .keep_ddl_statement
                        .then(|| statement.to_string()),
                    structure,
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
                    origin: self.origin.clone(),
                });
                match &self.state {
                    State::AfterGtid { .. } if starts_transaction => self.open(None),
                    State::AfterGtid { .. } => {
                        self.state = State::Idle;
                        Ok(())
                    }
                    _ => Ok(()),
                }
            }
            StatementClass::Other => match std::mem::replace(&mut self.state, State::Idle) {
                State::AfterGtid { gtid, .. } => {
                    out.push(AssemblerOutput::PositionAdvanced {
                        gtid,
                        also_covers: Vec::new(),
                    });
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

    fn tracks_xa(&self) -> bool {
        matches!(self.config.xa, XaMode::Track { .. })
    }

    /// `XaMode::Track`: pools the open XA transaction at its XA PREPARE.
    fn prepare(&mut self) -> Result<(), Halt> {
        let XaMode::Track { max_prepared } = self.config.xa else {
            return Err(shape("xa_prepare"));
        };
        let State::Open(open) = std::mem::replace(&mut self.state, State::Idle) else {
            return Err(Halt::CommitWithoutTransaction);
        };
        let open = *open;
        let xid = open
            .xid
            .ok_or_else(|| shape("xa_prepare without xa start"))?;
        if self.prepared.contains_key(&xid) {
            return Err(shape("xa_prepare of an unresolved xid"));
        }
        if self.prepared.len() >= max_prepared {
            return Err(Halt::XaPreparedPoolExhausted {
                limit: max_prepared,
            });
        }
        self.pooled.push(open.gtid.clone());
        self.prepared.insert(
            xid,
            Prepared {
                gtid: open.gtid,
                changes: open.changes,
                filtered: open.filtered,
            },
        );
        Ok(())
    }

    /// `XaMode::Track`: a two-phase XA COMMIT (`commit`) or XA ROLLBACK, a transaction of its
    /// own right after its GTID.
    fn resolve(
        &mut self,
        statement: &str,
        commit: bool,
        out: &mut Vec<AssemblerOutput>,
    ) -> Result<(), Halt> {
        let (gtid, committed_at_micros, named) =
            match std::mem::replace(&mut self.state, State::Idle) {
                State::AfterGtid {
                    gtid,
                    committed_at_micros,
                    xid,
                } => (gtid, committed_at_micros, xid),
                State::Idle => return Err(Halt::StatementWithoutGtid),
                State::Open(_) => return Err(shape("xa resolution inside a transaction")),
            };
        let xid = XidKey::from_statement(statement).ok_or_else(|| shape("xa_xid_unparsable"))?;
        if named.is_some_and(|n| n != xid) {
            return Err(shape("xa resolution of another xid"));
        }
        let Some(prepared) = self.prepared.remove(&xid) else {
            let replayed = self
                .replayed
                .as_ref()
                .is_some_and(|p| gtid.is_covered_by(p));
            if self.recovered.remove(&xid) || replayed {
                out.push(AssemblerOutput::PositionAdvanced {
                    gtid,
                    also_covers: Vec::new(),
                });
                return Ok(());
            }
            return Err(if commit {
                Halt::XaCommitWithoutPrepare
            } else {
                Halt::XaRollbackWithoutPrepare
            });
        };
        let also_covers = vec![prepared.gtid];
        if commit && !prepared.changes.is_empty() {
            out.push(AssemblerOutput::Transaction(Transaction {
                gtid,
                committed_at_micros,
                changes: prepared.changes,
                partially_filtered: prepared.filtered,
                first_change: 0,
                also_covers,
                origin: self.origin.clone(),
            }));
        } else {
            out.push(AssemblerOutput::PositionAdvanced { gtid, also_covers });
        }
        Ok(())
    }

    fn table_map(&mut self, schema: Arc<TableSchema>) -> Result<(), Halt> {
        if !matches!(self.state, State::Open(_)) {
            return Err(Halt::RowsWithoutTransaction);
        }
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
            let plan = self.plan(&schema)?;
            self.last_maps.remember(&schema);
            Mapped::Captured(schema, plan)
        } else {
            Mapped::Filtered
        };
        let State::Open(open) = &mut self.state else {
            return Err(Halt::RowsWithoutTransaction);
        };
        open.tables.insert(table_id, mapped);
        Ok(())
    }

    /// The column plan of a captured table version, from the cache while its column names
    /// and key are unchanged (planning matches every column against the controls).
    fn plan(&mut self, schema: &TableSchema) -> Result<Option<Arc<ColumnPlan>>, Halt> {
        if self.config.columns.is_empty() {
            return Ok(None);
        }
        if let Some((names, key, plan)) = self.plans.get(&*schema.table) {
            if **names == *schema.column_names && **key == *schema.key {
                return Ok(plan.clone());
            }
        }
        let plan = self
            .config
            .columns
            .plan(
                &schema.table,
                &schema.column_names,
                Some(&schema.types),
                &schema.key,
            )
            .map_err(|e| Halt::ColumnControlOnKey {
                table: e.table,
                column: e.column,
            })?;
        if self.plans.len() >= MAX_CACHED_PLANS {
            self.plans.clear();
        }
        self.plans.insert(
            (*schema.table).clone(),
            (
                Arc::clone(&schema.column_names),
                Arc::clone(&schema.key),
                plan.clone(),
            ),
        );
        Ok(plan)
    }

    fn rows(&mut self, rows: &mut RowsEvent, out: &mut Vec<AssemblerOutput>) -> Result<(), Halt> {
        let slice_bytes = self.config.slice_bytes;
        let State::Open(open) = &mut self.state else {
            return Err(Halt::RowsWithoutTransaction);
        };
        let (schema, plan) = match open.tables.get(&rows.table_id) {
            None => {
                return Err(Halt::UnmappedTableId {
                    table_id: rows.table_id,
                })
            }
            Some(Mapped::Filtered) => {
                open.filtered = true;
                return Ok(());
            }
            Some(Mapped::Captured(s, plan)) => (Arc::clone(s), plan.clone()),
        };
        // over the budget: what is held goes out as a slice before this event's rows (an XA
        // transaction is never sliced: it may be pooled, or resolve to nothing)
        if slice_bytes.is_some_and(|limit| open.bytes >= limit) && !open.xa {
            let changes = std::mem::take(&mut open.changes);
            let first_change = open.handed_out;
            open.handed_out += changes.len() as u64;
            open.bytes = 0;
            out.push(AssemblerOutput::Slice(Transaction {
                gtid: open.gtid.clone(),
                committed_at_micros: open.committed_at_micros,
                changes,
                partially_filtered: open.filtered,
                first_change,
                also_covers: Vec::new(),
                origin: self.origin.clone(),
            }));
        }
        let op = match rows.kind {
            RowsKind::Write => Op::Insert,
            RowsKind::Update => Op::Update,
            RowsKind::Delete => Op::Delete,
        };
        let changes = &mut open.changes;
        let bytes = &mut open.bytes;
        let opts = &self.config.decode;
        let mut push = |before, after| {
            let change = Change {
                table: Arc::clone(&schema.table),
                op,
                before: full_row(&schema, before)?,
                after: full_row(&schema, after)?,
                key: Arc::clone(&schema.key),
                types: Some(Arc::clone(&schema.types)),
            };
            // column controls apply here, so an excluded or masked value never leaves
            let change = match &plan {
                Some(plan) => plan.apply_change(change),
                None => change,
            };
            *bytes += change.approximate_bytes();
            changes.push(change);
            Ok(())
        };
        // decoded ahead by the reader task against this very table map: the same rows, or
        // the same halt, as decoding here
        match rows.ahead.take_for(&schema, opts) {
            Some(ahead) => {
                self.decoded_ahead += 1;
                ahead.replay(push)
            }
            None => decode_full_rows(&schema, rows, opts, &mut push),
        }
    }

    fn commit(&mut self, out: &mut Vec<AssemblerOutput>) -> Result<(), Halt> {
        let State::Open(open) = std::mem::replace(&mut self.state, State::Idle) else {
            return Err(Halt::CommitWithoutTransaction);
        };
        let open = *open;
        // a sliced transaction always ends as a Transaction (its last part, which is not
        // empty unless the rows event after the cut decoded to no row)
        if open.changes.is_empty() && open.handed_out == 0 {
            out.push(AssemblerOutput::PositionAdvanced {
                gtid: open.gtid,
                also_covers: Vec::new(),
            });
        } else {
            out.push(AssemblerOutput::Transaction(Transaction {
                gtid: open.gtid,
                committed_at_micros: open.committed_at_micros,
                changes: open.changes,
                partially_filtered: open.filtered,
                first_change: open.handed_out,
                also_covers: Vec::new(),
                origin: self.origin.clone(),
            }));
        }
        Ok(())
    }
}

impl Open {
    /// `xa`: `None` for an ordinary transaction, `Some(xid)` for an XA one (the XID key is
    /// read only under `XaMode::Track`).
    fn new(gtid: TransactionGtid, committed_at_micros: u64, xa: Option<Option<XidKey>>) -> Self {
        Open {
            gtid,
            committed_at_micros,
            changes: Vec::new(),
            bytes: 0,
            handed_out: 0,
            tables: HashMap::new(),
            filtered: false,
            xa: xa.is_some(),
            xid: xa.flatten(),
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
#[cfg(test)]
mod xa_tests;
