//! How a running pipeline's snapshot table set follows its definition: a table added to the
//! configured set is snapshotted alone (from its first key, woven into the stream from the
//! checkpoint on, under the same cursor gate as the initial snapshot); a table removed from
//! it loses its progress. The other tables keep theirs, and the checkpoint does not move.
//!
//! Why no new stream floor is needed: the gate suppresses every streamed change of a pending
//! table, and the first chunk is read at a position G that covers everything the stream has
//! processed (the runner pauses the stream while it reads), so a change the stream passed
//! before the table was added is in the chunk's view, and every later one is gated. That is
//! the initial snapshot's argument with the checkpoint in place of P0.

use std::collections::{BTreeMap, HashSet};

use capstan_core::change::TableId;
use capstan_raft_store::{Command, Epoch, TableProgress};

/// The change between the stored table set and the configured one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRevision {
    /// Configured and not stored, in the configured order: snapshot them.
    pub added: Vec<TableId>,
    /// Stored and no longer configured (`schema.table`), in name order: forget them.
    pub removed: Vec<String>,
}

impl SnapshotRevision {
    /// The revision that brings `stored` to `configured`; `None` when they are the same set.
    /// A stored table that `keep` keeps (an operator's ad-hoc snapshot of a table still
    /// captured, [`SnapshotPlan::keeps`](super::snapshot_plan::SnapshotPlan::keeps)) is not
    /// removed for being absent from `configured`.
    pub fn plan(
        stored: &BTreeMap<String, TableProgress>,
        configured: &[TableId],
        keep: impl Fn(&str, &TableProgress) -> bool,
    ) -> Option<SnapshotRevision> {
        let names: HashSet<String> = configured.iter().map(TableId::to_string).collect();
        let added: Vec<TableId> = configured
            .iter()
            .filter(|t| !stored.contains_key(&t.to_string()))
            .cloned()
            .collect();
        let removed: Vec<String> = stored
            .iter()
            .filter(|(n, p)| !names.contains(*n) && !keep(n, p))
            .map(|(n, _)| n.clone())
            .collect();
        if added.is_empty() && removed.is_empty() {
            return None;
        }
        Some(SnapshotRevision { added, removed })
    }

    /// The owner write that records the revision; `estimate` gives an added table's
    /// estimated row count (from describing it, which also refuses a table without a usable
    /// key before anything is written).
    pub fn command(
        &self,
        pipeline: &str,
        epoch: Epoch,
        estimate: impl Fn(&TableId) -> u64,
    ) -> Command {
        Command::ReviseSnapshotTables {
            pipeline: pipeline.to_string(),
            epoch,
            snapshot: self
                .added
                .iter()
                .map(|t| (t.to_string(), estimate(t)))
                .collect(),
            forget: self.removed.clone(),
        }
    }

    /// `stored` after the revision, as the command leaves it in Raft.
    pub fn applied(
        &self,
        mut stored: BTreeMap<String, TableProgress>,
        estimate: impl Fn(&TableId) -> u64,
    ) -> BTreeMap<String, TableProgress> {
        for name in &self.removed {
            stored.remove(name);
        }
        for t in &self.added {
            let progress = TableProgress {
                rows_estimated: estimate(t),
                ..TableProgress::pending()
            };
            stored.insert(t.to_string(), progress);
        }
        stored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_raft_store::{KeyBytes, SnapshotKind, SnapshotTableStatus};

    fn stored(entries: &[(&str, SnapshotTableStatus)]) -> BTreeMap<String, TableProgress> {
        entries
            .iter()
            .map(|(name, status)| {
                let progress = TableProgress {
                    status: *status,
                    pk_cursor: Some(KeyBytes::new(vec![1])),
                    delivered_pk: Some(KeyBytes::new(vec![1])),
                    rows_done: 5,
                    rows_estimated: 5,
                    kind: SnapshotKind::Initial,
                };
                (name.to_string(), progress)
            })
            .collect()
    }

    fn ids(names: &[&str]) -> Vec<TableId> {
        names
            .iter()
            .map(|n| {
                let (s, t) = n.split_once('.').unwrap();
                TableId::new(s, t)
            })
            .collect()
    }

    #[test]
    fn the_same_set_in_another_order_is_no_revision() {
        let s = stored(&[
            ("shop.a", SnapshotTableStatus::Complete),
            ("shop.b", SnapshotTableStatus::InProgress),
        ]);
        assert_eq!(
            SnapshotRevision::plan(&s, &ids(&["shop.b", "shop.a"]), |_, _| false),
            None
        );
    }

    #[test]
    fn an_added_table_is_snapshotted_alone_and_a_removed_one_forgotten() {
        let s = stored(&[
            ("shop.a", SnapshotTableStatus::Complete),
            ("shop.b", SnapshotTableStatus::InProgress),
        ]);
        let revision =
            SnapshotRevision::plan(&s, &ids(&["shop.a", "shop.z", "shop.c"]), |_, _| false)
                .unwrap();
        let estimate = |t: &TableId| if t.table == "z" { 9 } else { 3 };
        assert_eq!(
            revision.command("p", 4, estimate),
            Command::ReviseSnapshotTables {
                pipeline: "p".into(),
                epoch: 4,
                snapshot: vec![("shop.z".into(), 9), ("shop.c".into(), 3)],
                forget: vec!["shop.b".into()],
            }
        );
        let after = revision.applied(s.clone(), estimate);
        let names: Vec<&str> = after.keys().map(String::as_str).collect();
        assert_eq!(names, ["shop.a", "shop.c", "shop.z"]);
        // the complete table keeps its progress: it is not snapshotted again
        assert_eq!(after["shop.a"], s["shop.a"]);
        assert_eq!(
            after["shop.z"],
            TableProgress {
                rows_estimated: 9,
                ..TableProgress::pending()
            }
        );
    }

    #[test]
    fn removing_only_forgets() {
        let s = stored(&[
            ("shop.a", SnapshotTableStatus::Complete),
            ("shop.b", SnapshotTableStatus::Pending),
        ]);
        let revision = SnapshotRevision::plan(&s, &ids(&["shop.a"]), |_, _| false).unwrap();
        assert_eq!(
            revision.command("p", 1, |_| 0),
            Command::ReviseSnapshotTables {
                pipeline: "p".into(),
                epoch: 1,
                snapshot: vec![],
                forget: vec!["shop.b".into()],
            }
        );
    }

    #[test]
    fn a_kept_table_absent_from_the_configured_list_is_not_forgotten() {
        let s = stored(&[
            ("shop.a", SnapshotTableStatus::Complete),
            ("shop.b", SnapshotTableStatus::InProgress),
        ]);
        // shop.b is an operator's ad-hoc snapshot of a captured table
        let keep = |name: &str, _: &TableProgress| name == "shop.b";
        assert_eq!(SnapshotRevision::plan(&s, &ids(&["shop.a"]), keep), None);
        let revision = SnapshotRevision::plan(&s, &ids(&["shop.c"]), keep).unwrap();
        assert_eq!(
            (revision.added, revision.removed),
            (ids(&["shop.c"]), vec!["shop.a".to_string()])
        );
    }
}
