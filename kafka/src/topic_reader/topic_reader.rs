//! [`TopicReader`]: every record of a topic, from the first offset to the end each partition
//! has when the read starts (its high watermark), or the newest record of one key up to the
//! same ends (the offsets record's read).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::consumed_record::ConsumedRecord;
use crate::publisher::client_error;
use crate::SinkError;

/// Which records a reader sees.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Isolation {
    /// Everything written, including open and aborted transactions' records.
    ReadUncommitted,
    /// Only committed transactions' records (and non-transactional ones), up to the last
    /// stable offset.
    ReadCommitted,
}

impl Isolation {
    fn as_str(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "read_uncommitted",
            Isolation::ReadCommitted => "read_committed",
        }
    }
}

/// Reads whole topics with a throw-away consumer (no group, no commits). `Debug` shows
/// property names only (values can be credentials).
#[derive(Clone)]
pub struct TopicReader {
    bootstrap_servers: String,
    isolation: Isolation,
    timeout: Duration,
    properties: BTreeMap<String, String>,
}

impl fmt::Debug for TopicReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicReader")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("isolation", &self.isolation)
            .field("timeout", &self.timeout)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl TopicReader {
    /// A reader against `bootstrap_servers`; a read that takes longer than `timeout` fails.
    pub fn new(bootstrap_servers: &str, isolation: Isolation, timeout: Duration) -> Self {
        TopicReader {
            bootstrap_servers: bootstrap_servers.to_string(),
            isolation,
            timeout,
            properties: BTreeMap::new(),
        }
    }

    /// Extra consumer properties (security settings for a real cluster).
    pub fn with_properties(mut self, properties: BTreeMap<String, String>) -> Self {
        self.properties = properties;
        self
    }

    /// Every record of `topic`, partition by partition in offset order (partitions in
    /// ascending order), up to the high watermark each partition has when the read starts
    /// (a `read_committed` reader waits for transactions open then to end, within the
    /// reader's timeout). A topic that does not exist reads as empty.
    pub async fn read_all(&self, topic: &str) -> Result<Vec<ConsumedRecord>, SinkError> {
        let mut out = self.scan(topic, Vec::new(), |out, r| out.push(r)).await?;
        out.sort_by_key(|r| (r.partition, r.offset));
        Ok(out)
    }

    /// The newest record of `topic` with key `key`, reading every partition up to the high
    /// watermark it had when the read started. For a `read_committed` reader that waits for
    /// every transaction open at that moment to commit or abort (within the reader's
    /// timeout), so an open transaction of another producer cannot hide a newer record
    /// behind it. Keeps one record in memory, whatever the topic holds. A topic that does not
    /// exist reads as `None`.
    pub async fn latest_by_key(
        &self,
        topic: &str,
        key: &[u8],
    ) -> Result<Option<ConsumedRecord>, SinkError> {
        let key = key.to_vec();
        self.scan(topic, None, move |latest, r| {
            // a key lives in one partition, where offsets only grow
            if r.key.as_deref() == Some(key.as_slice()) {
                *latest = Some(r);
            }
        })
        .await
    }

    /// Every record of `topic` up to the ends [`Self::read_all`] reads to, folded into `state`
    /// as it arrives (on the blocking pool), so a caller keeps what it needs instead of every
    /// record: within a partition in offset order, the partitions interleaved. A topic that
    /// does not exist reads as nothing.
    pub async fn scan<T: Send + 'static>(
        &self,
        topic: &str,
        state: T,
        fold: impl FnMut(&mut T, ConsumedRecord) + Send + 'static,
    ) -> Result<T, SinkError> {
        let this = self.clone();
        let topic = topic.to_string();
        tokio::task::spawn_blocking(move || this.scan_blocking(&topic, state, fold))
            .await
            .map_err(|_| SinkError::Client {
                kafka_code: "reader_task_failed".to_string(),
            })?
    }

    fn scan_blocking<T>(
        &self,
        topic: &str,
        mut state: T,
        mut fold: impl FnMut(&mut T, ConsumedRecord),
    ) -> Result<T, SinkError> {
        let consumer = self.consumer(self.isolation)?;
        let deadline = Instant::now() + self.timeout;
        let metadata = consumer
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|e| client_error(&e))?;
        let mut partitions: Vec<i32> = Vec::new();
        for t in metadata.topics().iter().filter(|t| t.name() == topic) {
            match t.error() {
                None => partitions.extend(t.partitions().iter().map(|p| p.id())),
                // a topic nobody wrote yet: nothing to read
                Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => {}
                // anything else (no leader, not authorised, …) is not "no record"
                Some(e) => {
                    return Err(client_error(&KafkaError::MetadataFetch(e.into())));
                }
            }
        }
        if partitions.is_empty() {
            return Ok(state);
        }
        // where each partition ends for this read
        let mut targets: BTreeMap<i32, i64> = BTreeMap::new();
        // a read_committed consumer's "latest" offset is the last stable offset: the high
        // watermark comes from a read_uncommitted query
        let query = self.consumer(Isolation::ReadUncommitted)?;
        for p in &partitions {
            let (low, high) = query
                .fetch_watermarks(topic, *p, self.timeout)
                .map_err(|e| client_error(&e))?;
            if high > low {
                targets.insert(*p, high);
            }
        }
        if targets.is_empty() {
            return Ok(state);
        }
        let mut tpl = TopicPartitionList::new();
        for p in &partitions {
            tpl.add_partition_offset(topic, *p, Offset::Beginning)
                .map_err(|e| client_error(&e))?;
        }
        consumer.assign(&tpl).map_err(|e| client_error(&e))?;
        let mut done: BTreeSet<i32> = BTreeSet::new();
        let started = Instant::now();
        let mut next_notice = started + WAIT_NOTICE;
        while done.len() < targets.len() {
            let now = Instant::now();
            if now > deadline {
                return Err(SinkError::Timeout {
                    operation: "read_topic",
                });
            }
            if now > next_notice {
                // visible, not silent: typically another producer's transaction left open
                tracing::warn!(
                    topic,
                    isolation = self.isolation.as_str(),
                    partitions_pending = targets.len() - done.len(),
                    waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "topic read waiting to reach the high watermark (an open transaction holds a read_committed reader back until it ends)"
                );
                next_notice = now + WAIT_NOTICE;
            }
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Ok(m)) => {
                    let headers = m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                                .collect()
                        })
                        .unwrap_or_default();
                    fold(
                        &mut state,
                        ConsumedRecord {
                            topic: m.topic().to_string(),
                            partition: m.partition(),
                            offset: m.offset(),
                            key: m.key().map(<[u8]>::to_vec),
                            value: m.payload().map(<[u8]>::to_vec),
                            headers,
                        },
                    );
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => return Err(client_error(&e)),
            }
            // the fetch position passes transaction markers and aborted records too
            let positions = consumer.position().map_err(|e| client_error(&e))?;
            for (p, high) in &targets {
                let reached = positions
                    .find_partition(topic, *p)
                    .and_then(|e| e.offset().to_raw())
                    .is_some_and(|o| o >= *high);
                if reached {
                    done.insert(*p);
                }
            }
        }
        Ok(state)
    }
}

/// How often a read that has not reached its end says so.
const WAIT_NOTICE: Duration = Duration::from_secs(5);

impl TopicReader {
    /// A throw-away consumer (no group, no commits) with `isolation`.
    fn consumer(&self, isolation: Isolation) -> Result<BaseConsumer, SinkError> {
        let mut config = ClientConfig::new();
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("group.id", "capstan-topic-reader")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("allow.auto.create.topics", "false")
            .set("isolation.level", isolation.as_str())
            .create()
            .map_err(|e| client_error(&e))
    }
}
