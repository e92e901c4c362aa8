//! Keeps this node's pipeline runners in line with the replicated state: one runner per
//! pipeline this node owns (at the current epoch and config generation) while the desired
//! state is `running` and the node holds its lease; none otherwise. Re-evaluated every
//! [`EVERY`], so pause, resume, stop and moves take effect within a second.
//!
//! A runner that halted stays halted: fail-closed. The halt is kept in Raft
//! (`PipelineRecord::halt`), so it holds on whichever node owns the pipeline after a move or
//! a worker restart, until a restart or a config change (or an offsets reset) clears it. A runner that ended
//! on a transient fault ([`RunnerExit::Retry`]) is started again from the checkpoint after a
//! capped exponential backoff ([`RetrySchedule`]); meanwhile its status says `retrying`.
//!
//! A pipeline an operator is moving (`PipelineRecord::move_to`) is not wanted here: its
//! runner is stopped, and once it has really ended the pipeline is released
//! ([`move_release::releases`]) for the scheduler to assign to its new owner.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_raft_store::{Command, DesiredState, Epoch, RunnerState};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::move_release;
use super::pipeline_runner::PipelineRunner;
use super::pipeline_spec::PipelineSpec;
use super::retry_schedule::RetrySchedule;
use super::runner_exit::RunnerExit;
use crate::metrics::Metrics;
use crate::node::Node;

/// How often the supervisor re-evaluates.
const EVERY: Duration = Duration::from_millis(200);

/// (epoch, config generation): one incarnation of a pipeline on its owner.
type Incarnation = (Epoch, u64);

#[derive(Debug)]
struct Running {
    key: Incarnation,
    /// The lease term it started in: after a break in the lease it is stopped.
    term: u64,
    started: Instant,
    stop: watch::Sender<bool>,
    handle: JoinHandle<RunnerExit>,
}

