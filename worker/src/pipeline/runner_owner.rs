//! What only the owner of a pipeline may do, and how each act is fenced (ADR-0004): the
//! lease checked before every Raft write and every enqueued record, the epoch carried on each
//! write, a fencing answer ending the runner.

use std::sync::Arc;
use std::time::Duration;

use capstan_core::position::ResumePoint;
use capstan_kafka::publisher::Fence;
use capstan_raft_store::{Command, Response, RunnerState};
use tracing::info;

use super::engine::runner_exit::RunnerExit;
use super::pipeline_runner::{PipelineRunner, Step};
use crate::fault_point::FaultPoint;

impl PipelineRunner {
    /// This node still owns the pipeline at this runner's epoch (by the replicated state).
    pub(super) fn owns_at_epoch(&self) -> bool {
        self.node.state.read(|s| {
            s.pipeline(&self.name)
                .is_some_and(|r| r.owner() == Some(self.node.id) && r.epoch() == self.epoch)
        })
    }

    /// The at-least-once publisher's fence, asked before every record is enqueued: it holds
    /// while this node holds its lease without a break since the runner started (ADR-0004: an
    /// owner without a valid lease publishes nothing), so a batch stops mid-way when the lease
    /// runs out during it, and a frozen owner that renews on waking stays stopped.
    pub(super) fn publish_fence(&self) -> Fence {
        let node = self.node.clone();
        let term = self.lease_term;
        Arc::new(move || {
            let holds = node.holds_lease_term(term);
            if holds {
                FaultPoint::PublishLeaseChecked.hit();
            }
            holds
        })
    }

    pub(super) fn require_lease(&self) -> Step<()> {
        if self.node.holds_lease_term(self.lease_term) {
            Ok(())
        } else {
            Err(RunnerExit::Fenced {
                code: "lease_expired".into(),
            })
        }
    }

    /// Commits `point` as the pipeline's checkpoint (owner write).
    pub(super) async fn commit_checkpoint(&self, point: &ResumePoint) -> Step<()> {
        self.owner_write(Command::commit_checkpoint(&self.name, self.epoch, point))
            .await
    }

    pub(super) async fn report(&self, state: RunnerState) -> Step<()> {
        self.owner_write(Command::ReportStatus {
            pipeline: self.name.clone(),
            epoch: self.epoch,
            state,
            reason: None,
            detail: None,
        })
        .await
    }

    /// A write that only the current owner may make: lease checked first, epoch carried,
    /// fencing answers stop the runner. Retriable Raft errors (no leader for a moment) are
    /// retried while the lease lasts.
    pub(super) async fn owner_write(&self, command: Command) -> Step<()> {
        loop {
            self.require_lease()?;
            match self.node.write(command.clone()).await {
                Ok(Response::Applied) => return Ok(()),
                Ok(r) if r.is_fenced() => {
                    info!(pipeline = %self.name, epoch = self.epoch, code = r.code(), "owner fenced");
                    return Err(RunnerExit::Fenced {
                        code: r.code().to_string(),
                    });
                }
                Ok(r) => return Err(RunnerExit::failed(r.code())),
                Err(e) if e.is_retriable() => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => {
                    return Err(RunnerExit::Failed {
                        code: e.code().to_string(),
                        detail: Some(e.to_string()),
                    })
                }
            }
        }
    }
}
