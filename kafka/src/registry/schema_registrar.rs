//! [`SchemaRegistrar`]: the registry I/O of `format: avro`. The record builder (pure) leaves
//! each Avro record with the [`RegistrySchema`]s its key and value need; before a batch is
//! sent, [`SchemaRegistrar::frame`] resolves their ids — from the schema itself once known
//! (the common case: one lookup per table version), else from this registrar's map, else by
//! registering the schema under its subject (the registry answers an already registered
//! schema with its existing id) — and frames each datum with
//! `schema_registry_converter`'s `get_payload` (magic byte 0, 4-byte big-endian id, datum).
//!
//! A registry that cannot be reached is retried here a few times with a growing pause (each
//! attempt logged), then reported as [`SinkError::SchemaRegistryUnavailable`], which the
//! runner retries with its own backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schema_registry_converter::async_impl::schema_registry::{post_schema, SrSettings};
use schema_registry_converter::schema_registry_common::{get_payload, SchemaType, SuppliedSchema};

use super::registry_failure::classify;
use crate::config::SchemaRegistrySettings;
use crate::record::{KafkaRecord, RegistrySchema};
use crate::{Consequence, SinkError};

/// Attempts of one registration before the failure is reported.
const ATTEMPTS: u32 = 3;
/// The pause after the first failed attempt; doubled after each.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// One registry request, at most.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Registers schemas and frames records for one pipeline.
pub struct SchemaRegistrar {
    settings: SrSettings,
    /// Ids by (subject, schema text), for schemas built again (a table version evicted from
    /// the builder's cache, a table without declared types).
    ids: Mutex<HashMap<(String, String), u32>>,
}

impl std::fmt::Debug for SchemaRegistrar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SchemaRegistrar")
    }
}

impl SchemaRegistrar {
    /// A registrar for checked settings whose secrets are resolved (no I/O).
    pub fn new(settings: &SchemaRegistrySettings) -> Result<Self, SinkError> {
        let mut builder = SrSettings::new_builder(settings.url.clone());
        builder.set_timeout(REQUEST_TIMEOUT);
        if let Some((user, password)) = &settings.basic_auth {
            builder.set_basic_authorization(user, Some(password));
        }
        let settings = builder.build().map_err(|_| SinkError::InvalidConfig {
            field: "schema_registry",
            reason: "the registry client could not be created".into(),
        })?;
        Ok(SchemaRegistrar {
            settings,
            ids: Mutex::new(HashMap::new()),
        })
    }

    /// The registry client's settings (URL, credentials, timeout).
    pub(crate) fn settings(&self) -> &SrSettings {
        &self.settings
    }

    /// Frames every Avro record of `records` with its schema ids (registering schemas not yet
    /// known). Nothing is changed unless every id is resolved.
    pub async fn frame(&self, records: &mut [KafkaRecord]) -> Result<(), SinkError> {
        for r in records.iter() {
            if let Some(p) = &r.registry {
                for s in p.key.iter().chain(p.value.iter()) {
                    self.id(s).await?;
                }
            }
        }
        for r in records.iter_mut() {
            let Some(p) = r.registry.take() else {
                continue;
            };
            if let (Some(s), Some(key)) = (&p.key, r.key.take()) {
                r.key = Some(get_payload(self.known(s)?, key));
            }
            if let (Some(s), Some(value)) = (&p.value, r.value.take()) {
                r.value = Some(get_payload(self.known(s)?, value));
            }
        }
        Ok(())
    }

    /// The id of a schema resolved by [`Self::id`].
    fn known(&self, s: &RegistrySchema) -> Result<u32, SinkError> {
        s.id().ok_or_else(|| SinkError::SchemaRegistryUnavailable {
            reason: "a schema id was not resolved".into(),
        })
    }

    /// The registry id of `s`, registered under its subject if this registrar has not seen it.
    pub async fn id(&self, s: &Arc<RegistrySchema>) -> Result<u32, SinkError> {
        if let Some(id) = s.id() {
            return Ok(id);
        }
        let key = (s.subject().to_string(), s.schema().to_string());
        let cached = self
            .ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .copied();
        if let Some(id) = cached {
            s.set_id(id);
            return Ok(id);
        }
        let id = self.register(s).await?;
        tracing::info!(subject = s.subject(), id, "avro schema registered");
        self.ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, id);
        s.set_id(id);
        Ok(id)
    }

    /// Registers `s` (the registry returns the existing id of a schema it has), retrying a
    /// transient failure.
    async fn register(&self, s: &RegistrySchema) -> Result<u32, SinkError> {
        let mut pause = FIRST_PAUSE;
        let mut attempt = 1;
        loop {
            let supplied = SuppliedSchema::new(None, SchemaType::Avro, s.schema().to_string());
            match post_schema(&self.settings, s.subject().to_string(), supplied).await {
                Ok(registered) => return Ok(registered.id),
                Err(e) => {
                    let error = classify(s.subject(), &e);
                    if error.consequence() != Consequence::Retry || attempt >= ATTEMPTS {
                        return Err(error);
                    }
                    tracing::warn!(
                        subject = s.subject(),
                        attempt,
                        code = error.code(),
                        "schema registry call failed: {error}; retrying"
                    );
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    attempt += 1;
                }
            }
        }
    }
}
