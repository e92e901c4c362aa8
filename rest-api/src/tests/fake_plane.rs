//! An in-memory [`ControlPlane`] that mimics the worker's answers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde_json::Value;

use crate::{
    AddMember, ApiError, ClusterView, ControlPlane, Health, MoveView, PipelineOffsets,
    PipelineStatus, PipelineValidation, PipelineView, PlannedMove, RebalanceView, RestartView,
    SnapshotChangeView, SnapshotRequest, SnapshotsView, TableOffset, WorkerLoad,
};

/// The fake's live members; member 4 exists but its lease expired.
const LIVE: [u64; 3] = [1, 2, 3];
const EXPIRED: u64 = 4;

#[derive(Debug, Clone)]
struct Record {
    config: Value,
    desired: String,
    owner: Option<u64>,
    epoch: u64,
    position: Option<String>,
    move_to: Option<u64>,
    /// Ad-hoc snapshots: table -> status.
    ad_hoc: BTreeMap<String, String>,
}

/// The fake: pipelines in a map; `quorum` false makes every write a 503.
#[derive(Debug, Default)]
pub(super) struct FakePlane {
    pipelines: Mutex<BTreeMap<String, Record>>,
    pub(super) no_quorum: AtomicBool,
}

fn unknown(name: &str) -> ApiError {
    ApiError::not_found("unknown_pipeline", format!("no pipeline named `{name}`"))
}

fn redacted(config: &Value) -> Value {
    let mut v = config.clone();
    if let Some(pw) = v.pointer_mut("/source/password") {
        *pw = Value::String("<redacted>".into());
    }
    v
}

impl FakePlane {
    fn write<R>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Record) -> Result<R, ApiError>,
    ) -> Result<R, ApiError> {
        if self.no_quorum.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable(
                "no_leader",
                "no raft leader is known",
            ));
        }
        let mut map = self.pipelines.lock().unwrap();
        let record = map.get_mut(name).ok_or_else(|| unknown(name))?;
        f(record)
    }

    fn read<R>(&self, name: &str, f: impl FnOnce(&Record) -> R) -> Result<R, ApiError> {
        let map = self.pipelines.lock().unwrap();
        map.get(name).map(f).ok_or_else(|| unknown(name))
    }

    fn validate(definition: &Value) -> Result<String, ApiError> {
        let name = definition
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid_field("invalid_pipeline", "name", "missing field"))?;
        if definition.get("bogus").is_some() {
            return Err(ApiError::invalid_field(
                "invalid_pipeline",
                "bogus",
                "unknown field",
            ));
        }
        Ok(name.to_string())
    }
}

#[async_trait::async_trait]
impl ControlPlane for FakePlane {
    async fn cluster(&self) -> ClusterView {
        ClusterView {
            node_id: 1,
            leader: Some(1),
            term: 3,
            last_applied: Some(9),
            snapshot_index: Some(5),
            purged_index: Some(2),
            members: vec![],
        }
    }

    async fn health(&self) -> Health {
        let ok = !self.no_quorum.load(Ordering::SeqCst);
        Health {
            status: if ok { "ok" } else { "degraded" }.into(),
            node_id: 1,
            leader: ok.then_some(1),
            lease_valid: ok,
        }
    }

    async fn add_member(&self, _member: AddMember) -> Result<(), ApiError> {
        Ok(())
    }

    async fn remove_member(&self, id: u64) -> Result<(), ApiError> {
        Err(ApiError::not_found(
            "unknown_member",
            format!("no member with id {id}"),
        ))
    }

    async fn list_pipelines(&self) -> Result<Vec<String>, ApiError> {
        Ok(self.pipelines.lock().unwrap().keys().cloned().collect())
    }

