//! Why the live binlog source refuses to start, stops, or retries: [`SourceError`].
//!
//! Errors split by consequence (see [`SourceError::is_transient`]): a transient one (a dropped
//! socket, a silent stream, a server shutting down) is retried by reconnecting from the last
//! processed position; everything else halts. Every variant has a stable snake_case
//! [`SourceError::code`]; messages are lowercase and value-free: never a password, a row
//! value, an XID or a server error message (which can quote statements), only codes.

use super::halt::Halt;

/// A refusal, halt or retryable failure of the live binlog source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// `server_id` is missing or zero.
    #[error("server_id is required and must be nonzero")]
    ServerIdRequired,
    /// TLS is on (or unspecified) without an explicit peer-verification choice.
    #[error("tls verification unspecified: choose disabled, verify_ca or verify_none")]
    TlsVerificationUnspecified,
    /// `stream_timeout_ms` does not exceed `heartbeat_period_ms`.
    #[error("invalid liveness config: stream_timeout_ms must exceed heartbeat_period_ms")]
    InvalidLivenessConfig,
    /// Another configuration value is out of range or inconsistent.
    #[error("invalid config: {field}: {reason}")]
    ConfigInvalid {
        /// The offending field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `binlog_format` is not ROW.
    #[error("precondition failed: binlog_format is not row")]
    BinlogFormatNotRow,
    /// `binlog_row_image` is not FULL.
    #[error("precondition failed: binlog_row_image is not full")]
    BinlogRowImageNotFull,
    /// `binlog_row_metadata` is not FULL.
    #[error("precondition failed: binlog_row_metadata is not full")]
    BinlogRowMetadataNotFull,
    /// `binlog_row_value_options` is not empty (partial JSON is refused).
    #[error("precondition failed: binlog_row_value_options is not empty")]
    BinlogRowValueOptionsNotEmpty,
    /// MySQL `gtid_mode` is not ON.
    #[error("precondition failed: gtid_mode is not on")]
    GtidModeNotOn,
    /// MariaDB `gtid_strict_mode` is off (membership by sequence number needs it).
    #[error("precondition failed: gtid_strict_mode is off")]
    GtidStrictModeOff,
    /// The binary log is disabled.
    #[error("precondition failed: log_bin is off")]
    LogBinOff,
    /// The precondition query failed or returned something unreadable.
    #[error("precondition query failed")]
    PreconditionQueryFailed,
    /// The server is not the configured flavour, or its version is not understood.
    #[error("server flavour mismatch: configured {configured}, server is {actual}")]
    FlavorMismatch {
        /// The configured flavour.
        configured: &'static str,
        /// The flavour detected from the server version.
        actual: &'static str,
    },
    /// The checkpoint's flavour differs from the server's.
    #[error("position flavour differs from the server flavour")]
    PositionFlavorMismatch,
    /// The server no longer has binlogs the checkpoint needs: resuming would skip changes.
    #[error("data gap: the server purged binlogs the checkpoint still needs")]
    DataGap,
    /// The processed position given beside a checkpoint does not cover it (or, on MySQL,
    /// differs from it, or has another flavour): skipping by it could lose transactions.
    #[error("processed position invalid: it must cover the checkpoint")]
    ProcessedPositionInvalid,
    /// The checkpoint covers transactions this server never executed.
    #[error("source identity mismatch: the checkpoint has gtids this server never executed")]
    SourceIdentityMismatch,
    /// A reconnect reached a server with another identity (`@@server_uuid`; MariaDB: server
    /// id, host and port) than the first connect: a different server behind the same address.
    #[error("source identity changed: a reconnect reached a different server")]
    SourceIdentityChanged,
    /// Another replica with the same server id (or uuid) took over the dump: the server ended
    /// this one's (MySQL error 1236 naming the same server id, MariaDB `ER_SLAVE_SAME_ID`).
    /// Halts rather than reconnects: a reconnect would evict the other replica in turn.
    #[error("server id conflict: another replica uses this server_id")]
    ServerIdConflict,
    /// The stream stayed dead through the whole reconnect budget.
    #[error("stream stalled: no stream after {attempts} reconnect attempts")]
    StreamStalled {
        /// Reconnect attempts made.
        attempts: u32,
    },
    /// The first connection failed through the whole retry budget.
    #[error("command retries exhausted after {attempts} attempts")]
    CommandRetriesExhausted {
        /// Attempts made.
        attempts: u32,
    },
    /// Authentication was refused, or needs a plugin this client does not speak.
    #[error("authentication failed")]
    AuthenticationFailed,
    /// The TLS handshake failed or the server offers no TLS.
    #[error("tls failed: {reason}")]
    TlsFailed {
        /// What failed, value-free.
        reason: &'static str,
    },
    /// The checksum negotiation statement was refused.
    #[error("checksum negotiation failed")]
    ChecksumNegotiationFailed,
    /// The server refused the dump request with an error this source does not classify.
    #[error("dump failed: server error {code}")]
    DumpFailed {
        /// The server's error code.
        code: u16,
    },
    /// A query on the source failed with a server error.
    #[error("query failed: server error {code}")]
    QueryFailed {
        /// The server's error code.
        code: u16,
    },
    /// The server sent a packet the protocol does not allow here.
    #[error("unexpected packet: {site}")]
    UnexpectedPacket {
        /// Where, value-free.
        site: &'static str,
    },
    /// A socket failure (connect refused, reset, closed): retried.
    #[error("connection failed: {kind}")]
    Io {
        /// The I/O error kind.
        kind: String,
    },
    /// No frame (event or heartbeat) within `stream_timeout_ms`: retried.
    #[error("stream timeout: no frame within the liveness window")]
    StreamTimeout,
    /// The server ended the stream or is shutting down: retried.
    #[error("server closed the stream")]
    ServerClosed,
    /// The event stream itself is unusable (parse, assembly, decode).
    #[error(transparent)]
    Halt(#[from] Halt),
}

impl SourceError {
    /// The stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            SourceError::ServerIdRequired => "server_id_required",
            SourceError::TlsVerificationUnspecified => "tls_verification_unspecified",
            SourceError::InvalidLivenessConfig => "invalid_liveness_config",
            SourceError::ConfigInvalid { .. } => "config_invalid",
            SourceError::BinlogFormatNotRow => "binlog_format_not_row",
            SourceError::BinlogRowImageNotFull => "binlog_row_image_not_full",
            SourceError::BinlogRowMetadataNotFull => "binlog_row_metadata_not_full",
            SourceError::BinlogRowValueOptionsNotEmpty => "binlog_row_value_options_not_empty",
            SourceError::GtidModeNotOn => "gtid_mode_not_on",
            SourceError::GtidStrictModeOff => "gtid_strict_mode_off",
            SourceError::LogBinOff => "log_bin_off",
            SourceError::PreconditionQueryFailed => "precondition_query_failed",
            SourceError::FlavorMismatch { .. } => "flavor_mismatch",
            SourceError::PositionFlavorMismatch => "position_flavor_mismatch",
            SourceError::DataGap => "data_gap",
            SourceError::ProcessedPositionInvalid => "processed_position_invalid",
            SourceError::SourceIdentityMismatch => "source_identity_mismatch",
            SourceError::SourceIdentityChanged => "source_identity_changed",
            SourceError::ServerIdConflict => "server_id_conflict",
            SourceError::StreamStalled { .. } => "stream_stalled",
            SourceError::CommandRetriesExhausted { .. } => "command_retries_exhausted",
            SourceError::AuthenticationFailed => "authentication_failed",
            SourceError::TlsFailed { .. } => "tls_failed",
            SourceError::ChecksumNegotiationFailed => "checksum_negotiation_failed",
            SourceError::DumpFailed { .. } => "dump_failed",
            SourceError::QueryFailed { .. } => "query_failed",
            SourceError::UnexpectedPacket { .. } => "unexpected_stream_packet",
            SourceError::Io { .. } => "connection_failed",
            SourceError::StreamTimeout => "stream_timeout",
            SourceError::ServerClosed => "server_closed",
            SourceError::Halt(h) => h.code(),
        }
    }

    /// True for failures a reconnect from the last processed position can cure.
    pub fn is_transient(&self) -> bool {
        match self {
            SourceError::Io { .. } | SourceError::StreamTimeout | SourceError::ServerClosed => true,
            SourceError::QueryFailed { code } | SourceError::DumpFailed { code } => {
                is_transient_server_code(*code)
            }
            _ => false,
        }
    }

    /// True when the pipeline should be started again after a backoff rather than halted:
    /// a transient fault, or the reconnect budget used up against a server that is down or
    /// restarting (the source gives up; a later start may well succeed).
    pub fn retry_later(&self) -> bool {
        self.is_transient()
            || matches!(
                self,
                SourceError::StreamStalled { .. } | SourceError::CommandRetriesExhausted { .. }
            )
    }

    pub(crate) fn io(e: &std::io::Error) -> Self {
        SourceError::Io {
            // the kind's own words ("connection refused"), never the OS message
            kind: e.kind().to_string(),
        }
    }
}

