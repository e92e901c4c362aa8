//! Which snapshot a runner prepares when it starts, and the tables it reads in which order,
//! now that two sources name tables: the pipeline's own snapshot (`snapshot` in the
//! definition) and an operator's ad-hoc requests (`POST /pipelines/{name}/snapshots`, kind
//! `incremental` in the replicated progress, ADR-0005 §11).
//!
//! An ad-hoc table is read like any other snapshot table, under the same cursor gate, from
//! the checkpoint on — so a pipeline without a snapshot of its own prepares one with the
//! default settings while an ad-hoc table is still to read. It stays part of the snapshot as
//! long as the pipeline captures it, whatever `snapshot.tables` lists: a definition update
//! that no longer captures it forgets it, as it does a configured table.

use std::collections::BTreeMap;

use capstan_connectors::mysql::TableFilter;
use capstan_core::change::{Op, TableId};
use capstan_core::snapshot::Verdict;
use capstan_raft_store::{SnapshotKind, TableProgress};

use super::pipeline_spec::{CheckedSnapshot, SnapshotMode};
use super::snapshot_spec::DEFAULT_PARALLEL_READS;

/// The snapshot decisions taken at a runner's start (pure).
#[derive(Debug)]
pub struct SnapshotPlan<'a> {
    /// The pipeline's own snapshot, if it has one.
    pub configured: Option<&'a CheckedSnapshot>,
    /// What the pipeline captures.
    pub captured: &'a TableFilter,
}

impl SnapshotPlan<'_> {
    /// The snapshot settings to prepare: the pipeline's own, else — an ad-hoc table of a
    /// captured table still to read — the defaults (adaptive chunks, no rate ceiling, no
    /// re-snapshot of a lost position); `None`: the runner only streams.
    pub fn settings(&self, stored: &BTreeMap<String, TableProgress>) -> Option<CheckedSnapshot> {
        if let Some(configured) = self.configured {
            return Some(configured.clone());
        }
        let ad_hoc = stored
            .iter()
            .any(|(name, p)| p.status.is_running() && self.keeps(name, p));
        ad_hoc.then_some(CheckedSnapshot {
            mode: SnapshotMode::Never,
            tables: None,
            chunk_size: None,
            max_rows_per_second: None,
            parallel_reads: DEFAULT_PARALLEL_READS,
        })
    }

    /// True when a stored table stays in the snapshot beside the configured list: an ad-hoc
    /// table the pipeline still captures.
    pub fn keeps(&self, name: &str, progress: &TableProgress) -> bool {
        progress.kind == SnapshotKind::Incremental
            && table_id(name).is_some_and(|id| self.captured.admits(&id))
    }

    /// The tables in reading order: the configured list, then the ad-hoc tables it does not
    /// name, in name order; without a configured list, every stored table but an ad-hoc one
    /// no longer captured, in name order. `None` for a stored name that is not
    /// `schema.table`.
    pub fn order(&self, stored: &BTreeMap<String, TableProgress>) -> Option<Vec<TableId>> {
        let configured = self.configured.and_then(|s| s.tables.as_deref());
        let mut order: Vec<TableId> = configured.map(<[TableId]>::to_vec).unwrap_or_default();
        for (name, progress) in stored {
            let id = table_id(name)?;
            let wanted = match configured {
                Some(_) => self.keeps(name, progress) && !order.contains(&id),
                None => progress.kind != SnapshotKind::Incremental || self.keeps(name, progress),
            };
            if wanted {
                order.push(id);
            }
        }
        Some(order)
    }
}

/// The gate's verdict on a streamed change of an ad-hoc table, whose topic already holds its
/// rows (the table streamed before): a change that removes a key (a delete, the old key of a
/// key-changing update) passes whatever the cursors say. The initial snapshot may suppress
/// it, as the table's topic holds nothing beyond the cursor yet; here the row would stay on
/// the topic when the chunk no longer finds it. Passing it early is harmless: a row inserted
/// again before its chunk is read comes back with the chunk, published after the delete.
/// Upserts beyond the cursor are still suppressed (the chunk carries their state).
/// `key_changed`: an update whose key changed (ignored for other operations).
pub fn ad_hoc_verdict(verdict: Verdict, op: Op, key_changed: bool) -> Verdict {
    match (op, verdict) {
        (Op::Delete, _) => Verdict::Forward,
        (Op::Update, Verdict::Suppress | Verdict::DeleteOnly) if key_changed => Verdict::DeleteOnly,
        (Op::Update, Verdict::Forward | Verdict::InsertOnly) if key_changed => Verdict::Forward,
        (_, verdict) => verdict,
    }
}

