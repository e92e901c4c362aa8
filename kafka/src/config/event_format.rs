//! The `format` of a pipeline's change events, as users choose it.

use serde::{Deserialize, Serialize};

/// How change events and keys are written.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventFormat {
    /// capstan's JSON (the default): Debezium's envelope with capstan's value forms (ISO
    /// text for temporal values, decimals as exact text).
    #[default]
    CapstanJson,
    /// Debezium's MySQL-connector encodings, as Debezium's JSON converter writes them with
    /// `schemas.enable=false`; the sink's `type_mapping` chooses among Debezium's modes.
    DebeziumJson,
    /// As `debezium_json`, each key and value wrapped with its Kafka Connect schema
    /// (`{"schema": …, "payload": …}`), as Debezium's JSON converter writes them with
    /// `schemas.enable=true`.
    DebeziumJsonSchema,
    /// Debezium's encodings and schemas as Debezium's Avro converter (Confluent's) writes
    /// them: each key and value an Avro datum of the Avro schema derived from its Kafka
    /// Connect schema, in Confluent's wire format (magic byte 0, the schema's 4-byte registry
    /// id, the datum), schemas registered in `kafka.schema_registry` under `<topic>-key` and
    /// `<topic>-value`.
    Avro,
}

impl EventFormat {
    /// True for the formats that read the sink's `type_mapping`.
    pub fn is_debezium(self) -> bool {
        matches!(
            self,
            EventFormat::DebeziumJson | EventFormat::DebeziumJsonSchema | EventFormat::Avro
        )
    }
}
