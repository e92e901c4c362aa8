//! The binlog dump per flavour: where to start ([`StartPosition`]), whether the server can
//! serve that start without a gap ([`check_resume`], pure), and the requests that open the
//! stream on a [`ReplicaConn`].
//!
//! # Gaps and identity
//!
//! The checkpoint is a processed watermark. Resuming from it is safe only when the server
//! still holds every transaction after it and has executed everything in it:
//!
//! - MySQL: `checkpoint ⊆ gtid_executed` (else `source_identity_mismatch`: the checkpoint
//!   names transactions this server never ran, almost always the wrong server), and
//!   `gtid_purged ⊆ checkpoint` (else `data_gap`: the server dropped binlogs with
//!   transactions the pipeline never processed). An empty checkpoint means "all retained
//!   history", so any purge at all is a gap.
//! - MariaDB (strict mode, one position per domain): every checkpoint entry must be at or
//!   below the server's `gtid_binlog_pos` in its domain (identity), and at or above the GTID
//!   state the oldest retained binlog starts from (`BINLOG_GTID_POS(first_file, 4)`), for
//!   every domain of that state (gap).
//!
//! The server re-checks when it serves the dump; its refusals are classified the same way
//! by [`classify_dump_error`].

use std::num::NonZeroU32;
use std::time::Duration;

use capstan_core::position::{Flavor, GtidSet, MariadbGtidPosition, Position, ResumePoint};
use mysql_common::packets::{ComBinlogDump, ComBinlogDumpGtid, ComRegisterSlave, GnoInterval, Sid};

use super::replica_conn::{ReplicaConn, ServerErr, ServerOrIo};
use super::source_error::SourceError;

/// Where a stream starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartPosition {
    /// Resume after this processed position (empty: all retained history).
    Checkpoint(Position),
    /// Resume after `checkpoint`, handing out nothing `processed` covers: the pair a previous
    /// source reported ([`BinlogSource::position`](super::BinlogSource::position) and
    /// [`BinlogSource::processed`](super::BinlogSource::processed)). They differ only on
    /// MariaDB, where a pending XA prepare holds the checkpoint back (ADR-0008); the dump then
    /// reads the prepare again while the transactions after it that were already handed out
    /// are skipped. `processed` must cover `checkpoint` (on MySQL, equal it), else the start
    /// halts `processed_position_invalid`. Build it with [`StartPosition::resume`].
    Resume {
        /// Where the dump starts.
        checkpoint: Position,
        /// Everything already handed out.
        processed: Position,
    },
    /// The server's executed position, read once before the first dump ("from now").
    Current,
}

impl From<ResumePoint> for StartPosition {
    /// A start from a persisted [`ResumePoint`] (the usual way: its rule already holds, and
    /// the dump still checks the pair against the server).
    fn from(point: ResumePoint) -> Self {
        let (checkpoint, processed) = point.into_parts();
        StartPosition::resume(checkpoint, processed)
    }
}

impl StartPosition {
    /// A start from a persisted checkpoint and, if it was persisted too, the processed
    /// position beside it (`None`, or equal to the checkpoint: a plain
    /// [`StartPosition::Checkpoint`]).
    pub fn resume(checkpoint: Position, processed: Option<Position>) -> StartPosition {
        match processed {
            Some(processed) if processed != checkpoint => StartPosition::Resume {
                checkpoint,
                processed,
            },
            _ => StartPosition::Checkpoint(checkpoint),
        }
    }

    /// The checkpoint the dump starts after (`None` for [`StartPosition::Current`]).
    pub fn checkpoint(&self) -> Option<&Position> {
        match self {
            StartPosition::Checkpoint(p) | StartPosition::Resume { checkpoint: p, .. } => Some(p),
            StartPosition::Current => None,
        }
    }

    /// The processed position to skip by (`None` for [`StartPosition::Current`]): the
    /// checkpoint itself unless one was given beside it.
    pub fn processed(&self) -> Option<&Position> {
        match self {
            StartPosition::Checkpoint(p) | StartPosition::Resume { processed: p, .. } => Some(p),
            StartPosition::Current => None,
        }
    }
}

/// What the server reports about its history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerPositions {
    /// MySQL.
    Mysql {
        /// `@@global.gtid_executed`.
        executed: GtidSet,
        /// `@@global.gtid_purged`.
        purged: GtidSet,
    },
    /// MariaDB.
    Mariadb {
        /// `@@global.gtid_binlog_pos`.
        binlog_pos: MariadbGtidPosition,
        /// The GTID state at the start of the oldest retained binlog.
        oldest: MariadbGtidPosition,
    },
}

