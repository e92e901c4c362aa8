//! The command line's HTTP client for a node's REST API: the `--url`, `--token-file` and
//! `--json` options every API subcommand shares, and error bodies turned into
//! `error_code: message`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use reqwest::Method;
use serde_json::Value;

/// Where the API is and how to talk to it.
#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
    /// Any node's REST API.
    #[arg(
        long,
        env = "CAPSTAN_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// A file holding the API's bearer token (default: the `CAPSTAN_TOKEN` variable).
    #[arg(long, value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// Print the API's JSON as it is instead of a human-readable summary.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Why an API command failed; shown as `code: message`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The API answered with an error.
    #[error("{message}")]
    Api {
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
}

impl CliError {
    /// A stable snake_case code.
    pub fn code(&self) -> &str {
        match self {
            CliError::Api { code, .. } => code,
            CliError::Unreachable { .. } => "api_unreachable",
            CliError::Input(_) => "invalid_input",
        }
    }
}

/// A client of one node's API.
#[derive(Debug)]
pub struct ApiClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl ApiClient {
    /// A client for `args`; the token comes from `--token-file`, else `CAPSTAN_TOKEN`.
    pub fn new(args: &ApiArgs) -> Result<Self, CliError> {
        let token = match &args.token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| {
                        CliError::Input(format!(
                            "cannot read the token file {}: {}",
                            path.display(),
                            e.kind()
                        ))
                    })?
                    .trim()
                    .to_string(),
            ),
            None => std::env::var("CAPSTAN_TOKEN")
                .ok()
                .map(|t| t.trim().to_string()),
        }
        .filter(|t| !t.is_empty());
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| CliError::Input(format!("cannot build the http client: {e}")))?;
        Ok(ApiClient {
            base: args.url.trim_end_matches('/').to_string(),
            token,
            http,
        })
    }

    /// GETs `path`.
    pub async fn get(&self, path: &str) -> Result<Value, CliError> {
        self.send(Method::GET, path, None).await
    }

    /// Sends a request; answers the JSON body (`null` when empty) of a 2xx response.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CliError> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(b) = &body {
            req = req.json(b);
        }
        let unreachable = |e: reqwest::Error| CliError::Unreachable {
            url: self.base.clone(),
            reason: e.without_url().to_string(),
        };
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(unreachable)?;
        let value: Option<Value> = serde_json::from_slice(&bytes).ok();
        if status.is_success() {
            return Ok(value.unwrap_or(Value::Null));
        }
        let field = |k: &str| {
            value
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Err(CliError::Api {
            code: field("error_code").unwrap_or_else(|| format!("http_{}", status.as_u16())),
            message: field("message").unwrap_or_else(|| {
                status
                    .canonical_reason()
                    .unwrap_or("unexpected answer")
                    .to_lowercase()
            }),
        })
    }
}

/// Prints `value` as pretty JSON.
pub fn print_json(value: &Value) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(_) => println!("{value}"),
    }
}
