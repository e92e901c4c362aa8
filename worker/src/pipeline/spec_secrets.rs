//! The secrets of a checked definition: which fields hold them, the syntax check of their
//! references (`${env:NAME}`, `${file:PATH}`, at validation, without I/O), and their
//! resolution on the owner when a runner starts. A definition that uses references carries no
//! secret through the API, Raft or any other worker.

use std::path::Path;

use capstan_connectors::mysql::Password;
use capstan_core::secret_ref::{SecretLookup, SecretRef, SecretUnavailable};
use capstan_kafka::config::is_secret_property;

use super::pipeline_spec::{CheckedPipelineSpec, PipelineSpecError};

/// A secret that could not be resolved: the field it is for, and why (value-free).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {cause}")]
pub struct UnresolvedSecret {
    /// The definition's field (`source.password`, `kafka.producer_overrides.sasl.password`).
    pub field: String,
    /// What was missing.
    pub cause: SecretUnavailable,
}

impl UnresolvedSecret {
    /// `secret_unavailable`.
    pub fn code(&self) -> &'static str {
        self.cause.code()
    }
}

/// The worker's environment and file system.
pub struct HostSecrets;

impl SecretLookup for HostSecrets {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn file(&self, path: &Path) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| e.kind().to_string())
    }
}

/// The schema registry password's field.
const REGISTRY_PASSWORD: &str = "kafka.schema_registry.password";

/// Every secret field of `spec` with its current value: the source password, each producer
/// property whose value may be a credential, and the schema registry's password.
fn secret_fields(spec: &CheckedPipelineSpec) -> Vec<(String, &str)> {
    let mut fields = vec![("source.password".to_string(), spec.source.password.expose())];
    if let Some(hash) = &spec.source.columns.hash {
        fields.push(("columns.hash.salt".to_string(), hash.salt.expose()));
    }
    for (key, value) in spec.sink.producer.iter() {
        if is_secret_property(key) {
            fields.push((format!("kafka.producer_overrides.{key}"), value));
        }
    }
    let registry_auth = spec
        .sink
        .schema_registry
        .as_ref()
        .and_then(|r| r.basic_auth.as_ref());
    if let Some((_, password)) = registry_auth {
        fields.push((REGISTRY_PASSWORD.to_string(), password.as_str()));
    }
    fields
}

/// Refuses a secret field whose value looks like a reference and is not a valid one.
pub(super) fn check_references(spec: &CheckedPipelineSpec) -> Result<(), PipelineSpecError> {
    for (field, value) in secret_fields(spec) {
        SecretRef::parse(value).map_err(|e| {
            PipelineSpecError::new(field, format!("{e} (secret_reference_invalid)"))
        })?;
    }
    Ok(())
}

