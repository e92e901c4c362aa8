//! How the worker's control plane answers: write errors and Raft rejections as API errors,
//! and the definition as the API shows it (the source password is write-only).

use capstan_raft_store::Response;
use capstan_rest_api::ApiError;

use crate::node::WriteError;

/// The placeholder the API shows instead of the source password; sent back in a config
/// update, it stands for the stored password.
const REDACTED: &str = "<redacted>";

/// A failed Raft write: 503 when a retry may succeed (no quorum, leader changing), else 500.
pub(crate) fn write_error(e: WriteError) -> ApiError {
    if e.is_retriable() {
        ApiError::unavailable(e.code(), e.to_string())
    } else {
        ApiError::internal(e.code(), e.to_string())
    }
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

/// The definition as the API shows it: the source password is write-only.
pub(crate) fn redacted(spec: &serde_json::Value) -> serde_json::Value {
    let mut v = spec.clone();
    if let Some(source) = v.get_mut("source").and_then(|s| s.as_object_mut()) {
        if source.contains_key("password") {
            source.insert(
                "password".into(),
                serde_json::Value::String(REDACTED.into()),
            );
        }
    }
    v
}

/// A config update that sends the redaction placeholder back as the password keeps the stored
/// password (so a GET, edit, PUT round trip works without re-typing the secret).
pub(crate) fn keep_stored_password(
    definition: &mut serde_json::Value,
    stored: &serde_json::Value,
) -> Result<(), ApiError> {
    let Some(slot) = definition.pointer_mut("/source/password") else {
        return Ok(());
    };
    if slot.as_str() != Some(REDACTED) {
        return Ok(());
    }
    match stored.pointer("/source/password") {
        Some(password) => {
            *slot = password.clone();
            Ok(())
        }
        None => Err(ApiError::invalid_field(
            "invalid_pipeline",
            "source.password",
            "`<redacted>` stands for the stored password, and none is stored",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_placeholder_keeps_the_stored_password() {
        let stored = json!({"source": {"password": "s3cret"}});
        let mut def = json!({"source": {"password": REDACTED}});
        keep_stored_password(&mut def, &stored).unwrap();
        assert_eq!(def["source"]["password"], "s3cret");
        let mut def = json!({"source": {"password": "new"}});
        keep_stored_password(&mut def, &stored).unwrap();
        assert_eq!(def["source"]["password"], "new");
        let mut def = json!({"source": {"password": REDACTED}});
        let e = keep_stored_password(&mut def, &json!({"source": {}})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("source.password"));
        assert_eq!(redacted(&stored)["source"]["password"], REDACTED);
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
