//! Subcommands. Each parses its arguments, builds what it needs and hands over; no logic lives
//! here.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};
use tokio::net::TcpListener;
use tracing::{error, info};

use crate::api_tls::ApiTls;
use crate::cli_client::ApiArgs;
use crate::cli_cluster::ClusterCommand;
use crate::cli_pipeline::PipelineCommand;
use crate::http_server;
use crate::log_format::LogFormat;
use crate::metrics::Metrics;
use crate::node::Node;
use crate::node_control_plane::NodeControlPlane;
use crate::pipeline::DataPlane;
use crate::worker_config::WorkerConfig;

/// capstan: change data capture from MySQL and MariaDB to Kafka, on a Raft cluster of workers.
#[derive(Debug, Parser)]
#[command(name = "capstan", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a worker node.
    Worker {
        /// The worker's configuration file (TOML).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Manage pipelines through any node's REST API.
    Pipeline {
        #[command(flatten)]
        api: ApiArgs,
        #[command(subcommand)]
        command: PipelineCommand,
    },
    /// Inspect the cluster through any node's REST API.
    Cluster {
        #[command(flatten)]
        api: ApiArgs,
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Check a pipeline's topics against its source tables, by key, as a consumer would
    /// replay them: missing, extra and differing rows, and duplicates, reported value-free.
    /// Exit status 0 when they match, 1 when they differ, 2 when they cannot be compared.
    /// The source should be quiet meanwhile (docs/operations.md).
    Verify {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        args: crate::verify::VerifyArgs,
    },
    /// Print the shell completion script for SHELL (e.g. `capstan completions bash >
    /// /etc/bash_completion.d/capstan`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Development helpers.
    Dev {
        #[command(subcommand)]
        command: DevCommand,
    },
}

#[derive(Debug, Subcommand)]
enum DevCommand {
    /// Host librdkafka's mock Kafka cluster (the real Kafka protocol, in memory) for
    /// protocol-error experiments: prints its bootstrap address on one line and runs until
    /// interrupted. Lossy: it keeps about 5 MiB per partition and silently drops older
    /// records beyond that, writes no transaction markers and fences no producer. For a real
    /// broker use `deploy/dev/services.sh up` (Apache Kafka, KRaft).
    Kafka {
        /// Number of brokers.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=9))]
        brokers: i32,
    },
}

/// Runs the chosen subcommand: the process's exit status, or a message for the terminal
/// (then the status is 1).
pub async fn run(cli: Cli) -> Result<ExitCode, String> {
    let done = |r: Result<(), String>| r.map(|()| ExitCode::SUCCESS);
    match cli.command {
        Command::Worker { config } => done(worker(config).await),
        Command::Pipeline { api, command } => done(
            crate::cli_pipeline::run(&api, command)
                .await
                .map_err(|e| format!("{}: {e}", e.code())),
        ),
        Command::Cluster { api, command } => done(
            crate::cli_cluster::run(&api, command)
                .await
                .map_err(|e| format!("{}: {e}", e.code())),
        ),
        Command::Verify { api, args } => {
            init_tracing()?;
            // 0: the topics replay to the source, 1: they differ, 2: they could not be
            // compared (already printed)
            let code = crate::verify::run(&api, args).await;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(2)))
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "capstan",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Dev {
            command: DevCommand::Kafka { brokers },
        } => {
            init_tracing()?;
            let mut out = std::io::stdout();
            done(
                capstan_kafka::dev_cluster::run_dev_cluster(brokers, &mut out)
                    .await
                    .map_err(|e| format!("{e} ({})", e.code())),
            )
        }
    }
}

/// Sets up the log: the lines `CAPSTAN_LOG` selects, in the format `CAPSTAN_LOG_FORMAT` names.
fn init_tracing() -> Result<(), String> {
    let format = LogFormat::from_env().map_err(|e| format!("{e} ({})", e.code()))?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAPSTAN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // colours only on a terminal: a log file or a collector gets plain `key=value` fields
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        // one object a line, the event's fields beside `message` at the top level
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_ansi(false)
            .try_init(),
    };
    Ok(())
}