impl ServerPositions {
    /// The server's executed position (for [`StartPosition::Current`]).
    pub fn executed(&self) -> Position {
        match self {
            ServerPositions::Mysql { executed, .. } => Position::Mysql(executed.clone()),
            ServerPositions::Mariadb { binlog_pos, .. } => Position::Mariadb(binlog_pos.clone()),
        }
    }
}

/// Checks that resuming after `checkpoint` skips nothing and resumes on the right server.
pub fn check_resume(checkpoint: &Position, server: &ServerPositions) -> Result<(), SourceError> {
    match (checkpoint, server) {
        (Position::Mysql(cp), ServerPositions::Mysql { executed, purged }) => {
            if !cp.is_subset(executed) {
                return Err(SourceError::SourceIdentityMismatch);
            }
            if !purged.is_subset(cp) {
                return Err(SourceError::DataGap);
            }
            Ok(())
        }
        (Position::Mariadb(cp), ServerPositions::Mariadb { binlog_pos, oldest }) => {
            if !cp.is_subset(binlog_pos) {
                return Err(SourceError::SourceIdentityMismatch);
            }
            for first in oldest.iter() {
                let covered = cp.get(first.domain).is_some_and(|c| c.seq >= first.seq);
                if !covered {
                    return Err(SourceError::DataGap);
                }
            }
            Ok(())
        }
        _ => Err(SourceError::PositionFlavorMismatch),
    }
}

/// Checks a processed position given beside `checkpoint` ([`StartPosition::Resume`]): it
/// must have the checkpoint's flavour and cover it, and on MySQL (where the checkpoint is
/// never held back) equal it (else `processed_position_invalid`); and this server must have
/// executed it (else `source_identity_mismatch`: skipping by it would drop transactions this
/// server numbers the same way).
pub fn check_processed(
    checkpoint: &Position,
    processed: &Position,
    server: &ServerPositions,
) -> Result<(), SourceError> {
    let valid = match (checkpoint, processed) {
        (Position::Mysql(cp), Position::Mysql(done)) => cp == done,
        (Position::Mariadb(cp), Position::Mariadb(done)) => cp.is_subset(done),
        _ => false,
    };
    if !valid {
        return Err(SourceError::ProcessedPositionInvalid);
    }
    let executed = server.executed();
    if processed.flavor() != executed.flavor() {
        return Err(SourceError::PositionFlavorMismatch);
    }
    if !processed.is_subset(&executed) {
        return Err(SourceError::SourceIdentityMismatch);
    }
    Ok(())
}

/// Classifies a server refusal of the dump (or an error packet inside the stream). The
/// message is read here and dropped: only the resulting code leaves.
pub(crate) fn classify_dump_error(err: &ServerErr) -> SourceError {
    let m = err.message.to_ascii_lowercase();
    match err.code {
        1236 if m.contains("purged") || m.contains("could not find gtid state") => {
            SourceError::DataGap
        }
        // MySQL ends the older dump with 1236 and this text; MariaDB with ER_SLAVE_SAME_ID
        1236 if m.contains("same server") => SourceError::ServerIdConflict,
        4052 => SourceError::ServerIdConflict,
        1236 if m.contains("more gtids") || m.contains("not in the master's binlog") => {
            SourceError::SourceIdentityMismatch
        }
        1945 | 1950 | 1955 => SourceError::SourceIdentityMismatch,
        code => SourceError::DumpFailed { code },
    }
}

/// Session settings and dump request for `flavor`, starting after `checkpoint`.
pub(crate) async fn request_dump(
    conn: &mut ReplicaConn,
    server_id: NonZeroU32,
    heartbeat: Duration,
    checkpoint: &Position,
) -> Result<(), SourceError> {
    let heartbeat_ns = u64::try_from(heartbeat.as_nanos()).unwrap_or(u64::MAX);
    let checksum = match checkpoint.flavor() {
        Flavor::Mysql => {
            "SET @source_binlog_checksum = @@global.binlog_checksum, \
             @master_binlog_checksum = @@global.binlog_checksum"
        }
        Flavor::Mariadb => "SET @master_binlog_checksum = @@global.binlog_checksum",
    };
    conn.execute(checksum).await.map_err(|e| match e {
        ServerOrIo::Server(_) => SourceError::ChecksumNegotiationFailed,
        ServerOrIo::Source(s) => s,
    })?;
    let mut session = vec![format!(
        "SET @master_heartbeat_period = {heartbeat_ns}, @source_heartbeat_period = {heartbeat_ns}"
    )];
    if let Position::Mariadb(pos) = checkpoint {
        // the position's text form is digits, dashes and commas only
        session.push("SET @mariadb_slave_capability = 4".to_string());
        session.push(format!("SET @slave_connect_state = '{pos}'"));
        session.push("SET @slave_gtid_strict_mode = 1".to_string());
        session.push("SET @slave_gtid_ignore_duplicates = 0".to_string());
    }
    for sql in &session {
        conn.execute(sql).await.map_err(refusal)?;
    }
    conn.command_struct(&ComRegisterSlave::new(server_id.get()))
        .await?;
    conn.expect_ok().await.map_err(refusal)?;
    match checkpoint {
        Position::Mysql(set) => {
            let sids = dump_sids(set)?;
            let cmd = ComBinlogDumpGtid::new(server_id.get())
                .with_filename(&b""[..])
                .with_pos(4)
                .with_sids(sids);
            conn.command_struct(&cmd).await
        }
        Position::Mariadb(_) => {
            let cmd = ComBinlogDump::new(server_id.get())
                .with_filename(&b""[..])
                .with_pos(4);
            conn.command_struct(&cmd).await
        }
    }
}

