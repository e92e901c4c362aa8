//! Helpers shared by the live source tests: a source config for a dev server, and readers
//! that wait for this test's own transactions in a stream shared with parallel tests.

#![allow(dead_code)]

use std::time::Duration;

use capstan_connectors::mysql::{
    AssemblerConfig, AssemblerOutput, BinlogSource, Password, SourceConfig, SourceError,
    StartPosition, TableFilter, TlsConfig, TlsMode, ValidSourceConfig,
};
use capstan_core::change::{SchemaChange, Transaction};
use capstan_tests::DbEnv;

/// How long a test waits for its own output before failing.
pub const WAIT: Duration = Duration::from_secs(60);

/// A server id unique to this process and call (MySQL drops a dump whose server id a newer
/// dump reuses, so parallel tests must not share one).
pub fn unique_server_id() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    1_000_000 + (std::process::id() % 20_000) * 100 + n % 100
}

/// A TLS `verify_none` config for `db` as the capstan account, with short liveness timers.
pub fn raw_config(db: &DbEnv) -> SourceConfig {
    let mut c = SourceConfig::new(db.host.clone(), db.port, db.user.clone());
    c.password = Password::new(db.password.clone());
    c.server_id = Some(unique_server_id());
    c.tls = Some(TlsConfig {
        mode: Some(TlsMode::VerifyNone),
        ca_file: None,
    });
    c.heartbeat_period_ms = 1_000;
    c.stream_timeout_ms = 5_000;
    c.reconnect_backoff_ms = 200;
    c.max_reconnects = 20;
    c
}

/// [`raw_config`], validated.
pub fn config(db: &DbEnv) -> ValidSourceConfig {
    raw_config(db).validate().unwrap()
}

/// An assembler capturing only `tables` of `schema`.
pub fn only(schema: &str, tables: &[&str]) -> AssemblerConfig {
    AssemblerConfig {
        filter: TableFilter::only(tables.iter().map(|t| (schema.to_string(), t.to_string()))),
        ..AssemblerConfig::default()
    }
}

/// A source from the server's current position.
pub async fn start_current(db: &DbEnv, assembler: AssemblerConfig) -> BinlogSource {
    BinlogSource::start(config(db), StartPosition::Current, assembler)
        .await
        .unwrap_or_else(|e| panic!("start {}: {e}", db.name))
}

/// The next output, or a failure after [`WAIT`].
pub async fn next(source: &mut BinlogSource) -> Result<AssemblerOutput, SourceError> {
    tokio::time::timeout(WAIT, source.next())
        .await
        .expect("no output within the wait")
}

/// The next transaction with a change in `schema` (skipping everything else).
pub async fn next_txn(source: &mut BinlogSource, schema: &str) -> Transaction {
    loop {
        match next(source).await.unwrap() {
            AssemblerOutput::Transaction(t)
                if t.changes.iter().any(|c| c.table.schema == schema) =>
            {
                return t
            }
            _ => continue,
        }
    }
}

/// The next schema change naming `schema`.
pub async fn next_schema_change(source: &mut BinlogSource, schema: &str) -> SchemaChange {
    loop {
        if let AssemblerOutput::SchemaChange { change, .. } = next(source).await.unwrap() {
            if change.schema.as_deref() == Some(schema) {
                return change;
            }
        }
    }
}

/// The halt the source stops with, skipping outputs before it.
pub async fn halt(source: &mut BinlogSource) -> SourceError {
    loop {
        if let Err(e) = next(source).await {
            return e;
        }
    }
}
