//! [`RecordForm`]: how `capstan verify` reads a pipeline's keys and values back as the JSON it
//! compares — the change-event envelope (`before`, `after`, `op`, `source`) and the key object,
//! whatever the pipeline's `kafka.format`:
//!
//! - `capstan_json`, `debezium_json`: the bytes are that JSON;
//! - `debezium_json_schema`: the `payload` of `{"schema": …, "payload": …}`;
//! - `avro`: the Avro datum decoded with its writer schema and mapped by [`avro_json`] — a
//!   topic record by the registry id in its Confluent framing (the topic's subjects are read
//!   once, [`SubjectSchemas`]), a record built from the source by the schema the record
//!   builder gave it.
//!
//! Pure: bytes and schemas in, JSON bytes out; `None` for what a consumer could not decode
//! (counted as unreadable). Never a value in an error.

use std::borrow::Cow;
use std::collections::HashMap;

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::Schema;
use capstan_kafka::record::{RegistrySchema, SchemaFraming, WIRE_HEADER_BYTES};
use capstan_kafka::registry::SubjectSchemas;
use serde_json::Value;

use super::avro_json::avro_json;

/// See the module documentation.
#[derive(Debug)]
pub enum RecordForm {
    /// The bytes are the JSON compared.
    Json,
    /// `{"schema": …, "payload": …}`: the payload is compared.
    ConnectJson,
    /// Avro datums; the topic's schemas by id, and the builder's parsed by their text.
    Avro {
        /// The schemas of the topic's subjects.
        topic: SubjectSchemas,
        /// The record builder's schemas, parsed once each.
        built: HashMap<String, Schema>,
    },
}

impl RecordForm {
    /// The form of a JSON format (`avro` needs [`RecordForm::avro`]).
    pub fn json(framing: SchemaFraming) -> Self {
        match framing {
            SchemaFraming::ConnectJson => RecordForm::ConnectJson,
            SchemaFraming::None | SchemaFraming::Avro => RecordForm::Json,
        }
    }

    /// The form of an `avro` topic whose subjects hold `topic`.
    pub fn avro(topic: SubjectSchemas) -> Self {
        RecordForm::Avro {
            topic,
            built: HashMap::new(),
        }
    }

    /// The schemas of the topic's subjects (read after the source, just before the topic).
    pub fn set_topic_schemas(&mut self, schemas: SubjectSchemas) {
        if let RecordForm::Avro { topic, .. } = self {
            *topic = schemas;
        }
    }

    /// A key or value read from the topic, as JSON.
    pub fn topic_json<'a>(&self, bytes: &'a [u8]) -> Option<Cow<'a, [u8]>> {
        match self {
            RecordForm::Json => Some(Cow::Borrowed(bytes)),
            RecordForm::ConnectJson => payload(bytes).map(Cow::Owned),
            RecordForm::Avro { topic, .. } => {
                let (id, datum) = unframe(bytes)?;
                decode(topic.get(id)?, datum).map(Cow::Owned)
            }
        }
    }

    /// A key or value of a topic record, when it has one: `None` when it is there and cannot
    /// be read, `Some(None)` when there is none (a tombstone, a keyless record).
    pub fn topic_part<'a>(&self, bytes: Option<&'a [u8]>) -> Option<Option<Cow<'a, [u8]>>> {
        match bytes {
            Some(b) => self.topic_json(b).map(Some),
            None => Some(None),
        }
    }

    /// A key or value the record builder made of a source row (an `avro` datum is not yet
    /// framed: `schema` is the one the builder wrote it with), as JSON.
    pub fn built_json<'a>(
        &mut self,
        bytes: &'a [u8],
        schema: Option<&RegistrySchema>,
    ) -> Option<Cow<'a, [u8]>> {
        match self {
            RecordForm::Json => Some(Cow::Borrowed(bytes)),
            RecordForm::ConnectJson => payload(bytes).map(Cow::Owned),
            RecordForm::Avro { built, .. } => {
                let text = schema?.schema();
                if !built.contains_key(text) {
                    built.insert(text.to_string(), Schema::parse_str(text).ok()?);
                }
                decode(built.get(text)?, bytes).map(Cow::Owned)
            }
        }
    }
}

