//! What a failed registry call means for the pipeline: a registry that cannot be reached or
//! answers with a server error is transient (retried); an incompatible schema (HTTP 409) or any
//! other refusal halts, naming the subject. Pure; value-free (never the schema, a credential
//! or the registry's own message, which may quote the schema).

use schema_registry_converter::error::SRCError;
use schema_registry_converter::schema_registry_common::RawError;

use crate::SinkError;

/// The HTTP status a registry error names (the converter's message carries it as
/// `… failed with status 409 Conflict`).
fn http_status(e: &SRCError) -> Option<u16> {
    let rest = e.error.split("with status ").nth(1)?;
    rest.get(..3)?.parse().ok()
}

/// The registry's own error code, when it answered with one.
fn registry_code(e: &SRCError) -> Option<u32> {
    std::error::Error::source(e)?
        .downcast_ref::<RawError>()
        .map(|r| r.error_code)
}

/// The sink error of a failed registration of `subject`.
pub fn classify(subject: &str, e: &SRCError) -> SinkError {
    let status = http_status(e);
    match status {
        Some(409) => SinkError::SchemaIncompatible {
            subject: subject.to_string(),
        },
        Some(s) if s >= 500 || s == 408 || s == 429 => SinkError::SchemaRegistryUnavailable {
            reason: format!("http status {s}"),
        },
        Some(s) => SinkError::SchemaRegistryRefused {
            subject: subject.to_string(),
            reason: match registry_code(e) {
                Some(code) => format!("http status {s}, registry error code {code}"),
                None => format!("http status {s}"),
            },
        },
        // no HTTP answer: a connection refused, a timeout, a reset
        None if e.retriable => SinkError::SchemaRegistryUnavailable {
            reason: "the registry could not be reached".into(),
        },
        None => SinkError::SchemaRegistryRefused {
            subject: subject.to_string(),
            reason: "the registry's answer could not be read".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Consequence;

    fn http(status: &str, retriable: bool) -> SRCError {
        SRCError::new(
            &format!("HTTP request to schema registry failed with status {status}"),
            Some("error_code: 409, message: schema with field secret_col".into()),
            retriable,
        )
    }

    #[test]
    fn a_conflict_halts_naming_the_subject_and_an_outage_retries() {
        let e = classify("cdc.shop.t-value", &http("409 Conflict", false));
        assert_eq!(
            e,
            SinkError::SchemaIncompatible {
                subject: "cdc.shop.t-value".into()
            }
        );
        assert_eq!(e.consequence(), Consequence::Halt);
        assert_eq!(e.code(), "schema_incompatible");
        assert!(!e.to_string().contains("secret_col"));
        for status in ["503 Service Unavailable", "500 Internal Server Error"] {
            let e = classify("s", &http(status, status.starts_with("503")));
            assert_eq!(e.consequence(), Consequence::Retry, "{status}");
        }
        let down = SRCError::new("http call to schema registry failed", None, true);
        assert_eq!(
            classify("s", &down),
            SinkError::SchemaRegistryUnavailable {
                reason: "the registry could not be reached".into()
            }
        );
        let e = classify("s", &http("401 Unauthorized", false));
        assert_eq!(e.consequence(), Consequence::Halt);
        assert_eq!(
            e.to_string(),
            "schema registry refused subject s: http status 401"
        );
    }
}
