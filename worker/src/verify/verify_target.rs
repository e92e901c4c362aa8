//! [`VerifyTarget`]: the pipeline `capstan verify` checks — its definition fetched from a
//! node's API or read from a file, validated like a create, and its secrets resolved here,
//! where verify runs (`${env:…}` and `${file:…}` references as the owner would resolve them;
//! a literal secret, which the API shows as `<redacted>`, from `--source-password-file`).

use std::path::Path;

use capstan_connectors::mysql::Password;
use capstan_kafka::config::{is_secret_property, REDACTED};
use serde_json::Value;

use super::verify_error::VerifyError;
use crate::cli_client::ApiClient;
use crate::pipeline::{resolve_secrets, CheckedPipelineSpec, HostSecrets, PipelineSpec};

/// A pipeline ready to verify: its checked definition with every secret resolved.
#[derive(Debug)]
pub struct VerifyTarget {
    /// The definition, secrets resolved.
    pub spec: CheckedPipelineSpec,
}

impl VerifyTarget {
    /// The definition of pipeline `name` as the API at `client` shows it.
    pub async fn fetch(
        client: &ApiClient,
        name: &str,
        password_file: Option<&Path>,
    ) -> Result<Self, VerifyError> {
        let definition = client.get(&format!("/pipelines/{name}/config")).await?;
        Self::from_definition(definition, password_file)
    }

    /// `definition` (a pipeline definition's JSON), checked and resolved; the source password
    /// comes from `password_file` when one is given.
    pub fn from_definition(
        mut definition: Value,
        password_file: Option<&Path>,
    ) -> Result<Self, VerifyError> {
        let password = password_file.map(read_password).transpose()?;
        if let Some(source) = definition.get_mut("source").and_then(Value::as_object_mut) {
            if password.is_some() {
                // replaced after validation: the file is the password, whatever the definition says
                source.remove("password_file");
                source.insert("password".into(), Value::String(String::new()));
            }
        }
        refuse_redacted(&definition)?;
        let checked = PipelineSpec::from_json(definition)
            .and_then(|s| s.validate())
            .map_err(|e| VerifyError::InvalidDefinition {
                field: e.field,
                message: e.message,
            })?;
        let mut spec =
            resolve_secrets(checked, &HostSecrets).map_err(|e| VerifyError::SecretUnavailable {
                field: e.field.clone(),
                reason: e.cause.to_string(),
            })?;
        if let Some(password) = password {
            spec.source.password = Password::new(password);
        }
        Ok(VerifyTarget { spec })
    }
}

/// How to supply a secret the API redacted, other than the source password.
const REFERENCE_HINT: &str = "define it as a ${env:…} or ${file:…} reference, or verify with \
                              --definition and the definition's file";

/// Refuses a secret the API redacted: verify needs the secret itself.
fn refuse_redacted(definition: &Value) -> Result<(), VerifyError> {
    let redacted =
        |pointer: &str| definition.pointer(pointer).and_then(Value::as_str) == Some(REDACTED);
    let fields = [
        (
            "/source/password",
            "source.password",
            "pass --source-password-file, or define it as a ${env:…} or ${file:…} reference",
        ),
        ("/columns/hash/salt", "columns.hash.salt", REFERENCE_HINT),
        (
            "/kafka/schema_registry/password",
            "kafka.schema_registry.password",
            REFERENCE_HINT,
        ),
    ];
    for (pointer, field, hint) in fields {
        if redacted(pointer) {
            return Err(VerifyError::SecretRedacted {
                field: field.into(),
                hint,
            });
        }
    }
    let overrides = definition
        .pointer("/kafka/producer_overrides")
        .and_then(Value::as_object);
    for (key, value) in overrides.into_iter().flatten() {
        if is_secret_property(key) && value.as_str() == Some(REDACTED) {
            return Err(VerifyError::SecretRedacted {
                field: format!("kafka.producer_overrides.{key}"),
                hint: REFERENCE_HINT,
            });
        }
    }
    Ok(())
}

/// The file's contents without one trailing line break.
fn read_password(path: &Path) -> Result<String, VerifyError> {
    let mut text = std::fs::read_to_string(path).map_err(|e| VerifyError::File {
        what: "--source-password-file",
        path: path.display().to_string(),
        reason: e.kind().to_string(),
    })?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn definition(password: &str, sasl: Option<&str>) -> Value {
        let mut overrides = json!({});
        if let Some(s) = sasl {
            overrides = json!({"sasl.username": "svc", "sasl.password": s});
        }
        json!({
            "name": "p",
            "source": {"host": "db", "user": "capstan", "password": password, "server_id": 9,
                       "tls": {"mode": "disabled"}, "flavor": "mysql"},
            "kafka": {"bootstrap_servers": "k:9092", "topic_prefix": "cdc",
                      "producer_overrides": overrides}
        })
    }

    fn code(r: Result<VerifyTarget, VerifyError>) -> (String, String) {
        let e = r.expect_err("an error");
        (e.code().to_string(), e.to_string())
    }

    #[test]
    fn a_redacted_secret_is_named_and_the_password_file_replaces_it() {
        let (c, m) = code(VerifyTarget::from_definition(
            definition(REDACTED, None),
            None,
        ));
        assert_eq!(c, "secret_redacted");
        assert!(m.starts_with("source.password is <redacted>"), "{m}");

        let dir = std::env::temp_dir().join(format!("capstan-verify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "hunter2\n").unwrap();
        let t = VerifyTarget::from_definition(definition(REDACTED, None), Some(&file)).unwrap();
        assert_eq!(t.spec.source.password.expose(), "hunter2");
        assert_eq!(t.spec.name, "p");

        let (c, m) = code(VerifyTarget::from_definition(
            definition("x", Some(REDACTED)),
            Some(&file),
        ));
        assert_eq!(c, "secret_redacted");
        assert!(
            m.starts_with("kafka.producer_overrides.sasl.password is <redacted>"),
            "{m}"
        );
        let mut avro = definition("x", None);
        avro["kafka"]["format"] = serde_json::json!("avro");
        avro["kafka"]["schema_registry"] = serde_json::json!({"url": "http://registry:8081", "username": "svc", "password": REDACTED});
        let (c, m) = code(VerifyTarget::from_definition(avro, Some(&file)));
        assert_eq!(c, "secret_redacted");
        assert!(
            m.starts_with("kafka.schema_registry.password is <redacted>"),
            "{m}"
        );
        let (c, m) = code(VerifyTarget::from_definition(
            definition("x", None),
            Some(&dir.join("absent")),
        ));
        assert_eq!(c, "invalid_input");
        assert!(m.starts_with("cannot read --source-password-file "), "{m}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn references_resolve_here_and_name_what_is_missing() {
        let (c, m) = code(VerifyTarget::from_definition(
            definition("${env:CAPSTAN_VERIFY_TEST_UNSET}", None),
            None,
        ));
        assert_eq!(c, "secret_unavailable");
        assert_eq!(
            m,
            "source.password: the environment variable CAPSTAN_VERIFY_TEST_UNSET is not set \
             on this worker (verify resolves references where it runs)"
        );
        let literal = VerifyTarget::from_definition(definition("pw", None), None).unwrap();
        assert_eq!(literal.spec.source.password.expose(), "pw");
        let (c, m) = code(VerifyTarget::from_definition(json!({"name": "p"}), None));
        assert_eq!(c, "invalid_pipeline");
        assert!(m.starts_with("the definition's field `"), "{m}");
    }
}
