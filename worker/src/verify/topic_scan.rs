//! The topic side of `capstan verify`: a table's topic read to its high watermark with the
//! pipeline's connection settings, each record applied to a [`TopicReplay`] as it arrives
//! (memory: the replay's state per key, not the records).

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_kafka::config::DeliveryMode;
use capstan_kafka::record::{HEADER_EPOCH, HEADER_POSITION, HEADER_RECORD};
use capstan_kafka::topic_reader::{Isolation, TopicReader};
use tracing::info;

use super::record_form::RecordForm;
use super::topic_replay::{ReplayRecord, TopicReplay};
use super::verify_error::VerifyError;
use crate::pipeline::CheckedPipelineSpec;

/// A reader of the pipeline's topics as a consumer of them would read: `read_committed` for
/// an exactly-once pipeline (aborted copies are not seen), else `read_uncommitted`; the
/// pipeline's connection and security settings; at most `timeout` per topic.
pub fn topic_reader(spec: &CheckedPipelineSpec, timeout: Duration) -> TopicReader {
    let isolation = match spec.sink.delivery {
        DeliveryMode::ExactlyOnce => Isolation::ReadCommitted,
        DeliveryMode::AtLeastOnce => Isolation::ReadUncommitted,
    };
    let properties: BTreeMap<String, String> = spec
        .sink
        .producer
        .connection_properties()
        .into_iter()
        .collect();
    TopicReader::new(bootstrap_servers(spec), isolation, timeout).with_properties(properties)
}

/// The pipeline's `bootstrap.servers`.
pub fn bootstrap_servers(spec: &CheckedPipelineSpec) -> &str {
    spec.sink
        .producer
        .get("bootstrap.servers")
        .unwrap_or_default()
}

/// `topic` replayed into `replay`, each key and value read back as JSON by `form` (one it
/// cannot read is an unreadable record).
pub async fn replay_topic(
    reader: &TopicReader,
    servers: &str,
    topic: &str,
    form: RecordForm,
    replay: TopicReplay,
) -> Result<TopicReplay, VerifyError> {
    let (_, replay) = reader
        .scan(topic, (form, replay), |(form, replay), r| {
            let (Some(key), Some(value)) = (
                form.topic_part(r.key.as_deref()),
                form.topic_part(r.value.as_deref()),
            ) else {
                replay.unreadable_record(r.partition, r.offset);
                return;
            };
            replay.apply(&ReplayRecord {
                partition: r.partition,
                offset: r.offset,
                key: key.as_deref(),
                value: value.as_deref(),
                epoch: r.header_str(HEADER_EPOCH).and_then(|e| e.parse().ok()),
                position: r.header_str(HEADER_POSITION),
                record: r.header_str(HEADER_RECORD),
            });
        })
        .await
        .map_err(|error| VerifyError::Kafka {
            servers: servers.to_string(),
            topic: topic.to_string(),
            error: Box::new(error),
        })?;
    info!(
        topic,
        records = replay.counts().records,
        keys = replay.present(),
        "verify: topic replayed"
    );
    Ok(replay)
}
