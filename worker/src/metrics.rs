//! The worker's Prometheus metrics (`GET /metrics`, OpenMetrics text via `prometheus-client`).
//!
//! Two kinds of series:
//!
//! - **derived** from the replicated state and this node's Raft view by [`Metrics::observe`]:
//!   pipelines by state and desired state, per-pipeline epoch, config generation, checkpoint
//!   presence and age, halts; Raft term, leader, last applied index. Every node can answer
//!   these. A checkpoint's age is the time since this node saw it change (so it restarts at
//!   zero when the node restarts); the worker observes once a second and on every scrape.
//! - **recorded** by the pipeline runner on the owner through the hooks
//!   ([`Metrics::record_published`], [`Metrics::set_lag_seconds`],
//!   [`Metrics::record_snapshot_rows`]): rows, transactions, bytes, lag, snapshot rows.
//!
//! Labels are pipeline names and state names only: no row values, no secrets.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use capstan_raft_store::{ClusterState, Epoch, RunnerState};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The runner states a pipeline can report, plus `unassigned` before any report.
const STATES: [&str; 8] = [
    "unassigned",
    "starting",
    "snapshotting",
    "streaming",
    "paused",
    "stopped",
    "failed",
    "retrying",
];
const DESIRED: [&str; 3] = ["running", "paused", "stopped"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PipelineLabel {
    pipeline: String,
}

/// The outcomes of a chunk read ahead, in the order of [`Metrics::set_snapshot_read_ahead`].
const READ_AHEAD_OUTCOMES: [&str; 3] = ["used", "stale", "wasted"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadAheadLabel {
    pipeline: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DesiredLabel {
    desired_state: String,
}

/// This node's view of Raft, for the raft gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaftView {
    /// The current term.
    pub term: u64,
    /// The leader's id, if known.
    pub leader: Option<u64>,
    /// The last applied log index, if any.
    pub last_applied: Option<u64>,
    /// True on the leader.
    pub is_leader: bool,
    /// True while this node holds its owner lease.
    pub lease_valid: bool,
}

/// What [`Metrics::observe`] remembers between observations.
#[derive(Debug, Default)]
struct Seen {
    /// Per pipeline: the checkpoint text and when this node first saw it.
    checkpoints: HashMap<String, (String, Instant)>,
    /// Per pipeline: the last epoch whose failure was counted as a halt.
    halted: HashMap<String, Epoch>,
    /// Pipelines that have series.
    labelled: HashSet<String>,
}

/// The metric registry with every family; share it as `Arc<Metrics>`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    seen: Mutex<Seen>,
    pipelines: Family<StateLabel, Gauge>,
    desired: Family<DesiredLabel, Gauge>,
    epoch: Family<PipelineLabel, Gauge>,
    generation: Family<PipelineLabel, Gauge>,
    checkpoint_present: Family<PipelineLabel, Gauge>,
    checkpoint_age: Family<PipelineLabel, Gauge<f64, AtomicU64>>,
    halts: Family<PipelineLabel, Counter>,
    retries: Family<PipelineLabel, Counter>,
    rows: Family<PipelineLabel, Counter>,
    transactions: Family<PipelineLabel, Counter>,
    bytes: Family<PipelineLabel, Counter>,
    snapshot_rows: Family<PipelineLabel, Counter>,
    snapshot_suppressed: Family<PipelineLabel, Gauge>,
    snapshot_read_ahead: Family<ReadAheadLabel, Gauge>,
    lag: Family<PipelineLabel, Gauge<f64, AtomicU64>>,
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
            raft_term: Gauge::default(),
            raft_leader: Gauge::default(),
            raft_last_applied: Gauge::default(),
            raft_is_leader: Gauge::default(),
            lease_valid: Gauge::default(),
        };
        m.register_all()
    }

    fn register_all(mut self) -> Self {
        let r = &mut self.registry;
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
        r.register(
            "pipeline_checkpoint_age_seconds",
            "seconds since this node saw the committed position change",
            self.checkpoint_age.clone(),
        );
        r.register(
            "pipeline_halts",
            "incarnations that ended failed (fail-closed halts)",
            self.halts.clone(),
        );
        r.register(
            "pipeline_retries",
            "runs of this node that ended on a transient fault (retried after a backoff)",
            self.retries.clone(),
        );
        r.register("pipeline_rows", "row changes published", self.rows.clone());
        r.register(
            "pipeline_transactions",
            "source transactions published",
            self.transactions.clone(),
        );
        r.register(
            "pipeline_bytes",
            "bytes of change events published",
            self.bytes.clone(),
        );
        r.register(
            "pipeline_snapshot_rows",
            "rows read by the initial snapshot",
            self.snapshot_rows.clone(),
        );
        r.register(
            "pipeline_snapshot_suppressed",
            "streamed row changes the snapshot's cursor gate suppressed (owner, this run)",
            self.snapshot_suppressed.clone(),
        );
        r.register(
            "pipeline_snapshot_read_ahead",
            "snapshot chunks read ahead while the one before was published, by outcome: used, \
             stale (the stream had passed their position; read again), wasted (owner, this run)",
            self.snapshot_read_ahead.clone(),
        );
        r.register(
            "pipeline_lag_seconds",
            "source commit to kafka acknowledgement, last transaction",
            self.lag.clone(),
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

    /// Updates the derived series from the applied state and this node's Raft view.
    pub fn observe(&self, state: &ClusterState, raft: RaftView, now: Instant) {
        self.raft_term.set(gauge_value(raft.term));
        self.raft_leader.set(gauge_value(raft.leader.unwrap_or(0)));
        self.raft_last_applied
            .set(gauge_value(raft.last_applied.unwrap_or(0)));
        self.raft_is_leader.set(i64::from(raft.is_leader));
        self.lease_valid.set(i64::from(raft.lease_valid));

        let mut by_state: BTreeMap<&str, i64> = STATES.iter().map(|s| (*s, 0)).collect();
        let mut by_desired: BTreeMap<&str, i64> = DESIRED.iter().map(|s| (*s, 0)).collect();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, record) in state.pipelines() {
            let label = PipelineLabel {
                pipeline: name.clone(),
            };
            let reported = record.status().map_or("unassigned", |s| s.state.as_str());
            *by_state.entry(reported).or_default() += 1;
            *by_desired
                .entry(record.desired_state().as_str())
                .or_default() += 1;
            self.epoch
                .get_or_create(&label)
                .set(gauge_value(record.epoch()));
            self.generation
                .get_or_create(&label)
                .set(gauge_value(record.generation()));
            if let Some(status) = record.status() {
                let counted = seen.halted.get(name) == Some(&status.epoch);
                if status.state == RunnerState::Failed && !counted {
                    self.halts.get_or_create(&label).inc();
                    seen.halted.insert(name.clone(), status.epoch);
                }
            }
            match record.checkpoint() {
                Some(position) => {
                    let text = position.to_string();
                    let since = match seen.checkpoints.get(name) {
                        Some((old, at)) if *old == text => *at,
                        _ => {
                            seen.checkpoints.insert(name.clone(), (text, now));
                            now
                        }
                    };
                    self.checkpoint_present.get_or_create(&label).set(1);
                    let age = now.saturating_duration_since(since).as_secs_f64();
                    self.checkpoint_age.get_or_create(&label).set(age);
                }
                None => {
                    seen.checkpoints.remove(name);
                    self.checkpoint_present.get_or_create(&label).set(0);
                    self.checkpoint_age.remove(&label);
                }
            }
        }
        for (s, n) in by_state {
            self.pipelines
                .get_or_create(&StateLabel { state: s.into() })
                .set(n);
        }
        for (d, n) in by_desired {
            let label = DesiredLabel {
                desired_state: d.into(),
            };
            self.desired.get_or_create(&label).set(n);
        }
        self.forget_deleted(state, &mut seen);
    }

    /// Drops every series of pipelines that no longer exist.
    fn forget_deleted(&self, state: &ClusterState, seen: &mut Seen) {
        let gone: Vec<String> = seen
            .labelled
            .iter()
            .filter(|n| state.pipeline(n).is_none())
            .cloned()
            .collect();
        for name in gone {
            self.remove_pipeline(&name);
            seen.labelled.remove(&name);
            seen.checkpoints.remove(&name);
            seen.halted.remove(&name);
        }
        seen.labelled.extend(state.pipelines().keys().cloned());
    }

    /// Removes every series labelled with `pipeline` (e.g. after it was deleted).
    pub fn remove_pipeline(&self, pipeline: &str) {
        let label = PipelineLabel {
            pipeline: pipeline.to_string(),
        };
        for f in [
            &self.epoch,
            &self.generation,
            &self.checkpoint_present,
            &self.snapshot_suppressed,
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
            &self.halts,
            &self.retries,
            &self.rows,
            &self.transactions,
            &self.bytes,
            &self.snapshot_rows,
        ] {
            f.remove(&label);
        }
    }

    /// The runner's hook: its run ended on a transient fault.
    pub fn record_retry(&self, pipeline: &str) {
        let label = PipelineLabel {
            pipeline: pipeline.to_string(),
        };
        self.retries.get_or_create(&label).inc();
    }

    /// The runner's hook: a batch was published (acknowledged by Kafka).
    pub fn record_published(&self, pipeline: &str, rows: u64, transactions: u64, bytes: u64) {
        let label = PipelineLabel {
            pipeline: pipeline.to_string(),
        };
        self.rows.get_or_create(&label).inc_by(rows);
        self.transactions.get_or_create(&label).inc_by(transactions);
        self.bytes.get_or_create(&label).inc_by(bytes);
    }

    /// The runner's hook: the lag of the last published transaction.
    pub fn set_lag_seconds(&self, pipeline: &str, seconds: f64) {
        let label = PipelineLabel {
            pipeline: pipeline.to_string(),
        };
        self.lag.get_or_create(&label).set(seconds);
    }

    /// The last lag the runner of `pipeline` reported on this node, in milliseconds.
    pub fn lag_ms(&self, pipeline: &str) -> Option<u64> {
        let label = PipelineLabel {
            pipeline: pipeline.to_string(),
        };
        let seconds = self.lag.get(&label)?.get();
        Some((seconds.max(0.0) * 1000.0).round() as u64)
    }

    /// The snapshot's hook: streamed row changes the cursor gate suppressed so far (their
    /// rows reach the topic through a later chunk).
    pub fn set_snapshot_suppressed(&self, pipeline: &str, total: u64) {
        let label = PipelineLabel {
            pipeline: pipeline.to_string(),
        };
        let gauge = self.snapshot_suppressed.get_or_create(&label);
        gauge.set(i64::try_from(total).unwrap_or(i64::MAX));
    }

    /// The snapshot's hook: chunks read ahead so far, used, stale and wasted.
    pub fn set_snapshot_read_ahead(&self, pipeline: &str, counts: [u64; 3]) {
        for (outcome, total) in READ_AHEAD_OUTCOMES.into_iter().zip(counts) {
            let label = ReadAheadLabel {
                pipeline: pipeline.to_string(),
                outcome,
            };
            let gauge = self.snapshot_read_ahead.get_or_create(&label);
            gauge.set(i64::try_from(total).unwrap_or(i64::MAX));
        }
    }

    /// The snapshot reader's hook: rows read by the initial snapshot.
    // the runner calls this; until it is wired, only tests do
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn record_snapshot_rows(&self, pipeline: &str, rows: u64) {
        let label = PipelineLabel {
            pipeline: pipeline.to_string(),
        };
        self.snapshot_rows.get_or_create(&label).inc_by(rows);
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
