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
    entries: Arc<Mutex<Entries>>,
    /// Schemas built (not found in the cache), for tests.
    built: Arc<std::sync::atomic::AtomicU64>,
}

/// The cached schemas, and the last table version asked for.
#[derive(Debug, Default)]
struct Entries {
    map: HashMap<SchemaKeyHandle, Arc<TableSchemas>>,
    /// The version of the previous lookup, found again without hashing its column names and
    /// types when the next change shares its column and type lists (the changes of one table
    /// map do).
    last: Option<(SchemaKeyHandle, Arc<TableSchemas>)>,
}

impl Entries {
    /// The schemas of the previous lookup when `v` is the same version: the same column and
    /// type lists (by pointer, so no content is compared), topic, key and routing.
    fn last_for(&self, v: &TableVersion<'_>) -> Option<Arc<TableSchemas>> {
        let (SchemaKeyHandle(k), schemas) = self.last.as_ref()?;
        let same = Arc::ptr_eq(&k.columns, v.columns)
            && Arc::ptr_eq(&k.types, v.types)
            && k.topic == v.topic
            && k.key == v.key
            && k.routed == v.routed;
        same.then(|| Arc::clone(schemas))
    }
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
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = entries.last_for(v) {
            return s;
        }
        let handle = SchemaKeyHandle(SchemaKey {
            topic: v.topic.to_string(),
            columns: Arc::clone(v.columns),
            types: Arc::clone(v.types),
            key: v.key.to_vec(),
            routed: v.routed,
        });
        let schemas = match entries.map.get(&handle) {
            Some(s) => Arc::clone(s),
            None => {
                if entries.map.len() >= MAX_ENTRIES {
                    entries.map.clear();
                }
                let schemas = Arc::new(build_schemas(v));
                self.built
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                entries.map.insert(handle.clone(), Arc::clone(&schemas));
                schemas
            }
        };
        entries.last = Some((handle, Arc::clone(&schemas)));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn version<'a>(
        topic: &'a str,
        columns: &'a Arc<[String]>,
        types: &'a ColumnTypes,
        key: &'a [usize],
        mapping: &'a TypeMapping,
    ) -> TableVersion<'a> {
        TableVersion {
            topic,
            columns,
            types,
            key,
            routed: false,
            flavor: Flavor::Mysql,
            mapping,
            framing: SchemaFraming::ConnectJson,
        }
    }

    #[test]
    fn the_last_version_is_found_again_only_when_it_is_the_same() {
        let mapping = TypeMapping::default();
        let int = ColumnType {
            sql: SqlType::Int {
                bytes: 4,
                unsigned: false,
            },
            nullable: false,
        };
        let text = ColumnType {
            sql: SqlType::Text,
            nullable: true,
        };
        let cols: Arc<[String]> = vec!["id".to_string(), "v".to_string()].into();
        let a: ColumnTypes = vec![int.clone(), int.clone()].into();
        let b: ColumnTypes = vec![int.clone(), text].into();
        let a_again: ColumnTypes = a.to_vec().into();
        let cache = SchemaCache::default();
        let sa = cache.get(&version("t", &cols, &a, &[0], &mapping));
        let sb = cache.get(&version("t", &cols, &b, &[0], &mapping));
        assert!(!Arc::ptr_eq(&sa, &sb), "another type list: another version");
        // back to A, through the map; and through the last-version path
        assert!(Arc::ptr_eq(
            &sa,
            &cache.get(&version("t", &cols, &a, &[0], &mapping))
        ));
        assert!(Arc::ptr_eq(
            &sa,
            &cache.get(&version("t", &cols, &a, &[0], &mapping))
        ));
        // the same content in new lists is the same version
        assert!(Arc::ptr_eq(
            &sa,
            &cache.get(&version("t", &cols, &a_again, &[0], &mapping))
        ));
        assert_eq!(cache.built(), 2);
        // the same lists under another key or topic are other versions
        let by_v = cache.get(&version("t", &cols, &a, &[1], &mapping));
        let other_topic = cache.get(&version("u", &cols, &a, &[0], &mapping));
        assert!(!Arc::ptr_eq(&sa, &by_v));
        assert!(!Arc::ptr_eq(&sa, &other_topic));
        assert!(!Arc::ptr_eq(&by_v, &other_topic));
        assert_eq!(cache.built(), 4);
    }
}
