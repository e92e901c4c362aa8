//! The worker's Prometheus metrics (`GET /metrics`, OpenMetrics text via `prometheus-client`),
//! named by Prometheus's conventions: counters end in `_total` (the encoder appends it),
//! gauges only for values that go up and down, the unit at the end of the name.
//!
//! Two kinds of series:
//!
//! - **derived** from the replicated state and this node's Raft view by [`Metrics::observe`]:
//!   pipelines by state and desired state, per-pipeline epoch, config generation, checkpoint
//!   presence and age, halts by reason; Raft term, leader, last applied index. Every node can
//!   answer these. A checkpoint's age is the time since this node saw it change (so it
//!   restarts at zero when the node restarts); the worker observes once a second and on every
//!   scrape.
//! - **recorded** by the pipeline runner on the owner through the hooks
//!   ([`Metrics::record_published`], [`Metrics::set_lag_seconds`], [`Metrics::record_retry`],
//!   [`Metrics::set_source_connected`], …): rows, transactions, bytes, lag, snapshot counts,
//!   retries by reason, the source's connection and reconnects.
//!
//! Beside them `capstan_build_info` says which build answers. Labels are pipeline names,
//! states, outcomes, stable error codes and the build's version: no row values, no secrets.

mod labels;
mod observe;
mod runner_hooks;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use labels::{
    BuildLabels, DesiredLabel, PipelineLabel, ReadAheadLabel, ReasonLabel, StateLabel,
    READ_AHEAD_OUTCOMES,
};
pub use observe::RaftView;
use observe::Seen;
use runner_hooks::RunTotalsByPipeline;