/// Server error codes that mean "the server is going away or busy", not "you are wrong":
/// shutdown in progress (1053), connection killed (1927 MariaDB, 1317 interrupted), too many
/// connections (1040), lock wait / deadlock never reach here, server gone (2006/2013 client
/// side).
fn is_transient_server_code(code: u16) -> bool {
    matches!(
        code,
        1040 | 1053 | 1077 | 1152 | 1158..=1161 | 1317 | 1927 | 2006 | 2013
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_messages_lowercase() {
        let all = [
            SourceError::ServerIdRequired,
            SourceError::TlsVerificationUnspecified,
            SourceError::InvalidLivenessConfig,
            SourceError::BinlogFormatNotRow,
            SourceError::DataGap,
            SourceError::ProcessedPositionInvalid,
            SourceError::SourceIdentityMismatch,
            SourceError::StreamStalled { attempts: 3 },
            SourceError::DumpFailed { code: 1236 },
            SourceError::Halt(Halt::Incident),
        ];
        for e in &all {
            assert!(e.code().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            let msg = e.to_string();
            assert_eq!(msg, msg.to_lowercase());
            assert!(!msg.ends_with('.'));
        }
        assert_eq!(SourceError::Halt(Halt::Incident).code(), "incident");
    }

    #[test]
    fn a_socket_failure_says_its_kind_in_words() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            SourceError::io(&refused).to_string(),
            "connection failed: connection refused"
        );
    }

    #[test]
    fn only_connection_failures_are_transient() {
        assert!(SourceError::StreamTimeout.is_transient());
        assert!(SourceError::QueryFailed { code: 1053 }.is_transient());
        assert!(!SourceError::DataGap.is_transient());
        assert!(!SourceError::QueryFailed { code: 1064 }.is_transient());
    }
}
