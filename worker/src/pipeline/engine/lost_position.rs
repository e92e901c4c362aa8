//! What a runner does when the stream finds the binlog it needs purged (`data_gap`).
//!
//! A lost position loses the changes of every captured table in the gap, not only those of
//! the tables still being snapshotted, so no table can be re-snapshotted alone: a table that
//! was complete would stay silently stale. With `snapshot.mode: when_needed` the runner
//! therefore does not halt: it marks the incomplete tables `needs_resnapshot` and exits to be
//! started again after the supervisor's backoff, and that start finds the checkpoint no longer
//! on the server and snapshots again from a new floor (`snapshot_prepare`). In the other modes
//! it halts as before: `snapshot_data_gap` (tables marked) while a snapshot runs, else the
//! source's `data_gap`.

use super::runner_exit::RunnerExit;
use crate::pipeline::pipeline_spec::SnapshotMode;

/// The runner's answer to a `data_gap` from the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostPosition {
    /// Mark the incomplete snapshot tables `needs_resnapshot` first.
    pub mark_tables: bool,
    /// How the runner ends.
    pub exit: RunnerExit,
}

impl LostPosition {
    /// The answer for a pipeline in snapshot `mode` (`None`: no snapshot block), with a
    /// snapshot running or not. `detail` is the source error's value-free text.
    pub fn decide(mode: Option<SnapshotMode>, snapshot_running: bool, detail: &str) -> Self {
        match mode {
            Some(SnapshotMode::WhenNeeded) => LostPosition {
                mark_tables: snapshot_running,
                exit: RunnerExit::Retry {
                    code: "snapshot_resnapshot_due".to_string(),
                    detail: format!(
                        "the stream's position was purged; snapshotting again: {detail}"
                    ),
                },
            },
            _ if snapshot_running => LostPosition {
                mark_tables: true,
                exit: RunnerExit::failed("snapshot_data_gap"),
            },
            _ => LostPosition {
                mark_tables: false,
                exit: RunnerExit::Failed {
                    code: "data_gap".to_string(),
                    detail: Some(detail.to_string()),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_needed_snapshots_again_instead_of_halting() {
        for running in [true, false] {
            assert_eq!(
                LostPosition::decide(Some(SnapshotMode::WhenNeeded), running, "source: gap"),
                LostPosition {
                    mark_tables: running,
                    exit: RunnerExit::Retry {
                        code: "snapshot_resnapshot_due".into(),
                        detail: "the stream's position was purged; snapshotting again: \
                                 source: gap"
                            .into(),
                    },
                }
            );
        }
    }

    #[test]
    fn other_modes_halt_marking_a_running_snapshot() {
        assert_eq!(
            LostPosition::decide(Some(SnapshotMode::Initial), true, "source: gap"),
            LostPosition {
                mark_tables: true,
                exit: RunnerExit::failed("snapshot_data_gap"),
            }
        );
        for mode in [None, Some(SnapshotMode::Initial), Some(SnapshotMode::Never)] {
            assert_eq!(
                LostPosition::decide(mode, false, "source: gap"),
                LostPosition {
                    mark_tables: false,
                    exit: RunnerExit::Failed {
                        code: "data_gap".into(),
                        detail: Some("source: gap".into()),
                    },
                }
            );
        }
    }
}
