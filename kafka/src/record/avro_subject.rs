//! The Avro side of a table version in the `avro` format: per subject, the parsed schema, its
//! [`AvroPlan`] and the [`RegistrySchema`] the runtime registers; built once per table version
//! (in the schema cache) and used for every record of it.

#[cfg(test)]
use std::collections::HashMap;
use std::sync::Arc;

#[cfg(test)]
use apache_avro::schema::{ArraySchema, Name, UnionSchema};
#[cfg(test)]
use apache_avro::Schema;
use serde::Serialize;
use serde_json::Value as Json;

use super::avro_schema::{avro_schema, parsed, AvroPlan, SchemaFailure};
use super::avro_writer::avro_datum;
use super::registry_schema::RegistrySchema;

/// One subject's schema, ready to encode with.
#[derive(Debug)]
pub(crate) struct AvroSubject {
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
        // apache-avro's parser checks the schema registered
        parsed(&json)?;
        let text = serde_json::to_string(&json).map_err(|_| "avro schema not serialisable")?;
        Ok(AvroSubject {
            plan,
            registry: Arc::new(RegistrySchema::new(subject, text)),
        })
    }

    /// The Avro binary datum (no framing) of a value in its Debezium JSON form (an envelope,
    /// a key, or their `serde_json` form), written by [`avro_datum`] under the plan.
    pub(crate) fn datum<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, SchemaFailure> {
        avro_datum(&self.plan, value)
    }

    /// The datum as apache-avro writes it for the registered schema (the test oracle of
    /// [`Self::datum`]).
    #[cfg(test)]
    pub(crate) fn datum_by_apache_avro(&self, json: &Json) -> Result<Vec<u8>, SchemaFailure> {
        use apache_avro::schema::ResolvedSchema;
        use apache_avro::writer::datum::GenericDatumWriter;
        let text: Json = serde_json::from_str(self.registry.schema()).map_err(|_| "no schema")?;
        let schema = inlined(&parsed(&text)?, &mut HashMap::new())?;
        let value = super::avro_value::avro_value(&self.plan, json)?;
        ResolvedSchema::new_with_schemata(Vec::new())
            .and_then(|names| {
                GenericDatumWriter::builder(&schema)
                    .resolved_schemata(names)
                    .build()
            })
            .and_then(|w| w.write_value_to_vec(value))
            .map_err(|_| "the avro encoder refused a value")
    }
}

/// `schema` with each named reference (`Schema::Ref`) replaced by the definition met before it
/// (the order Avro's parser defines names in).
#[cfg(test)]
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
        let value = json!({"before": null, "after": {"id": 3}});
        let Schema::Record(r) = inlined(&parsed(&text).unwrap(), &mut HashMap::new()).unwrap()
        else {
            panic!("a record")
        };
        let Schema::Union(u) = &r.fields[1].schema else {
            panic!("a union")
        };
        assert!(matches!(u.variants()[1], Schema::Record(_)));
        assert_eq!(
            s.datum_by_apache_avro(&value).unwrap(),
            vec![0, 2, 6],
            "apache-avro: null branch, record branch, zig-zag 3"
        );
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
