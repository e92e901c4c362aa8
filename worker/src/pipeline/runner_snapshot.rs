//! The runner's snapshot start-up: decide whether a snapshot runs, bootstrap its stream
//! floor P0 in Raft on the first start, follow a changed configured table set (tables added
//! are snapshotted alone, tables removed forgotten: [`SnapshotRevision`]), re-snapshot a
//! lost position in `when_needed` mode, and build the [`SnapshotDriver`] at the stored
//! cursors. An operator's ad-hoc (incremental) tables are read beside the configured ones
//! ([`SnapshotPlan`]).

use std::collections::{BTreeMap, HashMap};

use capstan_connectors::mysql::snapshot::{KeyKind, SnapshotReader, SnapshotTable};
use capstan_connectors::mysql::{check_resume, SourceClient, SourceError};
use capstan_core::change::TableId;
use capstan_core::snapshot::TableStatus;
use capstan_raft_store::{Command, SnapshotKind, SnapshotTableStatus, TableProgress};
use tracing::info;

use super::engine::runner_exit::RunnerExit;
use super::pipeline_runner::PipelineRunner;
use super::pipeline_spec::{CheckedSnapshot, SnapshotMode};
use super::prepared_snapshot::PreparedSnapshot;
use super::snapshot_driver::SnapshotDriver;
use super::snapshot_plan::SnapshotPlan;
use super::snapshot_revision::SnapshotRevision;
use super::table_run::{key_parts, TableRun};

type Step<T> = Result<T, RunnerExit>;

fn halt(code: &str) -> RunnerExit {
    RunnerExit::failed(code)
}

/// `schema.table` back to a table id (the schema is everything before the first dot).
fn table_id(name: &str) -> Step<TableId> {
    match name.split_once('.') {
        Some((s, t)) => Ok(TableId::new(s, t)),
        None => Err(halt("snapshot_config_drifted")),
    }
}

