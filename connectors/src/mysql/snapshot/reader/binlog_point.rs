//! MariaDB: a chunk's position G from its read view's binlog point (ADR-0006, Revision
//! 2026-12-05). The first point a reader sees, and any point the walk cannot reach, is
//! translated by the server (`BINLOG_GTID_POS`, which reads the point's file from its start).
//! Every later point is translated from the one before by [`GtidWalk`]: the reader reads only
//! the events between the two (`SHOW BINLOG EVENTS IN <file> FROM <pos> LIMIT n`, through later
//! files in `SHOW BINARY LOGS` order after a rotation) and applies their GTIDs. A point equal
//! to the last one (no binlog written in between) costs nothing.
//!
//! `SHOW BINLOG EVENTS` needs the `BINLOG MONITOR` privilege on MariaDB 10.5.2+ (granted by
//! `REPLICATION CLIENT`, its older name). Refused, the reader logs it once per process
//! (value-free) and asks `BINLOG_GTID_POS` for every chunk, as before.

use std::sync::atomic::{AtomicBool, Ordering};

use capstan_core::change::TableId;
use capstan_core::position::{MariadbGtidPosition, Position};

use super::super::error::SnapshotError;
use super::super::gtid_walk::{BinlogPoint, EventRow, GtidWalk, WalkError, WalkStep};
use super::{chunk_err, opt_str, opt_u64, parse_position, SnapshotReader};
use crate::mysql::replica_conn::ServerOrIo;

/// Events asked for per `SHOW BINLOG EVENTS`.
const EVENTS_PER_READ: usize = 2048;

/// The most reads one translation makes before it gives up and asks the server (a point far
/// behind: the server's read of one file is then the cheaper one).
const MAX_READS: usize = 256;

/// Server errors that mean "not allowed" (`ER_SPECIFIC_ACCESS_DENIED_ERROR`,
/// `ER_ACCESS_DENIED_ERROR`, `ER_DBACCESS_DENIED_ERROR`, `ER_TABLEACCESS_DENIED_ERROR`).
const REFUSED: [u16; 4] = [1227, 1045, 1044, 1142];

static REFUSAL_LOGGED: AtomicBool = AtomicBool::new(false);

/// How the positions of a reader's chunks were translated (MariaDB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TranslationStats {
    /// By `BINLOG_GTID_POS` (the first point, after a fallback, or with the events refused).
    pub by_server: u64,
    /// The same point as the chunk before: no read.
    pub unchanged: u64,
    /// Walked from the point before.
    pub walked: u64,
    /// Binlog events read by the walks.
    pub events_read: u64,
    /// Walks that could not reach the point and fell back to `BINLOG_GTID_POS`.
    pub fallbacks: u64,
    /// Why the last fallback happened (a walk code such as `binlog_events_gap`, or
    /// `server_error`, `events_refused`).
    pub last_fallback: Option<&'static str>,
}

/// A binlog point with its GTID position, as one reader translated it: another reader of
/// the same server may walk from it instead of asking `BINLOG_GTID_POS`
/// ([`SnapshotReader::seed_translation`]). Opaque.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranslationAnchor(BinlogPoint, MariadbGtidPosition);

/// The translation state of one reader (one connection, one server).
#[derive(Clone, Debug, Default)]
pub(super) struct Translator {
    /// The last point translated and its position.
    anchor: Option<(BinlogPoint, MariadbGtidPosition)>,
    /// `SHOW BINLOG EVENTS` was refused, or walking is off: always `BINLOG_GTID_POS`.
    events_refused: bool,
    pub(super) stats: TranslationStats,
}

impl Translator {
    /// A translator that walks (`walk`) or always asks `BINLOG_GTID_POS`.
    pub(super) fn new(walk: bool) -> Self {
        Translator {
            events_refused: !walk,
            ..Translator::default()
        }
    }

    /// True when the next point must come from `BINLOG_GTID_POS` (asked together with the
    /// point, in the chunk's last round trip).
    pub(super) fn needs_server(&self) -> bool {
        self.anchor.is_none() || self.events_refused
    }
}

