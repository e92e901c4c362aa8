//! How the worker's control plane answers: write errors and Raft rejections as API errors,
//! and the definition as the API shows it (every secret in it is write-only).

use axum::http::StatusCode;
use capstan_core::secret_ref::SecretRef;
use capstan_kafka::config::{is_secret_property, REDACTED};
use capstan_raft_store::Response;
use capstan_rest_api::{ApiError, TableOffset};

use crate::membership_guard::MembershipRefusal;
use crate::node::WriteError;
use crate::pipeline::{CheckedPipelineSpec, PipelineSpec};

/// A refused membership change: 409 with its code.
pub(crate) fn refusal(e: MembershipRefusal) -> ApiError {
    ApiError::conflict(e.code(), e.to_string())
}

/// A failed Raft write: 503 when a retry may succeed (no quorum, leader changing), 413 for a
/// command over the Raft entry limit, else 500.
pub(crate) fn write_error(e: WriteError) -> ApiError {
    if let WriteError::CommandTooLarge(_) = e {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, e.code(), e.to_string())
    } else if e.is_retriable() {
        ApiError::unavailable(e.code(), e.to_string())
    } else {
        ApiError::internal(e.code(), e.to_string())
    }
}

/// A definition parsed and validated as a create, an update and a dry run check it: 400 naming
/// the field (the message is value-free).
pub(crate) fn checked_definition(
    definition: &serde_json::Value,
) -> Result<CheckedPipelineSpec, ApiError> {
    PipelineSpec::from_json(definition.clone())
        .and_then(|spec| spec.validate())
        .map_err(|e| ApiError::bad_request(e.code(), e.to_string()).with_field(e.field))
}

/// 404 for a pipeline name.
pub(crate) fn unknown_pipeline(name: &str) -> ApiError {
    ApiError::not_found("unknown_pipeline", format!("no pipeline named `{name}`"))
}

/// A Raft rejection as an API error: 404 unknown, 409 for every conflict (with its code).
pub(crate) fn rejected(name: &str, response: Response) -> Result<(), ApiError> {
    match response {
        Response::Applied => Ok(()),
        Response::UnknownPipeline => Err(unknown_pipeline(name)),
        Response::PipelineExists => Err(ApiError::conflict(
            "pipeline_exists",
            format!("a pipeline named `{name}` already exists"),
        )),
        other => Err(ApiError::conflict(other.code(), other.to_string())),
    }
}

/// Where a definition holds secrets: the source password, every producer override whose
/// property is a credential ([`is_secret_property`]) and the schema registry's password. Each is a path of object keys, and the
/// field name an error shows for it.
fn secret_slots(spec: &serde_json::Value) -> Vec<(Vec<String>, String)> {
    let mut slots = Vec::new();
    if spec.pointer("/source/password").is_some() {
        slots.push((
            vec!["source".into(), "password".into()],
            "source.password".to_string(),
        ));
    }
    if spec.pointer("/columns/hash/salt").is_some() {
        slots.push((
            vec!["columns".into(), "hash".into(), "salt".into()],
            "columns.hash.salt".to_string(),
        ));
    }
    let overrides = spec
        .get("kafka")
        .and_then(|k| k.get("producer_overrides"))
        .and_then(|o| o.as_object());
    for key in overrides.into_iter().flat_map(|o| o.keys()) {
        if is_secret_property(key) {
            slots.push((
                vec!["kafka".into(), "producer_overrides".into(), key.clone()],
                format!("kafka.producer_overrides.{key}"),
            ));
        }
    }
    if spec.pointer("/kafka/schema_registry/password").is_some() {
        slots.push((
            vec!["kafka".into(), "schema_registry".into(), "password".into()],
            "kafka.schema_registry.password".to_string(),
        ));
    }
    slots
}

fn slot<'a>(spec: &'a serde_json::Value, path: &[String]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(spec, |v, k| v.get(k.as_str()))
}

fn slot_mut<'a>(
    spec: &'a mut serde_json::Value,
    path: &[String],
) -> Option<&'a mut serde_json::Value> {
    path.iter().try_fold(spec, |v, k| v.get_mut(k.as_str()))
}

/// The definition as the API shows it: every secret is write-only, shown as `<redacted>`. A
/// reference to a secret (`${env:NAME}`, `${file:PATH}`) is not one and is shown as it is.
pub(crate) fn redacted(spec: &serde_json::Value) -> serde_json::Value {
    let mut v = spec.clone();
    for (path, _) in secret_slots(spec) {
        if let Some(value) = slot_mut(&mut v, &path) {
            let reference = value
                .as_str()
                .and_then(|s| SecretRef::parse(s).ok())
                .is_some_and(|r| r.is_reference());
            if !reference {
                *value = serde_json::Value::String(REDACTED.into());
            }
        }
    }
    v
}

/// A config update that sends the redaction placeholder back for a secret keeps the stored
/// secret (so a GET, edit, PUT round trip works without re-typing any of them).
pub(crate) fn keep_stored_secrets(
    definition: &mut serde_json::Value,
    stored: &serde_json::Value,
) -> Result<(), ApiError> {
    for (path, field) in secret_slots(definition) {
        let Some(value) = slot_mut(definition, &path) else {
            continue;
        };
        if value.as_str() != Some(REDACTED) {
            continue;
        }
        match slot(stored, &path) {
            Some(secret) => *value = secret.clone(),
            None => {
                return Err(ApiError::invalid_field(
                    "invalid_pipeline",
                    &field,
                    "`<redacted>` stands for the stored secret, and none is stored",
                ))
            }
        }
    }
    Ok(())
}