/// `schema.table` back to a table id (the schema is everything before the first dot).
pub fn table_id(name: &str) -> Option<TableId> {
    name.split_once('.').map(|(s, t)| TableId::new(s, t))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use capstan_raft_store::SnapshotTableStatus;

    use super::*;

    fn progress(kind: SnapshotKind, status: SnapshotTableStatus) -> TableProgress {
        TableProgress {
            status,
            kind,
            ..TableProgress::pending()
        }
    }

    fn stored(
        entries: &[(&str, SnapshotKind, SnapshotTableStatus)],
    ) -> BTreeMap<String, TableProgress> {
        entries
            .iter()
            .map(|(n, k, s)| (n.to_string(), progress(*k, *s)))
            .collect()
    }

    fn ids(names: &[&str]) -> Vec<TableId> {
        names.iter().map(|n| table_id(n).unwrap()).collect()
    }

    fn only(names: &[&str]) -> TableFilter {
        TableFilter::Only(ids(names).into_iter().collect::<HashSet<_>>())
    }

    const INITIAL: SnapshotKind = SnapshotKind::Initial;
    const AD_HOC: SnapshotKind = SnapshotKind::Incremental;

    #[test]
    fn a_pipeline_without_a_snapshot_prepares_one_only_for_an_ad_hoc_table_to_read() {
        let captured = only(&["shop.a", "shop.b"]);
        let plan = SnapshotPlan {
            configured: None,
            captured: &captured,
        };
        let done = stored(&[("shop.a", AD_HOC, SnapshotTableStatus::Complete)]);
        assert_eq!(plan.settings(&done), None);
        let stopped = stored(&[("shop.a", AD_HOC, SnapshotTableStatus::Stopped)]);
        assert_eq!(plan.settings(&stopped), None);
        // an ad-hoc table no longer captured is not read
        let gone = stored(&[("shop.z", AD_HOC, SnapshotTableStatus::Pending)]);
        assert_eq!(plan.settings(&gone), None);
        let to_read = stored(&[
            ("shop.a", AD_HOC, SnapshotTableStatus::Complete),
            ("shop.b", AD_HOC, SnapshotTableStatus::InProgress),
        ]);
        let settings = plan.settings(&to_read).unwrap();
        assert_eq!(
            (
                settings.mode,
                settings.tables,
                settings.chunk_size,
                settings.max_rows_per_second
            ),
            (SnapshotMode::Never, None, None, None)
        );
        assert_eq!(plan.order(&to_read).unwrap(), ids(&["shop.a", "shop.b"]));
    }

    #[test]
    fn the_configured_list_comes_first_then_the_captured_ad_hoc_tables() {
        let captured = TableFilter::All;
        let configured = CheckedSnapshot {
            mode: SnapshotMode::Initial,
            tables: Some(ids(&["shop.c", "shop.a"])),
            chunk_size: Some(10),
            max_rows_per_second: None,
            parallel_reads: 1,
        };
        let plan = SnapshotPlan {
            configured: Some(&configured),
            captured: &captured,
        };
        let s = stored(&[
            ("shop.a", AD_HOC, SnapshotTableStatus::Pending),
            ("shop.b", AD_HOC, SnapshotTableStatus::InProgress),
            ("shop.c", INITIAL, SnapshotTableStatus::Complete),
            ("shop.d", INITIAL, SnapshotTableStatus::Complete),
        ]);
        assert_eq!(plan.settings(&s), Some(configured.clone()));
        // shop.a is configured and ad hoc: read once, in the configured place; shop.d is
        // neither configured nor ad hoc (the revision forgets it)
        assert_eq!(
            plan.order(&s).unwrap(),
            ids(&["shop.c", "shop.a", "shop.b"])
        );
        assert!(plan.keeps("shop.b", &s["shop.b"]));
        assert!(!plan.keeps("shop.d", &s["shop.d"]));
    }

    #[test]
    fn without_a_configured_list_every_stored_table_but_an_uncaptured_ad_hoc_one() {
        let captured = only(&["shop.a", "shop.b"]);
        let configured = CheckedSnapshot {
            mode: SnapshotMode::WhenNeeded,
            tables: None,
            chunk_size: None,
            max_rows_per_second: None,
            parallel_reads: 1,
        };
        let plan = SnapshotPlan {
            configured: Some(&configured),
            captured: &captured,
        };
        let s = stored(&[
            ("shop.a", INITIAL, SnapshotTableStatus::Complete),
            ("shop.b", AD_HOC, SnapshotTableStatus::Pending),
            ("shop.x", AD_HOC, SnapshotTableStatus::Pending),
        ]);
        assert_eq!(plan.order(&s).unwrap(), ids(&["shop.a", "shop.b"]));
        let bad = stored(&[("nodot", INITIAL, SnapshotTableStatus::Complete)]);
        assert_eq!(plan.order(&bad), None);
    }

    #[test]
    fn an_ad_hoc_table_lets_every_removed_key_through() {
        use Verdict::*;
        // a delete beyond the cursors
        assert_eq!(ad_hoc_verdict(Suppress, Op::Delete, false), Forward);
        // the old key of a key-changing update
        assert_eq!(ad_hoc_verdict(Suppress, Op::Update, true), DeleteOnly);
        assert_eq!(ad_hoc_verdict(InsertOnly, Op::Update, true), Forward);
        assert_eq!(ad_hoc_verdict(DeleteOnly, Op::Update, true), DeleteOnly);
        // upserts keep the gate's verdict
        for v in [Forward, Suppress] {
            assert_eq!(ad_hoc_verdict(v, Op::Insert, false), v);
            assert_eq!(ad_hoc_verdict(v, Op::Update, false), v);
        }
    }
}
