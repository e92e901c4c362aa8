//! How a pipeline runner ended.

/// Why a runner stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunnerExit {
    /// Asked to stop (paused, stopped, moved, or the node is shutting down).
    Stopped,
    /// Another owner took over, or this node lost its lease: it must not write again.
    Fenced {
        /// Why (`stale_epoch`, `unowned`, `lease_expired`, …).
        code: String,
    },
    /// The pipeline halted fail-closed; it stays failed until restarted.
    Failed {
        /// The value-free reason code.
        code: String,
    },
}

impl RunnerExit {
    /// A halt with `code`.
    pub fn failed(code: &str) -> Self {
        RunnerExit::Failed {
            code: code.to_string(),
        }
    }
}
