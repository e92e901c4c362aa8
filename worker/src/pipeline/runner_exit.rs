//! How a pipeline runner ended.

use capstan_connectors::mysql::SourceError;
use capstan_kafka::{Consequence, SinkError};

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
}

#[cfg(test)]
mod tests {
    use super::*;

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
