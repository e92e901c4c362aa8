//! A pipeline definition as users POST it: JSON, unknown keys refused, validated without I/O
//! into a [`CheckedPipelineSpec`]. Every error names the field it is about and never echoes a
//! value (a password or a host name could be in it).

use capstan_connectors::mysql::{
    FlavorChoice, SourceConfig, SourceError, TableFilter, ValidSourceConfig, XaMode,
};
use capstan_core::position::{Flavor, Position};
use capstan_kafka::config::{CheckedSinkConfig, SinkConfig};
use serde::{Deserialize, Serialize};

pub use super::columns_spec::ColumnsSpec;
pub use super::routes_spec::RouteSpec;
pub use super::schema_changes_spec::SchemaChangesSpec;
pub use super::snapshot_spec::{CheckedSnapshot, SnapshotMode, SnapshotSpec};
pub use super::tables_spec::TablesSpec;

/// A pipeline definition.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// Unique name: 1 to 100 characters from `[a-zA-Z0-9._-]`, starting with a letter or a
    /// digit. Also names the Kafka transactional id in exactly-once mode.
    pub name: String,
    /// The MySQL or MariaDB server to capture from.
    pub source: SourceConfig,
    /// Which tables to capture (default: all).
    #[serde(default)]
    pub tables: TablesSpec,
    /// Columns excluded, masked or hashed in the source (default: none).
    #[serde(default)]
    pub columns: ColumnsSpec,
    /// The initial snapshot (default: `never`).
    #[serde(default)]
    pub snapshot: SnapshotSpec,
    /// Where change events go.
    pub kafka: SinkConfig,
    /// Tables sent to one topic instead of their own (default: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteSpec>,
    /// Where a pipeline without a checkpoint starts (default: `checkpoint`, which for a new
    /// pipeline means all history the server retains).
    #[serde(default)]
    pub start_position: StartPositionSpec,
    /// Two-phase XA transactions (MySQL and MariaDB): `refuse` (default) halts at an XA
    /// PREPARE; `track` holds prepared transactions in memory and delivers each once at its
    /// XA COMMIT, nothing at its XA ROLLBACK. One-phase XA COMMIT is an ordinary transaction
    /// in both modes.
    #[serde(default)]
    pub xa: XaSpec,
    /// `track` only: the most prepared transactions held at once; more halts
    /// `xa_prepared_pool_exhausted` (nothing is ever evicted). Default 10000.
    #[serde(default = "default_max_prepared")]
    pub max_prepared_transactions: u32,
    /// What schema-change events carry (default: no DDL text).
    #[serde(default, skip_serializing_if = "SchemaChangesSpec::is_default")]
    pub schema_changes: SchemaChangesSpec,
}

/// How two-phase XA transactions are handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XaSpec {
    /// Halt `unsupported_transaction_shape` at an XA PREPARE.
    #[default]
    Refuse,
    /// Pool prepared transactions and deliver them at their resolution.
    Track,
}

fn default_max_prepared() -> u32 {
    10_000
}

/// Where a pipeline without a checkpoint starts: `"checkpoint"`, `"current"` or
/// `{"gtids": "<server text>"}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StartPositionSpec {
    /// The replicated checkpoint; empty for a new pipeline (all retained history).
    #[default]
    Checkpoint,
    /// The server's executed set, read once before the first dump.
    Current,
    /// An explicit GTID set (MySQL) or GTID position (MariaDB); `source.flavor` must be set.
    Gtids(String),
}

/// The checked start position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// The replicated checkpoint (empty: all retained history).
    Checkpoint,
    /// The server's executed set, read once.
    Current,
    /// An explicit position.
    Position(Position),
}

/// A validated pipeline definition.
#[derive(Clone, Debug)]
pub struct CheckedPipelineSpec {
    /// The name.
    pub name: String,
    /// Source connection.
    pub source: ValidSourceConfig,
    /// Capture filter.
    pub tables: TableFilter,
    /// Sink settings (validated for the source's flavour, or MySQL's when detected).
    pub sink: CheckedSinkConfig,
    /// Where to start without a checkpoint.
    pub start: StartAt,
    /// Two-phase XA handling.
    pub xa: XaMode,
    /// The initial snapshot; `None` for `mode: never`.
    pub snapshot: Option<CheckedSnapshot>,
}

