//! The Schema Registry schemas a record of the `avro` format still needs: the record builder
//! (pure) writes the Avro datums and names the subject and schema of each; the runtime's
//! [`crate::registry::SchemaRegistrar`] looks their ids up (registering them once) and frames
//! the datums in Confluent's wire format before the record is sent.

use std::sync::{Arc, OnceLock};

/// One schema under one subject (`<topic>-key` or `<topic>-value`), shared by every record of
/// a table version. Its registry id is filled in once, by the runtime.
pub struct RegistrySchema {
    subject: String,
    schema: String,
    id: OnceLock<u32>,
}

impl RegistrySchema {
    /// A schema not yet registered.
    pub fn new(subject: String, schema: String) -> Self {
        RegistrySchema {
            subject,
            schema,
            id: OnceLock::new(),
        }
    }

    /// The subject (TopicNameStrategy: `<topic>-key`, `<topic>-value`).
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The Avro schema, as registered (JSON text).
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The registry's id of the schema, once known.
    pub fn id(&self) -> Option<u32> {
        self.id.get().copied()
    }

    /// Records the registry's id (the first one set stays).
    pub fn set_id(&self, id: u32) {
        let _ = self.id.set(id);
    }
}

impl PartialEq for RegistrySchema {
    fn eq(&self, other: &Self) -> bool {
        self.subject == other.subject && self.schema == other.schema
    }
}

impl Eq for RegistrySchema {}

impl std::fmt::Debug for RegistrySchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistrySchema")
            .field("subject", &self.subject)
            .field("id", &self.id())
            .finish_non_exhaustive()
    }
}

/// The schemas whose ids a record's key and value wait for: each datum is framed as
/// `0x00`, the 4-byte big-endian id, then the datum.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PendingSchemas {
    /// The key's schema (`None`: the key is not Avro, or there is none).
    pub key: Option<Arc<RegistrySchema>>,
    /// The value's schema (`None` for a tombstone).
    pub value: Option<Arc<RegistrySchema>>,
}

/// The bytes Confluent's framing adds to a datum: the magic byte and the 4-byte id.
pub const WIRE_HEADER_BYTES: usize = 5;

impl PendingSchemas {
    /// The bytes the framing will add to the record.
    pub fn framing_bytes(&self) -> usize {
        WIRE_HEADER_BYTES * (usize::from(self.key.is_some()) + usize::from(self.value.is_some()))
    }
}
