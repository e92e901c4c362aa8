//! A pipeline's Kafka sink section, as users write it, and its checked form.

use std::collections::BTreeMap;

use capstan_core::position::Flavor;
use serde::{Deserialize, Serialize};

use super::event_format::EventFormat;
use super::message_key_columns::MessageKeyColumns;
use super::producer_overrides::ProducerOverrides;
use super::producer_settings::{validate_overrides, ProducerSettings};
use super::schema_registry_config::{SchemaRegistryConfig, SchemaRegistrySettings};
use super::snapshot_marker::{SnapshotMarker, SNAPSHOT_MARKER_TOPIC_SUFFIX};
use super::topic_settings::TopicSettings;
use crate::record::{
    check_topic_name, RecordOptions, SchemaFraming, TopicTemplate, TypeMapping, ValueEncoding,
    DEFAULT_TOPIC_TEMPLATE,
};
use crate::SinkError;

/// librdkafka's `message.max.bytes` when no producer override sets it.
const DEFAULT_MESSAGE_MAX_BYTES: usize = 1_000_000;

/// The producer's local queue, at most (`queue.buffering.max.kbytes`, 64 MiB, unless an
/// override sets it): a byte budget like the runner's own.
const PRODUCER_QUEUE_KBYTES: u32 = 64 << 10;

/// How records reach Kafka.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// Idempotent producer, `acks=all`; the checkpoint advances after every record of a batch
    /// is acknowledged. An owner crash between delivery and checkpoint re-publishes that batch
    /// (consumers can recognise the copies by their headers).
    #[default]
    AtLeastOnce,
    /// Transactional producer per pipeline; rows and the offsets record commit atomically,
    /// a zombie owner is fenced. See `docs/adr/0003-exactly-once-kafka.md`.
    ExactlyOnce,
}

fn default_topic_template() -> String {
    DEFAULT_TOPIC_TEMPLATE.to_string()
}
fn default_true() -> bool {
    true
}
fn default_max_in_flight() -> u32 {
    5
}
fn default_delivery_timeout_ms() -> u64 {
    300_000
}
fn default_transaction_timeout_ms() -> u64 {
    60_000
}
fn default_transactional_id_prefix() -> String {
    "capstan".to_string()
}

