//! What a pipeline has durably processed: the stream position and the snapshot progress.

use std::collections::BTreeMap;
use std::fmt;

use capstan_core::position::Position;
use serde::{Deserialize, Serialize};

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

/// A pipeline checkpoint: the processed position (ADR-0001) and the snapshot progress (the
/// second authority; the snapshot contributes no GTIDs).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Every transaction processed.
    pub position: Position,
    /// Snapshot progress.
    #[serde(default)]
    pub snapshot: SnapshotProgress,
}

impl Checkpoint {
    /// True when `self` covers everything `other` covers: `other`'s position is a subset of
    /// ours and we committed at least as many snapshot chunks.
    pub fn covers(&self, other: &Checkpoint) -> bool {
        other.position.is_subset(&self.position)
            && self.snapshot.chunks_committed >= other.snapshot.chunks_committed
    }
}
