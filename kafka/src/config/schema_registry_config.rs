//! The Schema Registry of the `avro` format (`kafka.schema_registry`): where the Confluent
//! API is and how to authenticate, checked without I/O.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::producer_overrides::REDACTED;
use crate::SinkError;

/// `kafka.schema_registry` as users write it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistryConfig {
    /// Base URL of the registry's Confluent-compatible API, `http://host:port[/path]`
    /// (Apicurio: `…/apis/ccompat/v7`).
    pub url: String,
    /// HTTP basic authentication user (Confluent Cloud: the API key).
    #[serde(default)]
    pub username: Option<String>,
    /// HTTP basic authentication password (Confluent Cloud: the API secret): a secret, so
    /// best a reference (`${env:NAME}`, `${file:/path}`) resolved on the owner; never logged
    /// nor shown by the API.
    #[serde(default)]
    pub password: Option<String>,
}

impl fmt::Debug for SchemaRegistryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaRegistryConfig")
            .field("url", &self.url)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| REDACTED))
            .finish()
    }
}

/// The checked registry settings.
#[derive(Clone, PartialEq, Eq)]
pub struct SchemaRegistrySettings {
    /// The base URL, without a trailing `/`.
    pub url: String,
    /// Basic authentication: user and password (the password possibly still a secret
    /// reference until the owner resolves it).
    pub basic_auth: Option<(String, String)>,
}

impl fmt::Debug for SchemaRegistrySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaRegistrySettings")
            .field("url", &self.url)
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|(u, _)| (u, REDACTED)),
            )
            .finish()
    }
}

fn invalid(field: &'static str, reason: &str) -> SinkError {
    SinkError::InvalidConfig {
        field,
        reason: reason.to_string(),
    }
}

impl SchemaRegistryConfig {
    /// Checks the fields (no I/O).
    pub fn validate(&self) -> Result<SchemaRegistrySettings, SinkError> {
        let url = self.url.trim().trim_end_matches('/');
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            invalid(
                "schema_registry.url",
                if url.starts_with("https://") {
                    "https is not supported yet; use http:// (a TLS-terminating proxy on the worker's host, for instance)"
                } else {
                    "must be http://host[:port][/path]"
                },
            )
        })?;
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty() || authority.chars().any(char::is_whitespace) {
            return Err(invalid("schema_registry.url", "must name a host"));
        }
        if authority.contains('@') {
            return Err(invalid(
                "schema_registry.url",
                "must not hold credentials; use schema_registry.username and password",
            ));
        }
        let basic_auth = match (&self.username, &self.password) {
            (None, None) => None,
            (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Some((u.clone(), p.clone())),
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "schema_registry.username",
                    "username and password must not be empty",
                ))
            }
            (Some(_), None) => {
                return Err(invalid(
                    "schema_registry.password",
                    "is required with a username",
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "schema_registry.username",
                    "is required with a password",
                ))
            }
        };
        Ok(SchemaRegistrySettings {
            url: url.to_string(),
            basic_auth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, username: Option<&str>, password: Option<&str>) -> SchemaRegistryConfig {
        SchemaRegistryConfig {
            url: url.into(),
            username: username.map(Into::into),
            password: password.map(Into::into),
        }
    }

    fn field(e: SinkError) -> &'static str {
        match e {
            SinkError::InvalidConfig { field, .. } => field,
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn urls_and_basic_auth_are_checked_by_field() {
        let ok = config(
            "http://127.0.0.1:28081/apis/ccompat/v7/",
            Some("u"),
            Some("pw"),
        )
        .validate()
        .unwrap();
        assert_eq!(ok.url, "http://127.0.0.1:28081/apis/ccompat/v7");
        assert_eq!(ok.basic_auth, Some(("u".into(), "pw".into())));
        for bad in [
            "",
            "registry:8081",
            "http://",
            "https://r:8081",
            "http://u:p@r:8081",
        ] {
            assert_eq!(
                field(config(bad, None, None).validate().unwrap_err()),
                "schema_registry.url",
                "{bad}"
            );
        }
        assert_eq!(
            field(config("http://r", Some("u"), None).validate().unwrap_err()),
            "schema_registry.password"
        );
        assert_eq!(
            field(config("http://r", None, Some("pw")).validate().unwrap_err()),
            "schema_registry.username"
        );
    }

    #[test]
    fn debug_hides_the_password() {
        let c = config("http://r", Some("svc"), Some("hunter2"));
        assert!(!format!("{c:?}").contains("hunter2"));
        assert!(!format!("{:?}", c.validate().unwrap()).contains("hunter2"));
        let r: Result<SchemaRegistryConfig, _> =
            serde_json::from_str(r#"{"url":"http://r","user":"svc"}"#);
        assert!(r.is_err(), "unknown fields are refused");
    }
}
