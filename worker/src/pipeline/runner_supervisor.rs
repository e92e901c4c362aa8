//! Keeps this node's pipeline runners in line with the replicated state: one runner per
//! pipeline this node owns (at the current epoch and config generation) while the desired
//! state is `running` and the node holds its lease; none otherwise. Re-evaluated every
//! [`EVERY`], so pause, resume, stop and moves take effect within a second. The decisions
//! are [`Supervision`]'s (pure, with scenario tests); this loop carries them out.
//!
//! A runner that halted stays halted: fail-closed. The halt is kept in Raft
//! (`PipelineRecord::halt`), so it holds on whichever node owns the pipeline after a move or
//! a worker restart, until a restart or a config change (or an offsets reset) clears it. A runner that ended
//! on a transient fault ([`RunnerExit::Retry`]) is started again from the checkpoint after a
//! capped exponential backoff (`RetrySchedule`); meanwhile its status says `retrying`.
//!
//! A pipeline an operator is moving (`PipelineRecord::move_to`) is not wanted here: its
//! runner is stopped, and once it has really ended the pipeline is released
//! (`move_release::releases`) for the scheduler to assign to its new owner.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_raft_store::Command;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::engine::runner_exit::RunnerExit;
use super::engine::supervision::{RunnerSeen, Supervision, SupervisorCommand};
use super::pipeline_runner::PipelineRunner;
use crate::metrics::Metrics;
use crate::node::Node;

/// How often the supervisor re-evaluates.
const EVERY: Duration = Duration::from_millis(200);

/// A runner task of this node.
#[derive(Debug)]
struct Running {
    seen: RunnerSeen,
    started: Instant,
    stop: watch::Sender<bool>,
    handle: JoinHandle<RunnerExit>,
}

/// Runs until `stop` turns true or the node stops, then stops every runner (each settles
/// its batch in flight and commits its checkpoint) and waits for them. Every decision is
/// [`Supervision`]'s; this loop reaps ended runners, asks it, and carries out its commands.
pub async fn supervise(
    node: Arc<Node>,
    metrics: Arc<Metrics>,
    pipelines: Handle,
    stop: watch::Receiver<bool>,
) {
    let mut runners: HashMap<String, Running> = HashMap::new();
    let mut supervision = Supervision::default();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !node.is_stopping() && !*stop.borrow() {
        tick.tick().await;
        // a runner ends at its next await after a stop (or at its next lease check, when a
        // thread of it is held up), or by itself: its exit is taken in when it has really
        // ended, and no new runner of the pipeline starts before that
        let ended: Vec<String> = runners
            .iter()
            .filter(|(_, r)| r.handle.is_finished())
            .map(|(name, _)| name.clone())
            .collect();
        for name in ended {
            let Some(r) = runners.remove(&name) else {
                continue;
            };
            let key = r.seen.key;
            let exit = r
                .handle
                .await
                .unwrap_or_else(|_| RunnerExit::failed("runner_crashed"));
            info!(pipeline = %name, epoch = key.0, exit = ?exit, "runner ended");
            let retry = supervision.ended(&name, key, &exit, r.started.elapsed(), Instant::now());
            if let (Some((attempt, delay)), RunnerExit::Retry { code, .. }) = (retry, &exit) {
                info!(
                    pipeline = %name,
                    epoch = key.0,
                    code = %code,
                    attempt,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "pipeline retries after a backoff"
                );
            }
        }
        let state = node.state.snapshot();
        let seen: HashMap<String, RunnerSeen> = runners
            .iter()
            .map(|(name, r)| (name.clone(), r.seen))
            .collect();
        let commands = supervision.tick(&state, node.id, node.lease_term(), &seen, Instant::now());
        for command in commands {
            match command {
                SupervisorCommand::Stop(name) => {
                    if let Some(r) = runners.get_mut(&name) {
                        let _ = r.stop.send(true);
                        r.seen.ending = true;
                    }
                }
                SupervisorCommand::Start {
                    pipeline,
                    key,
                    term,
                    spec,
                } => {
                    info!(pipeline = %pipeline, epoch = key.0, lease_term = term, "starting runner");
                    let (stop, stop_rx) = watch::channel(false);
                    let runner = PipelineRunner::new(
                        node.clone(),
                        metrics.clone(),
                        pipeline.clone(),
                        (key.0, term),
                        *spec,
                    );
                    let handle = pipelines.spawn(runner.run(stop_rx));
                    let seen = RunnerSeen {
                        key,
                        term,
                        ending: false,
                    };
                    runners.insert(
                        pipeline,
                        Running {
                            seen,
                            started: Instant::now(),
                            stop,
                            handle,
                        },
                    );
                }
                SupervisorCommand::Release(command) => {
                    if let Command::ReleasePipeline {
                        pipeline, epoch, ..
                    } = &command
                    {
                        let to = state.pipeline(pipeline).and_then(|r| r.move_to());
                        info!(pipeline = %pipeline, epoch = *epoch, to = ?to, "releasing pipeline for a move");
                    }
                    if let Err(e) = node.write(command).await {
                        warn!(error = %e, "release not committed; retried");
                    }
                }
                SupervisorCommand::Report(command) => {
                    if let Command::ReportStatus {
                        pipeline,
                        reason: Some(reason),
                        ..
                    } = &command
                    {
                        warn!(pipeline = %pipeline, code = %reason, "pipeline not started");
                    }
                    // best effort, epoch-fenced: asked again at the next tick if lost
                    let _ = node.write(command).await;
                }
            }
        }
    }
    // stop them all at once (each settles and commits its checkpoint), then await each
    let all: Vec<_> = runners.into_values().collect();
    for r in &all {
        let _ = r.stop.send(true);
    }
    for r in all {
        let _ = tokio::time::timeout(Duration::from_secs(2), r.handle).await;
    }
}
