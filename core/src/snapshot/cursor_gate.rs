//! The cursor gate: per snapshot table, which streamed row changes are forwarded.

use std::collections::HashMap;

use super::snapshot_key::SnapshotKey;
use crate::change::{Change, Op, TableId};

/// Where one table's snapshot stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TableStatus {
    /// No chunk published yet.
    Pending,
    /// Some chunks published.
    InProgress,
    /// Every row published; the gate forwards everything.
    Complete,
}

/// The gate state of one table.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TableCursor {
    /// Where the table stands.
    pub status: TableStatus,
    /// Key of the last row of the last published chunk (`None`: nothing published).
    pub pk_cursor: Option<SnapshotKey>,
    /// Key of the last row of the last chunk that may have been published: made durable
    /// before a chunk is published, so after a crash it can be ahead of `pk_cursor`.
    pub delivered_pk: Option<SnapshotKey>,
}

impl TableCursor {
    /// A table whose snapshot has not started.
    pub fn pending() -> Self {
        TableCursor {
            status: TableStatus::Pending,
            pk_cursor: None,
            delivered_pk: None,
        }
    }
}

/// The keys of one streamed row change of a gated table.
#[derive(Clone, Copy, Debug)]
pub enum RowKeys<'a> {
    /// An inserted row's key.
    Insert(&'a SnapshotKey),
    /// A deleted row's key.
    Delete(&'a SnapshotKey),
    /// An updated row's key before and after (equal unless the update changes the key).
    Update {
        /// Key of the before image.
        before: &'a SnapshotKey,
        /// Key of the after image.
        after: &'a SnapshotKey,
    },
}

/// What to do with one streamed row change.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// Publish it as it is.
    Forward,
    /// Drop it: a chunk not yet published will carry the row's state.
    Suppress,
    /// A key-changing update of which only the delete of the old key passes.
    DeleteOnly,
    /// A key-changing update of which only the upsert of the new key passes.
    InsertOnly,
}

impl Verdict {
    /// Applies the verdict to `change`: the change itself, nothing, or the one half of a
    /// key-changing update that passes.
    pub fn apply(self, change: Change) -> Option<Change> {
        match self {
            Verdict::Forward => Some(change),
            Verdict::Suppress => None,
            Verdict::DeleteOnly => Some(Change {
                op: Op::Delete,
                after: None,
                ..change
            }),
            Verdict::InsertOnly => Some(Change {
                op: Op::Insert,
                before: None,
                ..change
            }),
        }
    }
}

/// The gate over every table of a snapshot. Tables it does not track are forwarded.
#[derive(Clone, Debug, Default)]
pub struct CursorGate {
    tables: HashMap<TableId, TableCursor>,
}

impl CursorGate {
    /// A gate tracking nothing.
    pub fn new() -> Self {
        CursorGate::default()
    }

    /// Tracks `table` from `cursor` (replacing what was tracked).
    pub fn track(&mut self, table: TableId, cursor: TableCursor) {
        self.tables.insert(table, cursor);
    }

    /// The gate state of `table`, if tracked.
    pub fn cursor(&self, table: &TableId) -> Option<&TableCursor> {
        self.tables.get(table)
    }

    /// True when changes of `table` must be gated (tracked and not complete): the caller
    /// computes their keys only then.
    pub fn is_gated(&self, table: &TableId) -> bool {
        self.tables
            .get(table)
            .is_some_and(|c| c.status != TableStatus::Complete)
    }

    /// True when every tracked table is complete.
    pub fn is_complete(&self) -> bool {
        self.tables
            .values()
            .all(|c| c.status == TableStatus::Complete)
    }

    /// The verdict on one streamed row change of `table`.
    pub fn decide(&self, table: &TableId, keys: RowKeys<'_>) -> Verdict {
        let Some(cursor) = self.tables.get(table) else {
            return Verdict::Forward;
        };
        if cursor.status == TableStatus::Complete {
            return Verdict::Forward;
        }
        let upsert_passes = |k: &SnapshotKey| cursor.pk_cursor.as_ref().is_some_and(|c| k <= c);
        let delete_passes = |k: &SnapshotKey| cursor.delivered_pk.as_ref().is_some_and(|c| k <= c);
        let pass = |yes: bool| {
            if yes {
                Verdict::Forward
            } else {
                Verdict::Suppress
            }
        };
        match keys {
            RowKeys::Insert(k) => pass(upsert_passes(k)),
            RowKeys::Delete(k) => pass(delete_passes(k)),
            RowKeys::Update { before, after } if before == after => pass(upsert_passes(after)),
            RowKeys::Update { before, after } => {
                match (delete_passes(before), upsert_passes(after)) {
                    (true, true) => Verdict::Forward,
                    (true, false) => Verdict::DeleteOnly,
                    (false, true) => Verdict::InsertOnly,
                    (false, false) => Verdict::Suppress,
                }
            }
        }
    }

