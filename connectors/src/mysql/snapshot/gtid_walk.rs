//! [`GtidWalk`]: the GTID position at a MariaDB binlog point, translated incrementally from an
//! earlier point whose position is known (ADR-0006, Revision 2026-12-05). Pure: the caller
//! reads the events the walk asks for (`SHOW BINLOG EVENTS IN <file> FROM <pos>`) and feeds
//! them in; the walk applies every GTID event between the two points to the known position.
//!
//! MariaDB's `BINLOG_GTID_POS(file, pos)` is the binlog state at `pos`: the last GTID per
//! replication domain among the events before it (an `XA PREPARE`'s transaction has its own
//! GTID event and counts like any other). It computes that by reading `file` from its start;
//! the walk reads only the events between the known point and the wanted one, through later
//! files in `SHOW BINARY LOGS` order when the binlog rotated, so its cost follows the binlog
//! bytes written between the two points and not the offset into the file.
//!
//! The walk refuses, rather than guesses, whenever what it reads does not join up: an event
//! that does not start where the previous one ended (or at the known point), a wanted point
//! that is not an event boundary or lies before the known one, a file missing from the list
//! (purged, or the log reset). The caller then asks `BINLOG_GTID_POS` as before.

use std::collections::VecDeque;

use capstan_core::position::{MariadbGtid, MariadbGtidPosition};

/// Where every binlog file's first event starts (after the 4-byte magic number).
pub(crate) const FIRST_EVENT: u64 = 4;

/// A binlog point: a file and an offset in it (an event boundary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinlogPoint {
    /// The file name, as `SHOW BINARY LOGS` lists it.
    pub file: String,
    /// The offset.
    pub pos: u64,
}

impl BinlogPoint {
    /// A point from its parts.
    pub fn new(file: impl Into<String>, pos: u64) -> Self {
        BinlogPoint {
            file: file.into(),
            pos,
        }
    }
}

/// One row of `SHOW BINLOG EVENTS`: the columns the walk needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    /// `Log_name`.
    pub file: String,
    /// `Pos`: where the event starts.
    pub pos: u64,
    /// `Event_type` (`Gtid` for a GTID event).
    pub kind: String,
    /// `End_log_pos`: where the next event starts.
    pub end: u64,
    /// `Info` (a GTID event's ends with `GTID <domain>-<server>-<seq>`).
    pub info: String,
}

/// Why a walk cannot go on; the caller falls back to `BINLOG_GTID_POS`. No value in any of
/// them (binlog coordinates and event kinds are structure).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WalkError {
    /// The wanted point lies before the known one (or in a file listed before it).
    #[error("the binlog point is before the known one")]
    Backwards,
    /// A file between the two points is not in `SHOW BINARY LOGS` (purged, or a reset log).
    #[error("a binlog file between the points is not listed")]
    FileMissing,
    /// An event did not start where the walk stood.
    #[error("the binlog events do not join up")]
    Gap,
    /// An event spans the wanted point: it is not an event boundary.
    #[error("the binlog point is not an event boundary")]
    NotBoundary,
    /// The wanted point's file ended before the point.
    #[error("the binlog file ends before the point")]
    PastEnd,
    /// A GTID event whose `Info` holds no GTID the walk can read.
    #[error("a gtid event could not be read")]
    UnreadableGtid,
}

impl WalkError {
    /// A stable code, for the fallback's log line.
    pub fn code(self) -> &'static str {
        match self {
            WalkError::Backwards => "binlog_point_backwards",
            WalkError::FileMissing => "binlog_file_missing",
            WalkError::Gap => "binlog_events_gap",
            WalkError::NotBoundary => "binlog_point_not_boundary",
            WalkError::PastEnd => "binlog_point_past_end",
            WalkError::UnreadableGtid => "binlog_gtid_unreadable",
        }
    }
}

/// What the walk needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkStep {
    /// The events of `file` from `from` on (any number of them, in order).
    Read {
        /// The file.
        file: String,
        /// The offset of the first event wanted.
        from: u64,
    },
    /// The position at the wanted point.
    Done(MariadbGtidPosition),
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct GtidWalk {
    at: BinlogPoint,
    position: MariadbGtidPosition,
    target: BinlogPoint,
    /// The files after `at.file` still to read, the target's last.
    later: VecDeque<String>,
}

