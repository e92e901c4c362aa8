//! The Avro side of a table version in the `avro` format: per subject, the parsed schema, its
//! [`AvroPlan`] and the [`RegistrySchema`] the runtime registers; built once per table version
//! (in the schema cache) and used for every record of it.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::schema::{ArraySchema, Name, ResolvedSchema, UnionSchema};
use apache_avro::writer::datum::GenericDatumWriter;
use apache_avro::Schema;
use serde_json::Value as Json;

use super::avro_schema::{avro_schema, parsed, AvroPlan, SchemaFailure};
use super::avro_value::avro_value;
use super::registry_schema::RegistrySchema;

/// One subject's schema, ready to encode with.
#[derive(Debug)]
pub(crate) struct AvroSubject {
    /// The parsed schema with every named reference replaced by its definition, so a datum is
    /// written without resolving names (which costs a walk of the whole schema per datum).
    schema: Schema,
    plan: AvroPlan,
    pub(crate) registry: Arc<RegistrySchema>,
}

/// The key and value subjects of one table version.
#[derive(Debug)]
pub(crate) struct AvroSchemas {
    /// `<topic>-key`; `None` for a table without a record key.
    pub(crate) key: Option<AvroSubject>,
    /// `<topic>-value`.
    pub(crate) value: AvroSubject,
}

impl AvroSubject {
    /// The subject `subject`'s schema, derived from the Connect schema `connect`.
    pub(crate) fn build(subject: String, connect: &Json) -> Result<Self, SchemaFailure> {
        let (json, plan) = avro_schema(connect)?;
        let schema = inlined(&parsed(&json)?, &mut HashMap::new())?;
        let text = serde_json::to_string(&json).map_err(|_| "avro schema not serialisable")?;
        Ok(AvroSubject {
            schema,
            plan,
            registry: Arc::new(RegistrySchema::new(subject, text)),
        })
    }

    /// The Avro binary datum of a Connect value in its Debezium JSON form (no framing).
    pub(crate) fn datum(&self, json: &Json) -> Result<Vec<u8>, SchemaFailure> {
        let value = avro_value(&self.plan, json)?;
        // validation stays on: a value the plan mapped wrongly fails here, not at a consumer
        ResolvedSchema::new_with_schemata(Vec::new())
            .and_then(|names| {
                GenericDatumWriter::builder(&self.schema)
                    .resolved_schemata(names)
                    .build()
            })
            .and_then(|w| w.write_value_to_vec(value))
            .map_err(|_| "the avro encoder refused a value")
    }
}

/// `schema` with each named reference (`Schema::Ref`) replaced by the definition met before it
/// (the order Avro's parser defines names in).
fn inlined(schema: &Schema, defined: &mut HashMap<Name, Schema>) -> Result<Schema, SchemaFailure> {
    Ok(match schema {
        Schema::Ref { name } => defined
            .get(name)
            .cloned()
            .ok_or("an avro reference names no definition")?,
        Schema::Record(record) => {
            let mut record = record.clone();
            for field in &mut record.fields {
                field.schema = inlined(&field.schema, defined)?;
            }
            let name = record.name.clone();
            let schema = Schema::Record(record);
            defined.insert(name, schema.clone());
            schema
        }
        Schema::Union(union) => {
            let variants = union
                .variants()
                .iter()
                .map(|v| inlined(v, defined))
                .collect::<Result<Vec<_>, _>>()?;
            Schema::Union(UnionSchema::new(variants).map_err(|_| "an avro union is invalid")?)
        }
        Schema::Array(array) => Schema::Array(ArraySchema {
            items: Box::new(inlined(&array.items, defined)?),
            attributes: array.attributes.clone(),
        }),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn references_are_inlined_for_the_writer_only() {
        let connect = json!({"type": "struct", "optional": false, "name": "a.Envelope", "fields": [
            {"field": "before", "type": "struct", "optional": true, "name": "a.Value",
             "fields": [{"field": "id", "type": "int32", "optional": false}]},
            {"field": "after", "type": "struct", "optional": true, "name": "a.Value",
             "fields": [{"field": "id", "type": "int32", "optional": false}]}]});
        let s = AvroSubject::build("a-value".into(), &connect).unwrap();
        // the registered text keeps the reference
        let text: Json = serde_json::from_str(s.registry.schema()).unwrap();
        assert_eq!(text["fields"][1]["type"], json!(["null", "a.Value"]));
        let Schema::Record(r) = &s.schema else {
            panic!("a record")
        };
        let Schema::Union(u) = &r.fields[1].schema else {
            panic!("a union")
        };
        assert!(matches!(u.variants()[1], Schema::Record(_)));
        let datum = s
            .datum(&json!({"before": null, "after": {"id": 3}}))
            .unwrap();
        assert_eq!(
            datum,
            vec![0, 2, 6],
            "null branch, record branch, zig-zag 3"
        );
    }
}
