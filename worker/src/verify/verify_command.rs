//! `capstan verify`: its options, and the run that wires the parts together — the target's
//! definition, the source read ([`SourceScan`]), each topic replayed ([`replay_topic`]), the
//! pure comparison ([`compare`]) and the report. No decision is made here.

use std::path::PathBuf;
use std::time::Duration;

use capstan_connectors::mysql::snapshot::SnapshotReader;
use capstan_core::change::TableId;
use capstan_kafka::record::{RecordBuilder, SchemaFraming};
use capstan_kafka::registry::{SchemaRegistrar, SubjectSchemas};
use clap::{ArgGroup, Args, ValueEnum};
use tracing::info;

use super::checkpoint_wait::wait_for_checkpoint;
use super::record_form::RecordForm;
use super::source_scan::SourceScan;
use super::table_report::{compare, TableReport};
use super::topic_replay::TopicReplay;
use super::topic_scan::{bootstrap_servers, replay_topic, topic_reader};
use super::verify_error::VerifyError;
use super::verify_report::VerifyReport;
use super::verify_target::VerifyTarget;
use crate::cli_client::{print_json, ApiArgs, ApiClient, CliError};
use crate::cli_definition::DefinitionFile;

/// How the report prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Lines for a terminal.
    Text,
    /// One JSON object.
    Json,
}

/// The options of `capstan verify`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["pipeline", "definition"])))]
pub struct VerifyArgs {
    /// The pipeline to verify; its definition comes from the API at --url.
    #[arg(long, value_name = "NAME")]
    pipeline: Option<String>,
    /// The pipeline's definition file instead (JSON, or YAML for .yaml/.yml; - reads
    /// standard input).
    #[arg(long, value_name = "FILE")]
    definition: Option<PathBuf>,
    /// Verify only this table (schema.table; repeatable). Default: every table the pipeline
    /// captures.
    #[arg(long = "table", value_name = "SCHEMA.TABLE")]
    tables: Vec<String>,
    /// A file holding the source password, for a definition whose password the API shows
    /// as <redacted> (references are resolved here, like the owner does).
    #[arg(long, value_name = "FILE")]
    source_password_file: Option<PathBuf>,
    /// The report's format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Examples listed per kind of difference and table.
    #[arg(long, value_name = "N", default_value_t = 20)]
    examples: usize,
    /// Count duplicates as differences (exit status 1).
    #[arg(long)]
    strict: bool,
    /// Rows per source read.
    #[arg(long, value_name = "ROWS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    chunk_size: u32,
    /// How long reading one topic to its end may take, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    topic_timeout: u64,
    /// First wait up to SECONDS until the pipeline's checkpoint covers the source's executed
    /// position (asks the API at --url).
    #[arg(long, value_name = "SECONDS")]
    wait_for_checkpoint: Option<u64>,
}

/// Runs `capstan verify`; prints the report (stdout) or the error (stderr) and answers the
/// exit status: 0 clean, 1 differences, 2 could not compare.
pub async fn run(api: &ApiArgs, args: VerifyArgs) -> i32 {
    match verify(api, &args).await {
        Ok(report) => {
            let json = args.format == ReportFormat::Json || api.json;
            if json {
                match serde_json::to_value(&report) {
                    Ok(v) => print_json(&v),
                    Err(e) => {
                        let e = VerifyError::Render(e.to_string());
                        eprintln!("capstan: {}: {e}", e.code());
                        return 2;
                    }
                }
            } else {
                print!("{}", report.to_text());
            }
            report.exit_code()
        }
        Err(e) => {
            let transient = if e.is_transient() {
                " (transient: try again)"
            } else {
                ""
            };
            eprintln!("capstan: {}: {e}{transient}", e.code());
            2
        }
    }
}