/// The GTID a GTID event's `Info` names: the word after its last `GTID`, `domain-server-seq`
/// (`BEGIN GTID 0-1-5`, `GTID 0-1-6` for DDL, `XA START X'…',X'…',1 GTID 0-1-7`), followed by
/// ` cid=<n>` when the transaction was group-committed with others.
pub fn event_gtid(info: &str) -> Option<MariadbGtid> {
    let words: Vec<&str> = info.split_whitespace().collect();
    let at = words.iter().rposition(|w| *w == "GTID")?;
    match words.get(at + 1..)? {
        [gtid] => gtid.parse().ok(),
        [gtid, cid]
            if cid
                .strip_prefix("cid=")
                .is_some_and(|n| n.parse::<u64>().is_ok()) =>
        {
            gtid.parse().ok()
        }
        _ => None,
    }
}

impl GtidWalk {
    /// A walk from `known` (whose position is `position`) to `target`. `files` is `SHOW
    /// BINARY LOGS` in order; it is needed (and read) only when the two points are in
    /// different files.
    pub fn new(
        known: BinlogPoint,
        position: MariadbGtidPosition,
        target: BinlogPoint,
        files: Option<&[String]>,
    ) -> Result<GtidWalk, WalkError> {
        let later = if known.file == target.file {
            if target.pos < known.pos {
                return Err(WalkError::Backwards);
            }
            VecDeque::new()
        } else {
            let files = files.ok_or(WalkError::FileMissing)?;
            let index = |name: &str| files.iter().position(|f| f == name);
            let (Some(from), Some(to)) = (index(&known.file), index(&target.file)) else {
                return Err(WalkError::FileMissing);
            };
            if to < from {
                return Err(WalkError::Backwards);
            }
            files.iter().take(to + 1).skip(from + 1).cloned().collect()
        };
        Ok(GtidWalk {
            at: known,
            position,
            target,
            later,
        })
    }

    /// True when the two points are in different files (the caller must pass the file list).
    pub fn needs_files(known: &BinlogPoint, target: &BinlogPoint) -> bool {
        known.file != target.file
    }

    /// What to read next, or the result.
    pub fn next(&self) -> WalkStep {
        if self.at == self.target {
            return WalkStep::Done(self.position.clone());
        }
        WalkStep::Read {
            file: self.at.file.clone(),
            from: self.at.pos,
        }
    }

