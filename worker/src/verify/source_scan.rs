//! The source side of `capstan verify`: a table read in key order through the product's own
//! snapshot reader, each row encoded by the product's own record builder exactly as a
//! snapshot would publish it, and kept as digests ([`ExpectedRows`]).

use std::borrow::Cow;

use capstan_connectors::mysql::snapshot::{KeyPart, SnapshotError, SnapshotReader, SnapshotTable};
use capstan_kafka::record::{
    BinlogCoordinates, RecordBuilder, RecordContext, RegistrySchema, SnapshotChunk,
};
use tracing::info;

use super::expected_rows::ExpectedRows;
use super::record_form::RecordForm;
use super::verify_error::VerifyError;

/// Reads a source for verify.
#[derive(Debug)]
pub struct SourceScan<'a> {
    /// The reader, open on the source.
    pub reader: &'a mut SnapshotReader,
    /// `host:port`, for errors.
    pub server: &'a str,
    /// The pipeline's record builder (no size limit: every row is compared).
    pub builder: &'a RecordBuilder,
    /// The pipeline's name.
    pub pipeline: &'a str,
    /// Rows per read.
    pub chunk_size: u32,
    /// How the built records read back as JSON (the pipeline's format).
    pub form: &'a mut RecordForm,
}

impl SourceScan<'_> {
    fn source_error(&self, error: SnapshotError) -> VerifyError {
        VerifyError::Source {
            server: self.server.to_string(),
            error: Box::new(error),
        }
    }

    /// A key or value the builder made, read back as JSON by the pipeline's format.
    fn read_back<'b>(
        &mut self,
        table: &str,
        bytes: Option<&'b [u8]>,
        schema: Option<&RegistrySchema>,
    ) -> Result<Option<Cow<'b, [u8]>>, VerifyError> {
        let Some(bytes) = bytes else { return Ok(None) };
        self.form
            .built_json(bytes, schema)
            .map(Some)
            .ok_or_else(|| VerifyError::SourceRecord {
                table: table.to_string(),
                reason: "a record built from a source row could not be read back",
            })
    }

    /// The names of the columns that identify a row of `table` without a record key: its
    /// primary key, or the unique key it is read by.
    pub fn key_columns(table: &SnapshotTable) -> Vec<String> {
        table.key.columns.iter().map(|c| c.name.clone()).collect()
    }

    /// Every row of `table`, as the digests of its records.
    pub async fn expected(&mut self, table: &SnapshotTable) -> Result<ExpectedRows, VerifyError> {
        let name = table.id.to_string();
        let key_columns = Self::key_columns(table);
        // record keys as a snapshot gives them: the primary key, else the unique key the
        // table is read by (runner_deliver does the same)
        let record_key: Vec<usize> = table.key.columns.iter().map(|c| c.position).collect();
        let ctx = RecordContext {
            pipeline: self.pipeline,
            epoch: 0,
            now_ms: 0,
        };
        let mut expected = ExpectedRows::default();
        let mut after: Option<Vec<KeyPart>> = None;
        loop {
            let chunk = self
                .reader
                .read_chunk(table, after.as_deref(), self.chunk_size)
                .await
                .map_err(|e| self.source_error(e))?;
            let spec = SnapshotChunk {
                table: &table.id,
                key: &record_key,
                rows: &chunk.rows,
                types: Some(&table.types),
                chunk_id: "verify",
                coordinates: BinlogCoordinates {
                    server_id: 0,
                    file: "",
                    pos: 0,
                },
                first_of_table: false,
                first_of_snapshot: false,
                last_of_table: chunk.last,
                last_of_snapshot: false,
                incremental: false,
            };
            let records = self
                .builder
                .snapshot_records(&spec, &ctx)
                .map_err(|error| VerifyError::Encode {
                    table: name.clone(),
                    error: Box::new(error),
                })?;
            for r in &records {
                let schemas = r.registry.as_ref();
                let key = self.read_back(
                    &name,
                    r.key.as_deref(),
                    schemas.and_then(|s| s.key.as_deref()),
                )?;
                let value = self.read_back(
                    &name,
                    r.value.as_deref(),
                    schemas.and_then(|s| s.value.as_deref()),
                )?;
                expected.add(&name, key.as_deref(), value.as_deref(), &key_columns)?;
            }
            let last_row = chunk.rows.last();
            match last_row {
                Some(row) if !chunk.last => {
                    after = Some(table.key.key_of(row).map_err(|e| self.source_error(e))?);
                }
                _ => break,
            }
        }
        info!(table = %name, rows = expected.len(), "verify: source table read");
        Ok(expected)
    }
}
