//! Where a new owner resumes: the pure decision between the Kafka offsets record and the Raft
//! checkpoint.
//!
//! In exactly-once mode the order of writes is: Kafka transaction (rows + offsets record)
//! commits, *then* the owner records the checkpoint in Raft. So the committed offsets record
//! is normally ahead of (or equal to) the Raft checkpoint: an owner that died between the two
//! writes leaves Raft one or more batches behind, and resuming from Raft would publish those
//! batches a second time. Resuming from whichever **covers** the other (position superset,
//! processed superset, and at least as many snapshot chunks) is therefore exact:
//!
//! - Kafka covers Raft → resume from Kafka (ties go to Kafka: it is the record written
//!   atomically with the rows), and tell the runner to catch Raft up.
//! - Raft covers Kafka but not vice versa → resume from Raft. This happens when the offsets
//!   topic lost data (deleted, or a pipeline switched from at-least-once): rows after the Kafka
//!   record were delivered under the Raft checkpoint's authority.
//! - No offsets record → Raft.
//! - Neither covers the other → the two authorities disagree about history; guessing could
//!   lose or duplicate rows, so the pipeline halts (`checkpoints_diverged`).
//!
//! # The processed position
//!
//! A MariaDB checkpoint stays before a pending XA prepare while later transactions are
//! published (ADR-0008); the processed position beside it names them (absent: the same as the
//! checkpoint). The resume point is a *pair*, taken whole from one record, never mixed: the
//! checkpoint says where the dump starts, the processed position what it skips, and a
//! checkpoint from one record with the processed position of another could skip what was
//! never published (a newer processed with an older checkpoint is harmless, the converse is
//! not). Both components only grow along one history (the source's checkpoint moves forward;
//! its processed position is everything handed out), so the later record covers the earlier
//! in both. While a prepare is pending the checkpoints of successive records are *equal* and
//! only the processed positions differ: then the processed positions decide (Kafka's larger
//! processed → Kafka, and Raft catches up; Raft's larger → Raft). A pair where one record is
//! ahead in the checkpoint and behind in processed is no single history's: diverged.

use super::checkpoint::Checkpoint;
use crate::SinkError;

/// Which checkpoint a plan resumes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CheckpointSource {
    /// The committed Kafka offsets record.
    Kafka,
    /// The Raft checkpoint.
    Raft,
}

/// The decision: resume from `checkpoint`, found in `source`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ResumePlan {
    /// The checkpoint to resume from: everything it covers is already in Kafka.
    pub checkpoint: Checkpoint,
    /// Where it came from.
    pub source: CheckpointSource,
    /// True when the Raft checkpoint is behind the chosen one and should be advanced to it.
    pub raft_behind: bool,
}

impl ResumePlan {
    /// Decides where `pipeline` resumes (see the module documentation).
    pub fn decide(
        pipeline: &str,
        kafka: Option<Checkpoint>,
        raft: Checkpoint,
    ) -> Result<ResumePlan, SinkError> {
        let Some(kafka) = kafka else {
            return Ok(ResumePlan {
                checkpoint: raft,
                source: CheckpointSource::Raft,
                raft_behind: false,
            });
        };
        if kafka.covers(&raft) {
            let raft_behind = !raft.covers(&kafka);
            Ok(ResumePlan {
                checkpoint: kafka,
                source: CheckpointSource::Kafka,
                raft_behind,
            })
        } else if raft.covers(&kafka) {
            Ok(ResumePlan {
                checkpoint: raft,
                source: CheckpointSource::Raft,
                raft_behind: false,
            })
        } else {
            Err(SinkError::CheckpointsDiverged {
                pipeline: pipeline.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exactly_once::SnapshotProgress;
    use capstan_core::position::{Flavor, Position};

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn cp(gtids: &str, chunks: u64) -> Checkpoint {
        Checkpoint {
            position: Position::parse(Flavor::Mysql, gtids).unwrap(),
            processed: None,
            snapshot: SnapshotProgress {
                chunks_committed: chunks,
                tables: Default::default(),
            },
            within: None,
        }
    }

    #[test]
    fn kafka_ahead_wins_and_raft_catches_up() {
        let p = ResumePlan::decide(
            "p",
            Some(cp(&format!("{A}:1-9"), 2)),
            cp(&format!("{A}:1-5"), 2),
        )
        .unwrap();
        assert_eq!(p.source, CheckpointSource::Kafka);
        assert!(p.raft_behind);
        assert_eq!(p.checkpoint, cp(&format!("{A}:1-9"), 2));
    }

    #[test]
    fn equal_goes_to_kafka_without_catch_up() {
        let p = ResumePlan::decide(
            "p",
            Some(cp(&format!("{A}:1-5"), 1)),
            cp(&format!("{A}:1-5"), 1),
        )
        .unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, false));
    }

    #[test]
    fn snapshot_progress_counts() {
        let p = ResumePlan::decide(
            "p",
            Some(cp(&format!("{A}:1-5"), 3)),
            cp(&format!("{A}:1-5"), 1),
        )
        .unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, true));
    }

    #[test]
    fn raft_ahead_or_no_record() {
        let p = ResumePlan::decide(
            "p",
            Some(cp(&format!("{A}:1-3"), 0)),
            cp(&format!("{A}:1-5"), 0),
        )
        .unwrap();
        assert_eq!(p.source, CheckpointSource::Raft);
        let p = ResumePlan::decide("p", None, cp(&format!("{A}:1-5"), 0)).unwrap();
        assert_eq!(p.source, CheckpointSource::Raft);
    }