/// `spec` with every secret resolved through `lookup` (references read, `$${…}` literals
/// unescaped). Run once, on the owner, right before the runner uses the spec.
pub(crate) fn resolve_secrets(
    mut spec: CheckedPipelineSpec,
    lookup: &dyn SecretLookup,
) -> Result<CheckedPipelineSpec, UnresolvedSecret> {
    let mut resolved = Vec::new();
    for (field, value) in secret_fields(&spec) {
        // validation refused malformed references; a stored one that no longer parses is
        // used as the literal it is
        let secret = match SecretRef::parse(value) {
            Ok(r) => r.resolve(lookup).map_err(|cause| UnresolvedSecret {
                field: field.clone(),
                cause,
            })?,
            Err(_) => value.to_string(),
        };
        resolved.push((field, secret));
    }
    for (field, secret) in resolved {
        if field == REGISTRY_PASSWORD {
            if let Some((_, password)) = spec
                .sink
                .schema_registry
                .as_mut()
                .and_then(|r| r.basic_auth.as_mut())
            {
                *password = secret;
            }
            continue;
        }
        match field.strip_prefix("kafka.producer_overrides.") {
            Some(key) => spec.sink.producer = spec.sink.producer.with(key, &secret),
            None if field == "columns.hash.salt" => {
                if let Some(hash) = spec.source.columns.hash.as_mut() {
                    hash.salt = Password::new(secret);
                }
            }
            None => spec.source.password = Password::new(secret),
        }
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::super::pipeline_spec::PipelineSpec;
    use super::*;

    struct Maps(HashMap<&'static str, &'static str>);

    impl SecretLookup for Maps {
        fn env(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|s| s.to_string())
        }
        fn file(&self, path: &Path) -> Result<String, String> {
            self.0
                .get(path.to_str().unwrap_or_default())
                .map(|s| format!("{s}\n"))
                .ok_or_else(|| "entity not found".into())
        }
    }

    fn spec(source: serde_json::Value, overrides: serde_json::Value) -> serde_json::Value {
        let mut source_block = json!({
            "host": "db", "user": "capstan", "server_id": 9,
            "tls": {"mode": "disabled"}, "flavor": "mysql"
        });
        for (k, v) in source.as_object().into_iter().flatten() {
            source_block[k] = v.clone();
        }
        json!({
            "name": "p", "source": source_block,
            "kafka": {"bootstrap_servers": "k:9092", "topic_prefix": "cdc",
                      "producer_overrides": overrides}
        })
    }

    fn checked(v: serde_json::Value) -> Result<CheckedPipelineSpec, PipelineSpecError> {
        PipelineSpec::from_json(v)?.validate()
    }

    fn lookup() -> Maps {
        Maps(HashMap::from([
            ("DB_PW", "db-secret"),
            ("/run/secrets/sasl", "sasl-secret"),
        ]))
    }

    #[test]
    fn references_resolve_on_the_owner() {
        let v = spec(
            json!({"password": "${env:DB_PW}"}),
            json!({"sasl.username": "svc", "sasl.password": "${file:/run/secrets/sasl}"}),
        );
        let s = checked(v).unwrap();
        assert_eq!(s.source.password.expose(), "${env:DB_PW}");
        let s = resolve_secrets(s, &lookup()).unwrap();
        assert_eq!(s.source.password.expose(), "db-secret");
        assert_eq!(s.sink.producer.get("sasl.password"), Some("sasl-secret"));
        assert_eq!(s.sink.producer.get("sasl.username"), Some("svc"));
    }

    #[test]
    fn the_hash_salt_is_a_secret_field() {
        let mut v = spec(json!({}), json!({}));
        v["columns"] = json!({"hash": {"salt": "${env:SALT}", "columns": ["a.b.c"]}});
        let s = checked(v.clone()).unwrap();
        let e = resolve_secrets(s, &lookup()).unwrap_err();
        assert_eq!(e.field, "columns.hash.salt");
        let s = resolve_secrets(
            checked(v.clone()).unwrap(),
            &Maps(HashMap::from([("SALT", "pepper")])),
        )
        .unwrap();
        let hash = s.source.columns.hash.as_ref().unwrap();
        assert_eq!(hash.salt.expose(), "pepper");
        v["columns"]["hash"]["salt"] = json!("${vault:x}");
        assert_eq!(checked(v).unwrap_err().field, "columns.hash.salt");
    }

    #[test]
    fn the_registry_password_resolves_on_the_owner() {
        let mut v = spec(json!({"password": "pw"}), json!({}));
        v["kafka"]["format"] = json!("avro");
        v["kafka"]["schema_registry"] = json!({"url": "http://sr:8081", "username": "svc",
                                               "password": "${file:/run/secrets/sasl}"});
        let s = checked(v.clone()).unwrap();
        let s = resolve_secrets(s, &lookup()).unwrap();
        assert_eq!(
            s.sink.schema_registry.unwrap().basic_auth,
            Some(("svc".to_string(), "sasl-secret".to_string()))
        );
        v["kafka"]["schema_registry"]["password"] = json!("${env:NOT_SET_HERE}");
        let e = resolve_secrets(checked(v.clone()).unwrap(), &lookup()).unwrap_err();
        assert_eq!(e.field, "kafka.schema_registry.password");
        v["kafka"]["schema_registry"]["password"] = json!("${vault:x}");
        assert_eq!(
            checked(v).unwrap_err().field,
            "kafka.schema_registry.password"
        );
    }

    #[test]
    fn password_file_is_a_file_reference() {
        let v = spec(json!({"password_file": "/run/secrets/sasl"}), json!({}));
        let s = resolve_secrets(checked(v).unwrap(), &lookup()).unwrap();
        assert_eq!(s.source.password.expose(), "sasl-secret");
        let both = spec(
            json!({"password": "x", "password_file": "/run/secrets/sasl"}),
            json!({}),
        );
        assert_eq!(checked(both).unwrap_err().field, "source.password_file");
        let relative = spec(json!({"password_file": "secrets/pw"}), json!({}));
        assert_eq!(checked(relative).unwrap_err().field, "source.password_file");
    }

    #[test]
    fn literals_and_escapes_are_kept() {
        let v = spec(
            json!({"password": "$${env:DB_PW}"}),
            json!({"sasl.password": "plain"}),
        );
        let s = resolve_secrets(checked(v).unwrap(), &lookup()).unwrap();
        assert_eq!(s.source.password.expose(), "${env:DB_PW}");
        assert_eq!(s.sink.producer.get("sasl.password"), Some("plain"));
    }

    #[test]
    fn malformed_references_are_refused_at_validation_naming_the_field() {
        let e = checked(spec(json!({"password": "${vault:db}"}), json!({}))).unwrap_err();
        assert_eq!(e.field, "source.password");
        assert!(e.message.contains("secret_reference_invalid"), "{e}");
        let e = checked(spec(json!({}), json!({"sasl.password": "${env:no-dash}"}))).unwrap_err();
        assert_eq!(e.field, "kafka.producer_overrides.sasl.password");
        assert!(!e.to_string().contains("no-dash"), "{e}");
    }

    #[test]
    fn an_unset_variable_names_the_field_and_the_variable() {
        let v = spec(json!({}), json!({"sasl.password": "${env:NOT_SET_HERE}"}));
        let e = resolve_secrets(checked(v).unwrap(), &lookup()).unwrap_err();
        assert_eq!(e.code(), "secret_unavailable");
        assert_eq!(
            e.to_string(),
            "kafka.producer_overrides.sasl.password: the environment variable NOT_SET_HERE \
             is not set on this worker"
        );
    }
}
