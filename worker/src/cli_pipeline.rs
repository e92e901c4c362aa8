//! `capstan pipeline …`: create, list, inspect and steer pipelines through any node's API.

use std::path::PathBuf;

use clap::Subcommand;
use reqwest::Method;
use serde_json::Value;

use crate::cli_client::{print_json, ApiArgs, ApiClient, CliError};

/// Pipeline subcommands.
#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Create a pipeline from a JSON definition (it starts stopped; `resume` runs it).
    Create {
        /// The definition file; `-` reads standard input.
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
    },
    /// List the pipelines.
    List,
    /// Show a pipeline's status.
    Status {
        /// Pipeline name.
        name: String,
    },
    /// Pause a pipeline (its owner keeps it and publishes nothing).
    Pause {
        /// Pipeline name.
        name: String,
    },
    /// Resume a pipeline (desired state running).
    Resume {
        /// Pipeline name.
        name: String,
    },
    /// Stop a pipeline (nothing runs; offsets may then be reset).
    Stop {
        /// Pipeline name.
        name: String,
    },
    /// Restart a pipeline on its owner as a new incarnation (clears a failure).
    Restart {
        /// Pipeline name.
        name: String,
    },
    /// Delete a pipeline with its offsets.
    Delete {
        /// Pipeline name.
        name: String,
    },
}

/// Runs one pipeline subcommand.
pub async fn run(args: &ApiArgs, command: PipelineCommand) -> Result<(), CliError> {
    let api = ApiClient::new(args)?;
    let path = |name: &str, rest: &str| format!("/pipelines/{}{rest}", encode(name));
    let (answer, summary) = match command {
        PipelineCommand::Create { file } => {
            let definition = read_definition(&file)?;
            let v = api
                .send(Method::POST, "/pipelines", Some(definition))
                .await?;
            let name = v["name"].as_str().unwrap_or_default().to_string();
            let line = format!(
                "created pipeline {name} (stopped; `capstan pipeline resume {name}` runs it)"
            );
            (v, line)
        }
        PipelineCommand::List => {
            let v = api.get("/pipelines").await?;
            let names: Vec<&str> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let line = if names.is_empty() {
                "no pipelines".to_string()
            } else {
                names.join("\n")
            };
            (v, line)
        }
        PipelineCommand::Status { name } => {
            let v = api.get(&path(&name, "/status")).await?;
            let line = status_lines(&v);
            (v, line)
        }
        PipelineCommand::Pause { name } => state_change(&api, &name, "pause").await?,
        PipelineCommand::Resume { name } => state_change(&api, &name, "resume").await?,
        PipelineCommand::Stop { name } => state_change(&api, &name, "stop").await?,
        PipelineCommand::Restart { name } => {
            let v = api
                .send(Method::POST, &path(&name, "/restart"), None)
                .await?;
            let line = match v["owner"].as_u64() {
                Some(owner) => format!(
                    "restarting {name} on node {owner} (epoch {})",
                    v["epoch"].as_u64().unwrap_or_default()
                ),
                None => format!("{name} has no owner; nothing runs to restart"),
            };
            (v, line)
        }
        PipelineCommand::Delete { name } => {
            let v = api.send(Method::DELETE, &path(&name, ""), None).await?;
            (v, format!("deleted pipeline {name}"))
        }
    };
    if args.json {
        print_json(&answer);
    } else {
        println!("{summary}");
    }
    Ok(())
}

async fn state_change(
    api: &ApiClient,
    name: &str,
    verb: &str,
) -> Result<(Value, String), CliError> {
    let v = api
        .send(
            Method::PUT,
            &format!("/pipelines/{}/{verb}", encode(name)),
            None,
        )
        .await?;
    Ok((v, format!("{verb} requested for {name}")))
}

fn read_definition(file: &PathBuf) -> Result<Value, CliError> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| CliError::Input(format!("cannot read standard input: {}", e.kind())))?
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| CliError::Input(format!("cannot read {}: {}", file.display(), e.kind())))?
    };
    // the syntax error names a line and column, never the content (it may hold a password)
    serde_json::from_str(&text)
        .map_err(|e| CliError::Input(format!("{} is not valid json: {e}", file.display())))
}

fn status_lines(v: &Value) -> String {
    let text = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    let owner = match v["owner"].as_u64() {
        Some(o) => format!("node {o}"),
        None => "none".into(),
    };
    let mut lines = vec![
        format!("pipeline:      {}", text("name")),
        format!("desired state: {}", text("desired_state")),
        format!("state:         {}", text("state")),
        format!(
            "owner:         {owner} (epoch {})",
            v["epoch"].as_u64().unwrap_or_default()
        ),
        format!("position:      {}", text("position")),
    ];
    if let Some(lag) = v["lag_ms"].as_u64() {
        lines.push(format!("lag:           {lag} ms"));
    }
    if let Some(rows) = v["rows_total"].as_u64() {
        lines.push(format!("rows:          {rows} published by the owner"));
    }
    if let Some(detail) = v["detail"].as_str() {
        lines.insert(3, format!("detail:        {detail}"));
    }
    if let Some(reason) = v["reason"].as_str() {
        lines.insert(3, format!("reason:        {reason}"));
    }
    lines.join("\n")
}

/// Percent-encodes a pipeline name for a URL path (names are `[a-zA-Z0-9._-]`, but a typo
/// should reach the API as a 404, not as another route).
fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_encoded_for_paths() {
        assert_eq!(encode("orders.v2-x_y"), "orders.v2-x_y");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn status_is_readable() {
        let v = serde_json::json!({"name": "p", "desired_state": "running", "state": "failed",
            "reason": "source_unreachable", "owner": 2, "epoch": 5, "position": null});
        let s = status_lines(&v);
        assert!(!s.contains("lag:") && !s.contains("rows:"), "{s}");
        assert!(s.contains("state:         failed"), "{s}");
        assert!(s.contains("reason:        source_unreachable"), "{s}");
        assert!(s.contains("owner:         node 2 (epoch 5)"), "{s}");
        let v = serde_json::json!({"name": "p", "state": "streaming", "owner": 2, "epoch": 5,
            "lag_ms": 12, "rows_total": 4021});
        let s = status_lines(&v);
        assert!(s.contains("lag:           12 ms"), "{s}");
        assert!(
            s.contains("rows:          4021 published by the owner"),
            "{s}"
        );
    }
}
