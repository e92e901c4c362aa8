//! [`SubjectSchemas`]: every Avro schema registered under a topic's subjects (`<topic>-key`,
//! `<topic>-value`), by registry id — what a reader of the topic needs to decode each record
//! by the id in its Confluent framing (`capstan verify`). Read once before the topic is
//! consumed, so the decoding itself is pure.

use std::collections::HashMap;

use apache_avro::Schema;
use schema_registry_converter::async_impl::schema_registry::{
    get_all_subjects, get_all_versions, get_schema_by_subject_and_version,
};
use schema_registry_converter::schema_registry_common::SchemaType;

use super::registry_failure::classify;
use super::schema_registrar::SchemaRegistrar;
use crate::SinkError;

/// The schemas of a topic's subjects, by id.
#[derive(Debug, Default)]
pub struct SubjectSchemas {
    by_id: HashMap<u32, Schema>,
}

impl SubjectSchemas {
    /// Every version of the topic's key and value subjects (a subject the registry does not
    /// have contributes none).
    pub async fn fetch(registry: &SchemaRegistrar, topic: &str) -> Result<Self, SinkError> {
        let settings = registry.settings();
        let present = get_all_subjects(settings)
            .await
            .map_err(|e| classify(topic, &e))?;
        let mut by_id = HashMap::new();
        for subject in [format!("{topic}-key"), format!("{topic}-value")] {
            if !present.contains(&subject) {
                continue;
            }
            let versions = get_all_versions(settings, subject.clone())
                .await
                .map_err(|e| classify(&subject, &e))?;
            for version in versions {
                let registered =
                    get_schema_by_subject_and_version(settings, &subject, Some(version))
                        .await
                        .map_err(|e| classify(&subject, &e))?;
                if registered.schema_type != SchemaType::Avro {
                    continue;
                }
                let schema = Schema::parse_str(&registered.schema).map_err(|_| {
                    SinkError::InvalidConfig {
                        field: "schema_registry",
                        reason: format!(
                            "subject {subject} version {version} holds a schema that is not valid Avro"
                        ),
                    }
                })?;
                by_id.insert(registered.id, schema);
            }
        }
        Ok(SubjectSchemas { by_id })
    }

    /// The schema registered with `id`, if it is one of the topic's.
    pub fn get(&self, id: u32) -> Option<&Schema> {
        self.by_id.get(&id)
    }

    /// How many schemas were read.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True when the topic's subjects hold no Avro schema.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// A set built from known schemas (tests).
    pub fn from_schemas(schemas: impl IntoIterator<Item = (u32, Schema)>) -> Self {
        SubjectSchemas {
            by_id: schemas.into_iter().collect(),
        }
    }
}
