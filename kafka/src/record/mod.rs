//! Pure mapping from changes to Kafka records: topics, keys, Debezium-style envelopes,
//! transaction metadata, schema-change events and the headers that let a consumer recognise
//! a duplicate.
//! The wire format is specified in `docs/event-format.md`.

mod avro_field_index;
mod avro_schema;
mod avro_subject;
#[cfg(test)]
mod avro_value;
mod avro_writer;
mod charset_decoder;
mod connect_schema;
mod debezium_value;
mod envelope;
mod epoch_days;
#[cfg(test)]
mod golden_avro_datums;
#[cfg(test)]
mod golden_avro_schema;
#[cfg(test)]
mod golden_column_types;
#[cfg(test)]
mod golden_connect_schema;
#[cfg(test)]
mod golden_debezium_types;
#[cfg(test)]
mod golden_schema_changes;
#[cfg(test)]
mod golden_tests;
mod json_value;
mod kafka_record;
mod message_key;
mod record_builder;
#[cfg(test)]
mod record_builder_bench;
mod record_emitter;
mod registry_schema;
mod schema_cache;
mod schema_framing;
mod table_change;
mod topic_router;
mod topic_template;
mod type_mapping;
mod value_encoding;

pub use kafka_record::{
    KafkaRecord, HEADER_DEBEZIUM_NEWKEY, HEADER_DEBEZIUM_OLDKEY, HEADER_EPOCH, HEADER_PIPELINE,
    HEADER_POSITION, HEADER_RECORD, HEADER_ROW,
};
pub use message_key::MessageKeys;
pub use record_builder::{
    BinlogCoordinates, RecordBuilder, RecordContext, RecordOptions, SnapshotChunk,
    SCHEMA_CHANGE_POSITION_PREFIX, SOURCE_VERSION,
};
pub use record_emitter::TransactionProgress;
pub use registry_schema::{PendingSchemas, RegistrySchema, WIRE_HEADER_BYTES};
pub use schema_framing::SchemaFraming;
pub use topic_router::{TopicRoute, TopicRouter, AMBIGUOUS_ROUTE, PHYSICAL_TABLE_KEY_FIELD};
pub(crate) use topic_template::check_topic_name;
pub use topic_template::{
    is_legal_topic_char, sanitize_topic_part, TopicTemplate, DEFAULT_TOPIC_TEMPLATE, MAX_TOPIC_LEN,
};
pub use type_mapping::{
    BigintUnsignedHandling, BinaryHandling, DecimalHandling, TimePrecision, TypeMapping,
};
pub use value_encoding::ValueEncoding;
