//! [`Supervision`]: what a worker's supervisor decides at each tick — pure (the applied
//! state, the node's lease term, its runners and the clock are passed in; the answer is a
//! list of [`SupervisorCommand`]s the supervisor carries out).
//!
//! The rules:
//!
//! - One runner per pipeline this node owns at the current epoch and config generation
//!   ([`Incarnation`]) while the desired state is `running`, the node holds its lease and no
//!   move is pending; a runner of another incarnation or lease term is stopped.
//! - A runner told to stop is still *ending* until it has really ended: no new runner of its
//!   pipeline starts before, and a pipeline being moved is released only after.
//! - A halt is kept: an incarnation that ended [`RunnerExit::Failed`] (here, or in Raft as
//!   `PipelineRecord::halt`, on whichever node owned it) is not started again; a transient
//!   fault ([`RunnerExit::Retry`]) starts again after the [`RetrySchedule`]'s backoff.
//! - A stored definition that no longer validates halts `invalid_pipeline`.
//! - An owned pipeline that is paused or stopped reports so, once.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use capstan_raft_store::{ClusterState, Command, DesiredState, Epoch, NodeId, RunnerState};

use super::move_release;
use super::retry_schedule::RetrySchedule;
use super::runner_exit::RunnerExit;
use crate::pipeline::pipeline_spec::{CheckedPipelineSpec, PipelineSpec};

/// A runner's incarnation: the owner epoch and the definition's generation.
pub type Incarnation = (Epoch, u64);

/// A runner of this node that has not ended, as the supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerSeen {
    /// Its incarnation.
    pub key: Incarnation,
    /// The lease term it acts within.
    pub term: u64,
    /// It was told to stop and is ending.
    pub ending: bool,
}

/// What the supervisor is to do.
#[derive(Debug, Clone)]
pub enum SupervisorCommand {
    /// Tell the runner of this pipeline to stop; it is ending from now on.
    Stop(String),
    /// Start a runner for this pipeline, incarnation and lease term.
    Start {
        pipeline: String,
        key: Incarnation,
        term: u64,
        spec: Box<CheckedPipelineSpec>,
    },
    /// Propose this release of a pipeline being moved (nothing of it runs here any more).
    Release(Command),
    /// Report this status of a pipeline without a runner (paused, stopped, or a definition
    /// that no longer validates), epoch-fenced.
    Report(Command),
}

/// Two starts are the same when they start the same pipeline, incarnation and lease term:
/// the definition is the one stored for that incarnation (its generation).
impl PartialEq for SupervisorCommand {
    fn eq(&self, other: &Self) -> bool {
        use SupervisorCommand::{Release, Report, Start, Stop};
        match (self, other) {
            (Stop(a), Stop(b)) => a == b,
            (
                Start {
                    pipeline: a,
                    key: ka,
                    term: ta,
                    ..
                },
                Start {
                    pipeline: b,
                    key: kb,
                    term: tb,
                    ..
                },
            ) => (a, ka, ta) == (b, kb, tb),
            (Release(a), Release(b)) | (Report(a), Report(b)) => a == b,
            _ => false,
        }
    }
}

/// The supervisor's memory between ticks: incarnations halted here, and the backoff of
/// those that ended on a transient fault.
#[derive(Debug, Default)]
pub struct Supervision {
    halted: HashMap<String, Incarnation>,
    retry: RetrySchedule<Incarnation>,
}

