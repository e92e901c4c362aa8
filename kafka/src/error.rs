//! The sink's one error type.
//!
//! Every variant has a stable snake_case [`SinkError::code`] that the pipeline status and the
//! REST API show. Messages are lowercase and value-free: they may name a table, a column, a
//! topic, a charset or a librdkafka error code, never a row value, a key, a producer setting's
//! value (it may be a password) or a record payload.

use std::fmt;

/// What the pipeline runner should do about an error.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Consequence {
    /// The configuration is wrong: refuse it, nothing was started.
    Refuse,
    /// Halt the pipeline with the error's code; retrying the same input fails the same way.
    Halt,
    /// Another owner took over: stop publishing at once, without retry.
    Fenced,
    /// Transient: the runner may rebuild its producer and retry the batch (not yet
    /// checkpointed, so at-least-once holds; in exactly-once mode the batch was aborted).
    Retry,
}

/// Delivery errors that a retry of the same record meets again (the record or the topic is
/// refused as it is): a halt, not a retry. librdkafka's code names.
const PERMANENT_DELIVERY_CODES: [&str; 5] = [
    "MessageSizeTooLarge",
    "InvalidMessageSize",
    "InvalidMessage",
    "InvalidRecord",
    "TopicAuthorizationFailed",
];

/// A sink error. See the module documentation for the rules every variant follows.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// A sink configuration field is invalid.
    #[error("invalid sink config: {field}: {reason}")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A producer override would weaken a delivery guarantee or is owned by capstan.
    #[error("producer override {key} is not allowed: {reason}")]
    ForbiddenOverride {
        /// The librdkafka property name.
        key: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// librdkafka rejected a producer override (unknown property or malformed value).
    #[error("producer override {key} was rejected by librdkafka")]
    InvalidOverride {
        /// The librdkafka property name (never its value).
        key: String,
    },
    /// A text column's character set has no decoder.
    #[error("column {column} of {table}: character set {charset} is not supported")]
    UnsupportedCharset {
        /// `schema.table`.
        table: String,
        /// Column name.
        column: String,
        /// Character set name (`unknown` for an unknown collation id).
        charset: String,
    },
    /// A text column's bytes are not valid in its character set.
    #[error("column {column} of {table}: bytes are not valid {charset}")]
    InvalidText {
        /// `schema.table`.
        table: String,
        /// Column name.
        column: String,
        /// Character set name.
        charset: String,
    },
    /// A FLOAT, DOUBLE or VECTOR element is NaN or infinite (JSON cannot carry it).
    #[error("column {column} of {table}: number is not finite")]
    NonFiniteNumber {
        /// `schema.table`.
        table: String,
        /// Column name.
        column: String,
    },
    /// A change lacks the row image its operation requires, or its key names a missing column.
    #[error("change of {table} is malformed: {reason}")]
    MalformedChange {
        /// `schema.table`.
        table: String,
        /// What is missing.
        reason: &'static str,
    },
    /// A column that `message_key_columns` names for a table is not in its row (dropped or
    /// renamed since the pipeline was configured).
    #[error("message key column {column} of {table} is not in the row")]
    MessageKeyColumnMissing {
        /// `schema.table`.
        table: String,
        /// The column name.
        column: String,
    },
    /// `format: avro`: a table version has no Avro schema, or a value does not fit it (a
    /// column name two columns share after Avro's name adjustment, for instance).
    #[error("avro encoding of {table} failed: {reason}")]
    AvroEncodingFailed {
        /// `schema.table`.
        table: String,
        /// What failed (value-free).
        reason: &'static str,
    },
    /// `format: avro`: the Schema Registry cannot be reached or answered with a server error;
    /// retried.
    #[error("schema registry unavailable: {reason}")]
    SchemaRegistryUnavailable {
        /// What failed (an HTTP status or a connection failure; never a credential).
        reason: String,
    },
    /// `format: avro`: the Schema Registry refused the schema of a subject as incompatible
    /// with the subject's earlier schemas under its compatibility level (HTTP 409).
    #[error("schema registry refused the schema of subject {subject} as incompatible")]
    SchemaIncompatible {
        /// The subject (`<topic>-key` or `<topic>-value`).
        subject: String,
    },
    /// `format: avro`: the Schema Registry refused a registration for another reason (an
    /// invalid schema, missing authorization).
    #[error("schema registry refused subject {subject}: {reason}")]
    SchemaRegistryRefused {
        /// The subject.
        subject: String,
        /// The HTTP status or the registry's error code.
        reason: String,
    },
    /// The topic a table maps to is not a legal Kafka topic name.
    #[error("topic for {table} is invalid: {reason}")]
    InvalidTopic {
        /// `schema.table`.
        table: String,
        /// Why.
        reason: &'static str,
    },
    /// A record could not be delivered and librdkafka gave up (retries exhausted or a
    /// permanent broker error).
    #[error("kafka delivery failed: {kafka_code}")]
    DeliveryFailed {
        /// librdkafka's error code name.
        kafka_code: String,
        /// True when librdkafka reports the producer itself unusable.
        fatal: bool,
    },
    /// A record is larger than the producer may send (`message.max.bytes`): Kafka would refuse
    /// it on every attempt. Raise `message.max.bytes` in `kafka.producer_overrides` (and the
    /// topic's `max.message.bytes` on the broker), or exclude the column.
    #[error(
        "record of {bytes} bytes for table {table} (topic {topic}) exceeds the producer's message.max.bytes of {limit} bytes"
    )]
    RecordTooLarge {
        /// `schema.table` the record belongs to.
        table: String,
        /// The topic it was for.
        topic: String,
        /// Its size (key, value and headers).
        bytes: usize,
        /// The producer's `message.max.bytes`.
        limit: usize,
    },
    /// This worker lost its lease (it was cut off, frozen, or the pipeline moved) while it
    /// published: it enqueues nothing more and its unsent records were purged.
    #[error("publishing stopped: this worker no longer holds its lease")]
    OwnershipLost,
    /// Another producer with the same `transactional.id` (a newer owner) fenced this one.
    #[error("kafka producer was fenced by a newer owner")]
    ProducerFenced,
    /// A Kafka transaction failed; it has been aborted (or will be by the next owner).
    #[error("kafka transaction failed: {kafka_code}")]
    TransactionFailed {
        /// librdkafka's error code name.
        kafka_code: String,
        /// True when the error may clear on retry with a new transaction.
        retriable: bool,
    },
    /// Creating or talking to a Kafka client failed outside a delivery.
    #[error("kafka client error: {kafka_code}")]
    Client {
        /// librdkafka's error code name (or a short description of the step).
        kafka_code: String,
    },
    /// A Kafka operation did not finish in time.
    #[error("kafka operation timed out: {operation}")]
    Timeout {
        /// Which operation.
        operation: &'static str,
    },
    /// Kafka refused to create a topic capstan writes (`kafka.topics`).
    #[error("creating topic {topic} failed: kafka {kafka_code}")]
    TopicCreationFailed {
        /// The topic.
        topic: String,
        /// librdkafka's error code name (`InvalidReplicationFactor`, `PolicyViolation`, …).
        kafka_code: String,
        /// True when a later attempt may succeed (a timeout, a controller moving).
        retriable: bool,
    },
    /// The committed offsets record of a pipeline cannot be parsed.
    #[error("offsets record of pipeline {pipeline} is unreadable")]
    OffsetsRecordInvalid {
        /// Pipeline name.
        pipeline: String,
    },
    /// The Kafka offsets record and the Raft checkpoint each cover something the other does
    /// not: neither can be trusted to resume from.
    #[error("kafka offsets record and raft checkpoint of pipeline {pipeline} diverged")]
    CheckpointsDiverged {
        /// Pipeline name.
        pipeline: String,
    },
    /// The mock cluster could not be created or configured.
    #[error("dev cluster error: {reason}")]
    DevCluster {
        /// What failed.
        reason: String,
    },
}