/// A refused pipeline definition.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct PipelineSpecError {
    /// The field, as a dotted path (`source.port`, `tables.include[2]`).
    pub field: String,
    /// What is wrong, value-free.
    pub message: String,
}

impl PipelineSpecError {
    pub(super) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        PipelineSpecError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        "invalid_pipeline"
    }
}

impl PipelineSpec {
    /// Parses JSON, naming the field of the first problem (unknown key, wrong type, missing
    /// field). serde's messages quote unexpected *keys* and *types*, never a value's content
    /// beyond its type, except for enum variants and unknown fields, which are names.
    pub fn from_json(value: serde_json::Value) -> Result<Self, PipelineSpecError> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "(root)".to_string()
            } else {
                path
            };
            PipelineSpecError::new(field, redact_serde_message(&e.inner().to_string()))
        })
    }

    /// Checks every field without I/O.
    pub fn validate(&self) -> Result<CheckedPipelineSpec, PipelineSpecError> {
        check_name(&self.name)?;
        let mut source = self.source.validate().map_err(|e| {
            let field = match (&e, e.code()) {
                (SourceError::ConfigInvalid { field, .. }, _) => format!("source.{field}"),
                (_, "server_id_required") => "source.server_id".to_string(),
                (_, "tls_verification_unspecified") => "source.tls.mode".to_string(),
                (_, "invalid_liveness_config") => "source.stream_timeout_ms".to_string(),
                _ => "source".to_string(),
            };
            PipelineSpecError::new(field, format!("{e} ({})", e.code()))
        })?;
        let tables = self.tables.to_filter()?;
        let snapshot = self.snapshot.check(&tables)?;
        let flavor = match self.source.flavor {
            FlavorChoice::Mariadb => Some(Flavor::Mariadb),
            FlavorChoice::Mysql => Some(Flavor::Mysql),
            FlavorChoice::Detect => None,
        };
        let mut sink = self
            .kafka
            .validate(flavor.unwrap_or(Flavor::Mysql))
            .map_err(|e| PipelineSpecError::new("kafka", format!("{e} ({})", e.code())))?;
        let topics = &sink.record_options.topics;
        if self.routes.is_empty() && !topics.has_table() {
            return Err(PipelineSpecError::new(
                "kafka.topic_template",
                "must contain {table} (unless `routes` send every captured table to a topic)",
            ));
        }
        let router = super::routes_spec::check_routes(
            &self.routes,
            topics.prefix(),
            topics.has_table(),
            &self.tables,
            &tables,
        )?;
        sink.record_options.topics = sink.record_options.topics.clone().with_router(router);
        source.columns = self.columns.check(&sink.record_options.message_keys)?;
        source.keep_ddl_statement = self.schema_changes.include_ddl;
        let start = match &self.start_position {
            StartPositionSpec::Checkpoint => StartAt::Checkpoint,
            StartPositionSpec::Current => StartAt::Current,
            StartPositionSpec::Gtids(text) => {
                let flavor = flavor.ok_or_else(|| {
                    PipelineSpecError::new(
                        "source.flavor",
                        "must be mysql or mariadb when start_position names gtids",
                    )
                })?;
                let position = Position::parse(flavor, text)
                    .map_err(|e| PipelineSpecError::new("start_position.gtids", e.to_string()))?;
                StartAt::Position(position)
            }
        };
        let xa = match self.xa {
            XaSpec::Refuse => XaMode::Refuse,
            XaSpec::Track if self.max_prepared_transactions == 0 => {
                return Err(PipelineSpecError::new(
                    "max_prepared_transactions",
                    "must be positive",
                ))
            }
            XaSpec::Track => XaMode::Track {
                max_prepared: self.max_prepared_transactions as usize,
            },
        };
        if snapshot.is_some() && matches!(start, StartAt::Position(_)) {
            return Err(PipelineSpecError::new(
                "start_position",
                "a snapshot starts the stream at its own floor; use `checkpoint` or `current`",
            ));
        }
        let when_needed = snapshot
            .as_ref()
            .is_some_and(|s| s.mode == SnapshotMode::WhenNeeded);
        if when_needed && sink.delivery == capstan_kafka::config::DeliveryMode::ExactlyOnce {
            return Err(PipelineSpecError::new(
                "snapshot.mode",
                "when_needed is not available with exactly_once delivery (a re-snapshot \
                 moves the position back, which the offsets record refuses); use initial",
            ));
        }
        let checked = CheckedPipelineSpec {
            name: self.name.clone(),
            source,
            tables,
            sink,
            start,
            xa,
            snapshot,
        };
        super::spec_secrets::check_references(&checked)?;
        Ok(checked)
    }
}