    #[test]
    fn divergence_halts() {
        // A hole: Kafka has 1-3,5 and Raft 1-4; neither covers the other.
        let e = ResumePlan::decide(
            "p",
            Some(cp(&format!("{A}:1-3:5"), 0)),
            cp(&format!("{A}:1-4"), 0),
        )
        .unwrap_err();
        assert_eq!(e.code(), "checkpoints_diverged");
        // More GTIDs but fewer chunks.
        assert!(ResumePlan::decide(
            "p",
            Some(cp(&format!("{A}:1-9"), 0)),
            cp(&format!("{A}:1-5"), 1)
        )
        .is_err());
        // Flavours never mix.
        let m = Checkpoint {
            position: Position::empty(Flavor::Mariadb),
            processed: None,
            snapshot: SnapshotProgress::default(),
            within: None,
        };
        assert!(ResumePlan::decide("p", Some(m), cp(&format!("{A}:1"), 0)).is_err());
    }

    fn pair(checkpoint: &str, processed: Option<&str>) -> Checkpoint {
        let maria = |t: &str| Position::parse(Flavor::Mariadb, t).unwrap();
        Checkpoint {
            position: maria(checkpoint),
            processed: processed.map(maria),
            snapshot: SnapshotProgress::default(),
            within: None,
        }
    }

    #[test]
    fn equal_checkpoints_are_decided_by_the_processed_positions() {
        // a prepare pending: both held at 19, Kafka published up to 26, Raft recorded 22
        let kafka = pair("0-1-19", Some("0-1-26"));
        let p =
            ResumePlan::decide("p", Some(kafka.clone()), pair("0-1-19", Some("0-1-22"))).unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, true));
        assert_eq!(p.checkpoint, kafka);
        // Raft without a processed position (the same as its checkpoint) is behind too
        let p = ResumePlan::decide("p", Some(kafka.clone()), pair("0-1-19", None)).unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, true));
        // the offsets topic lost its newest records: Raft's larger processed position wins
        let raft = pair("0-1-19", Some("0-1-26"));
        let p =
            ResumePlan::decide("p", Some(pair("0-1-19", Some("0-1-22"))), raft.clone()).unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Raft, false));
        assert_eq!(p.checkpoint, raft);
        // the same pair: Kafka, nothing to catch up; an explicit equal processed is the same
        let p = ResumePlan::decide("p", Some(kafka.clone()), kafka.clone()).unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, false));
        let p = ResumePlan::decide(
            "p",
            Some(pair("0-1-30", Some("0-1-30"))),
            pair("0-1-30", None),
        )
        .unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, false));
    }

    #[test]
    fn a_pair_is_taken_whole_and_a_crossed_pair_diverges() {
        // the prepare resolved in Kafka's record: ahead in both
        let p = ResumePlan::decide(
            "p",
            Some(pair("0-1-30", None)),
            pair("0-1-19", Some("0-1-26")),
        )
        .unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, true));
        assert_eq!(p.checkpoint, pair("0-1-30", None));
        // ahead in the checkpoint but behind in processed: no single history
        let e = ResumePlan::decide(
            "p",
            Some(pair("0-1-21", Some("0-1-22"))),
            pair("0-1-19", Some("0-1-26")),
        )
        .unwrap_err();
        assert_eq!(e.code(), "checkpoints_diverged");
        let e = ResumePlan::decide(
            "p",
            Some(pair("0-1-19", Some("0-1-26"))),
            pair("0-1-21", Some("0-1-22")),
        )
        .unwrap_err();
        assert_eq!(e.code(), "checkpoints_diverged");
    }

    fn inside(checkpoint: &str, gtid: &str, next_change: u64) -> Checkpoint {
        pair(checkpoint, None).inside(Some(crate::exactly_once::WithinTransaction {
            gtid: gtid.into(),
            next_change,
            records: Default::default(),
            capture: "c".into(),
        }))
    }

    #[test]
    fn a_point_inside_a_sliced_transaction_is_ahead_of_the_point_before_it() {
        // Kafka committed slices of 0-1-20 (the checkpoint stays before it); Raft, which
        // moves only at a transaction's end, is at the same position: Kafka, inside
        let kafka = inside("0-1-19", "0-1-20", 4096);
        let p = ResumePlan::decide("p", Some(kafka.clone()), pair("0-1-19", None)).unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Kafka, true));
        assert_eq!(p.checkpoint, kafka);
        // further inside the same transaction is ahead; an earlier point is behind
        let p = ResumePlan::decide(
            "p",
            Some(inside("0-1-19", "0-1-20", 8192)),
            inside("0-1-19", "0-1-20", 4096),
        )
        .unwrap();
        assert_eq!(p.source, CheckpointSource::Kafka);
        let p = ResumePlan::decide(
            "p",
            Some(inside("0-1-19", "0-1-20", 4096)),
            inside("0-1-19", "0-1-20", 8192),
        )
        .unwrap();
        assert_eq!(p.source, CheckpointSource::Raft);
        // the transaction completed (Raft recorded its end, the newest offsets records were
        // lost): Raft covers the point inside it
        let p = ResumePlan::decide(
            "p",
            Some(inside("0-1-19", "0-1-20", 4096)),
            pair("0-1-20", None),
        )
        .unwrap();
        assert_eq!((p.source, p.raft_behind), (CheckpointSource::Raft, false));
        // the same position inside two different transactions: no single history
        let e = ResumePlan::decide(
            "p",
            Some(inside("0-1-19", "0-1-20", 4096)),
            inside("0-1-19", "0-2-20", 4096),
        )
        .unwrap_err();
        assert_eq!(e.code(), "checkpoints_diverged");
    }
}