/// Runs until `stop` turns true (or the node stops), then stops every runner. Runners are
/// spawned on `pipelines` (the [`super::DataPlane`]), apart from the control plane.
pub async fn supervise(
    node: Arc<Node>,
    metrics: Arc<Metrics>,
    pipelines: Handle,
    stop: watch::Receiver<bool>,
) {
    let mut runners: HashMap<String, Running> = HashMap::new();
    let mut stopping: Vec<(String, Running)> = Vec::new();
    let mut halted: HashMap<String, Incarnation> = HashMap::new();
    let mut retry: RetrySchedule<Incarnation> = RetrySchedule::default();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !node.is_stopping() && !*stop.borrow() {
        tick.tick().await;
        let term = node.lease_term();
        let lease = term.is_some();
        let state = node.state.snapshot();
        let mut wanted: HashMap<String, Incarnation> = HashMap::new();
        let mut idle: Vec<(String, Epoch, RunnerState)> = Vec::new();
        for (name, record) in state.pipelines() {
            // a pipeline being moved away runs nothing here any more, and is released below
            if record.owner() != Some(node.id) || !lease || record.move_to().is_some() {
                continue;
            }
            let key = (record.epoch(), record.generation());
            match record.desired_state() {
                // halted (kept in Raft across moves and restarts): not started again
                DesiredState::Running if record.halt().is_some() => {}
                DesiredState::Running => {
                    wanted.insert(name.clone(), key);
                }
                DesiredState::Paused | DesiredState::Stopped => {
                    let target = if record.desired_state() == DesiredState::Paused {
                        RunnerState::Paused
                    } else {
                        RunnerState::Stopped
                    };
                    let reported = record
                        .status()
                        .is_some_and(|s| s.epoch == key.0 && s.state == target);
                    if !reported {
                        idle.push((name.clone(), key.0, target));
                    }
                }
            }
        }

        // stop what is no longer wanted (moved, paused, lease lost) or changed incarnation
        let names: Vec<String> = runners.keys().cloned().collect();
        for name in names {
            let keep = runners.get(&name).is_some_and(|r| {
                wanted.get(&name) == Some(&r.key) && term == Some(r.term) && !r.handle.is_finished()
            });
            if keep {
                continue;
            }
            if let Some(r) = runners.remove(&name) {
                let _ = r.stop.send(true);
                stopping.push((name, r));
            }
        }
        // a stopped runner ends at its next await (or at its next lease check, when a thread of
        // it is held up): its exit is reported when it has really ended, and no new runner of
        // the pipeline starts before that
        let mut still = Vec::new();
        for (name, r) in stopping.drain(..) {
            if !r.handle.is_finished() {
                still.push((name, r));
                continue;
            }
            let key = r.key;
            let exit = r
                .handle
                .await
                .unwrap_or_else(|_| RunnerExit::failed("runner_crashed"));
            info!(pipeline = %name, epoch = key.0, exit = ?exit, "runner ended");
            match exit {
                RunnerExit::Failed { .. } => {
                    halted.insert(name, key);
                }
                RunnerExit::Retry { code, .. } => {
                    let (attempt, delay) =
                        retry.on_retry(&name, &key, r.started.elapsed(), Instant::now());
                    info!(
                        pipeline = %name,
                        epoch = key.0,
                        code = %code,
                        attempt,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        "pipeline retries after a backoff"
                    );
                }
                RunnerExit::Stopped | RunnerExit::Fenced { .. } => {}
            }
        }
        stopping = still;

        // give up what is being moved away once nothing of it runs here
        if lease {
            let busy =
                |name: &str| runners.contains_key(name) || stopping.iter().any(|(n, _)| n == name);
            for command in move_release::releases(&state, node.id, busy) {
                let Command::ReleasePipeline {
                    pipeline, epoch, ..
                } = &command
                else {
                    continue;
                };
                let to = state.pipeline(pipeline).and_then(|r| r.move_to());
                info!(pipeline = %pipeline, epoch = *epoch, to = ?to, "releasing pipeline for a move");
                if let Err(e) = node.write(command.clone()).await {
                    warn!(pipeline = %pipeline, error = %e, "release not committed; retried");
                }
            }
        }

        // start what is wanted and not running (unless that incarnation halted, or backs off
        // after a transient fault)
        retry.retain(|name| wanted.contains_key(name));
        for (name, key) in wanted {
            if runners.contains_key(&name)
                || stopping.iter().any(|(n, _)| *n == name)
                || halted.get(&name) == Some(&key)
                || !retry.may_start(&name, &key, Instant::now())
            {
                continue;
            }
            let spec = state
                .pipeline(&name)
                .map(|r| r.spec().to_json())
                .ok_or(())
                .and_then(|json| {
                    PipelineSpec::from_json(json)
                        .and_then(|s| s.validate())
                        .map_err(|_| ())
                });
            let Ok(spec) = spec else {
                warn!(pipeline = %name, "stored definition does not validate");
                halted.insert(name.clone(), key);
                let _ = node
                    .write(Command::ReportStatus {
                        pipeline: name,
                        epoch: key.0,
                        state: RunnerState::Failed,
                        reason: Some("invalid_pipeline".into()),
                        detail: None,
                    })
                    .await;
                continue;
            };
            let Some(term) = term else { continue };
            info!(pipeline = %name, epoch = key.0, lease_term = term, "starting runner");
            let (stop, stop_rx) = watch::channel(false);
            let runner = PipelineRunner::new(
                node.clone(),
                metrics.clone(),
                name.clone(),
                (key.0, term),
                spec,
            );
            let handle = pipelines.spawn(runner.run(stop_rx));
            runners.insert(
                name,
                Running {
                    key,
                    term,
                    started: Instant::now(),
                    stop,
                    handle,
                },
            );
        }

        // report paused / stopped for owned idle pipelines (best effort, epoch-fenced)
        for (name, epoch, state) in idle {
            if runners.contains_key(&name) || stopping.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let _ = node
                .write(Command::ReportStatus {
                    pipeline: name,
                    epoch,
                    state,
                    reason: None,
                    detail: None,
                })
                .await;
        }
    }
    // stop them all at once (each settles and commits its checkpoint), then await each
    let all: Vec<_> = runners
        .into_values()
        .chain(stopping.into_iter().map(|(_, r)| r))
        .collect();
    for r in &all {
        let _ = r.stop.send(true);
    }
    for r in all {
        let _ = tokio::time::timeout(Duration::from_secs(2), r.handle).await;
    }
}
