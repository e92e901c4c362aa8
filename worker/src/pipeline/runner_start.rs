//! The runner's start: where the dump begins, and the sink it publishes through (in
//! exactly-once mode, fencing earlier producers and choosing between Kafka's offsets record
//! and the Raft checkpoint).

use capstan_connectors::mysql::{detect_flavor, SourceClient, StartPosition};
use capstan_core::position::Position;
use capstan_kafka::config::DeliveryMode;
use capstan_kafka::exactly_once::{
    Checkpoint, CheckpointSource, ExactlyOncePublisher, KafkaTransactionalLog, OwnerIdentity,
};
use capstan_kafka::publisher::KafkaPublisher;
use capstan_raft_store::Command;
use tracing::info;

use super::pipeline_runner::{PipelineRunner, EXACTLY_ONCE_OP_TIMEOUT};
use super::pipeline_spec::StartAt;
use super::runner_exit::RunnerExit;
use super::runner_sink::RunnerSink;
use super::snapshot_driver::PreparedSnapshot;

type Step<T> = Result<T, RunnerExit>;

impl PipelineRunner {
    /// Opens the publisher. In exactly-once mode this fences every earlier producer of the
    /// pipeline first, then resumes from whichever of the Kafka offsets record and the Raft
    /// checkpoint is ahead (bringing Raft up to date when it lags).
    pub(super) async fn open_sink(
        &self,
        start: StartPosition,
        snapshot: Option<&mut PreparedSnapshot>,
    ) -> Step<(RunnerSink, StartPosition)> {
        let sink = &self.spec.sink;
        if sink.delivery == DeliveryMode::AtLeastOnce {
            let publisher =
                KafkaPublisher::new(&sink.producer).map_err(|e| RunnerExit::failed(e.code()))?;
            return Ok((RunnerSink::AtLeastOnce(publisher), start));
        }
        let (raft_position, raft_processed) = match start {
            StartPosition::Checkpoint(p) => (p, None),
            StartPosition::Resume {
                checkpoint,
                processed,
            } => (checkpoint, Some(processed)),
            StartPosition::Current => {
                let mut client =
                    SourceClient::open(&self.spec.source, self.spec.source.stream_timeout)
                        .await
                        .map_err(|e| RunnerExit::failed(e.code()))?;
                let executed = client
                    .positions()
                    .await
                    .map_err(|e| RunnerExit::failed(e.code()))?
                    .executed();
                (executed, None)
            }
        };
        let log = KafkaTransactionalLog::new(
            sink.producer.clone(),
            sink.transaction_timeout_ms,
            EXACTLY_ONCE_OP_TIMEOUT,
        );
        let transactional_id = sink.transactional_id(&self.name);
        self.require_lease()?;
        let (publisher, plan) = ExactlyOncePublisher::open(
            &log,
            OwnerIdentity {
                pipeline: &self.name,
                epoch: self.epoch,
                transactional_id: &transactional_id,
                offsets_topic: &sink.offsets_topic,
            },
            Checkpoint {
                position: raft_position,
                processed: raft_processed,
                snapshot: snapshot
                    .as_deref()
                    .map(PreparedSnapshot::kafka_progress)
                    .unwrap_or_default(),
            },
        )
        .await
        .map_err(|e| RunnerExit::failed(e.code()))?;
        info!(
            pipeline = %self.name,
            epoch = self.epoch,
            source = ?plan.source,
            raft_behind = plan.raft_behind,
            "exactly-once resume point decided"
        );
        if plan.raft_behind {
            self.owner_write(Command::CommitCheckpoint {
                pipeline: self.name.clone(),
                epoch: self.epoch,
                position: plan.checkpoint.position.clone(),
                processed: plan.checkpoint.processed.clone(),
            })
            .await?;
        }
        let mut progress = plan.checkpoint.snapshot;
        if let Some(prepared) = snapshot {
            // a chunk committed in Kafka whose Raft write was lost: Kafka is the authority
            let from_kafka = matches!(plan.source, CheckpointSource::Kafka);
            if from_kafka && !progress.tables.is_empty() {
                for write in prepared
                    .adopt_kafka(&progress)
                    .map_err(RunnerExit::failed)?
                {
                    self.progress_write(write).await?;
                }
            }
            let chunks = progress.chunks_committed;
            progress = prepared.kafka_progress();
            progress.chunks_committed = chunks;
        }
        // the pair of one record, never mixed (ResumePlan)
        let start = StartPosition::resume(plan.checkpoint.position, plan.checkpoint.processed);
        Ok((
            RunnerSink::ExactlyOnce(Box::new(publisher), progress),
            start,
        ))
    }

    /// Where the dump starts: the replicated checkpoint (with the processed position beside
    /// it, which the source skips by: ADR-0008), else what the definition asks for.
    pub(super) async fn start_position(&self) -> Step<StartPosition> {
        let checkpoint = self.node.state.read(|s| {
            s.pipeline(&self.name)
                .and_then(|r| Some((r.checkpoint()?.clone(), r.processed().cloned())))
        });
        if let Some((position, processed)) = checkpoint {
            return Ok(StartPosition::resume(position, processed));
        }
        Ok(match &self.spec.start {
            StartAt::Current => StartPosition::Current,
            StartAt::Position(p) => StartPosition::Checkpoint(p.clone()),
            StartAt::Checkpoint => {
                // empty checkpoint: all retained history, in the server's flavour
                let client = SourceClient::open(&self.spec.source, self.spec.source.stream_timeout)
                    .await
                    .map_err(|e| RunnerExit::failed(e.code()))?;
                let flavor = detect_flavor(client.server_version());
                StartPosition::Checkpoint(Position::empty(flavor))
            }
        })
    }
}