/// The metric registry with every family; share it as `Arc<Metrics>`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    seen: Mutex<Seen>,
    /// Per pipeline, the reasons its halts and retries were counted under (to remove them).
    reasons: Mutex<HashMap<String, BTreeSet<String>>>,
    run_totals: Mutex<RunTotalsByPipeline>,
    build_info: Family<BuildLabels, Gauge>,
    pipelines: Family<StateLabel, Gauge>,
    desired: Family<DesiredLabel, Gauge>,
    epoch: Family<PipelineLabel, Gauge>,
    generation: Family<PipelineLabel, Gauge>,
    checkpoint_present: Family<PipelineLabel, Gauge>,
    checkpoint_age: Family<PipelineLabel, Gauge<f64, AtomicU64>>,
    halts: Family<ReasonLabel, Counter>,
    retries: Family<ReasonLabel, Counter>,
    rows: Family<PipelineLabel, Counter>,
    transactions: Family<PipelineLabel, Counter>,
    bytes: Family<PipelineLabel, Counter>,
    snapshot_rows: Family<PipelineLabel, Counter>,
    snapshot_suppressed: Family<PipelineLabel, Counter>,
    snapshot_read_ahead: Family<ReadAheadLabel, Counter>,
    lag: Family<PipelineLabel, Gauge<f64, AtomicU64>>,
    source_connected: Family<PipelineLabel, Gauge>,
    source_reconnects: Family<PipelineLabel, Counter>,
    raft_term: Gauge,
    raft_leader: Gauge,
    raft_last_applied: Gauge,
    raft_is_leader: Gauge,
    lease_valid: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every family registered under the `capstan_` prefix.
    pub fn new() -> Self {
        let m = Metrics {
            registry: Registry::with_prefix("capstan"),
            seen: Mutex::new(Seen::default()),
            reasons: Mutex::new(HashMap::new()),
            run_totals: Mutex::new(RunTotalsByPipeline::new()),
            build_info: Family::default(),
            pipelines: Family::default(),
            desired: Family::default(),
            epoch: Family::default(),
            generation: Family::default(),
            checkpoint_present: Family::default(),
            checkpoint_age: Family::default(),
            halts: Family::default(),
            retries: Family::default(),
            rows: Family::default(),
            transactions: Family::default(),
            bytes: Family::default(),
            snapshot_rows: Family::default(),
            snapshot_suppressed: Family::default(),
            snapshot_read_ahead: Family::default(),
            lag: Family::default(),
            source_connected: Family::default(),
            source_reconnects: Family::default(),
            raft_term: Gauge::default(),
            raft_leader: Gauge::default(),
            raft_last_applied: Gauge::default(),
            raft_is_leader: Gauge::default(),
            lease_valid: Gauge::default(),
        };
        m.build_info.get_or_create(&labels::build_labels()).set(1);
        m.register_all()
    }

    // Names are given without the `_total` of a counter (the encoder appends it) and, with
    // `register_with_unit`, without the unit (the encoder appends `_seconds`, `_bytes`).
    fn register_all(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "build_info",
            "the build answering: always 1, with its version (and commit, when built with one) \
             as labels",
            self.build_info.clone(),
        );
        r.register(
            "pipelines",
            "pipelines by reported runner state",
            self.pipelines.clone(),
        );
        r.register(
            "pipelines_desired",
            "pipelines by desired state",
            self.desired.clone(),
        );
        r.register(
            "pipeline_epoch",
            "ownership epoch (fencing token)",
            self.epoch.clone(),
        );
        r.register(
            "pipeline_config_generation",
            "definition generation (grows with every config update)",
            self.generation.clone(),
        );
        r.register(
            "pipeline_checkpoint_present",
            "1 when a processed position is committed",
            self.checkpoint_present.clone(),
        );
        r.register_with_unit(
            "pipeline_checkpoint_age",
            "seconds since this node saw the committed position change",
            Unit::Seconds,
            self.checkpoint_age.clone(),
        );
        r.register(
            "pipeline_halts",
            "incarnations that ended failed (fail-closed halts), by reason code",
            self.halts.clone(),
        );
        r.register(
            "pipeline_retries",
            "runs of this node that ended on a transient fault (retried after a backoff), by \
             reason code",
            self.retries.clone(),
        );
        r.register("pipeline_rows", "row changes published", self.rows.clone());
        r.register(
            "pipeline_transactions",
            "source transactions published",
            self.transactions.clone(),
        );
        // capstan_pipeline_bytes_total
        r.register_with_unit(
            "pipeline",
            "bytes of change events published",
            Unit::Bytes,
            self.bytes.clone(),
        );
        r.register(
            "pipeline_snapshot_rows",
            "rows read by the snapshot, initial or ad hoc",
            self.snapshot_rows.clone(),
        );
        r.register(
            "pipeline_snapshot_suppressed",
            "streamed row changes the snapshot's cursor gate suppressed",
            self.snapshot_suppressed.clone(),
        );
        r.register(
            "pipeline_snapshot_read_ahead",
            "snapshot chunks read ahead while the one before was published, by outcome: used, \
             stale (the stream had passed their position; read again), wasted",
            self.snapshot_read_ahead.clone(),
        );
        r.register_with_unit(
            "pipeline_lag",
            "source commit to kafka acknowledgement, last transaction",
            Unit::Seconds,
            self.lag.clone(),
        );
        r.register(
            "source_connected",
            "1 while the runner on this node has its binlog stream open",
            self.source_connected.clone(),
        );
        r.register(
            "source_reconnects",
            "binlog streams that dropped and were redialled by the source (once per drop)",
            self.source_reconnects.clone(),
        );
        r.register("raft_term", "current raft term", self.raft_term.clone());
        r.register(
            "raft_leader",
            "the raft leader's node id (0: none known)",
            self.raft_leader.clone(),
        );
        r.register(
            "raft_last_applied_index",
            "index of the last applied raft log entry",
            self.raft_last_applied.clone(),
        );
        r.register(
            "raft_is_leader",
            "1 on the raft leader",
            self.raft_is_leader.clone(),
        );
        r.register(
            "node_lease_valid",
            "1 while this node holds its owner lease",
            self.lease_valid.clone(),
        );
        self
    }

    /// Notes that `label`'s pipeline has a series under its reason.
    fn remember_reason(&self, label: &ReasonLabel) {
        self.reasons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(label.pipeline.clone())
            .or_default()
            .insert(label.reason.clone());
    }

    /// Removes every series labelled with `pipeline` (e.g. after it was deleted).
    pub fn remove_pipeline(&self, pipeline: &str) {
        let label = PipelineLabel::new(pipeline);
        for f in [
            &self.epoch,
            &self.generation,
            &self.checkpoint_present,
            &self.source_connected,
        ] {
            f.remove(&label);
        }
        for f in [&self.checkpoint_age, &self.lag] {
            f.remove(&label);
        }
        for outcome in READ_AHEAD_OUTCOMES {
            self.snapshot_read_ahead.remove(&ReadAheadLabel {
                pipeline: pipeline.to_string(),
                outcome,
            });
        }
        for f in [
            &self.rows,
            &self.transactions,
            &self.bytes,
            &self.snapshot_rows,
            &self.snapshot_suppressed,
            &self.source_reconnects,
        ] {
            f.remove(&label);
        }
        let reasons = self
            .reasons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(pipeline)
            .unwrap_or_default();
        for reason in reasons {
            let label = ReasonLabel {
                pipeline: pipeline.to_string(),
                reason,
            };
            self.halts.remove(&label);
            self.retries.remove(&label);
        }
        self.run_totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(pipeline);
    }

    /// The OpenMetrics text of every series.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