/// The Kafka sink of one pipeline.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// Comma-separated `host:port` list of Kafka brokers to bootstrap from.
    pub bootstrap_servers: String,
    /// Prefix of every topic this pipeline writes (also `source.name` in each event); must be
    /// a legal topic name (`[a-zA-Z0-9._-]`).
    pub topic_prefix: String,
    /// Topic of a table's change events; placeholders `{prefix}`, `{db}`, `{table}`
    /// (required). Default `{prefix}.{db}.{table}`.
    #[serde(default = "default_topic_template")]
    pub topic_template: String,
    /// Write a tombstone (key, null value) after every delete so compaction can forget the
    /// key. Default true.
    #[serde(default = "default_true")]
    pub tombstones_on_delete: bool,
    /// Also write BEGIN/END transaction events to `<topic_prefix>.transaction`. Default false.
    #[serde(default)]
    pub transaction_topic: bool,
    /// `at_least_once` (default) or `exactly_once`.
    #[serde(default)]
    pub delivery: DeliveryMode,
    /// Maximum unacknowledged produce requests per broker connection, 1 to 5. Default 5.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u32,
    /// How long librdkafka keeps retrying a record before failing its delivery, in ms.
    /// Default 300000; in `exactly_once` mode, where it may not exceed
    /// `transaction_timeout_ms`, the default becomes `transaction_timeout_ms`.
    #[serde(default = "default_delivery_timeout_ms")]
    pub delivery_timeout_ms: u64,
    /// Exactly-once only: the compacted topic holding the pipeline's offsets record.
    /// Default `capstan.offsets.<pipeline name>`: a topic only this pipeline's producer
    /// writes, so no other producer's open transaction can delay its resume. A topic shared
    /// by several pipelines works too, but a resume then waits (up to that producer's
    /// transaction timeout) for every transaction a killed owner of another pipeline left
    /// open on it.
    #[serde(default)]
    pub offsets_topic: Option<String>,
    /// Exactly-once only: the broker aborts a transaction left open longer than this, in ms.
    /// Default 60000.
    #[serde(default = "default_transaction_timeout_ms")]
    pub transaction_timeout_ms: u64,
    /// Exactly-once only: `transactional.id` is `<prefix>-<pipeline name>`. Default `capstan`.
    #[serde(default = "default_transactional_id_prefix")]
    pub transactional_id_prefix: String,
    /// Extra librdkafka producer properties (for example `compression.type`, `linger.ms`,
    /// `security.protocol`). Checked at validation; settings that weaken delivery guarantees
    /// or that capstan owns are refused.
    #[serde(default)]
    pub producer_overrides: ProducerOverrides,
    /// Creation of missing topics (partitions, replication, topic config); see
    /// [`TopicSettings`].
    #[serde(default)]
    pub topics: TopicSettings,
    /// `capstan_json` (default), `debezium_json`, `debezium_json_schema` or `avro`; see
    /// `docs/event-format.md`.
    #[serde(default)]
    pub format: EventFormat,
    /// The Schema Registry of `format: avro` (required there, refused elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_registry: Option<SchemaRegistryConfig>,
    /// Debezium formats only: Debezium's type-mapping modes (`decimal_handling_mode`,
    /// `time_precision_mode`, `binary_handling_mode`, `bigint_unsigned_handling_mode`), each
    /// defaulting to Debezium's default.
    #[serde(default)]
    pub type_mapping: TypeMapping,
    /// Where the snapshot-complete marker of a table goes: `control_topic` (default,
    /// `<topic_prefix>.snapshot_complete`) or `table_topic` (the table's own topic, after its
    /// last row; opt-in).
    #[serde(default)]
    pub snapshot_marker: SnapshotMarker,
    /// Per table (`"db.table"`), the columns whose values form its record key instead of its
    /// primary key (Debezium's `message.key.columns`), in key order.
    #[serde(default)]
    pub message_key_columns: MessageKeyColumns,
}

/// A checked sink configuration: everything the publisher and the record builder need.
#[derive(Clone, Debug)]
pub struct CheckedSinkConfig {
    /// Record shaping.
    pub record_options: RecordOptions,
    /// Delivery mode.
    pub delivery: DeliveryMode,
    /// The producer's complete librdkafka properties (without `transactional.id`).
    pub producer: ProducerSettings,
    /// The configured offsets topic (exactly-once); see [`Self::offsets_topic`].
    offsets_topic: Option<String>,
    /// The `transactional.id` prefix (exactly-once).
    pub transactional_id_prefix: String,
    /// The transaction timeout in ms (exactly-once).
    pub transaction_timeout_ms: u64,
    /// Creation of missing topics.
    pub topics: TopicSettings,
    /// `format: avro`: the Schema Registry.
    pub schema_registry: Option<SchemaRegistrySettings>,
}

impl CheckedSinkConfig {
    /// The `transactional.id` of a pipeline: `<prefix>-<pipeline>`.
    pub fn transactional_id(&self, pipeline: &str) -> String {
        format!("{}-{pipeline}", self.transactional_id_prefix)
    }