impl SinkError {
    /// The stable snake_case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            SinkError::InvalidConfig { .. } => "invalid_sink_config",
            SinkError::ForbiddenOverride { .. } => "forbidden_producer_override",
            SinkError::InvalidOverride { .. } => "invalid_producer_override",
            SinkError::UnsupportedCharset { .. } => "unsupported_charset",
            SinkError::InvalidText { .. } => "invalid_text",
            SinkError::NonFiniteNumber { .. } => "non_finite_number",
            SinkError::MalformedChange { .. } => "malformed_change",
            SinkError::MessageKeyColumnMissing { .. } => "message_key_column_missing",
            SinkError::InvalidTopic { .. } => "invalid_topic",
            SinkError::AvroEncodingFailed { .. } => "avro_encoding_failed",
            SinkError::SchemaRegistryUnavailable { .. } => "schema_registry_unavailable",
            SinkError::SchemaIncompatible { .. } => "schema_incompatible",
            SinkError::SchemaRegistryRefused { .. } => "schema_registry_refused",
            SinkError::DeliveryFailed { .. } => "kafka_delivery_failed",
            SinkError::RecordTooLarge { .. } => "kafka_record_too_large",
            SinkError::ProducerFenced => "kafka_producer_fenced",
            SinkError::OwnershipLost => "lease_expired",
            SinkError::TransactionFailed { .. } => "kafka_transaction_failed",
            SinkError::Client { .. } => "kafka_client_error",
            SinkError::Timeout { .. } => "kafka_timeout",
            SinkError::TopicCreationFailed { .. } => "kafka_topic_creation_failed",
            SinkError::OffsetsRecordInvalid { .. } => "offsets_record_invalid",
            SinkError::CheckpointsDiverged { .. } => "checkpoints_diverged",
            SinkError::DevCluster { .. } => "dev_cluster_error",
        }
    }

    /// What the runner should do about this error.
    pub fn consequence(&self) -> Consequence {
        match self {
            SinkError::InvalidConfig { .. }
            | SinkError::ForbiddenOverride { .. }
            | SinkError::InvalidOverride { .. } => Consequence::Refuse,
            SinkError::ProducerFenced | SinkError::OwnershipLost => Consequence::Fenced,
            SinkError::Timeout { .. }
            | SinkError::Client { .. }
            | SinkError::SchemaRegistryUnavailable { .. } => Consequence::Retry,
            SinkError::DeliveryFailed { kafka_code, fatal } => {
                if *fatal || PERMANENT_DELIVERY_CODES.contains(&kafka_code.as_str()) {
                    Consequence::Halt
                } else {
                    Consequence::Retry
                }
            }
            SinkError::TransactionFailed { retriable, .. }
            | SinkError::TopicCreationFailed { retriable, .. } => {
                if *retriable {
                    Consequence::Retry
                } else {
                    Consequence::Halt
                }
            }
            SinkError::UnsupportedCharset { .. }
            | SinkError::InvalidText { .. }
            | SinkError::NonFiniteNumber { .. }
            | SinkError::MalformedChange { .. }
            | SinkError::MessageKeyColumnMissing { .. }
            | SinkError::InvalidTopic { .. }
            | SinkError::AvroEncodingFailed { .. }
            | SinkError::SchemaIncompatible { .. }
            | SinkError::SchemaRegistryRefused { .. }
            | SinkError::RecordTooLarge { .. }
            | SinkError::OffsetsRecordInvalid { .. }
            | SinkError::CheckpointsDiverged { .. }
            | SinkError::DevCluster { .. } => Consequence::Halt,
        }
    }
}

