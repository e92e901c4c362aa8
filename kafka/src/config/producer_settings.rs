//! librdkafka producer properties: capstan's fixed settings plus a pipeline's overrides.
//!
//! Overrides are checked without network I/O: each one is set on a fresh `ClientConfig` and
//! turned into a native librdkafka config, which rejects unknown properties and malformed
//! values. Overrides that would weaken a delivery guarantee, or that capstan owns, are refused
//! before that:
//!
//! - `enable.idempotence` other than `true` (duplicates and reordering on retry);
//! - `acks` / `request.required.acks` other than `all` / `-1` (acknowledged but lost);
//! - `max.in.flight.requests.per.connection` / `max.in.flight` above 5 (the idempotent
//!   producer's ordering bound);
//! - `transactional.id` (derived from the pipeline name in exactly-once mode);
//! - `bootstrap.servers` / `metadata.broker.list` (a field of the sink config);
//! - `test.*` (librdkafka's test hooks can replace the brokers with a mock cluster);
//! - `enable.gapless.guarantee` set to `false` is allowed (the default), `true` is allowed.

use std::collections::BTreeMap;
use std::fmt;

use rdkafka::ClientConfig;

use crate::SinkError;

/// The complete, checked property map of a producer.
///
/// `Debug` shows the property names only: values can be credentials (`sasl.password`).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ProducerSettings {
    properties: BTreeMap<String, String>,
}

impl ProducerSettings {
    /// Settings from a checked property map.
    pub(crate) fn from_map(properties: BTreeMap<String, String>) -> Self {
        ProducerSettings { properties }
    }

    /// Sets (or replaces) one property; for capstan's own settings, never for user input.
    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.properties.insert(key.to_string(), value.to_string());
        self
    }

    /// The value of a property.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }

    /// Every property, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The properties whose names start with `prefix`.
    pub fn properties_with_prefix(&self, prefix: &str) -> Vec<(String, String)> {
        self.properties
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The connection and security properties (`security.*`, `sasl.*`, `ssl.*`, `client.*`):
    /// what every other client of the same cluster (a reader, the admin client) needs too.
    pub fn connection_properties(&self) -> Vec<(String, String)> {
        ["security.", "sasl.", "ssl.", "client."]
            .iter()
            .flat_map(|prefix| self.properties_with_prefix(prefix))
            .collect()
    }

    /// An rdkafka `ClientConfig` carrying every property.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c
    }
}

impl fmt::Debug for ProducerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.properties.keys()).finish()
    }
}

fn forbidden(key: &str, reason: &'static str) -> SinkError {
    SinkError::ForbiddenOverride {
        key: key.to_string(),
        reason,
    }
}

/// Refuses the overrides that break a guarantee or that capstan owns (see the module
/// documentation), then lets librdkafka check each remaining one. No I/O.
pub fn validate_overrides(overrides: &BTreeMap<String, String>) -> Result<(), SinkError> {
    for (key, value) in overrides {
        let v = value.trim().to_ascii_lowercase();
        match key.as_str() {
            "enable.idempotence" if v != "true" => {
                return Err(forbidden(key, "the producer must stay idempotent"))
            }
            "acks" | "request.required.acks" if v != "all" && v != "-1" => {
                return Err(forbidden(key, "acks must stay all"))
            }
            "max.in.flight.requests.per.connection" | "max.in.flight" => {
                let n: u32 = v
                    .parse()
                    .map_err(|_| SinkError::InvalidOverride { key: key.clone() })?;
                if n == 0 || n > 5 {
                    return Err(forbidden(key, "in-flight requests must be 1 to 5"));
                }
            }
            "transactional.id" => return Err(forbidden(key, "derived from the pipeline name")),
            "bootstrap.servers" | "metadata.broker.list" => {
                return Err(forbidden(key, "set by the sink's bootstrap_servers"))
            }
            k if k.starts_with("test.") => {
                return Err(forbidden(key, "librdkafka test properties are not allowed"))
            }
            _ => {}
        }
        let mut probe = ClientConfig::new();
        probe.set(key, value);
        probe
            .create_native_config()
            .map_err(|_| SinkError::InvalidOverride { key: key.clone() })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(k: &str, v: &str) -> BTreeMap<String, String> {
        [(k.to_string(), v.to_string())].into()
    }

    #[test]
    fn guarantees_cannot_be_weakened() {
        for (k, v) in [
            ("enable.idempotence", "false"),
            ("acks", "1"),
            ("request.required.acks", "0"),
            ("transactional.id", "x"),
            ("bootstrap.servers", "elsewhere:9092"),
            ("max.in.flight.requests.per.connection", "6"),
            ("test.mock.num.brokers", "3"),
        ] {
            let e = validate_overrides(&one(k, v)).unwrap_err();
            assert_eq!(e.code(), "forbidden_producer_override", "{k}");
            assert!(!e.to_string().contains(v) || v == "x", "{e}");
        }
        assert!(validate_overrides(&one("acks", "all")).is_ok());
        assert!(validate_overrides(&one("enable.idempotence", "true")).is_ok());
    }

    #[test]
    fn librdkafka_checks_names_and_values_without_io() {
        assert!(validate_overrides(&one("linger.ms", "20")).is_ok());
        assert!(validate_overrides(&one("compression.type", "zstd")).is_ok());
        let e = validate_overrides(&one("no.such.property", "1")).unwrap_err();
        assert_eq!(e.code(), "invalid_producer_override");
        let e = validate_overrides(&one("linger.ms", "hunter2")).unwrap_err();
        assert_eq!(e.code(), "invalid_producer_override");
        assert!(!format!("{e} {e:?}").contains("hunter2"));
    }

    #[test]
    fn debug_hides_values() {
        let s = ProducerSettings::default().with("sasl.password", "hunter2");
        let d = format!("{s:?}");
        assert!(d.contains("sasl.password") && !d.contains("hunter2"), "{d}");
    }
}