async fn verify(api: &ApiArgs, args: &VerifyArgs) -> Result<VerifyReport, VerifyError> {
    let password_file = args.source_password_file.as_deref();
    let target = match (&args.pipeline, &args.definition) {
        (Some(name), _) => VerifyTarget::fetch(&ApiClient::new(api)?, name, password_file).await?,
        (None, Some(file)) => {
            let definition = DefinitionFile { file: file.clone() }.read()?;
            VerifyTarget::from_definition(definition, password_file)?
        }
        // clap requires one of them
        (None, None) => {
            return Err(CliError::Input("name --pipeline or --definition".into()).into())
        }
    };
    let spec = &target.spec;
    let framing = spec.sink.record_options.schemas;
    // `avro`: the topics' schemas are read from the pipeline's registry, as a consumer would
    let registry = match (&spec.sink.schema_registry, framing) {
        (Some(settings), SchemaFraming::Avro) => {
            Some(SchemaRegistrar::new(settings).map_err(|error| {
                VerifyError::InvalidDefinition {
                    field: "kafka.schema_registry".into(),
                    message: error.to_string(),
                }
            })?)
        }
        _ => None,
    };
    let server = format!("{}:{}", spec.source.host, spec.source.port);
    let source_error = |error| VerifyError::Source {
        server: server.clone(),
        error: Box::new(error),
    };
    let mut reader = SnapshotReader::open(&spec.source)
        .await
        .map_err(source_error)?;
    if let Some(seconds) = args.wait_for_checkpoint {
        let executed = reader.executed_position().await.map_err(source_error)?;
        let client = ApiClient::new(api)?;
        wait_for_checkpoint(&client, &spec.name, &executed, Duration::from_secs(seconds)).await?;
    }
    let tables = if args.tables.is_empty() {
        reader
            .resolve_all_tables(&spec.tables)
            .await
            .map_err(source_error)?
    } else {
        chosen_tables(&args.tables, spec)?
    };
    let mut options = spec.sink.record_options.clone();
    // every row is compared, whatever its size
    options.max_record_bytes = usize::MAX;
    let builder = RecordBuilder::new(options);
    let topics = topic_reader(spec, Duration::from_secs(args.topic_timeout));
    let servers = bootstrap_servers(spec).to_string();
    let mut reports: Vec<TableReport> = Vec::with_capacity(tables.len());
    for id in &tables {
        let table = reader.describe(id).await.map_err(source_error)?;
        let mut form = match registry {
            Some(_) => RecordForm::avro(SubjectSchemas::default()),
            None => RecordForm::json(framing),
        };
        // the source first: with a pipeline still catching up, the topic is read later
        let expected = SourceScan {
            reader: &mut reader,
            server: &server,
            builder: &builder,
            pipeline: &spec.name,
            chunk_size: args.chunk_size,
            form: &mut form,
        }
        .expected(&table)
        .await?;
        let topic = builder.topic_for(id).map_err(|error| VerifyError::Encode {
            table: id.to_string(),
            error: Box::new(error),
        })?;
        if let Some(registry) = &registry {
            let schemas = SubjectSchemas::fetch(registry, &topic)
                .await
                .map_err(|error| VerifyError::Kafka {
                    servers: servers.clone(),
                    topic: topic.clone(),
                    error: Box::new(error),
                })?;
            info!(
                topic,
                schemas = schemas.len(),
                "verify: topic schemas read from the registry"
            );
            form.set_topic_schemas(schemas);
        }
        let replay = TopicReplay::new(
            &id.schema,
            &id.table,
            SourceScan::key_columns(&table),
            args.examples,
        );
        let replay = replay_topic(&topics, &servers, &topic, form, replay).await?;
        let report = compare(&id.to_string(), &topic, &expected, &replay, args.examples);
        info!(
            table = %id,
            missing = report.missing.count,
            extra = report.extra.count,
            differing = report.differing.count,
            duplicates = report.duplicates.count,
            "verify: table compared"
        );
        reports.push(report);
    }
    Ok(VerifyReport::new(&spec.name, reports, args.strict))
}

/// The tables `--table` names, each captured by the pipeline.
fn chosen_tables(
    names: &[String],
    spec: &crate::pipeline::CheckedPipelineSpec,
) -> Result<Vec<TableId>, VerifyError> {
    let mut out: Vec<TableId> = Vec::with_capacity(names.len());
    for name in names {
        let id = match name.split_once('.') {
            Some((s, t)) if !s.is_empty() && !t.is_empty() => TableId::new(s, t),
            _ => {
                return Err(VerifyError::Table {
                    table: name.clone(),
                    reason: "must be `schema.table`",
                })
            }
        };
        if !spec.tables.admits(&id) {
            return Err(VerifyError::Table {
                table: name.clone(),
                reason: "is not captured by the pipeline",
            });
        }
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}
