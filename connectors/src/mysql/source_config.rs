//! [`SourceConfig`]: how to reach the source server, as users write it; [`SourceConfig::validate`]
//! checks it without any I/O and returns a [`ValidSourceConfig`]. A bad configuration is
//! refused before a socket opens.

use std::fmt;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::column_controls::ColumnControls;
use super::source_error::SourceError;

/// The largest timer value accepted (2^32 - 1 ms, about 49.7 days).
pub const MAX_TIMER_MS: u64 = u32::MAX as u64;

/// A password: never shown by `Debug`, and with no `Display`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Password(String);

impl Password {
    /// Wraps a password.
    pub fn new(password: impl Into<String>) -> Self {
        Password(password.into())
    }

    /// The secret itself, for the authentication exchange only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// Peer verification when TLS is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsMode {
    /// No TLS: the connection, including the password exchange, is in clear text.
    Disabled,
    /// TLS with the server certificate chain verified against `ca_file`; the host name is
    /// not checked (MySQL's auto-generated certificates carry no usable name).
    VerifyCa,
    /// TLS for confidentiality only: the server certificate is not verified at all.
    VerifyNone,
}

/// The TLS block.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// `disabled`, `verify_ca` or `verify_none`. Required: there is no default, and a missing
    /// mode is refused `tls_verification_unspecified`.
    pub mode: Option<TlsMode>,
    /// PEM file with the CA certificate(s) that sign the server certificate; required for
    /// `verify_ca`, refused otherwise.
    pub ca_file: Option<PathBuf>,
}

/// Which server flavour to expect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlavorChoice {
    /// MySQL 8.4 / 9.x; a MariaDB server is refused.
    Mysql,
    /// MariaDB 10.11+; a MySQL server is refused.
    Mariadb,
    /// Whatever the server's version string says.
    #[default]
    Detect,
}

/// Source connection settings, as written by users.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Host name or IP address of the source server.
    pub host: String,
    /// TCP port of the source server.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Replication account: needs REPLICATION SLAVE, REPLICATION CLIENT (MariaDB: BINLOG
    /// MONITOR) and SELECT.
    pub user: String,
    /// Its password (never logged or shown), or a reference to where each worker finds it:
    /// `${env:NAME}` or `${file:/path}` (`capstan_core::secret_ref`).
    #[serde(default)]
    pub password: Password,
    /// A file on each worker holding the password (one trailing line break ignored): the
    /// same as `password: "${file:PATH}"`. Only without `password`; an absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// TLS and peer verification. Required: absent is refused `tls_verification_unspecified`.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// This replica's server id: required, nonzero, and unique in the replication topology.
    #[serde(default)]
    pub server_id: Option<u32>,
    /// Expected server flavour: `mysql`, `mariadb` or `detect` (default).
    #[serde(default)]
    pub flavor: FlavorChoice,
    /// Heartbeat period the server is asked for on an idle stream, in milliseconds.
    #[serde(default = "default_heartbeat_period_ms")]
    pub heartbeat_period_ms: u64,
    /// A stream with no frame (event or heartbeat) for this long is dropped and reconnected,
    /// in milliseconds. Must exceed `heartbeat_period_ms`.
    #[serde(default = "default_stream_timeout_ms")]
    pub stream_timeout_ms: u64,
    /// Pause between reconnect attempts, in milliseconds.
    #[serde(default = "default_reconnect_backoff_ms")]
    pub reconnect_backoff_ms: u64,
    /// Consecutive failed reconnect attempts before the source halts `stream_stalled` (or
    /// `command_retries_exhausted` before the first stream).
    #[serde(default = "default_max_reconnects")]
    pub max_reconnects: u32,
}

fn default_port() -> u16 {
    3306
}
fn default_heartbeat_period_ms() -> u64 {
    15_000
}
fn default_stream_timeout_ms() -> u64 {
    60_000
}
fn default_reconnect_backoff_ms() -> u64 {
    1_000
}
fn default_max_reconnects() -> u32 {
    10
}