    /// A chunk of `table` ending at `end` (`None`: no rows) was published; `last` marks the
    /// table complete. Cursors only move forward.
    pub fn advance(&mut self, table: &TableId, end: Option<SnapshotKey>, last: bool) {
        let Some(cursor) = self.tables.get_mut(table) else {
            return;
        };
        if let Some(end) = end {
            if cursor.pk_cursor.as_ref().is_none_or(|c| *c < end) {
                cursor.pk_cursor = Some(end.clone());
            }
            if cursor.delivered_pk.as_ref().is_none_or(|c| *c < end) {
                cursor.delivered_pk = Some(end);
            }
        }
        cursor.status = if last {
            TableStatus::Complete
        } else {
            TableStatus::InProgress
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::KeyComponent;

    fn k(v: i64) -> SnapshotKey {
        SnapshotKey::encode(&[KeyComponent::Int(v)])
    }

    fn gate(cursor: Option<i64>, delivered: Option<i64>) -> (CursorGate, TableId) {
        let t = TableId::new("s", "t");
        let mut g = CursorGate::new();
        g.track(
            t.clone(),
            TableCursor {
                status: TableStatus::InProgress,
                pk_cursor: cursor.map(k),
                delivered_pk: delivered.map(k),
            },
        );
        (g, t)
    }

    #[test]
    fn upserts_pass_up_to_the_cursor() {
        let (g, t) = gate(Some(10), Some(10));
        assert_eq!(g.decide(&t, RowKeys::Insert(&k(10))), Verdict::Forward);
        assert_eq!(g.decide(&t, RowKeys::Insert(&k(11))), Verdict::Suppress);
        let (b, a) = (k(3), k(3));
        let u = RowKeys::Update {
            before: &b,
            after: &a,
        };
        assert_eq!(g.decide(&t, u), Verdict::Forward);
    }

    #[test]
    fn deletes_pass_up_to_delivered_not_cursor() {
        // the crash window: delivered is ahead of the cursor
        let (g, t) = gate(Some(5), Some(10));
        assert_eq!(g.decide(&t, RowKeys::Delete(&k(8))), Verdict::Forward);
        assert_eq!(g.decide(&t, RowKeys::Insert(&k(8))), Verdict::Suppress);
        assert_eq!(g.decide(&t, RowKeys::Delete(&k(11))), Verdict::Suppress);
    }

    #[test]
    fn pending_table_suppresses_everything_and_untracked_passes() {
        let t = TableId::new("s", "t");
        let mut g = CursorGate::new();
        g.track(t.clone(), TableCursor::pending());
        assert_eq!(
            g.decide(&t, RowKeys::Insert(&k(i64::MIN))),
            Verdict::Suppress
        );
        assert_eq!(
            g.decide(&t, RowKeys::Delete(&k(i64::MIN))),
            Verdict::Suppress
        );
        let other = TableId::new("s", "u");
        assert_eq!(g.decide(&other, RowKeys::Insert(&k(1))), Verdict::Forward);
        assert!(g.is_gated(&t) && !g.is_gated(&other));
    }

    #[test]
    fn key_change_is_split_and_each_half_gated() {
        let (g, t) = gate(Some(10), Some(10));
        let (lo, hi) = (k(5), k(20));
        let down = RowKeys::Update {
            before: &hi,
            after: &lo,
        };
        let up = RowKeys::Update {
            before: &lo,
            after: &hi,
        };
        assert_eq!(g.decide(&t, down), Verdict::InsertOnly);
        assert_eq!(g.decide(&t, up), Verdict::DeleteOnly);
    }

    #[test]
    fn advance_moves_forward_and_completes() {
        let (mut g, t) = gate(Some(10), Some(12));
        g.advance(&t, Some(k(11)), false);
        let c = g.cursor(&t).unwrap();
        assert_eq!(
            (c.pk_cursor.clone(), c.delivered_pk.clone()),
            (Some(k(11)), Some(k(12)))
        );
        g.advance(&t, None, true);
        assert!(g.is_complete());
        assert_eq!(g.decide(&t, RowKeys::Insert(&k(99))), Verdict::Forward);
    }

    #[test]
    fn verdict_halves_keep_the_right_image() {
        use crate::change::{Row, Value};
        use std::sync::Arc;
        let cols: Arc<[String]> = vec!["id".to_string()].into();
        let row = |v| Row::new(cols.clone(), vec![Value::Int(v)]).unwrap();
        let change = Change {
            table: Arc::new(TableId::new("s", "t")),
            op: Op::Update,
            before: Some(row(1)),
            after: Some(row(2)),
            key: vec![0].into(),
            types: None,
        };
        let d = Verdict::DeleteOnly.apply(change.clone()).unwrap();
        assert_eq!((d.op, d.before, d.after), (Op::Delete, Some(row(1)), None));
        let i = Verdict::InsertOnly.apply(change.clone()).unwrap();
        assert_eq!((i.op, i.before, i.after), (Op::Insert, None, Some(row(2))));
        assert!(Verdict::Suppress.apply(change).is_none());
    }
}