/// A pipeline's snapshot progress per table as the API shows it (key cursors left out).
pub(crate) fn table_offsets(r: &capstan_raft_store::PipelineRecord) -> Vec<TableOffset> {
    r.snapshot_progress()
        .iter()
        .map(|(table, progress)| TableOffset {
            table: table.clone(),
            kind: progress.kind.as_str().to_string(),
            status: progress.status.as_str().to_string(),
            rows_done: progress.rows_done,
            rows_estimated: progress.rows_estimated,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_placeholder_keeps_the_stored_password() {
        let stored = json!({"source": {"password": "s3cret"}});
        let mut def = json!({"source": {"password": REDACTED}});
        keep_stored_secrets(&mut def, &stored).unwrap();
        assert_eq!(def["source"]["password"], "s3cret");
        let mut def = json!({"source": {"password": "new"}});
        keep_stored_secrets(&mut def, &stored).unwrap();
        assert_eq!(def["source"]["password"], "new");
        let mut def = json!({"source": {"password": REDACTED}});
        let e = keep_stored_secrets(&mut def, &json!({"source": {}})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("source.password"));
        assert_eq!(redacted(&stored)["source"]["password"], REDACTED);
    }

    #[test]
    fn the_hash_salt_is_write_only() {
        let stored = json!({"columns": {"hash": {"salt": "pepper-77", "columns": ["a.b.c"]}}});
        let shown = redacted(&stored);
        assert_eq!(shown["columns"]["hash"]["salt"], REDACTED);
        assert_eq!(shown["columns"]["hash"]["columns"], json!(["a.b.c"]));
        let mut def = shown.clone();
        keep_stored_secrets(&mut def, &stored).unwrap();
        assert_eq!(def["columns"]["hash"]["salt"], "pepper-77");
        let by_ref = json!({"columns": {"hash": {"salt": "${env:SALT}", "columns": []}}});
        assert_eq!(redacted(&by_ref)["columns"]["hash"]["salt"], "${env:SALT}");
    }

    #[test]
    fn the_schema_registry_password_is_write_only() {
        let stored = json!({"kafka": {"schema_registry": {"url": "http://sr", "username": "svc",
                                                          "password": "sr-s3cret"}}});
        let shown = redacted(&stored);
        assert_eq!(shown["kafka"]["schema_registry"]["password"], REDACTED);
        assert_eq!(shown["kafka"]["schema_registry"]["username"], "svc");
        let mut def = shown.clone();
        keep_stored_secrets(&mut def, &stored).unwrap();
        assert_eq!(def["kafka"]["schema_registry"]["password"], "sr-s3cret");
    }

    #[test]
    fn references_are_shown_and_literals_are_not() {
        let stored = json!({
            "source": {"password": "${env:DB_PW}", "password_file": "/run/pw"},
            "kafka": {"producer_overrides": {
                "sasl.password": "${file:/run/secrets/sasl}",
                "ssl.key.password": "$${env:X}"
            }}
        });
        let shown = redacted(&stored);
        assert_eq!(shown["source"]["password"], "${env:DB_PW}");
        assert_eq!(shown["source"]["password_file"], "/run/pw");
        let o = &shown["kafka"]["producer_overrides"];
        assert_eq!(o["sasl.password"], "${file:/run/secrets/sasl}");
        assert_eq!(
            o["ssl.key.password"], REDACTED,
            "an escaped literal is a secret"
        );
    }

    #[test]
    fn kafka_credentials_are_write_only() {
        let stored = json!({
            "source": {"password": "s3cret"},
            "kafka": {"producer_overrides": {
                "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "svc",
                "sasl.password": "kafka-pw",
                "ssl.key.password": "key-pw",
                "sasl.oauthbearer.client.secret": "oauth-secret",
                "linger.ms": "20"
            }}
        });
        let shown = redacted(&stored);
        let text = shown.to_string();
        for secret in ["s3cret", "kafka-pw", "key-pw", "oauth-secret"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let o = &shown["kafka"]["producer_overrides"];
        assert_eq!(o["sasl.password"], REDACTED);
        assert_eq!(o["ssl.key.password"], REDACTED);
        assert_eq!(o["sasl.oauthbearer.client.secret"], REDACTED);
        assert_eq!(o["sasl.username"], "svc");
        assert_eq!(o["linger.ms"], "20");

        // the shown definition sent back, one secret changed: the others are kept
        let mut def = shown.clone();
        def["kafka"]["producer_overrides"]["ssl.key.password"] = json!("new-key-pw");
        keep_stored_secrets(&mut def, &stored).unwrap();
        let o = &def["kafka"]["producer_overrides"];
        assert_eq!(o["sasl.password"], "kafka-pw");
        assert_eq!(o["sasl.oauthbearer.client.secret"], "oauth-secret");
        assert_eq!(o["ssl.key.password"], "new-key-pw");
        assert_eq!(def["source"]["password"], "s3cret");

        // a placeholder for a secret that was never stored names its field
        let mut def = json!({"kafka": {"producer_overrides": {"sasl.password": REDACTED}}});
        let e = keep_stored_secrets(&mut def, &json!({"kafka": {}})).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("kafka.producer_overrides.sasl.password")
        );
    }

    #[test]
    fn rejections_map_to_statuses() {
        assert_eq!(
            rejected("p", Response::UnknownPipeline).unwrap_err().status,
            404
        );
        let e = rejected("p", Response::PipelineExists).unwrap_err();
        assert_eq!((e.status, e.error_code.as_str()), (409, "pipeline_exists"));
        let e = rejected("p", Response::EpochNotIncreasing { current: 3 }).unwrap_err();
        assert_eq!(
            (e.status, e.error_code.as_str()),
            (409, "epoch_not_increasing")
        );
        assert!(rejected("p", Response::Applied).is_ok());
    }
}
