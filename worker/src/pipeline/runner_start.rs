//! The runner's start: where the dump begins, and the sink it publishes through (in
//! exactly-once mode, fencing earlier producers and choosing between Kafka's offsets record
//! and the Raft checkpoint).

use std::sync::Arc;

use capstan_connectors::mysql::{detect_flavor, SourceClient, StartPosition};
use capstan_core::position::{Position, ResumePoint};
use capstan_kafka::config::DeliveryMode;
use capstan_kafka::exactly_once::{
    Checkpoint, CheckpointSource, ExactlyOncePublisher, KafkaTransactionalLog, OwnerIdentity,
    WithinTransaction,
};
use capstan_kafka::publisher::{KafkaPublisher, TopicAdminClient};
use capstan_kafka::registry::SchemaRegistrar;
use tracing::info;

use super::engine::runner_exit::RunnerExit;
use super::pipeline_runner::{PipelineRunner, EXACTLY_ONCE_OP_TIMEOUT};
use super::pipeline_spec::StartAt;
use super::runner_sink::RunnerSink;
use super::snapshot_driver::PreparedSnapshot;
use crate::fault_point::FaultPoint;

type Step<T> = Result<T, RunnerExit>;

impl PipelineRunner {
    /// Opens the publisher (and, for `format: avro`, the schema registry client). In
    /// exactly-once mode this fences every earlier producer of the
    /// pipeline first, then resumes from whichever of the Kafka offsets record and the Raft
    /// checkpoint is ahead (bringing Raft up to date when it lags).
    pub(super) async fn open_sink(
        &self,
        raft_point: ResumePoint,
        snapshot: Option<&mut PreparedSnapshot>,
    ) -> Step<(RunnerSink, StartPosition, Option<WithinTransaction>)> {
        let sink = &self.spec.sink;
        if let (Some(registry), None) = (&sink.schema_registry, self.registrar.get()) {
            let registrar =
                SchemaRegistrar::new(registry).map_err(|e| RunnerExit::from_sink(&e))?;
            let _ = self.registrar.set(Arc::new(registrar));
        }
        let offsets_topic = sink.offsets_topic(&self.name);
        let topics = if sink.topics.create {
            let offsets =
                (sink.delivery == DeliveryMode::ExactlyOnce).then_some(offsets_topic.as_str());
            let admin = TopicAdminClient::new(
                &sink.producer,
                &sink.topics,
                offsets,
                EXACTLY_ONCE_OP_TIMEOUT,
            )
            .map_err(|e| RunnerExit::from_sink(&e))?;
            Some(Arc::new(admin))
        } else {
            None
        };
        if sink.delivery == DeliveryMode::AtLeastOnce {
            let mut publisher = KafkaPublisher::new(&sink.producer)
                .map_err(|e| RunnerExit::from_sink(&e))?
                .fenced_by(self.publish_fence());
            if let Some(topics) = topics {
                publisher = publisher.creating_topics(topics);
            }
            let start = StartPosition::from(raft_point);
            return Ok((RunnerSink::AtLeastOnce(publisher, None), start, None));
        }
        let mut log = KafkaTransactionalLog::new(
            sink.producer.clone(),
            sink.transaction_timeout_ms,
            EXACTLY_ONCE_OP_TIMEOUT,
        );
        if let Some(topics) = topics {
            log = log.creating_topics(topics);
        }
        let transactional_id = sink.transactional_id(&self.name);
        let incarnation = self.node.state.read(|s| {
            s.pipeline(&self.name)
                .and_then(|r| r.incarnation().map(str::to_string))
        });
        self.require_lease()?;
        let (publisher, plan) = ExactlyOncePublisher::open(
            &log,
            OwnerIdentity {
                pipeline: &self.name,
                epoch: self.epoch,
                transactional_id: &transactional_id,
                offsets_topic: &offsets_topic,
                incarnation: incarnation.as_deref(),
            },
            Checkpoint::at(
                raft_point,
                snapshot
                    .as_deref()
                    .map(PreparedSnapshot::kafka_progress)
                    .unwrap_or_default(),
            ),
        )
        .await
        .map_err(|e| RunnerExit::from_sink(&e))?;
        let publisher = publisher.with_step_hook(FaultPoint::exactly_once_step);
        info!(
            pipeline = %self.name,
            epoch = self.epoch,
            source = ?plan.source,
            raft_behind = plan.raft_behind,
            "exactly-once resume point decided"
        );
        // the pair of one record, never mixed (ResumePlan)
        let point = plan
            .checkpoint
            .resume_point()
            .map_err(|e| RunnerExit::failed(e.code()))?;
        if plan.raft_behind {
            self.commit_checkpoint(&point).await?;
        }
        let within = plan.checkpoint.within;
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
        let start = StartPosition::from(point);
        Ok((
            RunnerSink::ExactlyOnce(Box::new(publisher), progress),
            start,
            within,
        ))
    }

    /// Where the dump starts: the replicated checkpoint (with the processed position beside
    /// it, which the source skips by: ADR-0008), else what the definition asks for, resolved
    /// once.
    ///
    /// A pipeline without a checkpoint resolves its `start_position` here (`current`: the
    /// server's executed position now; `checkpoint`: the empty position, all retained history;
    /// an explicit position as given) and commits the result to Raft, epoch-fenced, before the
    /// first dump. Every later start (a pause and resume, a failover, a restart, a config
    /// update, a cluster restart) resumes from that commit. Resolving `current` again at each
    /// start would begin at a later "now" and skip what was written in between.
    pub(super) async fn start_position(&self) -> Step<ResumePoint> {
        let checkpoint = self
            .node
            .state
            .read(|s| s.pipeline(&self.name).and_then(|r| r.resume_point()));
        if let Some(point) = checkpoint {
            return Ok(point);
        }
        let position = match &self.spec.start {
            StartAt::Position(p) => p.clone(),
            StartAt::Current | StartAt::Checkpoint => {
                let mut client =
                    SourceClient::open(&self.spec.source, self.spec.source.stream_timeout)
                        .await
                        .map_err(|e| RunnerExit::from_source(&e))?;
                if self.spec.start == StartAt::Current {
                    client
                        .positions()
                        .await
                        .map_err(|e| RunnerExit::from_source(&e))?
                        .executed()
                } else {
                    Position::empty(detect_flavor(client.server_version()))
                }
            }
        };
        self.commit_checkpoint(&ResumePoint::at(position.clone()))
            .await?;
        info!(
            pipeline = %self.name,
            epoch = self.epoch,
            position = %position,
            "start position resolved and committed"
        );
        Ok(ResumePoint::at(position))
    }
}