impl PipelineRunner {
    /// What the snapshot decisions are taken from: the definition's snapshot and capture.
    fn snapshot_plan(&self) -> SnapshotPlan<'_> {
        SnapshotPlan {
            configured: self.spec.snapshot.as_ref(),
            captured: &self.spec.tables,
        }
    }

    /// Prepares the snapshot when one is to run: the pipeline's own, or an operator's ad-hoc
    /// tables still to read; `None` when the runner only streams.
    pub(super) async fn snapshot_start(&self) -> Step<Option<PreparedSnapshot>> {
        let stored = self
            .node
            .state
            .read(|s| {
                s.pipeline(&self.name)
                    .map(|r| r.snapshot_progress().clone())
            })
            .unwrap_or_default();
        match self.snapshot_plan().settings(&stored) {
            Some(snap) => self.snapshot_prepare(&snap).await,
            None => Ok(None),
        }
    }

    /// Prepares the snapshot: `None` when it is complete.
    async fn snapshot_prepare(&self, snap: &CheckedSnapshot) -> Step<Option<PreparedSnapshot>> {
        let mut reader = SnapshotReader::open(&self.spec.source)
            .await
            .map_err(|e| halt(e.code()))?;
        let (checkpoint, stored) = self
            .node
            .state
            .read(|s| {
                s.pipeline(&self.name)
                    .map(|r| (r.checkpoint().cloned(), r.snapshot_progress().clone()))
            })
            .unwrap_or_default();
        // tables described while beginning, so they are not described twice
        let mut described = HashMap::new();
        let progress: BTreeMap<String, TableProgress> = match checkpoint {
            None => {
                self.snapshot_begin(&mut reader, snap, None, &mut described)
                    .await?
            }
            Some(_) if stored.is_empty() => {
                // streamed before without a snapshot: the table set is already decided
                return Err(halt("snapshot_config_drifted"));
            }
            Some(checkpoint) => {
                let stored = match &snap.tables {
                    Some(configured) => {
                        self.snapshot_revise(&mut reader, stored, configured, &mut described)
                            .await?
                    }
                    None => stored,
                };
                let stored_ids: Vec<TableId> =
                    stored.keys().map(|n| table_id(n)).collect::<Step<_>>()?;
                let incomplete = stored.values().any(|p| !p.status.is_done());
                let needs_again = stored
                    .values()
                    .any(|p| p.status == SnapshotTableStatus::NeedsResnapshot);
                let lost = snap.mode == SnapshotMode::WhenNeeded
                    && self.position_lost(&checkpoint).await?;
                if needs_again || lost {
                    if snap.mode != SnapshotMode::WhenNeeded {
                        return Err(halt("snapshot_needs_resnapshot"));
                    }
                    info!(pipeline = %self.name, epoch = self.epoch, "re-snapshot: the checkpoint is no longer on the server");
                    let order = snap.tables.clone().unwrap_or(stored_ids);
                    self.snapshot_begin(&mut reader, snap, Some(order), &mut described)
                        .await?
                } else if !incomplete {
                    return Ok(None);
                } else {
                    stored
                }
            }
        };
        let order: Vec<TableId> = self
            .snapshot_plan()
            .order(&progress)
            .ok_or_else(|| halt("snapshot_config_drifted"))?;
        let mut tables = HashMap::new();
        let mut complete = HashMap::new();
        let mut status = HashMap::new();
        for id in &order {
            let p = progress
                .get(&id.to_string())
                .ok_or_else(|| halt("snapshot_config_drifted"))?;
            let st = match p.status {
                SnapshotTableStatus::Pending => TableStatus::Pending,
                SnapshotTableStatus::InProgress => TableStatus::InProgress,
                // stopped by an operator: streams ungated, as a complete table does
                SnapshotTableStatus::Complete | SnapshotTableStatus::Stopped => {
                    TableStatus::Complete
                }
                SnapshotTableStatus::NeedsResnapshot => {
                    return Err(halt("snapshot_needs_resnapshot"))
                }
            };
            status.insert(id.clone(), st);
            if st == TableStatus::Complete {
                // done: nothing is read or gated any more, so the table is not described —
                // it may since have been altered or dropped, which concerns the stream only
                let raw_cursor = p
                    .pk_cursor
                    .as_ref()
                    .map(key_parts)
                    .transpose()
                    .map_err(halt)?;
                complete.insert(id.clone(), raw_cursor);
                continue;
            }
            let table = match described.remove(id) {
                Some(table) => table,
                None => reader.describe(id).await.map_err(|e| halt(e.code()))?,
            };
            for column in &table.key.columns {
                if matches!(column.kind, KeyKind::Text { .. }) {
                    reader
                        .check_collation_order(column)
                        .await
                        .map_err(|e| halt(e.code()))?;
                }
            }
            let raw_cursor = p
                .pk_cursor
                .as_ref()
                .map(key_parts)
                .transpose()
                .map_err(halt)?;
            let raw_delivered = p
                .delivered_pk
                .as_ref()
                .map(key_parts)
                .transpose()
                .map_err(halt)?;
            for raw in [&raw_cursor, &raw_delivered].into_iter().flatten() {
                if !table.key.accepts(raw) {
                    return Err(halt("snapshot_schema_drifted"));
                }
            }
            tables.insert(
                id.clone(),
                TableRun::new(
                    table,
                    raw_cursor,
                    raw_delivered,
                    p.rows_done,
                    p.rows_estimated,
                )
                .incremental(p.kind == SnapshotKind::Incremental),
            );
        }
        Ok(Some(PreparedSnapshot {
            reader,
            order,
            tables,
            complete,
            status,
            chunk_size: snap.chunk_size,
            max_rows_per_second: snap.max_rows_per_second,
            parallel_reads: snap.parallel_reads,
        }))
    }

    /// A running pipeline whose configured tables differ from the stored set: the added
    /// ones are described (refusals come before anything is written) and recorded `pending`,
    /// the removed ones forgotten, in one Raft write ([`SnapshotRevision`]). Returns the
    /// stored set as it now is.
    async fn snapshot_revise(
        &self,
        reader: &mut SnapshotReader,
        stored: BTreeMap<String, TableProgress>,
        configured: &[TableId],
        described: &mut HashMap<TableId, SnapshotTable>,
    ) -> Step<BTreeMap<String, TableProgress>> {
        let plan = self.snapshot_plan();
        let keep = |name: &str, p: &TableProgress| plan.keeps(name, p);
        let Some(revision) = SnapshotRevision::plan(&stored, configured, keep) else {
            return Ok(stored);
        };
        for id in &revision.added {
            let table = reader.describe(id).await.map_err(|e| halt(e.code()))?;
            described.insert(id.clone(), table);
        }
        let estimate = |id: &TableId| described.get(id).map_or(0, |t| t.estimated_rows);
        self.owner_write(revision.command(&self.name, self.epoch, estimate))
            .await?;
        info!(
            pipeline = %self.name,
            epoch = self.epoch,
            added = revision.added.len(),
            removed = revision.removed.len(),
            "snapshot tables revised"
        );
        Ok(revision.applied(stored, estimate))
    }

    /// First start (or a re-snapshot): resolve and check the tables, read P0 and commit it
    /// with the pending table set in one Raft write.
    async fn snapshot_begin(
        &self,
        reader: &mut SnapshotReader,
        snap: &CheckedSnapshot,
        order: Option<Vec<TableId>>,
        described: &mut HashMap<TableId, SnapshotTable>,
    ) -> Step<BTreeMap<String, TableProgress>> {
        let order = match order.or_else(|| snap.tables.clone()) {
            Some(t) => t,
            None => reader
                .resolve_all_tables(&self.spec.tables)
                .await
                .map_err(|e| halt(e.code()))?,
        };
        let mut tables = Vec::with_capacity(order.len());
        for id in &order {
            // refusals (no usable key, an unsupported key type) come before anything is written
            let table = reader.describe(id).await.map_err(|e| halt(e.code()))?;
            tables.push((id.to_string(), table.estimated_rows));
            described.insert(id.clone(), table);
        }
        // P0: read strictly before the first chunk; the stream starts here
        let p0 = reader
            .executed_position()
            .await
            .map_err(|e| halt(e.code()))?;
        self.owner_write(Command::BeginSnapshot {
            pipeline: self.name.clone(),
            epoch: self.epoch,
            position: p0,
            tables: tables.clone(),
        })
        .await?;
        info!(pipeline = %self.name, epoch = self.epoch, tables = tables.len(), "snapshot begun");
        Ok(tables
            .into_iter()
            .map(|(name, rows_estimated)| {
                let p = TableProgress {
                    rows_estimated,
                    ..TableProgress::pending()
                };
                (name, p)
            })
            .collect())
    }

    /// True when resuming from `checkpoint` would skip purged binlog.
    async fn position_lost(&self, checkpoint: &capstan_core::position::Position) -> Step<bool> {
        let mut client = SourceClient::open(&self.spec.source, self.spec.source.stream_timeout)
            .await
            .map_err(|e| halt(e.code()))?;
        let positions = client.positions().await.map_err(|e| halt(e.code()))?;
        match check_resume(checkpoint, &positions) {
            Ok(()) => Ok(false),
            Err(SourceError::DataGap) => Ok(true),
            Err(e) => Err(halt(e.code())),
        }
    }

    /// The binlog the snapshot needs was purged: mark every incomplete table for a
    /// re-snapshot (best effort: the halt follows either way).
    pub(super) async fn snapshot_mark_lost(&self, driver: &SnapshotDriver) {
        for id in driver.tables() {
            let name = id.to_string();
            let p = self.node.state.read(|s| {
                s.pipeline(&self.name)
                    .and_then(|r| r.table_progress(&name).cloned())
            });
            let Some(p) = p.filter(|p| !p.status.is_done()) else {
                continue;
            };
            let _ = self
                .owner_write(Command::CommitSnapshotProgress {
                    pipeline: self.name.clone(),
                    epoch: self.epoch,
                    table: name,
                    pk_cursor: p.pk_cursor,
                    delivered_pk: p.delivered_pk,
                    status: SnapshotTableStatus::NeedsResnapshot,
                    rows_done: p.rows_done,
                    rows_estimated: p.rows_estimated,
                })
                .await;
        }
    }
}
