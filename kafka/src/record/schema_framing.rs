//! Whether and how each key and value carries its schema: a decision made once, from the
//! sink's `format`, and passed to the record builder.

/// How a record's key and value carry their schemas.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum SchemaFraming {
    /// No schema (`capstan_json`, `debezium_json`).
    #[default]
    None,
    /// `{"schema": …, "payload": …}` with the Kafka Connect schema, as Debezium's JSON
    /// converter writes with `schemas.enable=true` (`debezium_json_schema`).
    ConnectJson,
    /// Avro datums of the Avro schemas derived from the Connect schemas, framed with their
    /// Schema Registry ids in Confluent's wire format (`avro`; the runtime frames them).
    Avro,
}