/// Why a walk did not give the position.
enum Failure {
    /// The events did not join up (or a name could not be quoted): ask the server.
    Walk(&'static str),
    /// `SHOW BINLOG EVENTS` or `SHOW BINARY LOGS` refused.
    Refused,
    /// Another server error (e.g. the file was purged meanwhile): ask the server.
    Server(u16),
    /// The connection failed.
    Io(ServerOrIo),
}

impl From<WalkError> for Failure {
    fn from(e: WalkError) -> Self {
        Failure::Walk(e.code())
    }
}

impl From<ServerOrIo> for Failure {
    fn from(e: ServerOrIo) -> Self {
        match &e {
            ServerOrIo::Server(s) if REFUSED.contains(&s.code) => Failure::Refused,
            ServerOrIo::Server(s) => Failure::Server(s.code),
            ServerOrIo::Source(_) => Failure::Io(e),
        }
    }
}

/// A binlog file name as a string literal; `None` unless it is plain (`[A-Za-z0-9._-]`), so
/// nothing is ever spliced that needs escaping.
fn file_literal(name: &str) -> Option<String> {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    plain.then(|| format!("'{name}'"))
}

fn event_row(row: mysql_common::Row) -> Option<EventRow> {
    let v = row.unwrap_raw();
    let at = |i: usize| v.get(i).and_then(Option::as_ref);
    Some(EventRow {
        file: opt_str(at(0))?,
        pos: opt_u64(at(1))?,
        kind: opt_str(at(2))?,
        end: opt_u64(at(4))?,
        info: opt_str(at(5)).unwrap_or_default(),
    })
}

impl SnapshotReader {
    /// How this reader's chunk positions were translated so far.
    pub fn translation_stats(&self) -> TranslationStats {
        self.translator.stats
    }

    /// The last point this reader translated (MariaDB's lock-free capture), to seed another
    /// reader of the same server with.
    pub fn translation_anchor(&self) -> Option<TranslationAnchor> {
        self.translator
            .anchor
            .clone()
            .map(|(point, g)| TranslationAnchor(point, g))
    }

    /// Starts this reader's translation from `anchor` — a point another reader of the same
    /// server (the caller checked its identity) translated — unless it has one of its own:
    /// its first chunk is then walked from there instead of asking `BINLOG_GTID_POS`, whose
    /// cost grows with the offset into the binlog file. A point before the anchor falls back
    /// to the server, as any walk that cannot reach its point.
    pub fn seed_translation(&mut self, anchor: Option<TranslationAnchor>) {
        if self.translator.anchor.is_none() {
            self.translator.anchor = anchor.map(|TranslationAnchor(point, g)| (point, g));
        }
    }

    /// G for the view's binlog `point`: `server` (`BINLOG_GTID_POS`, read with the point) when
    /// it was asked for, else walked from the last point, else asked now.
    pub(super) async fn position_at(
        &mut self,
        table: &TableId,
        point: BinlogPoint,
        server: Option<Position>,
    ) -> Result<Position, SnapshotError> {
        let g = match server {
            Some(Position::Mariadb(g)) => {
                self.translator.stats.by_server += 1;
                g
            }
            Some(Position::Mysql(_)) => {
                return Err(SnapshotError::ChunkReadFailed {
                    table: table.clone(),
                    site: "binlog gtid pos",
                    code: 0,
                })
            }
            None => match self.walk_to(&point).await {
                Ok(g) => g,
                Err(Failure::Io(e)) => return Err(chunk_err(table, "binlog events", &e)),
                Err(failure) => {
                    self.translator.stats.last_fallback = Some(match &failure {
                        Failure::Walk(code) => code,
                        Failure::Refused => "events_refused",
                        Failure::Server(_) => "server_error",
                        Failure::Io(_) => "io",
                    });
                    match failure {
                        Failure::Refused => {
                            self.translator.events_refused = true;
                            if !REFUSAL_LOGGED.swap(true, Ordering::Relaxed) {
                                tracing::warn!(
                                    code = "binlog_events_refused",
                                    "show binlog events refused (binlog monitor privilege); \
                                     snapshot chunk positions use binlog_gtid_pos"
                                );
                            }
                        }
                        Failure::Walk(code) => {
                            tracing::debug!(code, "binlog walk fell back to binlog_gtid_pos");
                        }
                        Failure::Server(code) => {
                            tracing::debug!(code, "binlog walk fell back to binlog_gtid_pos");
                        }
                        Failure::Io(_) => {}
                    }
                    self.translator.stats.fallbacks += 1;
                    self.translator.stats.by_server += 1;
                    self.server_position(table, &point).await?
                }
            },
        };
        self.translator.anchor = Some((point, g.clone()));
        Ok(Position::Mariadb(g))
    }

