//! [`TopicReader`]: every record of a topic, from the first offset to the end each partition
//! has when the read starts (for a `read_committed` reader: its last stable offset).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
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
    /// ascending order). A topic that does not exist reads as empty.
    pub async fn read_all(&self, topic: &str) -> Result<Vec<ConsumedRecord>, SinkError> {
        let this = self.clone();
        let topic = topic.to_string();
        tokio::task::spawn_blocking(move || this.read_blocking(&topic))
            .await
            .map_err(|_| SinkError::Client {
                kafka_code: "reader_task_failed".to_string(),
            })?
    }

    fn read_blocking(&self, topic: &str) -> Result<Vec<ConsumedRecord>, SinkError> {
        let mut config = ClientConfig::new();
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        let consumer: BaseConsumer = config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("group.id", "capstan-topic-reader")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("allow.auto.create.topics", "false")
            .set("isolation.level", self.isolation.as_str())
            .create()
            .map_err(|e| client_error(&e))?;
        let deadline = Instant::now() + self.timeout;
        let metadata = consumer
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|e| client_error(&e))?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        let mut tpl = TopicPartitionList::new();
        for p in &partitions {
            tpl.add_partition_offset(topic, *p, Offset::Beginning)
                .map_err(|e| client_error(&e))?;
        }
        consumer.assign(&tpl).map_err(|e| client_error(&e))?;
        let mut at_end: BTreeSet<i32> = BTreeSet::new();
        let mut out = Vec::new();
        while at_end.len() < partitions.len() {
            if Instant::now() > deadline {
                return Err(SinkError::Timeout {
                    operation: "read_topic",
                });
            }
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Ok(m)) => {
                    at_end.remove(&m.partition());
                    let headers = m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                                .collect()
                        })
                        .unwrap_or_default();
                    out.push(ConsumedRecord {
                        topic: m.topic().to_string(),
                        partition: m.partition(),
                        offset: m.offset(),
                        key: m.key().map(<[u8]>::to_vec),
                        value: m.payload().map(<[u8]>::to_vec),
                        headers,
                    });
                }
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    at_end.insert(p);
                }
                Some(Err(e)) => return Err(client_error(&e)),
            }
        }
        out.sort_by_key(|r| (r.partition, r.offset));
        Ok(out)
    }
}