    async fn create_pipeline(&self, definition: Value) -> Result<PipelineView, ApiError> {
        let name = Self::validate(&definition)?;
        if self.no_quorum.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable(
                "no_leader",
                "no raft leader is known",
            ));
        }
        let mut map = self.pipelines.lock().unwrap();
        if map.contains_key(&name) {
            return Err(ApiError::conflict(
                "pipeline_exists",
                "a pipeline of that name exists",
            ));
        }
        let record = Record {
            config: definition.clone(),
            desired: "stopped".into(),
            owner: None,
            epoch: 0,
            position: Some("uuid:1-5".into()),
            move_to: None,
            ad_hoc: BTreeMap::new(),
        };
        map.insert(name.clone(), record);
        Ok(PipelineView {
            name,
            config: redacted(&definition),
        })
    }

    async fn validate_pipeline(&self, definition: Value) -> Result<PipelineValidation, ApiError> {
        let name = Self::validate(&definition)?;
        Ok(PipelineValidation { valid: true, name })
    }

    async fn update_pipeline_config(
        &self,
        name: &str,
        definition: Value,
    ) -> Result<PipelineView, ApiError> {
        Self::validate(&definition)?;
        self.write(name, |r| {
            r.config = definition.clone();
            Ok(PipelineView {
                name: name.into(),
                config: redacted(&definition),
            })
        })
    }

    async fn pipeline(&self, name: &str) -> Result<PipelineView, ApiError> {
        self.read(name, |r| PipelineView {
            name: name.into(),
            config: redacted(&r.config),
        })
    }

    async fn pipeline_status(&self, name: &str) -> Result<PipelineStatus, ApiError> {
        self.read(name, |r| PipelineStatus {
            name: name.into(),
            desired_state: r.desired.clone(),
            owner: r.owner,
            epoch: r.epoch,
            move_to: r.move_to,
            state: "unassigned".into(),
            reason: None,
            detail: None,
            position: r.position.clone(),
            lag_ms: None,
            rows_total: None,
            snapshot: Vec::new(),
        })
    }

    async fn set_desired_state(&self, name: &str, state: &str) -> Result<(), ApiError> {
        self.write(name, |r| {
            r.desired = state.into();
            if state != "stopped" && r.owner.is_none() {
                r.owner = Some(1);
                r.epoch += 1;
            }
            Ok(())
        })
    }

    async fn restart_pipeline(&self, name: &str) -> Result<RestartView, ApiError> {
        self.write(name, |r| {
            if r.owner.is_some() {
                r.epoch += 1;
            }
            Ok(RestartView {
                name: name.into(),
                owner: r.owner,
                epoch: r.epoch,
            })
        })
    }

    async fn move_pipeline(&self, name: &str, to: u64) -> Result<MoveView, ApiError> {
        self.read(name, |_| ())?;
        if to == EXPIRED {
            return Err(ApiError::conflict(
                "member_not_live",
                format!("member {to} is not live"),
            ));
        }
        if !LIVE.contains(&to) {
            return Err(
                ApiError::not_found("unknown_member", format!("no member with id {to}"))
                    .with_field("to"),
            );
        }
        self.write(name, |r| {
            r.move_to = (r.owner != Some(to)).then_some(to);
            Ok(MoveView {
                name: name.into(),
                owner: r.owner,
                move_to: r.move_to,
                epoch: r.epoch,
            })
        })
    }

    async fn rebalance(&self, dry_run: bool) -> Result<RebalanceView, ApiError> {
        if !dry_run && self.no_quorum.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable(
                "no_leader",
                "no raft leader is known",
            ));
        }
        // every owned pipeline on node 1, the first one moving to node 2
        let map = self.pipelines.lock().unwrap();
        let owned = map.values().filter(|r| r.owner.is_some()).count() as u64;
        let moves: Vec<PlannedMove> = map
            .iter()
            .filter(|(_, r)| r.owner.is_some())
            .take(usize::from(owned > 1))
            .map(|(name, _)| PlannedMove {
                pipeline: name.clone(),
                from: 1,
                to: 2,
            })
            .collect();
        let moved = moves.len() as u64;
        Ok(RebalanceView {
            dry_run,
            moves,
            workers: vec![
                WorkerLoad {
                    node: 1,
                    before: owned,
                    after: owned - moved,
                },
                WorkerLoad {
                    node: 2,
                    before: 0,
                    after: moved,
                },
            ],
        })
    }

    async fn pipeline_offsets(&self, name: &str) -> Result<PipelineOffsets, ApiError> {
        self.read(name, |r| PipelineOffsets {
            name: name.into(),
            epoch: r.epoch,
            flavor: r.position.as_ref().map(|_| "mysql".into()),
            position: r.position.clone(),
            processed: None,
            snapshot: vec![],
        })
    }

    /// Captures the tables of schema `shop`; every captured table exists.
    async fn request_snapshot(
        &self,
        name: &str,
        request: SnapshotRequest,
    ) -> Result<SnapshotChangeView, ApiError> {
        self.write(name, |r| {
            for (i, table) in request.tables.iter().enumerate() {
                if !table.starts_with("shop.") {
                    return Err(ApiError::invalid_field(
                        "snapshot_table_not_captured",
                        &format!("tables[{i}]"),
                        format!("the pipeline does not capture `{table}`"),
                    ));
                }
            }
            if r.position.is_none() {
                return Err(ApiError::conflict(
                    "pipeline_not_streamed",
                    "the pipeline has no checkpoint yet",
                ));
            }
            if let Some(table) = request.tables.iter().find(|t| {
                r.ad_hoc
                    .get(*t)
                    .is_some_and(|s| s == "pending" || s == "in_progress")
            }) {
                return Err(ApiError::conflict(
                    "snapshot_running",
                    format!("a snapshot of `{table}` is already pending or in progress"),
                ));
            }
            for table in &request.tables {
                r.ad_hoc.insert(table.clone(), "pending".into());
            }
            if r.owner.is_some() {
                r.epoch += 1;
            }
            Ok(SnapshotChangeView {
                name: name.into(),
                tables: request.tables.clone(),
                owner: r.owner,
                epoch: r.epoch,
            })
        })
    }

    async fn pipeline_snapshots(&self, name: &str) -> Result<SnapshotsView, ApiError> {
        self.read(name, |r| SnapshotsView {
            name: name.into(),
            tables: r
                .ad_hoc
                .iter()
                .map(|(table, status)| TableOffset {
                    table: table.clone(),
                    kind: "incremental".into(),
                    status: status.clone(),
                    rows_done: 0,
                    rows_estimated: 0,
                })
                .collect(),
        })
    }

    async fn stop_snapshot(&self, name: &str) -> Result<SnapshotChangeView, ApiError> {
        self.write(name, |r| {
            let mut tables = Vec::new();
            for (table, status) in &mut r.ad_hoc {
                if status == "pending" || status == "in_progress" {
                    *status = "stopped".into();
                    tables.push(table.clone());
                }
            }
            if tables.is_empty() {
                return Err(ApiError::conflict(
                    "no_snapshot_running",
                    "no incremental snapshot is running",
                ));
            }
            if r.owner.is_some() {
                r.epoch += 1;
            }
            Ok(SnapshotChangeView {
                name: name.into(),
                tables,
                owner: r.owner,
                epoch: r.epoch,
            })
        })
    }

    async fn reset_offsets(&self, name: &str) -> Result<(), ApiError> {
        self.write(name, |r| {
            if r.desired != "stopped" {
                return Err(ApiError::conflict(
                    "pipeline_not_stopped",
                    format!(
                        "pipeline must be stopped, its desired state is {}",
                        r.desired
                    ),
                ));
            }
            r.position = None;
            r.owner = None;
            r.epoch += 1;
            Ok(())
        })
    }

    async fn delete_pipeline(&self, name: &str) -> Result<(), ApiError> {
        if self.no_quorum.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable(
                "no_leader",
                "no raft leader is known",
            ));
        }
        self.pipelines
            .lock()
            .unwrap()
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| unknown(name))
    }

    async fn metrics(&self) -> Result<String, ApiError> {
        Ok("# TYPE capstan_raft_term gauge\ncapstan_raft_term 3\n# EOF\n".into())
    }
}