impl Supervision {
    /// One tick: what to stop, release, start and report, given the applied `state`, this
    /// node `me` and its lease `term` (`None`: no lease), its `runners` that have not ended,
    /// at `now`.
    pub fn tick(
        &mut self,
        state: &ClusterState,
        me: NodeId,
        term: Option<u64>,
        runners: &HashMap<String, RunnerSeen>,
        now: Instant,
    ) -> Vec<SupervisorCommand> {
        let mut wanted: HashMap<&str, Incarnation> = HashMap::new();
        let mut idle: Vec<(&str, Epoch, RunnerState)> = Vec::new();
        for (name, record) in state.pipelines() {
            // a pipeline being moved away runs nothing here any more, and is released below
            if record.owner() != Some(me) || term.is_none() || record.move_to().is_some() {
                continue;
            }
            let key = (record.epoch(), record.generation());
            match record.desired_state() {
                // halted (kept in Raft across moves and restarts): not started again
                DesiredState::Running if record.halt().is_some() => {}
                DesiredState::Running => {
                    wanted.insert(name, key);
                }
                desired @ (DesiredState::Paused | DesiredState::Stopped) => {
                    let target = if desired == DesiredState::Paused {
                        RunnerState::Paused
                    } else {
                        RunnerState::Stopped
                    };
                    let reported = record
                        .status()
                        .is_some_and(|s| s.epoch == key.0 && s.state == target);
                    if !reported {
                        idle.push((name, key.0, target));
                    }
                }
            }
        }
        let mut commands = Vec::new();
        // stop what is no longer wanted (moved, paused, lease lost) or changed incarnation
        let mut busy: HashSet<&str> = HashSet::new();
        let mut names: Vec<&String> = runners.keys().collect();
        names.sort();
        for name in names {
            let r = &runners[name];
            busy.insert(name);
            let keep = wanted.get(name.as_str()) == Some(&r.key) && term == Some(r.term);
            if !keep && !r.ending {
                commands.push(SupervisorCommand::Stop(name.clone()));
            }
        }
        // give up what is being moved away once nothing of it runs here
        if term.is_some() {
            for command in move_release::releases(state, me, |name| busy.contains(name)) {
                commands.push(SupervisorCommand::Release(command));
            }
        }
        // start what is wanted and not running (unless that incarnation halted, or backs off
        // after a transient fault)
        self.retry.retain(|name| wanted.contains_key(name));
        let mut starts: Vec<(&str, Incarnation)> = wanted.into_iter().collect();
        starts.sort();
        for (name, key) in starts {
            let Some(term) = term else { break };
            if busy.contains(name)
                || self.halted.get(name) == Some(&key)
                || !self.retry.may_start(name, &key, now)
            {
                continue;
            }
            let spec = state
                .pipeline(name)
                .map(|r| r.spec().to_json())
                .ok_or(())
                .and_then(|json| {
                    PipelineSpec::from_json(json)
                        .and_then(|s| s.validate())
                        .map_err(|_| ())
                });
            match spec {
                Ok(spec) => commands.push(SupervisorCommand::Start {
                    pipeline: name.to_string(),
                    key,
                    term,
                    spec: Box::new(spec),
                }),
                Err(()) => {
                    self.halted.insert(name.to_string(), key);
                    commands.push(SupervisorCommand::Report(Command::ReportStatus {
                        pipeline: name.to_string(),
                        epoch: key.0,
                        state: RunnerState::Failed,
                        reason: Some("invalid_pipeline".into()),
                        detail: None,
                    }));
                }
            }
        }
        // report paused / stopped for owned idle pipelines (best effort, epoch-fenced)
        idle.sort_by(|a, b| a.0.cmp(b.0));
        for (name, epoch, state) in idle {
            if busy.contains(name) {
                continue;
            }
            commands.push(SupervisorCommand::Report(Command::ReportStatus {
                pipeline: name.to_string(),
                epoch,
                state,
                reason: None,
                detail: None,
            }));
        }
        commands
    }