/// The `payload` of a schema'd JSON record, as JSON text.
fn payload(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(bytes).ok()?;
    let payload = v.as_object_mut()?.remove("payload")?;
    serde_json::to_vec(&payload).ok()
}

/// Confluent's framing: magic byte 0, the 4-byte big-endian schema id, the datum.
fn unframe(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let header = bytes.get(..WIRE_HEADER_BYTES)?;
    if header[0] != 0 {
        return None;
    }
    let id = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    Some((id, &bytes[WIRE_HEADER_BYTES..]))
}

/// `datum` decoded with `schema` (every byte used), as JSON text.
fn decode(schema: &Schema, datum: &[u8]) -> Option<Vec<u8>> {
    let reader = GenericDatumReader::builder(schema).build().ok()?;
    let mut rest = datum;
    let value = reader.read_value(&mut rest).ok()?;
    if !rest.is_empty() {
        return None;
    }
    serde_json::to_vec(&avro_json(&value)).ok()
}

#[cfg(test)]
mod tests {
    use apache_avro::types::Value as Avro;
    use apache_avro::writer::datum::GenericDatumWriter;
    use serde_json::json;

    use super::*;

    const KEY_SCHEMA: &str = r#"{"type": "record", "name": "Key", "namespace": "t.db.orders",
        "fields": [{"name": "id", "type": "int"}]}"#;

    fn datum(id: i32) -> Vec<u8> {
        let schema = Schema::parse_str(KEY_SCHEMA).unwrap();
        GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(Avro::Record(vec![("id".into(), Avro::Int(id))]))
            .unwrap()
    }

    fn json_of(bytes: Option<Cow<'_, [u8]>>) -> Option<Value> {
        bytes.map(|b| serde_json::from_slice(&b).unwrap())
    }

    #[test]
    fn json_formats_give_the_envelope() {
        let plain = br#"{"id":1}"#;
        assert_eq!(
            RecordForm::json(SchemaFraming::None).topic_json(plain),
            Some(Cow::Borrowed(&plain[..]))
        );
        let schemad = br#"{"schema":{"type":"struct"},"payload":{"id":1}}"#;
        let form = RecordForm::json(SchemaFraming::ConnectJson);
        assert_eq!(json_of(form.topic_json(schemad)), Some(json!({"id": 1})));
        // a schema'd record without its payload, or not JSON: unreadable
        assert_eq!(form.topic_json(br#"{"id":1}"#), None);
        assert_eq!(form.topic_json(b"\x00\x01"), None);
    }

    #[test]
    fn an_avro_record_is_decoded_by_the_id_in_its_framing() {
        let topic = SubjectSchemas::from_schemas([(42, Schema::parse_str(KEY_SCHEMA).unwrap())]);
        let mut form = RecordForm::avro(topic);
        let mut framed = vec![0, 0, 0, 0, 42];
        framed.extend(datum(7));
        assert_eq!(json_of(form.topic_json(&framed)), Some(json!({"id": 7})));
        // an id the topic's subjects do not hold, a wrong magic byte, a short datum, bytes
        // left over: unreadable
        let mut other = vec![0, 0, 0, 0, 43];
        other.extend(datum(7));
        assert_eq!(form.topic_json(&other), None);
        framed[0] = 1;
        assert_eq!(form.topic_json(&framed), None);
        assert_eq!(form.topic_json(&[0, 0, 0, 0, 42]), None);
        let mut long = vec![0, 0, 0, 0, 42];
        long.extend(datum(7));
        long.push(0);
        assert_eq!(form.topic_json(&long), None);
        // what the builder made is decoded by the schema it was written with
        let built = RegistrySchema::new("t.db.orders-key".into(), KEY_SCHEMA.into());
        assert_eq!(
            json_of(form.built_json(&datum(9), Some(&built))),
            Some(json!({"id": 9}))
        );
        assert_eq!(form.built_json(&datum(9), None), None);
    }
}
