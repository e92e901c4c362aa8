//! [`TopicAdminClient`]: creates the topics a pipeline writes before their first record,
//! through Kafka's admin API, with the pipeline's `kafka.topics` settings.
//!
//! A topic is asked for once per client (the answers are remembered): created, or already
//! there (`TopicAlreadyExists`). Without the right to create topics
//! (`TopicAuthorizationFailed` / `ClusterAuthorizationFailed`) the topic is assumed to exist
//! and the write goes ahead; if it does not, the produce fails with
//! `UnknownTopicOrPartition`, which names the real problem. Every other failure is an error
//! carrying Kafka's code.

use std::collections::HashSet;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;

use super::kafka_error_map::client_error;
use crate::config::{ProducerSettings, TopicSettings};
use crate::record::KafkaRecord;
use crate::SinkError;

/// Creates missing topics; one per pipeline runner.
pub struct TopicAdminClient {
    admin: AdminClient<DefaultClientContext>,
    settings: TopicSettings,
    offsets_topic: Option<String>,
    known: Mutex<HashSet<String>>,
    timeout: Duration,
}

impl fmt::Debug for TopicAdminClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicAdminClient")
            .field("settings", &self.settings)
            .field("offsets_topic", &self.offsets_topic)
            .finish_non_exhaustive()
    }
}

impl TopicAdminClient {
    /// A client with the producer's connection and security settings. `offsets_topic` is
    /// created compacted with one partition (exactly-once); every other topic with
    /// `settings`. No network I/O until the first call.
    pub fn new(
        producer: &ProducerSettings,
        settings: &TopicSettings,
        offsets_topic: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, SinkError> {
        let mut config = rdkafka::ClientConfig::new();
        config.set(
            "bootstrap.servers",
            producer.get("bootstrap.servers").unwrap_or_default(),
        );
        for (k, v) in producer.connection_properties() {
            config.set(k, v);
        }
        let admin = config.create().map_err(|e| client_error(&e))?;
        Ok(TopicAdminClient {
            admin,
            settings: settings.clone(),
            offsets_topic: offsets_topic.map(str::to_string),
            known: Mutex::new(HashSet::new()),
            timeout,
        })
    }

    /// Makes sure every topic `records` go to exists (creating the missing ones).
    pub async fn ensure(&self, records: &[KafkaRecord]) -> Result<(), SinkError> {
        let mut seen = HashSet::new();
        for topic in records.iter().map(|r| r.topic.as_str()) {
            if seen.insert(topic) {
                self.ensure_topic(topic).await?;
            }
        }
        Ok(())
    }

    /// Creates the pipeline's offsets topic if it is missing.
    pub async fn ensure_offsets_topic(&self) -> Result<(), SinkError> {
        match self.offsets_topic.clone() {
            Some(topic) => self.ensure_topic(&topic).await,
            None => Ok(()),
        }
    }

    /// Creates `topic` unless this client already saw it exist.
    async fn ensure_topic(&self, topic: &str) -> Result<(), SinkError> {
        if self.known.lock().map_err(|_| poisoned())?.contains(topic) {
            return Ok(());
        }
        self.create(topic).await?;
        self.known
            .lock()
            .map_err(|_| poisoned())?
            .insert(topic.to_string());
        Ok(())
    }

    async fn create(&self, topic: &str) -> Result<(), SinkError> {
        let replication =
            TopicReplication::Fixed(self.settings.replication_factor.map_or(-1, i32::from));
        let offsets = self.offsets_topic.as_deref() == Some(topic);
        let new = if offsets {
            NewTopic::new(topic, 1, replication).set("cleanup.policy", "compact")
        } else {
            let partitions = self
                .settings
                .partitions
                .map_or(-1, |p| i32::try_from(p).unwrap_or(i32::MAX));
            self.settings.config.iter().fold(
                NewTopic::new(topic, partitions, replication),
                |t, (k, v)| t.set(k, v),
            )
        };
        let options = AdminOptions::new()
            .request_timeout(Some(self.timeout))
            .operation_timeout(Some(self.timeout));
        let results = self
            .admin
            .create_topics(std::iter::once(&new), &options)
            .await
            .map_err(|e| client_error(&e))?;
        for result in results {
            match result {
                Ok(_) => tracing::info!(topic, compacted = offsets, "topic created"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((
                    _,
                    code @ (RDKafkaErrorCode::TopicAuthorizationFailed
                    | RDKafkaErrorCode::ClusterAuthorizationFailed),
                )) => {
                    tracing::info!(
                        topic,
                        kafka_code = ?code,
                        "not allowed to create topics; assuming the topic exists"
                    );
                }
                Err((_, code)) => {
                    // the request itself was wrong: the same request fails the same way
                    let definite = matches!(
                        code,
                        RDKafkaErrorCode::InvalidConfig
                            | RDKafkaErrorCode::InvalidReplicationFactor
                            | RDKafkaErrorCode::InvalidPartitions
                            | RDKafkaErrorCode::InvalidTopic
                            | RDKafkaErrorCode::PolicyViolation
                            | RDKafkaErrorCode::InvalidRequest
                            | RDKafkaErrorCode::InvalidReplicaAssignment
                    );
                    return Err(SinkError::TopicCreationFailed {
                        topic: topic.to_string(),
                        kafka_code: format!("{code:?}"),
                        retriable: !definite,
                    });
                }
            }
        }
        Ok(())
    }
}

fn poisoned() -> SinkError {
    SinkError::Client {
        kafka_code: "topic_cache_poisoned".to_string(),
    }
}