    /// Applies the events read for the last [`WalkStep::Read`], in order. `file_ended`: the
    /// read returned every event left in the file (fewer rows than asked for), so a file
    /// before the target's is finished and the walk moves to the next one.
    pub fn feed(&mut self, events: &[EventRow], file_ended: bool) -> Result<(), WalkError> {
        for e in events {
            if self.at == self.target {
                return Ok(());
            }
            if e.file != self.at.file || e.pos != self.at.pos || e.end <= e.pos {
                return Err(WalkError::Gap);
            }
            if self.at.file == self.target.file && e.end > self.target.pos {
                return Err(WalkError::NotBoundary);
            }
            if e.kind == "Gtid" {
                let gtid = event_gtid(&e.info).ok_or(WalkError::UnreadableGtid)?;
                // strict mode (which capstan requires): seq numbers grow within a domain, so
                // the last GTID of a domain is its greatest
                self.position.advance(gtid);
            }
            self.at.pos = e.end;
        }
        if file_ended && self.at != self.target {
            if self.at.file == self.target.file {
                return Err(WalkError::PastEnd);
            }
            let next = self.later.pop_front().ok_or(WalkError::FileMissing)?;
            self.at = BinlogPoint::new(next, FIRST_EVENT);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(text: &str) -> MariadbGtidPosition {
        text.parse().unwrap()
    }

    fn ev(file: &str, at: u64, end: u64, kind: &str, info: &str) -> EventRow {
        EventRow {
            file: file.to_string(),
            pos: at,
            kind: kind.to_string(),
            end,
            info: info.to_string(),
        }
    }

    /// The events the dev server wrote for an autocommit insert, an XA transaction (prepare,
    /// then commit) and an insert in domain 3 (copied from `SHOW BINLOG EVENTS`).
    fn file1() -> Vec<EventRow> {
        let f = "b.000001";
        vec![
            ev(f, 1688, 1730, "Gtid", "BEGIN GTID 0-2-9"),
            ev(
                f,
                1730,
                1789,
                "Annotate_rows",
                "INSERT INTO s.t(v) VALUES (1)",
            ),
            ev(f, 1789, 1851, "Table_map", "table_id: 22 (s.t)"),
            ev(
                f,
                1851,
                1893,
                "Write_rows_v1",
                "table_id: 22 flags: STMT_END_F",
            ),
            ev(f, 1893, 1924, "Xid", "COMMIT /* xid=26 */"),
            ev(f, 1924, 1970, "Gtid", "XA START X'7831',X'',1 GTID 0-2-10"),
            ev(
                f,
                1970,
                2133,
                "Write_rows_v1",
                "table_id: 22 flags: STMT_END_F",
            ),
            ev(f, 2133, 2216, "Query", "XA END X'7831',X'',1"),
            ev(f, 2216, 2254, "XA_prepare", "XA PREPARE X'7831',X'',1"),
            ev(f, 2254, 2298, "Gtid", "GTID 0-2-11"),
            ev(f, 2298, 2384, "Query", "XA COMMIT X'7831',X'',1"),
            ev(f, 2384, 2426, "Gtid", "BEGIN GTID 3-2-1"),
            ev(
                f,
                2426,
                2589,
                "Write_rows_v1",
                "table_id: 22 flags: STMT_END_F",
            ),
            ev(f, 2589, 2620, "Xid", "COMMIT /* xid=33 */"),
            ev(f, 2620, 2663, "Rotate", "b.000002;pos=4"),
        ]
    }

    fn file2() -> Vec<EventRow> {
        let f = "b.000002";
        vec![
            ev(
                f,
                4,
                256,
                "Format_desc",
                "Server ver: 10.11.19, Binlog ver: 4",
            ),
            ev(f, 256, 299, "Gtid_list", "[0-2-11,3-2-1]"),
            ev(f, 299, 344, "Binlog_checkpoint", "b.000002"),
            ev(f, 344, 386, "Gtid", "GTID 0-2-12"),
            ev(f, 386, 470, "Query", "CREATE TABLE s.u (id INT)"),
            ev(f, 470, 512, "Gtid", "BEGIN GTID 0-2-13"),
            ev(f, 512, 600, "Xid", "COMMIT /* xid=40 */"),
        ]
    }

    fn files() -> Vec<String> {
        ["b.000001", "b.000002", "b.000003"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    /// Runs a walk to its end, serving reads from `events` in batches of `batch`.
    fn run(mut walk: GtidWalk, events: &[EventRow], batch: usize) -> Result<String, WalkError> {
        for _ in 0..1000 {
            match walk.next() {
                WalkStep::Done(p) => return Ok(p.to_string()),
                WalkStep::Read { file, from } => {
                    let rest: Vec<EventRow> = events
                        .iter()
                        .filter(|e| e.file == file && e.pos >= from)
                        .cloned()
                        .collect();
                    let take: Vec<EventRow> = rest.iter().take(batch).cloned().collect();
                    walk.feed(&take, take.len() < batch)?;
                }
            }
        }
        panic!("the walk did not end");
    }

    #[test]
    fn gtid_events_name_their_gtid() {
        assert_eq!(
            event_gtid("BEGIN GTID 0-2-9"),
            Some(MariadbGtid::new(0, 2, 9))
        );
        assert_eq!(
            event_gtid("GTID 3-1-18446744073709551615").unwrap().seq,
            u64::MAX
        );
        assert_eq!(
            event_gtid("XA START X'7831',X'',1 GTID 0-2-10"),
            Some(MariadbGtid::new(0, 2, 10))
        );
        // group-committed transactions carry their commit id (seen on MariaDB 10.11 under
        // concurrent writers: `SHOW BINLOG EVENTS`)
        assert_eq!(
            event_gtid("BEGIN GTID 0-2-1538385 cid=354499"),
            Some(MariadbGtid::new(0, 2, 1538385))
        );
        assert_eq!(
            event_gtid("GTID 0-2-1538703 cid=354896"),
            Some(MariadbGtid::new(0, 2, 1538703))
        );
        assert_eq!(
            event_gtid("XA START X'7831',X'',1 GTID 0-2-1538702 cid=354896"),
            Some(MariadbGtid::new(0, 2, 1538702))
        );
        assert_eq!(event_gtid("BEGIN GTID 0-2-9 cid=x"), None);
        assert_eq!(event_gtid("BEGIN GTID 0-2-9 cid=1 more"), None);
        assert_eq!(event_gtid("BEGIN GTID"), None);
        assert_eq!(event_gtid("0-2-9"), None);
        assert_eq!(event_gtid("BEGIN GTID 0-2"), None);
    }

    #[test]
    fn each_gtid_between_the_points_moves_its_domain() {
        let all = file1();
        let walk = |to: u64| {
            GtidWalk::new(
                BinlogPoint::new("b.000001", 1688),
                pos("0-2-8"),
                BinlogPoint::new("b.000001", to),
                None,
            )
            .unwrap()
        };
        // the same point: no read at all
        assert_eq!(walk(1688).next(), WalkStep::Done(pos("0-2-8")));
        for batch in [1, 2, 100] {
            assert_eq!(run(walk(1924), &all, batch).unwrap(), "0-2-9");
            // the XA PREPARE's GTID counts before its commit's
            assert_eq!(run(walk(2254), &all, batch).unwrap(), "0-2-10");
            assert_eq!(run(walk(2384), &all, batch).unwrap(), "0-2-11");
            assert_eq!(run(walk(2620), &all, batch).unwrap(), "0-2-11,3-2-1");
        }
        assert_eq!(
            GtidWalk::new(
                BinlogPoint::new("b.000001", 1924),
                pos("0-2-9"),
                BinlogPoint::new("b.000001", 1688),
                None
            )
            .unwrap_err(),
            WalkError::Backwards
        );
    }

    #[test]
    fn a_rotation_walks_through_the_later_files_in_order() {
        let mut all = file1();
        all.extend(file2());
        let from = BinlogPoint::new("b.000001", 2384);
        assert!(GtidWalk::needs_files(
            &from,
            &BinlogPoint::new("b.000002", 512)
        ));
        for batch in [1, 3, 100] {
            let w = GtidWalk::new(
                from.clone(),
                pos("0-2-11"),
                BinlogPoint::new("b.000002", 512),
                Some(&files()),
            )
            .unwrap();
            assert_eq!(run(w, &all, batch).unwrap(), "0-2-13,3-2-1");
            // the target at the new file's first event boundary after the header
            let w = GtidWalk::new(
                from.clone(),
                pos("0-2-11"),
                BinlogPoint::new("b.000002", 344),
                Some(&files()),
            )
            .unwrap();
            assert_eq!(run(w, &all, batch).unwrap(), "0-2-11,3-2-1");
        }
        // a skipped file (b.000002 empty here) is walked through, not jumped
        let mut three = file1();
        three.extend(file2());
        three.push(ev("b.000002", 600, 643, "Rotate", "b.000003;pos=4"));
        three.push(ev("b.000003", 4, 256, "Format_desc", ""));
        three.push(ev("b.000003", 256, 298, "Gtid", "BEGIN GTID 0-2-14"));
        three.push(ev("b.000003", 298, 329, "Xid", "COMMIT"));
        let w = GtidWalk::new(
            from,
            pos("0-2-11"),
            BinlogPoint::new("b.000003", 329),
            Some(&files()),
        )
        .unwrap();
        assert_eq!(run(w, &three, 2).unwrap(), "0-2-14,3-2-1");
    }

    #[test]
    fn what_does_not_join_up_is_refused() {
        let mut all = file1();
        all.extend(file2());
        let walk = |known: (&str, u64), to: (&str, u64), files: Option<&[String]>| {
            GtidWalk::new(
                BinlogPoint::new(known.0, known.1),
                pos("0-2-8"),
                BinlogPoint::new(to.0, to.1),
                files,
            )
        };
        let listed = files();
        // another file without the list, a file not listed (purged), an earlier file
        assert_eq!(
            walk(("b.000001", 1688), ("b.000002", 344), None).unwrap_err(),
            WalkError::FileMissing
        );
        assert_eq!(
            walk(("b.000000", 1688), ("b.000002", 344), Some(&listed)).unwrap_err(),
            WalkError::FileMissing
        );
        assert_eq!(
            walk(("b.000002", 4), ("b.000001", 1688), Some(&listed)).unwrap_err(),
            WalkError::Backwards
        );
        // a point inside an event
        let w = walk(("b.000001", 1688), ("b.000001", 1800), None).unwrap();
        assert_eq!(run(w, &all, 100).unwrap_err(), WalkError::NotBoundary);
        // the known point inside an event: the first event read starts elsewhere
        let w = walk(("b.000001", 1700), ("b.000001", 1924), None).unwrap();
        let mut w2 = w.clone();
        assert_eq!(w2.feed(&all[1..3], false).unwrap_err(), WalkError::Gap);
        // a hole between two events
        let w = walk(("b.000001", 1688), ("b.000001", 2254), None).unwrap();
        let mut holed = all.clone();
        holed.remove(2);
        assert_eq!(run(w, &holed, 100).unwrap_err(), WalkError::Gap);
        // the target's file ends first
        let w = walk(("b.000002", 344), ("b.000002", 9000), Some(&listed)).unwrap();
        assert_eq!(run(w, &all, 100).unwrap_err(), WalkError::PastEnd);
        // a GTID event without a GTID
        let mut bad = file1();
        bad[0].info = "BEGIN".to_string();
        let w = walk(("b.000001", 1688), ("b.000001", 1924), None).unwrap();
        assert_eq!(run(w, &bad, 100).unwrap_err(), WalkError::UnreadableGtid);
    }
}