    /// The offsets topic of a pipeline: the configured one, else
    /// `capstan.offsets.<pipeline>` (a valid topic name for every valid pipeline name).
    pub fn offsets_topic(&self, pipeline: &str) -> String {
        self.offsets_topic
            .clone()
            .unwrap_or_else(|| format!("capstan.offsets.{pipeline}"))
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> SinkError {
    SinkError::InvalidConfig {
        field,
        reason: reason.into(),
    }
}

impl SinkConfig {
    /// A config with every default, for `bootstrap_servers` and `topic_prefix`.
    pub fn new(bootstrap_servers: &str, topic_prefix: &str) -> Self {
        SinkConfig {
            bootstrap_servers: bootstrap_servers.to_string(),
            topic_prefix: topic_prefix.to_string(),
            topic_template: default_topic_template(),
            tombstones_on_delete: true,
            transaction_topic: false,
            delivery: DeliveryMode::default(),
            max_in_flight: default_max_in_flight(),
            delivery_timeout_ms: default_delivery_timeout_ms(),
            offsets_topic: None,
            transaction_timeout_ms: default_transaction_timeout_ms(),
            transactional_id_prefix: default_transactional_id_prefix(),
            producer_overrides: ProducerOverrides::default(),
            topics: TopicSettings::default(),
            format: EventFormat::default(),
            schema_registry: None,
            type_mapping: TypeMapping::default(),
            snapshot_marker: SnapshotMarker::default(),
            message_key_columns: MessageKeyColumns::default(),
        }
    }

    /// Checks every field (no I/O) and builds the producer properties: capstan's fixed
    /// settings (`enable.idempotence=true`, `acks=all`, the in-flight bound, the delivery
    /// timeout) and then the overrides.
    pub fn validate(&self, flavor: Flavor) -> Result<CheckedSinkConfig, SinkError> {
        if self.bootstrap_servers.trim().is_empty() {
            return Err(invalid("bootstrap_servers", "must not be empty"));
        }
        let topics = TopicTemplate::parse_any(&self.topic_prefix, &self.topic_template)
            .map_err(|r| invalid("topic_template", r))?;
        let transaction_topic = if self.transaction_topic {
            let t = format!("{}.transaction", self.topic_prefix);
            check_topic_name(&t).map_err(|r| invalid("topic_prefix", r))?;
            Some(t)
        } else {
            None
        };
        let snapshot_marker_topic = match self.snapshot_marker {
            SnapshotMarker::ControlTopic => {
                let t = format!("{}.{SNAPSHOT_MARKER_TOPIC_SUFFIX}", self.topic_prefix);
                check_topic_name(&t).map_err(|r| invalid("topic_prefix", r))?;
                Some(t)
            }
            SnapshotMarker::TableTopic => None,
        };
        if !(1..=5).contains(&self.max_in_flight) {
            return Err(invalid("max_in_flight", "must be 1 to 5"));
        }
        if self.delivery_timeout_ms == 0 || self.delivery_timeout_ms > i32::MAX as u64 {
            return Err(invalid("delivery_timeout_ms", "must be 1 to 2147483647"));
        }
        if let Some(topic) = &self.offsets_topic {
            check_topic_name(topic).map_err(|r| invalid("offsets_topic", r))?;
        }
        if self.transaction_timeout_ms < 1000 || self.transaction_timeout_ms > i32::MAX as u64 {
            return Err(invalid(
                "transaction_timeout_ms",
                "must be 1000 to 2147483647",
            ));
        }
        // the at-least-once default is longer than a transaction may live: in exactly-once
        // mode an unchanged default follows the transaction timeout instead
        let delivery_timeout_ms = if self.delivery == DeliveryMode::ExactlyOnce
            && self.delivery_timeout_ms == default_delivery_timeout_ms()
        {
            self.delivery_timeout_ms.min(self.transaction_timeout_ms)
        } else {
            self.delivery_timeout_ms
        };
        if self.delivery == DeliveryMode::ExactlyOnce
            && delivery_timeout_ms > self.transaction_timeout_ms
        {
            return Err(invalid(
                "delivery_timeout_ms",
                "must not exceed transaction_timeout_ms in exactly_once mode",
            ));
        }
        if self.transactional_id_prefix.is_empty()
            || self
                .transactional_id_prefix
                .chars()
                .any(char::is_whitespace)
        {
            return Err(invalid(
                "transactional_id_prefix",
                "must be non-empty without whitespace",
            ));
        }
        let message_keys = self.message_key_columns.validate()?;
        validate_overrides(&self.producer_overrides)?;
        self.topics.validate()?;
        let encoding = self.value_encoding()?;
        let schema_registry = match (&self.schema_registry, self.format) {
            (None, EventFormat::Avro) => {
                return Err(invalid(
                    "schema_registry.url",
                    "is required with format avro",
                ))
            }
            (Some(_), f) if f != EventFormat::Avro => {
                return Err(invalid("schema_registry", "applies to format avro only"))
            }
            (Some(r), _) => Some(r.validate()?),
            (None, _) => None,
        };
        if self.format == EventFormat::Avro && self.snapshot_marker == SnapshotMarker::TableTopic {
            return Err(invalid(
                "snapshot_marker",
                "table_topic would put JSON markers among a table's Avro records; use control_topic with format avro",
            ));
        }
        let mut props: BTreeMap<String, String> = [
            ("bootstrap.servers", self.bootstrap_servers.clone()),
            ("enable.idempotence", "true".to_string()),
            ("acks", "all".to_string()),
            (
                "max.in.flight.requests.per.connection",
                self.max_in_flight.to_string(),
            ),
            ("message.timeout.ms", delivery_timeout_ms.to_string()),
            ("linger.ms", "5".to_string()),
            // the producer's queue is a byte budget too (librdkafka's default is 1 GiB); a
            // full queue makes a publish wait for room (the next delivery report)
            (
                "queue.buffering.max.kbytes",
                PRODUCER_QUEUE_KBYTES.to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in self.producer_overrides.iter() {
            props.insert(k.clone(), v.clone());
        }
        let producer = ProducerSettings::from_map(props);
        producer
            .client_config()
            .create_native_config()
            .map_err(|_| {
                invalid(
                    "producer_overrides",
                    "librdkafka refused the combined settings",
                )
            })?;
        // librdkafka's own default when no override sets it
        let max_record_bytes = match producer.get("message.max.bytes") {
            None => DEFAULT_MESSAGE_MAX_BYTES,
            Some(v) => v.trim().parse().map_err(|_| {
                invalid(
                    "producer_overrides",
                    "message.max.bytes must be a whole number of bytes",
                )
            })?,
        };
        Ok(CheckedSinkConfig {
            record_options: RecordOptions {
                topics,
                flavor,
                tombstones_on_delete: self.tombstones_on_delete,
                transaction_topic,
                max_record_bytes,
                encoding,
                snapshot_marker_topic,
                message_keys,
                schemas: match self.format {
                    EventFormat::DebeziumJsonSchema => SchemaFraming::ConnectJson,
                    EventFormat::Avro => SchemaFraming::Avro,
                    EventFormat::CapstanJson | EventFormat::DebeziumJson => SchemaFraming::None,
                },
            },
            delivery: self.delivery,
            producer,
            offsets_topic: self.offsets_topic.clone(),
            transactional_id_prefix: self.transactional_id_prefix.clone(),
            transaction_timeout_ms: self.transaction_timeout_ms,
            topics: self.topics.clone(),
            schema_registry,
        })
    }
}

impl SinkConfig {
    /// The column-value encoding of `format` and `type_mapping`; a type mapping is refused
    /// where the format does not read it.
    fn value_encoding(&self) -> Result<ValueEncoding, SinkError> {
        if !self.format.is_debezium() {
            if self.type_mapping != TypeMapping::default() {
                return Err(invalid(
                    "type_mapping",
                    "applies to the debezium formats only (format is capstan_json)",
                ));
            }
            return Ok(ValueEncoding::Capstan);
        }
        Ok(ValueEncoding::Debezium(self.type_mapping))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_from_minimal_json() {
        let c: SinkConfig =
            serde_json::from_str(r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc"}"#).unwrap();
        assert_eq!(c, SinkConfig::new("k:9092", "cdc"));
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(checked.producer.get("acks"), Some("all"));
        assert_eq!(checked.producer.get("enable.idempotence"), Some("true"));
        assert_eq!(checked.transactional_id("orders"), "capstan-orders");
        assert_eq!(checked.record_options.transaction_topic, None);
        assert_eq!(
            checked.record_options.snapshot_marker_topic.as_deref(),
            Some("cdc.snapshot_complete")
        );
    }

    #[test]
    fn message_key_columns_are_checked_and_passed_on() {
        let c: SinkConfig = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc",
                "message_key_columns":{"shop.orders":["tenant","no"]}}"#,
        )
        .unwrap();
        let keys = c
            .validate(Flavor::Mysql)
            .unwrap()
            .record_options
            .message_keys;
        assert_eq!(
            keys.get(&capstan_core::change::TableId::new("shop", "orders"))
                .map(|c| c.to_vec()),
            Some(vec!["tenant".to_string(), "no".to_string()])
        );
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.message_key_columns.insert("orders", &["id"]);
        match c.validate(Flavor::Mysql).unwrap_err() {
            SinkError::InvalidConfig { field, .. } => assert_eq!(field, "message_key_columns"),
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn the_snapshot_marker_goes_to_the_table_topic_only_when_asked() {
        let c: SinkConfig = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc","snapshot_marker":"table_topic"}"#,
        )
        .unwrap();
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(checked.record_options.snapshot_marker_topic, None);
        let r: Result<SinkConfig, _> = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc","snapshot_marker":"header"}"#,
        );
        assert!(r.is_err());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let r: Result<SinkConfig, _> = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc","acks":"1"}"#,
        );
        assert!(r.is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.max_in_flight = 6;
        assert_eq!(
            c.validate(Flavor::Mysql).unwrap_err().code(),
            "invalid_sink_config"
        );
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.topic_template = "{prefix}.{schema}".into();
        assert!(c.validate(Flavor::Mysql).is_err());
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.producer_overrides.insert("acks".into(), "1".into());
        assert_eq!(
            c.validate(Flavor::Mysql).unwrap_err().code(),
            "forbidden_producer_override"
        );
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.delivery = DeliveryMode::ExactlyOnce;
        c.delivery_timeout_ms = 120_000;
        assert!(c.validate(Flavor::Mysql).is_err());
        c.delivery_timeout_ms = 30_000;
        c.transaction_topic = true;
        let checked = c.validate(Flavor::Mariadb).unwrap();
        assert_eq!(
            checked.record_options.transaction_topic.as_deref(),
            Some("cdc.transaction")
        );
    }

    #[test]
    fn exactly_once_with_defaults_validates() {
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.delivery = DeliveryMode::ExactlyOnce;
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(checked.producer.get("message.timeout.ms"), Some("60000"));
        assert_eq!(checked.offsets_topic("orders"), "capstan.offsets.orders");
        c.offsets_topic = Some("shared.offsets".into());
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(checked.offsets_topic("orders"), "shared.offsets");
        c.offsets_topic = Some("bad topic".into());
        assert!(c.validate(Flavor::Mysql).is_err());
    }

    #[test]
    fn format_and_type_mapping() {
        let c: SinkConfig = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc","format":"debezium_json",
                "type_mapping":{"decimal_handling_mode":"string","binary_handling_mode":"hex"}}"#,
        )
        .unwrap();
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(
            checked.record_options.encoding,
            ValueEncoding::Debezium(TypeMapping {
                decimal_handling_mode: crate::record::DecimalHandling::String,
                binary_handling_mode: crate::record::BinaryHandling::Hex,
                ..TypeMapping::default()
            })
        );
        let c = SinkConfig::new("k:9092", "cdc");
        assert_eq!(
            c.validate(Flavor::Mysql).unwrap().record_options.encoding,
            ValueEncoding::Capstan
        );
        let r: Result<SinkConfig, _> = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc","format":"protobuf"}"#,
        );
        assert!(r.is_err());
        assert_eq!(
            c.validate(Flavor::Mysql).unwrap().record_options.schemas,
            SchemaFraming::None
        );
        let c: SinkConfig = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc","format":"debezium_json_schema",
                "type_mapping":{"time_precision_mode":"connect"}}"#,
        )
        .unwrap();
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(checked.record_options.schemas, SchemaFraming::ConnectJson);
        assert!(matches!(
            checked.record_options.encoding,
            ValueEncoding::Debezium(TypeMapping {
                time_precision_mode: crate::record::TimePrecision::Connect,
                ..
            })
        ));
    }

    fn refused_field(c: &SinkConfig) -> &'static str {
        match c.validate(Flavor::Mysql).unwrap_err() {
            SinkError::InvalidConfig { field, .. } => field,
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn avro_needs_a_registry_and_only_avro_takes_one() {
        let c: SinkConfig = serde_json::from_str(
            r#"{"bootstrap_servers":"k:9092","topic_prefix":"cdc","format":"avro",
                "schema_registry":{"url":"http://registry:8081","username":"svc",
                                   "password":"${env:SR_PW}"},
                "type_mapping":{"decimal_handling_mode":"string"}}"#,
        )
        .unwrap();
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(checked.record_options.schemas, SchemaFraming::Avro);
        assert_eq!(
            checked.schema_registry,
            Some(SchemaRegistrySettings {
                url: "http://registry:8081".into(),
                basic_auth: Some(("svc".into(), "${env:SR_PW}".into())),
            })
        );
        assert!(matches!(
            checked.record_options.encoding,
            ValueEncoding::Debezium(TypeMapping {
                decimal_handling_mode: crate::record::DecimalHandling::String,
                ..
            })
        ));
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.format = EventFormat::Avro;
        assert_eq!(refused_field(&c), "schema_registry.url");
        c.schema_registry = Some(SchemaRegistryConfig {
            url: "registry:8081".into(),
            username: None,
            password: None,
        });
        assert_eq!(refused_field(&c), "schema_registry.url");
        c.schema_registry.as_mut().unwrap().url = "http://registry:8081".into();
        assert!(c.validate(Flavor::Mysql).is_ok());
        c.snapshot_marker = SnapshotMarker::TableTopic;
        assert_eq!(refused_field(&c), "snapshot_marker");
        c.snapshot_marker = SnapshotMarker::ControlTopic;
        c.format = EventFormat::DebeziumJsonSchema;
        assert_eq!(refused_field(&c), "schema_registry");
    }

    #[test]
    fn a_type_mapping_the_format_does_not_read_is_refused_by_name() {
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.type_mapping.decimal_handling_mode = crate::record::DecimalHandling::Double;
        match c.validate(Flavor::Mysql).unwrap_err() {
            SinkError::InvalidConfig { field, .. } => assert_eq!(field, "type_mapping"),
            e => panic!("unexpected {e:?}"),
        }
        c.format = EventFormat::DebeziumJson;
        assert!(c.validate(Flavor::Mysql).is_ok());
        c.type_mapping.bigint_unsigned_handling_mode =
            crate::record::BigintUnsignedHandling::Precise;
        assert!(c.validate(Flavor::Mysql).is_ok());
    }

    #[test]
    fn overrides_apply_after_defaults() {
        let mut c = SinkConfig::new("k:9092", "cdc");
        c.producer_overrides.insert("linger.ms".into(), "50".into());
        c.producer_overrides
            .insert("compression.type".into(), "zstd".into());
        let checked = c.validate(Flavor::Mysql).unwrap();
        assert_eq!(checked.producer.get("linger.ms"), Some("50"));
        assert_eq!(checked.producer.get("compression.type"), Some("zstd"));
    }
}
