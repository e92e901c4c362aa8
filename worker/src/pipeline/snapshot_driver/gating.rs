//! [`SnapshotDriver`]'s gating of the stream: the collation weights of string keys, and the
//! cursor gate's verdict on each streamed row change.

use std::collections::{HashMap, HashSet};

use capstan_connectors::mysql::snapshot::KeyPart;
use capstan_connectors::mysql::AssemblerOutput;
use capstan_core::change::{Change, Op, Row, SchemaChange, Transaction};
use capstan_core::snapshot::{RowKeys, SnapshotKey};

use super::super::snapshot_plan::ad_hoc_verdict;
use super::super::table_run::{encode_cached, fetch_weights, Halt};
use super::super::weight_cache::Column;
use super::SnapshotDriver;

impl SnapshotDriver {
    /// Asks the server for the collation weights of every string key in `outputs` of a
    /// gated table that is not cached yet (one round trip per key column). Every one of them
    /// is cached afterwards, whatever the cache's budget: [`Self::gate`] then gates these
    /// outputs from the cache alone.
    pub async fn resolve_weights<'o>(
        &mut self,
        outputs: impl IntoIterator<Item = &'o AssemblerOutput>,
    ) -> Result<(), Halt> {
        let mut needed: HashMap<Column, HashSet<Vec<u8>>> = HashMap::new();
        for output in outputs {
            let (AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx)) = output else {
                continue;
            };
            for change in &tx.changes {
                if !self.session.gate().is_gated(&change.table) {
                    continue;
                }
                let Some(run) = self.tables.get(&*change.table) else {
                    continue;
                };
                for row in [&change.before, &change.after].into_iter().flatten() {
                    let parts = run.table.key.key_of(row).map_err(|e| e.code())?;
                    for (i, part) in parts.into_iter().enumerate() {
                        if let KeyPart::Text(bytes) = part {
                            needed
                                .entry(((*change.table).clone(), i))
                                .or_default()
                                .insert(bytes);
                        }
                    }
                }
            }
        }
        // room is made once, for the whole batch, before any of it is fetched
        for ((table, index), values) in self.weights.missing(needed) {
            let run = self.tables.get(&table).ok_or("snapshot_table_not_found")?;
            let weights = fetch_weights(&mut self.reader, run, index, &values).await?;
            self.weights.insert((table, index), values, weights);
        }
        Ok(())
    }

    /// Gates one stream output: suppressed changes are removed (the transaction still
    /// advances the position), key-changing updates may be cut to one half. A DDL statement
    /// on a table being snapshotted halts.
    pub fn gate(&mut self, output: AssemblerOutput) -> Result<AssemblerOutput, Halt> {
        match output {
            AssemblerOutput::Transaction(tx) => {
                self.gate_changes(tx).map(AssemblerOutput::Transaction)
            }
            // a slice is gated like a whole transaction: no chunk is read while one is open
            AssemblerOutput::Slice(tx) => self.gate_changes(tx).map(AssemblerOutput::Slice),
            AssemblerOutput::SchemaChange { ref change, .. } if self.touches_gated(change) => {
                Err("snapshot_schema_drifted")
            }
            other => Ok(other),
        }
    }

    /// Removes the suppressed changes of a transaction (or slice) and cuts key-changing
    /// updates where the gate says so.
    fn gate_changes(&mut self, mut tx: Transaction) -> Result<Transaction, Halt> {
        if !tx
            .changes
            .iter()
            .any(|c| self.session.gate().is_gated(&c.table))
        {
            return Ok(tx);
        }
        let changes = std::mem::take(&mut tx.changes);
        let mut kept = Vec::with_capacity(changes.len());
        for change in changes {
            if !self.session.gate().is_gated(&change.table) {
                kept.push(change);
                continue;
            }
            let verdict = self.verdict(&change)?;
            if verdict != capstan_core::snapshot::Verdict::Forward {
                self.suppressed += 1;
            }
            kept.extend(verdict.apply(change));
        }
        tx.changes = kept;
        Ok(tx)
    }

    fn touches_gated(&self, change: &SchemaChange) -> bool {
        let Some(schema) = change.schema.as_deref() else {
            return false;
        };
        self.session.tables().iter().any(|t| {
            self.session.gate().is_gated(t)
                && t.schema == schema
                && change.table.as_deref().is_none_or(|name| name == t.table)
        })
    }

    fn verdict(&self, change: &Change) -> Result<capstan_core::snapshot::Verdict, Halt> {
        let run = self
            .tables
            .get(&*change.table)
            .ok_or("snapshot_table_not_found")?;
        let key = |row: &Option<Row>| -> Result<SnapshotKey, Halt> {
            let row = row.as_ref().ok_or("snapshot_row_image_missing")?;
            let parts = run.table.key.key_of(row).map_err(|e| e.code())?;
            encode_cached(&self.weights, &change.table, &parts).ok_or("snapshot_pk_weight_failed")
        };
        let gate = self.session.gate();
        let (verdict, key_changed) = match change.op {
            Op::Insert => (
                gate.decide(&change.table, RowKeys::Insert(&key(&change.after)?)),
                false,
            ),
            Op::Delete => (
                gate.decide(&change.table, RowKeys::Delete(&key(&change.before)?)),
                false,
            ),
            Op::Update => {
                let (before, after) = (key(&change.before)?, key(&change.after)?);
                let verdict = gate.decide(
                    &change.table,
                    RowKeys::Update {
                        before: &before,
                        after: &after,
                    },
                );
                (verdict, before != after)
            }
        };
        Ok(if run.incremental {
            ad_hoc_verdict(verdict, change.op, key_changed)
        } else {
            verdict
        })
    }
}