/// The checked TLS choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsChoice {
    /// No TLS.
    Disabled,
    /// Verify the chain against this CA file, not the host name.
    VerifyCa(PathBuf),
    /// Encrypt without verifying.
    VerifyNone,
}

/// A [`SourceConfig`] that passed [`SourceConfig::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidSourceConfig {
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Account name.
    pub user: String,
    /// Its password, or a reference to it (`password_file` becomes `${file:PATH}`) that the
    /// owner resolves before it connects.
    pub password: Password,
    /// TLS choice.
    pub tls: TlsChoice,
    /// This replica's server id.
    pub server_id: NonZeroU32,
    /// Expected flavour.
    pub flavor: FlavorChoice,
    /// Heartbeat period.
    pub heartbeat_period: Duration,
    /// Liveness window.
    pub stream_timeout: Duration,
    /// Pause between reconnect attempts.
    pub reconnect_backoff: Duration,
    /// Reconnect budget.
    pub max_reconnects: u32,
    /// What happens to columns before a row leaves the source (binlog and snapshot rows);
    /// set from the pipeline's `columns` block, empty otherwise.
    pub columns: ColumnControls,
    /// Keep the text of DDL statements in schema-change events (the assembler's
    /// `keep_ddl_statement`; [`crate::mysql::BinlogSource::start_observed`] turns it on when
    /// this is set); set from the pipeline's `schema_changes.include_ddl`, false otherwise.
    pub keep_ddl_statement: bool,
}

impl SourceConfig {
    /// A configuration with the defaults and no TLS choice yet (which `validate` refuses).
    pub fn new(host: impl Into<String>, port: u16, user: impl Into<String>) -> Self {
        SourceConfig {
            host: host.into(),
            port,
            user: user.into(),
            password: Password::default(),
            password_file: None,
            tls: None,
            server_id: None,
            flavor: FlavorChoice::Detect,
            heartbeat_period_ms: default_heartbeat_period_ms(),
            stream_timeout_ms: default_stream_timeout_ms(),
            reconnect_backoff_ms: default_reconnect_backoff_ms(),
            max_reconnects: default_max_reconnects(),
        }
    }

    /// Checks the configuration without any I/O.
    pub fn validate(&self) -> Result<ValidSourceConfig, SourceError> {
        let server_id = self
            .server_id
            .and_then(NonZeroU32::new)
            .ok_or(SourceError::ServerIdRequired)?;
        let tls = self
            .tls
            .as_ref()
            .ok_or(SourceError::TlsVerificationUnspecified)?;
        let tls = match (tls.mode, &tls.ca_file) {
            (None, _) => return Err(SourceError::TlsVerificationUnspecified),
            (Some(TlsMode::VerifyCa), Some(ca)) if !ca.as_os_str().is_empty() => {
                TlsChoice::VerifyCa(ca.clone())
            }
            (Some(TlsMode::VerifyCa), _) => return Err(invalid("tls.ca_file", "required")),
            (Some(_), Some(_)) => return Err(invalid("tls.ca_file", "only with verify_ca")),
            (Some(TlsMode::Disabled), None) => TlsChoice::Disabled,
            (Some(TlsMode::VerifyNone), None) => TlsChoice::VerifyNone,
        };
        if self.host.trim().is_empty() {
            return Err(invalid("host", "empty"));
        }
        if self.port == 0 {
            return Err(invalid("port", "zero"));
        }
        if self.user.is_empty() {
            return Err(invalid("user", "empty"));
        }
        let password = match &self.password_file {
            None => self.password.clone(),
            Some(_) if !self.password.expose().is_empty() => {
                return Err(invalid("password_file", "only without password"))
            }
            Some(path) => match path.to_str() {
                Some(p) if p.starts_with('/') => Password::new(format!("${{file:{p}}}")),
                _ => return Err(invalid("password_file", "must be an absolute utf-8 path")),
            },
        };
        let heartbeat = timer("heartbeat_period_ms", self.heartbeat_period_ms)?;
        let timeout = timer("stream_timeout_ms", self.stream_timeout_ms)?;
        let backoff = timer("reconnect_backoff_ms", self.reconnect_backoff_ms)?;
        if timeout <= heartbeat {
            return Err(SourceError::InvalidLivenessConfig);
        }
        Ok(ValidSourceConfig {
            host: self.host.clone(),
            port: self.port,
            user: self.user.clone(),
            password,
            tls,
            server_id,
            flavor: self.flavor,
            heartbeat_period: heartbeat,
            stream_timeout: timeout,
            reconnect_backoff: backoff,
            max_reconnects: self.max_reconnects,
            columns: ColumnControls::default(),
            keep_ddl_statement: false,
        })
    }
}

