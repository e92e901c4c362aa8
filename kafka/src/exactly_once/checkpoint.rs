//! What a pipeline has durably processed: the stream position and the snapshot progress.

use std::collections::BTreeMap;
use std::fmt;

use capstan_core::position::{InvalidResumePoint, Position, ResumePoint};
use serde::{Deserialize, Serialize};

use super::within_transaction::WithinTransaction;

/// One table's snapshot progress.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableProgress {
    /// The key of the last row delivered, in the runner's own encoding (opaque here);
    /// `None` before the first chunk. It is row data: `Debug` hides it.
    pub cursor: Option<serde_json::Value>,
    /// True once every row of the table was delivered.
    pub complete: bool,
}

impl fmt::Debug for TableProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableProgress")
            .field("cursor", &self.cursor.as_ref().map(|_| "<redacted>"))
            .field("complete", &self.complete)
            .finish()
    }
}

/// Snapshot progress: how many chunks were committed in total (a counter that only grows,
/// which orders two progress values) and each table's cursor.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotProgress {
    /// Snapshot chunks committed so far, over all tables.
    pub chunks_committed: u64,
    /// Per table (`schema.table`) progress.
    pub tables: BTreeMap<String, TableProgress>,
}

/// A pipeline checkpoint: the position a restart resumes from (ADR-0001), the processed
/// position beside it when it is more, and the snapshot progress (the second authority; the
/// snapshot contributes no GTIDs).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Where a restart resumes: every transaction before it is published.
    pub position: Position,
    /// Every transaction published, when more than `position` covers: a MariaDB checkpoint
    /// held back before a pending XA prepare (ADR-0008); a restart skips what it covers.
    /// `None` (and absent from the record, as in records written before the field) means
    /// "the same as `position`".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processed: Option<Position>,
    /// Snapshot progress.
    #[serde(default)]
    pub snapshot: SnapshotProgress,
    /// Exactly-once, inside a source transaction published in slices: how much of the
    /// transaction after `processed` is committed. `None` (absent from the record) between
    /// transactions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<WithinTransaction>,
}

impl Checkpoint {
    /// The checkpoint at `point`, with `snapshot` progress.
    pub fn at(point: ResumePoint, snapshot: SnapshotProgress) -> Self {
        let (position, processed) = point.into_parts();
        Checkpoint {
            position,
            processed,
            snapshot,
            within: None,
        }
    }

    /// The same checkpoint, inside the transaction `within` names (`None`: between
    /// transactions).
    pub fn inside(mut self, within: Option<WithinTransaction>) -> Self {
        self.within = within;
        self
    }

    /// Its position and processed position as one point; a record whose processed position
    /// does not cover its position is refused (written by no capstan).
    pub fn resume_point(&self) -> Result<ResumePoint, InvalidResumePoint> {
        ResumePoint::new(self.position.clone(), self.processed.clone())
    }

    /// Everything published: `processed`, else `position`.
    pub fn processed(&self) -> &Position {
        self.processed.as_ref().unwrap_or(&self.position)
    }

    /// True when `self` covers everything `other` covers: `other`'s position and processed
    /// position are subsets of ours, we committed at least as many snapshot chunks, and if
    /// `other` is inside a transaction, ours holds that transaction whole or is inside it at
    /// least as far. Along one history every component only grows, so of two checkpoints of
    /// one pipeline the later covers the earlier; with equal positions, the processed
    /// positions decide, and with equal processed positions the point inside the transaction.
    pub fn covers(&self, other: &Checkpoint) -> bool {
        other.position.is_subset(&self.position)
            && other.processed().is_subset(self.processed())
            && self.snapshot.chunks_committed >= other.snapshot.chunks_committed
            && other.within.as_ref().is_none_or(|theirs| {
                theirs.is_completed_in(self.processed())
                    || self
                        .within
                        .as_ref()
                        .is_some_and(|ours| ours.is_at_or_past(theirs))
            })
    }
}
