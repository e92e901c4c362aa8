//! The source side of `capstan verify`: a table read in key order through the product's own
//! snapshot reader, each row encoded by the product's own record builder exactly as a
//! snapshot would publish it, and kept as digests ([`ExpectedRows`]).

use capstan_connectors::mysql::snapshot::{KeyPart, SnapshotError, SnapshotReader, SnapshotTable};
use capstan_kafka::record::{BinlogCoordinates, RecordBuilder, RecordContext, SnapshotChunk};
use tracing::info;

use super::expected_rows::ExpectedRows;
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
}

impl SourceScan<'_> {
    fn source_error(&self, error: SnapshotError) -> VerifyError {
        VerifyError::Source {
            server: self.server.to_string(),
            error: Box::new(error),
        }
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
                expected.add(&name, r.key.as_deref(), r.value.as_deref(), &key_columns)?;
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