fn invalid(field: &'static str, reason: &'static str) -> SourceError {
    SourceError::ConfigInvalid { field, reason }
}

fn timer(field: &'static str, ms: u64) -> Result<Duration, SourceError> {
    if ms == 0 {
        return Err(invalid(field, "must be positive"));
    }
    if ms > MAX_TIMER_MS {
        return Err(invalid(field, "exceeds 2^32-1 ms"));
    }
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> SourceConfig {
        let mut c = SourceConfig::new("127.0.0.1", 3306, "capstan");
        c.password = Password::new("hunter2");
        c.server_id = Some(1001);
        c.tls = Some(TlsConfig {
            mode: Some(TlsMode::VerifyNone),
            ca_file: None,
        });
        c
    }

    fn code(c: &SourceConfig) -> &'static str {
        c.validate().map(|_| "ok").unwrap_or_else(|e| e.code())
    }

    #[test]
    fn defaults_validate() {
        let v = base().validate().unwrap();
        assert_eq!(v.heartbeat_period, Duration::from_secs(15));
        assert_eq!(v.stream_timeout, Duration::from_secs(60));
        assert_eq!(v.tls, TlsChoice::VerifyNone);
    }

    #[test]
    fn refusals_are_distinct() {
        let mut c = base();
        c.server_id = None;
        assert_eq!(code(&c), "server_id_required");
        c.server_id = Some(0);
        assert_eq!(code(&c), "server_id_required");
        let mut c = base();
        c.tls = None;
        assert_eq!(code(&c), "tls_verification_unspecified");
        c.tls = Some(TlsConfig::default());
        assert_eq!(code(&c), "tls_verification_unspecified");
        c.tls = Some(TlsConfig {
            mode: Some(TlsMode::VerifyCa),
            ca_file: None,
        });
        assert_eq!(code(&c), "config_invalid");
        c.tls = Some(TlsConfig {
            mode: Some(TlsMode::Disabled),
            ca_file: Some("/x.pem".into()),
        });
        assert_eq!(code(&c), "config_invalid");
        let mut c = base();
        c.stream_timeout_ms = c.heartbeat_period_ms;
        assert_eq!(code(&c), "invalid_liveness_config");
        c.stream_timeout_ms = MAX_TIMER_MS + 1;
        assert_eq!(code(&c), "config_invalid");
        c.stream_timeout_ms = 0;
        assert_eq!(code(&c), "config_invalid");
    }

    #[test]
    fn unknown_keys_are_refused_and_password_is_redacted() {
        let json = r#"{"host":"h","user":"u","password":"hunter2","server_id":7,
            "tls":{"mode":"verify_ca","ca_file":"/ca.pem"},"stream_timeout":5}"#;
        assert!(serde_json::from_str::<SourceConfig>(json).is_err());
        let json = r#"{"host":"h","user":"u","password":"hunter2","server_id":7,
            "tls":{"mode":"verify_ca","ca_file":"/ca.pem"}}"#;
        let c: SourceConfig = serde_json::from_str(json).unwrap();
        let v = c.validate().unwrap();
        assert_eq!(v.tls, TlsChoice::VerifyCa("/ca.pem".into()));
        assert!(!format!("{c:?}").contains("hunter2"));
        assert!(!format!("{v:?}").contains("hunter2"));
    }
}
