//! An operator's ad-hoc (incremental) snapshots: `RequestSnapshot` and `StopSnapshot`.
//!
//! Both are control commands (no epoch: the REST API proposes them) that change the
//! replicated snapshot progress the owner's runner reads when it starts, and both grow the
//! epoch of an owned pipeline by one, as `RestartPipeline` does. That is what makes them safe
//! against the running owner: its incarnation, which gates the stream by the progress it read
//! at its start, is fenced by the same entry that changes the progress, so none of its later
//! writes (a checkpoint past a change it did not gate, a cursor of a table just reset) is
//! applied, and the incarnation that replaces it reads the new progress. Why a restart rather
//! than a runner that watches the state: ADR-0005 §11.

use crate::command::{SnapshotKind, SnapshotTableStatus};
use crate::pipeline_record::{PipelineRecord, TableProgress};
use crate::response::Response;
use crate::type_config::NodeId;
use crate::ClusterState;

impl ClusterState {
    /// Why `RequestSnapshot` of `tables` would be refused now (`UnknownPipeline`,
    /// `NotStreamed`, `SnapshotRunning`), `None` when it would be applied. `apply` decides by
    /// it; the REST API asks it first, so a request bound to be refused costs no I/O.
    pub fn snapshot_request_refusal<'t>(
        &self,
        pipeline: &str,
        tables: impl IntoIterator<Item = &'t str>,
    ) -> Option<Response> {
        let Some(record) = self.pipelines.get(pipeline) else {
            return Some(Response::UnknownPipeline);
        };
        if record.checkpoint.is_none() {
            return Some(Response::NotStreamed);
        }
        let running = tables.into_iter().find(|table| {
            record
                .snapshot
                .get(*table)
                .is_some_and(|p| p.status.is_running())
        });
        running.map(|table| Response::SnapshotRunning {
            table: table.to_string(),
        })
    }

    /// `RequestSnapshot`: every table `pending` of kind incremental, or nothing changed.
    pub(super) fn request_snapshot(
        &mut self,
        pipeline: &str,
        tables: Vec<(String, u64)>,
    ) -> Response {
        let names = tables.iter().map(|(table, _)| table.as_str());
        if let Some(refusal) = self.snapshot_request_refusal(pipeline, names) {
            return refusal;
        }
        let Some(record) = self.pipelines.get_mut(pipeline) else {
            return Response::UnknownPipeline;
        };
        for (table, rows_estimated) in tables {
            let progress = TableProgress {
                rows_estimated,
                kind: SnapshotKind::Incremental,
                ..TableProgress::pending()
            };
            record.snapshot.insert(table, progress);
        }
        let (owner, epoch) = fence_incarnation(record, &mut self.max_epoch);
        Response::SnapshotRequested { owner, epoch }
    }

    /// `StopSnapshot`: every incremental table still to read becomes `stopped`.
    pub(super) fn stop_snapshot(&mut self, pipeline: &str) -> Response {
        let Some(record) = self.pipelines.get_mut(pipeline) else {
            return Response::UnknownPipeline;
        };
        let mut tables = Vec::new();
        for (table, progress) in &mut record.snapshot {
            if progress.kind == SnapshotKind::Incremental && progress.status.is_running() {
                progress.status = SnapshotTableStatus::Stopped;
                tables.push(table.clone());
            }
        }
        if tables.is_empty() {
            return Response::NoSnapshotRunning;
        }
        let (owner, epoch) = fence_incarnation(record, &mut self.max_epoch);
        Response::SnapshotStopped {
            tables,
            owner,
            epoch,
        }
    }
}

/// Grows an owned pipeline's epoch by one (the running incarnation is fenced, the owner
/// starts a new one); returns the owner and the epoch after it.
fn fence_incarnation(record: &mut PipelineRecord, max_epoch: &mut u64) -> (Option<NodeId>, u64) {
    if record.owner.is_some() {
        record.epoch = record.epoch.saturating_add(1);
        *max_epoch = (*max_epoch).max(record.epoch);
    }
    (record.owner, record.epoch)
}
