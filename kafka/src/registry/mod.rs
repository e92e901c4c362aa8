//! The Schema Registry runtime of `format: avro`: looks the schema ids of the records the
//! (pure) record builder made up, registering each schema once, and frames the Avro datums in
//! Confluent's wire format before the records are sent.

mod registry_failure;
mod schema_registrar;
mod subject_schemas;

pub use registry_failure::classify;
pub use schema_registrar::SchemaRegistrar;
pub use subject_schemas::SubjectSchemas;
