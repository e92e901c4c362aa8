//! Why a command of the command line failed: shown as `capstan: code: message`. No message
//! carries a value of a pipeline definition (it may hold a password) or of a file.

use crate::raft_tls::TlsSetupError;

/// Why an API command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The API answered with an error.
    #[error("{message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The API's `error_code`.
        code: String,
        /// The API's message.
        message: String,
    },
    /// The API could not be reached or answered something unreadable.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The base URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// Local input (a file, the token) could not be used.
    #[error("{0}")]
    Input(String),
    /// A definition is not valid JSON or YAML, or holds no mapping of fields.
    #[error("{origin} {reason}")]
    Definition {
        /// The file, or `standard input`.
        origin: String,
        /// Where and what, value-free (`is not valid yaml: line 3 column 7: …`).
        reason: String,
    },
    /// The `--ca-file` bundle could not be used (the message names the file, never quotes it).
    #[error("{0}")]
    CaFile(TlsSetupError),
    /// `--wait` ran out of time.
    #[error("pipeline {name} is not {wanted} after {after}: {last}")]
    WaitTimedOut {
        /// Pipeline name.
        name: String,
        /// The awaited state.
        wanted: String,
        /// The timeout (`120s`).
        after: String,
        /// What was seen last (`its state is retrying (reason: …)`).
        last: String,
    },
    /// The pipeline reported `failed` while another state was awaited.
    #[error("pipeline {name} failed while waiting for {wanted}: {reason}")]
    PipelineFailed {
        /// Pipeline name.
        name: String,
        /// The awaited state.
        wanted: String,
        /// Its reason code and detail.
        reason: String,
    },
    /// An answer could not be printed in the chosen format.
    #[error("cannot print the answer as {format}: {reason}")]
    Render {
        /// `yaml` or `json`.
        format: &'static str,
        /// Why.
        reason: String,
    },
}

impl CliError {
    /// True when asking again may succeed: the node could not be reached, or answered 5xx (no
    /// leader during an election, a leader that cannot be reached, no quorum).
    pub fn is_transient(&self) -> bool {
        match self {
            CliError::Unreachable { .. } => true,
            CliError::Api { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// A stable snake_case code.
    pub fn code(&self) -> &str {
        match self {
            CliError::Api { code, .. } => code,
            CliError::Unreachable { .. } => "api_unreachable",
            CliError::Input(_) => "invalid_input",
            CliError::Definition { .. } => "invalid_definition",
            CliError::CaFile(_) => "invalid_ca_file",
            CliError::WaitTimedOut { .. } => "wait_timed_out",
            CliError::PipelineFailed { .. } => "pipeline_failed",
            CliError::Render { .. } => "render_failed",
        }
    }
}