impl fmt::Debug for SinkError {
    /// The code and the (value-free) message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SinkError({}: {self})", self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_messages_lowercase() {
        let errors = [
            SinkError::ProducerFenced,
            SinkError::InvalidText {
                table: "s.t".into(),
                column: "c".into(),
                charset: "latin1".into(),
            },
            SinkError::Timeout { operation: "flush" },
        ];
        for e in &errors {
            assert!(e.code().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            let m = e.to_string();
            assert!(m.chars().next().is_some_and(|c| c.is_lowercase()), "{m}");
            assert!(!m.ends_with('.'));
        }
        assert_eq!(SinkError::ProducerFenced.consequence(), Consequence::Fenced);
    }

    #[test]
    fn a_record_kafka_refuses_as_it_is_halts_and_a_timeout_retries() {
        let delivery = |code: &str| SinkError::DeliveryFailed {
            kafka_code: code.into(),
            fatal: false,
        };
        // the broker's topic limit below the producer's: every retry meets it again
        assert_eq!(
            delivery("MessageSizeTooLarge").consequence(),
            Consequence::Halt
        );
        assert_eq!(
            delivery("TopicAuthorizationFailed").consequence(),
            Consequence::Halt
        );
        assert_eq!(
            delivery("MessageTimedOut").consequence(),
            Consequence::Retry
        );
        let too_large = SinkError::RecordTooLarge {
            table: "shop.docs".into(),
            topic: "p.shop.docs".into(),
            bytes: 5_243_010,
            limit: 1_000_000,
        };
        assert_eq!(too_large.consequence(), Consequence::Halt);
        assert_eq!(too_large.code(), "kafka_record_too_large");
        assert_eq!(
            too_large.to_string(),
            "record of 5243010 bytes for table shop.docs (topic p.shop.docs) exceeds the producer's message.max.bytes of 1000000 bytes"
        );
    }
}
