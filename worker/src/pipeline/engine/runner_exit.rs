//! How a pipeline runner ended.

use capstan_connectors::mysql::SourceError;
use capstan_kafka::{Consequence, SinkError};
use capstan_raft_store::RunnerState;

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
        /// What a user needs beside the code, value-free (Kafka error name, table, sizes).
        detail: Option<String>,
    },
    /// A transient fault (a broker or server unreachable, a timeout): the supervisor starts
    /// the pipeline again from its checkpoint after a backoff.
    Retry {
        /// The value-free reason code.
        code: String,
        /// The value-free detail (`kafka delivery failed: MsgTimedOut`, …).
        detail: String,
    },
}

impl RunnerExit {
    /// A halt with `code` and no further detail.
    pub fn failed(code: &str) -> Self {
        RunnerExit::Failed {
            code: code.to_string(),
            detail: None,
        }
    }

    /// What a sink error means for the runner: fenced, a retry, or a halt with its detail.
    /// A sink error's text is value-free by construction (codes, names, sizes).
    pub fn from_sink(e: &SinkError) -> Self {
        let (code, detail) = (e.code().to_string(), e.to_string());
        match e.consequence() {
            Consequence::Fenced => RunnerExit::Fenced { code },
            Consequence::Retry => RunnerExit::Retry { code, detail },
            Consequence::Halt | Consequence::Refuse => RunnerExit::Failed {
                code,
                detail: Some(detail),
            },
        }
    }

    /// What a source error means for the runner: a transient one (the server unreachable
    /// past the reconnect budget, restarting, closing the stream) is retried, the rest halt.
    pub fn from_source(e: &SourceError) -> Self {
        let (code, detail) = (e.code().to_string(), format!("source: {e}"));
        if e.retry_later() {
            RunnerExit::Retry { code, detail }
        } else {
            RunnerExit::Failed {
                code,
                detail: Some(detail),
            }
        }
    }

    /// The exit once the runner has ended, by whether this node still holds the lease term
    /// the runner started in (`holds_lease`) and still owns the pipeline at the runner's epoch
    /// (`owns`). A runner that lost its ownership while it ran (frozen, cut off) is fenced,
    /// whatever error it then met: a deposed owner neither halts nor retries the pipeline;
    /// one stopped because its lease broke (the supervisor stops such runners) is fenced too.
    pub fn fenced_if_deposed(self, holds_lease: bool, owns: bool) -> Self {
        match self {
            RunnerExit::Failed { .. } | RunnerExit::Retry { .. } if !(holds_lease && owns) => {
                let code = if holds_lease {
                    "stale_epoch"
                } else {
                    "lease_expired"
                };
                RunnerExit::Fenced { code: code.into() }
            }
            RunnerExit::Stopped if !holds_lease => RunnerExit::Fenced {
                code: "lease_expired".into(),
            },
            other => other,
        }
    }

    /// What the ended runner reports to Raft: a halt or a retry with its code and detail;
    /// nothing for a stop or a fence (a fenced runner must not write).
    pub fn report(&self) -> Option<(RunnerState, &str, Option<&str>)> {
        match self {
            RunnerExit::Failed { code, detail } => {
                Some((RunnerState::Failed, code, detail.as_deref()))
            }
            RunnerExit::Retry { code, detail } => Some((RunnerState::Retrying, code, Some(detail))),
            RunnerExit::Stopped | RunnerExit::Fenced { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deposed_runner_is_fenced_whatever_it_met_and_reports_nothing() {
        let halt = RunnerExit::Failed {
            code: "kafka_delivery_failed".into(),
            detail: Some("kafka delivery failed: MsgSizeTooLarge".into()),
        };
        let retry = RunnerExit::Retry {
            code: "source_connect_failed".into(),
            detail: "source: connection refused".into(),
        };
        let fenced = |code: &str| RunnerExit::Fenced { code: code.into() };
        for exit in [halt.clone(), retry.clone()] {
            // still the owner in its term: kept, and reported with its detail
            assert_eq!(exit.clone().fenced_if_deposed(true, true), exit);
            // lease kept, but another owner (a higher epoch) took over meanwhile
            assert_eq!(
                exit.clone().fenced_if_deposed(true, false),
                fenced("stale_epoch")
            );
            // the lease broke (a frozen or cut-off owner): fenced, owned or not
            assert_eq!(
                exit.clone().fenced_if_deposed(false, true),
                fenced("lease_expired")
            );
            assert_eq!(
                exit.clone().fenced_if_deposed(false, false),
                fenced("lease_expired")
            );
        }
        // a stop is a stop while the lease holds; without it, the stop was the fence
        assert_eq!(
            RunnerExit::Stopped.fenced_if_deposed(true, false),
            RunnerExit::Stopped
        );
        assert_eq!(
            RunnerExit::Stopped.fenced_if_deposed(false, true),
            fenced("lease_expired")
        );
        assert_eq!(
            fenced("unowned").fenced_if_deposed(true, true),
            fenced("unowned")
        );
        // what reaches Raft
        assert_eq!(
            halt.report(),
            Some((
                RunnerState::Failed,
                "kafka_delivery_failed",
                Some("kafka delivery failed: MsgSizeTooLarge")
            ))
        );
        assert_eq!(
            retry.report(),
            Some((
                RunnerState::Retrying,
                "source_connect_failed",
                Some("source: connection refused")
            ))
        );
        assert_eq!(RunnerExit::Stopped.report(), None);
        assert_eq!(fenced("stale_epoch").report(), None);
    }

    #[test]
    fn sink_errors_map_to_fenced_retry_or_halt_with_their_detail() {
        assert_eq!(
            RunnerExit::from_sink(&SinkError::ProducerFenced),
            RunnerExit::Fenced {
                code: "kafka_producer_fenced".into()
            }
        );
        let timed_out = SinkError::DeliveryFailed {
            kafka_code: "MsgTimedOut".into(),
            fatal: false,
        };
        assert_eq!(
            RunnerExit::from_sink(&timed_out),
            RunnerExit::Retry {
                code: "kafka_delivery_failed".into(),
                detail: "kafka delivery failed: MsgTimedOut".into()
            }
        );
        let fatal = SinkError::DeliveryFailed {
            kafka_code: "MsgSizeTooLarge".into(),
            fatal: true,
        };
        assert_eq!(
            RunnerExit::from_sink(&fatal),
            RunnerExit::Failed {
                code: "kafka_delivery_failed".into(),
                detail: Some("kafka delivery failed: MsgSizeTooLarge".into())
            }
        );
    }
}