    /// `BINLOG_GTID_POS(point)`, asked alone.
    async fn server_position(
        &mut self,
        table: &TableId,
        point: &BinlogPoint,
    ) -> Result<MariadbGtidPosition, SnapshotError> {
        let unreadable = || SnapshotError::ChunkReadFailed {
            table: table.clone(),
            site: "binlog snapshot",
            code: 0,
        };
        let text: Option<(Option<String>,)> = self
            .conn
            .exec_first(
                "SELECT BINLOG_GTID_POS(?, ?)",
                (point.file.as_str(), point.pos),
            )
            .await
            .map_err(|e| chunk_err(table, "binlog gtid pos", &e))?;
        match text
            .and_then(|(t,)| t)
            .and_then(|t| parse_position(self.flavor, &t))
        {
            Some(Position::Mariadb(g)) => Ok(g),
            _ => Err(unreadable()),
        }
    }

    /// The position at `target`, walked from the anchor.
    async fn walk_to(&mut self, target: &BinlogPoint) -> Result<MariadbGtidPosition, Failure> {
        let Some((known, g)) = self.translator.anchor.clone() else {
            return Err(Failure::Walk("no_anchor"));
        };
        if known == *target {
            self.translator.stats.unchanged += 1;
            return Ok(g);
        }
        let files = if GtidWalk::needs_files(&known, target) {
            self.conn.query("SHOW BINARY LOGS").await?;
            let rows: Vec<mysql_common::Row> = self.conn.next_result().await?.unwrap_or_default();
            self.conn.drop_result().await?;
            let names: Vec<String> = rows
                .into_iter()
                .filter_map(|r| opt_str(r.unwrap_raw().first().and_then(Option::as_ref)))
                .collect();
            Some(names)
        } else {
            None
        };
        let mut walk = GtidWalk::new(known, g, target.clone(), files.as_deref())?;
        for _ in 0..MAX_READS {
            let (file, from) = match walk.next() {
                WalkStep::Done(g) => {
                    self.translator.stats.walked += 1;
                    return Ok(g);
                }
                WalkStep::Read { file, from } => (file, from),
            };
            let literal = file_literal(&file).ok_or(Failure::Walk("binlog_file_name"))?;
            self.conn
                .query(&format!(
                    "SHOW BINLOG EVENTS IN {literal} FROM {from} LIMIT {EVENTS_PER_READ}"
                ))
                .await?;
            let rows: Vec<mysql_common::Row> = self.conn.next_result().await?.unwrap_or_default();
            self.conn.drop_result().await?;
            let read = rows.len();
            let events: Vec<EventRow> = rows
                .into_iter()
                .map(event_row)
                .collect::<Option<_>>()
                .ok_or(Failure::Walk("binlog_event_unreadable"))?;
            self.translator.stats.events_read += u64::try_from(read).unwrap_or(u64::MAX);
            walk.feed(&events, read < EVENTS_PER_READ)?;
        }
        Err(Failure::Walk("binlog_walk_too_long"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_file_names_are_spliced() {
        assert_eq!(
            file_literal("mariadb-bin.000001").as_deref(),
            Some("'mariadb-bin.000001'")
        );
        assert_eq!(file_literal("a'b"), None);
        assert_eq!(file_literal("a\\b"), None);
        assert_eq!(file_literal(""), None);
        assert_eq!(file_literal("dir/b.000001"), None);
    }

    #[test]
    fn walk_errors_ask_the_server() {
        let f = Failure::from(WalkError::Gap);
        assert!(matches!(f, Failure::Walk("binlog_events_gap")));
    }
}
