//! The schemas of the schema'd formats, built once per table version (its topic, column names,
//! column types and key columns): for `debezium_json_schema` the Connect schemas, kept
//! serialized, so each record only splices its payload into `{"schema": …, "payload": …}`; for
//! `avro` the Avro schemas derived from them, parsed, with their registry subjects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use capstan_core::change::{ColumnType, ColumnTypes, SqlType};
use capstan_core::position::Flavor;

use super::avro_schema::SchemaFailure;
use super::avro_subject::{AvroSchemas, AvroSubject};
use super::connect_schema::{envelope_schema, row_schema};
use super::schema_framing::SchemaFraming;
use super::topic_router::PHYSICAL_TABLE_KEY_FIELD;
use super::type_mapping::TypeMapping;

/// The type of the physical-table key field of a routed table: a required string.
const PHYSICAL_TABLE_TYPE: ColumnType = ColumnType {
    sql: SqlType::Text,
    nullable: false,
};

/// Table versions kept at most; past this the cache starts over (a pipeline with more live
/// table versions than this rebuilds some schemas, and stays correct).
const MAX_ENTRIES: usize = 4096;

/// The key and envelope schemas of one table version.
#[derive(Debug)]
pub(crate) struct TableSchemas {
    /// The key struct's Connect schema, serialized (`<topic>.Key`); `None` for a table without
    /// a record key, and in the `avro` format.
    pub(crate) key: Option<Vec<u8>>,
    /// The envelope's Connect schema, serialized (`<topic>.Envelope`; empty in `avro`).
    pub(crate) value: Vec<u8>,
    /// `avro`: the Avro schemas (or why the table version has none); `None` otherwise.
    pub(crate) avro: Option<Result<AvroSchemas, SchemaFailure>>,
}

/// What identifies a table version's schemas.
#[derive(Clone, PartialEq, Eq, Hash)]
struct SchemaKey {
    topic: String,
    columns: Arc<[String]>,
    types: ColumnTypes,
    key: Vec<usize>,
    routed: bool,
}

/// Schemas by table version, shared by the clones of one record builder.
#[derive(Clone, Debug, Default)]
pub(crate) struct SchemaCache {
    entries: Arc<Mutex<HashMap<SchemaKeyHandle, Arc<TableSchemas>>>>,
    /// Schemas built (not found in the cache), for tests.
    built: Arc<std::sync::atomic::AtomicU64>,
}

/// [`SchemaKey`] behind a newtype, so the map's `Debug` does not list column names.
#[derive(Clone, PartialEq, Eq, Hash)]
struct SchemaKeyHandle(SchemaKey);

impl std::fmt::Debug for SchemaKeyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.topic)
    }
}

/// One table version's inputs to its schemas.
pub(crate) struct TableVersion<'a> {
    pub(crate) topic: &'a str,
    pub(crate) columns: &'a Arc<[String]>,
    pub(crate) types: &'a ColumnTypes,
    pub(crate) key: &'a [usize],
    /// The key ends with the physical-table field (a routed table).
    pub(crate) routed: bool,
    pub(crate) flavor: Flavor,
    pub(crate) mapping: &'a TypeMapping,
    /// Connect JSON or Avro (the cache of one builder holds one kind).
    pub(crate) framing: SchemaFraming,
}

/// Builds the schemas of a table version (uncached).
pub(crate) fn build_schemas(v: &TableVersion<'_>) -> TableSchemas {
    let named = |i: usize| -> Option<(&str, &ColumnType)> {
        Some((v.columns.get(i)?.as_str(), v.types.get(i)?))
    };
    let row: Vec<(&str, &ColumnType)> = (0..v.columns.len()).filter_map(named).collect();
    let value_row = row_schema(&format!("{}.Value", v.topic), true, &row, v.mapping);
    let envelope = envelope_schema(v.topic, &value_row, v.flavor);
    let key = (!v.key.is_empty()).then(|| {
        let mut cols: Vec<(&str, &ColumnType)> = v.key.iter().filter_map(|&i| named(i)).collect();
        if v.routed {
            cols.push((PHYSICAL_TABLE_KEY_FIELD, &PHYSICAL_TABLE_TYPE));
        }
        row_schema(&format!("{}.Key", v.topic), false, &cols, v.mapping)
    });
    if v.framing == SchemaFraming::Avro {
        return TableSchemas {
            key: None,
            value: Vec::new(),
            avro: Some(avro_schemas(v.topic, key.as_ref(), &envelope)),
        };
    }
    TableSchemas {
        key: key.map(|k| serde_json::to_vec(&k).unwrap_or_default()),
        value: serde_json::to_vec(&envelope).unwrap_or_default(),
        avro: None,
    }
}

/// The Avro subjects of a table version: `<topic>-key` (with a key) and `<topic>-value`.
fn avro_schemas(
    topic: &str,
    key: Option<&serde_json::Value>,
    envelope: &serde_json::Value,
) -> Result<AvroSchemas, SchemaFailure> {
    Ok(AvroSchemas {
        key: key
            .map(|k| AvroSubject::build(format!("{topic}-key"), k))
            .transpose()?,
        value: AvroSubject::build(format!("{topic}-value"), envelope)?,
    })
}

impl SchemaCache {
    /// The schemas of a table version, built on first use.
    pub(crate) fn get(&self, v: &TableVersion<'_>) -> Arc<TableSchemas> {
        let handle = SchemaKeyHandle(SchemaKey {
            topic: v.topic.to_string(),
            columns: Arc::clone(v.columns),
            types: Arc::clone(v.types),
            key: v.key.to_vec(),
            routed: v.routed,
        });
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = entries.get(&handle) {
            return Arc::clone(s);
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        let schemas = Arc::new(build_schemas(v));
        self.built
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        entries.insert(handle, Arc::clone(&schemas));
        schemas
    }

    /// How many schemas were built rather than found.
    #[cfg(test)]
    pub(crate) fn built(&self) -> u64 {
        self.built.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// `{"schema":<schema>,"payload":<payload>}`: JsonConverter's form with `schemas.enable=true`.
pub(crate) fn with_schema(schema: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(schema.len() + payload.len() + 24);
    out.extend_from_slice(b"{\"schema\":");
    out.extend_from_slice(schema);
    out.extend_from_slice(b",\"payload\":");
    out.extend_from_slice(payload);
    out.push(b'}');
    out
}

/// A record's key and value in the schema'd format when `schemas` is given (each wrapped
/// with its schema), else as they are.
pub(crate) fn framed(
    schemas: Option<&TableSchemas>,
    key: Option<Vec<u8>>,
    value: Vec<u8>,
) -> (Option<Vec<u8>>, Vec<u8>) {
    match schemas {
        None => (key, value),
        Some(s) => (
            key.map(|k| match &s.key {
                Some(schema) => with_schema(schema, &k),
                None => k,
            }),
            with_schema(&s.value, &value),
        ),
    }
}
