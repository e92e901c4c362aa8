//! [`TransactionalLog`] on a real (or mock) Kafka cluster through rdkafka.
//!
//! librdkafka's transactional calls block (up to their timeout), so they run on tokio's
//! blocking pool. A fenced producer surfaces as a fatal librdkafka error; it maps to
//! [`SinkError::ProducerFenced`] whatever call notices it first.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{Producer, ThreadedProducer};

use super::transactional_log::{TransactionalLog, TransactionalProducer};
use crate::config::ProducerSettings;
use crate::publisher::{transaction_error, AckContext, AckedProducer, TopicAdminClient};
use crate::record::KafkaRecord;
use crate::topic_reader::{ConsumedRecord, Isolation, TopicReader};
use crate::SinkError;

/// A Kafka cluster reached with a pipeline's producer settings.
#[derive(Clone, Debug)]
pub struct KafkaTransactionalLog {
    settings: ProducerSettings,
    transaction_timeout_ms: u64,
    operation_timeout: Duration,
    topics: Option<Arc<TopicAdminClient>>,
}

impl KafkaTransactionalLog {
    /// A log reached with `settings` (checked, without `transactional.id`);
    /// `transaction_timeout_ms` is the broker-side transaction timeout, `operation_timeout`
    /// bounds each blocking call (init, commit, abort); a read of the offsets record may also
    /// wait out another producer's open transaction (up to `transaction_timeout_ms` more).
    pub fn new(
        settings: ProducerSettings,
        transaction_timeout_ms: u64,
        operation_timeout: Duration,
    ) -> Self {
        KafkaTransactionalLog {
            settings,
            transaction_timeout_ms,
            operation_timeout,
            topics: None,
        }
    }

    /// Creates each missing topic before its first record, the offsets topic (compacted)
    /// when a producer is initialised.
    pub fn creating_topics(mut self, topics: Arc<TopicAdminClient>) -> Self {
        self.topics = Some(topics);
        self
    }

    /// A `read_committed` reader with the log's connection and security settings, bounded by
    /// the operation timeout.
    pub fn committed_reader(&self) -> TopicReader {
        self.reader(self.operation_timeout)
    }

    fn reader(&self, timeout: Duration) -> TopicReader {
        // Connection and security settings apply to the reader too.
        let passthrough: BTreeMap<String, String> =
            self.settings.connection_properties().into_iter().collect();
        TopicReader::new(
            self.settings.get("bootstrap.servers").unwrap_or_default(),
            Isolation::ReadCommitted,
            timeout,
        )
        .with_properties(passthrough)
    }
}

/// A transactional rdkafka producer.
pub struct KafkaTransactionalProducer {
    producer: AckedProducer,
    timeout: Duration,
    topics: Option<Arc<TopicAdminClient>>,
}

impl fmt::Debug for KafkaTransactionalProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaTransactionalProducer")
            .finish_non_exhaustive()
    }
}

impl KafkaTransactionalProducer {
    /// Maps an error, preferring librdkafka's fatal cause (fencing) when there is one.
    fn map(&self, e: &KafkaError) -> SinkError {
        match self.producer.fatal_code() {
            Some(
                RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::Fenced,
            ) => SinkError::ProducerFenced,
            _ => transaction_error(e),
        }
    }

    async fn blocking(
        &self,
        call: fn(&ThreadedProducer<AckContext>, Duration) -> Result<(), KafkaError>,
    ) -> Result<(), SinkError> {
        let producer = self.producer.clone();
        let timeout = self.timeout;
        let result = tokio::task::spawn_blocking(move || call(producer.rdkafka(), timeout))
            .await
            .map_err(|_| SinkError::Client {
                kafka_code: "blocking_task_failed".to_string(),
            })?;
        result.map_err(|e| self.map(&e))
    }
}

#[async_trait]
impl TransactionalLog for KafkaTransactionalLog {
    type Producer = KafkaTransactionalProducer;

    async fn init_producer(
        &self,
        transactional_id: &str,
    ) -> Result<KafkaTransactionalProducer, SinkError> {
        let producer = AckedProducer::create(
            &self
                .settings
                .clone()
                .with("transactional.id", transactional_id)
                .with(
                    "transaction.timeout.ms",
                    &self.transaction_timeout_ms.to_string(),
                )
                .client_config(),
        )?;
        if let Some(topics) = &self.topics {
            topics.ensure_offsets_topic().await?;
        }
        let p = KafkaTransactionalProducer {
            producer,
            timeout: self.operation_timeout,
            topics: self.topics.clone(),
        };
        p.blocking(|p, t| p.init_transactions(t)).await?;
        Ok(p)
    }

    async fn latest_committed(
        &self,
        topic: &str,
        key: &[u8],
    ) -> Result<Option<ConsumedRecord>, SinkError> {
        // another producer's transaction open on the topic is waited for: the broker ends it
        // within the transaction timeout at the latest (an aborted zombie's, say)
        let wait = Duration::from_millis(self.transaction_timeout_ms) + self.operation_timeout;
        self.reader(wait).latest_by_key(topic, key).await
    }
}

#[async_trait]
impl TransactionalProducer for KafkaTransactionalProducer {
    async fn begin(&mut self) -> Result<(), SinkError> {
        self.producer
            .rdkafka()
            .begin_transaction()
            .map_err(|e| self.map(&e))
    }

    async fn send(&mut self, records: &[KafkaRecord]) -> Result<(), SinkError> {
        if let Some(topics) = &self.topics {
            topics.ensure(records).await?;
        }
        // fenced by the transactional id: a deposed owner's transaction is aborted
        self.producer.send_all(records, None).await
    }

    async fn commit(&mut self) -> Result<(), SinkError> {
        self.blocking(|p, t| p.commit_transaction(t)).await
    }

    async fn abort(&mut self) -> Result<(), SinkError> {
        self.blocking(|p, t| p.abort_transaction(t)).await
    }
}
