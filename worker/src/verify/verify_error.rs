//! Why `capstan verify` could not compare (exit status 2): shown as `capstan: code: message`.
//! Messages name a field, a server, a table or a topic, never a value of a row or a secret.

use capstan_connectors::mysql::snapshot::SnapshotError;
use capstan_kafka::SinkError;

use crate::cli_error::CliError;

/// A failure of `capstan verify`.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The definition could not be fetched or read.
    #[error("{0}")]
    Cli(#[from] CliError),
    /// The definition is not a valid pipeline definition.
    #[error("the definition's field `{field}`: {message}")]
    InvalidDefinition {
        /// The field.
        field: String,
        /// What is wrong, value-free.
        message: String,
    },
    /// A secret is shown as `<redacted>` by the API and no replacement was given.
    #[error("{field} is <redacted> in the definition the API shows: {hint}")]
    SecretRedacted {
        /// The field.
        field: String,
        /// How to supply it.
        hint: &'static str,
    },
    /// A secret reference could not be resolved here.
    #[error("{field}: {reason} (verify resolves references where it runs)")]
    SecretUnavailable {
        /// The field.
        field: String,
        /// Which variable or file, value-free.
        reason: String,
    },
    /// A local file could not be read.
    #[error("cannot read {what} {path}: {reason}")]
    File {
        /// What the file is for.
        what: &'static str,
        /// The file.
        path: String,
        /// The I/O error kind.
        reason: String,
    },
    /// `--table` names a table the pipeline does not capture, or not as `schema.table`.
    #[error("--table {table}: {reason}")]
    Table {
        /// The table as given.
        table: String,
        /// Why.
        reason: &'static str,
    },
    /// The source server could not be read.
    #[error("source {server}: {error}")]
    Source {
        /// `host:port`.
        server: String,
        /// What failed.
        error: Box<SnapshotError>,
    },
    /// A topic could not be read, or a record could not be built.
    #[error("kafka {servers}, topic {topic}: {error}")]
    Kafka {
        /// The bootstrap servers.
        servers: String,
        /// The topic (or the table whose record failed).
        topic: String,
        /// What failed.
        error: Box<SinkError>,
    },
    /// A source row could not be encoded as the pipeline would encode it.
    #[error("{table}: cannot encode a source row: {error}")]
    Encode {
        /// The table.
        table: String,
        /// What failed.
        error: Box<SinkError>,
    },
    /// A record built from a source row could not be read back (a bug, not the data's).
    #[error("{table}: {reason}")]
    SourceRecord {
        /// The table.
        table: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// `--wait-for-checkpoint` ran out of time.
    #[error(
        "the checkpoint of pipeline {pipeline} did not reach the source's executed position \
         within {seconds}s (is the pipeline streaming, and the source quiet?)"
    )]
    CheckpointTimeout {
        /// The pipeline.
        pipeline: String,
        /// The wait.
        seconds: u64,
    },
    /// The report could not be printed.
    #[error("cannot print the report as json: {0}")]
    Render(String),
}

impl VerifyError {
    /// A stable snake_case code.
    pub fn code(&self) -> &str {
        match self {
            VerifyError::Cli(e) => e.code(),
            VerifyError::InvalidDefinition { .. } => "invalid_pipeline",
            VerifyError::SecretRedacted { .. } => "secret_redacted",
            VerifyError::SecretUnavailable { .. } => "secret_unavailable",
            VerifyError::File { .. } => "invalid_input",
            VerifyError::Table { .. } => "invalid_table",
            VerifyError::Source { error, .. } => error.code(),
            VerifyError::Kafka { error, .. } | VerifyError::Encode { error, .. } => error.code(),
            VerifyError::SourceRecord { .. } => "verify_record_unreadable",
            VerifyError::CheckpointTimeout { .. } => "checkpoint_wait_timed_out",
            VerifyError::Render(_) => "render_failed",
        }
    }

    /// True when running verify again may succeed as it is (a node, the source or Kafka
    /// unreachable for a moment, a wait that was too short); false for a definite fault
    /// (a wrong definition, a missing secret, a table that cannot be read by key).
    pub fn is_transient(&self) -> bool {
        match self {
            VerifyError::Cli(e) => e.is_transient(),
            VerifyError::Source { error, .. } => error.is_transient(),
            VerifyError::Kafka { error, .. } => {
                error.consequence() == capstan_kafka::Consequence::Retry
            }
            VerifyError::CheckpointTimeout { .. } => true,
            _ => false,
        }
    }
}