fn check_name(name: &str) -> Result<(), PipelineSpecError> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let ok_start = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > 100 || !ok_chars || !ok_start {
        return Err(PipelineSpecError::new(
            "name",
            "must be 1 to 100 characters from [a-zA-Z0-9._-], starting with a letter or digit",
        ));
    }
    Ok(())
}

/// serde quotes the offending *value* in some messages (`invalid type: integer `12345``,
/// `invalid value: string "…"`, `unknown variant `…``) and a *key* in others (`unknown field`,
/// `missing field`). Values may be secrets, so every quoted part of a value message is
/// replaced; key messages are kept as they are.
fn redact_serde_message(message: &str) -> String {
    let names_a_key = message.starts_with("unknown field") || message.starts_with("missing field");
    if names_a_key {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find(['"', '`']) {
        let quote = rest.as_bytes()[start] as char;
        out.push_str(&rest[..start]);
        match rest[start + 1..].find(quote) {
            Some(end) => {
                out.push_str("<redacted>");
                rest = &rest[start + 1 + end + 1..];
            }
            None => {
                out.push_str("<redacted>");
                rest = "";
            }
        }
    }
    out.push_str(rest);
    // "expected one of `a`, `b`" lists only names we defined; they were redacted above
    // together with the value, which loses nothing secret
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_connectors::mysql::TlsChoice;
    use capstan_core::change::TableId;
    use serde_json::json;

    fn good() -> serde_json::Value {
        json!({
            "name": "orders",
            "source": {
                "host": "db.internal", "port": 3306, "user": "capstan", "password": "s3cret-pw",
                "tls": {"mode": "verify_none"}, "server_id": 1001, "flavor": "mysql"
            },
            "tables": {"include": ["shop.orders", "shop.items"]},
            "kafka": {"bootstrap_servers": "k1:9092", "topic_prefix": "shop"}
        })
    }

    fn err(v: serde_json::Value) -> PipelineSpecError {
        match PipelineSpec::from_json(v) {
            Err(e) => e,
            Ok(spec) => spec.validate().unwrap_err(),
        }
    }

    #[test]
    fn a_good_definition_validates() {
        let spec = PipelineSpec::from_json(good()).unwrap().validate().unwrap();
        assert_eq!(spec.name, "orders");
        assert!(spec.tables.admits(&TableId::new("shop", "orders")));
        assert!(!spec.tables.admits(&TableId::new("shop", "audit")));
        assert_eq!(spec.start, StartAt::Checkpoint);
    }

    #[test]
    fn unknown_keys_wrong_types_and_missing_fields_name_the_field() {
        let mut v = good();
        v["source"]["pasword"] = json!("x");
        let e = err(v);
        assert_eq!(e.field, "source.pasword");
        assert!(e.message.contains("unknown field"), "{e}");

        let mut v = good();
        v["source"]["port"] = json!("not-a-port");
        let e = err(v);
        assert_eq!(e.field, "source.port");
        assert!(!e.message.contains("not-a-port"), "{e}");

        let mut v = good();
        v["kafka"].as_object_mut().unwrap().remove("topic_prefix");
        let e = err(v);
        assert!(e.message.contains("topic_prefix"), "{e}");

        let mut v = good();
        v["extra"] = json!(1);
        assert!(err(v).message.contains("extra"));
    }

    #[test]
    fn validation_names_the_field_and_never_the_secret() {
        let cases = [
            ("/name", json!("bad name!"), "name"),
            ("/source/server_id", json!(0), "source.server_id"),
            (
                "/tables",
                json!({"include": ["noschema"]}),
                "tables.include[0]",
            ),
            (
                "/tables",
                json!({"include": ["a.b"], "exclude": ["c.d"]}),
                "tables.exclude",
            ),
            ("/snapshot", json!({"mode": "sometimes"}), "snapshot.mode"),
            (
                "/snapshot",
                json!({"mode": "initial", "chunk_size": 0}),
                "snapshot.chunk_size",
            ),
            (
                "/snapshot",
                json!({"mode": "initial", "tables": ["shop.audit"]}),
                "snapshot.tables[0]",
            ),
            (
                "/snapshot",
                json!({"mode": "initial", "tables": ["shop.orders", "shop.orders"]}),
                "snapshot.tables[1]",
            ),
            (
                "/snapshot",
                json!({"mode": "initial", "max_rows_per_second": 0}),
                "snapshot.max_rows_per_second",
            ),
            (
                "/snapshot",
                json!({"mode": "initial", "parallel_reads": 0}),
                "snapshot.parallel_reads",
            ),
            (
                "/snapshot",
                json!({"mode": "initial", "parallel_reads": 17}),
                "snapshot.parallel_reads",
            ),
            (
                "/snapshot",
                json!({"mode": "initial", "chunk": 5}),
                "snapshot.chunk",
            ),
            (
                "/start_position",
                json!({"gtids": "nope"}),
                "start_position.gtids",
            ),
        ];
        for (path, value, field) in cases {
            let mut v = good();
            let mut slot = &mut v;
            for seg in path.trim_start_matches('/').split('/') {
                slot = &mut slot[seg];
            }
            *slot = value;
            let e = err(v);
            assert_eq!(e.field, field, "{e}");
            assert!(!e.to_string().contains("s3cret-pw"));
        }
        let mut v = good();
        v["source"].as_object_mut().unwrap().remove("tls");
        assert_eq!(err(v).field, "source.tls.mode");
    }

    #[test]
    fn snapshot_tables_default_to_the_captured_ones() {
        let mut v = good();
        v["snapshot"] = json!({"mode": "initial"});
        let spec = PipelineSpec::from_json(v).unwrap().validate().unwrap();
        let snap = spec.snapshot.unwrap();
        assert_eq!(
            snap.tables,
            Some(vec![
                TableId::new("shop", "items"),
                TableId::new("shop", "orders")
            ])
        );
        // no chunk_size: adaptive; one read at a time unless asked
        assert_eq!((snap.chunk_size, snap.mode), (None, SnapshotMode::Initial));
        assert_eq!(snap.parallel_reads, 1);
        // every table captured: resolved at the first start
        let mut v = good();
        v["tables"] = json!({});
        v["snapshot"] = json!({"mode": "when_needed", "chunk_size": 10, "parallel_reads": 6});
        let spec = PipelineSpec::from_json(v).unwrap().validate().unwrap();
        let snap = spec.snapshot.unwrap();
        assert_eq!(
            (snap.tables, snap.chunk_size, snap.parallel_reads),
            (None, Some(10), 6)
        );
        let spec = PipelineSpec::from_json(good()).unwrap().validate().unwrap();
        assert!(spec.snapshot.is_none());
    }

    #[test]
    fn snapshot_refuses_an_explicit_start_and_when_needed_with_exactly_once() {
        let mut v = good();
        v["snapshot"] = json!({"mode": "initial"});
        v["start_position"] = json!({"gtids": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"});
        assert_eq!(err(v).field, "start_position");
        let mut v = good();
        v["snapshot"] = json!({"mode": "when_needed"});
        v["kafka"]["delivery"] = json!("exactly_once");
        assert_eq!(err(v).field, "snapshot.mode");
        // verify_ca works for the snapshot too (its reader is on the stream's TLS client)
        let mut v = good();
        v["snapshot"] = json!({"mode": "initial"});
        v["source"]["tls"] = json!({"mode": "verify_ca", "ca_file": "/etc/ca.pem"});
        let spec = PipelineSpec::from_json(v).unwrap().validate().unwrap();
        assert!(matches!(spec.source.tls, TlsChoice::VerifyCa(_)));
        assert!(spec.snapshot.is_some());
        let mut v = good();
        v["snapshot"] = json!({"mode": "initial"});
        v["kafka"]["delivery"] = json!("exactly_once");
        v["start_position"] = json!("current");
        assert!(PipelineSpec::from_json(v).unwrap().validate().is_ok());
    }

    #[test]
    fn explicit_gtids_need_an_explicit_flavor() {
        let mut v = good();
        v["source"]["flavor"] = json!("detect");
        v["start_position"] = json!({"gtids": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"});
        assert_eq!(err(v).field, "source.flavor");
        let mut v = good();
        v["start_position"] = json!({"gtids": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"});
        let spec = PipelineSpec::from_json(v).unwrap().validate().unwrap();
        assert!(matches!(spec.start, StartAt::Position(_)));
        let mut v = good();
        v["start_position"] = json!("current");
        let spec = PipelineSpec::from_json(v).unwrap().validate().unwrap();
        assert_eq!(spec.start, StartAt::Current);
    }

    #[test]
    fn xa_mode_defaults_to_refuse_and_track_is_bounded() {
        let spec = PipelineSpec::from_json(good()).unwrap().validate().unwrap();
        assert_eq!(spec.xa, XaMode::Refuse);
        let mut v = good();
        v["xa"] = json!("track");
        let spec = PipelineSpec::from_json(v.clone())
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(
            spec.xa,
            XaMode::Track {
                max_prepared: 10_000
            }
        );
        v["max_prepared_transactions"] = json!(0);
        assert_eq!(err(v).field, "max_prepared_transactions");
    }

    #[test]
    fn exclude_lists_capture_everything_else() {
        let mut v = good();
        v["tables"] = json!({"exclude": ["shop.audit"]});
        let spec = PipelineSpec::from_json(v).unwrap().validate().unwrap();
        assert!(!spec.tables.admits(&TableId::new("shop", "audit")));
        assert!(spec.tables.admits(&TableId::new("x", "y")));
    }

    #[test]
    fn numeric_and_variant_values_are_not_echoed() {
        let mut v = good();
        v["source"]["password"] = json!(918273645);
        let e = err(v);
        assert_eq!(e.field, "source.password");
        assert!(!e.to_string().contains("918273645"), "{e}");
        let mut v = good();
        v["source"]["tls"]["mode"] = json!("hunter2-secret");
        let e = err(v);
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn capture_controls_are_checked_with_the_definition() {
        // a template without {table} needs routes that cover the captured tables
        let mut v = good();
        v["kafka"]["topic_template"] = json!("{prefix}.{db}");
        assert_eq!(err(v.clone()).field, "kafka.topic_template");
        v["routes"] = json!([{"tables": ["shop.orders"], "topic": "{prefix}.merged"}]);
        assert_eq!(err(v.clone()).field, "kafka.topic_template");
        v["routes"] =
            json!([{"tables": ["shop.orders", "shop.items"], "topic": "{prefix}.merged"}]);
        let spec = PipelineSpec::from_json(v).unwrap().validate().unwrap();
        let topics = &spec.sink.record_options.topics;
        assert_eq!(
            topics.destination(&TableId::new("shop", "items")),
            Ok(("shop.merged".to_string(), true))
        );
        // columns: checked into the source config; a bad pattern names its index
        let mut v = good();
        v["columns"] = json!({"exclude": ["shop.orders.note"], "mask": [{"chars": 4, "columns": ["shop.orders.card"]}]});
        let spec = PipelineSpec::from_json(v.clone())
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(spec.source.columns.exclude.len(), 1);
        assert_eq!(spec.source.columns.mask[0].chars, 4);
        v["columns"]["exclude"] = json!(["a.b.c", "a.b.d", {"regex": "x("}]);
        let e = err(v);
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            (
                "columns.exclude[2]",
                "invalid pattern (not a valid regular expression)"
            )
        );
        let mut v = good();
        v["tables"] = json!({"include": ["shop.a", "shop.b", {"regex": "shop\\.("}]});
        assert_eq!(err(v).field, "tables.include[2]");
    }

    #[test]
    fn serde_values_are_redacted_from_messages() {
        assert_eq!(
            redact_serde_message(r#"invalid value: string "hunter2", expected u16"#),
            "invalid value: string <redacted>, expected u16"
        );
    }
}