fn refusal(e: ServerOrIo) -> SourceError {
    match e {
        ServerOrIo::Server(err) => classify_dump_error(&err),
        ServerOrIo::Source(s) => s,
    }
}

/// The GTID set in the dump command's form (intervals end-exclusive).
fn dump_sids(set: &GtidSet) -> Result<Vec<Sid<'static>>, SourceError> {
    let mut sids = Vec::new();
    for (sid, intervals) in set.iter() {
        let mut out = Sid::new(sid.uuid.0);
        if let Some(tag) = &sid.tag {
            let tag = mysql_common::packets::Tag::new(tag.as_str().to_string()).map_err(|_| {
                SourceError::ConfigInvalid {
                    field: "position",
                    reason: "gtid tag not accepted",
                }
            })?;
            out = out.with_tag(tag);
        }
        for iv in intervals {
            out = out.with_interval(GnoInterval::new(iv.start, iv.end.saturating_add(1)));
        }
        sids.push(out);
    }
    Ok(sids)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn mysql(executed: &str, purged: &str) -> ServerPositions {
        ServerPositions::Mysql {
            executed: executed.parse().unwrap(),
            purged: purged.parse().unwrap(),
        }
    }

    fn code(cp: &Position, s: &ServerPositions) -> &'static str {
        check_resume(cp, s)
            .map(|_| "ok")
            .unwrap_or_else(|e| e.code())
    }

    #[test]
    fn mysql_resume_checks() {
        let server = mysql(&format!("{A}:1-100"), &format!("{A}:1-10"));
        let cp = |t: &str| Position::parse(Flavor::Mysql, t).unwrap();
        assert_eq!(code(&cp(&format!("{A}:1-50")), &server), "ok");
        assert_eq!(code(&cp(&format!("{A}:1-10")), &server), "ok");
        assert_eq!(code(&cp(&format!("{A}:1-9")), &server), "data_gap");
        assert_eq!(code(&cp(""), &server), "data_gap");
        assert_eq!(code(&cp(&format!("{A}:1-5:7-50")), &server), "data_gap");
        assert_eq!(
            code(&cp(&format!("{A}:1-101")), &server),
            "source_identity_mismatch"
        );
        let other = "4e11fa47-71ca-11e1-9e33-c80aa9429562";
        assert_eq!(
            code(&cp(&format!("{A}:1-20,{other}:1")), &server),
            "source_identity_mismatch"
        );
        let fresh = mysql(&format!("{A}:1-100"), "");
        assert_eq!(code(&cp(""), &fresh), "ok");
        assert_eq!(
            code(&Position::empty(Flavor::Mariadb), &fresh),
            "position_flavor_mismatch"
        );
    }

    #[test]
    fn mariadb_resume_checks() {
        let server = ServerPositions::Mariadb {
            binlog_pos: "0-1-100,1-2-50".parse().unwrap(),
            oldest: "0-1-20".parse().unwrap(),
        };
        let cp = |t: &str| Position::parse(Flavor::Mariadb, t).unwrap();
        assert_eq!(code(&cp("0-1-20"), &server), "ok");
        assert_eq!(code(&cp("0-1-90,1-2-3"), &server), "ok");
        assert_eq!(code(&cp("0-1-19"), &server), "data_gap");
        assert_eq!(code(&cp(""), &server), "data_gap");
        assert_eq!(code(&cp("0-1-101"), &server), "source_identity_mismatch");
        assert_eq!(
            code(&cp("0-1-50,7-1-1"), &server),
            "source_identity_mismatch"
        );
        let fresh = ServerPositions::Mariadb {
            binlog_pos: "0-1-100".parse().unwrap(),
            oldest: MariadbGtidPosition::new(),
        };
        assert_eq!(code(&cp(""), &fresh), "ok");
    }

    #[test]
    fn a_processed_position_must_cover_the_checkpoint_and_be_executed() {
        let check = |cp: &Position, done: &Position, s: &ServerPositions| {
            check_processed(cp, done, s)
                .map(|_| "ok")
                .unwrap_or_else(|e| e.code())
        };
        let maria = |t: &str| Position::parse(Flavor::Mariadb, t).unwrap();
        let server = ServerPositions::Mariadb {
            binlog_pos: "0-1-100,1-2-50".parse().unwrap(),
            oldest: "0-1-20".parse().unwrap(),
        };
        // a held-back domain, a domain the checkpoint left out, equal positions
        assert_eq!(check(&maria("0-1-30"), &maria("0-1-40"), &server), "ok");
        assert_eq!(
            check(&maria("0-1-30"), &maria("0-1-30,1-2-5"), &server),
            "ok"
        );
        assert_eq!(check(&maria("0-1-30"), &maria("0-1-30"), &server), "ok");
        // behind the checkpoint in a domain, or missing one of its domains
        let invalid = "processed_position_invalid";
        assert_eq!(check(&maria("0-1-30"), &maria("0-1-29"), &server), invalid);
        assert_eq!(
            check(&maria("0-1-30,1-2-5"), &maria("0-1-40"), &server),
            invalid
        );
        assert_eq!(
            check(&maria("0-1-30"), &Position::empty(Flavor::Mysql), &server),
            invalid
        );
        // ahead of what the server executed: another server's history
        assert_eq!(
            check(&maria("0-1-30"), &maria("0-1-101"), &server),
            "source_identity_mismatch"
        );
        // MySQL: never held back, so the two are equal or the pair is invalid
        let my = |t: &str| Position::parse(Flavor::Mysql, &format!("{A}:{t}")).unwrap();
        let server = mysql(&format!("{A}:1-100"), "");
        assert_eq!(check(&my("1-50"), &my("1-50"), &server), "ok");
        assert_eq!(check(&my("1-50"), &my("1-60"), &server), invalid);
        assert_eq!(check(&my("1-50"), &my("1-40"), &server), invalid);
        assert_eq!(
            check(&my("1-101"), &my("1-101"), &server),
            "source_identity_mismatch"
        );
        assert_eq!(
            check(&maria("0-1-30"), &maria("0-1-40"), &server),
            "position_flavor_mismatch"
        );
    }

    #[test]
    fn resume_is_a_plain_checkpoint_when_processed_adds_nothing() {
        let a = Position::parse(Flavor::Mariadb, "0-1-30").unwrap();
        let b = Position::parse(Flavor::Mariadb, "0-1-40").unwrap();
        assert_eq!(
            StartPosition::resume(a.clone(), None),
            StartPosition::Checkpoint(a.clone())
        );
        assert_eq!(
            StartPosition::resume(a.clone(), Some(a.clone())),
            StartPosition::Checkpoint(a.clone())
        );
        let both = StartPosition::resume(a.clone(), Some(b.clone()));
        assert_eq!((both.checkpoint(), both.processed()), (Some(&a), Some(&b)));
        assert_eq!(StartPosition::Current.processed(), None);
    }

    #[test]
    fn dump_refusals_are_classified() {
        let e = |code, m: &str| {
            classify_dump_error(&ServerErr {
                code,
                message: m.to_string(),
            })
            .code()
        };
        assert_eq!(
            e(
                1236,
                "Cannot replicate because the source purged required binary logs."
            ),
            "data_gap"
        );
        assert_eq!(
            e(
                1236,
                "Could not find GTID state requested by slave in any binlog files."
            ),
            "data_gap"
        );
        assert_eq!(
            e(
                1236,
                "A replica with the same server_uuid/server_id as this replica has connected"
            ),
            "server_id_conflict"
        );
        assert_eq!(
            e(
                4052,
                "A slave with the same server_uuid/server_id as this slave has connected to the master"
            ),
            "server_id_conflict"
        );
        assert_eq!(
            e(1236, "Slave has more GTIDs than the master has"),
            "source_identity_mismatch"
        );
        assert_eq!(e(1236, "something else"), "dump_failed");
        assert_eq!(e(1053, "shutdown"), "dump_failed");
    }

    #[test]
    fn dump_intervals_are_end_exclusive() {
        let set: GtidSet = format!("{A}:1-5:9").parse().unwrap();
        let sids = dump_sids(&set).unwrap();
        assert_eq!(sids.len(), 1);
        let iv: Vec<(u64, u64)> = sids[0]
            .intervals()
            .iter()
            .map(|i| (i.start(), i.end()))
            .collect();
        assert_eq!(iv, vec![(1, 6), (9, 10)]);
    }
}
