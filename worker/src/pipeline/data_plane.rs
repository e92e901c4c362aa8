//! The pipelines' own runtime. Runners (binlog reads, decoding, encoding, publishing, snapshot
//! reads) run on threads apart from the control plane's (Raft, lease renewals, the scheduler,
//! the REST API), at a lower scheduling priority (`pipeline_nice`). A pipeline that decodes a
//! two-million-row transaction on every core therefore cannot hold a heartbeat or a lease
//! renewal back: before this split, such a run starved the runtime they shared, Raft messages
//! timed out, and the busy owner's own lease lapsed every few seconds (ADR-0004).
//!
//! Wiring only: the one decision, which crate priority gives the wanted nice value, is
//! [`priority_for_nice`], a pure function.

use thread_priority::{
    NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
};
use tokio::runtime::{Handle, Runtime};
use tracing::warn;

/// The runtime the pipeline runners are spawned on. Dropping it shuts it down without waiting
/// (allowed inside the control plane's runtime); stop the runners first.
#[derive(Debug)]
pub struct DataPlane {
    /// Taken only by `drop`.
    runtime: Option<Runtime>,
    handle: Handle,
}

impl DataPlane {
    /// A multi-threaded runtime with a worker thread per core, its threads (blocking pool
    /// included) at nice `nice` (0: unchanged). A platform that refuses the priority is logged
    /// once per thread and the thread runs on unchanged.
    pub fn start(nice: u8) -> std::io::Result<DataPlane> {
        let priority = priority_for_nice(nice);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("capstan-pipeline")
            .on_thread_start(move || {
                if let Some(p) = priority {
                    if let Err(e) = thread_priority::set_current_thread_priority(p) {
                        warn!(nice, error = %e, "cannot lower the priority of a pipeline thread");
                    }
                }
            })
            .build()?;
        Ok(DataPlane {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    /// Where runners are spawned.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }
}

impl Drop for DataPlane {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The normal-policy priority whose nice value is `nice`; `None` for 0 (leave threads as they
/// are) or a value no priority maps to.
fn priority_for_nice(nice: u8) -> Option<ThreadPriority> {
    if nice == 0 {
        return None;
    }
    let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
    (0..=u8::MAX)
        .filter_map(|v| ThreadPriorityValue::try_from(v).ok())
        .map(ThreadPriority::Crossplatform)
        .find(|p| p.to_posix(policy).ok() == Some(i32::from(nice)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nice_of(p: ThreadPriority) -> i32 {
        p.to_posix(ThreadSchedulePolicy::Normal(
            NormalThreadSchedulePolicy::Other,
        ))
        .unwrap()
    }

    #[test]
    fn every_allowed_nice_value_maps_to_a_priority_of_that_nice_value() {
        assert_eq!(priority_for_nice(0), None);
        for nice in 1..=19u8 {
            assert_eq!(priority_for_nice(nice).map(nice_of), Some(i32::from(nice)));
        }
    }
}
