//! The command line's HTTP client for a node's REST API: the `--url`, `--token-file`,
//! `--ca-file` and `--json` options every API subcommand shares, and error bodies turned into
//! `error_code: message`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use reqwest::Method;
use serde_json::Value;

use crate::api_tls;
pub use crate::cli_error::CliError;

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
    /// A file holding the bearer token sent with every request (default: the `CAPSTAN_TOKEN`
    /// variable): the API's token, or its read token for commands that only read.
    #[arg(long, value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// A PEM bundle of the CA certificates trusted for an `https://` URL (only these: the
    /// system's roots are not trusted).
    #[arg(long, value_name = "FILE", env = "CAPSTAN_CA_FILE", global = true)]
    pub ca_file: Option<PathBuf>,
    /// Print the API's JSON as it is instead of a human-readable summary.
    #[arg(long, global = true)]
    pub json: bool,
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
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(30));
        if let Some(path) = &args.ca_file {
            let tls =
                api_tls::client_config_trusting("--ca-file", path).map_err(CliError::CaFile)?;
            builder = builder.use_preconfigured_tls(tls);
        }
        let http = builder
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
            status: status.as_u16(),
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn args(ca_file: &Path) -> ApiArgs {
        ApiArgs {
            url: "https://127.0.0.1:1".into(),
            token_file: None,
            ca_file: Some(ca_file.to_path_buf()),
            json: false,
        }
    }

    fn error(ca_file: &Path) -> String {
        let e = ApiClient::new(&args(ca_file)).unwrap_err();
        assert_eq!(e.code(), "invalid_ca_file");
        let message = e.to_string();
        assert!(!message.contains("hunter2"), "{message}");
        message
    }

    #[test]
    fn a_bad_ca_file_is_named_and_never_quoted() {
        let dir = std::env::temp_dir().join(format!("capstan-cli-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let m = error(&missing);
        assert!(
            m.starts_with(&format!("cannot read --ca-file {}: ", missing.display())),
            "{m}"
        );
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "hunter2-not-a-certificate\n").unwrap();
        assert_eq!(
            error(&junk),
            format!("--ca-file {}: holds no certificate", junk.display())
        );
        let bad = dir.join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN CERTIFICATE-----\naHVudGVyMi1zZWNyZXQ=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let m = error(&bad);
        assert!(
            m.starts_with(&format!(
                "tls setup failed for --ca-file {}: ",
                bad.display()
            )),
            "{m}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
