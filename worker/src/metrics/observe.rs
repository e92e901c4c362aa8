//! The derived series: [`Metrics::observe`] reads them off the applied state and this node's
//! Raft view, so every node can answer them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::PoisonError;
use std::time::Instant;

use capstan_raft_store::{ClusterState, Epoch, RunnerState};

use super::labels::{DesiredLabel, PipelineLabel, ReasonLabel, StateLabel, DESIRED, STATES};
use super::{gauge_value, Metrics};

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
pub(super) struct Seen {
    /// Per pipeline: the checkpoint text and when this node first saw it.
    checkpoints: HashMap<String, (String, Instant)>,
    /// Per pipeline: the last epoch whose failure was counted as a halt.
    halted: HashMap<String, Epoch>,
    /// Pipelines that have series.
    labelled: HashSet<String>,
}

impl Metrics {
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
            let label = PipelineLabel::new(name);
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
                    let code = status.reason.as_deref().unwrap_or("");
                    let label = ReasonLabel::new(name, code);
                    self.remember_reason(&label);
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
}
