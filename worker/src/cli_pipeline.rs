//! `capstan pipeline …`: create, apply, validate, list, inspect and steer pipelines through
//! any node's API.

use std::time::Duration;

use clap::Subcommand;
use reqwest::Method;
use serde_json::Value;

use crate::cli_client::{print_json, ApiArgs, ApiClient, CliError};
use crate::cli_definition::{render, DefinitionFile, OutputFormat};
use crate::cli_status_view::{ad_hoc_lines, offsets_lines, status_lines};
use crate::cli_wait::{parse_seconds, wait_for, Freshness, WaitArgs, WaitGoal};

/// How often `--wait` polls after a command.
const POLL: Duration = Duration::from_secs(1);

/// Pipeline subcommands.
#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Create a pipeline from a JSON or YAML definition (it starts stopped; `resume` runs it).
    Create {
        #[command(flatten)]
        definition: DefinitionFile,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Create a pipeline, or replace the definition of the one of that name (its runner
    /// restarts with it).
    Apply {
        #[command(flatten)]
        definition: DefinitionFile,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Check a definition as a create would, writing nothing.
    Validate {
        #[command(flatten)]
        definition: DefinitionFile,
    },
    /// Print a pipeline's definition (secrets redacted by the server).
    Get {
        /// Pipeline name.
        name: String,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Json)]
        output: OutputFormat,
    },
    /// List the pipelines.
    List,
    /// Show a pipeline's status: state, owner, position, lag and snapshot progress.
    Status {
        /// Pipeline name.
        name: String,
        /// Redraw the status every `--interval`, with a progress bar per snapshot table, until
        /// interrupted (or, with `--wait`, until the wait is over).
        #[arg(long)]
        watch: bool,
        /// Seconds between two polls of `--watch` and `--wait`.
        #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_seconds)]
        interval: Duration,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Pause a pipeline (its owner keeps it and publishes nothing).
    Pause {
        /// Pipeline name.
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Resume a pipeline (desired state running).
    Resume {
        /// Pipeline name.
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Stop a pipeline (nothing runs; offsets may then be reset).
    Stop {
        /// Pipeline name.
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Restart a pipeline on its owner as a new incarnation (clears a failure).
    Restart {
        /// Pipeline name.
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Move a pipeline to another worker: its owner stops the runner and gives it up, then
    /// worker ID takes it with the next epoch (the current owner's id cancels a pending move).
    Move {
        /// Pipeline name.
        name: String,
        /// The worker (node id) that should own it; a live member.
        #[arg(long, value_name = "ID")]
        to: u64,
        /// `--wait STATE` waits until worker ID owns the pipeline and it reports STATE (e.g.
        /// `--wait streaming`).
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Show where streaming resumes and how far the snapshot got.
    Offsets {
        /// Pipeline name.
        name: String,
    },
    /// Snapshot captured tables again while the pipeline streams (an ad-hoc, incremental
    /// snapshot: `--table`), stop the ad-hoc snapshots (`--stop`), or, with neither, show them.
    Snapshot {
        /// Pipeline name.
        name: String,
        /// A table to snapshot again, `schema.table`; repeat the option for several.
        #[arg(long = "table", value_name = "SCHEMA.TABLE")]
        tables: Vec<String>,
        /// Stop the ad-hoc snapshots still to read (their tables stream on, ungated).
        #[arg(long, conflicts_with = "tables")]
        stop: bool,
    },
    /// Forget the committed position and snapshot progress (the pipeline must be stopped).
    ResetOffsets {
        /// Pipeline name.
        name: String,
    },
    /// Delete a pipeline with its offsets.
    Delete {
        /// Pipeline name.
        name: String,
    },
}

/// What a command did: the API's answer, its summary, and what `--wait` then waits for.
struct Done {
    answer: Value,
    summary: String,
    wait: Option<(String, WaitGoal)>,
}

impl Done {
    fn new(answer: Value, summary: String) -> Self {
        Done {
            answer,
            summary,
            wait: None,
        }
    }

    fn then_wait(mut self, name: &str, goal: Option<WaitGoal>) -> Self {
        self.wait = goal.map(|g| (name.to_string(), g));
        self
    }
}

/// Runs one pipeline subcommand.
pub async fn run(args: &ApiArgs, command: PipelineCommand) -> Result<(), CliError> {
    let api = ApiClient::new(args)?;
    let done = match command {
        PipelineCommand::Create { definition, wait } => {
            let v = create(&api, definition.read()?).await?;
            let name = text(&v["name"]);
            Done::new(v, created_line(&name)).then_wait(&name, wait.goal(Freshness::Created))
        }
        PipelineCommand::Apply { definition, wait } => {
            let (v, summary) = apply(&api, definition.read()?).await?;
            let name = text(&v["name"]);
            Done::new(v, summary).then_wait(&name, wait.goal(Freshness::Created))
        }
        PipelineCommand::Validate { definition } => {
            let v = api
                .send(
                    Method::POST,
                    "/pipelines/validate",
                    Some(definition.read()?),
                )
                .await?;
            let line = format!("the definition of pipeline {} is valid", text(&v["name"]));
            Done::new(v, line)
        }
        PipelineCommand::Get { name, output } => {
            let v = api.get(&path(&name, "")).await?;
            let format = if args.json {
                OutputFormat::Json
            } else {
                output
            };
            println!("{}", render(&v["config"], format)?);
            return Ok(());
        }
        PipelineCommand::List => {
            let v = api.get("/pipelines").await?;
            let line = list_lines(&v);
            Done::new(v, line)
        }
        PipelineCommand::Status {
            name,
            watch,
            interval,
            wait,
        } => {
            let goal = wait.goal(Freshness::Any);
            if watch {
                return crate::cli_watch::watch(&api, &name, interval, goal.as_ref(), args.json)
                    .await;
            }
            let v = match &goal {
                Some(goal) => wait_for(&api, &name, goal, interval).await?,
                None => api.get(&path(&name, "/status")).await?,
            };
            let line = status_lines(&v);
            Done::new(v, line)
        }
        PipelineCommand::Pause { name, wait } => state_change(&api, &name, "pause", &wait).await?,
        PipelineCommand::Resume { name, wait } => {
            state_change(&api, &name, "resume", &wait).await?
        }
        PipelineCommand::Stop { name, wait } => state_change(&api, &name, "stop", &wait).await?,
        PipelineCommand::Restart { name, wait } => {
            let v = api
                .send(Method::POST, &path(&name, "/restart"), None)
                .await?;
            let epoch = v["epoch"].as_u64().unwrap_or_default();
            let line = match v["owner"].as_u64() {
                Some(owner) => format!("restarting {name} on node {owner} (epoch {epoch})"),
                None => format!("{name} has no owner; nothing runs to restart"),
            };
            Done::new(v, line).then_wait(&name, wait.goal(Freshness::Epoch(epoch)))
        }
        PipelineCommand::Move { name, to, wait } => {
            let body = serde_json::json!({ "to": to });
            let v = api
                .send(Method::POST, &path(&name, "/move"), Some(body))
                .await?;
            let line = move_line(&name, to, &v);
            Done::new(v, line).then_wait(&name, wait.goal(Freshness::Moved(to)))
        }
        PipelineCommand::Offsets { name } => {
            let v = api.get(&path(&name, "/offsets")).await?;
            let line = offsets_lines(&v);
            Done::new(v, line)
        }
        PipelineCommand::Snapshot { name, tables, stop } => {
            let path = path(&name, "/snapshots");
            let v = if stop {
                api.send(Method::DELETE, &path, None).await?
            } else if !tables.is_empty() {
                let body = serde_json::json!({ "tables": tables });
                api.send(Method::POST, &path, Some(body)).await?
            } else {
                let v = api.get(&path).await?;
                let line = ad_hoc_lines(&v);
                show(args, &v, &line);
                return Ok(());
            };
            let line = snapshot_change_line(&name, stop, &v);
            Done::new(v, line)
        }
        PipelineCommand::ResetOffsets { name } => {
            let v = api
                .send(Method::DELETE, &path(&name, "/offsets"), None)
                .await?;
            let line = format!(
                "reset the offsets of {name}: its next start resolves start_position again"
            );
            Done::new(v, line)
        }
        PipelineCommand::Delete { name } => {
            let v = api.send(Method::DELETE, &path(&name, ""), None).await?;
            Done::new(v, format!("deleted pipeline {name}"))
        }
    };
    show(args, &done.answer, &done.summary);
    if let Some((name, goal)) = &done.wait {
        let status = wait_for(&api, name, goal, POLL).await?;
        let line = format!("{name} is {}", goal.state);
        show(args, &status, &line);
    }
    Ok(())
}

fn show(args: &ApiArgs, answer: &Value, summary: &str) {
    if args.json {
        print_json(answer);
    } else {
        println!("{summary}");
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn path(name: &str, rest: &str) -> String {
    format!("/pipelines/{}{rest}", encode(name))
}

async fn create(api: &ApiClient, definition: Value) -> Result<Value, CliError> {
    api.send(Method::POST, "/pipelines", Some(definition)).await
}

fn created_line(name: &str) -> String {
    format!("created pipeline {name} (stopped; `capstan pipeline resume {name}` runs it)")
}

/// Whether `apply` creates or updates, from the answer to `GET /pipelines/{name}`.
#[derive(Debug, PartialEq, Eq)]
enum ApplyAction {
    Create,
    Update,
}

/// `apply` after `GET /pipelines/{name}` failed: create when the pipeline is unknown, else
/// the failure stands.
fn create_if_unknown(e: CliError) -> Result<ApplyAction, CliError> {
    match &e {
        CliError::Api { code, .. } if code == "unknown_pipeline" => Ok(ApplyAction::Create),
        _ => Err(e),
    }
}

/// Creates the pipeline, or replaces its definition when one of that name exists. A
/// definition without a usable name is sent to create, which names the field.
async fn apply(api: &ApiClient, definition: Value) -> Result<(Value, String), CliError> {
    let name = match definition["name"].as_str() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => {
            let v = create(api, definition).await?;
            let line = created_line(&text(&v["name"]));
            return Ok((v, line));
        }
    };
    let action = match api.get(&path(&name, "")).await {
        Ok(_) => ApplyAction::Update,
        Err(e) => create_if_unknown(e)?,
    };
    match action {
        ApplyAction::Create => {
            let v = create(api, definition).await?;
            Ok((v, created_line(&name)))
        }
        ApplyAction::Update => {
            let v = api
                .send(Method::PUT, &path(&name, "/config"), Some(definition))
                .await?;
            let line =
                format!("updated pipeline {name} (its runner restarts with the new definition)");
            Ok((v, line))
        }
    }
}

async fn state_change(
    api: &ApiClient,
    name: &str,
    verb: &str,
    wait: &WaitArgs,
) -> Result<Done, CliError> {
    let v = api
        .send(Method::PUT, &path(name, &format!("/{verb}")), None)
        .await?;
    let desired = match verb {
        "pause" => "paused",
        "resume" => "running",
        _ => "stopped",
    };
    Ok(Done::new(v, format!("{verb} requested for {name}"))
        .then_wait(name, wait.goal(Freshness::Desired(desired))))
}

/// What the answer to a move says: pending (from where), or nothing to do.
fn move_line(name: &str, to: u64, v: &Value) -> String {
    match (v["move_to"].as_u64(), v["owner"].as_u64()) {
        (Some(_), Some(owner)) => format!(
            "moving {name} from node {owner} to node {to}: node {owner} stops its runner, then node {to} takes it"
        ),
        (Some(_), None) => format!("{name} has no owner: node {to} takes it when it is placed"),
        (None, _) => format!("{name} is owned by node {to}; no move pending"),
    }
}

/// What a request (or, `stopped`, a stop) of an ad-hoc snapshot did.
fn snapshot_change_line(name: &str, stopped: bool, v: &Value) -> String {
    let tables: Vec<&str> = v["tables"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let tables = tables.join(", ");
    let epoch = v["epoch"].as_u64().unwrap_or_default();
    match (stopped, v["owner"].as_u64()) {
        (true, _) => format!("stopped the ad-hoc snapshot of {tables} in {name}: they stream on"),
        (false, Some(owner)) => {
            format!("snapshotting {tables} of {name} again on node {owner} (epoch {epoch})")
        }
        (false, None) => {
            format!("{tables} of {name} will be snapshotted again when the pipeline next runs")
        }
    }
}

fn list_lines(v: &Value) -> String {
    let names: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "no pipelines".to_string()
    } else {
        names.join("\n")
    }
}

/// Percent-encodes a pipeline name for a URL path (names are `[a-zA-Z0-9._-]`, but a typo
/// should reach the API as a 404, not as another route).
pub fn encode(name: &str) -> String {
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
    fn apply_creates_only_what_is_unknown() {
        let api = |code: &str| CliError::Api {
            status: 404,
            code: code.into(),
            message: "m".into(),
        };
        assert_eq!(
            create_if_unknown(api("unknown_pipeline")).unwrap(),
            ApplyAction::Create
        );
        let e = create_if_unknown(api("no_leader")).unwrap_err();
        assert_eq!(e.code(), "no_leader");
        let unreachable = CliError::Unreachable {
            url: "u".into(),
            reason: "r".into(),
        };
        let e = create_if_unknown(unreachable).unwrap_err();
        assert_eq!(e.code(), "api_unreachable");
    }

    #[test]
    fn a_move_says_whether_it_is_pending() {
        let pending = serde_json::json!({"name": "p", "owner": 1, "move_to": 3, "epoch": 4});
        assert_eq!(
            move_line("p", 3, &pending),
            "moving p from node 1 to node 3: node 1 stops its runner, then node 3 takes it"
        );
        let unowned = serde_json::json!({"name": "p", "owner": null, "move_to": 3, "epoch": 4});
        assert_eq!(
            move_line("p", 3, &unowned),
            "p has no owner: node 3 takes it when it is placed"
        );
        let done = serde_json::json!({"name": "p", "owner": 3, "move_to": null, "epoch": 4});
        assert_eq!(
            move_line("p", 3, &done),
            "p is owned by node 3; no move pending"
        );
    }

    #[test]
    fn an_ad_hoc_snapshot_says_where_it_runs() {
        let v = serde_json::json!({"name": "p", "tables": ["shop.a", "shop.b"], "owner": 2, "epoch": 8});
        assert_eq!(
            snapshot_change_line("p", false, &v),
            "snapshotting shop.a, shop.b of p again on node 2 (epoch 8)"
        );
        let v = serde_json::json!({"name": "p", "tables": ["shop.a"], "owner": null, "epoch": 3});
        assert_eq!(
            snapshot_change_line("p", false, &v),
            "shop.a of p will be snapshotted again when the pipeline next runs"
        );
        assert_eq!(
            snapshot_change_line("p", true, &v),
            "stopped the ad-hoc snapshot of shop.a in p: they stream on"
        );
    }

    #[test]
    fn lists_read_one_name_a_line() {
        assert_eq!(list_lines(&serde_json::json!([])), "no pipelines");
        assert_eq!(list_lines(&serde_json::json!(["a", "b"])), "a\nb");
    }
}