    /// The runner of `name` at `key` ended with `exit` after running `ran_for`: a halt is
    /// kept for that incarnation; a transient fault backs off. Returns the retry's attempt
    /// and delay.
    pub fn ended(
        &mut self,
        name: &str,
        key: Incarnation,
        exit: &RunnerExit,
        ran_for: Duration,
        now: Instant,
    ) -> Option<(u32, Duration)> {
        match exit {
            RunnerExit::Failed { .. } => {
                self.halted.insert(name.to_string(), key);
                None
            }
            RunnerExit::Retry { .. } => Some(self.retry.on_retry(name, &key, ran_for, now)),
            RunnerExit::Stopped | RunnerExit::Fenced { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_cluster::{assign, cluster};
    use super::*;
    use capstan_raft_store::SpecJson;
    use serde_json::json;

    const ME: NodeId = 1;
    const TERM: Option<u64> = Some(7);

    fn spec(name: &str) -> SpecJson {
        SpecJson::new(json!({
            "name": name,
            "source": {
                "host": "db.internal", "port": 3306, "user": "capstan", "password": "pw",
                "tls": {"mode": "verify_none"}, "server_id": 1001, "flavor": "mysql"
            },
            "tables": {"include": ["shop.orders"]},
            "kafka": {"bootstrap_servers": "k1:9092", "topic_prefix": "shop"}
        }))
    }

    /// `a` (running) and `b` (paused) owned by node 1, `c` (running) by node 2.
    fn state() -> ClusterState {
        cluster(
            &[
                ("a", DesiredState::Running, 1),
                ("b", DesiredState::Paused, 1),
                ("c", DesiredState::Running, 2),
            ],
            spec,
        )
    }

    fn key(s: &ClusterState, name: &str) -> Incarnation {
        let r = s.pipeline(name).unwrap();
        (r.epoch(), r.generation())
    }

    fn started(commands: &[SupervisorCommand]) -> Vec<(String, Incarnation, u64)> {
        commands
            .iter()
            .filter_map(|c| match c {
                SupervisorCommand::Start {
                    pipeline,
                    key,
                    term,
                    spec,
                } => {
                    assert_eq!(&spec.name, pipeline);
                    Some((pipeline.clone(), *key, *term))
                }
                _ => None,
            })
            .collect()
    }

    fn report(name: &str, epoch: Epoch, state: RunnerState) -> SupervisorCommand {
        SupervisorCommand::Report(Command::ReportStatus {
            pipeline: name.into(),
            epoch,
            state,
            reason: None,
            detail: None,
        })
    }

    fn running(key: Incarnation, term: u64) -> RunnerSeen {
        RunnerSeen {
            key,
            term,
            ending: false,
        }
    }

    #[test]
    fn one_runner_per_owned_running_pipeline_and_a_report_for_the_paused_one() {
        let s = state();
        let mut sup = Supervision::default();
        let now = Instant::now();
        let commands = sup.tick(&s, ME, TERM, &HashMap::new(), now);
        assert_eq!(started(&commands), vec![("a".into(), key(&s, "a"), 7)]);
        assert_eq!(commands.len(), 2);
        assert_eq!(
            commands[1],
            report("b", key(&s, "b").0, RunnerState::Paused)
        );
        // the runner runs: nothing more to do; node 2 starts its own
        let runners = HashMap::from([("a".to_string(), running(key(&s, "a"), 7))]);
        assert_eq!(
            sup.tick(&s, ME, TERM, &runners, now),
            vec![report("b", key(&s, "b").0, RunnerState::Paused)]
        );
        assert_eq!(
            started(&Supervision::default().tick(&s, 2, Some(1), &HashMap::new(), now)),
            vec![("c".into(), key(&s, "c"), 1)]
        );
    }

    #[test]
    fn a_paused_pipeline_is_reported_once() {
        let mut s = state();
        let epoch = key(&s, "b").0;
        let r = s.apply(Command::ReportStatus {
            pipeline: "b".into(),
            epoch,
            state: RunnerState::Paused,
            reason: None,
            detail: None,
        });
        assert!(r.is_applied());
        let commands = Supervision::default().tick(&s, ME, TERM, &HashMap::new(), Instant::now());
        assert!(!commands.contains(&report("b", epoch, RunnerState::Paused)));
    }

    #[test]
    fn without_a_lease_or_in_another_term_the_runner_is_stopped_and_started_after_it_ended() {
        let s = state();
        let mut sup = Supervision::default();
        let now = Instant::now();
        let mut runners = HashMap::from([("a".to_string(), running(key(&s, "a"), 7))]);
        // the lease lapsed: stopped, nothing started or reported
        assert_eq!(
            sup.tick(&s, ME, None, &runners, now),
            vec![SupervisorCommand::Stop("a".into())]
        );
        // renewed in a new term: the runner of the old term is stopped, not yet replaced
        assert_eq!(
            sup.tick(&s, ME, Some(8), &runners, now),
            vec![
                SupervisorCommand::Stop("a".into()),
                report("b", key(&s, "b").0, RunnerState::Paused)
            ]
        );
        // still ending: not told again, not replaced
        runners.get_mut("a").unwrap().ending = true;
        assert_eq!(started(&sup.tick(&s, ME, Some(8), &runners, now)), vec![]);
        assert!(!sup
            .tick(&s, ME, Some(8), &runners, now)
            .contains(&SupervisorCommand::Stop("a".into())));
        // it has ended (fenced by its lease): the new term starts one at once
        assert_eq!(
            sup.ended(
                "a",
                key(&s, "a"),
                &RunnerExit::Fenced {
                    code: "lease_expired".into()
                },
                Duration::from_secs(3),
                now
            ),
            None
        );
        assert_eq!(
            started(&sup.tick(&s, ME, Some(8), &HashMap::new(), now)),
            vec![("a".into(), key(&s, "a"), 8)]
        );
    }

    #[test]
    fn a_new_owner_epoch_replaces_the_runner_of_the_old_one() {
        let mut s = state();
        let old = key(&s, "a");
        assign(&mut s, "a", ME);
        let new = key(&s, "a");
        assert_ne!(old, new);
        let mut sup = Supervision::default();
        let runners = HashMap::from([("a".to_string(), running(old, 7))]);
        let commands = sup.tick(&s, ME, TERM, &runners, Instant::now());
        assert_eq!(commands[0], SupervisorCommand::Stop("a".into()));
        assert_eq!(started(&commands), vec![]);
        assert_eq!(
            started(&sup.tick(&s, ME, TERM, &HashMap::new(), Instant::now())),
            vec![("a".into(), new, 7)]
        );
    }

    #[test]
    fn a_halt_is_kept_for_its_incarnation_and_a_config_change_clears_it() {
        let mut s = state();
        let mut sup = Supervision::default();
        let now = Instant::now();
        let halt = RunnerExit::failed("kafka_delivery_failed");
        assert_eq!(
            sup.ended("a", key(&s, "a"), &halt, Duration::ZERO, now),
            None
        );
        // not started again here, though Raft has not applied the halt (its report was lost)
        assert_eq!(
            started(&sup.tick(&s, ME, TERM, &HashMap::new(), now)),
            vec![]
        );
        // a config change is a new incarnation
        let r = s.apply(Command::UpdatePipelineConfig {
            name: "a".into(),
            spec: spec("a"),
        });
        assert!(r.is_applied());
        assert_eq!(
            started(&sup.tick(&s, ME, TERM, &HashMap::new(), now)),
            vec![("a".into(), key(&s, "a"), 7)]
        );
    }

    #[test]
    fn a_halt_kept_in_raft_holds_on_any_node() {
        let mut s = state();
        let epoch = key(&s, "a").0;
        let r = s.apply(Command::ReportStatus {
            pipeline: "a".into(),
            epoch,
            state: RunnerState::Failed,
            reason: Some("data_gap".into()),
            detail: None,
        });
        assert!(r.is_applied());
        // this node never saw it halt (a restart, or it moved here)
        let commands = Supervision::default().tick(&s, ME, TERM, &HashMap::new(), Instant::now());
        assert_eq!(started(&commands), vec![]);
    }

    #[test]
    fn a_transient_fault_starts_again_after_its_backoff() {
        let s = state();
        let mut sup = Supervision::default();
        let t0 = Instant::now();
        let retry = RunnerExit::Retry {
            code: "kafka_delivery_failed".into(),
            detail: "kafka delivery failed: MsgTimedOut".into(),
        };
        let k = key(&s, "a");
        assert_eq!(
            sup.ended("a", k, &retry, Duration::from_secs(2), t0),
            Some((1, Duration::from_secs(1)))
        );
        assert_eq!(
            started(&sup.tick(&s, ME, TERM, &HashMap::new(), t0)),
            vec![]
        );
        assert_eq!(
            started(&sup.tick(&s, ME, TERM, &HashMap::new(), t0 + Duration::from_secs(1))),
            vec![("a".into(), k, 7)]
        );
        // failing again at once: twice as long
        assert_eq!(
            sup.ended("a", k, &retry, Duration::from_secs(2), t0),
            Some((2, Duration::from_secs(2)))
        );
    }

    #[test]
    fn a_definition_that_no_longer_validates_halts_once() {
        let mut s = state();
        let r = s.apply(Command::UpdatePipelineConfig {
            name: "a".into(),
            spec: SpecJson::new(json!({"name": "a"})),
        });
        assert!(r.is_applied());
        let mut sup = Supervision::default();
        let now = Instant::now();
        let invalid = SupervisorCommand::Report(Command::ReportStatus {
            pipeline: "a".into(),
            epoch: key(&s, "a").0,
            state: RunnerState::Failed,
            reason: Some("invalid_pipeline".into()),
            detail: None,
        });
        let commands = sup.tick(&s, ME, TERM, &HashMap::new(), now);
        assert_eq!(started(&commands), vec![]);
        assert!(commands.contains(&invalid));
        assert!(!sup
            .tick(&s, ME, TERM, &HashMap::new(), now)
            .contains(&invalid));
    }

    #[test]
    fn a_moved_pipeline_is_released_only_once_its_runner_hfenced_if_deposed() {
        let mut s = state();
        let r = s.apply(Command::MovePipeline {
            pipeline: "a".into(),
            to: 3,
        });
        assert!(r.is_applied(), "{r:?}");
        let mut sup = Supervision::default();
        let now = Instant::now();
        let mut runners = HashMap::from([("a".to_string(), running(key(&s, "a"), 7))]);
        // running: told to stop, not released
        assert_eq!(
            sup.tick(&s, ME, TERM, &runners, now)[0],
            SupervisorCommand::Stop("a".into())
        );
        runners.get_mut("a").unwrap().ending = true;
        let commands = sup.tick(&s, ME, TERM, &runners, now);
        assert!(commands.iter().all(|c| !matches!(
            c,
            SupervisorCommand::Release(_) | SupervisorCommand::Start { .. }
        )));
        // ended: released, never started here again
        let commands = sup.tick(&s, ME, TERM, &HashMap::new(), now);
        assert_eq!(
            commands[0],
            SupervisorCommand::Release(Command::ReleasePipeline {
                pipeline: "a".into(),
                node: ME,
                epoch: key(&s, "a").0
            })
        );
        assert_eq!(started(&commands), vec![]);
        // without a lease nothing is proposed
        assert_eq!(sup.tick(&s, ME, None, &HashMap::new(), now), vec![]);
    }
}