async fn worker(path: PathBuf) -> Result<(), String> {
    init_tracing()?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let config = WorkerConfig::from_toml(&text)
        .and_then(WorkerConfig::validate)
        .map_err(|e| format!("{}: {e} ({})", path.display(), e.code()))?;
    let api_listen = config.api_listen;
    let read_token = |path: &Option<PathBuf>| {
        path.as_deref()
            .map(capstan_rest_api::ApiToken::from_file)
            .transpose()
            .map_err(|e| format!("{e} ({})", e.code()))
    };
    let access = capstan_rest_api::ApiAccess {
        token: read_token(&config.api_token_file)?,
        read_token: read_token(&config.api_read_token_file)?,
    };
    let api_tls = config
        .api_tls
        .as_ref()
        .map(ApiTls::load)
        .transpose()
        .map_err(|e| format!("{e} ({})", e.code()))?;
    let node = Node::start(config)
        .await
        .map_err(|e| format!("{} ({})", e, e.code()))?;
    let metrics = Arc::new(Metrics::new());
    let data_plane = DataPlane::start(node.config.pipeline_nice)
        .map_err(|e| format!("cannot start the pipelines' runtime: {e}"))?;
    let pipelines = data_plane.handle();
    let (stop_runners, runners_stop) = tokio::sync::watch::channel(false);
    let supervisor = tokio::spawn(crate::pipeline::supervise(
        node.clone(),
        metrics.clone(),
        pipelines,
        runners_stop,
    ));
    let listener = TcpListener::bind(api_listen)
        .await
        .map_err(|e| format!("cannot listen on {api_listen}: {e}"))?;
    let plane = NodeControlPlane::new(
        node.clone(),
        metrics,
        access.token.clone(),
        api_tls.as_ref(),
    );
    tokio::spawn(observe_metrics(node.clone(), plane.clone()));
    info!(
        api = %api_listen,
        tls = api_tls.is_some(),
        token = access.token.is_some(),
        read_token = access.read_token.is_some(),
        "rest api listening"
    );
    let app = capstan_rest_api::router(Arc::new(plane), access);
    let (stop_api, api_stop) = tokio::sync::watch::channel(false);
    let watched = node.clone();
    let ended = tokio::spawn(async move {
        let fatal = tokio::select! {
            () = shutdown_signal() => None,
            () = watched.removed() => None,
            reason = watched.raft_core_stopped() => Some(reason),
        };
        if let Some(reason) = &fatal {
            // nothing can be released or committed any more: stop serving and exit loudly
            error!(node = watched.id, reason = %reason, "raft core stopped: exiting so a supervisor restarts this worker");
        }
        let _ = stop_api.send(true);
        fatal
    });
    let server_tls = api_tls.as_ref().map(ApiTls::server_config);
    http_server::serve(listener, app, server_tls, api_stop, "api")
        .await
        .map_err(|e| format!("api server failed: {e}"))?;
    if let Ok(Some(reason)) = ended.await {
        let _ = stop_runners.send(true);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), supervisor).await;
        return Err(format!(
            "the raft core stopped ({reason}); exiting so a supervisor restarts this worker (raft_core_stopped)"
        ));
    }
    // stop this node's runners first, then release the lease so the pipelines move at once
    info!(
        node = node.id,
        "shutting down: stopping runners, then releasing the lease"
    );
    let _ = stop_runners.send(true);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), supervisor).await;
    node.shutdown().await;
    Ok(())
}

/// Keeps the derived metrics (e.g. checkpoint age) current between scrapes.
async fn observe_metrics(node: Arc<Node>, plane: NodeControlPlane) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !node.is_stopping() {
        tick.tick().await;
        plane.observe_metrics();
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
