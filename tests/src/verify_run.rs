//! `capstan verify` run as a user runs it: the real binary against a pipeline of a running
//! cluster, its JSON report parsed, and the key digests a report identifies rows by.

use std::process::{Command, Stdio};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::cluster::capstan_binary;

/// One run of `capstan verify`.
pub struct VerifyRun {
    /// Its exit status.
    pub code: Option<i32>,
    /// The report (JSON with `--format json`).
    pub stdout: String,
    /// Errors and the log.
    pub stderr: String,
}

impl std::fmt::Debug for VerifyRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl VerifyRun {
    /// The JSON report.
    pub fn report(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("verify printed no json report ({e}): {self:?}"))
    }

    /// The report's entry of table `schema.table`.
    pub fn table(&self, table: &str) -> Value {
        self.report()["tables"]
            .as_array()
            .and_then(|tables| tables.iter().find(|t| t["table"] == table).cloned())
            .unwrap_or_else(|| panic!("no table {table} in the report: {self:?}"))
    }
}

/// Runs `capstan verify --pipeline <pipeline> --url <url>` with the source password in a
/// file (the API shows it as `<redacted>`) and `extra` arguments.
pub fn verify_pipeline(url: &str, pipeline: &str, password: &str, extra: &[&str]) -> VerifyRun {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let password_file = dir.path().join("source-password");
    std::fs::write(&password_file, format!("{password}\n")).expect("password file written");
    let password_file = password_file.display().to_string();
    let mut args = vec![
        "verify",
        "--pipeline",
        pipeline,
        "--url",
        url,
        "--source-password-file",
        &password_file,
    ];
    args.extend_from_slice(extra);
    let out = Command::new(capstan_binary().expect("capstan built"))
        .args(&args)
        .env_remove("CAPSTAN_URL")
        .env_remove("CAPSTAN_TOKEN")
        .env_remove("CAPSTAN_CA_FILE")
        .env("CAPSTAN_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("capstan verify runs");
    VerifyRun {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// How a report names a row: the first 16 hex characters of the SHA-256 of its key's JSON
/// with the keys sorted and no white space (`{"id":3}`).
pub fn key_digest(canonical_key: &str) -> String {
    Sha256::digest(canonical_key.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}
