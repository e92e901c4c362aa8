//! How capstan creates the topics it writes: `kafka.topics` of a pipeline.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::SinkError;

fn default_true() -> bool {
    true
}

/// Topic creation (`kafka.topics`). A topic capstan writes and the broker does not have is
/// created through Kafka's admin API before the first record goes to it: a table's topic,
/// the schema-change topic and the transaction topic with these settings, the exactly-once
/// offsets topic with one partition and `cleanup.policy=compact`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSettings {
    /// Create missing topics (default true). With false, a topic must exist (or the broker
    /// must auto-create it): a record for a missing one fails with Kafka's
    /// `UnknownTopicOrPartition`.
    #[serde(default = "default_true")]
    pub create: bool,
    /// Partitions of a created topic, 1 to 10000 (default: the broker's `num.partitions`).
    /// The offsets topic always gets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    /// Replication factor of a created topic, offsets topic included, 1 to 32767 (default:
    /// the broker's `default.replication.factor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<u16>,
    /// Topic configs of a created topic other than the offsets topic (`retention.ms`,
    /// `min.insync.replicas`, `cleanup.policy`, …), passed to Kafka as they are; Kafka
    /// refuses an unknown one at creation.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

impl Default for TopicSettings {
    fn default() -> Self {
        TopicSettings {
            create: true,
            partitions: None,
            replication_factor: None,
            config: BTreeMap::new(),
        }
    }
}

impl TopicSettings {
    /// Checks the bounds (no I/O).
    pub fn validate(&self) -> Result<(), SinkError> {
        let invalid = |field, reason: &str| SinkError::InvalidConfig {
            field,
            reason: reason.to_string(),
        };
        if self.partitions.is_some_and(|p| !(1..=10_000).contains(&p)) {
            return Err(invalid("topics.partitions", "must be 1 to 10000"));
        }
        if self
            .replication_factor
            .is_some_and(|r| r == 0 || r > i16::MAX as u16)
        {
            return Err(invalid("topics.replication_factor", "must be 1 to 32767"));
        }
        if self
            .config
            .keys()
            .any(|k| k.is_empty() || k.chars().any(char::is_whitespace))
        {
            return Err(invalid(
                "topics.config",
                "keys must be non-empty without whitespace",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let t: TopicSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(t, TopicSettings::default());
        assert!(t.create);
        assert!(t.validate().is_ok());
        for bad in [
            r#"{"partitions": 0}"#,
            r#"{"partitions": 10001}"#,
            r#"{"replication_factor": 0}"#,
            r#"{"replication_factor": 40000}"#,
            r#"{"config": {"": "1"}}"#,
        ] {
            let t: TopicSettings = serde_json::from_str(bad).unwrap();
            let e = t.validate().unwrap_err();
            assert_eq!(e.code(), "invalid_sink_config", "{bad}");
            assert!(e.to_string().contains("topics."), "{e}");
        }
        assert!(serde_json::from_str::<TopicSettings>(r#"{"partition": 3}"#).is_err());
    }
}
