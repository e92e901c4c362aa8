//! The source's own task: it reads and decodes the binlog (and, when no snapshot gates the
//! stream, encodes the records) and hands each output to the runner's loop over a channel
//! bounded by bytes. Reading the binlog is not cancel-safe, the channel is, so the loop can
//! wake for checkpoint deadlines without tearing a frame.

use std::sync::Arc;

use capstan_connectors::mysql::{AssemblerOutput, BinlogSource, SourceError};
use capstan_core::position::Position;
use capstan_kafka::SinkError;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::engine::runner_exit::RunnerExit;
use super::engine::stream_engine::SourceEnd;
use super::pipeline_runner::{now_ms, SOURCE_BUFFER_BYTES};
use super::record_encoder::RecordEncoder;
use super::runner_deliver::Payload;
use super::sliced_transaction::NotResumable;

/// Bytes counted for an output without row changes.
const OUTPUT_OVERHEAD_BYTES: usize = 256;

/// One output as the loop receives it: the payload with the source's checkpoint and processed
/// position after it, or why the source stopped; and the budget it holds until delivered.
pub(super) type SourceItem = (
    Result<(Payload, Position, Position), ItemError>,
    OwnedSemaphorePermit,
);

/// The running source task; aborted when dropped (the runner stopped, or failed).
pub(super) struct SourceTask {
    _task: AbortOnDrop<()>,
}

impl SourceTask {
    /// Starts `source` on a task of its own; `encoder`: encode the records there too. Its
    /// outputs wait in the returned channel, at most [`SOURCE_BUFFER_BYTES`] of them: each
    /// holds permits for its size (capped at the whole budget) until delivered.
    pub(super) fn spawn(
        mut source: BinlogSource,
        mut source_encoder: Option<RecordEncoder>,
    ) -> (SourceTask, mpsc::Receiver<SourceItem>) {
        let budget = Arc::new(Semaphore::new(SOURCE_BUFFER_BYTES));
        let (tx, rx) = mpsc::channel(4096);
        let task = AbortOnDrop(tokio::spawn(async move {
            loop {
                let item = match source.next().await {
                    Ok(output) => {
                        let payload = match source_encoder.as_mut() {
                            Some(encoder) => encode(encoder, output),
                            None => Ok(Payload::Output(output)),
                        };
                        payload.map(|p| (p, source.position().clone(), source.processed().clone()))
                    }
                    Err(e) => Err(ItemError::Source(e)),
                };
                let end = item.is_err();
                let bytes = item.as_ref().map_or(0, |(p, _, _)| payload_bytes(p));
                let want = u32::try_from(bytes.min(SOURCE_BUFFER_BYTES)).unwrap_or(u32::MAX);
                let Ok(permit) = budget.clone().acquire_many_owned(want).await else {
                    break;
                };
                if tx.send((item, permit)).await.is_err() || end {
                    break;
                }
            }
        }));
        (SourceTask { _task: task }, rx)
    }
}

/// Why the source task stopped.
#[derive(Debug)]
pub(super) enum ItemError {
    /// The source halted.
    Source(SourceError),
    /// An output could not be encoded (a record too large, a value that cannot be JSON).
    Record(SinkError),
    /// The checkpoint is inside a transaction the source did not hand out first.
    NotResumable(NotResumable),
}

/// How a failed output ends the source, for the engine.
pub(super) fn source_end(error: ItemError) -> SourceEnd {
    match error {
        ItemError::Source(e) if e.code() == "data_gap" => SourceEnd::PositionLost(e.to_string()),
        ItemError::Source(e) => SourceEnd::Failed(RunnerExit::from_source(&e)),
        ItemError::Record(e) => SourceEnd::Failed(RunnerExit::from_sink(&e)),
        ItemError::NotResumable(e) => SourceEnd::Failed(RunnerExit::Failed {
            code: e.code().to_string(),
            detail: Some(e.to_string()),
        }),
    }
}

/// Encodes an output on the source task.
fn encode(encoder: &mut RecordEncoder, output: AssemblerOutput) -> Result<Payload, ItemError> {
    let output = encoder.admit(output).map_err(ItemError::NotResumable)?;
    let encoded = encoder
        .encode(&output, now_ms())
        .map_err(ItemError::Record)?;
    Ok(Payload::Encoded {
        encoded,
        within: encoder.within(),
    })
}

/// Row changes a payload carries.
pub(super) fn payload_rows(payload: &Payload) -> usize {
    match payload {
        Payload::Output(AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx)) => {
            tx.changes.len()
        }
        Payload::Output(_) => 0,
        Payload::Encoded { encoded, .. } => usize::try_from(encoded.rows).unwrap_or(usize::MAX),
    }
}

/// The bytes a payload counts against the byte budgets: its decoded changes, or its records.
fn payload_bytes(payload: &Payload) -> usize {
    OUTPUT_OVERHEAD_BYTES
        + match payload {
            Payload::Output(AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx)) => tx
                .changes
                .iter()
                .map(capstan_core::change::Change::approximate_bytes)
                .sum::<usize>(),
            Payload::Output(_) => 0,
            Payload::Encoded { encoded, .. } => encoded.bytes(),
        }
}

/// Aborts the task when dropped (the runner stopped, or failed).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
